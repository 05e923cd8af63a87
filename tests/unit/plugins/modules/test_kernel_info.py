# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kernel_info over fake node trees."""

from ansible_collections.nodefix.k8s.plugins.modules import kernel_info


def _node(make_tree, release="4.4.0-1069-aws", dying=1500):
    return make_tree({
        "/proc/sys/kernel/osrelease": release + "\n",
        "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
        "/sys/fs/cgroup/cgroup.stat": "nr_descendants 3\nnr_dying_descendants %d\n" % dying,
    })


def test_old_kernel_with_dying_memcgs(run_module, make_tree):
    result, failed, table = run_module(kernel_info, {"root": _node(make_tree)})
    assert not failed and result["changed"] is False and table.calls == []
    assert result["kernel"]["distro"] == "ubuntu" and result["cgroup_layout"] == "v2" and result["psi"] == "missing"
    assert [(f["id"], f["severity"]) for f in result["findings"]] == [
        ("kernel.no_oom_reaper", "high"), ("kernel.memcg_stat_unfixed", "medium"), ("kernel.no_psi", "medium"),
        ("kernel.memcg_stats_not_recursive", "low"), ("kernel.dying_memcgs", "high")]


def test_check_mode_same_result(run_module, make_tree):
    root = _node(make_tree)
    normal, _f, _t = run_module(kernel_info, {"root": root})
    checked, failed, _t = run_module(kernel_info, {"root": root}, check_mode=True)
    assert not failed and [f["id"] for f in checked["findings"]] == [f["id"] for f in normal["findings"]]


def test_release_option_and_threshold(run_module, make_tree):
    make_tree({"/proc/pressure/memory": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"})
    result, failed, _t = run_module(kernel_info, {"root": _node(make_tree), "release": "6.1.0-27-amd64",
                                                  "dying_memcgs_threshold": 2000})
    assert not failed and result["release"] == "6.1.0-27-amd64" and result["findings"] == []


def test_bad_release_fails_clearly(run_module, make_tree):
    result, failed, _t = run_module(kernel_info, {"root": _node(make_tree), "release": "latest"})
    assert failed and "is not a kernel release" in result["msg"]


def test_negative_threshold_fails(run_module, make_tree):
    result, failed, _t = run_module(kernel_info, {"root": _node(make_tree), "memory_stat_slow_ms": -5})
    assert failed and "memory_stat_slow_ms must not be negative" in result["msg"]


def test_min_release_reports_a_kernel_below_the_fleets_minimum(run_module, make_tree):
    root = _node(make_tree, release="6.1.0-28-amd64", dying=0)
    result, failed, _t = run_module(kernel_info, {"root": root, "min_release": "6.12"})
    assert not failed and result["min_release"] == "6.12"
    assert [f["id"] for f in result["findings"] if f["id"] == "kernel.below_minimum"] == ["kernel.below_minimum"]
    result, failed, _t = run_module(kernel_info, {"root": root, "min_release": "6.1.0"})
    assert not failed and "kernel.below_minimum" not in [f["id"] for f in result["findings"]]
    result, failed, _t = run_module(kernel_info, {"root": root, "min_release": "6.12-rc1"})
    assert failed and "is not a kernel version" in result["msg"]
