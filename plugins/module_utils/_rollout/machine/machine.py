# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""One node's rollout as a state machine (issue 62; docs/rollout-machine.md): ``begin`` runs the half before the
fix roles and answers the state; ``end`` runs the half after them. A half that stops (a ``Stop``: held, refused,
drain failed, stopped, failed) runs the give-back at once: what this run cordoned is uncordoned, the slots it took
are given back, the end Event posted and its claim released.

The result of either half: {outcome (an ``Outcome``, or None while the fixes are to run), detail, steps: [{name,
outcome, seconds, detail}], state, warnings (an Event the API did not accept)}. Check mode is the same machine with every write replaced by a "would ..."
step: the dry run's plan is ``steps``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import after
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import before
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import gates
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import kernel
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.context import new_state
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.ledger import Ledger
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import SKIPPED, Runner, Stop
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

# the steps of each half, in order (the names the result, the job's lines and the docs use)
BEFORE = ("plan", "claim", "root", "kernel_boot", "control_plane", "backoff", "reboot_gate", "reclaim_slots", "start_event",
          "evidence", "storm", "cordon", "drain", "require_drain", "fix")
AFTER = ("verify", "kernel_boot", "hold_decision")
# without an API server (no kubeconfig: remediate.yml's path without nodefix_kubeconfig) the node is not claimed,
# gated, counted again by the storm breaker, cordoned, drained, given back or told by an Event: these steps only, and
# no give-back
BEFORE_LOCAL = ("plan", "root", "evidence", "require_drain", "fix")
FINISH = ("give_back", "release_slots", "end_event", "release")


def _before_steps(ctx, state, ledger):
    node = {}

    def read():
        node["now"] = ledger.read_node()
        return node["now"]
    return (
        ("plan", lambda: before.plan(ctx, state)),
        ("claim", lambda: before.claim(ctx, state, ledger)),
        ("root", lambda: before.root(ctx, state)),
        ("kernel_boot", lambda: kernel.trace(ctx, state, ledger)),
        ("control_plane", lambda: before.control_plane(ctx, state, ledger)),
        ("backoff", lambda: gates.reboot_backoff(ctx, state, read()) if state["fix_roles"] else (
            "skipped", "nothing to fix")),
        ("reboot_gate", lambda: gates.reboot_gate(ctx, state)),
        ("reclaim_slots", lambda: gates.reclaim_slots(ctx, state, read())),
        ("start_event", lambda: before.start_event(ctx, state)),
        ("evidence", lambda: before.evidence(ctx, state)),
        ("storm", lambda: before.storm(ctx, state)),
        ("cordon", lambda: before.cordon_step(ctx, state, ledger)),
        ("drain", lambda: before.drain_step(ctx, state, ledger)),
        ("require_drain", lambda: before.require_drain(ctx, state)),
        ("fix", lambda: before.fix(ctx, state, ledger)),
    )


def _runner(ctx):
    ctx.runner = Runner(ctx.clock, ctx.check_mode, ctx.after_step, ctx.redact)
    return ctx.runner


def _result(ctx, state):
    state["steps"] = state.get("steps", []) + [s.as_dict() for s in ctx.runner.steps]
    return {"outcome": state["outcome"], "detail": state["detail"], "steps": [s.as_dict() for s in ctx.runner.steps],
            "lines": [s.line() for s in ctx.runner.steps], "state": state, "warnings": list(ctx.runner.warnings)}


def begin(ctx):
    """The half before the fixes. ``outcome`` None: run the fix roles, then ``end``; else the rollout is over."""
    runner, state, ledger = _runner(ctx), new_state(ctx.plan), Ledger(ctx)
    if ctx.api is None:
        gates.no_reboot_undrained(state)
    try:
        steps = dict(_before_steps(ctx, state, ledger))
        for name in BEFORE if ctx.api is not None else BEFORE_LOCAL:
            runner.run(name, steps[name])
    except Stop as stop:
        state.update(outcome=stop.outcome, detail=stop.detail)
        _finish(ctx, state, ledger)
        return _result(ctx, state)
    if not state["fix_roles"]:
        state["outcome"] = Outcome.HELD if state["reboot_held"] else Outcome.NOTHING_TO_FIX
        state["detail"] = ("reboot held: %s" % "; ".join(state["reboot_held"]) if state["reboot_held"]
                           else ctx.plan.get("skip") or "nothing to fix")
        _finish(ctx, state, ledger)
    state["record"] = ledger.record
    return _result(ctx, state)


def end(ctx, state, remediation):
    """The half after the fixes: ``remediation`` is what the roles did ({status: ok|failed|unreachable, roles, msg,
    kernel_kept}); ``state`` is ``begin``'s."""
    runner, ledger = _runner(ctx), Ledger(ctx)
    ledger.record = state.get("record")
    # a node that went down for its reboot and is not back in service keeps its slots (release_slots): no second
    # node goes down beside it
    state["not_back"] = bool(remediation.get("reboot_started")) and not remediation.get("reboot_back")
    try:
        steps = {"verify": lambda: after.verify(ctx, state, remediation, ledger),
                 "kernel_boot": lambda: kernel.settle(ctx, state, remediation, ledger),
                 "hold_decision": lambda: after.hold_decision(ctx, state, remediation)}
        for name in AFTER:
            runner.run(name, steps[name])
    except Stop as stop:
        state.update(outcome=stop.outcome, detail=stop.detail)
    _finish(ctx, state, ledger)
    return _result(ctx, state)


def recheck(ctx, state, kernel_release=""):
    """Right before the reboot: the reboot gate's window, blocking pods and alerts, and a control-plane node's etcd
    health and quorum, judged again, and this run's claim renewed to cover the reboot (``gates.recheck``) - the kernel
    path's (``kernel_release``: the kernel its install arms next) with the record's ``kernelPending`` in the same write;
    ``outcome`` stays None (the rollout goes on, without the reboot when it is held) - unless the claim was taken
    over by another run: then ``failed``, the reboot dropped, and nothing more is written (fail closed)."""
    runner, ledger = _runner(ctx), Ledger(ctx)
    ledger.record = state.get("record")
    try:
        runner.run("reboot_recheck", lambda: gates.recheck(ctx, state, ledger, kernel.arming(ctx, kernel_release)))
    except Stop as stop:        # the reboot is dropped whatever stopped the step
        gates.drop_reboot(state, [stop.detail])
        if ledger.lost or stop.outcome == Outcome.FAILED:
            # another run holds the node now (or its record was overwritten): this run fails, the play's fixes stop
            state.update(outcome=Outcome.FAILED, detail=stop.detail)
    state["record"] = ledger.record
    return _result(ctx, state)


def _finish(ctx, state, ledger):
    """The give-back: each step runs whatever the one before it did (a failed uncordon does not keep a slot). A run
    that lost its claim (another run's record is on the node) gives nothing back: the cordon, the slots (held by
    the node's name) and the record are the claim holder's to judge - only the end Event is posted. Without an API
    server there is nothing to give back."""
    if ctx.api is None:
        return
    kernel.ends_held(state)     # (a kernel boot found unconfirmed is never a clean rollout)
    runner = ctx.runner
    steps = {"give_back": lambda: after.give_back(ctx, state, ledger),
             "release_slots": lambda: after.release_slots(ctx, state, ledger),
             "end_event": lambda: after.end_event(ctx, state),
             "release": lambda: after.release(ctx, state, ledger)}
    for name in FINISH:
        step = steps[name]
        if ledger.lost and name != "end_event":
            runner.run(name, lambda: (SKIPPED, "this run lost its claim (%s): left to the run that holds it"
                                      % ledger.lost))
            continue
        try:
            runner.run(name, step)
        except Stop as stop:
            if state["outcome"] in (None, Outcome.OK, Outcome.NOTHING_TO_FIX):
                state.update(outcome=stop.outcome, detail=stop.detail)
            elif state["outcome"] in (Outcome.HELD, Outcome.STOPPED) and stop.outcome == Outcome.FAILED:
                # a give-back that failed (a slot or a cordon left behind) is a failure whatever ended the rollout
                state.update(outcome=Outcome.FAILED, detail="%s (the rollout had ended %s: %s)" % (
                    stop.detail, state["outcome"], state["detail"]))
