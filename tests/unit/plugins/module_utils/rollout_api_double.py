# SPDX-License-Identifier: GPL-3.0-or-later
"""A TEST DOUBLE of ``_k8s.rollout_api.RolloutApi`` for the rollout machine's unit tests: the Nodes, pods, Leases
and evictions in memory, honouring the API server's contract as the machine meets it -

- every write of a Node bumps its ``resourceVersion``; a PATCH given a stale one is a 409 Conflict and changes
  nothing; a merge patch's null removes an annotation; a missing Node is a 404 (``get_node`` answers None);
- a Lease create on an existing name is a 409 (False), a replace with a stale resourceVersion too; a delete whose
  resourceVersion precondition fails is a 409 KubeError, of a missing Lease a 404 (ignored, as ``KubeApi`` does);
- an eviction of a pod whose budget allows no disruption is a 429 with ``retryAfterSeconds`` (``refuse``: how many
  times, or always), of a missing pod a 404, with a UID that is not the pod's a 409; a ``stuck`` pod is accepted
  and stays Terminating.

It records every request (``calls``) and every write (``writes``). ``kill_at=k`` raises ``Killed`` (a
BaseException, as SIGKILL is nothing the code can catch) right after the k-th write was applied: the state it
leaves is what a run killed there leaves on the cluster."""

import copy

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from plugins.modules.test_reboot_gate import Clock as GateClock


class Killed(BaseException):
    """The run was SIGKILLed here."""


class Clock(GateClock):
    """The injected clock of the reboot gate's tests: ``now()`` and ``sleep(seconds)`` that moves it (no test
    waits); from 2026-12-06 07:00 UTC, a Sunday."""

    def __init__(self, start="2026-12-06 07:00"):
        super(Clock, self).__init__(start)


def node(name="node-a", unschedulable=False, labels=None, ready="True", boot="boot-1", **notes):
    return {"kind": "Node", "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(notes)},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": ready}], "nodeInfo": {"bootID": boot}}}


def pod(name, node_name="node-a", namespace="default", owner="ReplicaSet", labels=None, **extra):
    out = {"metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name, "labels": dict(labels or {}),
                        "ownerReferences": [{"kind": owner, "name": name + "-owner"}]},
           "spec": {"nodeName": node_name}, "status": {"phase": "Running"}}
    out.update(extra)
    return out


def etcd_pod(node_name, ready="True"):
    """kubeadm's etcd member: a static pod, so its API object is a mirror pod (a drain does not evict it)."""
    return {"metadata": {"name": "etcd-" + node_name, "namespace": "kube-system", "labels": {"component": "etcd"},
                         "annotations": {"kubernetes.io/config.mirror": "hash"},
                         "ownerReferences": [{"kind": "Node", "name": node_name}]},
            "spec": {"nodeName": node_name},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}}


def _selected(labels, selector):
    if not selector:
        return True
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in selector.split(",")))


class ApiDouble(object):
    """Nodes {name: Node}, pods [pod], Leases {(namespace, name): Lease}; ``refuse`` {pod name: times or None
    (always)}, ``retry_after`` the 429's retryAfterSeconds; ``fail`` {method name: KubeError}; ``answers`` {pod name:
    (status, retry_after, message)} an eviction's scripted answer (a 500: the API server's error); ``budgets``: the
    time left each eviction was given."""

    def __init__(self, nodes, pods=(), refuse=None, retry_after=3, stuck=(), fail=None, kill_at=None, answers=None):
        self.nodes = dict((n["metadata"]["name"], copy.deepcopy(n)) for n in nodes)
        for n in self.nodes.values():
            n["metadata"].setdefault("resourceVersion", "1")
        self.pods = [copy.deepcopy(p) for p in pods]
        self.leases, self.refuse, self.retry_after = {}, dict(refuse or {}), retry_after
        self.stuck, self.fail, self.kill_at = set(stuck), dict(fail or {}), kill_at
        self.calls, self.writes, self.version = [], [], 100
        self.answers, self.budgets = dict(answers or {}), []

    def _call(self, what, *args):
        self.calls.append((what,) + args)
        if what in self.fail:
            raise self.fail[what]

    def _wrote(self, what, *args):
        self.writes.append((what,) + args)
        if self.kill_at is not None and len(self.writes) >= self.kill_at:
            self.kill_at = None
            raise Killed("killed after write %d (%s)" % (len(self.writes), what))

    def _bump(self):
        self.version += 1
        return str(self.version)

    # Nodes
    def get_node(self, name):
        self._call("get_node", name)
        return copy.deepcopy(self.nodes.get(name))

    def list_nodes(self, selector=None):
        self._call("list_nodes", selector)
        return copy.deepcopy([n for n in self.nodes.values() if _selected(n["metadata"].get("labels") or {}, selector)])

    def patch_node(self, name, body, resource_version=None):
        self._call("patch_node", name, copy.deepcopy(body), resource_version)
        if name not in self.nodes:
            raise kube.KubeError("patching Node %s" % name, 404, "NotFound", "nodes %r not found" % name)
        current = self.nodes[name]
        if resource_version is not None and str(resource_version) != current["metadata"]["resourceVersion"]:
            raise kube.KubeError("patching Node %s" % name, 409, "Conflict", "the object has been modified")
        notes = current["metadata"].setdefault("annotations", {})
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            if value is None:
                notes.pop(key, None)
            else:
                notes[key] = value
        current.setdefault("spec", {}).update(body.get("spec") or {})
        current["metadata"]["resourceVersion"] = self._bump()
        answer = copy.deepcopy(current)
        self._wrote("patch_node", name, copy.deepcopy(body))
        return answer

    # pods
    def list_pods(self, name, selector=None):
        self._call("list_pods", name, selector)
        return copy.deepcopy([p for p in self.pods if p["spec"]["nodeName"] == name
                              and _selected(p["metadata"].get("labels") or {}, selector)])

    def list_namespaced_pods(self, namespace, selector):
        self._call("list_namespaced_pods", namespace, selector)
        return copy.deepcopy([p for p in self.pods if p["metadata"]["namespace"] == namespace
                              and _selected(p["metadata"].get("labels") or {}, selector)])

    def list_budgets(self):
        self._call("list_budgets")
        return []

    def readyz(self, check):
        self._call("readyz", check)
        return 200, "ok"

    def evict(self, namespace, name, uid=None, budget=None):
        self._call("evict", namespace, name, uid)
        self.budgets.append(budget)
        if name in self.answers:
            return self.answers[name]
        found = [p for p in self.pods if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name]
        if not found:
            return 404, None, 'pods "%s" not found' % name
        if uid and found[0]["metadata"]["uid"] != uid:
            return 409, None, "Precondition failed: UID in precondition: %s, UID in object meta: %s" % (
                uid, found[0]["metadata"]["uid"])
        if name in self.refuse and self.refuse[name] != 0:
            if self.refuse[name] is not None:
                self.refuse[name] -= 1
            return 429, self.retry_after, "Cannot evict pod as it would violate the pod's disruption budget."
        if name in self.stuck:
            found[0]["metadata"]["deletionTimestamp"] = "2026-12-06T07:00:00Z"
        else:
            self.pods.remove(found[0])
        self._wrote("evict", namespace, name)
        return 201, None, ""

    # Leases
    def get_lease(self, namespace, name):
        self._call("get_lease", namespace, name)
        return copy.deepcopy(self.leases.get((namespace, name)))

    def create_lease(self, namespace, body):
        name = body["metadata"]["name"]
        self._call("create_lease", namespace, name)
        if (namespace, name) in self.leases:
            return False
        return self._store("create_lease", namespace, name, body)

    def _store(self, what, namespace, name, body):
        lease = copy.deepcopy(body)
        lease["metadata"]["resourceVersion"] = self._bump()
        self.leases[(namespace, name)] = lease
        self._wrote(what, namespace, name)
        return True

    def replace_lease(self, namespace, name, body):
        self._call("replace_lease", namespace, name)
        have = self.leases.get((namespace, name))
        if have is None or have["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            return False
        return self._store("replace_lease", namespace, name, body)

    def delete_lease(self, namespace, name, resource_version):
        self._call("delete_lease", namespace, name, resource_version)
        have = self.leases.get((namespace, name))
        if have is None:
            return
        if resource_version is not None and have["metadata"]["resourceVersion"] != resource_version:
            raise kube.KubeError("releasing Lease %s/%s" % (namespace, name), 409, "Conflict", "precondition failed")
        del self.leases[(namespace, name)]
        self._wrote("delete_lease", namespace, name)

    # what the tests read
    def notes(self, name="node-a"):
        return self.nodes[name]["metadata"].get("annotations") or {}

    def cordoned(self, name="node-a"):
        return bool(self.nodes[name].get("spec", {}).get("unschedulable"))

    def held_leases(self, holder="node-a"):
        return sorted("%s/%s" % k for k, v in self.leases.items() if v["spec"].get("holderIdentity") == holder)
