# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.fleet_gate: when a rolling remediation stops - the last batch's and the fleet's failure share."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.fleet_gate import (
    GateInputError,
    batch_verdict,
    check_record,
    record,
    verdict,
)


def rec(hosts, failed=()):
    return {"hosts": list(hosts), "failed": list(failed), "updated": "t"}


def test_the_fleet_is_every_slice():
    records = {"a": rec(["a1", "a2"], ["a1"]), "b": rec(["b1", "b2"])}
    v = verdict(records, 20)
    assert v["stop"] and v["size"] == 4 and v["nodes_failed"] == 1 and v["share"] == 25.0
    assert "1 of 4 node(s) failed (a1)" in v["msg"]
    assert not verdict(records, 25)["stop"]  # Ansible's rule: stop above the limit, not at it
    assert [s["slice"] for s in v["slices"]] == ["a", "b"]


def test_the_fleet_size_counts_slices_not_started_yet():
    records = {"a": rec(["a1", "a2"], ["a1"])}
    assert verdict(records, 30)["stop"]  # 1 of 2 recorded so far: early, never late
    assert not verdict(records, 30, fleet_size=10)["stop"]  # 1 of 10
    with pytest.raises(GateInputError, match="fleet_size 1 is smaller than the 2 hosts"):
        verdict(records, 30, fleet_size=1)


@pytest.mark.parametrize("batch, failed, limit, stops", [
    ([], ["a1"], 0, False),             # before the first batch there is no last batch
    (["a1"], ["a1"], 30, True),         # one node per batch: any failure is 100 %
    (["a1", "a2", "a3"], ["a1"], 30, True),
    (["a1", "a2", "a3"], ["a1"], 40, False),
    (["a4", "a5"], ["a1"], 0, False),   # an earlier batch's failure is the fleet rule's business
])
def test_the_last_batch(batch, failed, limit, stops):
    stop, msg = batch_verdict(batch, failed, limit)
    assert stop == stops and (msg is not None) == stops


def test_no_failure_never_stops_even_at_zero():
    assert not verdict({"a": rec(["a1"])}, 0)["stop"]
    assert not verdict({}, 0)["stop"]


@pytest.mark.parametrize("bad, msg", [
    ([], "must be a JSON object"),
    ({"hosts": "a1", "failed": []}, "hosts must be a list"),
    ({"hosts": ["a1"], "failed": [1]}, "failed must be a list"),
    ({"hosts": ["a1"], "failed": ["zz"]}, "zz are not among its hosts"),
])
def test_bad_records_are_refused_naming_the_slice(bad, msg):
    with pytest.raises(GateInputError, match="slice s9: .*" + msg):
        check_record("s9", bad)


def test_a_host_in_two_slices_and_bad_limits_are_refused():
    with pytest.raises(GateInputError, match="host x is in two slices"):
        verdict({"a": rec(["x"]), "b": rec(["x"])}, 10)
    for limit in (-1, 101, "30", 30.5):
        with pytest.raises(GateInputError, match="whole number from 0 to 100"):
            verdict({}, limit)


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", None])
def test_a_slice_name_is_a_plain_name(name):
    with pytest.raises(GateInputError, match="plain name"):
        record(name, ["a"], [], "t")


def test_a_record_sorts_and_checks_its_hosts():
    assert record("7", ["b", "a", "a"], ["b"], "t") == {"slice": "7", "hosts": ["a", "b"], "failed": ["b"], "updated": "t"}
    with pytest.raises(GateInputError, match="not among the slice's hosts"):
        record("7", ["a"], ["b"], "t")
