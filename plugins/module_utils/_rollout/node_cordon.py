# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""One read of the Node feeds every decision before a drain (nodefix.k8s.node_cordon): who cordoned it
and whether an earlier run's cordon is given back (``_rollout.cordon.reclaim``), whether it was
cordoned before this run, the pods a drain will be judged against, and the cordon itself - in one
module run on the controller instead of four (two reads of the same Node, the pod list, the cordon's
PATCH; docs/safety.md "Fewer API round trips").

The requests and their order are those the playbook made before: GET the Node; the give-back's
PATCH (uncordon, record removed) or the stale record's removal; then, for a node to drain, the pods
on it (``spec.nodeName``) and the cordon's one PATCH that also writes ``nodefix.k8s/cordoned-by``
(no moment where the node is cordoned without the record). In check mode nothing is written and, for the
dry run's plan, the PodDisruptionBudgets are listed once (``_rollout.budgets``: which would refuse the drain's
evictions now; a failed list is said in the plan, never a failure). The requests are ``_k8s.node_api``'s (every
one with a timeout, the client's retry policy); an answer
that is not well-formed fails, naming it, before anything is written from it.

Every PATCH is conditional on the read it was decided from (the Node's ``metadata.resourceVersion``: a person's
cordon or another run's write made in between is never overwritten): a Node without one is never written (fail
closed: the give-back is then a warning, the cordon a CordonError), and a 409 Conflict - the Node changed since -
reads it again and decides again, once (a second 409 fails as any write does).

A failed give-back PATCH is a warning, as it was (the node stays as it was read: cordoned, so this
run treats it as cordoned before and never uncordons it). Any other failure is a NodefixError; when
it comes after the node's state was known (the pod list, the cordon), ``CordonError.cordoned_before``
carries that state, so the caller gives back a node it may have cordoned.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import budgets as _budgets
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon as _cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record as _rollout

# the fields of a pod the drain's verdict reads (_rollout.cordon.drain_outcome), nothing else: a pod's spec
# and its other annotations (kubectl's last-applied-configuration) may carry secrets
_POD_META = ("namespace", "name", "uid", "deletionTimestamp")


class CordonError(NodefixError):
    """A read or write of the cordon failed; ``cordoned_before`` is the node's state before this run
    when it was known (None when it was not: the caller then leaves the node as it is)."""

    def __init__(self, msg, cordoned_before=None, reclaim=None):
        super(CordonError, self).__init__(msg)
        self.cordoned_before = cordoned_before
        self.reclaim = reclaim


def pod_summary(pod):
    """What ``drain_outcome`` needs of one pod: its name, namespace, uid, deletion, owners' kinds, whether
    it is a mirror pod, its phase."""
    meta = _cordon._meta(pod, "a pod")  # pylint: disable=protected-access
    out = dict((k, meta[k]) for k in _POD_META if meta.get(k) is not None)
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        raise _cordon.CordonInputError("a pod's ownerReferences is not a list")
    out["ownerReferences"] = [{"kind": (o or {}).get("kind"), "name": (o or {}).get("name")} for o in owners]
    notes = meta.get("annotations") or {}
    if not isinstance(notes, dict):
        raise _cordon.CordonInputError("a pod's annotations are not a mapping")
    if _cordon.MIRROR in notes:
        out["annotations"] = {_cordon.MIRROR: notes[_cordon.MIRROR]}
    phase = (pod.get("status") or {}).get("phase")
    return {"metadata": out, "status": {"phase": phase} if phase else {}}


def cordon_body(run_id, now, node=None):
    """The cordon's one PATCH: ``spec.unschedulable`` and the ``nodefix.k8s/cordoned-by`` record together - and,
    when ``node`` carries this run's rollout record (``nodefix.k8s/rollout``, ``_rollout.record``), that record
    moved to the drain with its lease renewed, in the same PATCH."""
    record = {"run": str(run_id), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}
    notes = {_cordon.CORDONED_BY: json.dumps(record, sort_keys=True)}
    try:
        rollout = _rollout.read(((node or {}).get("metadata") or {}).get("annotations"))
    except _rollout.MalformedRecord:
        rollout = None
    if rollout and rollout["run"] == str(run_id):
        when = datetime.datetime.fromtimestamp(int(now), datetime.timezone.utc)
        notes[_rollout.ANNOTATION] = _rollout.text(_rollout.moved(rollout, "drain", when, cordonedBefore=False))
    return {"metadata": {"annotations": notes}, "spec": {"unschedulable": True}}


GIVE_BACK = {"metadata": {"annotations": {_cordon.CORDONED_BY: None}}, "spec": {"unschedulable": False}}
CLEAR = {"metadata": {"annotations": {_cordon.CORDONED_BY: None, _cordon.HELD: None}}}


def _node(answer, name):
    if not isinstance(answer, dict) or not isinstance(answer.get("metadata"), dict) \
            or answer["metadata"].get("name") != name or not isinstance(answer.get("spec") or {}, dict):
        raise CordonError("reading Node %s: the API server's answer is not that Node (%.120r)" % (name, answer))
    return answer


class _ReadAgain(NodefixError):
    """The Node changed since it was read (409 Conflict on a conditional PATCH): read it again and decide again."""


def _patch(api, name, node, body):
    """The PATCH ``body`` conditional on ``node`` as read (its resourceVersion); the Node as written. A Node read
    without a resourceVersion is never written (NodefixError: fail closed); a 409 raises _ReadAgain."""
    version = (node.get("metadata") or {}).get("resourceVersion")
    if not version:
        raise NodefixError("the API server's Node %s has no metadata.resourceVersion: it is only written "
                           "conditionally, so nothing was written" % name)
    try:
        return _node(api.patch_node(name, body, version), name)
    except NodefixError as exc:
        if getattr(exc, "status", None) == 409:
            raise _ReadAgain(str(exc))
        raise


def _reclaim(api, node, name, run_id, check_mode):
    """The reclaim decision and its PATCH; (decision, node as it is now). A failed PATCH is kept in
    ``decision['error']`` and leaves the node as it was read; a 409 raises _ReadAgain."""
    try:
        decision = dict(_cordon.reclaim(node, run_id), error="")
    except _cordon.CordonInputError as exc:
        raise CordonError("reading Node %s: %s" % (name, exc))
    body = GIVE_BACK if decision["action"] == "give_back" else CLEAR if decision["action"] == "clear" else None
    if body is None or check_mode:
        return decision, node
    try:
        return decision, _patch(api, name, node, body)
    except _ReadAgain:
        raise
    except NodefixError as exc:
        decision["error"] = "could not %s: %s" % (
            "give it back" if decision["action"] == "give_back" else "remove the stale record", exc)
        return decision, node


def run(api, name, run_id, cordon=False, check_mode=False, now=None):
    """Read the Node once and do what it calls for. {found, reclaim, changed} and, with ``cordon``,
    {cordoned_before, cordoned, pods}. A node the API server does not know: found False (with
    ``cordon``, a CordonError: never drained on a guess). A Node that changed between the read and a PATCH (409) is
    read again and judged again, once; a second 409 is a CordonError."""
    try:
        return _run(api, name, run_id, cordon, check_mode, now)
    except _ReadAgain:
        pass
    try:
        return _run(api, name, run_id, cordon, check_mode, now)
    except _ReadAgain as exc:
        raise CordonError("writing Node %s: it changed between each read and its write, twice (%s); read again "
                          "next run" % (name, exc))


def _run(api, name, run_id, cordon, check_mode, now):
    answer = api.get_node(name)
    if answer is None:
        if cordon:
            raise CordonError("node %s not found in the API server (set nodefix_node_name)" % name)
        return {"found": False, "reclaim": {"action": "none", "msg": "", "by": None, "held": False, "error": ""},
                "changed": False}
    decision, node = _reclaim(api, _node(answer, name), name, run_id, check_mode)
    out = {"found": True, "reclaim": decision,
           "changed": decision["action"] in ("give_back", "clear") and not decision["error"]}
    if not cordon:
        return out
    before = bool((node.get("spec") or {}).get("unschedulable"))
    out.update(cordoned_before=before, cordoned=False)
    if decision.get("held"):
        # held for a person by an earlier run: not drained, not read further - the caller reports it held
        return out
    try:
        raw = api.list_pods(name)
        out["pods"] = [pod_summary(p) for p in raw]
    except NodefixError as exc:
        raise CordonError(str(exc), before, decision)
    if check_mode:
        out.update(budgets_now(api, raw))
    if before or check_mode:
        return out
    try:
        _patch(api, name, node, cordon_body(run_id, time.time() if now is None else now, node))
    except _ReadAgain:
        raise
    except NodefixError as exc:
        raise CordonError("cordoning Node %s: %s" % (name, exc), before, decision)
    out.update(cordoned=True, changed=True)
    return out


def budgets_now(api, pods):
    """A dry run's look at the PodDisruptionBudgets (one list, all namespaces): {budgets} that would refuse the
    drain's evictions now, or {budgets_error} when they could not be read (a plan that says so, never a failure)."""
    evictable = []
    for pod in _cordon.drainable(pods).values():   # the pods the drain evicts: its own choice, not a second one
        meta = pod.get("metadata") or {}
        status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
        ready = [c.get("status") == "True" for c in status.get("conditions") or []
                 if isinstance(c, dict) and c.get("type") == "Ready"]
        evictable.append({"namespace": meta.get("namespace"), "name": meta.get("name"),
                          "labels": meta.get("labels") if isinstance(meta.get("labels"), dict) else {},
                          "phase": status.get("phase"), "deleting": bool(meta.get("deletionTimestamp")),
                          "ready": ready[0] if ready else False})
    if not evictable:
        return {"budgets": []}
    try:
        return {"budgets": _budgets.blocking(api.list_budgets(), evictable)}
    except NodefixError as exc:
        return {"budgets_error": "could not read the PodDisruptionBudgets: %s" % exc}
