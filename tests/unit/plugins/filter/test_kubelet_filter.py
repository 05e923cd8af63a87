# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kubelet_configmap: the kubeadm ConfigMap edit (never lowering, untouched entries kept)."""

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.filter.kubelet import kubelet_configmap
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml as kubelet_config_yaml

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "..", "..", "..", "lab", "kubelet-double", "layouts", "kubeadm", "var", "lib",
                       "kubelet", "config.yaml")) as fh:
    KUBEADM = fh.read()


def test_sets_the_targets_and_keeps_every_other_line():
    out = kubelet_configmap(KUBEADM, {"kubeAPIQPS": 50, "kubeAPIBurst": 100, "serializeImagePulls": False})
    assert out["changed"] and sorted(out["fields"]) == ["kubeAPIBurst", "kubeAPIQPS", "serializeImagePulls"]
    assert out["fields"]["kubeAPIQPS"] == {"before": 5, "after": 50}
    data = kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out["text"], "cm"))
    assert (data["kubeAPIQPS"], data["kubeAPIBurst"], data["serializeImagePulls"]) == (50, 100, False)
    untouched = [line for line in KUBEADM.splitlines() if not line.startswith("kubeAPIQPS:")]
    assert [line for line in out["text"].splitlines()[:len(untouched) + 1] if not line.startswith("kubeAPIQPS:")] == untouched


def test_never_lowers_and_is_idempotent():
    first = kubelet_configmap(KUBEADM, {"kubeAPIQPS": 80})
    again = kubelet_configmap(first["text"], {"kubeAPIQPS": 50})
    assert again == {"changed": False, "text": first["text"], "fields": {}}
    lower = kubelet_configmap(first["text"], {"kubeAPIQPS": 50}, True)
    assert lower["fields"]["kubeAPIQPS"] == {"before": 80, "after": 50}


@pytest.mark.parametrize("text,targets,needle", [
    ("apiVersion: v1\nkind: Pod\n", {"kubeAPIQPS": 50}, "expected KubeletConfiguration"),
    (KUBEADM, {"kubeApiQPS": 50}, "not a setting this collection manages"),
    (KUBEADM, ["kubeAPIQPS"], "targets must be a dict"),
    ("kubeAPIQPS: [", {"kubeAPIQPS": 50}, "kubelet-config ConfigMap"),
])
def test_bad_input_is_a_clear_error(text, targets, needle):
    with pytest.raises(AnsibleFilterError) as exc:
        kubelet_configmap(text, targets)
    assert needle in str(exc.value)
