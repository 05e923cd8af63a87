# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The machine's half BEFORE the fix roles run, one step each (docs/rollout-machine.md has the table):

plan -> claim -> root -> kernel_boot -> control_plane -> backoff -> reboot_gate -> reclaim_slots -> start_event -> evidence -> storm ->
cordon -> drain -> require_drain -> fix

The record on the Node (``ledger``) is written at the claim, before the first lock slot (``gates``), before the
cordon (``cordon``, with ``cordonedBefore``), before the evictions (``drain``) and before the fixes (``fix``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import cluster_nodes
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm as _storm
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import drain
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import gates
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import kernel
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import ledger as _ledger
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import reserve as _reserve
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.context import RESTARTING_ROLES
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import DONE, SKIPPED, WOULD, Stop, node_side, \
    post_events
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome


def plan(ctx, state):
    """A refusal the play decided before the rollout (a kernel upgrade that cannot be planned): nothing touched."""
    refused = ctx.plan.get("refused")
    if refused:
        raise Stop(Outcome.REFUSED, "%s; nothing was drained or changed" % refused)  # the outcome says refused
    return DONE, "%d fix role(s), %d reboot reason(s)" % (len(state["fix_roles"]), len(state["reboot_reasons"]))


def storm(ctx, state):
    """The storm breaker's re-count, right before this node's cordon (the one re-count of a rollout; issue 62's
    review: as MachineHealthCheck and NodeHealthCheck count on every reconcile): the Nodes listed now, one request
    (``storm_node_selector``'s pool), this node and the other nodes of its batch (``storm_batch``) in flight, and every
    node another run - another controller's too - reserved and has not given back (``_rollout.machine.reserve``) -
    ``_rollout.storm.recount``. Within ``storm_percent``, this node's reserve is written on the shared Lease with its
    resourceVersion as a precondition (a 409: another controller reserved meanwhile - counted again). Over
    ``storm_percent``: stopped, nothing cordoned or drained. A listing, a reserve that cannot be read or written stops
    it too (fail closed: what could not be counted is never taken for calm)."""
    opts = ctx.options
    disruptive = list(ctx.plan.get("disruptive") or [])
    if not state["fix_roles"] or not disruptive:
        return SKIPPED, "this node's plan disrupts nothing: not counted"
    if opts["storm_percent"] >= 100:
        return SKIPPED, "nodefix_storm_percent is 100: the storm breaker is off"
    selector = opts["storm_node_selector"] or None

    def count(reserves):
        listed = ctx.api.list_nodes(selector)
        view = cluster_nodes.view(listed, selector)
        by_name = dict(((n.get("metadata") or {}).get("name"), n) for n in listed)
        others = _reserve.live(ctx.api, reserves, by_name, ctx.node)
        nodes = dict((n, {"node": n, "disruptive": ["drain"], "findings": []}) for n in others if n in view["nodes"])
        nodes.update((e["node"], e) for e in opts["storm_batch"] if e["node"] != ctx.node)
        nodes[ctx.node] = {"node": ctx.node, "disruptive": disruptive, "findings": []}
        said = _storm.recount(view, nodes, opts["storm_percent"], opts["storm_override"], opts["storm_min_nodes"])
        return dict(said, live=others)
    try:
        said, reserved = _reserve.take(ctx, count)
    except NodefixError as exc:
        raise Stop(Outcome.STOPPED, "stopped: the storm breaker could not count the cluster's Nodes and the other runs' "
                                    "reserves right before this node's cordon (%s); nothing was cordoned or drained"
                                    % exc)
    others = sorted(said["live"])
    if said["stop"]:
        raise Stop(Outcome.STOPPED, "stopped by the storm breaker, counted again right before this node's cordon: %s%s; "
                                    "nothing was cordoned or drained" % (
                                        said["msg"], " (reserved by other runs: %s)" % ", ".join(others) if others else ""))
    state["storm_reserved"] = reserved
    return (WOULD if ctx.check_mode else DONE), "%s%s%s" % (
        said["msg"] or "counted again: %d of %d node(s) (%s%%) unavailable or in flight, within %d%%" % (
            said["affected"], said["size"], ("%.1f" % said["share"]).rstrip("0").rstrip("."), opts["storm_percent"]),
        "; reserved by other runs: %s" % ", ".join(others) if others else "",
        "; reserved %s (Lease %s/%s)" % (ctx.node, opts["lock_namespace"], _reserve.LEASE) if reserved
        else "; would reserve %s" % ctx.node if ctx.check_mode else "")


def claim(ctx, state, ledger):
    node = ledger.read_node()
    decision = ledger.claim(node)
    state["claimed"], state["previous"] = True, decision["previous"] if decision["action"] == "take_over" else None
    held = cordon.reclaim(node, ctx.run_id)
    if held["held"]:
        armed = kernel.kept(ledger)     # (an unconfirmed kernel boot waits with the hold: the record keeps it)
        raise Stop(Outcome.HELD, "held: %s; nothing was drained, restarted or rebooted%s" % (
            held["msg"], "; and " + armed if armed else ""))
    said = decision["msg"] or "claimed for run %s" % ctx.run_id
    return (WOULD, "would claim it: " + said) if ctx.check_mode else (DONE, said)


def root(ctx, state):
    euid = ctx.audit_before.get("euid", 0)
    if state["fix_roles"] and str(euid) != "0":
        raise Stop(Outcome.REFUSED, "refused: the audit ran as uid %s on the node, not root: the fixes need root; "
                                    "nothing was drained or changed" % euid)
    return DONE, "the audit ran as root" if state["fix_roles"] else "nothing to fix"


def control_plane(ctx, state, ledger):
    if not state["fix_roles"]:
        return SKIPPED, "nothing to fix"
    # (the lease covers the gates' longest wait: the reboot lock's)
    ledger.enter("gates", cover=ctx.options["lock_wait"], slots=sorted(gates.locks(ctx)))
    return gates.control_plane_guard(ctx, state, ledger.read_node())


def reclaim_cordon(ctx, state, node):
    """A dead run's cordon: resumed (it was past its drain: the node stays cordoned until this run verifies it) or
    given back; a stale record cleared. (node as it is now, what was said)."""
    decision = cordon.reclaim(node, ctx.run_id)
    mode = _ledger.resume(state["previous"])
    if decision["action"] == "give_back" and mode == "resume":
        state.update(cordoned_before=False, cordoned=True, resumed=state["previous"]["phase"])
        return node, ("resumed run %s's rollout from phase %s: the node stays cordoned until this run verifies it"
                      % (state["previous"]["run"], state["previous"]["phase"]))
    body = {"give_back": node_cordon.GIVE_BACK, "clear": node_cordon.CLEAR}.get(decision["action"])
    if body is None:
        return node, decision["msg"]
    if decision["action"] == "give_back":
        state["given_back"] = decision["msg"] if not ctx.check_mode else "would be " + decision["msg"]
    if ctx.check_mode:
        return node, "would be " + decision["msg"]
    version = _ledger.required_version(node, ctx.node, "the %s" % decision["action"].replace("_", " "))
    return ctx.api.patch_node(ctx.node, body, version), decision["msg"]


def cordon_step(ctx, state, ledger):
    # a dead run's cordon is given back (or resumed) whatever this run's nodefix_drain says
    state["reclaimed"] = True
    node, said = reclaim_cordon(ctx, state, ledger.read_node())
    if not ctx.options["drain"]:
        return (DONE if said else SKIPPED), "; ".join(s for s in (said, "nodefix_drain is false: not cordoned") if s)
    if not state["fix_roles"] or state["cordoned"]:
        return (DONE if said else SKIPPED), said or "nothing to cordon"
    before = bool((node.get("spec") or {}).get("unschedulable"))
    state["cordoned_before"] = before
    if before:
        return SKIPPED, "; ".join(s for s in (said, "%s was cordoned before this run: it stays cordoned" % ctx.node) if s)
    # (the cordon's PATCH moves the record to the drain with this lease: it covers the drain's timeout)
    written = ledger.enter("cordon", cover=ctx.options["drain_timeout"], cordonedBefore=False)
    outcome, detail = ctx.runner.would("cordon %s" % ctx.node, lambda: _cordon(ctx, state, ledger, written))
    state["cordoned"] = True      # (in check mode: the give-back's step says what it would do)
    return outcome, "; ".join(s for s in (said, detail) if s)


def _cordon(ctx, state, ledger, node):
    """The cordon's one PATCH, conditional on the Node as the record's write left it. A PATCH that failed may still
    have landed (its answer lost: a timeout, a connection reset, a 5xx after the write): the Node is read again
    (``_cordon_landed``) - never taken for "not cordoned" on a guess."""
    when = ctx.clock().astimezone(datetime.timezone.utc)
    said = "cordoned %s (nodefix.k8s/cordoned-by)" % ctx.node
    # (before the PATCH: a PATCH never sent cannot have landed - nothing to read again)
    version = _ledger.required_version(node, ctx.node, "the cordon")
    try:
        written = ctx.api.patch_node(ctx.node, node_cordon.cordon_body(ctx.run_id, (when - _EPOCH).total_seconds(),
                                                                       node), version)
    except NodefixError as exc:
        written = _cordon_landed(ctx, state, exc)
        said += " (the PATCH's answer was lost: %s; the Node read again shows the cordon)" % exc
    # the cordon's one PATCH moved this run's record to the drain (cordonedBefore false): what the Node now says
    ledger.record = record.read(_ledger.annotations(written)) or ledger.record
    return said


def _cordon_landed(ctx, state, error):
    """The Node read again after the cordon's PATCH failed with ``error``: the Node when this run's cordon is on it
    (cordoned, ``nodefix.k8s/cordoned-by`` naming this run); ``error`` raised when it is not (nothing changed). When
    the Node cannot be read either, whether the cordon landed is unknown: ``state['cordon_unknown']`` says why (the
    give-back leaves the node, the release keeps this run's record - phase ``cordon`` - so the next run gives the
    cordon back) and the step fails."""
    try:
        node = ctx.api.get_node(ctx.node)
    except NodefixError as exc:
        state["cordon_unknown"] = "the cordon's PATCH failed (%s) and the Node could not be read again (%s)" % (
            error, exc)
        raise NodefixError("cordoning %s: %s: whether it is cordoned is unknown - this run's record is kept, so the "
                           "next run gives the cordon back" % (ctx.node, state["cordon_unknown"]))
    notes = _ledger.annotations(node)
    by = cordon.reclaim(node, ctx.run_id)["by"] if node and notes.get(cordon.CORDONED_BY) is not None else None
    if ((node or {}).get("spec") or {}).get("unschedulable") and (by or {}).get("run") == ctx.run_id:
        return node
    raise error


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def drain_step(ctx, state, ledger):
    if not state["fix_roles"] or not ctx.options["drain"]:
        return SKIPPED, "nodefix_drain is false: not drained" if state["fix_roles"] else "nothing to fix"
    if ctx.check_mode:
        pods = ctx.api.list_pods(ctx.node)
        names = sorted(cordon.drainable([node_cordon.pod_summary(p) for p in pods]))
        plan = node_cordon.budgets_now(ctx.api, pods)
        # what the dry run's plan shows of the drain (the pods' summaries, the budgets that would refuse now)
        state["drain_plan"] = dict(plan, pods=[node_cordon.pod_summary(p) for p in pods])
        refused = ["%s/%s refuses %d" % (b["namespace"], b["name"], b["refused"]) for b in plan.get("budgets") or []]
        return WOULD, "would evict %s%s" % (", ".join(names) or "nothing", "; budgets now: " + "; ".join(
            refused) if refused else "; " + plan["budgets_error"] if plan.get("budgets_error") else "")
    if state["cordoned_before"] or ledger.record.get("phase") != "drain":
        ledger.enter("drain", cover=ctx.options["drain_timeout"], cordonedBefore=bool(state["cordoned_before"]))
    out = drain.run(ctx)
    state["drain"] = out
    if not out["done"]:
        raise Stop(Outcome.DRAIN_FAILED, "%s; nothing was fixed" % out["msg"])
    state["drained"] = True
    return DONE, out["msg"]


def require_drain(ctx, state):
    restarting = sorted(set(state["fix_roles"]) & set(RESTARTING_ROLES))
    # (check mode drains nothing: a node that would be drained is not refused; one that never is, is)
    undrained = not state["drained"] and (not ctx.check_mode or ctx.api is None or not ctx.options["drain"])
    if ctx.options["require_drain"] and restarting and undrained:
        raise Stop(Outcome.REFUSED, "refused: nodefix_require_drain is true and this node was not drained "
                                    "(%s): %s were not run, nothing was changed"
                                    % ("no nodefix_kubeconfig" if ctx.api is None else "nodefix_drain is false",
                                       ", ".join(restarting)))
    return DONE if restarting else SKIPPED, "drained" if state["drained"] else "no drain needed for these fixes"


def fix(ctx, state, ledger):
    if not state["fix_roles"]:
        return SKIPPED, "nothing to fix"
    if ctx.api is not None:
        # (the fix phase's lease covers the fix roles' worst case: a long in-place fix - the mount-unit cleanup, a
        # package install - is never taken for a dead run's; each reboot renews it again right before it: recheck)
        ledger.enter("fix", cover=ctx.options["fix_timeout"])
    return (WOULD if ctx.check_mode else DONE), "%s the fix roles: %s" % (
        "would run" if ctx.check_mode else "handed to", ", ".join(state["fix_roles"]))


def evidence(ctx, state):
    if not (state["fix_roles"] and ctx.options["evidence"] and ctx.plan.get("evidence", True) and ctx.evidence):
        return SKIPPED, "no evidence to keep"
    if ctx.check_mode:
        return WOULD, "would keep the evidence a disruption would wipe"
    kept, error = node_side(ctx.evidence)
    state["evidence"] = {"before": evidence_before(ctx.plan), "error": error} if error else kept
    if error:
        return DONE, "the evidence could not be kept (the remediation goes on): %s" % error
    return DONE, "kept the evidence"


def evidence_before(plan):
    """What the evidence is kept before: the plan's disruptions, or a large mount-unit cleanup (remediate.yml's
    words, the report's and the Events')."""
    return list(plan.get("disruptive") or []) or ["stopping leaked units"]


def start_event(ctx, state):
    if not ctx.options["events"]:
        return SKIPPED, "nodefix_events is false"
    if ctx.check_mode:
        return WOULD, "would post the start Event"
    return post_events(ctx, state, "start", "the start Event")
