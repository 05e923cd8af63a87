# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""The nodes the triage expects: {name: {"internal_ip": address or None}}, from one of three sources.

- ``kube_state_metrics``: ``kube_node_info{node,internal_ip}`` at the evaluation time (one query, ``max by
  (node, internal_ip)``;
  kube-state-metrics' docs/metrics/cluster/node-metrics.md);
- ``kubernetes``: the API server's Node list (``status.addresses`` type ``InternalIP``);
- ``list``: names given by the user (no address: the inventory's ``ansible_host`` is left unset).

A source that cannot answer, answers in part (warnings) or names no node is an error: an empty
fleet is never a clean one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube_client

SOURCES = ("kube_state_metrics", "kubernetes", "list")
# only the two labels read, replicas of kube-state-metrics (or of Prometheus) merged: kube_node_info carries a dozen
# labels a node (kernel, OS, runtime versions...) the triage does not need to download and parse
KSM_QUERY = "max by (node, internal_ip) (kube_node_info)"


def from_list(nodes):
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n.strip() for n in nodes):
        raise NodefixError("nodes must be a list of node names (expected_nodes=list)")
    return dict((n.strip(), {"internal_ip": None}) for n in nodes)


def from_kube_state_metrics(client, at):
    """kube_node_info at ``at``; replicas of kube-state-metrics (or of Prometheus) collapse by node."""
    result, warnings = client.query(KSM_QUERY, at)
    if warnings:
        raise NodefixError("Prometheus at %s answered kube_node_info in part (warnings: %s): the fleet cannot be "
                           "known" % (client.where, "; ".join(warnings)[:300]))
    out = {}
    for sample in result:
        labels = sample["metric"]
        name = labels.get("node")
        if name:
            ip = labels.get("internal_ip") or out.get(name, {}).get("internal_ip")
            out[name] = {"internal_ip": ip or None}
    return out


def from_node_objects(items):
    """{name: {internal_ip}} of Node objects as the API server answers them (dicts)."""
    out = {}
    for node in items:
        name = ((node or {}).get("metadata") or {}).get("name")
        if not name:
            continue
        ips = [a.get("address") for a in ((node.get("status") or {}).get("addresses") or [])
               if isinstance(a, dict) and a.get("type") == "InternalIP" and a.get("address")]
        out[name] = {"internal_ip": ips[0] if ips else None}
    return out


def from_kubernetes(kubeconfig, context=None):
    """The API server's Node list (every page), through the collection's one Kubernetes client (``_k8s``);
    its KubeError / KubeConfigError (NodefixErrors) when the list cannot be had."""
    return from_node_objects(kube_client.Kube(kubeconfig, context).items("listing the Nodes", "/api/v1/nodes"))


def expected_nodes(source, client, at, nodes=None, kubeconfig=None, context=None):
    """The expected nodes from ``source``; NodefixError when it names none."""
    if source not in SOURCES:
        raise NodefixError("expected_nodes %r is not one of %s" % (source, ", ".join(SOURCES)))
    if source == "list":
        out = from_list(nodes)
    elif nodes:
        raise NodefixError("nodes is only for expected_nodes=list (expected_nodes is %s)" % source)
    elif source == "kube_state_metrics":
        out = from_kube_state_metrics(client, at)
    else:
        out = from_kubernetes(kubeconfig, context)
    if not out:
        raise NodefixError("expected_nodes=%s named no node%s: an empty fleet is never a clean one"
                           % (source, " (is kube-state-metrics scraped by %s?)" % client.where
                              if source == "kube_state_metrics" else ""))
    return out
