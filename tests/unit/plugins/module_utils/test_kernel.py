# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _kernel: real distro release strings, fake v1/v2/hybrid trees."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import detect as kernel_detect

PSI_TEXT = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


@pytest.mark.parametrize("release, expected", [
    ("4.4.0-1069-aws", ("4.4.0", "ubuntu", None, "1069", "aws")),
    ("5.15.0-91-generic", ("5.15.0", "ubuntu", None, "91", "generic")),
    ("4.18.0-513.el8.x86_64", ("4.18.0", "rhel", "el8", "513", "x86_64")),
    ("6.1.0-27-amd64", ("6.1.0", "debian", None, "27", "amd64")),
    ("6.8.0-1015-aws", ("6.8.0", "ubuntu", None, "1015", "aws")),
    ("5.10.0-28-cloud-amd64", ("5.10.0", "debian", None, "28", "cloud-amd64")),
    ("6.1.0-0.deb11.17-amd64", ("6.1.0", "debian", None, "0.deb11.17", "amd64")),
    ("5.14.0-362.8.1.el9_3.x86_64", ("5.14.0", "rhel", "el9", "362.8.1", "x86_64")),
    ("5.4.17-2136.300.7.el8uek.x86_64", ("5.4.17", "oracle-uek", "el8", "2136.300.7", "x86_64")),
    ("4.14.336-257.562.amzn2.x86_64", ("4.14.336", "amazon", "amzn2", "257.562", "x86_64")),
    ("6.5.6-300.fc39.x86_64", ("6.5.6", "fedora", "fc39", "300", "x86_64")),
    ("6.18.44-fc-v657", ("6.18.44", None, None, None, None)),
    ("3.10", ("3.10.0", None, None, None, None)),
])
def test_parse_release(release, expected):
    info = kernel_detect.parse_release(release)
    assert (info["version"], info["distro"], info["distro_release"], info["abi"], info["flavour"]) == expected
    assert info["release"] == release


@pytest.mark.parametrize("text", ["", None, "Linux", "v5.15", "5"])
def test_parse_release_rejects(text):
    assert kernel_detect.parse_release(text) is None


def _v2_node(make_tree, release, dying=0, psi=True, extra=None):
    files = {
        "/proc/sys/kernel/osrelease": release + "\n",
        "/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
        "/sys/fs/cgroup/cgroup.stat": "nr_descendants 93\nnr_dying_descendants %d\n" % dying,
        "/sys/fs/cgroup/kubepods.slice/memory.stat": "anon 1\nfile 2\n",
    }
    if psi:
        for res in ("cpu", "memory", "io"):
            files["/proc/pressure/" + res] = PSI_TEXT
    files.update(extra or {})
    return make_tree(files)


def _ids(result):
    return [f["id"] for f in result["findings"]]


# The acceptance table: live node facts as a stock install of each release has them.
@pytest.mark.parametrize("release, psi, expected", [
    ("4.4.0-1069-aws", False,
     ["kernel.no_oom_reaper", "kernel.memcg_stat_unfixed", "kernel.no_psi", "kernel.memcg_stats_not_recursive"]),
    ("5.15.0-91-generic", True, []),
    # RHEL 8 backports PSI but disables it: the finding says psi=1, not upgrade
    ("4.18.0-513.el8.x86_64", False, ["kernel.memcg_stats_not_recursive", "kernel.no_psi"]),
    ("6.1.0-27-amd64", True, []),
    ("6.8.0-1015-aws", True, []),
])
def test_distro_releases_give_the_right_findings(make_tree, release, psi, expected):
    root = _v2_node(make_tree, release, psi=psi)
    got = kernel_detect.check(None, root=root)
    assert got["release"] == release
    assert _ids(got) == expected


def test_rhel8_psi_backport_in_evidence(make_tree):
    root = _v2_node(make_tree, "4.18.0-513.el8.x86_64", psi=False)
    got = kernel_detect.check(None, root=root)
    psi = [f for f in got["findings"] if f["id"] == "kernel.no_psi"][0]
    assert psi["evidence"] == {"release": "4.18.0-513.el8.x86_64", "psi": "missing",
                               "backport": "backported to RHEL 8 4.18, disabled by default: boot with psi=1",
                               "fix": "boot with psi=1"}
    assert got["backports"] == ["backported to RHEL 8 4.18, disabled by default: boot with psi=1"]
    # with psi=1 on the command line the finding goes away
    root2 = _v2_node(make_tree, "4.18.0-513.el8.x86_64", psi=True)
    assert _ids(kernel_detect.check(None, root=root2)) == ["kernel.memcg_stats_not_recursive"]


def test_old_kernel_finding_evidence_and_remedy(make_tree):
    got = kernel_detect.check(None, root=_v2_node(make_tree, "4.4.0-1069-aws", psi=False))
    reaper = got["findings"][0]
    assert reaper["severity"] == "high"
    assert reaper["evidence"] == {"release": "4.4.0-1069-aws", "version": "4.4.0", "distro": "ubuntu",
                                  "fixed_in": "4.6", "fix": kernel_detect.FIXES[0][2]}
    for f in got["findings"]:
        assert "Upgrade" in f["remedy"] or "upgrade" in f["remedy"]
    assert "drop_caches" in reaper["remedy"] and "NOT a remedy" in reaper["remedy"]


def test_psi_disabled_when_files_unreadable(make_tree):
    # CONFIG_PSI_DEFAULT_DISABLED: /proc/pressure exists but reads fail (EOPNOTSUPP on a node;
    # a directory in its place gives EISDIR here)
    root = _v2_node(make_tree, "6.1.0-27-amd64", psi=False, extra={"/proc/pressure/memory": None})
    got = kernel_detect.check(None, root=root)
    assert got["psi"] == "disabled"
    assert _ids(got) == ["kernel.no_psi"]


def test_v2_dying_memcgs_from_cgroup_stat(make_tree):
    root = _v2_node(make_tree, "5.15.0-91-generic", dying=1500)
    got = kernel_detect.check(None, root=root, clock=iter([10.0, 10.004]).__next__)
    assert got["cgroup_layout"] == "v2"
    assert got["dying_memcgs"] == {"count": 1500, "method": "cgroup.stat"}
    assert (got["memory_stat_path"], got["memory_stat_ms"]) == ("/sys/fs/cgroup/kubepods.slice/memory.stat", 4.0)
    assert _ids(got) == ["kernel.dying_memcgs"]
    f = got["findings"][0]
    assert f["severity"] == "medium"
    assert f["evidence"] == {"count": 1500, "method": "cgroup.stat", "threshold": 1000,
                             "release": "5.15.0-91-generic", "memory_stat_ms": 4.0}


def _v1_node(make_tree, release, num_cgroups, dirs, hybrid=False):
    files = {
        "/proc/sys/kernel/osrelease": release + "\n",
        "/proc/cgroups": ("#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
                          "cpuset\t3\t4\t1\ncpu\t1\t40\t1\ncpuacct\t2\t40\t1\n"
                          "memory\t4\t%d\t1\npids\t8\t40\t1\n" % num_cgroups),
        "/sys/fs/cgroup/memory/memory.stat": "cache 1\nrss 2\n",
        "/sys/fs/cgroup/cpu,cpuacct": None,
    }
    for d in dirs:
        files["/sys/fs/cgroup/memory" + d] = None
    if hybrid:
        files["/sys/fs/cgroup/unified/cgroup.stat"] = "nr_descendants 5\nnr_dying_descendants 3\n"
    return make_tree(files)


KUBEPODS_DIRS = ["/kubepods", "/kubepods/burstable", "/kubepods/burstable/pod1", "/kubepods/burstable/pod1/c1",
                 "/kubepods/besteffort", "/system.slice", "/system.slice/containerd.service"]


def test_v1_dying_memcgs_from_proc_cgroups(make_tree):
    # 8 directories (root included) against 2508 memory cgroups the kernel still knows
    root = _v1_node(make_tree, "4.4.0-1069-aws", 2508, KUBEPODS_DIRS)
    got = kernel_detect.check(None, root=root, clock=iter([0.0, 1.2]).__next__)
    assert got["cgroup_layout"] == "v1"
    assert got["dying_memcgs"] == {"count": 2500, "method": "/proc/cgroups", "num_cgroups": 2508, "directories": 8}
    assert (got["memory_stat_path"], got["memory_stat_ms"]) == ("/sys/fs/cgroup/memory/memory.stat", 1200.0)
    assert _ids(got) == ["kernel.no_oom_reaper", "kernel.memcg_stat_unfixed", "kernel.no_psi",
                         "kernel.memcg_stats_not_recursive", "kernel.dying_memcgs", "kernel.slow_memory_stat"]
    dying, slow = got["findings"][4:]
    assert dying["severity"] == "high"  # slow reads and an unfixed kernel
    assert slow["subject"] == "/sys/fs/cgroup/memory/memory.stat"
    assert slow["evidence"] == {"path": "/sys/fs/cgroup/memory/memory.stat", "milliseconds": 1200.0,
                                "threshold_ms": 200, "dying_memcgs": 2500, "release": "4.4.0-1069-aws"}


def test_hybrid_counts_memory_on_v1(make_tree):
    # the unified hierarchy's nr_dying_descendants is not the memory controller's on a hybrid node
    root = _v1_node(make_tree, "5.10.0-28-amd64", 20, KUBEPODS_DIRS, hybrid=True)
    for res in ("cpu", "memory", "io"):
        make_tree({"/proc/pressure/" + res: PSI_TEXT})
    got = kernel_detect.check(None, root=root, clock=iter([0.0, 0.01]).__next__)
    assert got["cgroup_layout"] == "hybrid"
    assert got["dying_memcgs"] == {"count": 12, "method": "/proc/cgroups", "num_cgroups": 20, "directories": 8}
    assert got["findings"] == []


def test_thresholds_are_options(make_tree):
    root = _v1_node(make_tree, "6.1.0-27-amd64", 20, KUBEPODS_DIRS)
    make_tree({"/proc/pressure/memory": PSI_TEXT})
    got = kernel_detect.check(None, root=root, dying_memcgs_threshold=12, memory_stat_slow_ms=50,
                              clock=iter([0.0, 0.05]).__next__)
    assert _ids(got) == ["kernel.dying_memcgs", "kernel.slow_memory_stat"]
    assert got["findings"][0]["severity"] == "high"  # escalated by the slow read


def test_release_option_overrides_osrelease(make_tree):
    # a 6.1 node with PSI judging the 4.4 kernel it may boot into: 4.4 has no PSI,
    # whatever the running kernel has
    root = _v2_node(make_tree, "6.1.0-27-amd64")
    got = kernel_detect.check(None, root=root, release="4.4.0-1069-aws")
    assert got["kernel"]["version"] == "4.4.0"
    assert got["judged_running_kernel"] is False and got["running_release"] == "6.1.0-27-amd64"
    assert _ids(got) == ["kernel.no_oom_reaper", "kernel.memcg_stat_unfixed", "kernel.no_psi",
                         "kernel.memcg_stats_not_recursive"]
    no_psi = [f for f in got["findings"] if f["id"] == "kernel.no_psi"][0]
    assert no_psi["evidence"]["fixed_in"] == "4.20" and no_psi["subject"] == "4.4.0-1069-aws"


def test_release_option_judges_a_newer_kernel_by_its_version(make_tree):
    # a 4.4 node without /proc/pressure judging the 6.1 kernel it will boot into:
    # 6.1 has PSI, so no kernel.no_psi from the running kernel's missing files
    root = _v2_node(make_tree, "4.4.0-1069-aws", psi=False)
    assert _ids(kernel_detect.check(None, root=root)) == ["kernel.no_oom_reaper", "kernel.memcg_stat_unfixed",
                                                          "kernel.no_psi", "kernel.memcg_stats_not_recursive"]
    got = kernel_detect.check(None, root=root, release="6.1.0-27-amd64")
    assert _ids(got) == [] and got["psi"] == "missing"


def test_release_option_naming_the_running_kernel_uses_live_psi(make_tree):
    root = _v2_node(make_tree, "6.1.0-27-amd64", psi=False)
    got = kernel_detect.check(None, root=root, release="6.1.0-27-amd64")
    assert got["judged_running_kernel"] is True
    assert _ids(got) == ["kernel.no_psi"]


@pytest.mark.parametrize("release", ["4.18.0-553.el8_10.x86_64", "4.18.0-553.el8_10"])
def test_release_option_el8_psi_backport_is_off_unless_booted_with_psi(make_tree, release):
    # judging an EL8 kernel the node does not run: PSI is backported but disabled by
    # default, and nothing is known of that boot's command line
    root = _v2_node(make_tree, "6.1.0-27-amd64")
    got = kernel_detect.check(None, root=root, release=release)
    assert got["judged_running_kernel"] is False
    no_psi = [f for f in got["findings"] if f["id"] == "kernel.no_psi"]
    assert len(no_psi) == 1, _ids(got)
    assert no_psi[0]["evidence"]["backport"] == kernel_detect.BACKPORTS["rhel8"]["kernel.no_psi"]
    assert no_psi[0]["evidence"]["fix"] == "boot with psi=1" and "psi=1" in no_psi[0]["remedy"]


def test_unparsable_release(make_tree):
    root = _v2_node(make_tree, "garbage")
    got = kernel_detect.check(None, root=root)
    assert got["kernel"] is None
    assert _ids(got) == ["kernel.unknown_release"]


def test_fix_table_matches_facts():
    assert [(v, fid) for v, fid, _n in kernel_detect.FIXES] == [
        ((4, 6), "kernel.no_oom_reaper"), ((4, 16), "kernel.memcg_stat_unfixed"), ((4, 20), "kernel.no_psi"),
        ((5, 2), "kernel.memcg_stats_not_recursive")]
    for fid, entry in kernel_detect.FINDINGS.items():
        assert fid.startswith("kernel.")
        assert set(entry) == {"severity", "title", "remedy", "role", "tag"}
