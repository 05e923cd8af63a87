# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the private cgroup helpers (fake /sys/fs/cgroup trees)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup

POD = "db841b6d-ca29-11e7-9644-02306c0cdc4b"
POD_SYSTEMD = POD.replace("-", "_")
CID = "b686057013a37c4764b7ecac27e9434164946af5e551075ffb6b7a898f475621"


def test_parse_proc_cgroup_v1_and_v2():
    text = "12:memory:/kubepods/pod1\n4:cpu,cpuacct:/kubepods/pod1\n1:name=systemd:/x\n0::/init.scope\n"
    got = core_cgroup.parse_proc_cgroup(text)
    assert got["memory"] == "/kubepods/pod1"
    assert got["cpu"] == got["cpuacct"] == "/kubepods/pod1"
    assert got["name=systemd"] == "/x"
    assert got[""] == "/init.scope"


def test_describe_systemd_path():
    path = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
            "docker-%s.scope" % (POD_SYSTEMD, CID))
    info = core_cgroup.describe_path(path)
    assert info == {"pod_uid": POD, "container_id": CID, "runtime": "docker", "qos": "burstable",
                    "driver": "systemd", "in_kubepods": True}


def test_describe_guaranteed_systemd_and_crio():
    info = core_cgroup.describe_path("/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope" % (POD_SYSTEMD, CID))
    assert (info["pod_uid"], info["qos"], info["runtime"]) == (POD, "guaranteed", "crio")


def test_describe_cgroupfs_path():
    info = core_cgroup.describe_path("/kubepods/besteffort/pod%s/%s" % (POD, CID))
    assert info == {"pod_uid": POD, "container_id": CID, "runtime": None, "qos": "besteffort",
                    "driver": "cgroupfs", "in_kubepods": True}


def test_describe_outside_kubepods():
    info = core_cgroup.describe_path("/system.slice/cri-containerd-%s.scope" % CID)
    assert info["in_kubepods"] is False and info["pod_uid"] is None
    assert info["container_id"] == CID and info["runtime"] == "containerd"


def test_layouts(make_tree, tmp_path):
    assert core_cgroup.layout(make_tree({"/sys/fs/cgroup/cgroup.controllers": "cpu memory\n"})) == "v2"


def test_layout_hybrid_and_v1(tmp_path):
    (tmp_path / "h/sys/fs/cgroup/unified").mkdir(parents=True)
    (tmp_path / "v/sys/fs/cgroup/memory").mkdir(parents=True)
    assert core_cgroup.layout(str(tmp_path / "h")) == "hybrid"
    assert core_cgroup.layout(str(tmp_path / "v")) == "v1"


def test_memory_limit_v2_walks_up_to_pod_slice(make_tree):
    pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice" % POD_SYSTEMD
    root = make_tree({
        "/sys/fs/cgroup/cgroup.controllers": "memory\n",
        "/sys/fs/cgroup/kubepods.slice/memory.max": "8000000000\n",
        "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/memory.max": "max\n",
        "/sys/fs/cgroup" + pod + "/memory.max": "268435456\n",
        "/sys/fs/cgroup" + pod + "/cri-containerd-abc.scope/memory.max": "max\n",
    })
    got = core_cgroup.memory_limit(root, "v2", pod + "/cri-containerd-abc.scope")
    assert got == {"limit": 268435456, "limited_by": pod, "leaf_limit": None, "exists": True}


def test_memory_limit_v1_unlimited_is_none(make_tree):
    root = make_tree({
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "/sys/fs/cgroup/memory/lab/memory.limit_in_bytes": "268435456\n",
        "/sys/fs/cgroup/memory/lab/box/memory.limit_in_bytes": "9223372036854771712\n",
    })
    got = core_cgroup.memory_limit(root, "v1", "/lab/box")
    assert got["limit"] == 268435456 and got["limited_by"] == "/lab" and got["leaf_limit"] is None


def test_memory_limit_unlimited_everywhere(make_tree):
    root = make_tree({"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"})
    assert core_cgroup.memory_limit(root, "v1", "/")["limit"] is None


def test_cpu_quota_v1_v2(make_tree):
    root = make_tree({
        "/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us": "295000\n",
        "/sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us": "100000\n",
        "/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us": "-1\n",
        "/sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us": "100000\n",
    })
    assert core_cgroup.cpu_quota(root, "v1", "/a") == (295000, 100000)
    assert core_cgroup.cpu_quota(root, "v1", "/b") == (None, 100000)
    root2 = make_tree({"/sys/fs/cgroup/cgroup.controllers": "cpu\n", "/sys/fs/cgroup/x/cpu.max": "max 100000\n",
                       "/sys/fs/cgroup/y/cpu.max": "50000 100000\n"})
    assert core_cgroup.cpu_quota(root2, "v2", "/x") == (None, 100000)
    assert core_cgroup.cpu_quota(root2, "v2", "/y") == (50000, 100000)


# --- pod UIDs: UUIDs and static pods (32 hex digits) ---------------------------

STATIC = "b3a8a2f4a1d3c0f0e8d3c2b1a0f9e8d7"   # a static pod's UID: kubelet's md5 of the manifest


@pytest.mark.parametrize("text, expected", [
    (POD, True),
    (STATIC, True),
    (POD.upper(), False),            # callers lower-case first
    (POD_SYSTEMD, False),            # the systemd slice form is not a UID
    (STATIC[:-1], False),
    (STATIC + "0", False),
    ("g" * 32, False),
    ("", False),
    (None, False),
])
def test_is_pod_uid(text, expected):
    assert core_cgroup.is_pod_uid(text) is expected


@pytest.mark.parametrize("path, qos", [
    ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope"
     % (STATIC, CID), "burstable"),
    ("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/cri-containerd-%s.scope"
     % (STATIC, CID), "besteffort"),
    ("/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope" % (STATIC, CID), "guaranteed"),
])
def test_describe_static_pod_systemd(path, qos):
    info = core_cgroup.describe_path(path)
    assert info == {"pod_uid": STATIC, "container_id": CID, "runtime": "containerd", "qos": qos,
                    "driver": "systemd", "in_kubepods": True}


@pytest.mark.parametrize("path, qos", [
    ("/kubepods/burstable/pod%s/%s" % (STATIC, CID), "burstable"),
    ("/kubepods/besteffort/pod%s/%s" % (STATIC, CID), "besteffort"),
    ("/kubepods/pod%s/%s" % (STATIC, CID), "guaranteed"),
])
def test_describe_static_pod_cgroupfs(path, qos):
    info = core_cgroup.describe_path(path)
    assert info == {"pod_uid": STATIC, "container_id": CID, "runtime": None, "qos": qos,
                    "driver": "cgroupfs", "in_kubepods": True}


def test_describe_static_pod_pod_level_and_under_a_container_parent():
    """The pod cgroup itself, and a node seen from inside a podman container (host path prefix)."""
    assert core_cgroup.describe_path("/kubepods/burstable/pod%s" % STATIC)["pod_uid"] == STATIC
    info = core_cgroup.describe_path("/libpod_parent/libpod-%s/kubepods/besteffort/pod%s/%s" % ("c" * 64, STATIC, CID))
    assert (info["pod_uid"], info["qos"], info["container_id"]) == (STATIC, "besteffort", CID)


@pytest.mark.parametrize("path", [
    "/system.slice/pod%s" % STATIC,                                   # pod<hex> outside kubepods
    "/kubepods/burstable/pod%s" % STATIC[:-1],                        # 31 hex digits
    "/kubepods/burstable/pod%s0" % STATIC,                            # 33 hex digits
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s" % STATIC,   # no .slice
])
def test_describe_rejects_near_static_uids(path):
    assert core_cgroup.describe_path(path)["pod_uid"] is None


# --- mount roots: a container's view of the host's cgroup paths ----------------

LIBPOD = "/libpod_parent/libpod-" + "c" * 64

# /proc/self/mountinfo of a privileged podman container on a v1 node (shape from the lab), plus
# lines that are not cgroup mounts or are malformed.
V1_MOUNTINFO = (
    "220 219 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
    "236 220 0:31 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755\n"
    "237 236 0:29 {p} /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "238 236 0:30 {p} /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd\n"
    "240 236 0:32 {p} /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory\n"
    "241 236 0:33 /other /sys/fs/cgroup/memory2 rw - cgroup cgroup rw,memory\n"
    "250 236 0:40 / /sys/fs/cgroup/hugetlb rw - cgroup cgroup rw,hugetlb\n"
    "251 236 0:41 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
    "252 236 0:42 / /sys/fs/cgroup/broken rw cgroup cgroup rw,pids\n"
    "253 236 0:43 / - cgroup\n"
).format(p=LIBPOD)


def test_mount_roots_v1_container(make_tree):
    root = make_tree({"/proc/self/mountinfo": V1_MOUNTINFO})
    roots = core_cgroup.mount_roots(root)
    wanted = {"cpu": LIBPOD, "cpuacct": LIBPOD, "name=systemd": LIBPOD, "memory": LIBPOD, "hugetlb": "/", "": "/"}
    assert dict((k, roots.get(k)) for k in wanted) == wanted     # first memory mount wins
    assert "pids" not in roots and "rw" not in roots and "mode=755" not in roots


def test_mount_roots_v2_container_and_missing_file(make_tree, tmp_path):
    root = make_tree({"/proc/self/mountinfo":
                      "30 24 0:26 %s /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n" % LIBPOD})
    assert core_cgroup.mount_roots(root) == {"": LIBPOD}
    assert core_cgroup.mount_roots(str(tmp_path / "nothing")) == {}


@pytest.mark.parametrize("controller, path, expected", [
    ("memory", LIBPOD + "/kubepods/burstable/pod%s/%s" % (STATIC, CID), "/kubepods/burstable/pod%s/%s" % (STATIC, CID)),
    ("memory", LIBPOD, "/"),
    ("memory", LIBPOD + "x/kubepods", LIBPOD + "x/kubepods"),      # a sibling, not below the mount root
    ("memory", "/elsewhere/kubepods", "/elsewhere/kubepods"),
    ("hugetlb", "/kubepods/pod%s" % STATIC, "/kubepods/pod%s" % STATIC),   # mount root / (a node)
    ("pids", "/kubepods", "/kubepods"),                            # controller not mounted
    ("memory", None, None),
    ("memory", "", ""),
])
def test_local_path_strips_the_mount_root(controller, path, expected):
    roots = {"memory": LIBPOD, "hugetlb": "/"}
    assert core_cgroup.local_path(roots, controller, path) == expected


def test_root_path_resolves_symlinks_the_way_the_node_sees_them(tmp_path):
    # chroot semantics under a root other than /: absolute targets start at the root, .. stops there
    from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
    root = tmp_path / "node"
    (root / "etc/sysctl.d").mkdir(parents=True)
    (root / "opt/k8s").mkdir(parents=True)
    (root / "opt/k8s/pids.conf").write_text("kernel.pid_max = 4194304\n")
    (root / "etc/sysctl.d/99-k8s.conf").symlink_to("/opt/k8s/pids.conf")
    (root / "etc/k8s").symlink_to("../../../../opt/k8s")          # climbs no higher than the node's /
    (tmp_path / "outside.conf").write_text("not the node's\n")
    (root / "etc/sysctl.d/98-escape.conf").symlink_to(str(tmp_path / "outside.conf"))
    assert read_text(root_path(str(root), "/etc/sysctl.d/99-k8s.conf")) == "kernel.pid_max = 4194304\n"
    assert read_text(root_path(str(root), "/etc/k8s/pids.conf")) == "kernel.pid_max = 4194304\n"
    assert read_text(root_path(str(root), "/etc/sysctl.d/98-escape.conf")) is None
    assert read_text(root_path(str(root), "/../../outside.conf")) is None
    # on a node (root /) the path is what the kernel resolves
    assert root_path("/", "/etc/sysctl.d/99-k8s.conf") == "/etc/sysctl.d/99-k8s.conf"
