# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the private cgroup helpers (fake /sys/fs/cgroup trees)."""

from ansible_collections.nodefix.k8s.plugins.module_utils import _cgroup as cg

POD = "db841b6d-ca29-11e7-9644-02306c0cdc4b"
POD_SYSTEMD = POD.replace("-", "_")
CID = "b686057013a37c4764b7ecac27e9434164946af5e551075ffb6b7a898f475621"


def test_parse_proc_cgroup_v1_and_v2():
    text = "12:memory:/kubepods/pod1\n4:cpu,cpuacct:/kubepods/pod1\n1:name=systemd:/x\n0::/init.scope\n"
    got = cg.parse_proc_cgroup(text)
    assert got["memory"] == "/kubepods/pod1"
    assert got["cpu"] == got["cpuacct"] == "/kubepods/pod1"
    assert got["name=systemd"] == "/x"
    assert got[""] == "/init.scope"


def test_describe_systemd_path():
    path = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
            "docker-%s.scope" % (POD_SYSTEMD, CID))
    info = cg.describe_path(path)
    assert info == {"pod_uid": POD, "container_id": CID, "runtime": "docker", "qos": "burstable",
                    "driver": "systemd", "in_kubepods": True}


def test_describe_guaranteed_systemd_and_crio():
    info = cg.describe_path("/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope" % (POD_SYSTEMD, CID))
    assert (info["pod_uid"], info["qos"], info["runtime"]) == (POD, "guaranteed", "crio")


def test_describe_cgroupfs_path():
    info = cg.describe_path("/kubepods/besteffort/pod%s/%s" % (POD, CID))
    assert info == {"pod_uid": POD, "container_id": CID, "runtime": None, "qos": "besteffort",
                    "driver": "cgroupfs", "in_kubepods": True}


def test_describe_outside_kubepods():
    info = cg.describe_path("/system.slice/cri-containerd-%s.scope" % CID)
    assert info["in_kubepods"] is False and info["pod_uid"] is None
    assert info["container_id"] == CID and info["runtime"] == "containerd"


def test_layouts(make_tree, tmp_path):
    assert cg.layout(make_tree({"/sys/fs/cgroup/cgroup.controllers": "cpu memory\n"})) == "v2"


def test_layout_hybrid_and_v1(tmp_path):
    (tmp_path / "h/sys/fs/cgroup/unified").mkdir(parents=True)
    (tmp_path / "v/sys/fs/cgroup/memory").mkdir(parents=True)
    assert cg.layout(str(tmp_path / "h")) == "hybrid"
    assert cg.layout(str(tmp_path / "v")) == "v1"


def test_memory_limit_v2_walks_up_to_pod_slice(make_tree):
    pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice" % POD_SYSTEMD
    root = make_tree({
        "/sys/fs/cgroup/cgroup.controllers": "memory\n",
        "/sys/fs/cgroup/kubepods.slice/memory.max": "8000000000\n",
        "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/memory.max": "max\n",
        "/sys/fs/cgroup" + pod + "/memory.max": "268435456\n",
        "/sys/fs/cgroup" + pod + "/cri-containerd-abc.scope/memory.max": "max\n",
    })
    got = cg.memory_limit(root, "v2", pod + "/cri-containerd-abc.scope")
    assert got == {"limit": 268435456, "limited_by": pod, "leaf_limit": None, "exists": True}


def test_memory_limit_v1_unlimited_is_none(make_tree):
    root = make_tree({
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "/sys/fs/cgroup/memory/lab/memory.limit_in_bytes": "268435456\n",
        "/sys/fs/cgroup/memory/lab/box/memory.limit_in_bytes": "9223372036854771712\n",
    })
    got = cg.memory_limit(root, "v1", "/lab/box")
    assert got["limit"] == 268435456 and got["limited_by"] == "/lab" and got["leaf_limit"] is None


def test_memory_limit_unlimited_everywhere(make_tree):
    root = make_tree({"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"})
    assert cg.memory_limit(root, "v1", "/")["limit"] is None


def test_cpu_quota_v1_v2(make_tree):
    root = make_tree({
        "/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us": "295000\n",
        "/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us": "100000\n",
        "/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us": "-1\n",
        "/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us": "100000\n",
    })
    assert cg.cpu_quota(root, "v1", "/a") == (295000, 100000)
    assert cg.cpu_quota(root, "v1", "/b") == (None, 100000)
    root2 = make_tree({"/sys/fs/cgroup/cgroup.controllers": "cpu\n", "/sys/fs/cgroup/x/cpu.max": "max 100000\n",
                       "/sys/fs/cgroup/y/cpu.max": "50000 100000\n"})
    assert cg.cpu_quota(root2, "v2", "/x") == (None, 100000)
    assert cg.cpu_quota(root2, "v2", "/y") == (50000, 100000)
