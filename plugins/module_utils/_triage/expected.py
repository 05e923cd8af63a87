# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""The nodes the triage expects: {name: {"internal_ip": address or None}}, from one of three sources.

- ``kube_state_metrics``: ``kube_node_info{node,internal_ip}`` at the evaluation time (one query, ``max by
  (node, internal_ip)``; kube-state-metrics' docs/metrics/cluster/node-metrics.md), with ``up`` of
  kube-state-metrics' own targets in the same answer: one down (a shard, a replica) is an error;
- ``kubernetes``: the API server's Node list (``status.addresses`` type ``InternalIP``);
- ``list``: names given by the user (no address: the inventory's ``ansible_host`` is left unset).

A source that cannot answer, answers in part (warnings) or names no node is an error: an empty
fleet is never a clean one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import observe as triage_observe

SOURCES = ("kube_state_metrics", "kubernetes", "list")
DEFAULT_KSM_JOB = "kube-state-metrics|.*kube-state-metrics.*"


def ksm_query(conf):
    """kube_node_info with only the two labels read, replicas of kube-state-metrics (or of Prometheus) merged
    (kube_node_info carries a dozen labels a node the triage does not need to download and parse) - and, in the same
    answer, ``up`` of kube-state-metrics' own targets (every shard and replica): a target down means a Node list that
    may miss nodes. Both scoped by ``selector``."""
    selector = conf.get("selector") or ""
    return "max by (node, internal_ip) (kube_node_info%s) or up{job=~%s%s}" % (
        "{%s}" % selector if selector else "", triage_observe.promql_string(conf["kube_state_metrics_job"]),
        "," + selector if selector else "")


def from_list(nodes):
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n.strip() for n in nodes):
        raise NodefixError("nodes must be a list of node names (expected_nodes=list)")
    return dict((n.strip(), {"internal_ip": None}) for n in nodes)


def from_kube_state_metrics(client, at, conf):
    """kube_node_info at ``at``; replicas of kube-state-metrics (or of Prometheus) collapse by node. NodefixError when
    kube-state-metrics' own targets are not all up (a shard or a replica down: its nodes would be missing - orphans,
    the fleet smaller than it is) or none is scraped at all (``kube_state_metrics_job``)."""
    result, warnings = client.query(ksm_query(conf), at)
    if warnings:
        raise NodefixError("Prometheus at %s answered kube_node_info in part (warnings: %s): the fleet cannot be "
                           "known" % (client.where, "; ".join(warnings)[:300]))
    out, targets = {}, {}
    for sample in result:
        labels = sample["metric"]
        if labels.get("__name__") == "up":  # kube-state-metrics' own targets
            key = labels.get("instance") or labels.get("job") or "?"
            value = prometheus_client.sample_value(sample)
            targets[key] = value if key not in targets else max(value, targets[key])  # replicas of Prometheus
            continue
        name = labels.get("node")
        if name:
            ip = labels.get("internal_ip") or out.get(name, {}).get("internal_ip")
            out[name] = {"internal_ip": ip or None}
    if not targets:
        raise NodefixError("Prometheus at %s has no up of kube-state-metrics (job =~ %r%s): its Node list cannot be "
                           "known complete - set kube_state_metrics_job to its scrape job" % (
                               client.where, conf["kube_state_metrics_job"],
                               ", selector %s" % conf["selector"] if conf.get("selector") else ""))
    down = sorted(k for k, v in targets.items() if v != 1)
    if down:
        raise NodefixError("kube-state-metrics target(s) %s are down at Prometheus %s: a shard or replica down drops its "
                           "nodes from kube_node_info, so the fleet cannot be known - nothing is triaged against a part "
                           "of it" % (", ".join(down[:10]), client.where))
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


def expected_nodes(source, client, at, nodes=None, kubeconfig=None, context=None, conf=None):
    """The expected nodes from ``source``; NodefixError when it names none."""
    if source not in SOURCES:
        raise NodefixError("expected_nodes %r is not one of %s" % (source, ", ".join(SOURCES)))
    if source == "list":
        out = from_list(nodes)
    elif nodes:
        raise NodefixError("nodes is only for expected_nodes=list (expected_nodes is %s)" % source)
    elif source == "kube_state_metrics":
        out = from_kube_state_metrics(client, at, conf or {"kube_state_metrics_job": DEFAULT_KSM_JOB})
    else:
        out = from_kubernetes(kubeconfig, context)
    if not out:
        raise NodefixError("expected_nodes=%s named no node%s: an empty fleet is never a clean one"
                           % (source, " (is kube-state-metrics scraped by %s?)" % client.where
                              if source == "kube_state_metrics" else ""))
    return out
