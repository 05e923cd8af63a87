# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.pids_info over fake /proc trees."""

from ansible_collections.nodefix.k8s.plugins.modules import pids_info
from ansible_collections.nodefix.k8s.tests.unit.plugins.module_utils.test_pids import (
    CID, POD, V2_POD_CGROUP, fake_proc, zombies)


def _node(make_tree):
    procs = [{"pid": 2841, "comm": "supercronic", "cmdline": ["/usr/local/bin/supercronic", "/crontabs/cron"],
              "cgroup": V2_POD_CGROUP, "nspid": 1}]
    procs += zombies(2841, 3000, 40, start=100)
    return fake_proc(make_tree, procs, pid_max=32768)


def test_reports_leaker_and_pid_max(run_module, make_tree):
    root = _node(make_tree)
    result, failed, table = run_module(pids_info, {"root": root, "pid_max_min": 4194304})
    assert not failed and result["changed"] is False
    assert table.calls == []  # no command at all
    assert (result["zombies"], result["tasks"], result["pid_max"]) == (40, 41, 32768)
    assert [(f["id"], f["subject"]) for f in result["findings"]] == [
        ("pids.pid_max_low", "kernel.pid_max"),
        ("pids.zombie_leaker", "pid 2841 (supercronic) in pod %s" % POD)]
    parent = result["zombie_parents"][0]
    assert (parent["container_id"], parent["zombies"], parent["leaker"]) == (CID, 40, True)


def test_check_mode_gives_the_same_result(run_module, make_tree):
    root = _node(make_tree)
    normal, _f, _t = run_module(pids_info, {"root": root, "pid_max_min": 4194304})
    checked, failed, _t = run_module(pids_info, {"root": root, "pid_max_min": 4194304}, check_mode=True)
    assert not failed and checked["changed"] is False
    assert checked["findings"] == normal["findings"] and checked["zombie_parents"] == normal["zombie_parents"]


def test_thresholds_from_options(run_module, make_tree):
    root = _node(make_tree)
    result, failed, _t = run_module(pids_info, {"root": root, "zombie_threshold": 41, "pid_max_min": 32768})
    assert not failed and result["findings"] == []


def test_negative_threshold_fails(run_module, make_tree):
    result, failed, _t = run_module(pids_info, {"root": _node(make_tree), "zombie_threshold": -1})
    assert failed and "zombie_threshold must not be negative" in result["msg"]


def test_root_without_proc_fails(run_module, tmp_path):
    result, failed, _t = run_module(pids_info, {"root": str(tmp_path)})
    assert failed and "has no proc directory" in result["msg"]
