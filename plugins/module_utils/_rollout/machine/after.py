# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The machine's half AFTER the fix roles ran, and the give-back every rollout ends with:

verify -> hold_decision -> give_back -> release_slots -> end_event -> release

``hold_decision`` is ``_rollout.cordon.hold_reasons`` (the remediation failed or was lost, the after-audit could not
run, a finding a role that ran was to fix is still open or blind, the new kernel was not kept); a node this run
cordoned goes back into service only without a reason, else it stays cordoned with ``nodefix.k8s/held`` saying
why. A node cordoned before the run stays cordoned, whatever happened."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import gates
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import kernel
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import reserve as _reserve
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import ledger as _ledger
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import DONE, SKIPPED, WOULD, Stop, \
    post_events
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

_STATUS = {"ok": Outcome.OK, "failed": Outcome.FAILED, "unreachable": Outcome.UNREACHABLE}
GIVE_BACK = {"metadata": {"annotations": {cordon.CORDONED_BY: None, cordon.HELD: None}},
             "spec": {"unschedulable": False}}


def renew(ctx, ledger):
    """The after half's first write: this run's record moved to ``verify``, its lease renewed to cover the give-back's
    longest wait (the etcd member's, ``etcd_wait``) - and checked to be this run's still: a run whose claim was taken
    over (a second controller judged it dead) stops here (Stop, ``ledger.lost`` set) and gives nothing back. A write
    the API server did not take is said ("" when written): the verify goes on, and the give-back's own write checks
    the claim again before anything is given back."""
    if ctx.api is None:
        return ""
    try:
        ledger.enter("verify", cover=ctx.options["etcd_wait"])
    except Stop:
        raise
    except NodefixError as exc:
        return "; the record could not be renewed (%s)" % exc
    return ""


def verify(ctx, state, remediation, ledger):
    said = renew(ctx, ledger)
    if remediation.get("status") == "unreachable":
        return SKIPPED, "the node was lost at its fixes: not audited again" + said
    if ctx.check_mode:
        return WOULD, "would audit the node again"
    try:
        state["audit_after"] = ctx.audit()
    except NodefixError as exc:
        state["audit_after"], state["verify_error"] = None, "%s" % exc
        if exc.details.get("unreachable"):      # the node was lost: unreachable at this step, as the play said
            state["unreachable_at"] = "audit after"
            return Outcome.UNREACHABLE, "the node could not be reached for the audit after the fixes: %s%s" % (
                exc, said)
        return Outcome.FAILED, "the audit after the fixes could not run: %s%s" % (exc, said)
    return DONE, "audited again: %d finding(s)%s" % (len((state["audit_after"] or {}).get("findings") or []), said)


def hold_decision(ctx, state, remediation):
    """The outcome and, for a node this run cordoned, why it stays cordoned (``state['hold']``)."""
    outcome = Outcome.UNREACHABLE if state.get("unreachable_at") else _STATUS.get(remediation.get("status"),
                                                                                  Outcome.FAILED)
    state["hold"] = []
    if state["cordoned"] and not ctx.check_mode:
        state["hold"] = cordon.hold_reasons(remediation, ctx.audit_before, state.get("audit_after"),
                                            state.get("verify_error", ""), remediation.get("kernel_kept"))
    if state["hold"] and outcome != Outcome.UNREACHABLE:
        outcome = Outcome.NOT_VERIFIED
    state["outcome"] = outcome
    if state["hold"]:
        state["detail"] = "not verified, left cordoned (%s): %s" % (cordon.HELD, "; ".join(state["hold"]))
    else:
        state["detail"] = remediation.get("msg") or ("fixed and verified" if outcome == Outcome.OK else outcome)
    return outcome, state["detail"]


def resumed_hold(state):
    """A node this run took over mid-fix from a dead run: given back only when this run verified it (ok: the
    hold decision found no reason) or it has nothing to fix now (its audit is the verify), else held."""
    if state.get("resumed") and state["outcome"] not in (Outcome.OK, Outcome.NOTHING_TO_FIX) and not state.get("hold"):
        state["hold"] = ["resumed from a dead run's phase %s and not verified by this run (%s)"
                         % (state["resumed"], state["outcome"])]


def give_back(ctx, state, ledger):
    """Uncordon the node this run cordoned (or resumed), or hold it with ``nodefix.k8s/held``; never one cordoned
    before the run - as the record on the Node says (``cordonedBefore``), whatever the state the play passed back
    says. Each PATCH is conditional on the Node as last read (``_conditional``)."""
    if state.get("cordon_unknown"):
        return SKIPPED, "whether this run's cordon landed is unknown (%s): its record is kept, so the next run " \
                        "gives the cordon back" % state["cordon_unknown"]
    if not state["cordoned"]:
        if state["cordoned_before"]:
            return SKIPPED, "%s was cordoned before this run: it stays cordoned" % ctx.node
        return SKIPPED, "not cordoned by this run"
    resumed_hold(state)
    node = ledger.enter("give_back")
    if not ctx.check_mode and (ledger.record or {}).get("cordonedBefore") is not False:
        state["cordoned"] = False
        return SKIPPED, ("the record on %s says it was cordoned before this run (cordonedBefore %s): it stays cordoned"
                         % (ctx.node, json.dumps((ledger.record or {}).get("cordonedBefore"))))
    if state.get("hold"):
        note = {"run": ctx.run_id, "time": ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
                "reason": "; ".join(state["hold"])[:900]}
        body = {"metadata": {"annotations": {cordon.CORDONED_BY: None, cordon.HELD: json.dumps(note, sort_keys=True)}}}
        outcome, detail = ctx.runner.would("hold %s cordoned (%s): %s" % (ctx.node, cordon.HELD, note["reason"]),
                                           lambda: _conditional(ctx, ledger, node, body, "held"))
        return (Outcome.HELD if outcome == DONE else outcome), detail
    outcome, detail = ctx.runner.would("uncordon %s" % ctx.node,
                                       lambda: _conditional(ctx, ledger, node, GIVE_BACK, "uncordoned"))
    state["cordoned"] = False
    return outcome, detail


def _conditional(ctx, ledger, node, body, done):
    """The give-back's PATCH, conditional on ``node``'s resourceVersion: a Node changed since (409) is read again
    and judged again - a cordon without ``nodefix.k8s/cordoned-by`` is a person's (``_rollout.cordon.reclaim``'s
    rule) and is not undone; else the PATCH is tried again on the new read (three times at most). The detail."""
    for _attempt in range(3):
        # no resourceVersion: not sent, the node left as it is (cordoned) for the next run - the step fails, saying so
        version = _ledger.required_version(node, ctx.node, "the give-back (%s; left cordoned for the next run)" % done)
        try:
            ctx.api.patch_node(ctx.node, body, version)
            return None
        except NodefixError as exc:
            if getattr(exc, "status", None) != 409:
                raise
        node = ledger.read_node()
        if (node.get("spec") or {}).get("unschedulable") and cordon.CORDONED_BY not in _ledger.annotations(node):
            return "not %s: %s changed meanwhile and is cordoned without %s now - a person's cordon, it stays" % (
                done, ctx.node, cordon.CORDONED_BY)
    raise NodefixError("the give-back's PATCH of %s met a changed Node three times (409 Conflict): left for the next "
                       "run" % ctx.node)


def release_slots(ctx, state, ledger):
    if not state["slots"]:
        return SKIPPED, "no slot held"
    return gates.release_slots(ctx, state, ledger.read_node)


def end_event(ctx, state):
    if not ctx.options["events"]:
        return SKIPPED, "nodefix_events is false"
    if ctx.check_mode:
        return WOULD, "would post the end Event (%s)" % state["outcome"]
    return post_events(ctx, state, "end", "the end Event (%s)" % state["outcome"])


def release(ctx, state, ledger):
    if not state["claimed"]:
        return SKIPPED, "not claimed by this run"
    if state.get("cordon_unknown"):
        return SKIPPED, "kept this run's record: whether its cordon landed is unknown - the next run gives it back"
    armed = kernel.kept(ledger)
    if armed:
        return SKIPPED, "kept this run's record: " + armed
    previous = state.get("previous")
    if _ledger.resume(previous) == "resume" and not state.get("reclaimed"):
        # this run took over a dead run's rollout past its drain and stopped before its cordon step, which resumes
        # or gives back a dead run's cordon (the storm breaker, a gate): the record goes back to that run's phase,
        # so the next run resumes it too - the node stays cordoned until a run verifies it - and never takes the
        # dead run's cordon for one to give back
        said = ("run %s's rollout (phase %s) was not resumed by this run: the record stays at that phase for the "
                "next run, the node cordoned until a run verifies it" % (previous.get("run"), previous["phase"]))
        if ctx.check_mode:
            return WOULD, "would keep the record: " + said
        ledger.enter(previous["phase"])
        return DONE, "kept the record: " + said
    if ctx.check_mode:
        return WOULD, "would release the claim"
    # this node's storm reserve first (this run's, or one a run killed before its cordon left): given back
    try:
        reserve = _reserve.give_back(ctx)
    except NodefixError as exc:
        reserve = "the storm breaker's reserve could not be given back (%s): stale once the claim is released" % exc
    try:
        gone = ledger.release()
    except NodefixError as exc:
        return DONE, "; ".join(s for s in (reserve, "this run's record could not be removed: %s - its lease releases "
                                                    "it" % exc) if s)
    state["claimed"] = False
    if gone:
        return DONE, "; ".join(s for s in (reserve, "released the claim") if s)
    return (DONE if reserve else SKIPPED), "; ".join(s for s in (reserve, "the record on the node was not this run's") if s)
