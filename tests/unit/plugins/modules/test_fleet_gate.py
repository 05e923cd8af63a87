# SPDX-License-Identifier: GPL-3.0-or-later
"""fleet_gate: records a slice's state atomically, judges every slice, check mode writes nothing."""

import json
import os
import threading

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import fleet_gate


def args(tmp_path, slice_name, hosts, failed=(), **extra):
    a = {"dir": str(tmp_path / "slices"), "slice": slice_name, "hosts": list(hosts), "failed": list(failed),
         "max_fail_percentage": 20, "rollout": "r-1"}
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


def write(tmp_path, name, text):
    (tmp_path / "slices" / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "slices" / name / "rollout.json").write_text(text)


def test_a_record_of_another_rollout_is_not_counted(run_module, tmp_path):
    """Half of a stale rollout's nodes failed; it must not dilute (nor add to) this rollout's share."""
    write(tmp_path, "old", json.dumps({"slice": "old", "rollout": "r-0", "hosts": ["o%d" % i for i in range(20)],
                                       "failed": ["o0"], "updated": "2026-11-01T00:00:00Z"}))
    write(tmp_path, "legacy", json.dumps({"slice": "legacy", "hosts": ["l1", "l2"], "failed": ["l1", "l2"]}))
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1", "a2"], ["a1"]))
    # 1 of 2 = 50 %: stop (with the stale record it would read 2 of 24 = 8 %: go)
    assert not failed and result["stop"] and result["size"] == 2 and result["failed_hosts"] == ["a1"]
    assert result["ignored"] == [{"slice": "legacy", "rollout": None}, {"slice": "old", "rollout": "r-0"}]
    assert json.loads((tmp_path / "slices" / "a" / "rollout.json").read_text())["rollout"] == "r-1"


def test_a_sliced_gate_needs_the_rollout_id(run_module, tmp_path):
    a = args(tmp_path, "a", ["a1"])
    del a["rollout"]
    result, failed, _dummy = run_module(fleet_gate, a)
    assert failed and "rollout" in result["msg"]
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1"], rollout=" "))
    assert failed and "rollout must be a non-empty id" in result["msg"]
    assert not (tmp_path / "slices").exists()


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_a_record_that_is_not_a_regular_file_is_a_clear_error_and_never_blocks(run_module, tmp_path, kind):
    (tmp_path / "slices" / "b").mkdir(parents=True)
    path = tmp_path / "slices" / "b" / "rollout.json"
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps({"slice": "b", "rollout": "r-1", "hosts": [], "failed": []}))
        os.symlink(str(tmp_path / "elsewhere.json"), str(path))
    else:
        path.mkdir()
    out = {}
    worker = threading.Thread(target=lambda: out.update(zip(("result", "failed", "t"),
                                                            run_module(fleet_gate, args(tmp_path, "a", ["a1"])))))
    worker.daemon = True
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock the reader so the test process can end, then fail
        with open(str(path), "w"):
            pass
        raise AssertionError("fleet_gate blocked on a %s named rollout.json" % kind)
    assert out["failed"] and "slices/b/rollout.json is not a regular file" in out["result"]["msg"], out
    assert "state is unknown" in out["result"]["msg"]


@pytest.mark.parametrize("text", ["[" * 100000 + "]" * 100000, '{"a":' * 50000 + "1" + "}" * 50000])
def test_a_deeply_nested_record_is_a_clear_error(run_module, tmp_path, text):
    write(tmp_path, "b", text)
    result, failed, _dummy = run_module(fleet_gate, args(tmp_path, "a", ["a1"]))
    assert failed and "slices/b/rollout.json is not JSON" in result["msg"]
