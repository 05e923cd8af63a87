# SPDX-License-Identifier: GPL-3.0-or-later
"""The audit_results filter keeps hosts without a result in the report."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.filter.audit import FilterModule, audit_results


def test_maps_results_and_marks_missing():
    hostvars = {"a": {"_nodefix_audit": {"findings": []}}, "b": {}, "c": {"_nodefix_audit": {"skipped": True}}}
    out = audit_results(hostvars, ["a", "b", "c", "d"])
    assert out["a"] == {"findings": []}
    for host in ("b", "c", "d"):
        assert out[host]["unreachable"] is True


def test_hosts_must_be_a_list():
    with pytest.raises(AnsibleFilterError):
        audit_results({}, "a")


def test_registered_name():
    assert "audit_results" in FilterModule().filters()


def test_findings_at_or_above_is_the_collections_ladder():
    from ansible_collections.nodefix.k8s.plugins.filter.audit import findings_at_or_above
    found = [{"id": "pids.zombie_leaker", "severity": "high"}, {"id": "kernel.no_psi", "severity": "medium"},
             {"id": "kernel.no_oom_reaper", "severity": "high"}, "not a finding"]
    assert [f["id"] for f in findings_at_or_above(found, "high")] == ["pids.zombie_leaker", "kernel.no_oom_reaper"]
    assert [f["id"] for f in findings_at_or_above(found, "medium", ["pids.zombie_leaker"])] == [
        "kernel.no_psi", "kernel.no_oom_reaper"]
    assert findings_at_or_above(found, "none") == []
    with pytest.raises(AnsibleFilterError, match="severe"):
        findings_at_or_above(found, "severe")
    with pytest.raises(AnsibleFilterError, match="list"):
        findings_at_or_above({"id": "x"}, "high")
    assert "findings_at_or_above" in FilterModule().filters()


def test_hosts_left_alone_on_purpose_are_not_run_not_unreachable():
    hostvars = {"a": {"_nodefix_audit": {"findings": []}}, "b": {}, "c": {}}
    out = audit_results(hostvars, ["a", "b", "c"], "_nodefix_audit", {"a": "never used", "b": "not run: stopped"})
    assert out["a"] == {"findings": []}  # a result wins over the reason
    assert out["b"] == {"not_run": True, "msg": "not run: stopped"}
    assert out["c"]["unreachable"] is True
    with pytest.raises(AnsibleFilterError, match="not_run must be a dict"):
        audit_results(hostvars, ["a"], "_nodefix_audit", ["b"])
