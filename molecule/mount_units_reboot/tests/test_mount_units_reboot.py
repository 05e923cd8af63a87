# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for mount_units_reboot: the node was really rebooted instead of cleaned unit by unit,
no kubelet unit of a dead pod is left, and the kubelet test double is active again."""

import json

STATE = "/var/lib/nodefix-lab/mount_units"


def test_the_node_was_rebooted(host):
    before = host.file("/var/lib/nodefix-lab/boot-before").content_string.strip()
    now = host.check_output("cut -d' ' -f22 /proc/1/stat").strip()
    assert before and now != before
    # /run is a fresh tmpfs after a boot
    assert not host.file("/run/nodefix-lab-boot-marker").exists


def test_no_leaked_kubelet_unit_is_left(host):
    expect = json.loads(host.file(STATE + "/expect.json").content_string)
    assert expect["dead"], "the breaker created no dead units"
    out = host.check_output("systemctl list-units --all --plain --no-legend --full")
    loaded = set(line.split()[0] for line in out.splitlines() if line.strip())
    assert not loaded & set(expect["dead"])
    assert "Kubernetes transient mount for" not in out


def test_kubelet_double_is_active(host):
    assert host.check_output("systemctl is-active kubelet") == "active"
    assert host.service("kubelet").is_enabled
