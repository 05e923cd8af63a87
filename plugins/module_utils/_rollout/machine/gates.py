# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The machine's gates before anything is drained - each the existing decision, called once, from one place:

- the control-plane guard (``_reboot.control_plane.guard``: etcd membership, etcd health, the quorum rule with
  ``quorum_override``, the control plane's one slot): a node it holds is held whole;
- the reboot backoff (``_reboot.backoff.decide``: reasons open again, ``max_reboots`` inside the backoff);
- the reboot gate (the window, the blocking pods, the alerts, the reboot lock's slot): a held reboot is dropped
  from the fixes (the rest go on), as ``remediate.yml`` does;
- the slots an earlier run left (``_reboot.control_plane.reclaim``: given back once the node is Ready).

In check mode a lock is asked as a dry run (``acquire(dry_run=True)``): nothing is taken."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import control_plane
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import kernel
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.context import REBOOT_ROLE, lease_for, reboot_worst
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import DONE, SKIPPED, WOULD, Stop
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome


class _CheckLock(gate.LeaseLock):
    """A lock asked as a dry run: ``acquire`` says which slot it would take and takes none."""

    def acquire(self, reason="", dry_run=False):
        return super(_CheckLock, self).acquire(reason, dry_run=True)


def lock_id(ctx, name):
    return "%s/%s" % (ctx.options["lock_namespace"], name)


def locks(ctx):
    """{lock id: LeaseLock} of the control plane's lock and the reboot lock, held by this node's name (a re-run of the
    same node finds the slot a dead run of it left by that name, ``LeaseLock.mine``). Each lock's ``observed`` is the
    context's one store (``ctx.lock_observed``): what an earlier step, half or node saw of a slot counts, so a slot
    whose holder stopped renewing is taken over once this controller has seen it unchanged for its TTL."""
    kind = _CheckLock if ctx.check_mode else gate.LeaseLock
    o = ctx.options
    out = {}
    for name, slots in ((o["control_plane_lock_name"], 1), (o["lock_name"], o["lock_slots"])):
        key = lock_id(ctx, name)
        seen = ctx.lock_observed.get(key)
        if not isinstance(seen, dict):      # (what the caller kept may be anything: never trusted as a mapping)
            seen = ctx.lock_observed[key] = {}
        out[key] = kind(ctx.api, o["lock_namespace"], name, slots, ctx.node, o["lock_ttl"], ctx.clock, observed=seen,
                        mono=ctx.lock_time)
    return out


def control_plane_guard(ctx, state, node):
    """(step outcome, detail); Stop(held) for a node the guard holds or could not decide."""
    o = ctx.options
    cp_id = lock_id(ctx, o["control_plane_lock_name"])
    # (the slot's Lease names the run that holds it, beside its holder - the node: nodefix.k8s/reason)
    reason = "run %s: %s: %s" % (ctx.run_id, ", ".join(ctx.plan.get("disruptive") or []), ", ".join(state["fix_roles"]))
    try:
        out = control_plane.guard(node, o["control_plane"], ctx.api, locks(ctx)[cp_id], reason,
                                  health_command=o["etcd_health_command"] or None, run_command=ctx.run_command,
                                  hint=o["control_plane_hint"], accept_quorum_loss=o["quorum_override"])
    except NodefixError as exc:
        raise Stop(Outcome.HELD, "held: control plane: the guard could not decide: %s; nothing was drained, "
                                 "restarted or rebooted" % exc)
    if out["held_by"]:
        raise Stop(Outcome.HELD, "held: %s; nothing was drained, restarted or rebooted" % "; ".join(out["held_by"]))
    if not out["control_plane"]:
        return SKIPPED, "not a control-plane node or etcd member"
    state["slots"].append(cp_id)
    return (WOULD if ctx.check_mode else DONE), "%s the control plane's slot %s" % (
        "would take" if ctx.check_mode else "took", out["lock"]["slot"])


def reboot_backoff(ctx, state, node):
    """(step outcome, detail): a held reboot is dropped from the fixes (``state['reboot_held']`` says why)."""
    if not state["reboot_reasons"]:
        return SKIPPED, "no reboot planned"
    o = ctx.options
    boot = ((node.get("status") or {}).get("nodeInfo") or {}).get("bootID")
    out = backoff.decide((node.get("metadata") or {}).get("annotations"), state["reboot_reasons"], ctx.clock(),
                         o["backoff_seconds"], ctx.node, boot_id=boot, max_reboots=o["max_reboots"])
    if out["held"]:
        drop_reboot(state, out["held_by"])
        return Outcome.HELD, "reboot held: %s" % "; ".join(out["held_by"])
    return DONE, out["not_rebooted"] or "the backoff allows the reboot"


def no_reboot_undrained(state):
    """Without an API server the node is not drained: its reboot is dropped (only a drained node is rebooted)."""
    if REBOOT_ROLE in state["fix_roles"] or state["reboot_reasons"]:
        drop_reboot(state, ["not drained (no API server: nodefix_kubeconfig): a node that is not drained is not "
                            "rebooted"])


def drop_reboot(state, why):
    state["reboot_held"].extend(why)
    state["fix_roles"] = [r for r in state["fix_roles"] if r != REBOOT_ROLE]


def controls(ctx):
    """Why the reboot is held now, read now: the window, the blocking pods, the firing alerts ([] when none holds it).
    NodefixError when one cannot be read (the caller fails closed)."""
    held = []
    if ctx.window is not None and not ctx.window.contains(ctx.clock()):
        held.append("outside the reboot window (%s)" % ctx.window.describe())
    pods = gate.pods_blocking(ctx.api, ctx.node, ctx.options["blocking_selectors"])
    if pods:    # the reboot_gate module's words
        held.append("blocking pod(s) on the node: %s" % ", ".join(pods))
    held.extend("alert %s is firing" % a for a in ctx.alerts())
    return held


def reboot_gate(ctx, state):
    """(step outcome, detail): the window, the blocking pods, the alerts, then the reboot lock's slot - waiting up to
    ``lock_wait`` seconds for a free one, every ``lock_poll`` judging the window, pods and alerts again (a wait ends,
    held, as soon as one of them says no), as the ``reboot_gate`` module's wait does. A gate that cannot decide
    (Prometheus or the API unreadable) refuses the node (nothing drained); a closed gate drops the reboot and the
    rest of the fixes go on."""
    if not state["reboot_reasons"] or state["reboot_held"]:
        return SKIPPED, "no reboot to gate" if not state["reboot_reasons"] else "the backoff held the reboot"
    lock_name = lock_id(ctx, ctx.options["lock_name"])
    lock = locks(ctx)[lock_name]
    reason = "run %s: %s" % (ctx.run_id, "; ".join(r.get("reason", r.get("id", "")) for r in state["reboot_reasons"]))
    deadline = ctx.clock() + datetime.timedelta(seconds=ctx.options["lock_wait"])
    try:
        while True:
            held = controls(ctx)
            if held:
                break
            slot, holders = lock.acquire(reason)
            if slot:
                state["slots"].append(lock_name)
                return (WOULD if ctx.check_mode else DONE), "%s the reboot lock's slot %s" % (
                    "would take" if ctx.check_mode else "took", slot)
            remaining = (deadline - ctx.clock()).total_seconds()
            if remaining <= 0 or ctx.check_mode:
                held = ["the reboot lock is full (%s)" % ", ".join("%s: %s" % (h["slot"], h["holder"])
                                                                   for h in holders)]
                break
            ctx.sleep(min(ctx.options["lock_poll"], remaining))
    except NodefixError as exc:
        raise Stop(Outcome.REFUSED, "reboot gate: %s; nothing was drained or changed" % exc)
    drop_reboot(state, held)
    return Outcome.HELD, "reboot held: %s" % "; ".join(held)


def recheck(ctx, state, ledger, kernel_pending=None):
    """(step outcome, detail): right before the reboot, the window, the blocking pods and the alerts judged again,
    and - for a node that holds the control plane's slot - etcd's health and quorum (``control_plane.etcd_verdict``,
    as the guard judged them); held: the reboot is dropped (the slots taken at the gates are kept, given back at the
    end). One that cannot be read holds the reboot (fail closed), the rest of the rollout goes on. Then this run's
    claim is renewed to cover the reboot's worst case (``renew_for_reboot``; ``kernel_pending``: the kernel path's
    ``kernelPending``, written with it when the reboot goes)."""
    if not state["reboot_reasons"] or state["reboot_held"]:      # (the kernel upgrade's reboot is one too)
        return renew_for_reboot(ctx, state, ledger, [], "no reboot to judge again")
    try:
        held = controls(ctx) + etcd_again(ctx, state)
    except NodefixError as exc:
        held = ["the reboot gate could not be judged again: %s" % exc]
    if not held:
        return renew_for_reboot(ctx, state, ledger, [], "the window, the pods, the alerts%s still allow the reboot" % (
            " and etcd's quorum" if _control_plane_slot(ctx, state) else ""), kernel_pending)
    drop_reboot(state, held)
    return renew_for_reboot(ctx, state, ledger, held, "")


def _control_plane_slot(ctx, state):
    return lock_id(ctx, ctx.options["control_plane_lock_name"]) in state["slots"]


def etcd_again(ctx, state):
    """Why the reboot of a node holding the control plane's slot is held now by etcd (a member down since the guard,
    quorum lost without this one); [] for any other node."""
    if not _control_plane_slot(ctx, state):
        return []
    o = ctx.options
    _etcd, held = control_plane.etcd_verdict(ctx.api, ctx.node, o["etcd_health_command"] or None, ctx.run_command,
                                             o["quorum_override"])
    return held


def recheck_lease(options, record, going):
    """The record's ``leaseSeconds`` at a recheck: ``lease`` plus, in phase ``fix``, ``fix_timeout`` (the fixes that
    still follow the recheck - pids, the kernel install - keep the fix phase's cover), plus the reboot's worst case
    (``context.reboot_worst``) when the reboot is still to come; never below the lease already written (a recheck
    never shrinks a live run's claim: a second controller would take the node over mid-fix)."""
    cover = (options["fix_timeout"] if (record or {}).get("phase") == "fix" else 0) + (
        reboot_worst(options) if going else 0)
    return max(lease_for(options, cover), int((record or {}).get("leaseSeconds") or 0))


def reboot_timeout_cover(options, record):
    """The longest reboot wait (a reboot path's ``reboot_timeout``) the claim as written (``record``'s ``leaseSeconds``,
    renewed right before the reboot) still covers - the reboot path's worst case ``2 x timeout + 4 x
    reboot_settle_timeout`` (``context.reboot_worst``) inside the lease less its margin (``lease``) and, in phase
    ``fix``, the fixes' own cover (``fix_timeout``): whole seconds, 0 when it covers none. A reboot path whose own
    timeout is longer (the mount-unit cleanup's ``mount_units_reboot_timeout``) would outlive the claim: another run
    could take the node over mid-reboot - the path holds its reboot instead (roles/mount_units reboot_decide.yml)."""
    lease = int((record or {}).get("leaseSeconds") or 0)
    fixes = options["fix_timeout"] if (record or {}).get("phase") == "fix" else 0
    return max(0, (lease - options["lease"] - fixes - 4 * options["reboot_settle_timeout"]) // 2)


def renew_for_reboot(ctx, state, ledger, held, said, kernel_pending=None):
    """The recheck's answer after this run's claim was renewed (``ledger.renew``) for ``recheck_lease``: a live run's
    claim must not run out mid-fix or mid-reboot. A claim taken over by another run raises Stop (the caller fails
    closed); a renewal the API server refused holds the reboot (this run's claim would not cover it) - and with it
    the kernel's install, so ``kernelPending`` (``kernel_pending``) is on the Node before anything is armed."""
    going = bool(state["reboot_reasons"]) and not state["reboot_held"]
    if ctx.api is not None:
        fields = {kernel.PENDING: kernel_pending} if going and kernel_pending else {}
        try:
            ledger.renew(recheck_lease(ctx.options, ledger.record, going), **fields)
        except Stop:
            raise
        except NodefixError as exc:
            if going:
                held = ["this run's claim could not be renewed to cover the reboot: %s" % exc]
                drop_reboot(state, held)
            else:
                said = "%s; this run's claim could not be renewed: %s" % (said, exc)
    # the reboot wait the claim covers now, a plain number the reboot paths compare their own timeout with (0: none)
    state["reboot_timeout_cover"] = reboot_timeout_cover(ctx.options, ledger.record) if going and not held else 0
    if held:
        return Outcome.HELD, "reboot held: %s" % "; ".join(held)
    lease = (ledger.record or {}).get("leaseSeconds")
    return DONE, "%s%s" % (said, "; claim renewed for %s s (it covers a reboot wait of up to %d s)" % (
        lease, state["reboot_timeout_cover"]) if going and lease else "")


def reclaim_slots(ctx, state, node):
    """(step outcome, detail): the slots this node holds from an earlier run in a lock this run does not use now,
    given back when the node is Ready (kept, said so, when it is not)."""
    said = []
    for name, lock in sorted(locks(ctx).items()):
        if name in state["slots"]:
            continue
        out = control_plane.reclaim(lock, node, dry_run=ctx.check_mode)
        if out["released"]:
            said.append(control_plane.reclaimed_said(out, ctx.node, dry_run=ctx.check_mode))
            if not ctx.check_mode:
                state.setdefault("lock_reclaimed", []).append({"slot": out["slot"], "since": out["since"]})
        elif out["kept"]:
            said.append(out["kept"])
            state.setdefault("slot_kept", []).append(out["kept"])
    if not said:
        return SKIPPED, "no slot held from an earlier run"
    state["reclaim_said"] = said        # the node's record says it (interface.remediation_record)
    return (WOULD if ctx.check_mode else DONE), "; ".join(said)


def _member_back(ctx, read_node):
    """(node, (ok, why)) once the node is Ready and its own etcd member is Ready again, or as they are after
    ``etcd_wait`` seconds - looking every ``lock_poll`` seconds (control_plane_gate state=release's wait)."""
    o = ctx.options
    start = ctx.clock()
    while True:
        node = read_node()
        back = control_plane.own_member_back(ctx.api, ctx.node, o["etcd_health_command"] or None, ctx.run_command)
        left = o["etcd_wait"] - (ctx.clock() - start).total_seconds()
        if (back[0] and control_plane.node_ready(node)) or left <= 0:
            return node, back
        ctx.sleep(min(o["lock_poll"], left))


def release_slots(ctx, state, read_node):
    """(step outcome, detail): this run's slots given back - the reboot lock's first, at once, then the control
    plane's once the node's etcd member is Ready again (``_member_back``: waiting up to ``etcd_wait`` s; kept, said
    so, when it is not). ``read_node()``: the Node as it is now."""
    if ctx.check_mode:      # a dry run took no slot: it says which it would give back
        return WOULD, "would give back this run's slot in %s" % ", ".join(state["slots"])
    said = []
    cp = lock_id(ctx, ctx.options["control_plane_lock_name"])
    for name, lock in sorted(locks(ctx).items(), key=lambda item: (item[0] == cp, item[0])):
        if name not in state["slots"]:
            continue
        if state.get("not_back"):      # its reboot path says it went down and is not back: no wait, no release
            out = control_plane.reclaim(lock, None, not_back=True)
        elif name == cp:
            out = control_plane.reclaim(lock, *_member_back(ctx, read_node))
        else:
            out = control_plane.reclaim(lock, read_node())
        if out["released"]:
            said.append("gave back %s" % out["released"])
        elif out["kept"]:
            said.append(out["kept"])
            state.setdefault("slot_kept", []).append(out["kept"])      # the node's record says it
    if not said:
        return SKIPPED, "no slot held"
    return DONE, "; ".join(said)
