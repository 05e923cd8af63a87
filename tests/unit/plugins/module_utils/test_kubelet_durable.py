# SPDX-License-Identifier: GPL-3.0-or-later
"""Durable kubelet fixes: the kubespray variables and kOps fields named are the real ones, and the docs say the same."""

import os
import re

import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import durable as kubelet_durable
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import SUPPORTED

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
with open(os.path.join(HERE, "..", "..", "fixtures", "kubespray", "v2.31.0-96-g46dbdd399.yml")) as fh:
    KUBESPRAY = yaml.safe_load(fh)
DEFAULTS = dict(kv for d in KUBESPRAY["defaults"].values() for kv in d.items())


def test_every_kubespray_variable_is_templated_into_its_field_and_has_a_default():
    lines = KUBESPRAY["template_lines"]
    for field, text in kubelet_durable.KUBESPRAY_VARS.items():
        names = [n.strip() for n in text.split(",")]
        for name in names:
            assert name in DEFAULTS, "%s (for %s) is not a kubespray default" % (name, field)
        if field in ("systemReserved", "kubeReserved"):
            scope = "system" if field == "systemReserved" else "kube"
            assert scope in KUBESPRAY["reserved_scopes"]
            expected = ["%s_%s_reserved" % (scope, r.replace("-", "_")) for r in KUBESPRAY["reserved_resources"]]
            assert sorted(names) == sorted(expected)
            continue
        at = [i for i, x in enumerate(lines) if x.startswith(field + ":")]
        assert at, "kubespray's template does not write %s" % field
        # the variable is on the field's line or guards its block (evictionHard)
        near = " ".join(lines[max(at[0] - 1, 0):at[0] + 1])
        assert names[0] in near, "%s is not written from %s" % (field, names[0])
    # every supported field without a dedicated variable goes through kubelet_config_extra_args
    assert kubelet_durable.KUBESPRAY_EXTRA in DEFAULTS and "{{ kubelet_config_extra_args | to_nice_yaml(indent=2) }}" in lines
    assert kubelet_durable.KUBESPRAY_FLAGS in DEFAULTS and any(kubelet_durable.KUBESPRAY_FLAGS in x for x in KUBESPRAY["env_lines"])
    assert set(kubelet_durable.KUBESPRAY_VARS) <= set(SUPPORTED)


def test_kops_fields_cover_every_supported_field_but_kube_api_burst():
    assert set(kubelet_durable.KOPS_FIELDS) | {"kubeAPIBurst"} == set(SUPPORTED)
    report = kubelet_durable.durability("kops", {"kubeAPIBurst": 100}, {"kubeAPIBurst": {"path": "/var/lib/kubelet/kubelet.conf"}})
    assert "no kubeAPIBurst field" in report["settings"][0]["durable_in"]


def test_docs_name_the_same_places():
    with open(os.path.join(REPO, "docs", "kubelet.md")) as fh:
        text = fh.read()
    section = text[text.index("## Durable fixes"):]
    rows = dict((m[0], (m[1].strip(), m[2].strip()))
                for m in re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$", section, re.M))
    assert set(rows) == set(SUPPORTED)
    for field, (spray, kops) in rows.items():
        assert spray.replace("`", "") == kubelet_durable.KUBESPRAY_VARS.get(field, "%s: {%s: ...}" % (kubelet_durable.KUBESPRAY_EXTRA, field))
        assert kops.replace("`", "") == ("spec.kubelet.%s" % kubelet_durable.KOPS_FIELDS[field] if field in kubelet_durable.KOPS_FIELDS else "none")


def test_unmanaged_node_and_dropins_are_durable():
    eff = {"kubeAPIQPS": {"path": "/etc/kubernetes/kubelet.conf.d/99-nodefix-k8s.conf"}}
    for layout in ("kubeadm", "kubespray", "config-file"):
        report = kubelet_durable.durability(layout, {"kubeAPIQPS": 50}, eff)
        assert report["durable"] and kubelet_durable.findings(report) == []
    report = kubelet_durable.durability("config-file", {"kubeAPIQPS": 50}, {"kubeAPIQPS": {"path": "/var/lib/kubelet/config.yaml"}})
    assert report["manager"] is None and report["durable"]
