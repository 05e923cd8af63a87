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
(every page), kept as names, UIDs, labels and owners only (a pod spec holds environment values and secrets'
names); per UID, in order, one pod at a time: skipped with the reason (gone from the node, a DaemonSet's, a bare
pod nothing recreates), else evicted with its UID as precondition, then - when it had owners and labels - a
replacement waited for (a pod of its namespace with the same labels, another UID, Ready). A failed eviction or a
replacement that is not Ready in time is recorded for that pod and the next one goes on; a listing that fails
leaves every pod "not attempted" with the reason (a ``KubeError``'s: it never quotes a credential).
https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube

SKIP_GONE = "no pod with this uid on node %s any more"
SKIP_DAEMONSET = "DaemonSet pods are not evicted; delete it to have it recreated"
SKIP_BARE = "no controller would recreate this bare pod (see gvisor_evict_bare_pods)"
NOT_READY = "replacement not Ready in time"


class EvictionError(NodefixError):
    """An eviction that did not happen, or whose outcome is unknown (no answer): ``msg`` names the pod, the
    attempts and the API server's answer; ``attempts`` and, when the API server answered, its ``status`` ride in
    ``details``."""


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


def unanswered(api, exc):
    """What a request without an answer says: the client's timeout and why (``exc.why``, scrubbed)."""
    return "the API server could not be reached or did not answer within %d s (%s)" % (api.timeout[0], exc.why)


def said(api, exc):
    """A failed request's reason for a person: no answer (``unanswered``), or the status and the Status message."""
    if not exc.status:
        return unanswered(api, exc)
    if 200 <= exc.status <= 299:
        return "%s" % exc.why
    return ("%s %s" % (exc.status, exc.detail() or exc.body[:300])).strip()


def evict(api, ns, name, uid=None, grace=None, wait=120, sleep=5):
    """(``evicted``, ``gone`` - no such pod - or ``replaced`` - the UID precondition failed, ``uid`` given -, the
    eviction requests sent) of pod ``ns/name``. A 429 (a PodDisruptionBudget allows no disruption now) is asked
    again every ``sleep`` seconds (at least 1) while that ends within ``wait`` seconds. EvictionError otherwise:
    a budget that still refuses, any other answer, or no answer (whether it was evicted is unknown)."""
    body = eviction(ns, name, uid, grace)
    deadline = time.time() + max(0, wait)
    attempts = 0
    while True:
        attempts += 1
        try:
            # a 429 is a PodDisruptionBudget's answer, waited for here (sleep, wait), not by the client
            api.request("eviction of pod %s/%s" % (ns, name), "POST", pod_path(ns, name, "/eviction"), body=body,
                        retry=kube.RETRY_SERVER)
            return "evicted", attempts
        except kube.KubeError as exc:
            if not exc.status:
                raise EvictionError("eviction of pod %s/%s (attempt %d; whether it was evicted is unknown): %s"
                                    % (ns, name, attempts, unanswered(api, exc)), attempts=attempts)
            if exc.status == 404:
                return "gone", attempts
            if exc.status == 409 and uid:
                return "replaced", attempts
            if exc.status == 429 and time.time() + sleep <= deadline:
                time.sleep(max(1, sleep))
                continue
            what = "refused by a PodDisruptionBudget" if exc.status == 429 else "failed"
            raise EvictionError("eviction of pod %s/%s %s after %d attempt(s): %s %s"
                                % (ns, name, what, attempts, exc.status, exc.detail()),
                                status=exc.status, attempts=attempts)


def brief(pod):
    """What the eviction needs of a listed pod, nothing else of it: uid, name, namespace, labels, owners' kinds
    and names (a spec holds environment values and secrets' names)."""
    meta = pod.get("metadata") if isinstance(pod, dict) and isinstance(pod.get("metadata"), dict) else {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    owners = [{"kind": "%s" % o.get("kind"), "name": "%s" % o.get("name")}
              for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
    return {"uid": meta.get("uid"), "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": dict(("%s" % k, "%s" % v) for k, v in labels.items()), "owners": owners}


def skip_reason(node, pod, bare_pods):
    """Why ``pod`` (a ``brief``, None when no pod of the node has the UID) is not evicted; None when it is."""
    if pod is None:
        return SKIP_GONE % node
    if any(o["kind"] == "DaemonSet" for o in pod["owners"]):
        return SKIP_DAEMONSET
    if not pod["owners"] and not bare_pods:
        return SKIP_BARE
    return None


def _ready(pod, uid):
    """Whether the listed ``pod`` is not the one of ``uid`` and its condition Ready is True."""
    if not isinstance(pod, dict):
        return False
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    return meta.get("uid") != uid and any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
                                          for c in status.get("conditions") or [])


def replacement_ready(api, pod, timeout, sleep=5):
    """Whether a pod of ``pod``'s namespace with the same labels and another UID is Ready, asked at once and then
    every ``sleep`` seconds (at least 1) until ``timeout`` seconds are over. A failed read is asked again too."""
    selector = ",".join("%s=%s" % (k, v) for k, v in sorted(pod["labels"].items()))
    path = "/api/v1/namespaces/%s/pods" % kube.name(pod["namespace"])
    deadline = time.monotonic() + max(0, timeout)
    while True:
        try:
            pods = api.items("listing the pods of %s labelled %s" % (pod["namespace"], selector), path,
                             [("labelSelector", selector)])
            if any(_ready(p, pod["uid"]) for p in pods):
                return True
        except kube.KubeError:
            pass    # the API server may answer again before the time is over; the result says "not Ready in time"
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(max(1, sleep), left))


def node_pods(api, node):
    """The pods on Node ``node`` as ``brief`` keeps them, by UID (every page; an item without a UID, name or namespace
    - or with a name or namespace that cannot be one path segment, ``.`` or ``..`` - is no pod to evict); KubeError
    when they cannot be listed."""
    listed = api.items("listing the pods of node %s" % node, "/api/v1/pods", [("fieldSelector", "spec.nodeName=%s" % node)])
    return dict((p["uid"], p) for p in (brief(item) for item in listed)
                if all(isinstance(p[key], str) and p[key] not in kube.NOT_NAMES for key in ("uid", "name", "namespace")))


def not_attempted(node, uids, reason):
    """Every UID "not attempted": the node's pods could not be listed (``reason``)."""
    return [{"uid": uid, "result": "not attempted", "reason": "cannot list the pods of node %s: %s" % (node, reason)}
            for uid in uids]


def recreate(api, node, uids, check_mode=False, bare_pods=False, grace=None, wait=120, sleep=5, ready_timeout=300):
    """(changed, results) of the eviction of the pods of ``uids`` on ``node``, one at a time, in order (the module
    docstring): each result ``{uid, result, reason}`` for a pod skipped or not attempted, ``{uid, pod, result}``
    for one evicted (``evicted, replacement Ready`` once waited for), ``would evict`` (check mode: nothing sent),
    ``gone`` or ``replaced``, ``{uid, pod, result: failed, reason}`` for an eviction that failed or a replacement
    not Ready within ``ready_timeout`` seconds. ``changed``: a pod was (check mode: would be) evicted."""
    try:
        pods = node_pods(api, node)
    except kube.KubeError as exc:
        return False, not_attempted(node, uids, said(api, exc))
    changed, results = False, []
    for uid in uids:
        pod = pods.get(uid)
        reason = skip_reason(node, pod, bare_pods)
        if reason:
            results.append({"uid": uid, "result": "skipped", "reason": reason})
            continue
        where = "%s/%s" % (pod["namespace"], pod["name"])
        if check_mode:
            changed = True
            results.append({"uid": uid, "pod": where, "result": "would evict"})
            continue
        try:
            result, _attempts = evict(api, pod["namespace"], pod["name"], uid, grace, wait, sleep)
        except EvictionError as exc:
            results.append({"uid": uid, "pod": where, "result": "failed", "reason": exc.msg})
            continue
        changed = changed or result == "evicted"
        if result == "evicted" and pod["owners"] and pod["labels"]:
            if not replacement_ready(api, pod, ready_timeout, sleep):
                results.append({"uid": uid, "pod": where, "result": "failed", "reason": NOT_READY})
                continue
            result = "evicted, replacement Ready"
        results.append({"uid": uid, "pod": where, "result": result})
    return changed, results
