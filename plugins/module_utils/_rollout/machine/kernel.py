# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""A kernel upgrade stopped between its install - which arms the new kernel's one-time boot (``kernel_boot
state=once``: ``grub-reboot``/``grub2-editenv next_entry``) - and its boot's confirmation (``state=confirm``): the run
killed, the fix phase failed, the node lost. The record on the Node says it (``kernelPending``, written with the
kernel path's recheck right before the install: ``gates.renew_for_reboot``), and the machine confirms or disarms:

- ``settle`` (the after half's step ``kernel_boot``): the kernel role confirmed the boot (``remediation.kernel_confirmed``)
  - the field is removed; else the boot is disarmed on the node (``ctx.kernel_disarm``: ``kernel_boot state=disarm``,
  GRUB's default back on the running kernel, ``next_entry`` and the node's pending boot cleared) - the machine's
  ``always`` for a fix phase that failed after arming. A node that runs the armed kernel, never confirmed, does not
  keep it: GRUB's default goes back on the previous kernel, the kernel is recorded as not kept, and the node ends
  ``held`` (the disarm's ``held`` says why; the previous kernel not known: nothing is changed and the field stays);
- ``trace`` (the before half's step ``kernel_boot``): a run finds the field its dead predecessor left (carried by the
  claim: ``ledger.claim``), disarms, and reports it - the rollout ends ``held`` at best, never clean (``ends_held``);
- a disarm that could not be made keeps the field, and the record with it (``after.release``), for the next run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import DONE, SKIPPED, WOULD, Stop, node_side
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

PENDING = record.KERNEL_PENDING


def pending_of(ledger):
    return (ledger.record or {}).get(PENDING)


def arming(ctx, release):
    """The field the kernel path's recheck writes right before the install (None: no kernel upgrade)."""
    if not release:
        return None
    return {"release": release, "run": ctx.run_id, "at": ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ")}


def _disarm(ctx, state, ledger, pending, what):
    """(step outcome, detail) of disarming ``pending`` on the node; the field removed once disarmed. Not disarmed:
    ``state['kernel_armed']`` says why (the field and the record are kept for the next run) and the step is failed."""
    if ctx.check_mode:
        return WOULD, "would disarm it: %s" % what
    if ctx.kernel_disarm is None:
        out, error = None, "no node-side disarm was given (nodefix.k8s.kernel_boot state=disarm)"
    else:
        out, error = node_side(lambda: ctx.kernel_disarm(pending["release"]))
    if error:
        state["kernel_armed"] = ("%s; its one-time boot could not be disarmed: %s - the record on the Node keeps %s, "
                                 "the next run disarms it" % (what, error, PENDING))
        return Outcome.FAILED, state["kernel_armed"]
    out = out or {}
    if out.get("held"):
        # the node runs the armed kernel, never confirmed: not kept, GRUB's default back on the previous kernel - or,
        # that kernel not known, nothing changed on the node (the field and the record kept: every run holds again)
        if out.get("disarmed"):
            ledger.note(**{PENDING: None})
        state["kernel_trace"] = "%s: %s" % (what, out["held"])
        return Outcome.HELD, state["kernel_trace"]
    ledger.note(**{PENDING: None})
    state["kernel_trace"] = "%s: disarmed - GRUB's default is the running kernel %s%s" % (
        what, out.get("running_release") or "?", ", the one-time boot cleared" if out.get("disarmed")
        else " (nothing was left armed)")
    return DONE, state["kernel_trace"]


def trace(ctx, state, ledger):
    """The before half's ``kernel_boot``: an unconfirmed kernel boot an earlier run left (its record carried by this
    run's claim) is disarmed and reported; one that cannot be disarmed holds the node (nothing drained or fixed)."""
    pending = pending_of(ledger)
    if not pending:
        return SKIPPED, "no kernel upgrade left unconfirmed on the node"
    what = ("run %s's kernel upgrade stopped between arming kernel %s's one-time boot and its confirmation (the record's "
            "%s since %s)" % (pending.get("run"), pending["release"], PENDING, pending.get("at", "?")))
    outcome, said = _disarm(ctx, state, ledger, pending, what)
    if outcome in (Outcome.FAILED, Outcome.HELD):  # (HELD: the armed kernel runs unconfirmed - a person decides)
        raise Stop(Outcome.HELD, "held: %s; nothing was drained, restarted or rebooted" % said)
    return outcome, said


def settle(ctx, state, remediation, ledger):
    """The after half's ``kernel_boot``: this run armed a kernel's one-time boot (the record's field) - confirmed by the
    kernel role, the field is removed; else disarmed here."""
    pending = pending_of(ledger)
    if not pending:
        return SKIPPED, "no kernel's one-time boot armed by this run"
    if remediation.get("kernel_confirmed"):
        if ctx.check_mode:
            return WOULD, "would clear %s: the kernel role confirmed kernel %s's boot" % (PENDING, pending["release"])
        ledger.note(**{PENDING: None})
        return DONE, "the kernel role confirmed kernel %s's boot (kept, or recorded as not kept): nothing is left " \
                     "armed" % pending["release"]
    why = remediation.get("msg") or remediation.get("status") or "the confirmation did not run"
    return _disarm(ctx, state, ledger, pending, "this run's kernel upgrade stopped between arming kernel %s's "
                   "one-time boot and its confirmation (%s)" % (pending["release"], why))


def ends_held(state):
    """Before the give-back: a kernel boot found unconfirmed and disarmed is never a clean rollout (``held``, a node
    this run cordoned held with ``nodefix.k8s/held`` saying it); one that could not be disarmed is ``failed``."""
    clean = state["outcome"] in (None, Outcome.OK, Outcome.NOTHING_TO_FIX)
    if state.get("kernel_armed") and clean:
        state.update(outcome=Outcome.FAILED, detail=state["kernel_armed"])
    elif state.get("kernel_trace") and clean:
        state.update(outcome=Outcome.HELD, detail="held: %s - a person checks the node" % state["kernel_trace"])
    said = state.get("kernel_trace") or state.get("kernel_armed")
    if said and state["cordoned"] and said not in (state.get("hold") or []):
        state["hold"] = list(state.get("hold") or []) + [said]


def kept(ledger):
    """Why the release keeps this run's record ("" when it does not): an armed boot not disarmed."""
    pending = pending_of(ledger)
    if not pending:
        return ""
    return ("kernel %s's one-time boot may still be armed on the node (%s): the record stays, so the next run "
            "disarms it" % (pending["release"], PENDING))
