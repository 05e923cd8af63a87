# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.storm: the storm breaker's rules over the slices' records."""

import re

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm


def fleet(total, hit, fid="kernel.below_minimum", slice_name="run", rollout=None, prefix="n"):
    nodes = {}
    for i in range(total):
        nodes["%s%02d" % (prefix, i)] = ({"disruptive": ["drain", "reboot"], "findings": [fid, "pids.zombie_leaker"]}
                                         if i < hit else {"disruptive": [], "findings": ["pids.zombie_leaker"]})
    return storm.record(slice_name, nodes, "2026-11-26T00:00:00Z", rollout)


@pytest.mark.parametrize("total, hit, percent, stops", [
    (10, 2, 20, False),   # exactly the threshold: within it
    (10, 3, 20, True),
    (5, 1, 20, False), (5, 2, 20, True),
    (10, 0, 0, False), (10, 2, 0, True),   # 0: any disruption stops (from min_nodes up)
    (10, 10, 100, False),                  # 100: never
    (0, 0, 20, False),                     # no node audited: nothing to judge
    (1, 1, 20, False), (2, 1, 20, False),  # one node is a repair, not a storm (min_nodes 2)
    (2, 2, 20, True),
])
def test_the_threshold_is_a_strict_share_of_the_fleet(total, hit, percent, stops):
    out = storm.verdict({"run": fleet(total, hit)}, percent)
    assert out["stop"] is stops and out["over"] is stops and out["size"] == total
    assert len(out["disruptive"]) == hit and (out["msg"] is not None) is stops


def test_one_nodes_finding_is_not_fleet_wide():
    assert storm.verdict({"run": fleet(1, 1)}, 20)["fleet_wide"] == []
    assert [w["id"] for w in storm.verdict({"run": fleet(2, 2)}, 20)["fleet_wide"]] == [
        "kernel.below_minimum", "pids.zombie_leaker"]


def test_min_nodes_sets_the_floor():
    assert storm.verdict({"run": fleet(1, 1)}, 20, min_nodes=1)["stop"]
    assert not storm.verdict({"run": fleet(10, 4)}, 20, min_nodes=5)["stop"]
    with pytest.raises(storm.StormInputError, match="nodefix_storm_min_nodes must be a whole number of at least 1"):
        storm.verdict({"run": fleet(1, 1)}, 20, min_nodes=0)


def test_the_stop_says_why_with_the_fleet_wide_findings_and_the_way_out():
    out = storm.verdict({"run": fleet(10, 4)}, 20)
    assert out["msg"].startswith("storm breaker: 4 of 10 node(s) (40%) need a drain, reboot or restart (drain 4, "
                                 "reboot 4), over "
                                 "nodefix_storm_percent (20%)")
    assert "fleet-wide: pids.zombie_leaker on 10 (100%), kernel.below_minimum on 4 (40%)" in out["msg"]
    assert "stops before touching a node" in out["msg"] and "nodefix_storm_override=true" in out["msg"]
    assert [w["id"] for w in out["fleet_wide"]] == ["pids.zombie_leaker", "kernel.below_minimum"]
    assert out["actions"]["reboot"] == ["n00", "n01", "n02", "n03"] and out["actions"]["restart"] == []


def test_the_override_proceeds_and_says_so():
    out = storm.verdict({"run": fleet(10, 4)}, 20, override=True)
    assert out["stop"] is False and out["over"] and out["overridden"]
    assert out["msg"].endswith("proceeding: nodefix_storm_override is set")


def test_a_fleet_wide_finding_that_disrupts_nothing_is_still_called_out_without_a_stop():
    out = storm.verdict({"run": fleet(10, 1)}, 20)
    assert not out["stop"] and out["msg"] is None
    assert [w["id"] for w in out["fleet_wide"]] == ["pids.zombie_leaker"]


def test_slices_add_up_and_the_fleet_size_counts_the_slices_not_yet_recorded():
    records = {"a": fleet(5, 1, slice_name="a", rollout="r", prefix="a"),
               "b": fleet(5, 1, slice_name="b", rollout="r", prefix="b")}
    out = storm.verdict(records, 20, fleet_size=10, rollout="r", own_slice="b")
    assert not out["stop"] and out["share"] == 20.0 and out["slice_share"] == 20.0
    records["c"] = fleet(5, 2, slice_name="c", rollout="r", prefix="c")
    out = storm.verdict(records, 20, fleet_size=15, rollout="r", own_slice="a")
    # 4 of 15 = 26.7 %: over, also for slice a whose own nodes are within
    assert out["stop"] and out["share"] == 26.67 and out["slice_share"] == 20.0
    assert out["msg"].startswith("storm breaker: 4 of 15 node(s) (26.7%)")


def test_a_slice_over_the_threshold_alone_stops_though_the_fleet_is_within_it():
    # every host recorded (no unseen host), the fleet 2 of 20 = 10 %; slice a's own nodes 2 of 4 = 50 %
    records = {"a": fleet(4, 2, slice_name="a", rollout="r", prefix="a"),
               "b": fleet(16, 0, slice_name="b", rollout="r", prefix="b")}
    out = storm.verdict(records, 20, fleet_size=20, rollout="r", own_slice="a")
    assert out["share"] == 10.0 and out["slice_share"] == 50.0 and out["stop"] and out["unseen"] == 0
    assert "2 of this slice's 4 node(s) (50%; 2 of 20 in the fleet so far)" in out["msg"]


def test_records_of_another_rollout_are_named_and_not_counted():
    records = {"old": fleet(4, 4, slice_name="old", rollout="r0", prefix="o"),
               "a": fleet(10, 1, slice_name="a", rollout="r1", prefix="a")}
    out = storm.verdict(records, 20, rollout="r1", own_slice="a")
    assert not out["stop"] and out["size"] == 10 and out["ignored"] == [{"slice": "old", "rollout": "r0"}]


@pytest.mark.parametrize("records, kwargs, words", [
    ({"run": fleet(2, 1)}, {"percent": 101}, "nodefix_storm_percent must be a whole number from 0 to 100"),
    ({"run": fleet(2, 1)}, {"percent": True}, "nodefix_storm_percent must be a whole number"),
    ({"run": fleet(2, 1)}, {"percent": 20, "override": "yes"}, "nodefix_storm_override must be true or false"),
    ({"run": fleet(3, 1)}, {"percent": 20, "fleet_size": 2}, "fleet_size 2 is not a whole number at least the 3"),
    ({"a": {"nodes": {"x": {"disruptive": ["reboot"], "findings": []}}},
      "b": {"nodes": {"x": {"disruptive": [], "findings": []}}}}, {"percent": 20}, "host x is in two slices (a and b)"),
    ({"a": {"nodes": {"x": {"disruptive": ["explode"], "findings": []}}}}, {"percent": 20},
     "slice a: node x: disruptive must be a list of drain, reboot, restart"),
    ({"a": {"nodes": {"x": {"disruptive": [], "findings": [None]}}}}, {"percent": 20}, "findings must be a list of finding ids"),
    ({"a": {"nodes": ["x"]}}, {"percent": 20}, "slice a: the storm record must be a JSON object with nodes"),
    ({"a": []}, {"percent": 20}, "slice a: the record must be a JSON object"),
])
def test_what_is_not_well_formed_cannot_be_judged(records, kwargs, words):
    percent = kwargs.pop("percent")
    with pytest.raises(NodefixError, match=re.escape(words)):   # GateInputError from the shared belongs()
        storm.verdict(records, percent, **kwargs)


@pytest.mark.parametrize("nodes, words", [
    ({"x": {"disruptive": "drain", "findings": []}}, "node x: disruptive must be a list"),
    ({"x": {"findings": []}}, "node x: disruptive must be a list"),
    ({"x": None}, "node x: must be a mapping"),
    (["x"], "nodes must be a mapping"),
])
def test_a_bad_node_entry_is_refused_naming_the_node(nodes, words):
    with pytest.raises(storm.StormInputError, match=words):
        storm.record("run", nodes, "t")
