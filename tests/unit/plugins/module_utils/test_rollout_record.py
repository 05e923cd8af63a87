# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.record and the node_rollout module (issue 62): one versioned record per Node holds a node's rollout
state; the run that holds a node renews its lease at every step, and a second run refuses a node a live run holds,
naming that run (two runs on one node once took the live run's cordon for a dead run's, drained and uncordoned
the node under it, both exit 0). Over the recording fake API of test_cordon_node_read."""

import datetime
import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record as rollout
from ansible_collections.nodefix.k8s.plugins.modules import node_rollout
from plugins.module_utils.test_cordon_node_read import Api, node

UTC = datetime.timezone.utc
T0 = datetime.datetime(2026, 12, 6, 7, 0, 0, tzinfo=UTC)
AWX = {"host": "awx-job-4711", "pid": 42, "boot": "boot-a"}
CLI = {"host": "laptop", "pid": 4242, "boot": "boot-b"}


def alive(pid):
    return True


def gone(pid):
    return False


def test_a_second_run_refuses_a_node_a_live_run_holds_naming_it():
    api = Api(node(False))
    first = node_rollout.claim(api, "node-a", "4711", 1800, T0, AWX, False, alive)
    assert first["action"] == "claim" and api.calls == ["get", ("patch", {"metadata": {"annotations": {
        rollout.ANNOTATION: rollout.text(first["record"])}}})]
    held = json.loads(api.node["metadata"]["annotations"][rollout.ANNOTATION])
    assert held == {"version": 1, "run": "4711", "phase": "claimed", "started": "2026-12-06T07:00:00Z",
                    "moved": "2026-12-06T07:00:00Z", "renewed": "2026-12-06T07:00:00Z", "leaseSeconds": 1800,
                    "holder": AWX}
    # the first run cordons it: the same PATCH moves the record to the drain and renews the lease
    ten = T0 + datetime.timedelta(minutes=10)
    node_cordon.run(api, "node-a", "4711", cordon=True, now=ten.timestamp())
    moved = json.loads(api.node["metadata"]["annotations"][rollout.ANNOTATION])
    assert moved["phase"] == "drain" and moved["renewed"] == "2026-12-06T07:10:00Z" and moved["cordonedBefore"] is False
    # a command-line run beside it, 35 minutes after the claim (inside the renewed lease): refused, nothing written
    second = Api(json.loads(json.dumps(api.node)))
    out = node_rollout.claim(second, "node-a", "cli-1", 1800, T0 + datetime.timedelta(minutes=35), CLI, False, gone)
    assert out["action"] == "refuse" and second.calls == ["get"] and not out["changed"]
    assert out["msg"].startswith("refused: nodefix run 4711 (awx-job-4711, process 42) holds this node (phase drain "
                                 "since 2026-12-06T07:10:00Z; this controller sees it for the first time: live for its full "
                                 "lease of 1800 s from now (its own clock), or until 2026-12-06T08:10:00Z on the wall clock "
                                 "(renewed + 2 x the lease))"), out["msg"]
    # the give-back never sees it: the run refused the node before the reclaim would read the cordon


def test_a_dead_runs_claim_is_taken_over_after_its_lease_or_at_once_on_the_same_controller():
    api = Api(node(False))
    node_rollout.claim(api, "node-a", "4711", 1800, T0, AWX, False, alive)
    # seen for the first time (no memory of it: every sight a first) - live for a full lease from now, so taken
    # over only once grossly stale: renewed more than 2 leases before this controller's clock (review R9)
    assert node_rollout.claim(api, "node-a", "cli-1", 1800, T0 + datetime.timedelta(minutes=59), CLI, False,
                              alive)["action"] == "refuse"
    later = T0 + datetime.timedelta(minutes=60)
    out = node_rollout.claim(api, "node-a", "cli-1", 1800, later, CLI, False, alive)
    assert out["action"] == "take_over" and "renewed at 2026-12-06T07:00:00Z, more than 2 x its lease of 1800 s" \
        in out["msg"]
    assert json.loads(api.node["metadata"]["annotations"][rollout.ANNOTATION])["run"] == "cli-1"
    # killed (SIGKILL) and run again on the same controller: its process is gone - taken over at once
    rerun = dict(CLI, pid=5000)
    out = node_rollout.claim(api, "node-a", "cli-1", 1800, later + datetime.timedelta(seconds=5), rerun, False, gone)
    assert out["action"] == "take_over" and "its process 4242 on this controller (laptop) is gone" in out["msg"]
    # the same process claiming again renews its own claim
    again = node_rollout.claim(api, "node-a", "cli-1", 1800, later + datetime.timedelta(minutes=1), rerun, False, alive)
    assert again["action"] == "claim" and again["record"]["started"] == "2026-12-06T08:00:05Z"


@pytest.mark.parametrize("value", ["garbage", "[]", '{"version": 2, "run": "r", "phase": "claimed"}',
                                   '{"version": 1, "run": "", "phase": "claimed"}',
                                   '{"version": 1, "run": "r", "phase": "claimed", "holder": "me", "leaseSeconds": 60}',
                                   # a lease no clock can hold (review of issue 62): refused, never a traceback
                                   json.dumps({"version": 1, "run": "r", "phase": "claimed", "started": "2026-12-06T07:00:00Z",
                                               "moved": "2026-12-06T07:00:00Z", "renewed": "2026-12-06T07:00:00Z",
                                               "leaseSeconds": 10 ** 12, "holder": {"host": "h", "pid": 1, "boot": "b"}})])
def test_a_record_that_cannot_be_read_refuses_the_node(value):
    api = Api(node(False, **{rollout.ANNOTATION: value}))
    out = node_rollout.claim(api, "node-a", "r2", 1800, T0, CLI, False, gone)
    assert out["action"] == "refuse" and api.calls == ["get"]
    assert "cannot be read" in out["msg"] and "kubectl annotate node NODE nodefix.k8s/rollout-" in out["msg"]


def test_check_mode_decides_and_writes_nothing_and_release_removes_only_this_runs_record():
    api = Api(node(False))
    assert node_rollout.claim(api, "node-a", "r1", 1800, T0, CLI, True, alive)["action"] == "claim"
    assert api.calls == ["get"]
    node_rollout.claim(api, "node-a", "r1", 1800, T0, CLI, False, alive)
    assert node_rollout.release(api, "node-a", "r2", CLI, False)["action"] == "none"
    assert rollout.ANNOTATION in api.node["metadata"]["annotations"]
    assert node_rollout.release(api, "node-a", "r1", CLI, False)["action"] == "release"
    assert rollout.ANNOTATION not in api.node["metadata"]["annotations"]
    assert api.calls[-1] == ("patch", {"metadata": {"annotations": {rollout.ANNOTATION: None}}})


@pytest.mark.parametrize("version,phase", [(1, "reboot"), (2, "fix")], ids=["node_rollout", "machine"])
def test_the_reboot_record_moves_the_rollout_and_renews_its_lease(monkeypatch, version, phase):
    """The reboot role's record write (reboot_backoff state=record) renews the rollout's lease: a version 1 record
    (node_rollout's) moves to its phase `reboot`; the rollout machine's (version 2) has no phase `reboot` - the
    reboot is one of its fixes - and stays in `fix` (before: the reboot role's record write failed, the reboot not
    done)."""
    from ansible_collections.nodefix.k8s.plugins.modules import reboot_backoff
    from plugins.module_utils.test_reboot_backoff import FakeNodes, PENDING
    claimed = rollout.new("run-9", T0, CLI, 1800, version=version)
    if version == 2:
        claimed = rollout.moved(claimed, "fix", T0)
    nodes = FakeNodes({"node-a": {rollout.ANNOTATION: rollout.text(claimed)}})
    monkeypatch.setattr(node_api, "NodeAnnotations", nodes)
    later = T0 + datetime.timedelta(minutes=20)
    reboot_backoff.record({"state": "record", "kubeconfig": "/k", "context": None, "node": "node-a",
                           "reasons": [PENDING], "backoff": "6h", "run_id": "run-9", "timeout": 10, "max_reboots": 2},
                          later, check_mode=False)
    moved = json.loads(nodes.nodes["node-a"][rollout.ANNOTATION])
    assert moved["version"] == version and moved["phase"] == phase
    assert moved["renewed"] == "2026-12-06T07:20:00Z" and moved["started"] == "2026-12-06T07:00:00Z"


def test_the_playbook_pid_is_the_outermost_ansible_playbook_ancestor():
    procs = {900: (800, "/usr/bin/python3 /tmp/AnsiballZ_node_rollout.py"), 800: (700, "/bin/sh -c ..."),
             700: (600, "/venv/bin/python /venv/bin/ansible-playbook remediate.yml"),
             600: (500, "/venv/bin/python /venv/bin/ansible-playbook remediate.yml"), 500: (1, "bash")}
    assert rollout.playbook_pid(900, procs.get) == 600
    assert rollout.playbook_pid(900, {900: (1, "python x")}.get) == 900


def test_a_node_cordoned_without_a_rollout_record_of_this_run_is_cordoned_as_before():
    body = node_cordon.cordon_body("r1", T0.timestamp(), node(False))
    assert set(body["metadata"]["annotations"]) == {cordon.CORDONED_BY}


def after_read(api, other):
    """``api`` whose next read of the Node runs ``other`` (another run's claim) before it answers: the other claim
    lands between this run's read and its PATCH (review finding M1)."""
    read = api.get_node

    def get_node(name):
        seen = read(name)
        if api.__dict__.pop("get_node", None):
            other()
        return seen
    api.get_node = get_node
    return api


def test_two_runs_claiming_at_once_one_wins_the_other_is_refused_naming_it():
    shared = Api(node(False))
    first = {}
    racing = after_read(Api(shared.node), lambda: first.update(
        node_rollout.claim(shared, "node-a", "4711", 1800, T0, AWX, False, alive)))
    out = node_rollout.claim(racing, "node-a", "cli-1", 1800, T0, CLI, False, alive)
    assert first["action"] == "claim"
    # the stale PATCH was refused (409), the Node read again: the live run's claim is there - refused, named
    assert out["action"] == "refuse" and "nodefix run 4711 (awx-job-4711, process 42) holds this node" in out["msg"]
    assert [c if isinstance(c, str) else c[0] for c in racing.calls] == ["get", "patch", "get"]
    assert json.loads(shared.node["metadata"]["annotations"][rollout.ANNOTATION])["run"] == "4711"


def test_a_claim_stale_every_time_is_refused_and_a_node_without_a_version_is_refused():
    api = Api(node(False))

    def stale(name, body, resource_version=None):
        raise node_rollout.kube.KubeError("patching Node %s" % name, 409, "Conflict")
    api.patch_node = stale
    out = node_rollout.claim(api, "node-a", "r1", 1800, T0, CLI, False, alive)
    assert out["action"] == "refuse" and "409 Conflict each time" in out["msg"]
    bare = Api(node(False))
    del bare.node["metadata"]["resourceVersion"]
    with pytest.raises(node_rollout.NodefixError, match="no metadata.resourceVersion"):
        node_rollout.claim(bare, "node-a", "r1", 1800, T0, CLI, False, alive)
    assert rollout.ANNOTATION not in bare.node["metadata"]["annotations"]


def _foreign(renewed, lease=600):
    rec = rollout.new("run-0", renewed, AWX, lease, version=rollout.MACHINE_VERSION)
    return {rollout.ANNOTATION: rollout.text(rec)}


def test_a_renewal_in_this_controllers_future_is_not_well_formed():
    """A ``renewed`` more than MAX_SKEW ahead of the reader's clock would hold the node as long as the writer liked
    (or says the clocks disagree past what is allowed): the node is refused, naming it (review #4); within the skew
    it is an ordinary live record."""
    ahead = T0 + datetime.timedelta(seconds=rollout.MAX_SKEW + 5)
    out = rollout.decide(_foreign(ahead), "cli-1", T0, CLI, 1800, gone, version=rollout.MACHINE_VERSION)
    assert out["action"] == "refuse" and out["record"] is None
    assert "is 35 s ahead of this controller's clock" in out["msg"] and "cannot be read" in out["msg"], out["msg"]
    near = T0 + datetime.timedelta(seconds=rollout.MAX_SKEW - 5)
    out = rollout.decide(_foreign(near), "cli-1", T0, CLI, 1800, gone, version=rollout.MACHINE_VERSION)
    assert out["action"] == "refuse" and "holds this node" in out["msg"], out["msg"]


def test_a_lease_is_timed_on_the_observers_own_clock_not_the_holders():
    """As client-go's leader election (observedTime): once this controller has seen the record, how long it has seen
    it unchanged decides - a holder whose wall clock runs behind (its renewal looks old) is still live, one whose
    clock runs ahead (its renewal looks fresh) is dead once its lease has passed on this controller's clock."""
    stale_looking = _foreign(T0 - datetime.timedelta(hours=2))       # by the wall clock: long run out
    out = rollout.decide(stale_looking, "cli-1", T0, CLI, 1800, gone, version=rollout.MACHINE_VERSION,
                         observed=lambda rec: 120)
    assert out["action"] == "refuse", out
    assert "seen it unchanged for 120 s of its lease of 600 s (its own clock)" in out["msg"], out["msg"]
    fresh_looking = _foreign(T0)                                     # by the wall clock: just renewed
    out = rollout.decide(fresh_looking, "cli-1", T0, CLI, 1800, gone, version=rollout.MACHINE_VERSION,
                         observed=lambda rec: 600)
    assert out["action"] == "take_over", out
    assert "seen it unchanged for 600 s, past its lease of 600 s (its own clock)" in out["msg"], out["msg"]
    # seen for the first time: the wall clock, with the skew allowed
    out = rollout.decide(_foreign(T0 - datetime.timedelta(seconds=600 + rollout.MAX_SKEW - 1)), "cli-1", T0, CLI,
                         1800, gone, version=rollout.MACHINE_VERSION, observed=lambda rec: None)
    assert out["action"] == "refuse", out


def test_a_first_sight_never_takes_over_a_live_lease_on_a_fast_wall_clock():
    """Review R9: a record seen for the first time was judged by the wall clock (30 s of skew allowed), so a controller
    whose clock is 15 min fast took a live lease over 15 min early - and under AWX every sight is a first. It is live
    for a full lease from the first sight; only a record renewed 2 leases before this clock is a crashed run's."""
    holder_now = datetime.datetime(2026, 12, 6, 7, 0, 0, tzinfo=datetime.timezone.utc)
    held = rollout.new("run-0", holder_now, {"host": "controller-a", "pid": 1, "boot": "boot-a"}, 1800,
                       version=rollout.MACHINE_VERSION)
    notes = {rollout.ANNOTATION: rollout.text(held)}
    here = {"host": "controller-b", "pid": 1, "boot": "boot-b"}
    # 20 min later (10 min of the lease left), seen for the first time by a controller whose clock is 15 min fast
    fast = holder_now + datetime.timedelta(minutes=20 + 15)
    decision = rollout.decide(notes, "run-1", fast, here, 1800, lambda pid: False, version=rollout.MACHINE_VERSION,
                              observed=lambda r: None)
    assert decision["action"] == "refuse", decision["msg"]
    stale = holder_now + datetime.timedelta(seconds=2 * 1800)
    decision = rollout.decide(notes, "run-1", stale, here, 1800, lambda pid: False, version=rollout.MACHINE_VERSION,
                              observed=lambda r: None)
    assert decision["action"] == "take_over", decision["msg"]
