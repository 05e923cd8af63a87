# SPDX-License-Identifier: GPL-3.0-or-later
"""The byte-for-byte check the kubelet molecule scenarios run (molecule/shared/untouched.py)
must pass a clean edit of the real layout files and catch every kind of collateral edit."""

import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_spec = importlib.util.spec_from_file_location("untouched", os.path.join(ROOT, "molecule", "shared", "untouched.py"))
untouched = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(untouched)

KUBEADM_CFG = untouched.layout_file("kubeadm", "/var/lib/kubelet/config.yaml")
KUBESPRAY_CFG = untouched.layout_file("kubespray", "/etc/kubernetes/kubelet-config.yaml")
KUBEADM_ENV = untouched.layout_file("kubeadm", "/etc/default/kubelet")
KUBESPRAY_ENV = untouched.layout_file("kubespray", "/etc/kubernetes/kubelet.env")


def test_a_clean_yaml_edit_passes():
    after = KUBEADM_CFG.replace("kubeAPIQPS: 5  # see KUB-112", "kubeAPIQPS: 50 # see KUB-112")
    after += "kubeAPIBurst: 100\nevictionHard:\n  memory.available: 500Mi\n  nodefs.available: 10%\n"
    assert after != KUBEADM_CFG
    assert untouched.yaml_problems(KUBEADM_CFG, after) == []
    assert untouched.yaml_problems(KUBESPRAY_CFG, KUBESPRAY_CFG.replace("podPidsLimit: -1", "podPidsLimit: 4096")) == []


@pytest.mark.parametrize("old,new", [
    ("failSwapOn: True", "failSwapOn: true"),                       # a boolean respelled
    ('nodeStatusUpdateFrequency: "10s"', "nodeStatusUpdateFrequency: 10s"),  # quoting dropped
    ("clusterDNS:\n  - 169.254.25.10", "clusterDNS:\n- 169.254.25.10"),   # sequence re-indented
    ("maxPods: 110\n", "maxPods: 110\n\n"),                          # a blank line added
    ("kind: KubeletConfiguration\n", ""),                                # another key dropped
])
def test_collateral_yaml_edits_are_caught(old, new):
    after = KUBESPRAY_CFG.replace(old, new)
    assert after != KUBESPRAY_CFG
    assert untouched.yaml_problems(KUBESPRAY_CFG, after), (old, new)


def test_an_owned_key_may_go():
    # a key the role owns may be removed (or moved into a drop-in): its own business
    after = KUBESPRAY_CFG.replace("eventRecordQPS: 5\n", "")
    assert untouched.yaml_problems(KUBESPRAY_CFG, after) == []


def test_a_lost_comment_is_caught():
    after = KUBEADM_CFG.replace("# Lowered during the 2019 API server incident; nobody raised it again.\n", "")
    assert untouched.yaml_problems(KUBEADM_CFG, after)


def test_clean_env_edits_pass():
    assert untouched.env_problems(KUBEADM_ENV, 'KUBELET_EXTRA_ARGS=""\n') == []
    after = KUBESPRAY_ENV.replace("--kube-api-qps=5 --kube-api-burst=10 \\\n--serialize-image-pulls=true \\\n", "")
    assert after != KUBESPRAY_ENV
    assert untouched.env_problems(KUBESPRAY_ENV, after) == []


@pytest.mark.parametrize("old,new", [
    ("--kube-api-qps=5 --kube-api-burst=10 \\\n", "\\\n"),                  # a stray continuation line
    ("--kube-api-qps=5 --kube-api-burst=10 \\\n", " \\\n"),
    ("--runtime-cgroups=/system.slice/containerd.service \\\n--kube-api-qps=5 --kube-api-burst=10 \\\n", ""),
    ("--serialize-image-pulls=true \\\n", "--serialize-image-pulls=false \\\n"),  # rewritten, not removed
    ('KUBE_LOG_LEVEL="--v=2"', 'KUBE_LOG_LEVEL="--v=4"'),                  # a flag the role does not own
])
def test_collateral_env_edits_are_caught(old, new):
    after = KUBESPRAY_ENV.replace(old, new)
    assert after != KUBESPRAY_ENV
    assert untouched.env_problems(KUBESPRAY_ENV, after), (old, new)


@pytest.mark.parametrize("after", ['KUBELET_EXTRA_ARGS=" "\n', 'KUBELET_EXTRA_ARGS="--event-qps=5 "\n',
                                   'KUBELET_EXTRA_ARGS="--v=2"\n'])
def test_kubeadm_env_leftovers_are_caught(after):
    assert untouched.env_problems(KUBEADM_ENV, after), after
