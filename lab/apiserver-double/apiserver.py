# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kube-apiserver TEST DOUBLE for cordon/drain/uncordon (no Debian package ships one).

Run on the controller:

    python3 lab/apiserver-double/apiserver.py --state STATE.json [--port 0] [--port-file F]

It serves plain HTTP on 127.0.0.1 the part of the Kubernetes v1 API that
``kubernetes.core.k8s_drain`` (through the official Python client) uses, in
the real server's JSON shapes:

- discovery: ``GET /version``, ``/api``, ``/api/v1``, ``/apis``;
- ``GET /api/v1/nodes/<name>``, ``PATCH`` of it (merge / strategic merge of
  ``spec.unschedulable``: cordon and uncordon);
- ``GET /api/v1/nodes`` (a ``NodeList``; ``labelSelector`` with ``k=v``, ``k==v``, ``k!=v``, ``k``
  and ``!k`` terms, anything else 400 ``BadRequest`` as the real server refuses a selector it cannot
  parse; ``limit``/``continue`` paging). A node's state may carry ``"ready": "True" | "False" |
  "Unknown" | null`` (its ``Ready`` condition's status; null: no Ready condition, as a node that never
  registered a kubelet) and ``"labels"``; every Node serves ``kubernetes.io/hostname``;
- ``GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`` (and
  ``/api/v1/namespaces/<ns>/pods``), ``GET`` of one pod;
- ``POST /api/v1/namespaces/<ns>/pods/<name>/eviction``: 201 and the pod is
  gone, or, for a pod marked ``"pdb": true``, 429 ``TooManyRequests`` with
  the disruption-budget cause, exactly as the eviction API refuses a pod
  whose PodDisruptionBudget allows no disruption; a ``deleteOptions``
  UID precondition that does not match is a 409 ``Conflict``; a pod marked
  ``"replace": true`` gets a replacement (its controller's work: same labels and owner,
  new name and UID, Ready) once evicted; a pod marked ``"stuck": true`` is
  accepted (201) but never leaves: it gets a ``deletionTimestamp`` and stays
  Terminating (a finalizer, a kubelet that never confirms);
- ``GET /apis/policy/v1/poddisruptionbudgets`` (and per namespace): a pod marked ``"pdb": true`` has one,
  ``<pod>-pdb``, selecting it (and its replacements) by the label ``nodefix.test/pdb-of``, minAvailable 1, its
  status as the disruption controller writes it (``currentHealthy``: its Ready pods; ``disruptionsAllowed``: those
  above one); the eviction follows it (429 while it allows none) but for pods the real API deletes without a
  budget check (Succeeded, Failed, Pending, terminating) and a not-Ready pod while the budget is healthy;
- ``labelSelector`` (equality terms ``k=v,k2=v2``) on pod lists;
- ``GET`` of a pod's controller - ``/apis/apps/v1/namespaces/<ns>/replicasets/<name>`` (and ``statefulsets``),
  ``/api/v1/namespaces/<ns>/replicationcontrollers/<name>`` - as its pods make it (a pod's ``owner`` of that kind,
  named its first pod's name up to the last ``-``, the uid of its ownerReferences): ``spec.replicas`` its pods not
  terminating (or the state's ``controllers`` ``{"<ns>/<kind>/<name>": {"replicas": N}}``: a replica missing
  wholly), ``status.readyReplicas`` those Running and Ready; 404 when no pod names it (the gVisor eviction reads it,
  ``_k8s.replicas``);
- ``DELETE`` of a pod (drain with ``disable_eviction``);
- ``GET``, ``PATCH`` (merge and strategic merge of ``data``) and ``PUT`` of
  ``/api/v1/namespaces/<ns>/configmaps/<name>`` and ``GET`` of the namespace's
  list (the kubeadm ``kube-system/kubelet-config`` ConfigMap); ``?dryRun=All``
  answers without changing anything, as the real server does; every ConfigMap keeps its own
  ``resourceVersion`` (bumped by every write of it), and a write that carries a stale
  ``metadata.resourceVersion`` is answered 409 ``Conflict`` and changes nothing;
- ``coordination.k8s.io/v1`` Leases (``/apis/coordination.k8s.io/v1/namespaces/<ns>/leases[/<name>]``):
  ``GET``, ``POST`` (409 ``AlreadyExists`` when the name is taken), ``PUT`` (409 ``Conflict`` when the
  body's ``metadata.resourceVersion`` is not the stored one: optimistic concurrency, as the real
  server does it) and ``DELETE`` (409 when a ``preconditions.resourceVersion`` does not match); every
  write is logged with its time and ``holder`` (the reboot lock's tests read who held a slot when).
- Events: ``POST /apis/events.k8s.io/v1/namespaces/<ns>/events`` (``metadata.generateName`` or ``name``;
  ``eventTime``, ``reportingController``, ``reportingInstance``, ``action``, ``reason`` and ``regarding``
  required, as the real server validates them: 422 ``Invalid`` otherwise), and the same objects read as
  ``kubectl get events`` reads them: ``GET /api/v1/namespaces/<ns>/events`` (core/v1: ``involvedObject``,
  ``message``, ``source.component``, ``reportingComponent``, ...; ``fieldSelector`` on
  ``involvedObject.name``/``involvedObject.kind``/``reason``) and ``GET`` of the events.k8s.io list.
- Node metadata: a ``PATCH`` of ``metadata.annotations`` (merge; a null value removes the key) is kept
  and served; only a patch that names ``spec.unschedulable`` cordons or uncordons. Every Node keeps its own
  ``resourceVersion`` (the state's ``rv``; one counter for every object, as etcd's revision), bumped by every
  write of it; a patch that carries ``metadata.resourceVersion`` is conditional on it: a stale one is answered
  409 ``Conflict`` and changes nothing, as the real server answers it.
- ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: allowed, unless the state's
  ``access_denials`` (``[{"verb": "create", "resource": "pods", "subresource": "eviction", "reason": ...}]``, or
  ``{"verb": "get", "path": "/readyz/etcd"}`` for a ``spec.nonResourceAttributes`` review; every key given must
  match the request's attributes) denies it; logged with its attributes.

Every object the collection sends is validated as the real server validates it (validation.py beside
this file, each rule citing its Kubernetes source): Events (namespace of a Node's Events, byte limits of
note/reason/action/reportingInstance, reportingController a qualified name, generateName, ...), Node
annotations (qualified keys, 256 KiB in all), Leases, ConfigMaps, evictions and SelfSubjectAccessReviews,
with the real server's 422 ``Invalid`` (``details.causes``, the real field paths) or 400 ``BadRequest``.

- The control-plane guard's reads (``control_plane_route``): ``GET /api/v1/nodes`` (a Node's state may carry
  ``labels``, e.g. ``node-role.kubernetes.io/control-plane``, and ``"ready": false`` for NotReady),
  kube-system's etcd pods (``labels: {component: etcd}``, ``"ready": false`` for a member not Ready),
  ``GET /readyz/etcd`` (``ok``, or 500 with the state's ``"readyz_etcd": false``) and ``PATCH`` of a pod's
  ``/status`` (its Ready condition: a member going down and coming back during a test) and of a Node's ``/status``
  (its Ready condition: a rebooted node coming back while ``node_ready`` waits).

Unknown objects get a 404 ``Status`` (reason ``NotFound``), unknown paths a
404 as well. State (a JSON file, rewritten after every change, so a test can
read it):

    {"nodes": {"node-a": {"unschedulable": false}},
     "pods": [{"namespace": "default", "name": "web-1", "node": "node-a",
               "owner": "ReplicaSet" | "DaemonSet" | null, "pdb": false,
               "emptydir": false, "mirror": false, "phase": "Running",
               "labels": {"app": "web"}, "replace": false, "stuck": false,
               "terminating": "<deletionTimestamp once a stuck pod was evicted>"}],
     "log": [{"method": "PATCH", "path": "/api/v1/nodes/node-a",
              "body": {"spec": {"unschedulable": true}}}, ...]}

``log`` records every mutating request in order. This is NOT an API
server: no authentication, no watch, no other resources.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# the rules the real server applies, each citing its source (validation.py beside this file)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validation  # noqa: E402  pylint: disable=wrong-import-position

LOCK = threading.Lock()
VERSION = {"major": "1", "minor": "29", "gitVersion": "v1.29.3", "gitCommit": "6813625b7cd706db5bc7388921be03071e1a492d",
           "gitTreeState": "clean", "buildDate": "2024-03-14T23:58:36Z", "goVersion": "go1.21.8", "compiler": "gc",
           "platform": "linux/amd64"}
RESOURCES = [
    {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["no"]},
    {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["po"]},
    {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
     "kind": "Eviction", "verbs": ["create"]},
    {"name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap",
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["cm"]},
    {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
     "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "shortNames": ["ev"]},
]
COORDINATION = "coordination.k8s.io"
AUTHORIZATION = "authorization.k8s.io"
SSAR_RESOURCES = [{"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": False,
                   "kind": "SelfSubjectAccessReview", "verbs": ["create"]}]
LEASES = [{"name": "leases", "singularName": "lease", "namespaced": True, "kind": "Lease",
           "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}]
BUDGETS = [{"name": "poddisruptionbudgets", "singularName": "poddisruptionbudget", "namespaced": True,
            "kind": "PodDisruptionBudget", "shortNames": ["pdb"],
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
           {"name": "poddisruptionbudgets/status", "singularName": "", "namespaced": True,
            "kind": "PodDisruptionBudget", "verbs": ["get", "patch", "update"]}]
# the controllers the double serves (``State.controller``), by resource
CONTROLLERS = {"replicasets": "ReplicaSet", "statefulsets": "StatefulSet", "replicationcontrollers": "ReplicationController"}
# the label the double puts on a pod marked "pdb": true, its budget's selector
PDB_LABEL = "nodefix.test/pdb-of"
GROUPS = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
    {"name": "policy", "versions": [{"groupVersion": "policy/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "policy/v1", "version": "v1"}},
    {"name": COORDINATION, "versions": [{"groupVersion": COORDINATION + "/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": COORDINATION + "/v1", "version": "v1"}},
    {"name": "events.k8s.io", "versions": [{"groupVersion": "events.k8s.io/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"}},
    {"name": AUTHORIZATION, "versions": [{"groupVersion": AUTHORIZATION + "/v1", "version": "v1"}],
     "preferredVersion": {"groupVersion": AUTHORIZATION + "/v1", "version": "v1"}}]}
EVENT_RESOURCES = [{"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                    "shortNames": ["ev"]}]


def kept_metadata(body):
    """The metadata a stored Lease keeps from a request body (the server sets the rest)."""
    return dict((k, v) for k, v in ((body or {}).get("metadata") or {}).items() if k in ("labels", "annotations"))


def control_plane_route(st, method, path, query, read_body):
    """The control-plane guard's reads, or None for any other request:

    - ``GET /readyz/etcd``: the API server's etcd check - ``ok`` (200), or 500 with the failed check as
      kube-apiserver prints it when the state has ``"readyz_etcd": false``;
    - ``PATCH /api/v1/namespaces/<ns>/pods/<name>/status`` (the kubelet's status update): a Ready
      condition in ``status.conditions`` sets the pod's readiness (etcd's static pods: ``component=etcd``);
    - ``PATCH /api/v1/nodes/<name>/status`` (the kubelet's node status update, a strategic merge of
      ``status.conditions`` by ``type``): a Ready condition sets the Node's Ready status (a node coming back after its
      reboot while a reader waits); the double keeps only the statuses the kubelet and the node lifecycle
      controller write (True, False, Unknown) and refuses any other with 422;
    - every list of pods selected by ``component=etcd`` is counted in the state's ``etcd_reads`` (a test
      waits for a look at etcd before it changes a member)."""
    if method == "GET" and path == "/readyz/etcd":
        if st.data.get("readyz_etcd", True):
            return 200, "ok"
        return 500, "[-]etcd failed: reason withheld\nreadyz check failed\n"
    m = re.match(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/status$", path)
    if m and method == "PATCH":
        p = st.find_pod(m.group(1), m.group(2))
        if p is None:
            return status(404, "NotFound", 'pods "%s" not found' % m.group(2))
        for cond in ((read_body() or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                p["ready"] = cond.get("status") == "True"
        st.data["log"].append({"method": "PATCH", "path": path, "ready": p.get("ready", True), "time": time.time()})
        st.save()
        return 200, st.pod(p)
    m = re.match(r"^/api/v1/nodes/([^/]+)/status$", path)
    if m and method == "PATCH":
        spec = st.data["nodes"].get(m.group(1))
        if spec is None:
            return status(404, "NotFound", 'nodes "%s" not found' % m.group(1), {"name": m.group(1), "kind": "nodes"})
        for cond in ((read_body() or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                if cond.get("status") not in READY:
                    return status(422, "Invalid", "the double keeps a Ready status of True, False or Unknown, not %r"
                                  % (cond.get("status"),))
                spec["ready"] = cond["status"]
        spec["rv"] = st.bump()
        st.data["log"].append({"method": "PATCH", "path": path, "ready": spec.get("ready", "True"), "time": time.time()})
        st.save()
        return 200, st.node(m.group(1))
    if method == "GET" and "component=etcd" in (query.get("labelSelector") or [""])[0]:
        st.data["etcd_reads"] = st.data.get("etcd_reads", 0) + 1
        st.save()
    return None


def status(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if details:
        body["details"] = details
    return code, body


# the Ready condition as the kubelet (True/False) and the node lifecycle controller (Unknown: no heartbeat
# within the grace period) set it - pkg/kubelet/nodestatus/setters.go, pkg/controller/nodelifecycle
READY = {"True": ("KubeletReady", "kubelet is posting ready status"),
         "False": ("KubeletNotReady", "container runtime network not ready: NetworkReady=false"),
         "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status.")}
# label selector terms the double understands (k8s.io/apimachinery/pkg/labels/selector.go has set-based ones too)
SELECTOR_TERM = re.compile(r"^(!?)([A-Za-z0-9][-A-Za-z0-9_./]*)(?:(==|=|!=)([-A-Za-z0-9_.]*))?$")


def node_conditions(spec):
    """A node's conditions from its state: Ready as ``spec["ready"]`` says (default True; null: none at all)."""
    ready = spec.get("ready", "True")
    if ready is None:
        return []
    if isinstance(ready, bool):  # "ready": false - a node that went down (the control-plane tests' spelling)
        ready = "True" if ready else "False"
    reason, message = READY[ready]
    return [{"type": "Ready", "status": ready, "reason": reason, "message": message}]


def label_match(selector, labels):
    """Whether ``labels`` match ``selector`` (equality and existence terms); None when it cannot be parsed."""
    for term in [t.strip() for t in (selector or "").split(",") if t.strip()]:
        m = SELECTOR_TERM.match(term)
        if not m or (m.group(1) and m.group(3)):
            return None
        neg, key, op, value = m.groups()
        if op is None:
            if (key in labels) == bool(neg):
                return False
        elif (labels.get(key) == value) != (op != "!="):
            return False
    return True


class State(object):
    def __init__(self, path):
        self.path = path
        with open(path) as fh:
            self.data = json.load(fh)
        self.data.setdefault("nodes", {})
        self.data.setdefault("pods", [])
        self.data.setdefault("log", [])
        self.data.setdefault("configmaps", {})
        self.data.setdefault("leases", {})
        self.data.setdefault("events", [])
        self.data.setdefault("version", 1)
        self.data.setdefault("configmap_rvs", {})
        # every Node and ConfigMap has its own resourceVersion, from the one counter every write bumps (etcd's revision)
        for spec in self.data["nodes"].values():
            if "rv" not in spec:
                spec["rv"] = self.bump()
        for key in sorted(self.data["configmaps"]):
            if key not in self.data["configmap_rvs"]:
                self.data["configmap_rvs"][key] = self.bump()
        for pod in self.data["pods"]:
            pod.setdefault("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, "%s/%s" % (pod["namespace"], pod["name"]))))
        self.save()

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=1, sort_keys=True)
        os.rename(tmp, self.path)

    def node(self, name):
        spec = self.data["nodes"].get(name)
        if spec is None:
            return None
        meta = {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "node/" + name)),
                "resourceVersion": str(spec.get("rv") or 1),
                "labels": dict(spec.get("labels") or {}, **{"kubernetes.io/hostname": name})}
        if spec.get("annotations"):
            meta["annotations"] = dict(spec["annotations"])
        return {"kind": "Node", "apiVersion": "v1",
                "metadata": meta,
                "spec": {"unschedulable": True} if spec.get("unschedulable") else {},
                "status": {"conditions": node_conditions(spec),
                           "nodeInfo": {"architecture": "amd64", "bootID": str(uuid.uuid5(uuid.NAMESPACE_URL, "boot/" + name)),
                                        "containerRuntimeVersion": "containerd://1.7.24",
                                        "kernelVersion": "6.1.0-28-amd64", "kubeProxyVersion": VERSION["gitVersion"],
                                        "kubeletVersion": VERSION["gitVersion"],
                                        "machineID": uuid.uuid5(uuid.NAMESPACE_URL, "machine/" + name).hex,
                                        "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
                                        "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, "system/" + name))}}}

    def pod(self, p):
        meta = {"name": p["name"], "namespace": p["namespace"], "uid": p["uid"], "labels": dict(p.get("labels") or {})}
        if p.get("pdb"):
            meta["labels"][PDB_LABEL] = p.get("pdb_of", p["name"])
        if p.get("owner"):
            # a replacement keeps the owner of the pod it replaces; one uid a controller (its namespace, kind, name)
            meta["ownerReferences"] = [{"apiVersion": "v1" if p["owner"] == "ReplicationController" else "apps/v1",
                                        "kind": p["owner"], "name": self.owner_name(p),
                                        "uid": self.owner_uid(p["namespace"], p["owner"], self.owner_name(p)),
                                        "controller": True, "blockOwnerDeletion": True}]
        if p.get("mirror"):
            meta["annotations"] = {"kubernetes.io/config.mirror": "mirror"}
        if p.get("terminating"):
            meta.update(deletionTimestamp=p["terminating"], deletionGracePeriodSeconds=30)
        spec = {"nodeName": p["node"], "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}
        if p.get("emptydir"):
            spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec,
                "status": {"phase": p.get("phase", "Running"),
                           "conditions": [{"type": "Ready", "status": "True" if p.get("ready", True) else "False"}]}}

    @staticmethod
    def owner_name(p):
        """The name of a pod's controller: its first pod's name up to the last ``-`` (a replacement's: the pod's it
        replaces)."""
        return p.get("owner_of", p["name"]).rsplit("-", 1)[0]

    @staticmethod
    def owner_uid(namespace, kind, name):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, "owner/%s/%s/%s" % (namespace, kind, name)))

    def controller(self, namespace, kind, name):
        """A ReplicaSet, StatefulSet or ReplicationController as its pods make it (see the docstring); None when no
        pod names it."""
        mine = [p for p in self.data["pods"]
                if p["namespace"] == namespace and p.get("owner") == kind and self.owner_name(p) == name]
        if not mine:
            return None
        live = [p for p in mine if not p.get("terminating")]
        wanted = ((self.data.get("controllers") or {}).get("%s/%s/%s" % (namespace, kind, name)) or {}).get(
            "replicas", len(live))
        ready = len([p for p in live if self._ready(p)])
        status_ = {"replicas": len(live), "observedGeneration": 1}
        if ready:   # (omitted when zero, as the real server's omitempty)
            status_["readyReplicas"] = ready
        return {"kind": kind, "apiVersion": "v1" if kind == "ReplicationController" else "apps/v1",
                "metadata": {"name": name, "namespace": namespace, "uid": self.owner_uid(namespace, kind, name),
                             "generation": 1, "resourceVersion": "1"},
                "spec": {"replicas": wanted}, "status": status_}

    def budgets(self, namespace=None):
        """The PodDisruptionBudgets: one for each pod marked ``"pdb": true`` (its replacements share it),
        ``<pod>-pdb``, minAvailable 1 over the pods carrying its label; its status as the disruption controller
        writes it (currentHealthy: its Ready pods; disruptionsAllowed: those above the one it must keep)."""
        out = {}
        for p in self.data["pods"]:
            if not p.get("pdb") or (namespace is not None and p["namespace"] != namespace):
                continue
            of = p.get("pdb_of", p["name"])
            key = (p["namespace"], of)
            healthy = out.get(key, {}).get("healthy", 0) + (1 if self._ready(p) else 0)
            pods = out.get(key, {}).get("pods", 0) + 1
            out[key] = {"healthy": healthy, "pods": pods}
        items = []
        for (ns, of), seen in sorted(out.items()):
            name = of + "-pdb"
            items.append({
                "metadata": {"name": name, "namespace": ns, "generation": 1,
                             "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "pdb/%s/%s" % (ns, name)))},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {PDB_LABEL: of}}},
                "status": {"observedGeneration": 1, "currentHealthy": seen["healthy"], "desiredHealthy": 1,
                           "disruptionsAllowed": max(seen["healthy"] - 1, 0), "expectedPods": seen["pods"]}})
        return items

    @staticmethod
    def _ready(p):
        return p.get("phase", "Running") == "Running" and p.get("ready", True) and not p.get("terminating")

    def eviction_refused(self, p):
        """Whether the Eviction API refuses this pod for its budget: never for a pod it deletes without a budget
        check (Succeeded, Failed or Pending, or being deleted: canIgnorePDB); a not-Ready pod goes free while its
        budget is healthy (IfHealthyBudget); else its budget must allow a disruption."""
        if not p.get("pdb") or p.get("phase", "Running") in ("Succeeded", "Failed", "Pending") or p.get("terminating"):
            return False
        of = p.get("pdb_of", p["name"])
        budget = [b for b in self.budgets(p["namespace"]) if b["metadata"]["name"] == of + "-pdb"][0]["status"]
        if not self._ready(p) and budget["currentHealthy"] >= budget["desiredHealthy"]:
            return False
        return budget["disruptionsAllowed"] <= 0

    def replacement(self, p):
        """What the pod's controller creates after an eviction: same labels, same owner, new name and UID."""
        n = sum(1 for q in self.data["pods"] if q.get("replaces")) + 1
        new = dict(p, name="%s-r%d" % (p["name"], n), replaces=p["uid"], replace=False,
                   owner_of=p.get("owner_of", p["name"]))   # the same controller (ownerReferences) owns it
        if p.get("pdb"):
            new["pdb_of"] = p.get("pdb_of", p["name"])   # the same budget selects it
        new["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, "%s/%s" % (new["namespace"], new["name"])))
        return new

    def configmap(self, namespace, name):
        data = self.data["configmaps"].get("%s/%s" % (namespace, name))
        if data is None:
            return None
        return {"kind": "ConfigMap", "apiVersion": "v1",
                "metadata": {"name": name, "namespace": namespace,
                             "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, "configmap/%s/%s" % (namespace, name))),
                             "resourceVersion": str(self.data["configmap_rvs"].get("%s/%s" % (namespace, name), 1))},
                "data": dict(data)}

    def lease(self, key):
        stored = self.data["leases"].get(key)
        if stored is None:
            return None
        namespace, name = key.split("/", 1)
        meta = dict(stored["metadata"], name=name, namespace=namespace, resourceVersion=str(stored["rv"]),
                    uid=str(uuid.uuid5(uuid.NAMESPACE_URL, "lease/%s/%d" % (key, stored["created"]))))
        return {"kind": "Lease", "apiVersion": COORDINATION + "/v1", "metadata": meta, "spec": dict(stored["spec"])}

    def bump(self):
        self.data["version"] += 1
        return self.data["version"]

    def find_pod(self, namespace, name):
        for p in self.data["pods"]:
            if p["namespace"] == namespace and p["name"] == name:
                return p
        return None


class Handler(BaseHTTPRequestHandler):
    server_version = "nodefix-apiserver-double/1"
    state = None

    def log_message(self, fmt, *args):  # quiet; the state file has the log
        return

    def _send(self, code, body):
        text = isinstance(body, str)  # /readyz answers plain text
        data = body.encode() if text else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        raw = getattr(self, "_raw", b"")
        if not raw:
            return None
        try:
            return json.loads(raw.decode() or "null")
        except ValueError:
            return None

    record = None   # --record: a file every request is appended to, as received (method, path, headers, body)

    def _route(self, method):
        url = urlparse(self.path)
        path, query = url.path.rstrip("/"), parse_qs(url.query)
        st = self.state
        with LOCK:
            if method == "GET" and path == "/version":
                return 200, VERSION
            if method == "GET" and path == "/api":
                return 200, {"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
            if method == "GET" and path == "/api/v1":
                return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": RESOURCES}
            if method == "GET" and path == "/apis":
                return 200, GROUPS
            if method == "GET" and path == "/apis/%s/v1" % COORDINATION:
                return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": COORDINATION + "/v1",
                             "resources": LEASES}
            if path.startswith("/apis/%s/v1" % AUTHORIZATION):
                return self._access_review(method, path)
            m = re.match(r"^/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$", path)
            if m:
                return self._leases(method, m.group(1), m.group(2))
            if method == "GET" and path == "/api/v1/nodes":
                return self._node_list(query)
            found = control_plane_route(st, method, path, query, self._body)
            if found:
                return found
            m = re.match(r"^/api/v1/nodes/([^/]+)$", path)
            if m:
                name = m.group(1)
                if st.node(name) is None:
                    return status(404, "NotFound", 'nodes "%s" not found' % name, {"name": name, "kind": "nodes"})
                if method == "GET":
                    return 200, st.node(name)
                if method == "PATCH":
                    body = self._body() or {}
                    stored = st.data["nodes"][name]
                    # a patch's metadata.resourceVersion is its precondition (optimistic concurrency, as the real
                    # server applies it: kubernetes/kubernetes#63104): a stale one is a 409 Conflict, nothing changed
                    want = (body.get("metadata") or {}).get("resourceVersion")
                    if want is not None and str(want) != str(stored.get("rv") or 1):
                        st.data["log"].append({"method": "PATCH", "path": path, "refused": "Conflict"})
                        st.save()
                        return status(409, "Conflict", 'Operation cannot be fulfilled on nodes "%s": the object has '
                                      "been modified; please apply your changes to the latest version and try "
                                      "again" % name, {"name": name, "kind": "nodes"})
                    if "unschedulable" in (body.get("spec") or {}):
                        stored["unschedulable"] = bool(body["spec"]["unschedulable"])
                    notes = (body.get("metadata") or {}).get("annotations")
                    if isinstance(notes, dict):
                        merged = dict(stored.get("annotations") or {})
                        for key, value in notes.items():
                            if value is None:
                                merged.pop(key, None)
                            elif not isinstance(value, str):
                                return status(422, "Invalid", "metadata.annotations: values must be strings")
                            else:
                                merged[key] = value
                        errs = validation.node_update_errors(merged)
                        if errs:
                            return validation.invalid("Node", name, errs)
                        stored["annotations"] = merged
                    stored["rv"] = st.bump()
                    st.data["log"].append({"method": "PATCH", "path": path, "body": body})
                    st.save()
                    return 200, st.node(name)
            if method == "GET" and (path == "/api/v1/pods" or re.match(r"^/api/v1/namespaces/[^/]+/pods$", path)):
                ns = path.split("/")[4] if path.startswith("/api/v1/namespaces/") else None
                selector = (query.get("fieldSelector") or [""])[0]
                node = selector.split("=", 1)[1] if selector.startswith("spec.nodeName=") else None
                labels = dict(term.split("=", 1) for term in (query.get("labelSelector") or [""])[0].split(",") if "=" in term)
                items = [st.pod(p) for p in st.data["pods"]
                         if (ns is None or p["namespace"] == ns) and (node is None or p["node"] == node)
                         and all((p.get("labels") or {}).get(k) == v for k, v in labels.items())]
                return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
            m = re.match(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)(/eviction)?$", path)
            if m:
                ns, name, eviction = m.groups()
                p = st.find_pod(ns, name)
                if p is None:
                    return status(404, "NotFound", 'pods "%s" not found' % name, {"name": name, "kind": "pods"})
                if method == "GET" and not eviction:
                    return 200, st.pod(p)
                if (method == "POST" and eviction) or (method == "DELETE" and not eviction):
                    body = self._body() or {}
                    refused = validation.eviction_error(name, body) if eviction else None
                    if refused:
                        return refused
                    want_uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
                    if eviction and want_uid and want_uid != p["uid"]:
                        st.data["log"].append({"method": method, "path": path, "refused": "Conflict"})
                        st.save()
                        return status(409, "Conflict", "Precondition failed: UID in precondition: %s, UID in object "
                                      "meta: %s" % (want_uid, p["uid"]))
                    if eviction and st.eviction_refused(p):
                        st.data["log"].append({"method": method, "path": path, "refused": "DisruptionBudget"})
                        st.save()
                        return status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                                      "disruption budget.", {"causes": [{"reason": "DisruptionBudget", "message":
                                                                         "The disruption budget %s-pdb needs 1 healthy "
                                                                         "pods and has 1 currently"
                                                                         % p.get("pdb_of", name)}]})
                    if p.get("stuck"):
                        return self._terminating(p, method, path, eviction)
                    st.data["pods"].remove(p)
                    if p.get("replace"):
                        st.data["pods"].append(st.replacement(p))
                    st.data["log"].append({"method": method, "path": path})
                    st.save()
                    if eviction:
                        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                     "code": 201}
                    return 200, st.pod(p)
            m = re.match(r"^(/apis/apps/v1|/api/v1)/namespaces/([^/]+)/(replicasets|statefulsets|replicationcontrollers)"
                         r"/([^/]+)$", path)
            if method == "GET" and m and (m.group(1) == "/api/v1") == (m.group(3) == "replicationcontrollers"):
                base, ns, resource, name = m.groups()
                found = st.controller(ns, CONTROLLERS[resource], name)
                if found is None:
                    group = "" if base == "/api/v1" else ".apps"
                    details = dict({"name": name, "kind": resource}, **({"group": "apps"} if group else {}))
                    return status(404, "NotFound", '%s%s "%s" not found' % (resource, group, name), details)
                return 200, found
            m = re.match(r"^/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?$", path)
            if m:
                return self._configmaps(method, m.group(1), m.group(2), query)
            if method == "GET" and path == "/apis/policy/v1":
                return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "policy/v1",
                             "resources": BUDGETS}
            m = re.match(r"^/apis/policy/v1(?:/namespaces/([^/]+))?/poddisruptionbudgets$", path)
            if method == "GET" and m:
                return 200, {"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1",
                             "metadata": {"resourceVersion": "1"}, "items": st.budgets(m.group(1))}
            if method == "GET" and path == "/apis/events.k8s.io/v1":
                return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
                             "resources": EVENT_RESOURCES}
            m = re.match(r"^/apis/events.k8s.io/v1/namespaces/([^/]+)/events$", path)
            if m:
                return self._events(method, m.group(1), query, core=False)
            m = re.match(r"^/api/v1/namespaces/([^/]+)/events$", path)
            if m:
                return self._events(method, m.group(1), query, core=True)
        return status(404, "NotFound", "the server could not find the requested resource (%s %s)" % (method, path))

    def _terminating(self, p, method, path, eviction):
        """A pod marked ``"stuck": true`` (a finalizer, a kubelet that never confirms): the eviction or delete
        is accepted, the pod gets its ``deletionTimestamp`` (Terminating) and never leaves."""
        st = self.state
        p.setdefault("terminating", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        st.data["log"].append({"method": method, "path": path, "terminating": True})
        st.save()
        if eviction:
            return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        return 200, st.pod(p)

    def _node_list(self, query):
        """``GET /api/v1/nodes``: every Node ``labelSelector`` picks, ``limit`` at a time (``continue``: the offset)."""
        st = self.state
        selector = (query.get("labelSelector") or [""])[0]
        items = []
        for name in sorted(st.data["nodes"]):
            node = st.node(name)
            picked = label_match(selector, node["metadata"]["labels"])
            if picked is None:
                return status(400, "BadRequest", "unable to parse requirement: %r" % selector)
            if picked:
                items.append(node)
        start = int((query.get("continue") or ["0"])[0] or 0)
        limit = int((query.get("limit") or ["0"])[0] or 0)
        page = items[start:start + limit] if limit else items[start:]
        meta = {"resourceVersion": str(st.data["version"])}
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
        return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": page}

    def _configmaps(self, method, ns, name, query):
        st = self.state
        if name is None:
            if method != "GET":
                return status(405, "MethodNotAllowed", "%s of a ConfigMap list" % method)
            items = [st.configmap(*key.split("/", 1)) for key in sorted(st.data["configmaps"]) if key.startswith(ns + "/")]
            return 200, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                         "items": items}
        current = st.configmap(ns, name)
        if current is None:
            return status(404, "NotFound", 'configmaps "%s" not found' % name, {"name": name, "kind": "configmaps"})
        if method == "GET":
            return 200, current
        if method not in ("PATCH", "PUT"):
            return status(405, "MethodNotAllowed", "%s of a ConfigMap" % method)
        body = self._body() or {}
        if not isinstance(body, dict) or not isinstance(body.get("data", {}), dict):
            return status(422, "Invalid", "ConfigMap data must be a map of strings")
        path = "/api/v1/namespaces/%s/configmaps/%s" % (ns, name)
        # a write's metadata.resourceVersion is its precondition, checked before validation (the generic registry's
        # update, as the real server applies it to an update and a patch: kubernetes/kubernetes#63104): a stale one
        # is a 409 Conflict, nothing changed
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want is not None and str(want) != current["metadata"]["resourceVersion"]:
            st.data["log"].append({"method": method, "path": path, "refused": "Conflict", "resourceVersion": want})
            st.save()
            return status(409, "Conflict", 'Operation cannot be fulfilled on configmaps "%s": the object has been '
                          'modified; please apply your changes to the latest version and try again' % name,
                          {"name": name, "kind": "configmaps"})
        data = dict(body.get("data") or {}) if method == "PUT" else dict(current["data"], **(body.get("data") or {}))
        if not all(isinstance(v, str) for v in data.values()):
            return status(422, "Invalid", "ConfigMap data values must be strings")
        refused = self._renamed(body.get("metadata") or {}, name) if method == "PUT" else None
        if refused:
            return refused
        errs = validation.configmap_errors(None, data)
        if errs:
            return validation.invalid("ConfigMap", name, errs)
        dry = (query.get("dryRun") or [""])[0] == "All"
        if not dry:
            st.data["configmaps"]["%s/%s" % (ns, name)] = data
            st.data["configmap_rvs"]["%s/%s" % (ns, name)] = st.bump()
        st.data["log"].append({"method": method, "path": path, "content_type": self.headers.get("Content-Type"),
                               "dryRun": dry, "resourceVersion": want})
        st.save()
        return 200, dict(current, data=data) if dry else st.configmap(ns, name)

    def _events(self, method, ns, query, core):
        st = self.state
        if method == "GET":
            terms = dict(t.split("=", 1) for t in (query.get("fieldSelector") or [""])[0].split(",") if "=" in t)
            items = [e for e in st.data["events"] if e["metadata"]["namespace"] == ns
                     and all(self._event_field(e, k) == v for k, v in terms.items())]
            if core:
                return 200, {"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                             "items": [self._core_event(e) for e in items]}
            return 200, {"kind": "EventList", "apiVersion": "events.k8s.io/v1", "metadata": {"resourceVersion": "1"},
                         "items": items}
        if method != "POST" or core:
            return status(405, "MethodNotAllowed", "%s of events here (the double creates events.k8s.io/v1 only)" % method)
        body = self._body()
        if not isinstance(body, dict):
            return status(400, "BadRequest", "the body is not a JSON object")
        meta = dict(body.get("metadata") or {})
        refused = validation.namespace_mismatch(meta.get("namespace"), ns)
        if refused:
            return refused
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = validation.generated_name(meta["generateName"], uuid.uuid4().hex[:5])
        errs = validation.event_errors(dict(body, metadata=meta), ns)
        if errs:
            return validation.invalid("Event", meta.get("name"), errs)
        meta.update(namespace=ns, uid=str(uuid.uuid4()), resourceVersion=str(st.bump()),
                    creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        event = dict(body, metadata=meta, apiVersion="events.k8s.io/v1", kind="Event")
        st.data["events"].append(event)
        st.data["log"].append({"method": "POST", "path": "/apis/events.k8s.io/v1/namespaces/%s/events" % ns,
                               "reason": event["reason"]})
        st.save()
        return 201, event

    @staticmethod
    def _renamed(meta, name):
        """apiserver pkg/endpoints/handlers/update.go: a PUT whose body names another object is a 400."""
        if name and meta.get("name") and meta["name"] != name:
            return validation.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                          % (meta["name"], name))
        return None

    def _access_review(self, method, path):
        """authorization.k8s.io/v1 SelfSubjectAccessReview (POST; validated as
        pkg/apis/authorization/validation/validation.go does): allowed, unless the state's ``access_denials``
        lists the request ({verb, resource, group, subresource, namespace, name}: every key given must match;
        ``reason`` is the answer's reason)."""
        if method == "GET" and path == "/apis/%s/v1" % AUTHORIZATION:
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": AUTHORIZATION + "/v1",
                         "resources": SSAR_RESOURCES}
        if path != "/apis/%s/v1/selfsubjectaccessreviews" % AUTHORIZATION:
            return status(404, "NotFound", "the server could not find the requested resource (%s %s)" % (method, path))
        if method != "POST":
            return status(405, "MethodNotAllowed", "%s of selfsubjectaccessreviews" % method)
        body = self._body()
        if not isinstance(body, dict):
            return status(400, "BadRequest", "the body is not a JSON object")
        errs = validation.ssar_errors(body)
        if errs:
            return validation.invalid("SelfSubjectAccessReview", "", errs, group=AUTHORIZATION)
        spec = body.get("spec") or {}
        asked = spec.get("resourceAttributes") or spec.get("nonResourceAttributes") or {}
        denied = [d for d in self.state.data.get("access_denials") or []
                  if all(asked.get(k, "") == v for k, v in d.items() if k != "reason")]
        answer = {"allowed": not denied}
        if denied:
            answer["reason"] = denied[0].get("reason") or ""
        self.state.data["log"].append({"method": "POST", "path": path, "attributes": asked, "allowed": not denied})
        self.state.save()
        return 201, {"kind": "SelfSubjectAccessReview", "apiVersion": AUTHORIZATION + "/v1",
                     "metadata": {"creationTimestamp": None}, "spec": spec, "status": answer}

    @staticmethod
    def _core_event(e):
        """An events.k8s.io/v1 Event as core/v1 shows it (what kubectl get events reads)."""
        reg = e.get("regarding") or {}
        return {"kind": "Event", "apiVersion": "v1", "metadata": e["metadata"],
                "involvedObject": reg, "reason": e.get("reason"), "message": e.get("note"), "type": e.get("type"),
                "action": e.get("action"), "eventTime": e.get("eventTime"),
                "firstTimestamp": None, "lastTimestamp": None, "count": None,
                "source": {"component": e.get("reportingController")},
                "reportingComponent": e.get("reportingController"), "reportingInstance": e.get("reportingInstance")}

    @staticmethod
    def _event_field(e, key):
        reg = e.get("regarding") or {}
        return {"involvedObject.name": reg.get("name"), "involvedObject.kind": reg.get("kind"),
                "regarding.name": reg.get("name"), "regarding.kind": reg.get("kind"),
                "reason": e.get("reason"), "type": e.get("type")}.get(key)

    def _leases(self, method, ns, name):
        st = self.state
        body = self._body() if method in ("POST", "PUT", "DELETE") else None
        if name is None and method == "GET":
            items = [st.lease(k) for k in sorted(st.data["leases"]) if k.startswith(ns + "/")]
            return 200, {"kind": "LeaseList", "apiVersion": COORDINATION + "/v1",
                         "metadata": {"resourceVersion": str(st.data["version"])}, "items": items}
        if method in ("POST", "PUT"):
            meta = dict(((body or {}).get("metadata") or {}))
            refused = validation.namespace_mismatch(meta.get("namespace"), ns) or self._renamed(meta, name)
            if refused:
                return refused
            errs = validation.lease_errors(dict(meta, namespace=ns, name=meta.get("name") or name),
                                           (body or {}).get("spec") or {}, create=method == "POST")
            if errs:
                return validation.invalid("Lease", meta.get("name") or name, errs, group=COORDINATION)
        if name is None and method == "POST":
            name = ((body or {}).get("metadata") or {}).get("name")
        if name is None:
            return status(405, "MethodNotAllowed", "%s of a Lease list" % method)
        key = "%s/%s" % (ns, name)
        current = st.lease(key)
        entry = {"method": method, "path": "/apis/%s/v1/namespaces/%s/leases/%s" % (COORDINATION, ns, name),
                 "time": time.time()}
        if method == "GET":
            if current is None:
                return status(404, "NotFound", 'leases.coordination.k8s.io "%s" not found' % name,
                              {"name": name, "group": COORDINATION, "kind": "leases"})
            return 200, current
        if method not in ("POST", "PUT", "DELETE"):
            return status(405, "MethodNotAllowed", "%s of a Lease" % method)
        conflict = status(409, "Conflict", 'Operation cannot be fulfilled on leases.coordination.k8s.io "%s": the '
                          "object has been modified; please apply your changes to the latest version and try again"
                          % name, {"name": name, "group": COORDINATION, "kind": "leases"})
        if method == "POST":
            if current is not None:
                st.data["log"].append(dict(entry, refused="AlreadyExists"))
                st.save()
                return status(409, "AlreadyExists", 'leases.coordination.k8s.io "%s" already exists' % name,
                              {"name": name, "group": COORDINATION, "kind": "leases"})
            rv = st.bump()
            st.data["leases"][key] = {"metadata": kept_metadata(body), "spec": dict(body.get("spec") or {}),
                                      "rv": rv, "created": rv}
        elif method in ("PUT", "DELETE"):
            if current is None:
                return status(404, "NotFound", 'leases.coordination.k8s.io "%s" not found' % name)
            # optimistic concurrency: an update's metadata.resourceVersion, a delete's precondition
            where = "metadata" if method == "PUT" else "preconditions"
            want = ((body or {}).get(where) or {}).get("resourceVersion")
            if want and want != current["metadata"]["resourceVersion"]:
                st.data["log"].append(dict(entry, refused="Conflict"))
                st.save()
                return conflict
        if method == "PUT":
            stored = st.data["leases"][key]
            stored.update(spec=dict(body.get("spec") or {}), rv=st.bump(), metadata=kept_metadata(body))
        elif method == "DELETE":
            del st.data["leases"][key]
            st.data["log"].append(dict(entry, holder=current["spec"].get("holderIdentity")))
            st.save()
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": {"name": name, "group": COORDINATION, "kind": "leases", "uid": current["metadata"]["uid"]}}
        st.data["log"].append(dict(entry, holder=(body.get("spec") or {}).get("holderIdentity")))
        st.save()
        return (201 if method == "POST" else 200), st.lease(key)

    def _handle(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(length) if length else b""
        if self.record:
            with LOCK, open(self.record, "a") as fh:
                fh.write(json.dumps({"method": method, "path": self.path, "headers": dict(self.headers),
                                     "body": self._raw.decode("utf-8", "replace")}) + "\n")
        code, body = self._route(method)
        self._send(code, body)

    def do_GET(self):
        self._handle("GET")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_POST(self):
        self._handle("POST")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_PUT(self):
        self._handle("PUT")


def kubeconfig(port, user="nodefix-lab"):
    """A kubeconfig (YAML is a superset of JSON) for the double on ``port``."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "double",
        "clusters": [{"name": "double", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": user, "user": {"token": "not-checked"}}],
        "contexts": [{"name": "double", "context": {"cluster": "double", "user": user}}],
    }, indent=1) + "\n"


def main():
    ap = argparse.ArgumentParser(description="kube-apiserver test double (cordon/drain/uncordon)")
    ap.add_argument("--state", required=True, help="JSON state file (read, then rewritten on every change)")
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free one)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--kubeconfig", help="write a kubeconfig for the double here once listening")
    ap.add_argument("--record", help="append every request received here, one JSON line each (method, path, "
                                     "headers, body as sent)")
    args = ap.parse_args()
    Handler.state = State(args.state)
    Handler.record = args.record
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    port = httpd.server_address[1]
    if args.kubeconfig:
        with open(args.kubeconfig, "w") as fh:
            fh.write(kubeconfig(port))
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as fh:
            fh.write("%d\n" % port)
        os.rename(args.port_file + ".tmp", args.port_file)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
