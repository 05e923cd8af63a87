# SPDX-License-Identifier: GPL-3.0-or-later
"""storm_gate: judges the fleet before the first node, records a slice atomically, check mode writes nothing."""

import json

from ansible_collections.nodefix.k8s.plugins.modules import storm_gate

HIT = {"disruptive": ["drain"], "findings": ["gvisor.runsc_outdated"]}
CLEAN = {"disruptive": [], "findings": []}


def sliced(tmp_path, name, nodes, **extra):
    a = {"dir": str(tmp_path / "slices"), "slice": name, "rollout": "r-1", "nodes": nodes}
    a.update(extra)
    return a


def test_unsliced_stops_over_the_threshold_and_writes_nothing(run_module, tmp_path):
    nodes = dict(("n%d" % i, HIT if i < 3 else CLEAN) for i in range(10))
    result, failed, _dummy = run_module(storm_gate, {"nodes": nodes})
    assert not failed and result["stop"] and not result["changed"] and result["share"] == 30.0
    assert result["fleet_wide"][0]["id"] == "gvisor.runsc_outdated" and result["disruptive"] == ["n0", "n1", "n2"]
    within, failed, _dummy = run_module(storm_gate, {"nodes": nodes, "percent": 30})
    assert not failed and not within["stop"] and within["msg"] is None
    forced, failed, _dummy = run_module(storm_gate, {"nodes": nodes, "override": True})
    assert not failed and not forced["stop"] and forced["overridden"]


def test_slices_share_their_records_and_a_later_storm_reaches_the_first_slice(run_module, tmp_path):
    a, failed, _dummy = run_module(storm_gate, sliced(tmp_path, "a", {"a1": HIT, "a2": CLEAN, "a3": CLEAN, "a4": CLEAN,
                                                                      "a5": CLEAN}, fleet_size=10))
    # 1 of 5 here, but the 5 hosts of the fleet no slice has recorded yet count as possibly disrupted (early,
    # never late): 6 of 10 - stop (the play waits nodefix_storm_slice_wait for the other slices first)
    assert not failed and a["changed"] and a["stop"] and a["unseen"] == 5, a
    stored = json.loads((tmp_path / "slices" / "a" / "storm.json").read_text())
    assert stored["rollout"] == "r-1" and stored["nodes"]["a1"] == HIT
    b, failed, _dummy = run_module(storm_gate, sliced(tmp_path, "b", {"b1": HIT, "b2": HIT, "b3": CLEAN, "b4": CLEAN,
                                                                      "b5": CLEAN}, fleet_size=10))
    assert not failed and b["stop"] and b["share"] == 30.0
    # slice a, before its next batch, only re-reads: the storm slice b saw stops it too, its record unchanged
    again, failed, _dummy = run_module(storm_gate, sliced(tmp_path, "a", {}, fleet_size=10, record=False))
    assert not failed and again["stop"] and not again["changed"]
    assert json.loads((tmp_path / "slices" / "a" / "storm.json").read_text()) == stored


def test_check_mode_judges_and_writes_nothing(run_module, tmp_path):
    result, failed, _dummy = run_module(storm_gate, sliced(tmp_path, "a", {"a1": HIT, "a2": HIT}), check_mode=True)
    assert not failed and result["stop"] and result["changed"]
    assert not (tmp_path / "slices").exists()


def test_a_corrupt_record_fails_closed_naming_it(run_module, tmp_path):
    bad = tmp_path / "slices" / "b"
    bad.mkdir(parents=True)
    (bad / "storm.json").write_text("{not json")
    result, failed, _dummy = run_module(storm_gate, sliced(tmp_path, "a", {"a1": CLEAN}))
    assert failed and "storm.json is not JSON" in result["msg"] and "nothing was written" in result["msg"]
    assert not (tmp_path / "slices" / "a").exists()


def test_bad_input_is_refused_naming_it(run_module, tmp_path):
    result, failed, _dummy = run_module(storm_gate, {"nodes": {"n1": {"disruptive": ["nuke"], "findings": []}}})
    assert failed and "node n1: disruptive must be a list of drain, reboot, restart" in result["msg"]
    result, failed, _dummy = run_module(storm_gate, {"nodes": {}, "percent": 120})
    assert failed and "nodefix_storm_percent must be a whole number from 0 to 100" in result["msg"]
    result, failed, _dummy = run_module(storm_gate, {"nodes": {}, "dir": str(tmp_path), "slice": "a"})
    assert failed and "rollout" in result["msg"]    # required together
