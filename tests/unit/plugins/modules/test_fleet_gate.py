# SPDX-License-Identifier: GPL-3.0-or-later
"""fleet_gate: records a slice's state atomically, judges every slice, check mode writes nothing."""

import json

from ansible_collections.nodefix.k8s.plugins.modules import fleet_gate


def args(tmp_path, slice_name, hosts, failed=(), **extra):
    a = {"dir": str(tmp_path / "slices"), "slice": slice_name, "hosts": list(hosts), "failed": list(failed),
         "max_fail_percentage": 20}
    a.update(extra)
    return a


def test_records_then_another_slice_sees_it(run_module, tmp_path):
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1", "a2"], ["a1"], fleet_size=10))
    assert not failed and result["changed"] and not result["stop"]
    stored = json.loads((tmp_path / "slices" / "a" / "rollout.json").read_text())
    assert stored["hosts"] == ["a1", "a2"] and stored["failed"] == ["a1"]
    again, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1", "a2"], ["a1"], fleet_size=10))
    assert not failed and again["changed"] is False  # same state: not rewritten
    other, failed, _dummy = run_module(fleet_gate, args(tmp_path, "b", ["b1", "b2"], fleet_size=4))
    assert not failed and other["stop"] and other["failed_hosts"] == ["a1"] and other["nodes_failed"] == 1
    assert "1 of 4 node(s) failed (a1)" in other["msg"]


def test_check_mode_judges_and_writes_nothing(run_module, tmp_path):
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1"], ["a1"]), check_mode=True)
    assert not failed and result["stop"] and result["changed"]
    assert not (tmp_path / "slices").exists()


def test_unsliced_judges_the_play_and_the_last_batch_without_files(run_module, tmp_path):
    a = {"hosts": ["n1", "n2", "n3", "n4"], "failed": ["n1"], "max_fail_percentage": 30, "previous_batch": ["n1"]}
    result, failed, _dummy = run_module(fleet_gate, a)
    assert not failed and result["stop"] and "of the last batch failed: 1 of 1 node(s) (n1)" in result["msg"]
    assert result["changed"] is False
    a["previous_batch"] = ["n1", "n2", "n3", "n4"]
    result, failed, _dummy = run_module(fleet_gate, a)
    assert not failed and not result["stop"]  # 25 % of the batch and of the play


def test_a_corrupt_record_fails_closed_naming_the_file(run_module, tmp_path):
    (tmp_path / "slices" / "b").mkdir(parents=True)
    (tmp_path / "slices" / "b" / "rollout.json").write_text("{oops")
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1"]))
    assert failed and "slices/b/rollout.json is not JSON" in result["msg"] and "state is unknown" in result["msg"]
    assert not (tmp_path / "slices" / "a").exists()


def test_bad_input_writes_nothing(run_module, tmp_path):
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "../a", ["a1"]))
    assert failed and "plain name" in result["msg"]
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1"], max_fail_percentage=150))
    assert failed and "0 to 100" in result["msg"]
    assert not (tmp_path / "slices").exists()
