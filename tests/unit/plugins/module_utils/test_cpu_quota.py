# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _cpu_quota: fake cpu hierarchies of v1, v2 and hybrid nodes (runc#1651 incident)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._cpu_quota import detect as cpu_quota_detect

# the incident: pod db841b6d..., docker container b686057013a3..., limit 2953m
POD = "db841b6d-ca29-11e7-9644-02306c0cdc4b"
POD_S = POD.replace("-", "_")
CID = "b686057013a37c4764b7ecac27e9434164946af5e551075ffb6b7a898f475621"
POD2 = "309b7de5-cf69-11e7-ac2f-0edc8525bec4"
CID2 = "5dd8abc95c12c31eada976843fd3387ea073ccf603fedc3c69c856e4b857b71c"
BURSTABLE = "/kubepods.slice/kubepods-burstable.slice"
INCIDENT_POD = BURSTABLE + "/kubepods-burstable-pod%s.slice" % POD_S
INCIDENT_CTR = INCIDENT_POD + "/docker-%s.scope" % CID
OK_POD = BURSTABLE + "/kubepods-burstable-pod%s.slice" % POD2.replace("-", "_")
OK_CTR = OK_POD + "/docker-%s.scope" % CID2


def v1_tree(make_tree, cgroups, base="/sys/fs/cgroup/cpu,cpuacct", extra=None):
    """``cgroups``: {path: (quota, period)}; quota -1 is unlimited."""
    files = {}
    for path, (quota, period) in cgroups.items():
        d = base + (path if path != "/" else "")
        files[d + "/cpu.cfs_quota_us"] = "%d\n" % quota
        files[d + "/cpu.cfs_period_us"] = "%d\n" % period
        files[d + "/cpu.shares"] = "1024\n"
    files.update(extra or {})
    return make_tree(files)


def v2_tree(make_tree, cgroups):
    """``cgroups``: {path: "cpu.max text"}; the root has no cpu.max."""
    files = {"/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n"}
    for path, text in cgroups.items():
        files["/sys/fs/cgroup" + path + "/cpu.max"] = text + "\n"
    return make_tree(files)


INCIDENT_V1 = {
    "/": (-1, 100000),
    "/kubepods.slice": (400000, 100000),       # node allocatable: 4 CPUs
    BURSTABLE: (-1, 100000),
    INCIDENT_POD: (295000, 100000),                # systemd truncated 295.3% to 295%
    INCIDENT_CTR: (295300, 100000),                # what runc writes for 2953m
    OK_POD: (15000, 100000),
    OK_CTR: (14700, 100000),                   # 147m: under its pod, but not a whole percent
    "/system.slice": (-1, 100000),
    "/system.slice/containerd.service": (-1, 100000),
}


def test_incident_295300_under_295000_v1_systemd(make_tree):
    root = v1_tree(make_tree, INCIDENT_V1)
    got = cpu_quota_detect.check(None, root=root, check_runc=False)
    assert (got["cgroup_layout"], got["cpu_hierarchy"], got["limited_cgroups"]) == ("v1", "/sys/fs/cgroup/cpu,cpuacct", 5)
    assert got["violations"] == [{
        "path": INCIDENT_CTR, "quota": 295300, "period": 100000, "cpus": 2.953,
        "parent": INCIDENT_POD, "parent_quota": 295000, "parent_period": 100000, "parent_cpus": 2.95,
        "pod_uid": POD, "container_id": CID, "runtime": "docker", "driver": "systemd", "parent_pod_uid": POD}]
    assert got["not_whole_percent"] == [
        {"path": OK_CTR, "quota": 14700, "period": 100000, "percent": 14.7, "systemd_truncates_to": 14000,
         "pod_uid": POD2, "container_id": CID2, "runtime": "docker", "driver": "systemd"},
        {"path": INCIDENT_CTR, "quota": 295300, "period": 100000, "percent": 295.3, "systemd_truncates_to": 295000,
         "pod_uid": POD, "container_id": CID, "runtime": "docker", "driver": "systemd"},
    ]
    assert [(f["id"], f["severity"], f["subject"]) for f in got["findings"]] == [
        ("cpu_quota.not_whole_percent", "medium", OK_CTR),
        ("cpu_quota.child_exceeds_parent", "high", INCIDENT_CTR),
        ("cpu_quota.not_whole_percent", "medium", INCIDENT_CTR),
    ]
    exceeds = got["findings"][1]
    assert exceeds["evidence"]["effect"] == "write refused (EINVAL)" and exceeds["evidence"]["layout"] == "v1"
    assert exceeds["fix"] == {"role": "nodefix.k8s.kernel", "tag": "cpu_quota"}


def test_nearest_limited_ancestor_and_period_normalisation(make_tree):
    cgroups = {
        "/": (-1, 100000),
        "/a": (150000, 100000),               # 1.5 CPUs
        "/a/unlimited": (-1, 100000),
        "/a/unlimited/deep": (80000, 50000),  # 1.6 CPUs: smaller number, larger share
        "/a/ok": (70000, 50000),              # 1.4 CPUs
        "/a/equal": (300000, 200000),         # 1.5 CPUs exactly: allowed
        "/b": (50000, 50000),
        "/b/c": (60000, 50000),               # 1.2 under 1.0
        "/b/c/d": (70000, 50000),             # 1.4 under 1.2 (its nearest is /b/c, itself over /b)
    }
    root = v1_tree(make_tree, cgroups, base="/sys/fs/cgroup/cpu")
    got = cpu_quota_detect.check(None, root=root, check_runc=False)
    assert [(v["path"], v["parent"], v["cpus"], v["parent_cpus"]) for v in got["violations"]] == [
        ("/a/unlimited/deep", "/a", 1.6, 1.5), ("/b/c", "/b", 1.2, 1.0), ("/b/c/d", "/b/c", 1.4, 1.2)]
    # outside kubepods nothing is judged by whole percents
    assert got["not_whole_percent"] == []


def test_v2_cgroupfs_capped_not_refused(make_tree):
    pod = "/kubepods/burstable/pod%s" % POD
    root = v2_tree(make_tree, {
        "/kubepods": "max 100000",
        "/kubepods/burstable": "max 100000",
        pod: "295000 100000",
        pod + "/" + CID: "295300 100000",
        "/kubepods/besteffort": "max 100000",
    })
    got = cpu_quota_detect.check(None, root=root, check_runc=False)
    assert got["cgroup_layout"] == "v2" and got["cpu_hierarchy"] == "/sys/fs/cgroup"
    assert [(v["path"], v["parent"], v["pod_uid"], v["container_id"], v["driver"]) for v in got["violations"]] == [
        (pod + "/" + CID, pod, POD, CID, "cgroupfs")]
    assert [(f["id"], f["severity"]) for f in got["findings"]] == [("cpu_quota.child_exceeds_parent", "medium")]
    assert got["findings"][0]["evidence"]["effect"] == "child capped to the parent's quota"
    # cgroupfs driver: systemd never rounds, so 295300 is no percent problem
    assert got["not_whole_percent"] == []


def test_v2_systemd_51m(make_tree):
    pod = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice" % POD_S
    ctr = pod + "/cri-containerd-%s.scope" % CID
    root = v2_tree(make_tree, {"/kubepods.slice": "max 100000", pod: "max 100000", ctr: "5100 100000"})
    got = cpu_quota_detect.check(None, root=root, check_runc=False)
    assert got["violations"] == []
    assert got["not_whole_percent"] == [
        {"path": ctr, "quota": 5100, "period": 100000, "percent": 5.1, "systemd_truncates_to": 5000,
         "pod_uid": POD, "container_id": CID, "runtime": "containerd", "driver": "systemd"}]


def test_hybrid_reads_the_v1_cpu_hierarchy(make_tree):
    root = v1_tree(make_tree, INCIDENT_V1, extra={"/sys/fs/cgroup/unified/cgroup.procs": "1\n"})
    got = cpu_quota_detect.check(None, root=root, check_runc=False)
    assert got["cgroup_layout"] == "hybrid"
    assert [v["path"] for v in got["violations"]] == [INCIDENT_CTR]


def test_no_cpu_controller(tmp_path):
    got = cpu_quota_detect.check(None, root=str(tmp_path), check_runc=False)
    assert (got["cpu_hierarchy"], got["limited_cgroups"], got["findings"]) == (None, 0, [])


class FakeRunner(object):
    def __init__(self, out, rc=0, path="/usr/sbin/runc"):
        self.out, self.rc, self.path, self.calls = out, rc, path, []

    def bin(self, name, required=False, opt_dirs=None):
        return self.path

    def run(self, argv, check=True, data=None, msg=None):
        self.calls.append(argv)
        return self.rc, self.out, ""


@pytest.mark.parametrize("out, version, bug", [
    ("runc version 1.0.0-rc4\nspec: 1.0.0\n", "1.0.0-rc4", True),
    ("runc version 0.1.1\ncommit: 34a2a1a\nspec: 1.0.0-rc2-dev\n", "0.1.1", True),
    ("runc version 1.0.0-rc5\ncommit: 4fc53a81\nspec: 1.0.0\n", "1.0.0-rc5", False),
    # Debian 11: rc93 is after rc5, numerically and in time
    ("runc version 1.0.0~rc93+ds1\ncommit: 1.0.0~rc93+ds1-5+deb11u5\nspec: 1.0.2-dev\n", "1.0.0-rc93", False),
    ("runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n",
     "1.1.5", False),
])
def test_runc_versions(make_tree, out, version, bug):
    runner = FakeRunner(out)
    got = cpu_quota_detect.check(runner, root=v1_tree(make_tree, {"/": (-1, 100000)}))
    assert runner.calls == [["/usr/sbin/runc", "--version"]]
    assert got["runc"] == {"binary": "/usr/sbin/runc", "version": version, "cpu_quota_rounding_bug": bug}
    # one owner: the containerd detector makes runc.cpu_quota_rounding_bug, so an
    # old runc counts once in node_audit; this detector only reports the facts
    assert got["findings"] == []
    made = containerd_detect.runc_findings(got["runc"])
    assert [f["id"] for f in made] == (["runc.cpu_quota_rounding_bug"] if bug else [])


def test_runc_missing_or_failing(make_tree):
    root = v1_tree(make_tree, {"/": (-1, 100000)})
    got = cpu_quota_detect.check(FakeRunner("", path=None), root=root)
    assert got["runc"] == {"binary": None, "version": None, "cpu_quota_rounding_bug": None}
    got = cpu_quota_detect.check(FakeRunner("boom", rc=1), root=root)
    assert got["runc"] == {"binary": "/usr/sbin/runc", "version": None, "cpu_quota_rounding_bug": None}
    assert got["findings"] == []


def test_helpers():
    assert cpu_quota_detect.whole_percent(295000, 100000) and not cpu_quota_detect.whole_percent(295300, 100000)
    assert cpu_quota_detect.whole_percent(5000, 50000) and not cpu_quota_detect.whole_percent(5100, 50000)
    assert cpu_quota_detect.systemd_truncated(295300, 100000) == 295000
    assert cpu_quota_detect.exceeds((295300, 100000), (295000, 100000))
    assert not cpu_quota_detect.exceeds((147500, 50000), (295000, 100000))
