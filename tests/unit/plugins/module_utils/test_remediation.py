# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _audit.remediation.plan: what remediate does for a node, from its before-audit."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import remediation as audit_remediation


def finding(fid, role=None, **evidence):
    out = {"id": fid, "check": fid.split(".", 1)[0], "title": "title of %s" % fid, "evidence": evidence}
    if role:
        out["fix"] = {"role": role, "tag": "x"}
    return out


AUDIT = {"findings": [
    finding("reboot.required", "nodefix.k8s.reboot", reasons=["/var/run/reboot-required", "newer kernel installed"]),
    finding("kernel.dying_memcgs", "nodefix.k8s.kernel", count=4100, threshold=1000),
    finding("mount_units.cleanup_slow", "nodefix.k8s.mount_units"),
    finding("kubelet.no_eviction_guard", "nodefix.k8s.kubelet"),
    finding("gvisor.runsc_outdated", "nodefix.k8s.gvisor"),
]}


def test_nothing_switched_on_no_reboot_and_no_reboot_role():
    out = audit_remediation.plan(AUDIT, drainable=True)
    assert out["reboot_reasons"] == []
    assert out["fix_roles"] == ["nodefix.k8s.gvisor", "nodefix.k8s.kernel", "nodefix.k8s.kubelet",
                                "nodefix.k8s.mount_units"]
    assert out["kubelet_guard_rails"] is True  # auto: the audit found one missing


def test_every_switch_on_gives_each_reason_its_words():
    out = audit_remediation.plan(AUDIT, drainable=True, reboot=True, mount_units_reboot="yes", dying_memcgs="true")
    assert out["reboot_reasons"] == [
        {"id": "reboot.required", "check": "reboot", "reason": "/var/run/reboot-required; newer kernel installed"},
        {"id": "kernel.dying_memcgs", "check": "kernel", "reason": "4100 dying memory cgroups (threshold 1000)"},
        {"id": "mount_units.cleanup_slow", "check": "mount_units", "reason": "title of mount_units.cleanup_slow"}]
    assert out["fix_roles"][-1] == "nodefix.k8s.reboot"


def test_a_node_this_run_does_not_drain_is_never_rebooted():
    out = audit_remediation.plan(AUDIT, drainable=False, reboot=True, mount_units_reboot=True, dying_memcgs=True)
    assert out["reboot_reasons"] == [] and "nodefix.k8s.reboot" not in out["fix_roles"]


def test_the_slow_cleanup_alone_leaves_the_reboot_to_the_mount_units_role():
    out = audit_remediation.plan(AUDIT, drainable=True, mount_units_reboot=True)
    assert [r["id"] for r in out["reboot_reasons"]] == ["mount_units.cleanup_slow"]
    assert "nodefix.k8s.reboot" not in out["fix_roles"]


@pytest.mark.parametrize("value,want", [("auto", True), (True, True), ("false", False), (False, False), ("on", True)])
def test_guard_rails(value, want):
    assert audit_remediation.plan(AUDIT, kubelet_guard_rails=value)["kubelet_guard_rails"] is want


def test_guard_rails_auto_without_the_findings_stays_off():
    assert audit_remediation.plan({"findings": [finding("gvisor.runsc_outdated", "nodefix.k8s.gvisor")]})["kubelet_guard_rails"] is False


def test_a_clean_node_gets_nothing():
    assert audit_remediation.plan({"findings": []}, drainable=True, reboot=True) == {
        "fix_roles": [], "reboot_reasons": [], "kubelet_guard_rails": False, "disruptive": [], "evidence": False, "skip": ""}


@pytest.mark.parametrize("audit,kwargs,words", [
    (None, {}, "not a node_audit result"),
    ({"findings": "x"}, {}, "not a node_audit result"),
    ({"findings": [{"check": "x"}]}, {}, "finding 0 has no id"),
    ({"findings": [{"id": "gvisor.runsc_outdated", "fix": "nodefix.k8s.gvisor"}]}, {},
     "finding gvisor.runsc_outdated has a fix that is not a mapping"),
    (AUDIT, {"reboot": "maybe"}, "nodefix_reboot must be true or false, got 'maybe'"),
    (AUDIT, {"kubelet_guard_rails": "sometimes"}, "nodefix_kubelet_guard_rails must be true or false or auto"),
])
def test_bad_input_decides_nothing(audit, kwargs, words):
    with pytest.raises(audit_remediation.PlanInputError) as exc:
        audit_remediation.plan(audit, **kwargs)
    assert words in exc.value.msg


def test_the_filter_wraps_it():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.nodefix.k8s.plugins.filter.audit import FilterModule
    flt = FilterModule().filters()["remediation_plan"]
    assert flt(AUDIT, drainable=True, reboot=True)["reboot_reasons"][0]["id"] == "reboot.required"
    with pytest.raises(AnsibleFilterError, match="remediation_plan: the before-audit"):
        flt("not an audit")


@pytest.mark.parametrize("audit, kwargs, want", [
    # any role on a node this run drains is a drain, whatever the role does
    ({"findings": [finding("pids.pid_max_low", "nodefix.k8s.pids")]}, {"drainable": True}, ["drain"]),
    ({"findings": [finding("pids.pid_max_low", "nodefix.k8s.pids")]}, {}, []),
    # containerd, the gVisor registration and the kubelet restart their service: without a drain that is a restart
    ({"findings": [finding("gvisor.runsc_outdated", "nodefix.k8s.gvisor")]}, {}, ["restart"]),
    ({"findings": [finding("kubelet.qps_low", "nodefix.k8s.kubelet")]}, {}, ["restart"]),
    (AUDIT, {"drainable": True, "reboot": True}, ["drain", "reboot"]),
    (AUDIT, {"reboot": True}, ["restart"]),   # no drain: never rebooted
    # a kernel below the minimum is a reboot when the run upgrades kernels on drained nodes
    ({"findings": [finding("kernel.below_minimum", "nodefix.k8s.kernel")]},
     {"drainable": True, "kernel_upgrade": True}, ["drain", "reboot"]),
    ({"findings": [finding("kernel.below_minimum", "nodefix.k8s.kernel")]}, {"kernel_upgrade": True}, []),
    ({"findings": []}, {"drainable": True, "reboot": True, "kernel_upgrade": True}, []),
])
def test_what_disrupts_the_node_is_what_the_storm_breaker_counts(audit, kwargs, want):
    assert audit_remediation.plan(audit, **kwargs)["disruptive"] == want


def test_a_kernel_upgrade_switch_that_is_not_a_boolean_decides_nothing():
    with pytest.raises(audit_remediation.PlanInputError, match="nodefix_kernel_upgrade must be true or false"):
        audit_remediation.plan({"findings": []}, kernel_upgrade="maybe")


def test_evidence_is_kept_before_a_disruption_and_before_a_large_unit_cleanup():
    big = {"findings": [finding("mount_units.leaked_scopes", "nodefix.k8s.mount_units", count=90),
                        finding("mount_units.dead_mount_units", "nodefix.k8s.mount_units", count=10)]}
    assert audit_remediation.plan(big)["evidence"] is True and audit_remediation.plan(big)["disruptive"] == []
    assert audit_remediation.plan(big, evidence_units=101)["evidence"] is False
    assert audit_remediation.plan(big, evidence_units="101")["evidence"] is False   # as Jinja passes it
    assert audit_remediation.plan({"findings": [finding("kubelet.qps_low", "nodefix.k8s.kubelet")]})["evidence"] is True
    with pytest.raises(audit_remediation.PlanInputError, match="nodefix_evidence_units must be a whole number"):
        audit_remediation.plan(big, evidence_units="many")


def test_a_host_that_is_not_a_kubernetes_node_gets_nothing():
    audit = {"findings": [finding("audit.not_kubernetes_node"), finding("pids.pid_max_low", "nodefix.k8s.pids"),
                          finding("reboot.required", "nodefix.k8s.reboot", reasons=["/var/run/reboot-required"])]}
    out = audit_remediation.plan(audit, drainable=True, reboot=True, kernel_upgrade=True)
    assert out["fix_roles"] == [] and out["reboot_reasons"] == [] and out["disruptive"] == []
    assert out["evidence"] is False and "not a Kubernetes node" in out["skip"]
    # a node (no such finding) is planned as before, with nothing to skip
    node = audit_remediation.plan({"findings": audit["findings"][1:]}, drainable=True, reboot=True)
    assert node["fix_roles"] == ["nodefix.k8s.pids", "nodefix.k8s.reboot"] and node["skip"] == ""
