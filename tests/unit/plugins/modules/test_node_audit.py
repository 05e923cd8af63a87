# SPDX-License-Identifier: GPL-3.0-or-later
"""node_audit: every detector in one call, failures isolated, fail_on policy."""

from ansible_collections.nodefix.k8s.plugins.module_utils import _audit
from ansible_collections.nodefix.k8s.plugins.modules import node_audit


def fake_detectors(monkeypatch, behaviours):
    """Replace each detector's check() by a fake; record the calls."""
    calls = []
    for name, mod in _audit.DETECTORS:
        def check(module, runner, root="/", _name=name, **opts):
            calls.append((_name, root, opts))
            behaviour = behaviours.get(_name, "clean")
            if behaviour == "fail_json":
                module.fail_json(msg="cannot read %s" % _name, rc=2, stderr="permission denied")
            if behaviour == "raise":
                raise RuntimeError("boom in " + _name)
            if behaviour == "clean":
                return {"installed": True, "findings": []}
            return {"installed": True, "findings": [dict(f) for f in behaviour]}
        monkeypatch.setattr(mod, "check", check)
    return calls


def critical(fid):
    return {"id": fid, "severity": "critical", "title": "t", "subject": None, "evidence": {}, "remedy": "r",
            "fix": {"role": "nodefix.k8s.gvisor", "tag": "gvisor"}}


def test_runs_every_detector_once(run_module, monkeypatch):
    calls = fake_detectors(monkeypatch, {})
    result, failed, table = run_module(node_audit, {"root": "/fake"})
    assert not failed and result["changed"] is False
    assert [c[0] for c in calls] == list(_audit.CHECK_NAMES)
    assert all(c[1] == "/fake" for c in calls)
    assert result["summary"]["total"] == 0 and result["summary"]["worst"] is None
    assert table.calls == []


def test_selection_and_options(run_module, monkeypatch):
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"checks": ["pids", "gvisor"], "options": {"pids": {"zombie_threshold": 3}}})
    assert not failed
    assert [c[0] for c in calls] == ["gvisor", "pids"]
    assert calls[1][2] == {"zombie_threshold": 3}
    assert set(result["checks"]) == {"gvisor", "pids"}


def test_failing_detector_is_isolated(run_module, monkeypatch):
    fake_detectors(monkeypatch, {"kubelet": "fail_json", "kernel": "raise", "gvisor": [critical("gvisor.runsc_outdated")]})
    result, failed, _dummy = run_module(node_audit, {})
    assert not failed
    ids = [(f["id"], f["subject"]) for f in result["findings"]]
    assert ("gvisor.runsc_outdated", None) in ids
    assert ("audit.check_failed", "kubelet") in ids and ("audit.check_failed", "kernel") in ids
    kubelet = [f for f in result["findings"] if f["subject"] == "kubelet"][0]
    assert kubelet["evidence"]["msg"] == "cannot read kubelet" and kubelet["evidence"]["rc"] == 2
    assert result["checks"]["kernel"] == {"error": "boom in kernel"}
    assert result["summary"]["by_severity"]["critical"] == 1
    assert result["summary"]["fix_roles"] == ["nodefix.k8s.gvisor"]
    # the detectors that ran after a failure still ran
    assert "cpu_quota" in result["checks"] and "error" not in result["checks"]["cpu_quota"]


def test_fail_on_policy(run_module, monkeypatch):
    fake_detectors(monkeypatch, {"gvisor": [critical("gvisor.runsc_outdated")]})
    result, failed, _dummy = run_module(node_audit, {"fail_on": "high"})
    assert failed and "gvisor.runsc_outdated" in result["msg"]
    assert result["findings"][0]["id"] == "gvisor.runsc_outdated"


def test_unknown_option_name_is_refused(run_module, monkeypatch):
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"options": {"gvisr": {}}})
    assert failed and "gvisr" in result["msg"] and calls == []


def test_real_detectors_on_an_empty_node(run_module, tmp_path):
    """The real detectors against an empty root: nothing installed, no crash."""
    result, failed, _dummy = run_module(node_audit, {"root": str(tmp_path), "checks": ["kernel", "cpu_quota"]},
                                        bins={})
    assert not failed
    assert set(result["checks"]) == {"kernel", "cpu_quota"}
    assert not [f for f in result["findings"] if f["id"] == "audit.check_failed"], result["findings"]
