# SPDX-License-Identifier: GPL-3.0-or-later
"""_audit.detect: the audit's own verdicts beside the detectors' - whether the host is a Kubernetes node."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import detect as audit_detect


class Detector(object):
    """A stand-in detector module: check() returns the facts given (or raises)."""

    def __init__(self, facts=None, error=None):
        self.facts, self.error = facts or {}, error

    def check(self, runner, root="/", **options):
        if self.error:
            raise self.error
        return dict(self.facts, findings=[])


def kubelet(present):
    return Detector({"kubelet": {"present": present, "unit": "kubelet.service"}})


def containerd(installed):
    return Detector({"installed": installed, "binary": "/usr/bin/containerd" if installed else None,
                     "config_path": "/etc/containerd/config.toml", "config_exists": installed})


@pytest.mark.parametrize("kubelet_present,containerd_installed,want", [
    (False, False, False), (True, False, True), (False, True, True), (True, True, True)])
def test_not_a_node_only_when_neither_component_is_there(kubelet_present, containerd_installed, want):
    out = audit_detect.run_detectors(None, [("containerd", containerd(containerd_installed)),
                                            ("kubelet", kubelet(kubelet_present))])
    assert out["summary"]["kubernetes_node"] is want
    assert ("audit.not_kubernetes_node" in out["summary"]["ids"]) is (not want)
    if not want:
        found = [f for f in out["findings"] if f["id"] == "audit.not_kubernetes_node"][0]
        assert found["severity"] == "info" and found["check"] == "audit"
        assert found["evidence"]["kubelet"] == {"present": False, "unit": "kubelet.service"}
        assert found["evidence"]["containerd"]["installed"] is False


def test_no_verdict_when_a_detector_did_not_run_or_failed():
    # only the kernel detector (the rollout tests' audits): not known, no finding
    only_kernel = audit_detect.run_detectors(None, [("kernel", Detector({"release": "6.1.0"}))])
    assert only_kernel["summary"]["kubernetes_node"] is None
    assert only_kernel["summary"]["ids"] == []
    # the kubelet detector failed: what it would have said is unknown, never "not a node"
    failed = audit_detect.run_detectors(None, [("containerd", containerd(False)),
                                               ("kubelet", Detector(error=RuntimeError("boom")))])
    assert failed["summary"]["kubernetes_node"] is None
    assert "audit.not_kubernetes_node" not in failed["summary"]["ids"]


def test_the_light_list_of_detector_names_is_the_detectors_own():
    # _audit/names.py lists the names without importing the detectors (the triage's default required_checks):
    # a detector added to checks.DETECTORS and not to names.py (or the order changed) fails here
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import names as audit_names
    assert tuple(name for name, _dummy in audit_checks.DETECTORS) == audit_names.CHECK_NAMES == audit_checks.CHECK_NAMES
