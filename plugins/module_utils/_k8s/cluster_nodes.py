# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The storm breaker's view of the cluster: every Node the API server lists (or those a label
selector picks, the targets' node pool) and which of them are unavailable now.

A Node is unavailable when its ``Ready`` condition is ``False`` (NotReady), ``Unknown`` (the node
lifecycle controller lost contact with its kubelet) or missing, or when it is cordoned
(``spec.unschedulable``, whoever set it): it takes no new pods, so draining another node moves its
pods onto fewer nodes still. The same conditions Cluster API's MachineHealthCheck and medik8s' Node
Healthcheck count as unhealthy by default (``unhealthyConditions`` Ready False / Unknown), over the
nodes their ``selector`` picks.

The listing goes through the one API client (_k8s.client: a deadline for the connection and each read, its retry policy) and any
failure - no ``kubernetes`` library, a kubeconfig that cannot be loaded, refused, DNS, TLS, a
timeout, a 4xx/5xx - is one NodefixError saying why: the caller reports "could not count" (the
breaker then holds a rollout that would disrupt a node: see _rollout.storm).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube

NOT_READY = "NotReady"
UNKNOWN = "Ready Unknown"
NO_READY = "no Ready condition"
CORDONED = "cordoned"
# who cordoned it, when nodefix did (the crash-safe cordon's annotations): still unavailable, said so
CORDONED_BY_NODEFIX = "cordoned by an earlier nodefix run (nodefix.k8s/cordoned-by)"
HELD_BY_NODEFIX = "held cordoned by nodefix, not verified (nodefix.k8s/held)"
# the page size of the Node list (the API server's own default has no limit; big clusters page)
PAGE = 500


def reasons(node):
    """Why ``node`` (a Node as the API serves it, a dict) is unavailable: [] when Ready and schedulable."""
    out = []
    conditions = ((node.get("status") or {}).get("conditions")) or []
    ready = [c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"]
    state = ready[0].get("status") if ready else None
    if state is None:
        out.append(NO_READY)
    elif state == "False":
        out.append(NOT_READY)
    elif state != "True":
        out.append(UNKNOWN)
    if (node.get("spec") or {}).get("unschedulable"):
        notes = (node.get("metadata") or {}).get("annotations") or {}
        out.append(HELD_BY_NODEFIX if "nodefix.k8s/held" in notes else
                   CORDONED_BY_NODEFIX if "nodefix.k8s/cordoned-by" in notes else CORDONED)
    return out


def view(nodes, selector=None):
    """The storm record's ``cluster`` entry from the listed Nodes: {selector, error: None, nodes: {name: reasons}}."""
    listed = {}
    for node in nodes:
        name = ((node.get("metadata") or {}).get("name"))
        if not isinstance(name, str) or not name:
            raise NodefixError("the API server listed a Node without metadata.name")
        listed[name] = reasons(node)
    return {"selector": selector or None, "error": None, "nodes": listed}


def failed_view(selector, error):
    """The ``cluster`` entry when the Nodes could not be listed: nothing counted, and why."""
    return {"selector": selector or None, "error": str(error), "nodes": {}}


def list_nodes(kubeconfig, selector=None, timeout=30, context=None):
    """Every Node (those ``selector`` picks) as dicts, through the collection's one API client (``_k8s.client``:
    each request bounded by ``timeout`` seconds, its retry policy), paged. NodefixError on any failure, saying
    what failed."""
    what = "listing the Nodes%s through %s" % (" selected by %r" % selector if selector else "", kubeconfig)
    query = [("limit", PAGE)] + ([("labelSelector", selector)] if selector else [])
    try:
        return kube.Kube(kubeconfig, context, kube.whole_seconds(timeout)).items(what, "/api/v1/nodes", query)
    except kube.KubeError as exc:
        raise NodefixError("%s failed: %s" % (what, exc.msg[len(what) + 2:]))
    except kube.KubeConfigError as exc:
        raise NodefixError("%s failed: %s" % (what, exc))
