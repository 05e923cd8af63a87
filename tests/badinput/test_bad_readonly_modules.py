# SPDX-License-Identifier: GPL-3.0-or-later
"""Read-only modules on corrupt nodes: a garbage, empty, non-UTF-8, missing or looping file never
crashes a detector (no traceback), and nothing under the node root changes.

One realistic fake node (processes with a runsc sandbox and zombies, cgroup v2 files, containerd and
runsc configs, the kubeadm kubelet layout) is corrupted one file at a time. ``node_audit`` runs every
detector; a detector may report the file as a clear ``audit.check_failed`` finding, but one that died
on an unexpected exception carries a traceback in its evidence, and that fails the case.
"""

import os
import shutil

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import kernel_info, node_audit, pids_info
from ansible_collections.nodefix.k8s.tests.badinput.conftest import snapshot
from ansible_collections.nodefix.k8s.tests.unit.plugins.module_utils.test_pids import (
    V2_POD_CGROUP, fake_proc, zombies)

HERE = os.path.dirname(os.path.abspath(__file__))
LAYOUTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lab", "kubelet-double", "layouts")
SANDBOX = ["runsc", "--root=/run/containerd/runsc/k8s.io", "--systemd-cgroup", "--total-memory", "2060419072",
           "boot", "--bundle=/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc", "abc"]

EXTRA = {
    "/proc/sys/kernel/osrelease": "6.1.0-27-amd64\n",
    "/proc/self/mountinfo": "25 1 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
    "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
    "/sys/fs/cgroup/cgroup.stat": "nr_descendants 3\nnr_dying_descendants 12\n",
    "/sys/fs/cgroup/kubepods.slice/memory.max": "max\n",
    "/etc/containerd/config.toml": 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]\n'
                                   '  runtime_type = "io.containerd.runsc.v1"\n',
    "/etc/containerd/runsc.toml": '[runsc_config]\n  platform = "systrap"\n',
}

CORRUPTED = [
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/pid_max",
    "/proc/sys/kernel/threads-max",
    "/proc/stat",
    "/proc/uptime",
    "/proc/self/mountinfo",
    "/proc/2841/stat",
    "/proc/2841/cmdline",
    "/proc/2841/cgroup",
    "/proc/2841/status",
    "/proc/3000/stat",
    "/sys/fs/cgroup/cgroup.stat",
    "/sys/fs/cgroup/cgroup.controllers",
    "/etc/containerd/config.toml",
    "/etc/containerd/runsc.toml",
    "/var/lib/kubelet/config.yaml",
    "/etc/default/kubelet",
]
KINDS = {
    "empty": b"",
    "garbage": b"\x00\xff\xfe garbage \x00 99999999999999999999999999 -1 \xc3\x28\n",
    "huge-number": b"184467440737095516160000\n",
    "text": b"not what you expected: [ { ( \" ' \\\n",
}


def node_tree(make_tree):
    procs = [{"pid": 2841, "comm": "runsc-sandbox", "cmdline": SANDBOX, "cgroup": V2_POD_CGROUP, "nspid": 1}]
    procs += zombies(2841, 3000, 5, start=100)
    root = fake_proc(make_tree, procs, pid_max=32768, extra=EXTRA)
    shutil.copytree(os.path.join(LAYOUTS, "kubeadm"), root, symlinks=True, dirs_exist_ok=True)
    return root


def corrupt(root, rel, kind):
    path = os.path.join(root, rel.lstrip("/"))
    if os.path.lexists(path):
        os.remove(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "directory":
        os.mkdir(path)
    elif kind == "dangling-link":
        os.symlink("/nonexistent/nodefix-%s" % os.path.basename(rel), path)
    elif kind == "loop":
        os.symlink(os.path.basename(path), path)
    elif kind != "missing":
        with open(path, "wb") as fh:
            fh.write(KINDS[kind])


def no_traceback(result):
    for f in result.get("findings") or []:
        if f["id"] == "audit.check_failed":
            assert "traceback" not in f["evidence"], "%s crashed: %s" % (f.get("subject"), f["evidence"])


def test_the_healthy_tree_audits_without_a_failed_check(run_module, make_tree):
    root = node_tree(make_tree)
    result, failed, _t = run_module(node_audit, {"root": root}, bins={})
    assert not failed
    assert [f for f in result["findings"] if f["id"] == "audit.check_failed"] == []


@pytest.mark.parametrize("kind", sorted(KINDS) + ["directory", "dangling-link", "loop", "missing"])
@pytest.mark.parametrize("rel", CORRUPTED)
def test_node_audit_survives_a_corrupt_file(run_module, make_tree, rel, kind):
    root = node_tree(make_tree)
    corrupt(root, rel, kind)
    before = snapshot(root)
    result, failed, _t = run_module(node_audit, {"root": root}, bins={})
    if failed:
        assert "Traceback" not in result["msg"]
    else:
        no_traceback(result)
    assert snapshot(root) == before


@pytest.mark.parametrize("module,args", [
    (pids_info, {"zombie_threshold": "many"}),
    (pids_info, {"pid_max_min": -5}),
    (kernel_info, {"release": "6.1; rm -rf /"}),
    (kernel_info, {"memory_stat_slow_ms": "slow"}),
    (node_audit, {"checks": ["kernel", "no_such_check"]}),
    (node_audit, {"options": {"pids": "zombie_threshold=5"}}),
])
def test_bad_options_fail_clearly(run_module, make_tree, module, args):
    root = node_tree(make_tree)
    before = snapshot(root)
    result, failed, _t = run_module(module, dict(args, root=root), bins={})
    assert failed, result
    assert "Traceback" not in result["msg"] and result["msg"]
    assert snapshot(root) == before
