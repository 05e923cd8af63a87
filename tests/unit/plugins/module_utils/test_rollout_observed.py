# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""This controller's memory of other runs' records (``_rollout/observed.py``): a lease timed from when this observer
first saw the record unchanged, on its own monotonic clock (client-go's observedTime) - and, through the machine, a
claim decided by it (review #4)."""

import json
import os

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import observed
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Clock, node, pod
from plugins.module_utils.rollout_machine_harness import context


class Mono(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def store(tmp_path, mono, boot="boot-c", name="node-a"):
    return observed.Observations(str(tmp_path / "observed"), name, boot, mono, record.fingerprint)


def rec(renewed="2026-12-06T07:00:00Z", run="run-0"):
    return {"run": run, "phase": "drain", "started": renewed, "moved": renewed, "renewed": renewed, "leaseSeconds": 60}


def test_first_sight_is_none_then_the_time_seen_unchanged(tmp_path):
    mono = Mono()
    assert store(tmp_path, mono)(rec()) is None
    path = tmp_path / "observed" / "node-a.json"
    assert oct(os.stat(str(path)).st_mode & 0o777) == "0o600"
    assert oct(os.stat(str(tmp_path / "observed")).st_mode & 0o777) == "0o700"
    mono.now += 45
    assert store(tmp_path, mono)(rec()) == 45
    # the record changed (renewed): seen for the first time again
    mono.now += 10
    assert store(tmp_path, mono)(rec(renewed="2026-12-06T07:01:00Z")) is None
    assert json.loads(path.read_text())["seen"] == mono.now


def test_another_boot_or_an_unreadable_memory_is_no_observation(tmp_path):
    mono = Mono()
    store(tmp_path, mono)(rec())
    mono.now += 100
    assert store(tmp_path, mono, boot="boot-other")(rec()) is None      # another machine or boot: its clock is not ours
    (tmp_path / "observed" / "node-a.json").write_text("{not json")
    assert store(tmp_path, mono)(rec()) is None
    # a seen time ahead of this clock (a reboot reset it, the boot id unknown) is no observation
    (tmp_path / "observed" / "node-a.json").write_text(json.dumps({"boot": "boot-c", "fingerprint":
                                                                   record.fingerprint(rec()), "seen": 10 ** 9}))
    assert store(tmp_path, mono)(rec()) is None


def _plant(directory, seen, mode=0o600):
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / "node-a.json"
    path.write_text(json.dumps({"boot": "boot-c", "fingerprint": record.fingerprint(rec()), "seen": seen}))
    os.chmod(str(path), mode)
    return path


def test_a_bool_zero_or_negative_seen_is_no_observation(tmp_path):
    """Review R4: "seen": true (a bool is an int) or 0 made any live record look seen unchanged for ages."""
    mono = Mono()
    for seen in (True, False, 0, -5):
        _plant(tmp_path / "observed", seen)
        assert store(tmp_path, mono)(rec()) is None, seen
    _plant(tmp_path / "observed", 1.0)
    assert store(tmp_path, mono)(rec()) == 999.0      # (the control: a well-formed entry is an observation)


def test_a_group_or_world_writable_or_linked_memory_is_not_trusted(tmp_path):
    """Review R4: a file (or directory) others can write could hold a planted, old "seen"; a symbolic link is not
    followed."""
    mono = Mono()
    directory = tmp_path / "observed"
    for mode in (0o620, 0o602, 0o666):
        _plant(directory, 1.0, mode)
        assert store(tmp_path, mono)(rec()) is None, oct(mode)
    _plant(directory, 1.0)
    os.chmod(str(directory), 0o777)
    assert store(tmp_path, mono)(rec()) is None
    os.chmod(str(directory), 0o700)
    target = _plant(tmp_path / "elsewhere", 1.0)
    os.remove(str(directory / "node-a.json"))
    os.symlink(str(target), str(directory / "node-a.json"))
    assert store(tmp_path, mono)(rec()) is None


def test_the_machine_times_a_foreign_record_on_its_own_clock(tmp_path):
    """Another controller's record, renewed 'now' by its clock, lease 60 s: the first run that sees it refuses the node
    (live); a run on the same controller after 60 s of this controller's monotonic clock takes it over, though the
    wall clock the test's context reads has not moved."""
    clock = Clock()
    other = record.new("run-0", clock.now(), {"host": "other", "pid": 9, "boot": "z"}, 60, phase="claimed",
                       version=record.MACHINE_VERSION)
    api = ApiDouble([node(**{record.ANNOTATION: record.text(other)})], [pod("web-1")])
    mono = Mono()
    ctx = context(api, clock=clock, run_id="run-1")
    ctx.observe = store(tmp_path, mono)
    first = machine.begin(ctx)
    assert first["outcome"] == Outcome.REFUSED and "holds this node" in first["detail"], first
    mono.now += 61
    ctx = context(api, clock=clock, run_id="run-2")
    ctx.observe = store(tmp_path, mono)
    second = machine.begin(ctx)
    claim = [s for s in second["steps"] if s["name"] == "claim"][0]
    assert "took the node over" in claim["detail"] and "(its own clock)" in claim["detail"], claim
