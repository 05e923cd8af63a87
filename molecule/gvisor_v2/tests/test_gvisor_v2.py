# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for the gvisor_v2 scenario, read on the cgroup v2 VM itself:
the upgraded runsc, the shim config and, from /proc, the recreated sandboxes'
argv and cgroups (sized to the 256 MiB pod slice, inside it)."""

import base64

testinfra_hosts = ["nodefix-gvisor-v2"]

POD_LIMIT = 268435456
PODS = {
    "7b2f1d3e-6e2c-4d2f-8b8e-00000000e005": "1e1e51ed" * 8,
    "7b2f1d3e-6e2c-4d2f-8b8e-00000000f006": "1f1f51ed" * 8,
}
OLD_IDS = ["0e0e51ed" * 8, "0f0f51ed" * 8]


def sandboxes(host):
    """{container id: (argv, cgroup)} of every runsc sandbox, from /proc."""
    out = host.check_output(
        "for p in $(pgrep -f '^runsc-sandbox '); do "
        "echo $(base64 -w0 /proc/$p/cmdline) $(sed -n 's/^0:://p' /proc/$p/cgroup); done")
    found = {}
    for line in out.splitlines():
        raw, cgroup = line.split()
        argv = [a for a in base64.b64decode(raw).decode().split("\0") if a]
        found[argv[-1]] = (argv, cgroup)
    return found


def test_runsc_is_the_fixed_build(host):
    assert host.check_output("runsc --version").splitlines()[0] == "runsc version 0.0~20240729.0"


def test_shim_config_tells_runsc_the_driver(host):
    assert 'systemd-cgroup = "true"' in host.file("/etc/containerd/runsc.toml").content_string
    config = host.file("/etc/containerd/config.toml").content_string
    assert 'ConfigPath = "/etc/containerd/runsc.toml"' in config
    assert host.service("containerd").is_running


def test_recreated_sandboxes_fit_their_pod_slice(host):
    live = sandboxes(host)
    assert sorted(live) == sorted(PODS.values()), sorted(live)
    for uid, cid in PODS.items():
        argv, cgroup = live[cid]
        pod_slice = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice"
                     % uid.replace("-", "_"))
        assert "--total-memory=%d" % POD_LIMIT in argv, argv
        assert "--systemd-cgroup=true" in argv, argv
        assert cgroup == "%s/cri-containerd-%s.scope" % (pod_slice, cid)
        assert host.file("/sys/fs/cgroup%s/memory.max" % pod_slice).content_string.strip() == str(POD_LIMIT)


def test_old_sandboxes_are_gone(host):
    assert not set(OLD_IDS) & set(sandboxes(host))
