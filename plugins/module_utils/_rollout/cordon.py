# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who cordoned a node, whether a drain is done, and whether a node goes back into service - decided
here (the ``cordon_reclaim``, ``drain_outcome`` and ``hold_reasons`` filters); the rollout machine's
``cordon``, ``drain`` and ``give_back`` steps (``_rollout.machine``) only sequence it (docs/safety.md).

- ``nodefix.k8s/cordoned-by`` (``{"run": id, "time": RFC 3339}``) is written in the same PATCH that
  cordons the node and removed in the one that gives it back. A cordoned node carrying it, written by
  another run, was cordoned by a run that never gave it back (killed, timed out): any later run gives
  it back - unless ``nodefix.k8s/held`` says why it stays (a fix or reboot that was not verified). A
  cordoned node without it is an operator's: it stays. kured keeps the same record in its lock
  (pkg/daemonsetlock: ``nodeID`` and the node's ``unschedulable`` before the drain) and uncordons on
  restart.
- A drain is done only when no pod that a drain evicts (not a DaemonSet's, not a mirror pod, not
  finished) is left on the node - kubernetes.core.k8s_drain returns ``changed`` with only a warning
  when its wait times out, and fails at the first PodDisruptionBudget 429 after evicting the pods
  before it (kubectl drain instead retries the 429 until its timeout and fails then).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

CORDONED_BY = "nodefix.k8s/cordoned-by"
HELD = "nodefix.k8s/held"
# roles that report and change nothing the after-audit reads (kernels are upgraded by people, or by the
# kernel upgrade path, whose own verdict is ``kernel_kept``)
REPORT_ONLY_ROLES = ("nodefix.k8s.kernel",)
# findings a role that ran reports but cannot close on the node: a zombie leaker is the workload's own bug (the
# pids role names it for its owner), a live gVisor sandbox keeps its size until its pod is recreated (the gvisor
# role lists the pods to recreate) - still there after the fix is expected, not "not verified"
REPORT_ONLY_FINDINGS = ("pids.zombie_leaker", "gvisor.sandbox_oversized", "gvisor.sandbox_outside_pod_slice")
MIRROR = "kubernetes.io/config.mirror"
_NAMES = 20


class CordonInputError(NodefixError, ValueError):
    """A Node, pod list or record of the wrong shape: nothing is decided from it."""


def _meta(obj, what):
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata") or {}, dict):
        raise CordonInputError("%s is not a Kubernetes object" % what)
    return obj.get("metadata") or {}


def _parse(value):
    try:
        data = json.loads(value)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) and str(data.get("run") or "").strip() else None


def reclaim(node, run_id):
    """What this run does with the node before anything else: {action, msg, by}.

    ``action``: ``give_back`` (cordoned by another nodefix run that did not give it back), ``clear`` (a
    schedulable node still carrying the record: it is removed, so a later operator's cordon is not taken
    for nodefix's), ``keep`` (cordoned, and it stays: an operator's, held, or a record that cannot be
    read - never uncordoned on a guess), ``none``. ``held``: True for a node an earlier run left held
    (cordoned with ``nodefix.k8s/held``): this run leaves it untouched - no drain, no fix, no reboot -
    and reports it held until a person clears the hold (issue 62)."""
    meta = _meta(node, "the Node")
    notes = meta.get("annotations") or {}
    if not isinstance(notes, dict):
        raise CordonInputError("the Node's annotations are not a mapping")
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    raw = notes.get(CORDONED_BY)
    by = _parse(raw) if raw is not None else None
    if not cordoned:
        if raw is not None:
            return {"action": "clear", "by": by, "held": False,
                    "msg": "schedulable, with a stale %s record: removed" % CORDONED_BY}
        return {"action": "none", "by": None, "held": False, "msg": ""}
    if notes.get(HELD) is not None:
        held = _parse(notes[HELD]) or {}
        name = meta.get("name") or "NODE"
        why = str(held.get("reason", notes[HELD]))[:600]
        return {"action": "keep", "by": by, "held": True, "msg": (
            "held cordoned by run %s since %s: %s - left untouched until a person clears the hold (kubectl annotate "
            "node %s %s- and kubectl uncordon %s)" % (held.get("run", "?"), held.get("time", "?"), why, name, HELD, name))}
    if raw is None:
        return {"action": "keep", "by": None, "held": False,
                "msg": "cordoned by an operator (no %s record): it stays" % CORDONED_BY}
    if by is None:
        return {"action": "keep", "by": None, "held": False,
                "msg": "cordoned, with a %s record that cannot be read (%.80s): it stays" % (CORDONED_BY, raw)}
    # (a record with this run's own id is an earlier run's too - the give-back runs before this run cordons
    # anything - e.g. -e nodefix_run=CHG123 reused for the re-run of a killed run: never left stranded)
    return {"action": "give_back", "by": by, "held": False,
            "msg": "cordoned by nodefix run %s at %s, which never gave it back (killed or stopped): given back"
                   % (by["run"], by.get("time", "?"))}


def _key(pod):
    meta = _meta(pod, "a pod")
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def drainable(pods):
    """{namespace/name: pod} of the pods a drain evicts: not a mirror pod, not a DaemonSet's, not finished."""
    if not isinstance(pods, (list, tuple)):
        raise CordonInputError("the pod list is not a list")
    out = {}
    for pod in pods:
        meta = _meta(pod, "a pod")
        if MIRROR in (meta.get("annotations") or {}):
            continue
        if any((o or {}).get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
            continue
        if ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
            continue
        out[_key(pod)] = pod
    return out


def _names(keys):
    keys = sorted(keys)
    return ", ".join(keys[:_NAMES]) + (" and %d more" % (len(keys) - _NAMES) if len(keys) > _NAMES else "")


def drain_outcome(before, after, error="", timeout=None):
    """{done, evicted, blocked, msg} of a drain from the node's pods before and after it and the drain's
    own error (``error``: the last failure message, empty when the module returned).

    ``blocked``: [{pod, why}] - each pod still on the node: ``terminating`` (deleted, not gone),
    ``refused by a PodDisruptionBudget`` (named in the 429), or ``still running``. Done only when none is
    left and the drain itself did not fail."""
    was, left = drainable(before), drainable(after)
    error = str(error or "")
    pdb = "disruption budget" in error.lower()
    blocked = []
    for key in sorted(left):
        if (left[key].get("metadata") or {}).get("deletionTimestamp"):
            why = "terminating"
        elif pdb and key in error:
            why = "refused by a PodDisruptionBudget"
        else:
            why = "still running"
        blocked.append({"pod": key, "why": why})
    evicted = sorted(set(was) - set(left))
    done = not blocked and not error
    if done:
        return {"done": True, "evicted": evicted, "blocked": [], "msg": "drained: evicted %s" % (_names(evicted) or "nothing")}
    # the drain's own error is the cause (an API error answer is that answer, never a timeout); only a drain
    # without one that left pods behind timed out
    cause = ("a PodDisruptionBudget refused an eviction until the drain timeout" if pdb
             else error[:600] if error
             else "timed out%s with pods still on the node" % (" after %s s" % timeout if timeout else ""))
    text = "drain failed: %s; evicted: %s; blocked: %s" % (
        cause, _names(evicted) or "none",
        "; ".join("%s (%s)" % (b["pod"], b["why"]) for b in blocked[:_NAMES]) or "none")
    return {"done": False, "evicted": evicted, "blocked": blocked, "msg": text}


def _checks_failed(after):
    checks = after.get("checks") or {}
    failed = set(name for name, facts in checks.items() if isinstance(facts, dict) and facts.get("error"))
    failed |= set(f.get("subject") for f in after.get("findings") or [] if f.get("id") == "audit.check_failed")
    return failed, set(checks)


def hold_reasons(remediation, before, after=None, verify_error="", kernel_kept=None):
    """Why a node this run cordoned must stay cordoned (not verified, not in service): [reason, ...],
    empty when it may go back. A reason: the remediation failed; the after-audit could not run; a finding a
    role that ran was to fix is still there, or its detector could not run after the fix; a new kernel
    was installed and not kept."""
    if not isinstance(remediation, dict):
        raise CordonInputError("the remediation record is not a mapping")
    status = str(remediation.get("status") or "")
    reasons = []
    remediation = redact(remediation)
    if status == "failed":
        reasons.append("remediation failed: %s" % (remediation.get("msg") or "failed"))
    elif status == "unreachable":
        # lost during its fixes or at the audit after: whatever was done to it is unverified
        reasons.append("unreachable at %s: %s" % (remediation.get("step") or "a step", remediation.get("msg") or ""))
    if kernel_kept is not None and not kernel_kept:
        reasons.append("the new kernel was not kept")
    if status != "ok":
        return reasons
    if verify_error or not isinstance(after, dict):
        return reasons + ["the audit after the fixes could not run%s" % (": %s" % verify_error if verify_error else "")]
    roles = set(remediation.get("roles") or []) - set(REPORT_ONLY_ROLES)
    meant = [f for f in (before or {}).get("findings") or []
             if isinstance(f, dict) and (f.get("fix") or {}).get("role") in roles
             and f.get("id") not in REPORT_ONLY_FINDINGS]
    failed, ran = _checks_failed(after)
    still = set(f.get("id") for f in after.get("findings") or [] if isinstance(f, dict))
    blind = sorted(set(f["id"] for f in meant if f.get("check") in failed or f.get("check") not in ran))
    open_ = sorted(set(f["id"] for f in meant if f["id"] in still) - set(blind))
    if open_:
        reasons.append("still open after the fix: %s" % _names(open_))
    if blind:
        reasons.append("not verified (its detector could not run after the fix): %s" % _names(blind))
    return reasons
