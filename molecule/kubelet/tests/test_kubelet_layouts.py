# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for the kubelet scenario's kubespray node (1.26) and --config-dir node (1.31), both with guard rails."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
import floor  # noqa: E402  pylint: disable=wrong-import-position
import untouched  # noqa: E402  pylint: disable=wrong-import-position

# the nodes these checks are about (conftest.py runs them on them alone)
NODES = ("nodefix-kubelet-kubespray", "nodefix-kubelet-configdir")


def configz(host):
    out = host.check_output("python3 -c \"import urllib.request as u; "
                            "print(u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:10248/configz').read().decode())\"")
    return json.loads(out)["kubeletconfig"]


def kind(host):
    return "kubespray" if "kubespray" in host.backend.hostname else "configdir"


def test_kubelet_active(host):
    assert host.check_output("systemctl is-active kubelet") == "active"


def test_guard_rails_in_effect(host):
    kc = configz(host)
    assert kc["podPidsLimit"] == 4096
    assert kc["evictionHard"] == {"memory.available": "500Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
                                  "imagefs.available": "15%"}
    assert kc["systemReserved"] == {"memory": "512Mi"}


def test_rate_limits(host):
    kc = configz(host)
    rates = ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst", "registryPullQPS", "registryBurst")
    if kind(host) == "kubespray":
        # 1.26: the floor is above the old defaults (5/10) and is written as is
        want = floor.expected((1, 26))
        assert want == floor.rate_limit_floor()
        # no bound for parallel pulls before 1.27: pulls stay serial
        assert kc["serializeImagePulls"] is True and "maxParallelImagePulls" not in kc
    else:
        # 1.31: the 1.27+ defaults where they are above the floor
        want = floor.expected((1, 31))
        assert kc["serializeImagePulls"] is False and kc["maxParallelImagePulls"] == 5
    assert dict((f, kc[f]) for f in rates) == want


@pytest.mark.nodes("nodefix-kubelet-kubespray")
def test_kubespray_files(host):
    env = host.file("/etc/kubernetes/kubelet.env").content_string
    assert "--kube-api-qps" not in env and "--kube-api-burst" not in env
    assert "--config=/etc/kubernetes/kubelet-config.yaml \\\n" in env
    cfg = host.file("/etc/kubernetes/kubelet-config.yaml").content_string
    assert "kubeReserved:\n  cpu: 200m\n  memory: 512Mi\n" in cfg
    assert "clusterDNS:\n  - 169.254.25.10\n" in cfg


@pytest.mark.nodes("nodefix-kubelet-configdir")
def test_configdir_dropin_owned_by_the_collection(host):
    dropin = host.file("/etc/kubernetes/kubelet.conf.d/99-nodefix-k8s.conf")
    assert dropin.exists
    assert dropin.content_string.startswith("# Managed by the nodefix.k8s collection")
    # the kubeadm-managed file keeps its own (overridden) value: kubeadm upgrade may rewrite it freely
    assert "kubeAPIQPS: 5  # see KUB-112" in host.file("/var/lib/kubelet/config.yaml").content_string
    assert host.file("/etc/default/kubelet").content_string == 'KUBELET_EXTRA_ARGS=""\n'


def test_only_the_changed_settings_lines_differ(host):
    # every untouched line of the files the node had is byte-identical after the role's edits
    if kind(host) == "kubespray":
        cfg_path, env_path = "/etc/kubernetes/kubelet-config.yaml", "/etc/kubernetes/kubelet.env"
        cfg_before = untouched.layout_file("kubespray", cfg_path)
        cfg = host.file(cfg_path).content_string
        assert cfg != cfg_before
        assert untouched.yaml_problems(cfg_before, cfg) == []
        env = host.file(env_path).content_string
        assert env != untouched.layout_file("kubespray", env_path)
        assert untouched.env_problems(untouched.layout_file("kubespray", env_path), env) == []
    else:
        # the drop-in carries the settings: kubeadm's config.yaml is not touched at all
        cfg_path = "/var/lib/kubelet/config.yaml"
        assert host.file(cfg_path).content_string == untouched.layout_file("kubeadm", cfg_path)
        env = host.file("/etc/default/kubelet").content_string
        assert untouched.env_problems(untouched.layout_file("kubeadm", "/etc/default/kubelet"), env) == []
