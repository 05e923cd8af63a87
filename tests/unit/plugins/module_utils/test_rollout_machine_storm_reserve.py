# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine's storm breaker across controllers (review #3): the re-count right before a node's cordon is a
RESERVE on one shared record - the Lease kube-system/nodefix-storm, written with its resourceVersion as a precondition
(_rollout.machine.reserve) - so two controllers counting at once cannot both pass a count that allows only one. A run
killed between its reserve and its cordon leaves the reserve; it counts for the others until the next run of that
node gives it back."""

import datetime
import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import after, machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import reserve
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.ledger import Ledger
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Killed, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, context, outcomes

LEASE = ("kube-system", reserve.LEASE)
A = {"host": "controller-a", "pid": 100, "boot": "boot-a"}
B = {"host": "controller-b", "pid": 100, "boot": "boot-b"}
NAMES = ("node-a", "node-b", "node-c", "node-d", "node-e")      # 20 % of five: one node at a time


def _api():
    return ApiDouble([node(n) for n in NAMES], [pod("web-%s" % n[-1], node_name=n) for n in NAMES])


def _ctx(api, name, here, run_id, **kw):
    return context(api, node_name=name, here=here, run_id=run_id, **kw)


def _reserves(api):
    lease = api.leases.get(LEASE)
    return reserve.parse(lease) if lease else {}


class _Racing(object):
    """The API as controller A sees it: its storm step's listing of the Nodes is taken, then - before A writes
    anything more - controller B runs node-b's whole ``begin`` (``then``), and A goes on with the listing it took."""

    def __init__(self, api, then):
        self._api, self._then = api, then

    def __getattr__(self, name):
        return getattr(self._api, name)

    def list_nodes(self, selector=None):
        listed = self._api.list_nodes(selector)
        if self._then:
            then, self._then = self._then, None
            then()
        return listed


def test_two_controllers_counting_at_once_cannot_both_pass_a_count_that_allows_one():
    api = _api()
    seen = {}

    def controller_b():
        seen["b"] = machine.begin(_ctx(api, "node-b", B, "run-b"))
    first = machine.begin(_ctx(_Racing(api, controller_b), "node-a", A, "run-a"))
    second = seen["b"]
    # B counted first (node-a not reserved yet) and reserved; A's reserve met B's write (409), counted again with
    # node-b in flight - two of five, over 20 % - and stopped before its cordon
    assert second["outcome"] is None and api.cordoned("node-b"), second["lines"]
    assert first["outcome"] == Outcome.STOPPED and not api.cordoned("node-a"), first["lines"]
    assert "stopped by the storm breaker" in first["detail"] and outcomes(first)["storm"] == Outcome.STOPPED
    assert sorted(_reserves(api)) == ["node-b"]
    # B ends: its reserve is given back, and the Lease with it
    ended = machine.end(_ctx(api, "node-b", B, "run-b"), second["state"], {"status": "ok", "roles": [CONTAINERD],
                                                                           "msg": ""})
    assert ended["outcome"] == Outcome.OK and LEASE not in api.leases, api.leases
    # now A passes
    again = machine.begin(_ctx(api, "node-a", A, "run-a2"))
    assert again["outcome"] is None and "reserved node-a (Lease kube-system/nodefix-storm)" in [
        s["detail"] for s in again["steps"] if s["name"] == "storm"][0]


def _storm_write(api):
    for n, w in enumerate(api.writes, 1):
        if w[0] in ("create_lease", "replace_lease") and w[2] == reserve.LEASE:
            return n
    raise AssertionError(api.writes)


def test_a_run_killed_between_its_reserve_and_its_cordon_holds_the_others_until_its_node_s_next_run_gives_it_back():
    probe = _api()
    machine.begin(_ctx(probe, "node-a", A, "run-1"))
    api = _api()
    api.kill_at = _storm_write(probe)
    with pytest.raises(Killed):
        machine.begin(_ctx(api, "node-a", A, "run-1"))
    assert sorted(_reserves(api)) == ["node-a"] and not api.cordoned("node-a")
    # another controller's node meanwhile: the dead run's reserve still counts (its record names it) - fail closed
    held = machine.begin(_ctx(api, "node-b", B, "run-b"))
    assert held["outcome"] == Outcome.STOPPED and "reserved by other runs: node-a" in held["detail"], held["lines"]
    # node-a's next run (the first's process is gone on that controller) takes the node over and gives it back
    nxt = machine.begin(_ctx(api, "node-a", dict(A, pid=200), "run-2", roles=()))
    assert nxt["outcome"] == Outcome.NOTHING_TO_FIX, nxt["lines"]
    release = [s for s in nxt["steps"] if s["name"] == "release"][0]["detail"]
    assert "gave back the storm breaker's reserve of node-a (run run-1)" in release
    assert LEASE not in api.leases and record.ANNOTATION not in api.notes("node-a")
    assert machine.begin(_ctx(api, "node-b", B, "run-b2"))["outcome"] is None


def test_a_stale_reserve_is_not_counted_and_is_dropped_at_the_next_write():
    api = _api()
    body = {"node-c": {"run": "long-gone", "at": "2026-12-06T06:00:00Z"}}     # node-c has no record naming it
    api.create_lease("kube-system", {"metadata": {"name": reserve.LEASE, "annotations": {
        reserve.ANNOTATION: json.dumps(body)}}, "spec": {}})
    begun = machine.begin(_ctx(api, "node-a", A, "run-a"))
    assert begun["outcome"] is None, begun["lines"]
    assert sorted(_reserves(api)) == ["node-a"]


@pytest.mark.parametrize("text", ["not json", json.dumps(["node-b"]), json.dumps({"node-b": {"at": "x"}})])
def test_reserves_that_cannot_be_read_stop_the_node_before_its_cordon(text):
    api = _api()
    api.create_lease("kube-system", {"metadata": {"name": reserve.LEASE, "annotations": {reserve.ANNOTATION: text}},
                                     "spec": {}})
    begun = machine.begin(_ctx(api, "node-a", A, "run-a"))
    assert begun["outcome"] == Outcome.STOPPED and "storm-reserves" in begun["detail"], begun["lines"]
    assert not api.cordoned("node-a")


def test_a_lease_without_a_resource_version_is_not_written_and_stops_the_node():
    # an odd API answer: the Lease comes back without metadata.resourceVersion - a write without the precondition
    # could drop a reserve another controller wrote meanwhile, so nothing is written and the node is not cordoned
    api = _api()
    api.create_lease("kube-system", {"metadata": {"name": reserve.LEASE}, "spec": {}})
    del api.leases[LEASE]["metadata"]["resourceVersion"]
    writes = []
    api.replace_lease = lambda *a: writes.append(a) or True
    begun = machine.begin(_ctx(api, "node-a", A, "run-a"))
    assert begun["outcome"] == Outcome.STOPPED and "no resourceVersion" in begun["detail"], begun["lines"]
    assert not writes and not api.cordoned("node-a")


def test_giving_back_from_a_lease_without_a_resource_version_deletes_nothing():
    api = _api()
    assert machine.begin(_ctx(api, "node-a", A, "run-a"))["outcome"] is None
    del api.leases[LEASE]["metadata"]["resourceVersion"]
    deletes = []
    api.delete_lease = lambda *a: deletes.append(a)
    with pytest.raises(reserve.MalformedReserves):
        reserve.give_back(_ctx(api, "node-a", A, "run-a"))
    assert not deletes and LEASE in api.leases


def test_a_reserve_that_keeps_meeting_other_writes_stops_the_node():
    api = _api()
    api.replace_lease = lambda *_a: False
    api.create_lease("kube-system", {"metadata": {"name": reserve.LEASE}, "spec": {}})
    begun = machine.begin(_ctx(api, "node-a", A, "run-a"))
    assert begun["outcome"] == Outcome.STOPPED and "5 times in a row" in begun["detail"]
    assert not api.cordoned("node-a")


def test_check_mode_reserves_nothing():
    api = _api()
    begun = machine.begin(_ctx(api, "node-a", A, "run-a", check_mode=True))
    assert "would reserve node-a" in [s["detail"] for s in begun["steps"] if s["name"] == "storm"][0]
    assert LEASE not in api.leases


def test_a_run_that_lost_its_claim_keeps_the_new_holders_live_reserve_at_its_release():
    # run-a drained node-a; controller B's run-c took node-a over (run-a looked dead to it) and passed its own storm
    # step: node-a's record names run-c, the Lease holds run-c's reserve. run-a's release must not drop it.
    api = _api()
    begun = machine.begin(_ctx(api, "node-a", A, "run-a"))
    assert begun["outcome"] is None and api.cordoned("node-a")
    now = datetime.datetime(2026, 12, 6, 7, 30, tzinfo=datetime.timezone.utc)
    api.nodes["node-a"]["metadata"]["annotations"][record.ANNOTATION] = record.text(
        record.new("run-c", now, B, 1800, version=record.MACHINE_VERSION))
    api.leases[LEASE]["metadata"]["annotations"][reserve.ANNOTATION] = json.dumps(
        {"node-a": {"run": "run-c", "at": "2026-12-06T07:30:00Z"}})
    ctx = _ctx(api, "node-a", A, "run-a")
    ledger = Ledger(ctx)
    ledger.record = begun["state"]["record"]
    outcome, detail = after.release(ctx, dict(begun["state"], claimed=True), ledger)
    assert _reserves(api) == {"node-a": {"run": "run-c", "at": "2026-12-06T07:30:00Z"}}, (outcome, detail)
    assert "gave back" not in detail


@pytest.mark.parametrize("annotations", [{reserve.ANNOTATION: "[" * 100000}, "not-a-mapping"])
def test_an_odd_reserve_lease_does_not_keep_the_nodes_record(annotations):
    # a reserve Lease another controller or a person left odd (JSON too deep to parse, annotations not a mapping):
    # the release still removes this run's record; the reserve is reported as not given back
    api = _api()
    ctx = _ctx(api, "node-a", A, "run-a")
    begun = machine.begin(ctx)
    assert begun["outcome"] is None
    api.leases[LEASE]["metadata"]["annotations"] = annotations
    ended = machine.end(ctx, begun["state"], {"status": "ok", "roles": [CONTAINERD], "msg": ""})
    assert record.ANNOTATION not in api.notes("node-a"), ended["lines"]
    with pytest.raises(reserve.MalformedReserves):
        reserve.parse(api.leases[LEASE])
