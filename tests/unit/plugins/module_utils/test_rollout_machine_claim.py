# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine (issue 62), four findings of the hostile review of the wired rollout, each against the API double:

1. the claim's lease covers the step it guards - renewed right before the reboot for the reboot's worst case and
   again at the end; a run whose claim another run took over fails closed and writes nothing more;
2. a cordon whose answer was lost is judged by the Node read again - never "not cordoned" on a guess; unreadable,
   the run's record is kept so the next run gives the cordon back;
3. etcd's health and quorum are judged again right before the reboot, and an etcd pod whose Node is not Ready is a
   member down;
4. the give-back reads whether the node was cordoned before the run from the record on the Node, not from the state
   the play passed back, and its uncordon is conditional: a person's cordon made meanwhile stays."""

import copy
import datetime
import json

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import interface
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Clock, etcd_pod, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, REBOOT, Work, context, outcomes, rollout

CP = {"node-role.kubernetes.io/control-plane": ""}
OTHER = {"host": "another-controller", "pid": 4711, "boot": "boot-x"}
LOCK = "kube-system/nodefix-reboot"
SLOT = ["kube-system/nodefix-reboot-0"]


def on_node(api):
    return record.read(api.notes())


def fixes(first, status="ok"):
    return {"status": status, "roles": first["state"]["fix_roles"], "msg": ""}


def another_run_takes_it_over(api, clock):
    """A second controller's run claims node-a (it judged this run dead): what record.decide writes."""
    taken = record.new("run-2", clock.now(), OTHER, 1800, version=record.MACHINE_VERSION)
    n = api.nodes["node-a"]
    n["metadata"]["annotations"][record.ANNOTATION] = record.text(taken)
    n["metadata"]["resourceVersion"] = api._bump()     # pylint: disable=protected-access


# 1. the lease covers the reboot; a run taken over fails closed

def test_the_claim_renewed_right_before_the_reboot_outlives_the_reboot_and_a_second_controller_is_refused():
    api = ApiDouble([node()], [pod("web-1")])
    clock = Clock()
    ctx = context(api, roles=(CONTAINERD, REBOOT), clock=clock)
    first = machine.begin(ctx)
    assert first["outcome"] is None and interface.reboot_allowed(first["state"], LOCK)
    clock.sleep(1700)                   # the fix roles before the reboot took most of the lease
    again = machine.recheck(ctx, first["state"])
    assert again["outcome"] is None and interface.reboot_allowed(again["state"], LOCK)
    now = on_node(api)
    worst = 2 * 900 + 4 * 300
    # (the fix phase's cover, fix_timeout, kept: fixes may follow the recheck - R1)
    assert now["run"] == "run-1" and now["phase"] == "fix" and now["leaseSeconds"] == 1800 + 3600 + worst
    assert now["renewed"] == clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    clock.sleep(worst)                  # the reboot at its worst: a second controller's run is refused, naming this one
    second = machine.begin(context(api, roles=(CONTAINERD,), clock=clock, here=OTHER, run_id="run-2"))
    assert second["outcome"] == Outcome.REFUSED and "nodefix run run-1 (controller, process 100)" in second["detail"]
    assert on_node(api)["run"] == "run-1"
    end = machine.end(ctx, again["state"], fixes(first))
    assert end["outcome"] == Outcome.OK and record.ANNOTATION not in api.notes() and not api.cordoned()


def test_the_lease_of_each_write_covers_the_step_it_guards():
    api = ApiDouble([node()], [pod("web-1")])
    rollout(api, roles=(CONTAINERD,), options={"lease": 100, "drain_timeout": 50, "lock_wait": 7, "etcd_wait": 30,
                                               "fix_timeout": 40})
    leases = dict((json.loads(w[2]["metadata"]["annotations"][record.ANNOTATION])["phase"],
                   json.loads(w[2]["metadata"]["annotations"][record.ANNOTATION])["leaseSeconds"])
                  for w in api.writes if w[0] == "patch_node"
                  and (w[2]["metadata"]["annotations"].get(record.ANNOTATION) or "").startswith("{"))
    assert leases == {"claimed": 100, "gates": 107, "cordon": 150, "drain": 150, "fix": 140, "verify": 130,
                      "give_back": 100}


def test_the_fix_phase_lease_covers_the_fix_roles_and_a_second_controller_mid_fix_is_refused():
    """Review #1: the fix phase's lease was the bare margin (nodefix_rollout_lease, 1800 s), so a mount-unit cleanup
    or a package install longer than that let a second controller take a live run's node over mid-fix. It is the
    margin plus the fix roles' worst case (nodefix_fix_timeout, 3600 s)."""
    api = ApiDouble([node()], [pod("web-1")])
    clock = Clock()
    ctx = context(api, roles=(CONTAINERD,), clock=clock)
    first = machine.begin(ctx)
    assert first["outcome"] is None and on_node(api)["phase"] == "fix"
    assert on_node(api)["leaseSeconds"] == 1800 + 3600
    clock.sleep(1800 + 3600 - 60)       # the fix roles at their worst, less a minute
    second = machine.begin(context(api, roles=(CONTAINERD,), clock=clock, here=OTHER, run_id="run-2"))
    assert second["outcome"] == Outcome.REFUSED and "nodefix run run-1" in second["detail"], second
    end = machine.end(ctx, first["state"], fixes(first))
    assert end["outcome"] == Outcome.OK and record.ANNOTATION not in api.notes() and not api.cordoned()


def test_a_held_recheck_keeps_the_fix_phase_lease_and_a_second_controller_mid_fix_is_refused():
    """Review R1: a recheck that held the reboot renewed the claim for the bare margin (1800 s), so the fixes after it
    (pids, the kernel install) ran on a lease a second controller took over mid-fix. It keeps lease + fix_timeout."""
    api = ApiDouble([node()], [pod("web-1")])
    clock = Clock()
    ctx = context(api, roles=(CONTAINERD, REBOOT), clock=clock)
    first = machine.begin(ctx)
    assert first["outcome"] is None and on_node(api)["leaseSeconds"] == 1800 + 3600
    ctx.window = gate.Window(days=["sat"], start="01:00", end="02:00")     # the window closed: the reboot is held
    again = machine.recheck(ctx, first["state"])
    assert again["outcome"] is None and not interface.reboot_allowed(again["state"], LOCK)
    assert on_node(api)["leaseSeconds"] == 1800 + 3600
    clock.sleep(1800 + 60)              # an in-place fix of 31 min after the recheck, well inside fix_timeout
    second = machine.begin(context(api, roles=(CONTAINERD,), clock=clock, here=OTHER, run_id="run-2"))
    assert second["outcome"] == Outcome.REFUSED, (second["outcome"], second["detail"], on_node(api))


def test_a_going_recheck_never_lowers_the_lease_below_the_fix_phase_cover():
    """Review R1: with a short reboot (worst case 840 s < fix_timeout 3600 s) the going recheck's lease was
    lease + 840, below the fix phase's lease + 3600 already written."""
    api = ApiDouble([node()], [pod("web-1")])
    opts = {"reboot_timeout": 300, "reboot_settle_timeout": 60}
    ctx = context(api, roles=(CONTAINERD, REBOOT), clock=Clock(), options=opts)
    first = machine.begin(ctx)
    assert on_node(api)["leaseSeconds"] == 1800 + 3600
    again = machine.recheck(ctx, first["state"])
    assert interface.reboot_allowed(again["state"], LOCK)
    assert on_node(api)["leaseSeconds"] == 1800 + 3600 + 840, on_node(api)
    ctx.window = gate.Window(days=["sat"], start="01:00", end="02:00")     # a second recheck (the pending reboot) held
    machine.recheck(ctx, again["state"])
    assert on_node(api)["leaseSeconds"] == 1800 + 3600 + 840, on_node(api)       # never lowered


def test_a_run_taken_over_before_its_reboot_fails_at_the_recheck_and_writes_nothing_more():
    api = ApiDouble([node(), node("node-b")], [pod("web-1")])
    clock = Clock()
    ctx = context(api, roles=(CONTAINERD, REBOOT), clock=clock)
    first = machine.begin(ctx)
    another_run_takes_it_over(api, clock)
    writes = len(api.writes)
    again = machine.recheck(ctx, first["state"])
    assert again["outcome"] == Outcome.FAILED and "names run run-2" in again["detail"]
    assert not interface.reboot_allowed(again["state"], LOCK) and REBOOT not in again["state"]["fix_roles"]
    end = machine.end(ctx, again["state"], fixes(first, "failed"))
    assert end["outcome"] == Outcome.FAILED and len(api.writes) == writes       # nothing given back: run-2's now
    assert api.cordoned() and on_node(api)["run"] == "run-2" and api.held_leases() == SLOT


def test_a_run_taken_over_gives_nothing_back_at_its_end_even_on_a_node_cordoned_before_it():
    # (cordoned before: the give-back never wrote, so only the end's own renewal can find the claim lost before the
    # slot is released under the run that holds the node now)
    api = ApiDouble([node(unschedulable=True), node("node-b")], [pod("web-1")])
    clock = Clock()
    ctx = context(api, roles=(CONTAINERD, REBOOT), clock=clock)
    first = machine.begin(ctx)
    assert first["outcome"] is None and api.held_leases() == SLOT
    another_run_takes_it_over(api, clock)
    writes = len(api.writes)
    end = machine.end(ctx, first["state"], fixes(first))
    assert end["outcome"] == Outcome.FAILED and outcomes(end)["release_slots"] == "skipped"
    assert len(api.writes) == writes and api.held_leases() == SLOT and on_node(api)["run"] == "run-2"


class _VerifyWriteFails(ApiDouble):
    """The API server answers 503 to the end's first write (the record moved to ``verify``), and only to it."""

    def patch_node(self, name, body, resource_version=None):
        text = ((body.get("metadata") or {}).get("annotations") or {}).get(record.ANNOTATION) or ""
        if '"phase":"verify"' in text:
            self.calls.append(("patch_node", name, body, resource_version))
            raise kube.KubeError("patching Node %s" % name, 503, "ServiceUnavailable", "etcd leader changed")
        return super(_VerifyWriteFails, self).patch_node(name, body, resource_version)


def test_a_renewal_the_api_server_refused_at_the_end_is_said_and_the_node_is_still_verified_before_it_goes_back():
    api = _VerifyWriteFails([node()], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD,), work=Work(after=[CONTAINERD]))    # the finding is still open
    assert first["outcome"] is None and second["outcome"] == Outcome.NOT_VERIFIED
    assert "the record could not be renewed" in [s for s in second["steps"] if s["name"] == "verify"][0]["detail"]
    assert api.cordoned() and cordon.HELD in api.notes()          # held, never uncordoned unverified


def test_the_lock_slot_names_the_run_that_holds_it():
    api = ApiDouble([node()], [pod("web-1")])
    machine.begin(context(api, roles=(CONTAINERD, REBOOT)))
    lease = api.leases[("kube-system", "nodefix-reboot-0")]
    assert lease["spec"]["holderIdentity"] == "node-a"
    assert lease["metadata"]["annotations"]["nodefix.k8s/reason"].startswith("run run-1: ")


# 2. a cordon whose answer was lost

class _LostCordon(ApiDouble):
    """The cordon's PATCH is applied, then its answer lost (no answer: a timeout); ``blind`` - the Node cannot be
    read again either (the API server went away)."""

    def __init__(self, nodes, pods=(), blind=False):
        super(_LostCordon, self).__init__(nodes, pods)
        self.blind, self.lost = blind, False

    def patch_node(self, name, body, resource_version=None):
        answer = super(_LostCordon, self).patch_node(name, body, resource_version)
        if (body.get("spec") or {}).get("unschedulable") is True and not self.lost:
            self.lost = True
            raise kube.KubeError("patching Node %s" % name, why="ReadTimeoutError: read timed out")
        return answer

    def get_node(self, name):
        if self.lost and self.blind:
            self.calls.append(("get_node", name))
            raise kube.KubeError("reading Node %s" % name, why="connection refused")
        return super(_LostCordon, self).get_node(name)


def test_a_cordon_whose_answer_was_lost_is_read_again_and_given_back_when_it_landed():
    api = _LostCordon([node()], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD,))
    assert first["outcome"] is None
    cordon_step = [s for s in first["steps"] if s["name"] == "cordon"][0]
    assert cordon_step["outcome"] == "done" and "the Node read again shows the cordon" in cordon_step["detail"]
    assert second["outcome"] == Outcome.OK and not api.cordoned() and cordon.CORDONED_BY not in api.notes()
    assert record.ANNOTATION not in api.notes()


def test_a_cordon_whose_answer_was_lost_on_an_unreadable_node_keeps_the_record_for_the_next_run():
    api = _LostCordon([node()], [pod("web-1")], blind=True)
    first, second = rollout(api, roles=(CONTAINERD,))
    assert second is None and first["outcome"] == Outcome.FAILED and "whether it is cordoned is unknown" in first["detail"]
    assert outcomes(first)["release"] == "skipped" and outcomes(first)["give_back"] == "skipped"
    assert api.cordoned() and on_node(api)["run"] == "run-1" and on_node(api)["phase"] == "drain"
    # (the cordon landed: its PATCH moved the record to the drain) - the next run (the first one's process is gone)
    # gives the cordon back from the record
    api.blind = False
    again, end = rollout(api, roles=(), here={"host": "controller", "pid": 200, "boot": "boot-c"}, run_id="run-2")
    assert again["outcome"] == Outcome.NOTHING_TO_FIX and end is None
    assert not api.cordoned() and cordon.CORDONED_BY not in api.notes() and record.ANNOTATION not in api.notes()


# 3. etcd judged again right before the reboot; a member whose Node is NotReady is down

def _control_plane(ready_b="True", pod_ready_b="True"):
    nodes = [node(labels=CP), node("node-b", labels=CP, ready=ready_b), node("node-c", labels=CP)]
    pods = [pod("web-1"), etcd_pod("node-a"), etcd_pod("node-b", ready=pod_ready_b), etcd_pod("node-c")]
    return ApiDouble(nodes, pods)


def test_a_member_whose_node_is_not_ready_is_down_whatever_its_pod_last_said():
    api = _control_plane(ready_b="Unknown")       # node-b's kubelet stopped reporting: its etcd pod still says Ready
    first, second = rollout(api, roles=(CONTAINERD, REBOOT), options={"control_plane": True})
    assert second is None and first["outcome"] == Outcome.HELD
    assert "etcd member etcd-node-b on node-b is not Ready" in first["detail"] and "its Node not Ready" in first["detail"]
    assert not api.cordoned() and api.held_leases() == []


def test_etcd_is_judged_again_right_before_the_reboot_of_a_control_plane_node():
    api = _control_plane()
    ctx = context(api, roles=(CONTAINERD, REBOOT), options={"control_plane": True})
    first = machine.begin(ctx)
    assert first["outcome"] is None and interface.reboot_allowed(first["state"], LOCK)
    api.nodes["node-b"]["status"]["conditions"][0]["status"] = "False"       # a member went down since the guard
    again = machine.recheck(ctx, first["state"])
    assert again["outcome"] is None and outcomes(again)["reboot_recheck"] == Outcome.HELD
    assert "control plane: etcd is not healthy" in again["state"]["reboot_held"][0]
    assert not interface.reboot_allowed(again["state"], LOCK) and REBOOT not in again["state"]["fix_roles"]


def test_etcd_still_healthy_at_the_recheck_lets_the_reboot_go():
    api = _control_plane()
    ctx = context(api, roles=(CONTAINERD, REBOOT), options={"control_plane": True})
    first = machine.begin(ctx)
    again = machine.recheck(ctx, first["state"])
    assert outcomes(again)["reboot_recheck"] == "done" and "etcd's quorum" in again["steps"][0]["detail"]
    assert interface.reboot_allowed(again["state"], LOCK)


# 4. the give-back reads the record, and its uncordon is conditional

def test_end_keeps_a_node_the_record_says_was_cordoned_before_whatever_the_state_says():
    api = ApiDouble([node(unschedulable=True)], [pod("web-1")])
    ctx = context(api, roles=(CONTAINERD,))
    first = machine.begin(ctx)
    assert first["outcome"] is None and on_node(api)["cordonedBefore"] is True
    forged = dict(copy.deepcopy(first["state"]), cordoned=True, cordoned_before=False)
    end = machine.end(ctx, forged, fixes(first))
    assert end["outcome"] == Outcome.OK and api.cordoned()
    assert "says it was cordoned before this run" in [s for s in end["steps"] if s["name"] == "give_back"][0]["detail"]


class _PersonCordons(ApiDouble):
    """Right before the uncordon's PATCH lands, a person takes the cordon over (``kubectl annotate node node-a
    nodefix.k8s/cordoned-by-``): the Node changed since the give-back read it."""

    def patch_node(self, name, body, resource_version=None):
        if (body.get("spec") or {}).get("unschedulable") is False and not getattr(self, "done", False):
            self.done = True
            self.nodes[name]["metadata"]["annotations"].pop(cordon.CORDONED_BY, None)
            self.nodes[name]["metadata"]["resourceVersion"] = self._bump()
        return super(_PersonCordons, self).patch_node(name, body, resource_version)


def test_the_uncordon_is_conditional_and_a_persons_cordon_made_meanwhile_stays():
    api = _PersonCordons([node()], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD,))
    assert first["outcome"] is None and second["outcome"] == Outcome.OK
    give_back = [s for s in second["steps"] if s["name"] == "give_back"][0]
    assert "a person's cordon, it stays" in give_back["detail"] and api.cordoned()
    assert record.ANNOTATION not in api.notes() and api.held_leases() == []


def test_a_resumed_run_inherits_cordoned_before_from_the_dead_runs_record():
    dead = record.moved(record.new("run-0", datetime.datetime(2026, 12, 6, 6, tzinfo=datetime.timezone.utc),
                                   {"host": "controller", "pid": 99, "boot": "boot-c"}, 1800,
                                   version=record.MACHINE_VERSION),
                        "fix", datetime.datetime(2026, 12, 6, 6, 5, tzinfo=datetime.timezone.utc), cordonedBefore=False)
    by = json.dumps({"run": "run-0", "time": "2026-12-06T06:01:00Z"})
    api = ApiDouble([node(unschedulable=True, **{record.ANNOTATION: record.text(dead), cordon.CORDONED_BY: by})],
                    [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD,), options={"drain": False})
    assert first["state"]["resumed"] == "fix" and second["outcome"] == Outcome.OK
    assert not api.cordoned() and record.ANNOTATION not in api.notes()


def test_the_machine_options_carry_the_reboot_role_waits():
    assert mctx.reboot_worst(mctx.options({})) == 3000
    assert mctx.lease_for(mctx.options({"lease": 60}), 3000) == 3060
