# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for the kubeadm node of the kubelet scenario: profile in effect, stale flags gone, comments kept."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
import floor  # noqa: E402  pylint: disable=wrong-import-position
import untouched  # noqa: E402  pylint: disable=wrong-import-position

# the node these checks are about (conftest.py runs them on it alone)
NODES = ("nodefix-kubelet-kubeadm",)


def configz(host):
    out = host.check_output("python3 -c \"import urllib.request as u; "
                            "print(u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:10248/configz').read().decode())\"")
    return json.loads(out)["kubeletconfig"]


def test_kubelet_active_and_healthy(host):
    assert host.service("kubelet").is_running
    assert host.check_output("systemctl is-active kubelet") == "active"
    out = host.check_output("python3 -c \"import urllib.request as u; "
                            "print(u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:10248/healthz').read().decode())\"")
    assert out == "ok"


# the node's kubelet is 1.29 (kubelet_break_version in molecule.yml): the floor, or the 1.27+ default where higher
@pytest.mark.parametrize("field,value", sorted(floor.expected((1, 29)).items()) + [
    ("serializeImagePulls", False), ("maxParallelImagePulls", 5),
])
def test_effective_values_are_the_profile(host, field, value):
    assert configz(host)[field] == value


def test_stale_flags_are_gone(host):
    assert host.file("/etc/default/kubelet").content_string == 'KUBELET_EXTRA_ARGS=""\n'
    cmdline = host.check_output("cat /proc/$(systemctl show -p MainPID --value kubelet)/cmdline | tr '\\0' ' '")
    assert "--kube-api-qps" not in cmdline and "--event-qps" not in cmdline
    assert "--config=/var/lib/kubelet/config.yaml" in cmdline


def test_comments_and_untouched_keys_kept(host):
    cfg = host.file("/var/lib/kubelet/config.yaml").content_string
    assert cfg.startswith('# KubeletConfiguration written by "kubeadm join" from the kube-system/kubelet-config\n'
                          "# ConfigMap. Local changes below are ours (ops runbook KUB-112): keep this header.\n")
    assert "# Lowered during the 2019 API server incident; nobody raised it again.\nkubeAPIQPS: 50 # see KUB-112\n" in cfg
    assert "clusterDNS:\n- 10.96.0.10\n" in cfg
    assert "staticPodPath: /etc/kubernetes/manifests\n" in cfg


def test_backups_were_kept(host):
    backups = host.check_output("ls /var/lib/kubelet/ /etc/default/")
    assert "config.yaml." in backups and "kubelet." in backups


def test_only_the_changed_settings_lines_differ(host):
    # every line of the files kubeadm wrote that carries no setting the role owns is byte-identical
    cfg = host.file("/var/lib/kubelet/config.yaml").content_string
    before = untouched.layout_file("kubeadm", "/var/lib/kubelet/config.yaml")
    assert cfg != before
    assert untouched.yaml_problems(before, cfg) == []
    env = host.file("/etc/default/kubelet").content_string
    assert untouched.env_problems(untouched.layout_file("kubeadm", "/etc/default/kubelet"), env) == []
    # kubeadm's own flags file carries no owned flag: not touched at all
    flags = host.file("/var/lib/kubelet/kubeadm-flags.env").content_string
    assert flags == untouched.layout_file("kubeadm", "/var/lib/kubelet/kubeadm-flags.env")
