# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine (issue 62): a run can die at any line (SIGKILL). Every kill point - right after each write the
machine makes to the cluster, and right after each step - is a test: the first run is killed there, and a second run
(another process on the same controller: the first's is gone) reads the state the first left on the API double and
gives back what it changed (cordon, lock slots, claim) or resumes its rollout; a node cordoned before the first run
stays cordoned, and no step of the second run is refused for the first run's leftovers."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Killed, etcd_pod, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, REBOOT, rollout

CP = {"node-role.kubernetes.io/control-plane": ""}
FIRST = {"host": "controller", "pid": 100, "boot": "boot-c"}
SECOND = {"host": "controller", "pid": 200, "boot": "boot-c"}
KINDS = {
    # a worker that needs a reboot (the reboot lock's slot), and a control-plane node opted in (the control
    # plane's slot too); each also cordoned by an operator before the run
    "worker": ([node(), node("node-b")], {}),
    "control-plane": ([node(labels=CP), node("node-b", labels=CP), node("node-c", labels=CP)], {"control_plane": True}),
    "worker-cordoned-before": ([node(unschedulable=True), node("node-b")], {}),
}
ROLES = (CONTAINERD, REBOOT)


def api_of(kind, kill_at=None):
    nodes, _options = KINDS[kind]
    members = [etcd_pod(n["metadata"]["name"]) for n in nodes if CP.keys() & n["metadata"]["labels"].keys()]
    pods = [pod("web-1"), pod("web-2"), pod("ds-1", owner="DaemonSet")] + members
    return ApiDouble(nodes, pods, kill_at=kill_at)


def first_run(kind, kill_at=None, kill_step=None):
    """The first run, killed after write ``kill_at`` or after step number ``kill_step``; (api, killed)."""
    api = api_of(kind, kill_at)
    seen = []

    def after_step(step):
        seen.append(step.name)
        if kill_step is not None and len(seen) == kill_step:
            raise Killed("killed after step %d (%s)" % (kill_step, step.name))
    try:
        rollout(api, roles=ROLES, options=KINDS[kind][1], here=FIRST, after_step=after_step, run_id="run-1")
    except Killed:
        return api, True, seen
    return api, False, seen


def count(kind, what):
    api, killed, seen = first_run(kind)
    assert not killed
    return len(api.writes) if what == "writes" else len(seen)


def check_given_back(api, kind):
    notes = api.notes()
    assert api.cordoned() is (kind == "worker-cordoned-before"), notes
    assert cordon.CORDONED_BY not in notes and cordon.HELD not in notes and record.ANNOTATION not in notes, notes
    assert api.held_leases() == [], api.leases
    assert ("kube-system", "nodefix-storm") not in api.leases, api.leases      # the storm reserve given back


def second_run(api, kind, roles):
    api.kill_at = None
    first, second = rollout(api, roles=roles, options=KINDS[kind][1], here=SECOND, run_id="run-2")
    return first, second


# every kill point of each kind of run, counted from a run that is not killed
WRITES = [(kind, k) for kind in sorted(KINDS) for k in range(1, count(kind, "writes") + 1)]
STEPS = [(kind, k) for kind in sorted(KINDS) for k in range(1, count(kind, "steps") + 1)]


@pytest.mark.parametrize("resume", [True, False], ids=["same-plan", "nothing-to-fix-now"])
@pytest.mark.parametrize("kind, k", WRITES)
def test_killed_after_any_write_the_next_run_gives_back_or_resumes(kind, resume, k):
    api, killed, _seen = first_run(kind, kill_at=k)
    assert killed
    first, second = second_run(api, kind, ROLES if resume else ())
    if resume:
        assert first["outcome"] is None, first["lines"]
        assert second["outcome"] == Outcome.OK, second["lines"]
    else:
        assert first["outcome"] == Outcome.NOTHING_TO_FIX, first["lines"]
    check_given_back(api, kind)


@pytest.mark.parametrize("kind, k", STEPS)
def test_killed_after_any_step_the_next_run_gives_back(kind, k):
    api, killed, seen = first_run(kind, kill_step=k)
    assert killed and len(seen) == k
    first, second = second_run(api, kind, ())
    assert first["outcome"] == Outcome.NOTHING_TO_FIX, first["lines"]
    check_given_back(api, kind)


def test_the_kill_points_are_every_write_and_every_step():
    # a run of each kind cordons, evicts, takes and gives back its slots: the writes above are all of them
    # (the lock slots' Leases: the storm breaker's reserve, Lease nodefix-storm, is one write of its own)
    kinds = dict((kind, [w[0] for w in first_run(kind)[0].writes if w[-1] != "nodefix-storm"]) for kind in KINDS)
    storm = [w[0] for w in first_run("worker")[0].writes if w[-1] == "nodefix-storm"]
    assert storm == ["create_lease", "delete_lease"], storm
    assert kinds["worker"].count("evict") == 2 and "create_lease" in kinds["worker"] and "delete_lease" in kinds["worker"]
    assert kinds["control-plane"].count("create_lease") == 2
    assert len(STEPS) == 3 * len(machine.BEFORE + machine.AFTER + machine.FINISH)


def test_a_run_killed_mid_fix_is_resumed_not_given_back_unverified():
    api, killed, seen = first_run("worker", kill_step=len(machine.BEFORE))     # killed while the roles ran
    assert killed and seen[-1] == "fix" and api.cordoned()
    assert json.loads(api.notes()[record.ANNOTATION])["phase"] == "fix"
    # the second run finds the reboot still to do: the node stays cordoned through it, back only once verified
    ctx_first, ctx_second = second_run(api, "worker", (REBOOT,))
    cordon_step = [s for s in ctx_first["steps"] if s["name"] == "cordon"][0]
    assert cordon_step["detail"].startswith("resumed run run-1's rollout from phase fix")
    assert ctx_second["outcome"] == Outcome.OK
    check_given_back(api, "worker")


def test_a_run_that_takes_over_a_rollout_past_its_drain_and_stops_before_resuming_it_leaves_it_to_resume():
    api, killed, _seen = first_run("worker", kill_step=len(machine.BEFORE))     # killed while the roles ran
    assert killed and json.loads(api.notes()[record.ANNOTATION])["phase"] == "fix"
    # the second run takes the record over, then the storm breaker stops it before its cordon step
    api.nodes["node-b"]["status"]["conditions"][0]["status"] = "False"
    stopped, _second = second_run(api, "worker", (CONTAINERD,))
    assert stopped["outcome"] == Outcome.STOPPED, stopped["detail"]
    kept = json.loads(api.notes()[record.ANNOTATION])
    assert kept["phase"] == "fix" and kept["run"] == "run-2", kept
    assert api.cordoned() and api.notes().get(cordon.CORDONED_BY)
    # the third run resumes it (the node stays cordoned until verified), it never gives the cordon back unverified
    api.nodes["node-b"]["status"]["conditions"][0]["status"] = "True"
    first, second = rollout(api, roles=(CONTAINERD,), options={}, here={"host": "controller", "pid": 300,
                                                                        "boot": "boot-c"}, run_id="run-3")
    cordon_step = [s for s in first["steps"] if s["name"] == "cordon"][0]
    assert cordon_step["detail"].startswith("resumed run run-2's rollout from phase fix"), cordon_step
    assert second["outcome"] == Outcome.OK
    check_given_back(api, "worker")


def test_a_run_killed_mid_fix_whose_node_now_needs_a_reboot_it_may_not_have_is_held_not_given_back():
    api, killed, _seen = first_run("worker", kill_step=len(machine.BEFORE))
    # meanwhile the reboot lock's one slot went to node-b: this node's reboot must wait
    api.leases[("kube-system", "nodefix-reboot-0")]["spec"]["holderIdentity"] = "node-b"
    first, second = second_run(api, "worker", (REBOOT,))
    assert second is None and first["outcome"] == Outcome.HELD
    assert api.cordoned() and "resumed from a dead run's phase fix" in json.loads(api.notes()[cordon.HELD])["reason"]


@pytest.mark.parametrize("phase, resumed", [("drain", False), ("reboot", True)])
def test_a_dead_version_1_run_of_the_playbook_is_given_back_or_resumed_by_its_phase(phase, resumed):
    # remediate.yml's runs write version 1 (node_rollout): a machine run reads them by the same rules
    import datetime
    dead = record.moved(record.new("yaml-run", datetime.datetime(2026, 12, 6, 6, tzinfo=datetime.timezone.utc),
                                   FIRST, 1800), phase, datetime.datetime(2026, 12, 6, 6, 5, tzinfo=datetime.timezone.utc))
    by = json.dumps({"run": "yaml-run", "time": "2026-12-06T06:05:00Z"})
    api = ApiDouble([node(unschedulable=True, **{record.ANNOTATION: record.text(dead), cordon.CORDONED_BY: by})],
                    [pod("web-1")])
    first, second = second_run(api, "worker", (CONTAINERD,))
    detail = [s["detail"] for s in first["steps"] if s["name"] == "cordon"][0]
    assert detail.startswith("resumed run yaml-run") is resumed, detail
    assert second["outcome"] == Outcome.OK
    check_given_back(api, "worker")
