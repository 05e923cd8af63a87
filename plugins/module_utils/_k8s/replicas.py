# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Whether a pod's controller has every replica it wants Ready, read before ``_k8s.evictions`` evicts one of its
pods (``pod_recreate``, the gVisor role's opt-in eviction): the sibling check there sees only the pods that exist,
so a controller already short of a replica - one wholly missing (unschedulable, not created yet, just deleted) -
would pass it, and the eviction would take a second one down.

For a pod whose controller is a ReplicaSet or a StatefulSet (``apps``) or a ReplicationController (core ``v1``),
the controller object is read right before each of its pods would be evicted (``check``, over the collection's
one client ``_k8s.client.Kube``; an earlier read may be stale once a replacement came up or a replica went missing):
the pod may be evicted only when the object's ``metadata.uid`` is its ownerReference's uid (another object of that
name is not its controller) and every replica it wants but this pod is Ready - ``status.readyReplicas`` (absent: 0),
less this pod when it is Ready itself, at least ``spec.replicas`` (absent: 1, as the API server defaults it) less
one; a controller scaled to zero (``spec.replicas`` 0) holds the pod - nothing would recreate it. A ReplicaSet's
ownerReference of ``extensions/v1beta1`` (or ``apps/v1beta1``, ``apps/v1beta2``) is read at ``apps/v1``, the same
object. An answer that cannot be read - a 404, a 403, no answer, a shape that is not the
object's - holds the pod with what could not be read: never evicted on an unread answer. A controller of another
kind (a Job, a custom resource) is not read: its pod keeps the sibling check only, and its result says so.
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/replica-set-v1/
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/stateful-set-v1/
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/replication-controller-v1/
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube

# (the ownerReference's API group, its kind) -> (the API path of that group and version, the resource)
# (an ownerReference of an object created before apps/v1 may still say extensions/v1beta1 or apps/v1beta1/v1beta2:
# the same object, served at apps/v1 today)
READ = {("apps", "ReplicaSet"): ("/apis/apps/v1", "replicasets"),
        ("extensions", "ReplicaSet"): ("/apis/apps/v1", "replicasets"),
        ("apps", "StatefulSet"): ("/apis/apps/v1", "statefulsets"),
        ("", "ReplicationController"): ("/api/v1", "replicationcontrollers")}
SHORT = "its %s %s has %d of %d replicas ready: evicting this pod would take another one down"
SHORT_OTHERS = ("its %s %s has %d of %d replicas ready and this pod is not one of them: another replica is missing "
                "or not Ready")
UNREAD = "its %s %s could not be read (%s): never evicted without knowing its desired replicas"
SCALED_TO_ZERO = ("its %s %s is scaled to zero replicas (spec.replicas 0): nothing would recreate this pod once "
                  "evicted")
NOT_READ = ("the desired replicas of its %s %s were not read (they are for a ReplicaSet, StatefulSet or "
            "ReplicationController): only its other pods were checked")


def group(api_version):
    """The API group of an ownerReference's ``apiVersion`` (``apps/v1`` -> ``apps``, ``v1`` -> the core group "");
    None when it is no string."""
    if not isinstance(api_version, str):
        return None
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _count(obj, key, default, where):
    """``obj[key]``, a whole number of at least 0 (absent or null: ``default``); ValueError otherwise."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s%s is %.40r, not a count" % (where, key, value))
    return value


def counts(answer, uid):
    """(ready, desired) of a controller object as the API server answered it; ValueError (what cannot be read) for
    a shape that is not the object's or a uid that is not ``uid``."""
    if not isinstance(answer, dict):
        raise ValueError("the answer is a %s, not an object" % type(answer).__name__)
    parts = {}
    for key in ("metadata", "spec", "status"):
        parts[key] = answer.get(key) if answer.get(key) is not None else {}
        if not isinstance(parts[key], dict):
            raise ValueError("%s is a %s, not an object" % (key, type(parts[key]).__name__))
    found = parts["metadata"].get("uid")
    if not isinstance(found, str) or not found:
        raise ValueError("metadata.uid is %s" % ("missing" if found is None else repr(found)[:40]))
    if found != uid:
        raise ValueError("its uid is %s, not the pod's ownerReference's %s: another object of that name" % (found, uid))
    return _count(parts["status"], "readyReplicas", 0, "status."), _count(parts["spec"], "replicas", 1, "spec.")


def check(api, ns, ref, pod_ready=True):
    """(why the pod is held, None) when its controller ``ref`` (an owner reference: kind, name, uid, group) in
    namespace ``ns`` would not have every replica it wants but this pod Ready (``pod_ready``: whether this pod counts
    among the Ready ones), or cannot be read; (None, a note) for a kind that is not read; (None, None) when it may be
    evicted. One read through ``api`` (a ``_k8s.client.Kube``) each call: a verdict is never kept for the next pod of
    the same controller (its replacement came up, or another replica went missing, meanwhile)."""
    kind, name = ref["kind"], ref["name"]
    where = READ.get((ref.get("group"), kind))
    if where is None and ref.get("group") is None and kind in [k for _g, k in READ]:
        return UNREAD % (kind, name, "its ownerReference has no apiVersion: which API group is unknown"), None
    if where is None:
        return None, NOT_READ % (kind, name)
    base, resource = where
    if not ref["uid"]:
        return UNREAD % (kind, name, "its ownerReference has no uid to match it with"), None
    if not kube.object_name(name) or not kube.object_name(ns):
        return UNREAD % (kind, name, "%r in namespace %r is no name a URL can hold" % (name, ns)), None
    what = "reading %s %s/%s" % (kind, ns, name)
    path = "%s/namespaces/%s/%s/%s" % (base, kube.name(ns), resource, kube.name(name))
    try:
        answer = api.request(what, "GET", path, missing_ok=True)
    except kube.KubeError as exc:
        return UNREAD % (kind, name, kube.said(api, exc)), None
    if answer is None:
        return UNREAD % (kind, name, "404: no such %s in namespace %s" % (kind, ns)), None
    try:
        ready, desired = counts(answer, ref["uid"])
    except (ValueError, TypeError, AttributeError) as exc:
        return UNREAD % (kind, name, "%s" % exc), None
    if desired == 0:    # (its pods are being scaled down, or kept by another owner): no replacement comes
        return SCALED_TO_ZERO % (kind, name), None
    if ready - (1 if pod_ready else 0) < desired - 1:
        return (SHORT if pod_ready else SHORT_OTHERS) % (kind, name, ready, desired), None
    return None, None
