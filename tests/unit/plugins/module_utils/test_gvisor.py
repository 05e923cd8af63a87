# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the gVisor detector: version parsing, configs, live sandboxes (fake /proc and cgroup trees)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import detect as gvisor_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import node_config as gvisor_node_config
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import sandboxes as gvisor_sandboxes
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import version as gvisor_version
from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._core import findings as core_findings
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import procfs as core_procfs

MIB = 1048576
HOST_RAM = 25276510208          # what the lab's real runsc printed for an unlimited leaf
V1_UNLIMITED = "9223372036854771712\n"
POD_A = "6a1f0c2e-0000-4000-8000-00000000a001"
POD_B = "6a1f0c2e-0000-4000-8000-00000000b002"
STATIC = "b3a8a2f4a1d3c0f0e8d3c2b1a0f9e8d7"   # a static pod's UID (md5 hex)
CID_A = "a" * 64
CID_B = "b" * 64


def sandbox_cmdline(cid, total, root="/var/run/runsc", extra=()):
    """The real shape measured in the lab (runsc 0.0~20221219.0)."""
    argv = ["runsc-sandbox", "--root=%s" % root, "--network=none"] + list(extra) + [
        "boot", "--proc-mount-sync-fd=18", "--bundle=/b/%s" % cid[:4], "--cpu-num", "2",
        "--total-memory", str(total), "--io-fds=3", "--controller-fd=6", "--spec-fd=7", cid]
    return "\0".join(argv) + "\0"


def gofer_cmdline(cid):
    return "\0".join(["runsc-gofer", "--root=/var/run/runsc", "gofer", "--bundle", "/b/%s" % cid[:4]]) + "\0"


def v1_cgroup(path):
    return ("12:memory:%s\n4:cpu,cpuacct:%s\n1:name=systemd:%s\n0::%s\n" % (path, path, path, path))


def v2_cgroup(path):
    return "0::%s\n" % path


class FakeRunner(object):
    """Stands in for core_runner.Runner: fixed binaries and ``--version`` output."""

    def __init__(self, bins=None, version_out=None, rc=0):
        self.bins = bins or {}
        self.version_out = version_out
        self.rc = rc
        self.calls = []

    def bin(self, name, required=False, opt_dirs=None):
        return self.bins.get(name, name if name.startswith("/") and name in self.bins.values() else None)

    def run(self, argv, check=True, data=None, msg=None):
        self.calls.append(argv)
        return self.rc, self.version_out or "", ""


# ------------------------------------------------------------------ versions

@pytest.mark.parametrize("out,release,flavor,untagged,key", [
    ("runsc version release-20231009.0\nspec: 1.0.2\n", "20231009.0", "upstream", False, [20231009, 0, 0]),
    ("runsc version release-20201216.0-72-gbf343394d498\nspec: 1.0.2\n", "20201216.0", "upstream", True,
     [20201216, 0, 72]),
    ("runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", "20221219.0", "debian", False, [20221219, 0, 0]),
    ("runsc version 0.0~20240729.0\nspec: 1.1.0\n", "20240729.0", "debian", False, [20240729, 0, 0]),
    ("runsc version release-20240603.1\n", "20240603.1", "upstream", False, [20240603, 1, 0]),
])
def test_parse_runsc_version(out, release, flavor, untagged, key):
    got = gvisor_version.parse_runsc_version(out)
    assert (got["release"], got["flavor"], got["untagged"], got["key"]) == (release, flavor, untagged, key)


def test_parse_untagged_keeps_commit():
    got = gvisor_version.parse_runsc_version("runsc version release-20201216.0-72-gbf343394d498\n")
    assert got["commit"] == "bf343394d498" and got["commits_after_tag"] == 72


@pytest.mark.parametrize("out", ["", "runsc version VERSION_MISSING\n", "something else", "runsc version\n"])
def test_parse_unknown(out):
    assert gvisor_version.parse_runsc_version(out) is None


@pytest.mark.parametrize("version,fixed,systemd", [
    ("release-20231009.0", False, True),          # a production runsc from before the fix
    ("release-20231106.0", True, True),           # first release with PR #9631
    ("release-20231030.0-40-gdeadbeef0123", False, True),
    ("release-20231106.0-3-gdeadbeef0123", True, True),
    ("0.0~20221219.0", False, True),              # Debian 12
    ("0.0~20240729.0", True, True),               # Debian 13
    ("release-20220314.0", False, False),
    ("release-20220321.0", False, True),          # first release with systemd-cgroup (PR #7287)
    ("release-20201216.0-72-gbf343394d498", False, False),
])
def test_thresholds(version, fixed, systemd):
    parsed = gvisor_version.parse_release(version)
    assert gvisor_version.release_ge(parsed, gvisor_version.FIXED_RELEASE) is fixed
    assert gvisor_version.release_ge(parsed, gvisor_version.SYSTEMD_CGROUP_RELEASE) is systemd


# ------------------------------------------------------------------ configs

CTD_V2 = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
  runtime_type = "io.containerd.runsc.v1"
"""

CTD_V2_FIXED = CTD_V2 + """  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
    TypeUrl = "io.containerd.runsc.v1.options"
    ConfigPath = "/etc/containerd/runsc.toml"
"""

# containerd 2.x writes literal (single-quoted) strings
CTD_V3 = """version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.gvisor]
  runtime_type = 'io.containerd.runsc.v1'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.gvisor.options]
    TypeUrl = 'io.containerd.runsc.v1.options'
    ConfigPath = '/etc/containerd/gvisor.toml'
"""

CTD_V1 = """[plugins.cri.containerd.runtimes.runsc]
  runtime_type = "io.containerd.runsc.v1"
"""


def test_read_containerd_schemas(make_tree):
    root = make_tree({"/a.toml": CTD_V2_FIXED, "/b.toml": CTD_V3, "/c.toml": CTD_V1, "/d.toml": "version = 9\n",
                      "/e.toml": "version = [\n"})
    a = gvisor_node_config.read_containerd(root, "/a.toml")
    assert a["schema_version"] == 2 and a["runc_systemd_cgroup"] is True
    assert a["runsc_runtimes"] == [{"name": "runsc", "runtime_type": gvisor_node_config.RUNSC_RUNTIME_TYPE,
                                    "type_url": gvisor_node_config.RUNSC_TYPE_URL, "config_path": "/etc/containerd/runsc.toml"}]
    b = gvisor_node_config.read_containerd(root, "/b.toml")
    assert b["schema_version"] == 3 and b["runc_systemd_cgroup"] is False
    assert b["runsc_runtimes"][0]["name"] == "gvisor"
    assert b["runsc_runtimes"][0]["config_path"] == "/etc/containerd/gvisor.toml"
    c = gvisor_node_config.read_containerd(root, "/c.toml")
    assert c["schema_version"] == 1 and c["runsc_runtimes"][0]["config_path"] is None
    assert "unknown config schema version 9" in gvisor_node_config.read_containerd(root, "/d.toml")["error"]
    assert gvisor_node_config.read_containerd(root, "/e.toml")["error"].startswith("/e.toml is not valid TOML")
    assert gvisor_node_config.read_containerd(root, "/missing.toml")["exists"] is False


def test_shim_config_quoted_and_unquoted(make_tree):
    root = make_tree({
        "/ok.toml": '# comment\nlog_level = "debug"\n[runsc_config]\n  systemd-cgroup = "true"\n',
        "/bad.toml": "[runsc_config]\n  systemd-cgroup = true\n  debug = \"true\"\n",
        "/broken.toml": "[runsc_config\n",
    })
    ok = gvisor_node_config.read_shim_config(root, "/ok.toml")
    assert ok["valid"] is True and ok["systemd_cgroup"] is True and ok["settings"] == {"log_level": "debug"}
    bad = gvisor_node_config.read_shim_config(root, "/bad.toml")
    assert bad["valid"] is False and "systemd-cgroup = true" in bad["error"] and "debug" not in bad["error"]
    assert gvisor_node_config.read_shim_config(root, "/broken.toml")["valid"] is False


def kubelet_files(config_text=None, args="", dropins=None, env=None):
    """A kubeadm-shaped kubelet: unit, its 10-kubeadm.conf drop-in, kubeadm-flags.env, config, --config-dir drop-ins."""
    files = {
        "/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n",
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": (
            "[Service]\nEnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\nExecStart=\n"
            "ExecStart=/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml%s $KUBELET_KUBEADM_ARGS\n"
            % (" --config-dir=/etc/kubernetes/kubelet.conf.d" if dropins is not None else "")),
        "/var/lib/kubelet/kubeadm-flags.env": 'KUBELET_KUBEADM_ARGS="%s"\n' % args,
        "/var/lib/kubelet/config.yaml": config_text if config_text is not None else (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"),
    }
    for name, text in (dropins or {}).items():
        files["/etc/kubernetes/kubelet.conf.d/" + name] = text
    files.update(env or {})
    return files


KCFG = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: %s\n"


def test_cgroup_driver_is_the_kubelets_effective_configuration(make_tree):
    """One reader (the kubelet detector's): flags > --config-dir drop-ins > --config file."""
    ctd = {"config_path": "/etc/containerd/config.toml", "runc_systemd_cgroup": None}
    only_file = make_tree(kubelet_files(KCFG % "systemd"))
    assert gvisor_node_config.node_cgroup_driver(None, only_file, ctd)[:2] == (
        "systemd", "kubelet config /var/lib/kubelet/config.yaml")
    dropin = make_tree(kubelet_files(KCFG % "systemd", dropins={"50-driver.conf": KCFG % "cgroupfs"}))
    assert gvisor_node_config.node_cgroup_driver(None, dropin, ctd)[:2] == (
        "cgroupfs", "kubelet drop-in /etc/kubernetes/kubelet.conf.d/50-driver.conf")
    flag = make_tree(kubelet_files(KCFG % "systemd", args="--cgroup-driver=cgroupfs --v=2",
                                   dropins={"50-driver.conf": KCFG % "systemd"}))
    assert gvisor_node_config.node_cgroup_driver(None, flag, ctd)[:2] == ("cgroupfs", "kubelet flag --cgroup-driver")


def test_cgroup_driver_falls_back_to_runc_then_default(make_tree):
    # a kubelet that does not set cgroupDriver, and no kubelet at all
    for root in (make_tree(kubelet_files()), make_tree({"/etc/hostname": "n\n"})):
        on = {"config_path": "/c.toml", "runc_systemd_cgroup": True}
        off = {"config_path": "/c.toml", "runc_systemd_cgroup": False}
        unset = {"config_path": "/c.toml", "runc_systemd_cgroup": None}
        assert gvisor_node_config.node_cgroup_driver(None, root, on)[:2] == ("systemd", "/c.toml (runc SystemdCgroup = true)")
        assert gvisor_node_config.node_cgroup_driver(None, root, off)[:2] == ("cgroupfs", "/c.toml (runc SystemdCgroup = false)")
        assert gvisor_node_config.node_cgroup_driver(None, root, unset)[0] == "cgroupfs"


def test_kubelet_driver_beats_runc_option_in_check(make_tree):
    # the shim-config decision: a kubelet flag saying cgroupfs wins over runc SystemdCgroup = true,
    # so no systemd-cgroup is wanted (the old regex reader missed kubeadm-flags.env drop-in layouts)
    files = {"/sys/fs/cgroup/cgroup.controllers": "memory\n", "/proc/self/mountinfo": "",
             "/etc/containerd/config.toml": CTD_V2_FIXED,
             "/etc/containerd/runsc.toml": '[runsc_config]\n  debug = "true"\n'}
    files.update(kubelet_files(KCFG % "systemd", dropins={"10-driver.conf": KCFG % "cgroupfs"}))
    runner = FakeRunner({"runsc": "/usr/bin/runsc", gvisor_node_config.SHIM_NAME: "/usr/bin/" + gvisor_node_config.SHIM_NAME},
                        "runsc version release-20240603.0\n")
    facts = gvisor_detect.check(runner, root=make_tree(files))
    assert facts["cgroup_driver"] == "cgroupfs" and facts["kubelet_cgroup_driver"] == "cgroupfs"
    assert facts["cgroup_driver_source"] == "kubelet drop-in /etc/kubernetes/kubelet.conf.d/10-driver.conf"
    assert ids(facts) == []


def test_containerd_read_without_tomlkit(make_tree, monkeypatch):
    """The reader still reads a node without python3-tomlkit (Python's tomllib)."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
    monkeypatch.setattr(containerd_cfg, "HAS_TOMLKIT", False)
    a = gvisor_node_config.read_containerd(make_tree({"/a.toml": CTD_V2_FIXED}), "/a.toml")
    assert a["error"] is None and a["runc_systemd_cgroup"] is True
    assert a["runsc_runtimes"][0]["config_path"] == "/etc/containerd/runsc.toml"


def test_no_toml_parser_at_all_is_a_failed_check_never_an_invalid_config(make_tree, monkeypatch):
    """Python < 3.11 without tomlkit (RHEL 8/9, Ubuntu 22.04, Debian 11 nodes): a valid config.toml
    cannot be read - the containerd and gvisor detectors fail (audit.check_failed: the condition is
    Unknown), they never report containerd.config_invalid or a clean gVisor."""
    import sys  # pylint: disable=import-outside-toplevel
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
    from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
    monkeypatch.setattr(containerd_cfg, "HAS_TOMLKIT", False)
    monkeypatch.setitem(sys.modules, "tomllib", None)          # import tomllib -> ImportError
    root = make_tree({"/etc/containerd/config.toml": CTD_V2_FIXED})
    with pytest.raises(containerd_cfg.NoTomlParser, match="has no TOML parser"):
        gvisor_node_config.read_containerd(root, "/etc/containerd/config.toml")
    result = audit_checks.run_checks(FakeRunner({}), root=root, checks=["containerd", "gvisor"])
    ids = [(f["id"], f.get("subject")) for f in result["findings"]]
    assert ("audit.check_failed", "containerd") in ids and ("audit.check_failed", "gvisor") in ids, ids
    assert not [i for i, _s in ids if i in ("containerd.config_invalid", "gvisor.config_invalid")]


# ------------------------------------------------------------------ live sandboxes

def v1_node(extra=None):
    """Hybrid v1 node like the lab: two real-shaped sandboxes under 256 MiB pod cgroups."""
    pa = "/kubepods/burstable/pod%s" % POD_A
    pb = "/kubepods/burstable/pod%s" % POD_B
    files = {
        "/sys/fs/cgroup/unified": None,
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/memory/kubepods/burstable/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % pa: "268435456\n",
        "/sys/fs/cgroup/memory%s/%s/memory.limit_in_bytes" % (pa, CID_A): V1_UNLIMITED,
        "/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % pb: "268435456\n",
        "/sys/fs/cgroup/memory%s/%s/memory.limit_in_bytes" % (pb, CID_B): "268435456\n",
        "/proc/1/cmdline": "/sbin/init\0",
        "/proc/1/cgroup": v1_cgroup("/"),
        "/proc/128/cmdline": gofer_cmdline(CID_A),
        "/proc/128/cgroup": v1_cgroup("%s/%s" % (pa, CID_A)),
        "/proc/129/cmdline": sandbox_cmdline(CID_A, HOST_RAM),
        "/proc/129/cgroup": v1_cgroup("%s/%s" % (pa, CID_A)),
        "/proc/201/cmdline": sandbox_cmdline(CID_B, 268435456),
        "/proc/201/cgroup": v1_cgroup("%s/%s" % (pb, CID_B)),
        "/proc/self/mountinfo": "",
    }
    files.update(extra or {})
    return files


def test_v1_limit_on_pod_cgroup_unlimited_leaf(make_tree):
    root = make_tree(v1_node())
    sbs = gvisor_sandboxes.scan_sandboxes(root)
    assert [s["container_id"] for s in sbs] == [CID_A, CID_B]
    a, b = sbs
    assert a["pid"] == 129 and a["total_memory"] == HOST_RAM
    assert a["memory_limit"] == 268435456 and a["leaf_limit"] is None
    assert a["limited_by"] == "/kubepods/burstable/pod%s" % POD_A
    assert a["oversized"] is True and a["excess_bytes"] == HOST_RAM - 268435456
    assert a["pod_uid"] == POD_A and a["in_kubepods"] and not a["outside_pod_slice"]
    assert b["oversized"] is False and b["excess_bytes"] == 0 and b["memory_limit"] == 268435456


def test_container_view_strips_mount_root(make_tree):
    """Privileged podman container on v1: /proc shows host paths, /sys/fs/cgroup/memory is the container's subtree."""
    libpod = "/libpod_parent/libpod-" + "c" * 64
    mountinfo = ("240 236 0:32 %s /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
                 "237 236 0:29 %s /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu\n"
                 "250 236 0:40 / /sys/fs/cgroup/hugetlb rw - cgroup cgroup rw,hugetlb\n" % (libpod, libpod))
    files = v1_node({"/proc/self/mountinfo": mountinfo,
                     "/proc/129/cgroup": v1_cgroup("%s/kubepods/burstable/pod%s/%s" % (libpod, POD_A, CID_A))})
    root = make_tree(files)
    assert core_cgroup.mount_roots(root) == {"memory": libpod, "cpu": libpod, "hugetlb": "/"}
    a = gvisor_sandboxes.scan_sandboxes(root)[0]
    assert a["cgroup_local"] == "/kubepods/burstable/pod%s/%s" % (POD_A, CID_A)
    assert a["memory_limit"] == 268435456 and a["oversized"] is True and a["pod_uid"] == POD_A


def test_container_view_v2_strips_mount_root_of_a_static_pod(make_tree):
    """v2 seen from a podman container: the cgroup2 mount root is stripped; a static pod's UID is named."""
    libpod = "/libpod_parent/libpod-" + "d" * 64
    pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice" % STATIC
    leaf = pod + "/cri-containerd-%s.scope" % CID_A
    root = make_tree({
        "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
        "/proc/self/mountinfo": "30 24 0:26 %s /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n" % libpod,
        "/proc/7/cmdline": sandbox_cmdline(CID_A, HOST_RAM, root="/run/containerd/runsc/k8s.io"),
        "/proc/7/cgroup": v2_cgroup(libpod + leaf),
        "/sys/fs/cgroup%s/memory.max" % pod: "268435456\n",
        "/sys/fs/cgroup%s/memory.max" % leaf: "max\n",
    })
    (sb,) = gvisor_sandboxes.scan_sandboxes(root)
    assert sb["cgroup"] == libpod + leaf and sb["cgroup_local"] == leaf and sb["cgroup_found"]
    assert sb["memory_limit"] == 268435456 and sb["limited_by"] == pod and sb["oversized"] is True
    assert (sb["pod_uid"], sb["qos"], sb["in_kubepods"], sb["outside_pod_slice"]) == (STATIC, "burstable", True, False)


def v2_node(sandboxes, files=None):
    tree = {"/sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n", "/proc/self/mountinfo":
            "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
            "/proc/1/cmdline": "/sbin/init\0", "/proc/1/cgroup": v2_cgroup("/init.scope")}
    for pid, (cid, total, path, root_dir) in sandboxes.items():
        tree["/proc/%d/cmdline" % pid] = sandbox_cmdline(cid, total, root=root_dir)
        tree["/proc/%d/cgroup" % pid] = v2_cgroup(path)
    tree.update(files or {})
    return tree


def systemd_pod_path(uid, cid, qos="burstable"):
    return ("/kubepods.slice/kubepods-%s.slice/kubepods-%s-pod%s.slice/cri-containerd-%s.scope"
            % (qos, qos, uid.replace("-", "_"), cid))


def test_v2_systemd_slice_limit_on_pod_max_on_leaf(make_tree):
    path = systemd_pod_path(POD_A, CID_A)
    pod_slice = path.rsplit("/", 1)[0]
    root = make_tree(v2_node({4242: (CID_A, 16 * 1024 * MIB, path, "/run/containerd/runsc/k8s.io")}, {
        "/sys/fs/cgroup/kubepods.slice/memory.max": "max\n",
        "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/memory.max": "max\n",
        "/sys/fs/cgroup%s/memory.max" % pod_slice: "536870912\n",
        "/sys/fs/cgroup%s/memory.max" % path: "max\n",
    }))
    (sb,) = gvisor_sandboxes.scan_sandboxes(root)
    assert sb["memory_limit"] == 536870912 and sb["limited_by"] == pod_slice and sb["leaf_limit"] is None
    assert sb["oversized"] and sb["excess_bytes"] == 16 * 1024 * MIB - 536870912
    assert sb["in_kubepods"] and sb["kubernetes"] and not sb["outside_pod_slice"]


def test_v2_sandbox_in_system_slice_is_outside(make_tree):
    path = "/system.slice/cri-containerd-%s.scope" % CID_A
    root = make_tree(v2_node({77: (CID_A, HOST_RAM, path, "/run/containerd/runsc/k8s.io")},
                             {"/sys/fs/cgroup%s/memory.max" % path: "max\n"}))
    (sb,) = gvisor_sandboxes.scan_sandboxes(root)
    assert sb["outside_pod_slice"] is True and sb["oversized"] is False and sb["memory_limit"] is None


def test_literal_systemd_path_is_outside_with_pod(make_tree):
    """What runsc does with a systemd cgroupsPath when it cannot use systemd (measured on v1)."""
    path = "/kubepods-burstable-pod%s.slice:cri-containerd:%s" % (POD_B.replace("-", "_"), CID_B)
    root = make_tree(v1_node({"/proc/201/cgroup": v1_cgroup(path), "/proc/201/cmdline": sandbox_cmdline(
        CID_B, HOST_RAM, root="/run/containerd/runsc/k8s.io"),
        "/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % path: V1_UNLIMITED}))
    b = [s for s in gvisor_sandboxes.scan_sandboxes(root) if s["container_id"] == CID_B][0]
    assert b["outside_pod_slice"] is True and b["pod_uid"] == POD_B and b["in_kubepods"] is False


def test_docker_sandbox_outside_kubepods_is_not_kubernetes(make_tree):
    path = "/system.slice/docker-%s.scope" % CID_A
    root = make_tree(v2_node({9: (CID_A, HOST_RAM, path, "/var/run/docker/runtime-runc/moby")}))
    (sb,) = gvisor_sandboxes.scan_sandboxes(root)
    assert sb["kubernetes"] is False and sb["outside_pod_slice"] is False


def test_one_pass_reads_cgroup_only_for_sandboxes(make_tree, monkeypatch):
    files = v1_node()
    for pid in range(1000, 1300):
        files["/proc/%d/cmdline" % pid] = "/usr/bin/sleep\0" + "1000\0"
        files["/proc/%d/cgroup" % pid] = v1_cgroup("/")
    root = make_tree(files)
    reads = []
    real = core_paths.read_text

    def counting(path, default=None):
        reads.append(path)
        return real(path, default)

    monkeypatch.setattr(gvisor_sandboxes, "read_text", counting)
    real_pid_file = core_procfs._read    # each process's cmdline, read through one descriptor of /proc

    def counting_pid_file(name, dir_fd):
        reads.append(name)
        return real_pid_file(name, dir_fd)

    monkeypatch.setattr(core_procfs, "_read", counting_pid_file)
    sbs = gvisor_sandboxes.scan_sandboxes(root)
    assert len(sbs) == 2
    cmdlines = [p for p in reads if p.endswith("/cmdline")]
    cgroups = [p for p in reads if p.endswith("/cgroup")]
    assert len(cmdlines) == 304 and len(set(cmdlines)) == 304
    assert sorted(p.split("/")[-2] for p in cgroups) == ["129", "201"]


def test_total_host_memory_and_equals_form():
    argv = ["runsc", "--root=/r", "--systemd-cgroup=true", "boot", "--total-memory=1024", "--total-host-memory=4096",
            "--bundle=/b", CID_A]
    sb = gvisor_sandboxes.sandbox_from_cmdline(argv)
    assert (sb["total_memory"], sb["total_host_memory"], sb["systemd_cgroup"], sb["container_id"]) == (
        1024, 4096, True, CID_A)
    assert gvisor_sandboxes.sandbox_from_cmdline(["runsc-gofer", "gofer", "--bundle", "/b"]) is None
    assert gvisor_sandboxes.sandbox_from_cmdline(["/usr/bin/python3", "boot"]) is None


# ------------------------------------------------------------------ check(): findings

def ids(facts):
    return sorted((f["id"], f["subject"]) for f in facts["findings"])


def test_check_lab_node_findings(make_tree):
    """The lab's broken node: old Debian runsc, systemd driver, no ConfigPath, one oversized sandbox."""
    files = v1_node({"/etc/containerd/config.toml": CTD_V2})
    root = make_tree(files)
    runner = FakeRunner({"runsc": "/usr/bin/runsc"}, "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n")
    facts = gvisor_detect.check(runner, root=root)
    assert ids(facts) == sorted([
        ("gvisor.runsc_outdated", "/usr/bin/runsc"),
        ("gvisor.shim_missing", "runsc"),
        ("gvisor.no_config_path", "runsc"),
        ("gvisor.systemd_cgroup_needs_v2", "systemd"),
        ("gvisor.sandbox_oversized", CID_A),
    ])
    over = [f for f in facts["findings"] if f["id"] == "gvisor.sandbox_oversized"][0]
    assert over["evidence"]["total_memory"] == HOST_RAM
    assert over["evidence"]["memory_limit"] == 268435456 and over["evidence"]["memory_limit_mib"] == 256.0
    assert over["evidence"]["excess_bytes"] == HOST_RAM - 268435456
    assert over["severity"] == "critical" and over["fix"]["role"] == "nodefix.k8s.gvisor"
    assert facts["pods_to_recreate"] == [POD_A] and facts["oversized_sandboxes"] == [CID_A]
    assert facts["cgroup_driver"] == "systemd" and facts["runsc"]["has_9580_fix"] is False
    assert runner.calls == [["/usr/bin/runsc", "--version"]]


def test_check_correct_v2_node_has_no_findings(make_tree):
    path = systemd_pod_path(POD_A, CID_A)
    pod_slice = path.rsplit("/", 1)[0]
    files = v2_node({4242: (CID_A, 536870912, path, "/run/containerd/runsc/k8s.io")}, {
        "/sys/fs/cgroup%s/memory.max" % pod_slice: "536870912\n",
        "/sys/fs/cgroup%s/memory.max" % path: "max\n",
        "/etc/containerd/config.toml": CTD_V2_FIXED,
        "/etc/containerd/runsc.toml": '[runsc_config]\n  systemd-cgroup = "true"\n',
        "/var/lib/kubelet/config.yaml": "cgroupDriver: systemd\n",
    })
    root = make_tree(files)
    runner = FakeRunner({"runsc": "/usr/local/bin/runsc", gvisor_node_config.SHIM_NAME: "/usr/local/bin/" + gvisor_node_config.SHIM_NAME},
                        "runsc version release-20240603.0\nspec: 1.1.0\n")
    facts = gvisor_detect.check(runner, root=root)
    assert facts["findings"] == []
    assert facts["pods_to_recreate"] == [] and facts["sandboxes"][0]["oversized"] is False
    assert facts["shim_config"]["systemd_cgroup"] is True


def test_check_cgroupfs_node_with_systemd_flag_and_old_runsc(make_tree):
    files = {"/sys/fs/cgroup/cgroup.controllers": "memory\n", "/proc/self/mountinfo": "",
             "/etc/containerd/config.toml": CTD_V3,
             "/etc/containerd/gvisor.toml": '[runsc_config]\n  systemd-cgroup = "true"\n'}
    root = make_tree(files)
    runner = FakeRunner({"runsc": "/usr/bin/runsc", gvisor_node_config.SHIM_NAME: "/usr/bin/" + gvisor_node_config.SHIM_NAME},
                        "runsc version release-20201216.0-72-gbf343394d498\nspec: 1.0.2\n")
    facts = gvisor_detect.check(runner, root=root)
    assert ids(facts) == sorted([
        ("gvisor.runsc_outdated", "/usr/bin/runsc"),
        ("gvisor.systemd_cgroup_on_cgroupfs", "/etc/containerd/gvisor.toml"),
        ("gvisor.systemd_cgroup_unsupported", "/etc/containerd/gvisor.toml"),
    ])


def test_check_config_invalid_and_missing(make_tree):
    base = {"/sys/fs/cgroup/cgroup.controllers": "memory\n", "/proc/self/mountinfo": "",
            "/var/lib/kubelet/config.yaml": "cgroupDriver: systemd\n",
            "/etc/containerd/config.toml": CTD_V2_FIXED}
    runner = FakeRunner({"runsc": "/usr/bin/runsc", gvisor_node_config.SHIM_NAME: "/x/" + gvisor_node_config.SHIM_NAME},
                        "runsc version release-20240603.0\n")
    missing = gvisor_detect.check(runner, root=make_tree(base))
    assert ids(missing) == [("gvisor.config_missing", "/etc/containerd/runsc.toml")]
    base["/etc/containerd/runsc.toml"] = "[runsc_config]\n  systemd-cgroup = true\n"
    invalid = gvisor_detect.check(runner, root=make_tree(base))
    assert ids(invalid) == [("gvisor.config_invalid", "/etc/containerd/runsc.toml")]
    base["/etc/containerd/runsc.toml"] = '[runsc_config]\n  debug = "true"\n'
    nosd = gvisor_detect.check(runner, root=make_tree(base))
    assert ids(nosd) == [("gvisor.systemd_cgroup_missing", "/etc/containerd/runsc.toml")]


def test_check_node_without_gvisor_is_quiet(make_tree):
    root = make_tree({"/sys/fs/cgroup/cgroup.controllers": "memory\n", "/proc/1/cmdline": "/sbin/init\0",
                      "/var/lib/kubelet/config.yaml": "cgroupDriver: systemd\n"})
    facts = gvisor_detect.check(FakeRunner(), root=root)
    assert facts["findings"] == [] and facts["uses_gvisor"] is False


def test_registry_entries_are_well_formed():
    for fid, entry in gvisor_detect.FINDINGS.items():
        assert fid.startswith("gvisor.") and fid == fid.lower()
        assert entry["severity"] in core_findings.SEVERITIES
        assert entry["title"] and entry["remedy"] and entry["role"] == "nodefix.k8s.gvisor" and entry["tag"]


# ------------------------------------------------------------------ the plan: the finding's remedy as parameters

def test_plan_of_the_lab_node(make_tree):
    """Old runsc, systemd driver (runc SystemdCgroup), runsc registered without ConfigPath: upgrade, write
    systemd-cgroup into the default shim config, register it (containerd restart), recreate the pod."""
    runner = FakeRunner({"runsc": "/usr/bin/runsc"}, "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n")
    p = gvisor_detect.check(runner, root=make_tree(v1_node({"/etc/containerd/config.toml": CTD_V2})))["plan"]
    assert p["active"] is True
    assert p["runsc"] == {"action": "upgrade", "version": "0.0~20221219.0", "path": "/usr/bin/runsc",
                          "minimum": gvisor_version.FIXED_RELEASE,
                          "reason": "runsc 0.0~20221219.0 is older than 20231106.0 (google/gvisor#9580)"}
    assert p["shim_config"]["path"] == gvisor_node_config.DEFAULT_SHIM_CONFIG and p["shim_config"]["systemd_cgroup"] is True
    assert p["shim_config"]["supported_now"] is True and p["shim_config"]["needs_upgrade_first"] is False
    assert p["shim_config"]["cgroup_v1"] is True and "systemd cgroup driver" in p["shim_config"]["reason"]
    assert p["containerd"]["register"] is True and p["containerd"]["restart_needed"] is True
    assert p["containerd"]["entry"] == {"runtime_type": "io.containerd.runsc.v1", "options": {
        "TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"}}
    assert p["recreate"] == {"pods": [POD_A], "sandboxes": [CID_A]}
    assert p["planned_for"]["runtime_name"] == "runsc" and p["planned_for"]["systemd_cgroup"] == "auto"


def test_plan_of_a_fixed_node_changes_nothing(make_tree):
    path = systemd_pod_path(POD_A, CID_A)
    files = v2_node({4242: (CID_A, 536870912, path, "/run/containerd/runsc/k8s.io")}, {
        "/sys/fs/cgroup%s/memory.max" % path.rsplit("/", 1)[0]: "536870912\n",
        "/sys/fs/cgroup%s/memory.max" % path: "max\n",
        "/etc/containerd/config.toml": CTD_V2_FIXED,
        "/etc/containerd/runsc.toml": '[runsc_config]\n  systemd-cgroup = "true"\n'})
    runner = FakeRunner({"runsc": "/usr/local/bin/runsc", gvisor_node_config.SHIM_NAME: "/usr/local/bin/" + gvisor_node_config.SHIM_NAME},
                        "runsc version release-20240603.0\nspec: 1.1.0\n")
    p = gvisor_detect.check(runner, root=make_tree(files))["plan"]
    assert p["runsc"]["action"] == "none" and p["containerd"]["register"] is False
    assert p["shim_config"]["systemd_cgroup"] is True and p["shim_config"]["cgroup_v1"] is False
    assert p["recreate"] == {"pods": [], "sandboxes": []}


def test_plan_keeps_the_registered_config_path_and_removes_the_flag_on_cgroupfs(make_tree):
    files = {"/sys/fs/cgroup/cgroup.controllers": "memory\n", "/proc/self/mountinfo": "",
             "/etc/containerd/config.toml": CTD_V3,
             "/etc/containerd/gvisor.toml": '[runsc_config]\n  systemd-cgroup = "true"\n'}
    runner = FakeRunner({"runsc": "/usr/bin/runsc", gvisor_node_config.SHIM_NAME: "/usr/bin/" + gvisor_node_config.SHIM_NAME},
                        "runsc version release-20201216.0-72-gbf343394d498\nspec: 1.0.2\n")
    facts = gvisor_detect.check(runner, root=make_tree(files), runtime_name="gvisor")
    p = facts["plan"]
    assert p["shim_config"]["path"] == "/etc/containerd/gvisor.toml"
    assert p["shim_config"]["systemd_cgroup"] is False and "cgroupfs" in p["shim_config"]["reason"]
    # registered with the right TypeUrl and ConfigPath already: no containerd restart
    assert p["containerd"]["register"] is False
    # under another runtime name it is not registered yet
    other = gvisor_detect.check(runner, root=make_tree(files))["plan"]
    assert other["containerd"]["register"] is True and other["containerd"]["runtime"] == "runsc"


def test_plan_old_runsc_on_systemd_needs_the_upgrade_first_and_never_wins(make_tree):
    files = v1_node({"/etc/containerd/config.toml": CTD_V2})
    runner = FakeRunner({"runsc": "/usr/bin/runsc"}, "runsc version release-20201216.0\n")
    p = gvisor_detect.check(runner, root=make_tree(files))["plan"]
    assert p["shim_config"]["systemd_cgroup"] is True and p["shim_config"]["needs_upgrade_first"] is True
    never = gvisor_detect.check(runner, root=make_tree(files), systemd_cgroup="never")["plan"]
    assert never["shim_config"]["systemd_cgroup"] is False and never["shim_config"]["needs_upgrade_first"] is False
    assert never["shim_config"]["reason"].startswith("systemd_cgroup=never")


def test_plan_without_runsc_is_an_install(make_tree):
    root = make_tree({"/sys/fs/cgroup/cgroup.controllers": "memory\n", "/proc/self/mountinfo": "",
                      "/etc/containerd/config.toml": CTD_V2})
    p = gvisor_detect.check(FakeRunner(), root=root)["plan"]
    assert p["runsc"]["action"] == "install" and p["active"] is True  # the runsc runtime is registered
