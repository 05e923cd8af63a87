# SPDX-License-Identifier: GPL-3.0-or-later
"""Editing one KubeletConfiguration key leaves every other line byte for byte as it was."""

import difflib
import os

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml as kubelet_config_yaml
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema

HERE = os.path.dirname(os.path.abspath(__file__))
LAYOUTS = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", "lab", "kubelet-double", "layouts"))

QUIRKY = """# hand-edited over the years
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: True
cgroupDriver: "systemd"
clusterDNS:
- 10.96.0.10
evictionHard:
    memory.available:  "100Mi"   # aligned comment
rotateCertificates: yes
# Lowered during the 2019 incident
kubeAPIQPS: 5  # see KUB-112

staticPodPath: '/etc/kubernetes/manifests'
tlsCipherSuites: [TLS_A,  TLS_B]
# trailing comment
"""


def files():
    out = [("quirky", QUIRKY)]
    for layout, path in (("kubeadm", "var/lib/kubelet/config.yaml"), ("kubespray", "etc/kubernetes/kubelet-config.yaml")):
        with open(os.path.join(LAYOUTS, layout, path)) as fh:
            out.append((layout, fh.read()))
    return out


def changed_lines(before, after):
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.mark.parametrize("name,text", files(), ids=[n for n, _t in files()])
@pytest.mark.parametrize("field,value", [("kubeAPIQPS", 77), ("eventBurst", 123), ("serializeImagePulls", False),
                                         ("podPidsLimit", 4096)])
def test_one_key_changes_only_its_line(name, text, field, value):
    data = kubelet_config_yaml.load_yaml(text, name)
    data[field] = value
    out = kubelet_config_yaml.dump_yaml(data, text)
    assert kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out, name)) == kubelet_config_yaml.plain(data)
    diff = changed_lines(text, out)
    assert diff, "nothing changed"
    assert all(line[1:].lstrip().startswith(field + ":") for line in diff), "\n".join(diff)
    # every untouched line is still there, byte for byte, in order
    kept = [line for line in text.splitlines() if not line.lstrip().startswith(field + ":")]
    assert [line for line in out.splitlines() if not line.lstrip().startswith(field + ":")] == kept


def test_quirks_survive_an_edit_elsewhere():
    data = kubelet_config_yaml.load_yaml(QUIRKY, "q")
    data["kubeAPIQPS"] = 50
    out = kubelet_config_yaml.dump_yaml(data, QUIRKY)
    for line in ("failSwapOn: True", '    memory.available:  "100Mi"   # aligned comment',
                 "tlsCipherSuites: [TLS_A,  TLS_B]", "rotateCertificates: yes", "# trailing comment"):
        assert line in out.splitlines()
    assert "kubeAPIQPS: 50 # see KUB-112" in out


def test_a_changed_map_keeps_its_untouched_entries():
    # one key added to a 4-space map with an aligned comment: only the new line differs, at the map's indent
    data = kubelet_config_yaml.load_yaml(QUIRKY, "q")
    data["evictionHard"]["nodefs.available"] = "10%"
    out = kubelet_config_yaml.dump_yaml(data, QUIRKY)
    assert kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out, "q"))["evictionHard"] == {"memory.available": "100Mi", "nodefs.available": "10%"}
    assert changed_lines(QUIRKY, out) == ["+    nodefs.available: 10%"]


@pytest.mark.parametrize("change,expected", [
    # a value changed in a 2-space map: that line only
    ({"memory": "1Gi"}, ["-  memory: 512Mi", "+  memory: 1Gi"]),
    # a key added
    ({"ephemeral-storage": "1Gi"}, ["+  ephemeral-storage: 1Gi"]),
])
def test_kubespray_reserved_map_edits_touch_one_line(change, expected):
    with open(os.path.join(LAYOUTS, "kubespray", "etc/kubernetes/kubelet-config.yaml")) as fh:
        text = fh.read()
    data = kubelet_config_yaml.load_yaml(text, "k")
    data["kubeReserved"].update(change)
    out = kubelet_config_yaml.dump_yaml(data, text)
    assert kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out, "k")) == kubelet_config_yaml.plain(data)
    assert changed_lines(text, out) == expected


def test_nested_maps_and_comments_inside_a_changed_map():
    text = ("kind: KubeletConfiguration\n"
            "authentication:\n"
            "    # who may call the kubelet\n"
            "    anonymous:\n"
            "        enabled: false   # KUB-7\n"
            "    webhook:\n"
            "        cacheTTL: 0s\n"
            "        enabled: True\n")
    data = kubelet_config_yaml.load_yaml(text, "n")
    data["authentication"]["webhook"]["cacheTTL"] = "2m0s"
    out = kubelet_config_yaml.dump_yaml(data, text)
    assert kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out, "n")) == kubelet_config_yaml.plain(data)
    assert changed_lines(text, out) == ["-        cacheTTL: 0s", "+        cacheTTL: 2m0s"]


def test_a_map_entry_it_cannot_split_falls_back_to_a_valid_dump():
    # a flow map: rewritten by ruamel.yaml (valid, same data), everything else kept
    text = "kind: KubeletConfiguration\nsystemReserved: {memory: 256Mi}\nmaxPods: 110\n"
    data = kubelet_config_yaml.load_yaml(text, "f")
    data["systemReserved"]["memory"] = "512Mi"
    out = kubelet_config_yaml.dump_yaml(data, text)
    assert kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out, "f")) == kubelet_config_yaml.plain(data)
    assert out.startswith("kind: KubeletConfiguration\n") and out.endswith("maxPods: 110\n")


def test_not_a_plain_block_mapping_falls_back_to_the_full_dump():
    text = "{apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration, kubeAPIQPS: 5}\n"
    data = kubelet_config_yaml.load_yaml(text, "flow")
    data["kubeAPIQPS"] = 50
    out = kubelet_config_yaml.dump_yaml(data, text)
    assert kubelet_config_yaml.plain(kubelet_config_yaml.load_yaml(out, "flow"))["kubeAPIQPS"] == 50


# ---------------------------------------------------------------- env files: no stray backslash, no double space

@pytest.mark.parametrize("text,expected", [
    ('KUBELET_EXTRA_ARGS="--v=2 --kube-api-qps=5 --max-pods=3"\n', 'KUBELET_EXTRA_ARGS="--v=2 --max-pods=3"\n'),
    ('A="--v=2 \\\n  --kube-api-qps 5 \\\n  --max-pods=3"\n', 'A="--v=2 \\\n  --max-pods=3"\n'),
    # the first flag of a continued value: no line left with only the quote and a backslash
    ('A="--kube-api-qps=5 \\\n--max-pods=3"\n', 'A="--max-pods=3"\n'),
    # the last flag: no line left with only the closing quote
    ('A="--v=2 \\\n--kube-api-qps=5"\n', 'A="--v=2"\n'),
    # a whole continuation line removed: the closing quote's own line (untouched) stays as it was
    ('A="--v=2 \\\n  --kube-api-qps=5 \\\n"\n', 'A="--v=2 \\\n"\n'),
    ('A="--kube-api-qps=5 \\\n  --kube-api-burst=7 \\\n  --max-pods=3"\n# keep me\nB=1\n', 'A="--max-pods=3"\n# keep me\nB=1\n'),
    ('A="--kube-api-qps=5 --kube-api-burst=7"\nB=1\n', 'A=""\nB=1\n'),
])
def test_removing_flags_leaves_tidy_env_files(text, expected):
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flags as kubelet_flags
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flag_edit as kubelet_flag_edit
    new, edits = kubelet_flag_edit.edit_text(text, False, {"kube-api-qps", "kube-api-burst"}, kubelet_schema.BOOL_FLAGS, {})
    assert new == expected and edits
    assert "  " not in new.replace("\n  ", "\n")
    # and the value systemd reads is the old one minus the flags
    old = kubelet_flags.env_assignments(text)[0]
    now = kubelet_flags.env_assignments(new)[0]
    assert now[0] == old[0]
    assert now[1].split() == [w for w in old[1].split() if not w.startswith(("--kube-api-", "5", "7"))]


KUBESPRAY_ENV = (
    'KUBE_LOG_LEVEL="--v=2"\n'
    'KUBELET_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\\n'
    '--config=/etc/kubernetes/kubelet-config.yaml \\\n'
    '--runtime-cgroups=/system.slice/containerd.service \\\n'
    '%s'
    '%s'
    'KUBELET_CLOUDPROVIDER=""\n'
)


@pytest.mark.parametrize("closing", [' "\n', '"\n', ' --node-labels= "\n'])
@pytest.mark.parametrize("stale", [
    "--kube-api-qps=5 --kube-api-burst=10 --registry-qps=2 \\\n",
    "  --kube-api-qps 5 \\\n",
    "--registry-qps=2\t--kube-api-burst=10 \\\n",
])
def test_removing_a_whole_continuation_line_keeps_its_neighbours_byte_for_byte(stale, closing):
    # kubespray's kubelet.env: the stale line goes, every other byte stays (the review's
    # case merged the line before it with the closing ' "' line)
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flags as kubelet_flags
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flag_edit as kubelet_flag_edit
    text = KUBESPRAY_ENV % (stale, closing)
    new, edits = kubelet_flag_edit.edit_text(text, False, {"kube-api-qps", "kube-api-burst", "registry-qps"}, kubelet_schema.BOOL_FLAGS, {})
    assert edits
    assert new == KUBESPRAY_ENV % ("", closing), new
    # and the value read back is the old one minus the flags
    old_value = dict(a[:2] for a in kubelet_flags.env_assignments(text))["KUBELET_ARGS"].split()
    assert dict(a[:2] for a in kubelet_flags.env_assignments(new))["KUBELET_ARGS"].split() == [
        w for w in old_value if not w.startswith(("--kube-api-", "--registry-")) and w not in ("5", "10", "2")]
