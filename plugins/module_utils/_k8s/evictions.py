# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Evicting exactly one pod through the Eviction API, over the collection's one client (``_k8s.client.Kube``):
the one owner of the ``policy/v1`` Eviction body (a UID precondition, a grace period; ``rollout_api``'s drain sends
it too) and of the wait on a PodDisruptionBudget's 429 (``evict``: asked again every ``sleep`` seconds until
``wait`` seconds are over), used by the modules ``pod_eviction`` (one named pod) and ``pod_recreate``.

``recreate`` is ``pod_recreate``'s whole run (the gVisor role's opt-in eviction): the node's pods listed once
(every page), kept as names, UIDs, labels, owners and Ready/terminating only (a pod spec holds environment values
and secrets' names); per UID (each once), in order, one pod at a time: skipped with the reason (gone from the node,
unreadable, a mirror pod, a DaemonSet's, a bare pod nothing recreates - no ownerReference with
``controller: true`` -, gone from its controller's pods, another pod of its controller not Ready or
terminating, then its ReplicaSet, StatefulSet or ReplicationController short of a Ready replica - one missing
wholly - or unread (``_k8s.replicas``, read before each eviction), an earlier pod of its controller whose
replacement was not confirmed), else evicted with its UID as
precondition, then - when it has a controller - its replacement waited for: a pod of the SAME controller
(ownerReferences uid, or kind and name) whose UID was not there just before the eviction, not being deleted,
Ready. A failed eviction or a replacement that is not Ready in time is recorded for that pod and the next one goes
on; a listing that fails leaves every pod "not attempted" with the reason (a ``KubeError``'s: it never quotes a
credential). Every reader of an API object takes its shape as it comes (``as_dict``, ``as_list``, ``brief``): an
object that cannot be read is never evicted on, and an answer that cannot be read after an eviction makes that
pod "evicted, replacement not confirmed" - one pod's odd answer is that pod's result only.
The eviction handler's answers: 2xx accepted, 404 no such pod, 409 a failed precondition - or a conflict the
handler's own retries did not get past (a PodDisruptionBudget's resourceVersion), told apart by reading the pod -,
429 a budget that allows no disruption now:
https://github.com/kubernetes/kubernetes/blob/master/pkg/registry/core/pod/storage/eviction.go
https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import replicas

SKIP_GONE = "no pod with this uid on node %s any more"
SKIP_DAEMONSET = "DaemonSet pods are not evicted; delete it to have it recreated"
SKIP_BARE = "no controller would recreate this bare pod (see gvisor_evict_bare_pods)"
SKIP_NO_CONTROLLER = " - its ownerReferences (%s) name no controller (controller: true)"
SKIP_LEFT = "no longer a pod of %s (orphaned, or adopted by another owner): nothing would recreate it"
SKIP_MIRROR = ("a mirror (static) pod: the kubelet recreates it from its manifest, an eviction does not recreate "
               "its sandbox")
SKIP_UNREAD = "the pod could not be read (%s): never evicted on an answer that cannot be read"
SKIP_SIBLING = "another pod of %s is not Ready (%s): evicting this one could leave none"
SKIP_OWNER_UNREAD = "the pods of %s could not be read (%s): never evicted without knowing them"
SKIP_EARLIER = "the replacement of %s, a pod of %s evicted before it, was not confirmed Ready: evicting this one could leave none"
NOT_READY = "replacement not Ready in time"
NOT_CONFIRMED = "evicted, replacement not confirmed"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# what a malformed answer raises in a reader (``.get`` of a list, iterating a number ...): that pod's result only
ODD = (AttributeError, TypeError, ValueError, KeyError, IndexError)


class EvictionError(NodefixError):
    """An eviction that did not happen, or whose outcome is unknown (no answer): ``msg`` names the pod, the
    attempts and the API server's answer; ``attempts`` and, when the API server answered, its ``status`` ride in
    ``details``."""


class Unreadable(NodefixError):
    """An API object that cannot be read as what it should be (a pod, a list of pods): nothing is evicted on it."""


def as_dict(value):
    """``value`` when it is a dict, else an empty one (a reader of an API object never raises on its shape)."""
    return value if isinstance(value, dict) else {}


def as_list(value):
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def _field(obj, key, kind, where):
    """``obj[key]`` when it is a ``kind`` (absent or null: an empty one); Unreadable when it is something else."""
    value = obj.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise Unreadable("%s%s is a %s, not a %s" % (where, key, type(value).__name__, kind.__name__))
    return value


def eviction(ns, name, uid=None, grace=None):
    """The policy/v1 Eviction of one pod (a UID precondition with ``uid``, ``grace`` its gracePeriodSeconds)."""
    options = {}
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    if uid:
        options["preconditions"] = {"uid": uid}
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    if options:
        body["deleteOptions"] = options
    return body


def pod_path(ns, name, sub=""):
    return "/api/v1/namespaces/%s/pods/%s%s" % (kube.name(ns), kube.name(name), sub)


def checked_path(ns, name, sub=""):
    """``pod_path``; Unreadable for a name that is no ``client.object_name`` (never put in a URL)."""
    for value in (ns, name):
        if not kube.object_name(value):
            raise Unreadable("%r is not a namespace or pod name a URL can hold" % (value,))
    return "/api/v1/namespaces/%s/pods/%s%s" % (kube.name(ns), kube.name(name), sub)


def said(api, exc):
    """A failed request's reason for a person (``client.said``), or an Unreadable's."""
    if not isinstance(exc, kube.KubeError):
        return "%s" % (getattr(exc, "msg", None) or "%s: %s" % (type(exc).__name__, exc))
    return kube.said(api, exc)


def uid_now(api, ns, name):
    """The UID pod ``ns/name`` has now; None when there is no such pod. EvictionError when it cannot be read."""
    what = "reading pod %s/%s" % (ns, name)
    try:
        pod = api.request(what, "GET", checked_path(ns, name), missing_ok=True)
    except kube.KubeError as exc:
        raise EvictionError("%s: %s" % (what, said(api, exc)), status=exc.status)
    if pod is None:
        return None
    uid = as_dict(pod.get("metadata")).get("uid")
    if not isinstance(uid, str) or not uid:
        raise EvictionError("%s: the answer has no UID" % what)
    return uid


def _conflict(api, ns, name, uid, attempts, exc):
    """A 409 to an eviction with a UID precondition: ``replaced`` (the pod of that name has another UID) or
    ``gone`` (no pod of that name) as a read of the pod says; the same UID still there is a conflict of the
    eviction itself (a PodDisruptionBudget's resourceVersion after the API server's own retries): EvictionError."""
    head = "eviction of pod %s/%s failed after %d attempt(s): %s: %s" % (ns, name, attempts, exc.phrase(), exc.detail())
    try:
        now = uid_now(api, ns, name)
    except EvictionError as err:
        raise EvictionError("%s; whether it was replaced is unknown: %s" % (head, err.msg), status=409,
                            attempts=attempts)
    if now is None:
        return "gone"
    if now != uid:
        return "replaced"
    raise EvictionError("%s (the pod still has UID %s: not replaced)" % (head, uid), status=409, attempts=attempts)


def evict(api, ns, name, uid=None, grace=None, wait=120, sleep=5):
    """(``evicted``, ``gone`` - no such pod - or ``replaced`` - a 409 and the pod of that name has another UID, ``uid``
    given -, the eviction requests sent) of pod ``ns/name``. Any 2xx is ``evicted`` (the API server accepted it,
    whatever its body). A 429 (a PodDisruptionBudget allows no disruption now) is asked again every ``sleep`` seconds
    (at least 1) while that ends within ``wait`` seconds. EvictionError otherwise: a budget that still refuses, a
    409 with the UID still there (``_conflict``), any other answer, or no answer (whether it was evicted is unknown)."""
    body = eviction(ns, name, uid, grace)
    path = checked_path(ns, name, "/eviction")
    deadline = time.time() + max(0, wait)
    attempts = 0
    while True:
        attempts += 1
        try:
            # a 429 is a PodDisruptionBudget's answer, waited for here (sleep, wait), not by the client
            api.request("eviction of pod %s/%s" % (ns, name), "POST", path, body=body, retry=kube.RETRY_SERVER)
            return "evicted", attempts
        except kube.KubeError as exc:
            if not exc.status:
                raise EvictionError("eviction of pod %s/%s (attempt %d; whether it was evicted is unknown): %s"
                                    % (ns, name, attempts, kube.unanswered(api, exc)), attempts=attempts)
            if 200 <= exc.status <= 299:    # accepted; only its body could not be read
                return "evicted", attempts
            if exc.status == 404:
                return "gone", attempts
            if exc.status == 409 and uid:
                return _conflict(api, ns, name, uid, attempts, exc), attempts
            if exc.status == 429 and time.time() + sleep <= deadline:
                time.sleep(max(1, sleep))
                continue
            what = "refused by a PodDisruptionBudget" if exc.status == 429 else "failed"
            raise EvictionError("eviction of pod %s/%s %s after %d attempt(s): %s %s"
                                % (ns, name, what, attempts, exc.status, exc.detail()),
                                status=exc.status, attempts=attempts)


def brief(item):
    """What the eviction needs of a listed pod, nothing else of it (a spec holds environment values and secrets'
    names): uid, name, namespace, labels, owners (kind, name, uid, controller, ``group``: the API group of its
    apiVersion, None when it has none), ``ready`` (Ready=True),
    ``deleting`` (a deletionTimestamp), ``mirror``; ``unreadable``: why a part could not be read (None: all read),
    the parts read before it kept (``owners`` None when they were not)."""
    out = {"uid": None, "name": None, "namespace": None, "labels": {}, "owners": None, "ready": False,
           "deleting": True, "mirror": False, "unreadable": None}
    try:
        if not isinstance(item, dict):
            raise Unreadable("a listed item is a %s, not an object" % type(item).__name__)
        meta = _field(item, "metadata", dict, "")
        uid = meta.get("uid")
        out["uid"] = uid if isinstance(uid, str) and uid else None
        for key in ("uid", "name", "namespace"):
            if not kube.object_name(meta.get(key)):
                raise Unreadable("metadata.%s is %s" % (key, "missing" if meta.get(key) is None else repr(meta.get(key))))
            out[key] = meta[key]
        owners = []
        for ref in _field(meta, "ownerReferences", list, "metadata."):
            if not isinstance(ref, dict) or not isinstance(ref.get("kind"), str) or not isinstance(ref.get("name"), str):
                raise Unreadable("metadata.ownerReferences holds %.60r" % (ref,))
            owners.append({"kind": ref["kind"], "name": ref["name"],
                           "uid": ref.get("uid") if isinstance(ref.get("uid"), str) else "",
                           "controller": ref.get("controller") is True, "group": replicas.group(ref.get("apiVersion"))})
        out["owners"] = owners
        out["labels"] = dict(("%s" % k, "%s" % v) for k, v in _field(meta, "labels", dict, "metadata.").items())
        out["mirror"] = (MIRROR_ANNOTATION in _field(meta, "annotations", dict, "metadata.")
                         or any(o["kind"] == "Node" for o in owners))
        out["deleting"] = meta.get("deletionTimestamp") is not None
        conditions = _field(_field(item, "status", dict, ""), "conditions", list, "status.")
        out["ready"] = any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
                           for c in conditions)
    except Unreadable as exc:
        out["unreadable"] = exc.msg
    return out


def controller(pod):
    """The owner a replacement comes from: the ownerReference with ``controller: true``; None without one - an owner
    that is not the controller (``controller`` false or absent) recreates nothing, the pod is bare:
    https://kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/"""
    owners = as_list(pod["owners"])     # (None: they could not be read)
    return next((o for o in owners if o["controller"]), None)


def same_owner(one, other):
    """Whether two owner references name the same object: by UID when both have one, else by kind and name."""
    if one is None or other is None:
        return False
    if one["uid"] and other["uid"]:
        return one["uid"] == other["uid"]
    return (one["kind"], one["name"]) == (other["kind"], other["name"])


def owner_name(pod):
    ref = controller(pod)
    return "%s/%s" % (ref["kind"], ref["name"])


def _items(api, what, path, query=None):
    """``api.items``, an answer whose shape cannot be read Unreadable (never an AttributeError out of here)."""
    try:
        return api.items(what, path, query)
    except ODD as exc:
        raise Unreadable("%s: the API server's answer could not be read (%s: %s)" % (what, type(exc).__name__, exc))


def owner_pods(api, pod):
    """The pods (``brief``) of ``pod``'s namespace that its controller owns, every page. KubeError or Unreadable
    (a listed item whose owner is unknown or the same, and that cannot be read: it could be a replacement or a
    sibling - fail closed)."""
    ns, ref = pod["namespace"], controller(pod)
    what = "listing the pods of namespace %s" % ns
    found = []
    for item in _items(api, what, "/api/v1/namespaces/%s/pods" % kube.name(ns)):
        other = brief(item)
        mine = other["owners"] is None or same_owner(ref, controller(other))
        if mine and other["unreadable"]:
            raise Unreadable("%s: a pod (%s) could not be read: %s" % (what, other["name"] or other["uid"] or "?",
                                                                       other["unreadable"]))
        if mine:
            found.append(other)
    return found


def preflight(api, pod):
    """(the UIDs of the pods of ``pod``'s controller now, None, ``pod`` as this listing has it - its Ready state now,
    not the node listing's at the start of the run) when every other one is Ready and not being deleted, else
    (None, why this one is skipped, None); (None, None, None) when ``pod`` is no longer among them (deleted,
    replaced or orphaned: ``_Run.left`` tells which); KubeError or Unreadable when they cannot be listed or read."""
    pods = owner_pods(api, pod)
    for other in pods:
        if other["uid"] != pod["uid"] and (other["deleting"] or not other["ready"]):
            state = "terminating" if other["deleting"] else "not Ready"
            return (None, SKIP_SIBLING % (owner_name(pod), "%s/%s is %s" % (other["namespace"], other["name"], state)),
                    None)
    fresh = next((p for p in pods if p["uid"] == pod["uid"]), None)
    if fresh is None:
        return None, None, None
    return set(p["uid"] for p in pods), None, fresh


def replacement_ready(api, pod, before, timeout, sleep=5):
    """(True, None) when a pod of ``pod``'s controller whose UID is not in ``before`` (the UIDs just before the
    eviction), not being deleted, is Ready - asked at once and then every ``sleep`` seconds (at least 1) until
    ``timeout`` seconds are over; else (False, None) - read, none Ready - or (False, why the last read failed)."""
    deadline = time.monotonic() + max(0, timeout)
    while True:
        why = None
        try:
            if any(p["uid"] not in before and not p["deleting"] and p["ready"] for p in owner_pods(api, pod)):
                return True, None
        except (kube.KubeError, Unreadable) as exc:
            why = said(api, exc)    # the API server may answer again before the time is over
        left = deadline - time.monotonic()
        if left <= 0:
            return False, why
        time.sleep(min(max(1, sleep), left))


def node_pods(api, node):
    """The pods on Node ``node`` as ``brief`` keeps them, by UID (every page; an item without a readable UID is no
    pod to evict), and how many listed items had none; KubeError or Unreadable when they cannot be listed."""
    listed = _items(api, "listing the pods of node %s" % node, "/api/v1/pods",
                    [("fieldSelector", "spec.nodeName=%s" % node)])
    pods = [brief(item) for item in listed]
    return dict((p["uid"], p) for p in pods if p["uid"]), len([p for p in pods if not p["uid"]])


def not_attempted(node, uids, reason):
    """Every UID "not attempted": the node's pods could not be listed (``reason``)."""
    return [{"uid": uid, "result": "not attempted", "reason": "cannot list the pods of node %s: %s" % (node, reason)}
            for uid in uids]


def skip_reason(node, pod, bare_pods, nameless=0):
    """Why ``pod`` (a ``brief``, None when no pod of the node has the UID) is not evicted; None when it is."""
    if pod is None:
        return SKIP_GONE % node + ("" if not nameless else " (%d listed item(s) without a readable UID)" % nameless)
    if pod["unreadable"]:
        return SKIP_UNREAD % pod["unreadable"]
    if pod["mirror"]:
        return SKIP_MIRROR
    if any(o["kind"] == "DaemonSet" for o in pod["owners"]):
        return SKIP_DAEMONSET
    if controller(pod) is None and not bare_pods:
        return SKIP_BARE + ("" if not pod["owners"] else SKIP_NO_CONTROLLER % ", ".join(
            "%s/%s" % (o["kind"], o["name"]) for o in pod["owners"]))
    return None


def line(result):
    """One result for a person: ``<pod name or uid>: <result> (<reason>) [<note>]``."""
    who = result["pod"].split("/", 1)[1] if result.get("pod") else result["uid"]
    return "%s: %s" % (who, result["result"]) + (" (%s)" % result["reason"] if result.get("reason") else "") + (
        " [%s]" % result["note"] if result.get("note") else "")


class _Run(object):
    """One ``recreate``: its settings, and the owners whose evicted pod's replacement was not confirmed Ready."""

    def __init__(self, api, node, check_mode, bare_pods, grace, wait, sleep, ready_timeout):
        self.api, self.node, self.check_mode, self.bare_pods = api, node, check_mode, bare_pods
        self.grace, self.wait, self.sleep, self.ready_timeout = grace, wait, sleep, ready_timeout
        self.unconfirmed = []   # (owner reference, pod namespace/name)
        self.notes = {}     # uid -> why its controller's desired replicas were not read (its kind)

    def left(self, uid, pod, where):
        """The result of a pod no longer among its controller's pods: ``gone`` (no pod of its name) or ``replaced``
        (another UID) as the eviction would have said, else - the same pod, orphaned or adopted by another owner,
        which its controller no longer recreates - skipped. EvictionError when it cannot be read."""
        now = uid_now(self.api, pod["namespace"], pod["name"])
        if now is None or now != uid:
            return {"uid": uid, "pod": where, "result": "gone" if now is None else "replaced"}
        return {"uid": uid, "result": "skipped", "reason": SKIP_LEFT % owner_name(pod)}

    def one(self, uid, pod, where, stage):
        """The result of one pod (``recreate``); ``stage["at"]``: how far it went (``sent``, ``evicted``)."""
        ref = controller(pod)
        earlier = [w for r, w in self.unconfirmed if same_owner(ref, r)]
        if earlier:
            return {"uid": uid, "result": "skipped", "reason": SKIP_EARLIER % (earlier[0], owner_name(pod))}
        waited = ref is not None   # (by its controller, whatever its labels; a bare pod only with bare_pods)
        before = None
        if waited:
            try:
                before, reason, fresh = preflight(self.api, pod)
            except (kube.KubeError, Unreadable) as exc:
                before, reason = None, SKIP_OWNER_UNREAD % (owner_name(pod), said(self.api, exc))
            if not reason and before is None:   # no longer among its controller's pods
                return self.left(uid, pod, where)
            if not reason:   # its pods all Ready: does it have every replica it wants (one missing wholly)? - this
                # pod's Ready state as just listed (the node's listing may be minutes old after earlier pods' waits)
                reason, self.notes[uid] = replicas.check(self.api, pod["namespace"], ref, fresh["ready"])
            if reason:
                return {"uid": uid, "result": "skipped", "reason": reason}
        if self.check_mode:
            return {"uid": uid, "pod": where, "result": "would evict"}
        stage["at"] = "sent"
        try:
            result, _attempts = evict(self.api, pod["namespace"], pod["name"], uid, self.grace, self.wait, self.sleep)
        except EvictionError as exc:
            if not exc.details.get("status"):   # no answer: it may have been evicted, its replacement unknown
                self.unconfirmed.append((ref, where))
            return {"uid": uid, "pod": where, "result": "failed", "reason": exc.msg}
        if result != "evicted":
            return {"uid": uid, "pod": where, "result": result}
        stage["at"] = "evicted"
        if not waited:
            return {"uid": uid, "pod": where, "result": "evicted"}
        ready, why = replacement_ready(self.api, pod, before, self.ready_timeout, self.sleep)
        if ready:
            return {"uid": uid, "pod": where, "result": "evicted, replacement Ready"}
        self.unconfirmed.append((ref, where))
        if why:
            return {"uid": uid, "pod": where, "result": NOT_CONFIRMED, "reason": why}
        return {"uid": uid, "pod": where, "result": "failed", "reason": NOT_READY}


def recreate(api, node, uids, check_mode=False, bare_pods=False, grace=None, wait=120, sleep=5, ready_timeout=300):
    """(changed, results) of the eviction of the pods of ``uids`` (each once, in order) on ``node``, one at a time
    (the module docstring): each result ``{uid, result, reason}`` for a pod skipped (its controller short of a Ready
    replica or unread: ``_k8s.replicas``) or not attempted, ``{uid, pod,
    result}`` for one evicted (``evicted, replacement Ready`` once waited for), ``would evict`` (check mode:
    nothing sent), ``gone`` or ``replaced``; ``{uid, pod, result, reason}`` for ``failed`` (an eviction that
    failed, or a replacement not Ready within ``ready_timeout`` seconds) and ``evicted, replacement not confirmed``
    (evicted; its replacement could not be read); ``note`` beside it when its controller is of a kind whose desired
    replicas are not read. An answer that cannot be read is that pod's result only.
    ``changed``: a pod was (check mode: would be) evicted."""
    try:
        pods, nameless = node_pods(api, node)
    except (kube.KubeError, Unreadable) as exc:
        return False, not_attempted(node, uids, said(api, exc))
    run = _Run(api, node, check_mode, bare_pods, grace, wait, sleep, ready_timeout)
    changed, results, seen = False, [], set()
    for uid in uids:
        if uid in seen:
            continue
        seen.add(uid)
        pod = pods.get(uid)
        reason = skip_reason(node, pod, bare_pods, nameless)
        if reason:
            results.append({"uid": uid, "result": "skipped", "reason": reason})
            continue
        where, stage = "%s/%s" % (pod["namespace"], pod["name"]), {"at": None}
        try:
            result = run.one(uid, pod, where, stage)
        except (NodefixError,) + ODD as exc:
            why = said(api, exc)
            if stage["at"] == "evicted":
                result = {"uid": uid, "pod": where, "result": NOT_CONFIRMED, "reason": why}
                run.unconfirmed.append((controller(pod), where))
            elif stage["at"] == "sent":
                result = {"uid": uid, "pod": where, "result": "failed",
                          "reason": "eviction of pod %s (whether it was evicted is unknown): %s" % (where, why)}
                run.unconfirmed.append((controller(pod), where))
            else:
                result = {"uid": uid, "result": "skipped", "reason": SKIP_UNREAD % why}
        if run.notes.get(uid):
            result["note"] = run.notes[uid]
        changed = changed or result["result"] in ("would evict", "evicted", "evicted, replacement Ready",
                                                  NOT_CONFIRMED) or stage["at"] == "evicted"
        results.append(result)
    return changed, results
