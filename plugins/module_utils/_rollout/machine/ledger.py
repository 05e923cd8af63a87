# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The machine's state on the cluster: the ``nodefix.k8s/rollout`` record (``_rollout.record``, version 2) on the
Node, written with a conditional merge patch (the read's resourceVersion: a Node changed since the read is a 409
and nothing is written) - at the claim, and BEFORE each disruptive step (``enter``), so a run killed at any line
leaves the phase it was about to enter, whether the node was cordoned before it, and the locks it may hold.

``resume(previous)`` says what a new run does with a dead run's record: ``give_back`` (it had not yet disrupted
the node past its cordon: the cordon and slots it took are given back) or ``resume`` (it was fixing, verifying or
giving back: the node stays cordoned until this run's own verify says it may go back)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.context import lease_for
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import Stop
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

# the dead run's phases past which its node was disrupted and is not verified (version 1's "reboot" too)
RESUME_PHASES = ("fix", "verify", "give_back", "reboot")


def resume(previous):
    """``resume``, ``give_back`` or ``none`` for a dead run's record (None: there was none)."""
    if not previous:
        return "none"
    return "resume" if previous.get("phase") in RESUME_PHASES else "give_back"


def annotations(node):
    return ((node or {}).get("metadata") or {}).get("annotations") or {}


def version_of(node):
    return ((node or {}).get("metadata") or {}).get("resourceVersion")


def required_version(node, name, what):
    """``node``'s resourceVersion, the precondition of a PATCH that cordons or gives back ``name``; NodefixError when
    the answer has none - the PATCH would be unconditional (a person's cordon, another run's write in the meantime
    overwritten): fail closed, ``what`` not done (review #5)."""
    version = version_of(node)
    if not version:
        raise NodefixError("the API server's answer for Node %s has no metadata.resourceVersion: %s is only made "
                           "with a conditional PATCH, so it was not made" % (name, what))
    return version


class Ledger(object):
    """This run's record on ``ctx.node`` (``ctx.api``, ``ctx.clock``, ``ctx.here``); ``self.record`` is what was
    last written."""

    def __init__(self, ctx):
        self.ctx, self.record, self.lost = ctx, None, ""

    def _patch(self, node, value):
        version = version_of(node)
        if not version:
            # every write of the record is conditional on the read: without a resourceVersion two runs could both
            # claim the node - fail closed, nothing written
            raise NodefixError("the API server's Node %s has no metadata.resourceVersion: the %s record is only "
                               "written conditionally, so nothing was written" % (self.ctx.node, record.ANNOTATION))
        body = {"metadata": {"annotations": {record.ANNOTATION: value}}}
        return self.ctx.api.patch_node(self.ctx.node, body, version)

    def read_node(self):
        node = self.ctx.api.get_node(self.ctx.node)
        if node is None:
            raise Stop(Outcome.REFUSED, "node %s not found in the API server (set nodefix_node_name); nothing was "
                                        "touched" % self.ctx.node)
        return node

    def claim(self, node):
        """Claim ``node`` (as read) for this run: {action, previous, msg}; Stop(refused) when a live run holds it,
        its record cannot be read, or another run wrote it since the read."""
        ctx = self.ctx
        decision = record.decide(annotations(node), ctx.run_id, ctx.clock(), ctx.here, ctx.options["lease"],
                                 ctx.pid_alive, version=record.MACHINE_VERSION, observed=ctx.observe)
        if decision["action"] == "refuse":
            raise Stop(Outcome.REFUSED, decision["msg"])
        previous = decision["previous"]
        if decision["action"] == "take_over" and resume(previous) == "resume" \
                and previous.get("cordonedBefore") in (True, False):
            # a dead run's rollout resumed: whether the node was cordoned before it is inherited (the give-back reads
            # it from this record, never from the state the play passes back)
            decision["record"]["cordonedBefore"] = previous["cordonedBefore"]
        if decision["action"] in ("claim", "take_over") and (previous or {}).get(record.KERNEL_PENDING):
            # a kernel upgrade's one-time boot an earlier run left armed and unconfirmed: carried until a run disarms
            # it (_rollout.machine.kernel), whatever else stops this one
            decision["record"][record.KERNEL_PENDING] = previous[record.KERNEL_PENDING]
        if not ctx.check_mode:
            try:
                self._patch(node, record.text(decision["record"]))
            except kube.KubeError as exc:
                if exc.status != 409:
                    raise
                raise Stop(Outcome.REFUSED, "refused: another run wrote the node's %s record at the same time "
                                            "(409 Conflict); nothing was touched" % record.ANNOTATION)
        self.record = decision["record"]
        return decision

    def _mine(self, node):
        try:
            now = record.read(annotations(node))
        except record.MalformedRecord as exc:
            raise Stop(Outcome.FAILED, "this run's %s record was overwritten with one that cannot be read (%s)"
                                       % (record.ANNOTATION, exc))
        if not now or now["run"] != self.ctx.run_id or now["holder"] != self.ctx.here:
            self.lost = "%s now %s" % (record.ANNOTATION, "names run %s" % now["run"] if now else "is gone")
            raise Stop(Outcome.FAILED, "this run lost its claim on the node (%s): it stops here" % self.lost)
        return now

    def enter(self, phase, cover=0, **fields):
        """Write the record as entering ``phase`` (with ``fields``: cordonedBefore, slots) before its step, its lease
        renewed to cover ``cover`` seconds, the step's worst case (``context.lease_for``). The node as written (None
        in check mode)."""
        fields["leaseSeconds"] = lease_for(self.ctx.options, cover)
        return self._write(lambda mine: record.moved(mine, phase, self.ctx.clock(), **fields))

    def renew(self, lease_seconds, **fields):
        """Renew this run's lease for ``lease_seconds`` (its phase kept; ``fields`` set, a None value removing one):
        before a step that takes longer than the last write's lease covers (the reboot). Stop(failed), ``lost`` set,
        when the record is not this run's any more - a run whose claim was taken over writes nothing more."""
        return self._write(lambda mine: record.renewed(mine, self.ctx.clock(), lease_seconds, **fields))

    def note(self, **fields):
        """Set (None: remove) ``fields`` of this run's record, its phase and lease kept (renewed now)."""
        return self._write(lambda mine: record.renewed(mine, self.ctx.clock(), mine["leaseSeconds"], **fields))

    def _write(self, change):
        """Write ``change(this run's record as on the node)``: the node read again, the record checked to be this
        run's (``_mine``: else Stop), a conditional patch (a 409 - the Node changed since - read once more and tried
        again)."""
        if self.ctx.check_mode:
            if self.record is not None:
                self.record = change(self.record)
            return None
        for attempt in (1, 2):
            node = self.read_node()
            moved = change(self._mine(node))
            try:
                written = self._patch(node, record.text(moved))
            except kube.KubeError as exc:
                if exc.status != 409 or attempt == 2:
                    raise
                continue
            self.record = moved
            return written
        return None  # not reached: the second attempt returned or raised

    def release(self):
        """Remove this run's record (conditional); True when removed, False when it was not this run's."""
        node = self.ctx.api.get_node(self.ctx.node)
        if node is None or not record.release(annotations(node), self.ctx.run_id, self.ctx.here):
            return False
        if not self.ctx.check_mode:
            self._patch(node, None)
        return True
