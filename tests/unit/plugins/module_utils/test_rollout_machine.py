# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine (issue 62): one node's rollout as a state machine - every transition of the half before the
fixes and of the half after them, each step a typed result and the machine's outcome one of the Outcome enum, never
a message prefix; check mode is the same machine with every write a "would ..." step. Against the API double
(rollout_api_double.py: resourceVersion/409, evictions' 429 with retryAfterSeconds, 404s)."""

import datetime
import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import interface
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import STEP_OUTCOMES, Runner, Stop
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Clock, etcd_pod, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, HERE, REASON, REBOOT, Work, context, names, \
    outcomes, rollout

CP = {"node-role.kubernetes.io/control-plane": ""}


def records(api):
    """The rollout records written, in order."""
    return [json.loads(w[2]["metadata"]["annotations"][record.ANNOTATION]) for w in api.writes if w[0] == "patch_node"
            and (w[2]["metadata"]["annotations"].get(record.ANNOTATION) or "").startswith("{")]


def untouched(api):
    """No write but this run's record (its claim, its phases, its release): no cordon, eviction or slot."""
    return (all(w[0] == "patch_node" and set(w[2]) == set(["metadata"]) and set(w[2]["metadata"]["annotations"]) ==
                set([record.ANNOTATION]) for w in api.writes) and record.ANNOTATION not in api.notes())


def clean(api, cordoned=False):
    notes = api.notes()
    return (api.cordoned() is cordoned and cordon.CORDONED_BY not in notes and cordon.HELD not in notes
            and record.ANNOTATION not in notes and api.held_leases() == [])


def test_a_worker_is_claimed_gated_cordoned_drained_fixed_verified_and_given_back():
    api = ApiDouble([node()], [pod("web-1"), pod("ds-1", owner="DaemonSet")])
    first, second = rollout(api, roles=(CONTAINERD, REBOOT))
    assert first["outcome"] is None and names(first) == list(machine.BEFORE)
    assert second["outcome"] == Outcome.OK and names(second) == list(machine.AFTER + machine.FINISH)
    assert all(s["outcome"] in STEP_OUTCOMES and isinstance(s["seconds"], float) for s in first["steps"] + second["steps"])
    assert [p["metadata"]["name"] for p in api.pods] == ["ds-1"]        # the DaemonSet's pod is not evicted
    assert clean(api)
    # the record was written before the cordon, the drain and the fixes, and named the locks before the slot
    phases = [r["phase"] for r in records(api)]
    assert phases == ["claimed", "gates", "cordon", "drain", "fix", "verify", "give_back"]
    kinds = [w[0] for w in api.writes]
    assert kinds.index("create_lease") > 1 and kinds.index("evict") > 4


def test_the_state_between_the_halves_is_plain_data_and_the_record_says_fix():
    api = ApiDouble([node()], [pod("web-1")])
    first = machine.begin(context(api))
    json.dumps(first["state"])
    on_node = record.read(api.notes())
    assert on_node["version"] == 2 and on_node["phase"] == "fix" and on_node["cordonedBefore"] is False
    assert on_node["slots"] == ["kube-system/nodefix-control-plane", "kube-system/nodefix-reboot"]
    assert on_node["holder"] == HERE and on_node["run"] == "run-1"


def test_nothing_to_fix_writes_only_the_claim_and_its_release():
    api = ApiDouble([node()], [pod("web-1")])
    first, second = rollout(api, roles=())
    assert second is None and first["outcome"] == Outcome.NOTHING_TO_FIX and untouched(api)
    assert [r["phase"] for r in records(api)] == ["claimed"]
    assert outcomes(first)["cordon"] == "skipped" and outcomes(first)["drain"] == "skipped"


def test_a_node_held_by_an_earlier_run_stays_untouched_and_is_reported_held():
    held = json.dumps({"run": "old", "time": "2026-12-05T07:00:00Z", "reason": "still open"})
    api = ApiDouble([node(unschedulable=True, **{cordon.HELD: held})], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD, REBOOT))
    assert second is None and first["outcome"] == Outcome.HELD and "left untouched" in first["detail"]
    assert untouched(api) and api.cordoned() and api.notes()[cordon.HELD] == held
    assert not [c for c in api.calls if c[0] in ("evict", "list_pods", "create_lease")]


def test_a_node_a_live_run_holds_is_refused_naming_it_and_nothing_is_written():
    live = record.new("awx-7", datetime.datetime(2026, 12, 6, 6, 59, tzinfo=datetime.timezone.utc),
                      {"host": "awx", "pid": 7, "boot": "b"}, 1800, version=2)
    api = ApiDouble([node(**{record.ANNOTATION: record.text(live)})], [pod("web-1")])
    first = rollout(api)[0]
    assert first["outcome"] == Outcome.REFUSED and "awx-7" in first["detail"] and api.writes == []
    assert outcomes(first)["release"] == "skipped"


def test_a_claim_raced_by_another_run_is_refused():
    api = ApiDouble([node()], [pod("web-1")])
    read = api.get_node

    def racing(name):
        answer = read(name)
        api.nodes[name]["metadata"]["resourceVersion"] = "999"     # another run wrote the Node since
        return answer
    api.get_node = racing
    first = rollout(api)[0]
    assert first["outcome"] == Outcome.REFUSED and "409" in first["detail"] and api.writes == []


def test_not_root_is_refused_before_any_gate_or_drain():
    api = ApiDouble([node()], [pod("web-1")])
    first = rollout(api, euid=1000)[0]
    assert first["outcome"] == Outcome.REFUSED and "uid 1000" in first["detail"] and untouched(api)


def test_the_storm_re_count_right_before_the_cordon_stops_the_node_and_gives_everything_back():
    """Review 9a: the machine's storm step is fed - it lists the Nodes itself, right before the cordon: node-b and
    node-c NotReady, node-d cordoned by an operator, and node-a in flight: 4 of 5 - stopped, nothing cordoned or
    evicted, the slots and the claim given back."""
    api = ApiDouble([node(), node("node-b", ready="False"), node("node-c", ready="Unknown"),
                     node("node-d", unschedulable=True), node("node-e")], [pod("web-1")])
    first = rollout(api, roles=(CONTAINERD, REBOOT))[0]
    assert first["outcome"] == Outcome.STOPPED and outcomes(first)["storm"] == Outcome.STOPPED
    assert names(first) == list(machine.BEFORE[:machine.BEFORE.index("storm") + 1] + machine.FINISH)
    assert ("counted again right before this node's cordon: 4 of 5 node(s) (80%) are unavailable or would be "
            "disrupted: 3 unavailable (node-b: NotReady; node-c: Ready Unknown; node-d: cordoned); 1 need a drain, "
            "reboot or restart (drain 1), over nodefix_storm_percent (20%)") in first["detail"]
    assert not [w for w in api.writes if w[0] == "evict"] and clean(api)
    assert [c for c in api.calls if c[0] == "list_nodes"] == [("list_nodes", None)]       # one request


def test_the_storm_counts_the_pool_and_the_batch_in_flight_and_honours_the_override():
    """The selector's pool only (node-g, NotReady elsewhere, is not counted); the other nodes of the batch (the storm
    audit's plans) count as in flight; the override proceeds and says so; 100 turns it off; nothing to disrupt is
    not counted."""
    workers = {"pool": "w"}
    nodes = [node(labels=workers), node("node-b", labels=workers), node("node-c", labels=workers),
             node("node-d", labels=workers), node("node-e", labels=workers), node("node-g", ready="False")]
    batch = [{"node": "node-a", "disruptive": ["drain"], "findings": []},
             {"node": "node-b", "disruptive": ["drain", "reboot"], "findings": []}]
    options = {"storm_node_selector": "pool=w", "storm_batch": batch}
    first = rollout(ApiDouble(nodes, [pod("web-1")]), options=dict(options, storm_percent=40))[0]
    assert outcomes(first)["storm"] == "done" and "2 of 5 node(s) (40%) unavailable or in flight, within 40%" in \
        [s["detail"] for s in first["steps"] if s["name"] == "storm"][0]
    first = rollout(ApiDouble(nodes, [pod("web-1")]), options=dict(options, storm_percent=30))[0]
    assert first["outcome"] == Outcome.STOPPED and "2 of 5 node(s) (40%) need a drain, reboot or restart (drain 2, " \
        "reboot 1), over nodefix_storm_percent (30%)" in first["detail"]
    api = ApiDouble(nodes, [pod("web-1")])
    first, second = rollout(api, options=dict(options, storm_percent=30, storm_override=True))
    assert second["outcome"] == Outcome.OK and "proceeding: nodefix_storm_override is set" in \
        [s["detail"] for s in first["steps"] if s["name"] == "storm"][0]
    api = ApiDouble(nodes, [pod("web-1")])
    first = rollout(api, options=dict(options, storm_percent=100))[0]
    assert outcomes(first)["storm"] == "skipped" and not [c for c in api.calls if c[0] == "list_nodes"]
    first = rollout(ApiDouble(nodes, [pod("web-1")]), roles=(), options=dict(options, storm_percent=0))[0]
    assert first["outcome"] == Outcome.NOTHING_TO_FIX


def test_a_storm_that_grows_during_a_drain_stops_the_next_node():
    """Issue 62's review, reproduced: 10 nodes, 2 NotReady at the start; 3 more go NotReady during node-a's drain.
    node-a (3 of 10 with it, within 30 %) is remediated; node-b - the next batch - is stopped before its cordon
    (6 of 10), nothing of it cordoned or evicted. (The storm breaker judged once per run: node-b was drained.)"""
    class Degrading(ApiDouble):
        def evict(self, namespace, name, uid=None, budget=None):
            for other in ("node-05", "node-06", "node-07"):
                self.nodes[other]["status"]["conditions"][0]["status"] = "False"
            return ApiDouble.evict(self, namespace, name, uid, budget)
    nodes = [node("node-a"), node("node-b")] + [node("node-%02d" % i, ready="False" if i in (8, 9) else "True")
                                                for i in range(2, 10)]
    api = Degrading(nodes, [pod("web-1"), pod("web-2", node_name="node-b")])
    first, second = rollout(api, options={"storm_percent": 30})
    assert second["outcome"] == Outcome.OK and clean(api)
    first = rollout(api, options={"storm_percent": 30}, node_name="node-b")[0]
    assert first["outcome"] == Outcome.STOPPED and "6 of 10 node(s) (60%)" in first["detail"]
    assert [p["metadata"]["name"] for p in api.pods] == ["web-2"] and not api.nodes["node-b"]["spec"].get(
        "unschedulable")


def test_a_node_list_that_fails_stops_the_node_before_its_cordon():
    error = kube.KubeError("listing the Nodes", 403, "Forbidden", "nodes is forbidden")
    api = ApiDouble([node()], [pod("web-1")], fail={"list_nodes": error})
    first = rollout(api)[0]
    assert first["outcome"] == Outcome.STOPPED and "could not count the cluster's Nodes" in first["detail"]
    assert "403" in first["detail"] and not api.cordoned() and clean(api)


def test_a_control_plane_node_not_opted_in_is_held_whole():
    api = ApiDouble([node(labels=CP)], [pod("web-1")])
    first = rollout(api)[0]
    assert first["outcome"] == Outcome.HELD and "nodefix_control_plane is false" in first["detail"]
    assert not [w for w in api.writes if w[0] in ("evict", "create_lease")] and not api.cordoned()
    assert clean(api)


@pytest.mark.parametrize("override", [False, True])
def test_the_quorum_rule_holds_one_of_two_members_unless_overridden(override):
    nodes = [node(labels=CP), node("node-b", labels=CP)]
    api = ApiDouble(nodes, [pod("web-1"), etcd_pod("node-a"), etcd_pod("node-b")])
    first, second = rollout(api, options={"control_plane": True, "quorum_override": override})
    if not override:
        assert first["outcome"] == Outcome.HELD and "quorum" in first["detail"] and clean(api)
        return
    assert second["outcome"] == Outcome.OK and outcomes(first)["control_plane"] == "done" and clean(api)
    assert ("create_lease", "kube-system", "nodefix-control-plane-0") in api.writes


def test_an_etcd_member_without_a_control_plane_label_is_guarded():
    api = ApiDouble([node(), node("node-b", labels=CP)], [pod("web-1"), etcd_pod("node-a"), etcd_pod("node-b")])
    first = rollout(api)[0]
    assert first["outcome"] == Outcome.HELD and "etcd member" in first["detail"]


@pytest.mark.parametrize("back_after", [3, None])
def test_the_control_planes_slot_waits_for_its_etcd_member_after_the_reboot_slot_is_given_back(back_after):
    """The reboot lock's slot first (another node may reboot), then the control plane's only once the node's own
    etcd member is Ready again - looked at every lock_poll s up to etcd_wait s (control_plane_gate state=release's
    wait); not Ready by then, the slot is kept and the record says why (test_18b's control-plane case)."""
    nodes = [node(labels=CP), node("node-b", labels=CP), node("node-c", labels=CP)]
    api = ApiDouble(nodes, [pod("web-1")] + [etcd_pod(n) for n in ("node-a", "node-b", "node-c")])
    clock = Clock()
    ctx = context(api, roles=(REBOOT,), clock=clock, options={"control_plane": True, "etcd_wait": 10, "lock_poll": 2})
    first = machine.begin(ctx)
    assert first["outcome"] is None
    member = [p for p in api.pods if p["metadata"]["name"] == "etcd-node-a"][0]
    member["status"]["conditions"][0]["status"] = "False"        # the reboot took it down
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock.sleep(seconds)
        if back_after is not None and sum(slept) >= back_after:
            member["status"]["conditions"][0]["status"] = "True"
    ctx.sleep = sleep
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": first["state"]["fix_roles"], "msg": ""})
    deletes = [w[2] for w in api.writes if w[0] == "delete_lease" and w[2] != "nodefix-storm"]   # (the storm reserve's)
    rec = interface.remediation_record(second["state"])
    if back_after is not None:
        assert second["outcome"] == Outcome.OK and deletes == ["nodefix-reboot-0", "nodefix-control-plane-0"]
        assert slept == [2, 2] and api.held_leases() == [] and "slot_kept" not in rec
    else:
        assert deletes == ["nodefix-reboot-0"] and api.held_leases() == ["kube-system/nodefix-control-plane-0"]
        assert sum(slept) == 10 and "etcd member etcd-node-a on node-a is not Ready" in rec["slot_kept"]
        assert "node-a keeps nodefix-control-plane-0" in rec["msg"]


def test_the_backoff_drops_a_reboot_open_again_and_a_node_only_needing_it_is_held():
    last = backoff.record(datetime.datetime(2026, 12, 6, 6, 0, tzinfo=datetime.timezone.utc), "old", [REASON],
                          boot_id="boot-0", backoff_seconds=21600)
    api = ApiDouble([node(**{backoff.ANNOTATION: last})], [pod("web-1")])
    first = rollout(api, roles=(REBOOT,))[0]
    assert first["outcome"] == Outcome.HELD and first["detail"].startswith("reboot held: rebooted at")
    assert api.leases == {} and not api.cordoned() and untouched(api)


def test_the_backoff_bounds_reboots_whatever_the_reason():
    now = datetime.datetime(2026, 12, 6, 6, 0, tzinfo=datetime.timezone.utc)
    earlier = backoff.record(now - datetime.timedelta(hours=1), "r1", [{"id": "a"}], boot_id="boot-x")
    last = backoff.record(now, "r2", [{"id": "b"}], boot_id="boot-0", last=backoff.read_record(earlier),
                          backoff_seconds=21600)
    api = ApiDouble([node(**{backoff.ANNOTATION: last})], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD, REBOOT))
    assert "rebooted 2 times" in [s["detail"] for s in first["steps"] if s["name"] == "backoff"][0]
    assert first["state"]["fix_roles"] == [CONTAINERD] and second["outcome"] == Outcome.OK


def test_a_closed_window_or_a_firing_alert_drops_the_reboot_and_the_other_fixes_go_on():
    api = ApiDouble([node()], [pod("web-1")])
    window = gate.Window(days=["sat"], start="01:00", end="02:00")    # 2026-12-06 07:00 UTC is a Sunday
    first, second = rollout(api, roles=(CONTAINERD, REBOOT), window=window, work=Work(alerts=["NodeDown"]))
    detail = [s["detail"] for s in first["steps"] if s["name"] == "reboot_gate"][0]
    assert "outside the reboot window" in detail and "alert NodeDown is firing" in detail
    assert first["state"]["fix_roles"] == [CONTAINERD] and api.leases == {} and second["outcome"] == Outcome.OK


def test_a_blocking_pod_holds_the_reboot():
    api = ApiDouble([node()], [pod("web-1"), pod("backup-1", labels={"app": "backup"})])
    first = rollout(api, roles=(REBOOT,), options={"blocking_selectors": ["app=backup"]})[0]
    assert first["outcome"] == Outcome.HELD and "blocking pod(s) on the node: default/backup-1" in first["detail"]


def test_a_full_reboot_lock_holds_the_reboot():
    api = ApiDouble([node(), node("node-b")], [pod("web-1")])
    api.create_lease("kube-system", {"metadata": {"name": "nodefix-reboot-0"}, "spec": {"holderIdentity": "node-b"}})
    first = rollout(api, roles=(REBOOT,))[0]
    assert first["outcome"] == Outcome.HELD and "the reboot lock is full (nodefix-reboot-0: node-b)" in first["detail"]


def test_a_slot_an_earlier_run_left_is_given_back_and_the_record_says_so_a_node_not_ready_keeps_it():
    """reclaim_slots' words and the slots in the node's record (the report's msg, lock_reclaimed, slot_kept), in
    reboot_gate state=reclaim's words (test_18b reads them in the report)."""
    for ready, kept in (("True", False), ("False", True)):
        api = ApiDouble([node(ready=ready)], [pod("web-1")])
        slot, _holders = gate.LeaseLock(api, "kube-system", "nodefix-reboot", 1, "node-a").acquire("an earlier run")
        first, second = rollout(api, roles=(CONTAINERD,))
        rec = interface.remediation_record((second or first)["state"])
        if kept:
            assert api.held_leases() == ["kube-system/%s" % slot]
            assert "node-a keeps %s (held since " % slot in rec["msg"] and "it is not Ready" in rec["slot_kept"]
            assert "lock_reclaimed" not in rec
        else:
            assert api.held_leases() == []
            assert "released %s that node-a held since " % slot in rec["msg"]
            assert "from an earlier run: no reboot of node-a is pending or in progress and it is Ready" in rec["msg"]
            assert [r["slot"] for r in rec["lock_reclaimed"]] == [slot] and "slot_kept" not in rec


def test_a_kernel_upgrades_reboot_is_allowed_by_the_rollout_and_judged_again_before_it():
    """The kernel upgrade's reason (the play adds it to the plan's reboot_reasons; the reboot role is not among the
    fix roles): the action answers reboot_allowed for it - gated, drained, the reboot lock's slot held - and recheck
    judges it again (remediate.yml no longer works it out itself)."""
    kernel = {"id": "kernel.below_minimum", "check": "kernel", "reason": "kernel 5.4 below the minimum 5.15"}
    lock = "kube-system/nodefix-reboot"
    api = ApiDouble([node()], [pod("web-1")])
    ctx = context(api, roles=(CONTAINERD,))
    ctx.plan = dict(ctx.plan, reboot_reasons=[kernel])
    first = machine.begin(ctx)
    assert first["outcome"] is None and first["state"]["fix_roles"] == [CONTAINERD]
    assert lock in first["state"]["slots"] and interface.reboot_allowed(first["state"], lock)
    ctx.window = gate.Window(["mo"], "00:00", "01:00", "UTC")        # closed now (a Sunday, 07:00)
    again = machine.recheck(ctx, first["state"])
    assert outcomes(again)["reboot_recheck"] == Outcome.HELD and not interface.reboot_allowed(again["state"], lock)
    # not drained (nodefix_drain false): never allowed, whatever the gate said
    api = ApiDouble([node()], [pod("web-1")])
    ctx = context(api, roles=(CONTAINERD,), options={"drain": False})
    ctx.plan = dict(ctx.plan, reboot_reasons=[kernel])
    assert not interface.reboot_allowed(machine.begin(ctx)["state"], lock)


@pytest.mark.parametrize("given,seconds", [("6h", 21600), ("90m", 5400), ("1h30m", 5400), ("21600", 21600),
                                           ("0", 0), ("2w", 1209600)])
def test_the_actions_backoff_is_a_duration_read_by_the_reboot_backoff_modules_parser(given, seconds):
    args = dict((name, spec.get("default")) for name, spec in interface.argument_spec().items())
    assert args["backoff"] == "6h" and "backoff_seconds" not in args
    assert interface.machine_options(dict(args, backoff=given))["backoff_seconds"] == seconds
    assert backoff.parse_duration(given) == seconds         # the one parser (reboot_backoff's)


@pytest.mark.parametrize("given", ["6 hours", "-1", "1.5h", ""])
def test_a_backoff_that_is_not_a_duration_is_refused_naming_it(given):
    args = dict((name, spec.get("default")) for name, spec in interface.argument_spec().items())
    with pytest.raises(Exception) as raised:
        interface.machine_options(dict(args, backoff=given))
    assert "backoff (nodefix_reboot_backoff)" in str(raised.value) and "not a duration" in str(raised.value)


def test_an_event_that_cannot_be_posted_is_a_warning_and_the_rollout_goes_on():
    """The start and end Events (the action's, in-process): an API error posting them is said in the step and the
    half's ``warnings``, never the rollout's outcome (remediate.yml's node_events tasks ignored their failures the same
    way) - and never a change (review 9d): the step is skipped, as nothing was written."""
    def events(phase, state):
        raise NodefixError("posting the %s Event: 403 Forbidden" % phase)
    api = ApiDouble([node()], [pod("web-1")])
    ctx = context(api)
    ctx.events = events
    first = machine.begin(ctx)
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": first["state"]["fix_roles"], "msg": ""})
    steps = dict((s["name"], s) for s in first["steps"] + second["steps"])
    assert second["outcome"] == Outcome.OK and clean(api)
    for name, phase, half in (("start_event", "start", first), ("end_event", "end", second)):
        assert steps[name]["outcome"] == "skipped" and "could not be posted (warning)" in steps[name]["detail"]
        assert "posting the %s Event: 403 Forbidden" % phase in steps[name]["detail"]
        assert [w for w in half["warnings"] if "posting the %s Event: 403 Forbidden" % phase in w]


def test_events_the_api_accepted_in_part_are_a_change_and_the_rest_a_warning():
    api = ApiDouble([node()], [pod("web-1")])
    ctx = context(api)
    ctx.events = lambda phase, state: ["event Drained: 422 Unprocessable Entity"] if phase == "end" else []
    first = machine.begin(ctx)
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": first["state"]["fix_roles"], "msg": ""})
    assert first["warnings"] == [] and outcomes(first)["start_event"] == "done"
    assert outcomes(second)["end_event"] == "done" and second["warnings"] == [
        "the end Event (ok): not all was posted: event Drained: 422 Unprocessable Entity"]


def test_a_pdb_429_is_retried_after_its_retry_after_until_the_eviction_goes_through():
    api = ApiDouble([node()], [pod("web-1")], refuse={"web-1": 2}, retry_after=7)
    clock = Clock()
    first, second = rollout(api, clock=clock)
    assert clock.slept[:2] == [7, 7] and second["outcome"] == Outcome.OK and clean(api)


def test_an_eviction_the_api_server_answers_500_fails_the_drain_with_that_error_not_a_timeout():
    """Review 9b: a 500 on an eviction is the API server's error - its status, reason and message (redacted) - and the
    drain fails with it at once (drain failed), never "timed out after 600 s with pods still on the node"."""
    said = "etcdserver: request timed out; token=Very-Secret-9b"
    api = ApiDouble([node()], [pod("web-1"), pod("db-0")], answers={"db-0": (500, None, said)})
    clock = Clock()
    first, second = rollout(api, clock=clock, options={"drain_timeout": 600})
    assert second is None and first["outcome"] == Outcome.DRAIN_FAILED
    detail = first["detail"]
    assert detail.startswith("drain failed: eviction of pod default/db-0: the API server answered 500 Internal "
                             "Server Error: etcdserver: request timed out")
    assert "timed out after" not in detail and "Very-Secret-9b" not in detail
    assert "blocked: default/db-0 (still running)" in detail and clock.slept == []     # not waited for
    assert outcomes(first)["drain"] == Outcome.DRAIN_FAILED and clean(api)


def test_the_drain_gives_each_eviction_the_time_left_for_its_retries():
    """Review 9c: the client's retry of an eviction's 503 (Retry-After) is bounded by the drain's time left."""
    api = ApiDouble([node()], [pod("web-1")], refuse={"web-1": 1}, retry_after=20)
    first, second = rollout(api, options={"drain_timeout": 100})
    assert second["outcome"] == Outcome.OK and api.budgets == [100, 80]


@pytest.mark.parametrize("cordoned", [False, True], ids=["was-schedulable", "was-cordoned"])
def test_a_pdb_that_never_allows_fails_the_drain_at_its_timeout_and_gives_everything_back(cordoned):
    """The schedulability as it was before the run (test_13's node-d; node-dc, cordoned before, too)."""
    api = ApiDouble([node(unschedulable=cordoned)], [pod("web-1"), pod("db-0")], refuse={"db-0": None})
    first, second = rollout(api, roles=(CONTAINERD, REBOOT), options={"drain_timeout": 60})
    assert second is None and first["outcome"] == Outcome.DRAIN_FAILED
    assert "default/db-0 (refused by a PodDisruptionBudget)" in first["detail"] and "evicted: default/web-1" in \
        first["detail"]
    assert clean(api, cordoned=cordoned) and outcomes(first)["release_slots"] == "done"
    assert "fix" not in [s["name"] for s in first["steps"] if s["outcome"] == "done"]     # nothing fixed


def test_a_pod_stuck_terminating_fails_the_drain():
    api = ApiDouble([node()], [pod("web-1")], stuck={"web-1"})
    first = rollout(api, options={"drain_timeout": 30})[0]
    assert first["outcome"] == Outcome.DRAIN_FAILED and "default/web-1 (terminating)" in first["detail"] and clean(api)


@pytest.mark.parametrize("status", ["ok", "failed"])
def test_a_node_cordoned_before_the_run_stays_cordoned(status):
    """An operator's cordon stays, whether the fixes went well or failed (test_13's node-c; node-cf before)."""
    api = ApiDouble([node(unschedulable=True)], [pod("web-1")])
    first, second = rollout(api, status=status)
    assert outcomes(first)["cordon"] == "skipped"
    assert second["outcome"] == (Outcome.OK if status == "ok" else Outcome.FAILED)
    (give_back,) = [s for s in second["steps"] if s["name"] == "give_back"]
    assert give_back["outcome"] == "skipped" and "cordoned before this run: it stays cordoned" in give_back["detail"]
    assert clean(api, cordoned=True) and [p["metadata"]["name"] for p in api.pods] == []
    assert not [w for w in api.writes if w[0] == "patch_node" and "spec" in w[2]]       # never an uncordon
    assert [(r["phase"], r["cordonedBefore"]) for r in records(api)][2:4] == [("drain", True), ("fix", True)]


def test_require_drain_refuses_restarts_on_a_node_that_is_not_drained():
    api = ApiDouble([node()], [pod("web-1")])
    first = rollout(api, options={"drain": False, "require_drain": True})[0]
    assert first["outcome"] == Outcome.REFUSED and "nodefix_require_drain" in first["detail"]
    assert not [w for w in api.writes if w[0] == "evict"] and not api.cordoned()


@pytest.mark.parametrize("drain, refused", [(False, True), (True, False)])
def test_require_drain_refuses_in_check_mode_too_a_node_that_would_not_be_drained(drain, refused):
    """--check drains nothing: the node that would be drained is not refused, one that never is is refused (the
    dry run shows the refusal the real run would make)."""
    api = ApiDouble([node()], [pod("web-1")])
    first = rollout(api, options={"drain": drain, "require_drain": True}, check_mode=True)[0]
    assert (first["outcome"] == Outcome.REFUSED) is refused, first
    assert not api.writes


@pytest.mark.parametrize("after, status, want", [
    ([CONTAINERD], "ok", Outcome.NOT_VERIFIED),
    ([], "failed", Outcome.NOT_VERIFIED),
    ([], "unreachable", Outcome.UNREACHABLE),
])
def test_a_fix_not_verified_leaves_the_node_cordoned_and_held(after, status, want):
    api = ApiDouble([node()], [pod("web-1")])
    first, second = rollout(api, work=Work(after=after), status=status)
    assert second["outcome"] == want and api.cordoned()
    held = json.loads(api.notes()[cordon.HELD])
    assert held["run"] == "run-1" and held["reason"] and cordon.CORDONED_BY not in api.notes()
    assert record.ANNOTATION not in api.notes() and outcomes(second)["give_back"] == Outcome.HELD


def test_the_after_audit_that_cannot_run_holds_the_node():
    api = ApiDouble([node()], [pod("web-1")])
    ctx = context(api)
    first = machine.begin(ctx)

    def broken():
        from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
        raise NodefixError("the node did not answer")
    ctx.audit = broken
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": [CONTAINERD]})
    assert second["outcome"] == Outcome.NOT_VERIFIED and "could not run" in second["detail"] and api.cordoned()


def test_check_mode_is_the_same_machine_and_writes_nothing():
    real_api = ApiDouble([node()], [pod("web-1")])
    real = rollout(real_api, roles=(CONTAINERD, REBOOT))[0]
    api = ApiDouble([node()], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD, REBOOT), check_mode=True)
    assert api.writes == [] and names(first) == names(real) and names(first) == list(machine.BEFORE)
    would = dict((s["name"], s["detail"]) for s in first["steps"] + second["steps"] if s["outcome"] == "would")
    assert would["cordon"] == "would cordon node-a" and would["drain"].startswith("would evict default/web-1")
    assert would["give_back"] == "would uncordon node-a" and would["release_slots"].startswith("would give back")
    assert would["reboot_gate"] == "would take the reboot lock's slot nodefix-reboot-0"
    assert set(("claim", "evidence", "fix", "verify", "release", "start_event")) <= set(would)


def test_a_lost_claim_stops_the_machine_and_leaves_everything_to_the_run_that_holds_it():
    api = ApiDouble([node()], [pod("web-1")])
    stolen = {}

    def steal(step):
        if step.name == "reboot_gate" and not stolen:
            stolen["at"] = step.name
            other = record.new("thief", datetime.datetime(2026, 12, 6, 7, tzinfo=datetime.timezone.utc),
                               {"host": "x", "pid": 1, "boot": "y"}, 1800, version=2)
            api.nodes["node-a"]["metadata"]["annotations"][record.ANNOTATION] = record.text(other)
    first = rollout(api, roles=(CONTAINERD, REBOOT), after_step=steal)[0]
    assert first["outcome"] == Outcome.FAILED and "lost its claim" in first["detail"]
    assert not api.cordoned() and not [w for w in api.writes if w[0] == "evict"]
    # the slot is held by the node's name: the run that holds the claim gives it back or uses it (reclaim_slots)
    assert api.held_leases() == ["kube-system/nodefix-reboot-0"]
    assert [s["outcome"] for s in first["steps"][-4:]] == ["skipped", "skipped", "done", "skipped"]
    assert json.loads(api.notes()[record.ANNOTATION])["run"] == "thief"     # the other run's record is not touched


def test_options_are_checked_before_anything_is_read():
    from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
    with pytest.raises(NodefixError, match="drain_timeout must be a int"):
        context(ApiDouble([node()]), options={"drain_timeout": "600"})
    with pytest.raises(NodefixError, match="not one of"):
        context(ApiDouble([node()]), options={"storm_percnt": 20})


def test_evidence_that_cannot_be_kept_is_said_and_the_rollout_goes_on():
    from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
    api = ApiDouble([node()], [pod("web-1")])
    work = Work()

    def lost():
        raise NodefixError("journalctl: no such file")
    work.evidence = lost
    first, second = rollout(api, work=work)
    assert first["state"]["evidence"] == {"before": ["drain"], "error": "journalctl: no such file"}
    assert [s["detail"] for s in first["steps"] if s["name"] == "evidence"] == [
        "the evidence could not be kept (the remediation goes on): journalctl: no such file"]
    assert second["outcome"] == Outcome.OK


def test_a_step_detail_is_redacted_once_when_it_is_recorded_and_its_stop_says_the_same():
    """Runner.record redacts the detail (shapes, then the caller's redactor): the step, its line, the progress
    callback and the Stop the machine keeps as the state's detail read only the redacted text."""
    seen = []
    clock = Clock()
    runner = Runner(clock.now, after_step=lambda step: seen.append(step.line()),
                    redact=lambda text: text.replace("EnvPw62", "********"))

    def fails():
        raise NodefixError("etcd said https://u:UrlPw62@etcd:2379 EnvPw62")

    with pytest.raises(Stop) as stop:
        runner.run("control_plane", fails)

    def holds():
        raise Stop(Outcome.HELD, "held: EnvPw62")

    with pytest.raises(Stop) as held:
        runner.run("reboot_gate", holds)
    texts = [stop.value.detail, held.value.detail] + seen + [s.detail for s in runner.steps]
    assert all("UrlPw62" not in t and "EnvPw62" not in t for t in texts), texts
    assert held.value.detail == "held: ********" and "etcd:2379" in stop.value.detail


def test_an_unexpected_exception_in_a_step_still_gives_back_what_the_run_took():
    """A step that raises something other than NodefixError (an answer of a shape no check foresaw: a pod list item
    without a name) stops the rollout as failed, and the cordon taken before it is given back, the record
    released - never a node left cordoned by an exception (review of the wired rollout, finding 5)."""
    nameless = pod("web-5")
    nameless["metadata"]["name"] = None
    api = ApiDouble([node()], [pod("web-1"), nameless])
    result = machine.begin(context(api))
    assert result["outcome"] == Outcome.FAILED and "unexpected" in result["detail"], result
    assert ("cordon", "done") in [(s["name"], s["outcome"]) for s in result["steps"]], result["steps"]
    assert not api.cordoned() and api.notes() == {}, (api.cordoned(), api.notes())


def test_a_slot_left_behind_by_a_failed_give_back_fails_a_held_rollout():
    """A control-plane node whose reboot the closed window holds ends ``held``; when releasing the control plane's
    slot then fails (a 500), the rollout is ``failed`` - a slot left held blocks every other control-plane node until
    its TTL, a person must know (review of the wired rollout, finding 4)."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube  # pylint: disable=import-outside-toplevel

    class Closed(object):
        def contains(self, now):  # pylint: disable=unused-argument
            return False

        def describe(self):
            return "closed"

    plane = {"node-role.kubernetes.io/control-plane": ""}
    api = ApiDouble([node(labels=plane), node("node-b", labels=plane), node("node-c", labels=plane)],
                    [pod("web-1")] + [etcd_pod(n) for n in ("node-a", "node-b", "node-c")])

    def refuse(*_args):
        raise kube.KubeError("releasing Lease", 500, "InternalError", "etcdserver: leader changed")

    api.delete_lease = refuse
    result = machine.begin(context(api, roles=(REBOOT,), options={"control_plane": True, "etcd_wait": 0},
                                   window=Closed()))
    assert result["outcome"] == Outcome.FAILED and interface.failed(result["outcome"]), result
    assert "release_slots" in result["detail"] and "had ended held" in result["detail"], result["detail"]


@pytest.mark.parametrize("back", [True, False])
def test_a_node_that_went_down_for_its_reboot_and_is_not_back_keeps_its_slots(back):
    """The reboot started and the node did not come back into service (the reboot role's ``back`` false, or no answer
    at all): it keeps the reboot lock's slot - and the control plane's - whatever the API server still says of it, so
    no second node goes down beside it; the record tells a person how to give the slot back (test_45's down node)."""
    nodes = [node(labels=CP), node("node-b", labels=CP), node("node-c", labels=CP)]
    api = ApiDouble(nodes, [pod("web-1")] + [etcd_pod(n) for n in ("node-a", "node-b", "node-c")])
    ctx = context(api, roles=(REBOOT,), options={"control_plane": True, "etcd_wait": 0})
    first = machine.begin(ctx)
    assert first["outcome"] is None and len(api.held_leases()) == 2
    fixes = {"status": "ok" if back else "unreachable", "roles": first["state"]["fix_roles"], "msg": "",
             "reboot_started": True, "reboot_back": back}
    second = machine.end(ctx, first["state"], fixes)
    rec = interface.remediation_record(second["state"])
    if back:
        assert api.held_leases() == [] and "slot_kept" not in rec, rec
    else:
        assert api.held_leases() == ["kube-system/nodefix-control-plane-0", "kube-system/nodefix-reboot-0"], rec
        assert second["outcome"] == Outcome.UNREACHABLE and not [w for w in api.writes if w[0] == "delete_lease"
                                                                 and w[2] != "nodefix-storm"]
        assert ("node-a keeps nodefix-reboot-0: it went down for a reboot and is not back in service"
                in rec["slot_kept"]) and "kubectl -n kube-system delete lease nodefix-reboot-0" in rec["slot_kept"]


def test_a_node_answer_without_a_resource_version_writes_nothing():
    """Every write of the record is conditional on the read; a Node answered without ``metadata.resourceVersion``
    would make it unconditional (two runs could both claim): the rollout fails closed at its claim, nothing written
    (review of the wired rollout, finding 8)."""
    api = ApiDouble([node()], [pod("web-1")])
    read = api.get_node

    def without_version(name):
        answer = read(name)
        if answer is not None:
            answer = json.loads(json.dumps(answer))
            answer["metadata"].pop("resourceVersion", None)
        return answer

    api.get_node = without_version
    result = machine.begin(context(api))
    assert result["outcome"] == Outcome.FAILED and "resourceVersion" in result["detail"], result
    assert api.writes == [] and not api.cordoned(), api.writes


def _patch_answers_without_version(api):
    """The API double's PATCH answers stripped of ``metadata.resourceVersion`` (the reads keep theirs)."""
    patch = api.patch_node

    def without_version(name, body, resource_version=None):
        answer = json.loads(json.dumps(patch(name, body, resource_version)))
        answer["metadata"].pop("resourceVersion", None)
        return answer

    api.patch_node = without_version


def _unconditional_patches(api):
    return [c for c in api.calls if c[0] == "patch_node" and c[3] is None]


def test_a_cordon_is_never_an_unconditional_patch():
    """The cordon's PATCH is conditional on the Node as the record's write left it; a write answered without
    ``metadata.resourceVersion`` would make it unconditional (a person's cordon or another run's write in the
    meantime overwritten): the cordon is not made, the rollout fails closed saying why (review #5)."""
    api = ApiDouble([node()], [pod("web-1")])
    _patch_answers_without_version(api)
    result = machine.begin(context(api))
    assert result["outcome"] == Outcome.FAILED, result
    cordon_step = [s for s in result["steps"] if s["name"] == "cordon"][0]
    assert cordon_step["outcome"] == Outcome.FAILED and "no metadata.resourceVersion" in cordon_step["detail"]
    assert "the cordon" in cordon_step["detail"], cordon_step
    assert _unconditional_patches(api) == [] and not api.cordoned(), api.calls


def test_a_give_back_is_never_an_unconditional_patch():
    """The give-back's PATCH (uncordon, or hold) is conditional on the Node as last written; without a
    resourceVersion in that answer it is not sent: the node stays cordoned for the next run, the step says why."""
    api = ApiDouble([node()], [pod("web-1")])
    first = machine.begin(context(api))
    assert first["outcome"] is None and api.cordoned(), first
    _patch_answers_without_version(api)
    second = machine.end(context(api), first["state"], {"status": "ok", "roles": [CONTAINERD], "msg": ""})
    give_back = [s for s in second["steps"] if s["name"] == "give_back"][0]
    assert give_back["outcome"] == Outcome.FAILED and "no metadata.resourceVersion" in give_back["detail"], give_back
    assert "left cordoned for the next run" in give_back["detail"]
    assert second["outcome"] == Outcome.FAILED and api.cordoned(), second
    assert _unconditional_patches(api) == [], api.calls


def test_a_dead_runs_cordon_is_given_back_even_when_this_run_does_not_drain():
    """A dead run left its cordon (record in phase drain, ``nodefix.k8s/cordoned-by``); the next run with
    ``nodefix_drain`` false still gives that cordon back - it never leaves a node unschedulable while saying ok
    (review of the wired rollout, finding 7)."""
    dead = record.new("run-0", Clock().now(), {"host": "other", "pid": 9, "boot": "z"}, 1, phase="drain", version=2)
    by = json.dumps({"run": "run-0", "time": "2026-12-06T06:00:00Z"})
    api = ApiDouble([node(unschedulable=True, **{record.ANNOTATION: record.text(dead), "nodefix.k8s/cordoned-by": by})],
                    [pod("web-1")])
    clock = Clock()
    clock.sleep(60)
    first = machine.begin(context(api, clock=clock, options={"drain": False}))
    assert first["outcome"] is None, first
    second = machine.end(context(api, clock=clock, options={"drain": False}), first["state"],
                         {"status": "ok", "roles": [CONTAINERD], "msg": ""})
    assert second["outcome"] == Outcome.OK and not api.cordoned() and api.notes() == {}, (api.cordoned(), api.notes())
