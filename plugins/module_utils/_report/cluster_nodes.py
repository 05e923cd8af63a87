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

The listing has a deadline (seconds, for the connection and for each read, no retry) and any
failure - no ``kubernetes`` library, a kubeconfig that cannot be loaded, refused, DNS, TLS, a
timeout, a 4xx/5xx - is one NodefixError saying why: the caller reports "could not count" (the
breaker then holds a rollout that would disrupt a node: see _report.storm).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

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


def kube_modules(timeout):
    """(client, config) of the official Python client (a kubernetes.core requirement already), once ``timeout``
    (seconds a request may take) is checked; NodefixError naming the problem otherwise."""
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise NodefixError("the API timeout must be a whole number of seconds, at least 1, got %r" % (timeout,))
    try:
        from kubernetes import client, config  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise NodefixError("the Python kubernetes client is not installed on the controller (pip install kubernetes, "
                           "as kubernetes.core needs): %s" % exc)
    return client, config


def new_api_client(modules, kubeconfig, context=None):
    """An ApiClient of ``kubeconfig`` (its ``context``) that never retries (urllib3 would retry a refused or
    timed-out request 3 times: a hung server costs one timeout). ``modules``: kube_modules' answer. Raises what
    the client raises (config, YAML, file errors): the caller says what it was doing."""
    client, config = modules
    conf = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=conf)
    conf.retries = False
    return client.ApiClient(conf)


def list_nodes(kubeconfig, selector=None, timeout=30, context=None):
    """Every Node (those ``selector`` picks) as dicts, through the official Python client, each request bounded
    by ``timeout`` seconds and never retried. NodefixError on any failure, saying what failed."""
    modules = kube_modules(timeout)
    try:
        core = modules[0].CoreV1Api(new_api_client(modules, kubeconfig, context))
        items, token = [], None
        while True:
            kwargs = dict(limit=PAGE, _request_timeout=timeout, _preload_content=False)
            if selector:
                kwargs["label_selector"] = selector
            if token:
                kwargs["_continue"] = token
            page = _json(core.list_node(**kwargs))
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
    # the client raises many kinds: its ApiException, urllib3's timeouts and connection errors, config/YAML errors
    except Exception as exc:  # pylint: disable=broad-except
        raise NodefixError("listing the Nodes%s through %s failed: %s" % (
            " selected by %r" % selector if selector else "", kubeconfig, _why(exc)))


def _json(response):
    import json  # pylint: disable=import-outside-toplevel
    try:
        body = json.loads(response.data.decode("utf-8"))
    finally:
        response.release_conn()
    if not isinstance(body, dict):
        raise NodefixError("the Node list is not a JSON object")
    return body


def _why(exc):
    status = getattr(exc, "status", None)
    if status:
        body = (getattr(exc, "body", "") or getattr(exc, "reason", "") or "")
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        return "the API server answered %s %s" % (status, str(body)[:300])
    text = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
    return "%s: %s" % (type(exc).__name__, text[:300])
