# SPDX-License-Identifier: GPL-3.0-or-later
"""containerd_info, runsc_info, kubelet_mount_units and cpu_quota_info with hostile options and files:
a clear failure or a clean report, never a traceback, and nothing under the node root changes.

No command is expected (``bins={}``: no containerd, runsc, crictl or systemctl on the fake node), so
every case is about the module's own parsing and validation.
"""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import (
    containerd_info,
    cpu_quota_info,
    kubelet_mount_units,
    runsc_info,
)
from ansible_collections.nodefix.k8s.tests.badinput.conftest import snapshot

FILES = {
    "/etc/containerd/config.toml": 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n',
    "/etc/containerd/runsc.toml": '[runsc_config]\n  platform = "systrap"\n',
    "/var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
    "/proc/self/mountinfo": "25 1 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
    "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
    # a kubelet whose --config is the binary file below
    "/etc/systemd/system/binary.service": "[Service]\nExecStart=/usr/bin/kubelet --config=/etc/containerd/binary.toml\n",
}

CASES = [
    (containerd_info, {"config_path": "{root}/etc/containerd/config.toml", "timeout": "5 parsecs"}),
    (containerd_info, {"minimum_version": "newest"}),
    (containerd_info, {"config_path": "{root}/etc/containerd"}),
    (containerd_info, {"config_path": "{root}/etc/containerd/nonexistent.toml"}),
    (containerd_info, {"config_path": "{root}/etc/containerd/binary.toml"}),
    (runsc_info, {"runsc_path": "{root}/etc"}),
    (runsc_info, {"runsc_path": "{root}/etc/containerd/runsc.toml"}),
    (runsc_info, {"containerd_config": "{root}/etc/containerd/binary.toml"}),
    (runsc_info, {"minimum_release": "tomorrow"}),
    (runsc_info, {"kubelet_unit": "../../../etc/passwd"}),
    (runsc_info, {"kubelet_unit": "binary.service"}),
    (runsc_info, {"kubelet_unit": ["kubelet.service", "x"]}),
    (kubelet_mount_units, {"state": "absent", "batch_size": 0}),
    (kubelet_mount_units, {"state": "absent", "batch_size": -5}),
    (kubelet_mount_units, {"state": "absent", "max_seconds": 0}),
    (kubelet_mount_units, {"state": "absent", "max_seconds": -3}),
    (kubelet_mount_units, {"state": "absent", "max_seconds": "an hour"}),
    (kubelet_mount_units, {"state": "absent", "reboot_over_seconds": -1}),
    (kubelet_mount_units, {"state": "absent", "reboot_over_seconds": "later"}),
    (kubelet_mount_units, {"state": "melted"}),
    (kubelet_mount_units, {"pod_source": "guess"}),
    (kubelet_mount_units, {"pod_source": "list", "live_pod_uids": ["not-a-uid", "../../etc"]}),
    (kubelet_mount_units, {"list_limit": -1}),
    (kubelet_mount_units, {"kubelet_root_dir": "relative/path"}),
    (kubelet_mount_units, {"runtime_endpoint": "tcp://10.0.0.1:1234"}),
    (cpu_quota_info, {"runc_binary": "{root}/etc/containerd/runsc.toml"}),
    (cpu_quota_info, {"runc_binary": "runc; rm -rf /"}),
]


IDS = ["%s-%d" % (m.__name__.rsplit(".", 1)[-1], i) for i, (m, _a) in enumerate(CASES)]


@pytest.mark.parametrize("module,args", CASES, ids=IDS)
def test_no_traceback_and_nothing_changes(run_module, make_tree, module, args):
    root = make_tree(FILES)
    with open(os.path.join(root, "etc/containerd/binary.toml"), "wb") as fh:
        fh.write(b"\xff\xfe\x00 not toml \x00")

    def fill(value):
        if isinstance(value, list):
            return [x.format(root=root) for x in value]
        return value.format(root=root) if isinstance(value, str) else value

    args = dict((k, fill(v)) for k, v in args.items())
    args["root"] = root
    before = snapshot(root)
    result, failed, _t = run_module(module, args, bins={})
    if failed:
        assert result["msg"] and "Traceback" not in result["msg"], result
    else:
        for f in result.get("findings") or []:
            assert "traceback" not in (f.get("evidence") or {}), f
    assert snapshot(root) == before
