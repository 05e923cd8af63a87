# SPDX-License-Identifier: GPL-3.0-or-later
"""_report.trail: the Events and the annotation a remediation leaves on the Node object."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail

T0 = 1764150000.0


def finding(fid, severity="high"):
    return {"id": fid, "severity": severity, "check": fid.split(".")[0], "title": "t"}


BEFORE = {"findings": [finding("kubelet.api_qps_low", "medium"), finding("gvisor.runsc_outdated", "critical"),
                       finding("pids.zombie_leaker", "high")],
          "checks": {"kubelet": {"kubelet": {"effective": {"kubeAPIQPS": {"value": 5, "source": "config"}}}},
                     "gvisor": {"runsc": {"version": "20230101"}}}}
AFTER = {"findings": [finding("pids.zombie_leaker", "high")],
         "checks": {"kubelet": {"kubelet": {"effective": {"kubeAPIQPS": {"value": 50, "source": "config"}}}},
                    "gvisor": {"runsc": {"version": "20240729"}}}}
PLAN = {"fix_roles": ["nodefix.k8s.gvisor", "nodefix.k8s.kubelet"], "disruptive": ["drain"], "reboot_reasons": []}


def test_the_start_is_one_event_summing_the_findings_and_the_plan():
    (event,) = trail.start_events("4711", BEFORE, PLAN, T0)
    assert event["reason"] == "FindingsDetected" and event["type"] == "Warning" and event["action"] == "Audit"
    assert event["note"] == ("run 4711: 3 finding(s) (critical 1, high 1, medium 1): gvisor.runsc_outdated, "
                             "kubelet.api_qps_low, pids.zombie_leaker; plan: roles gvisor, kubelet, drain")
    assert event["time"] == int(T0 * 1000000)
    (clean,) = trail.start_events("4711", {"findings": []}, {}, T0)
    assert clean["reason"] == "NoFindings" and clean["type"] == "Normal"


def test_the_end_tells_the_steps_in_order_with_what_changed():
    rem = {"status": "ok", "roles": ["nodefix.k8s.gvisor", "nodefix.k8s.kubelet"],
           "actions": ["rebooted: /var/run/reboot-required; 40 s away, kernel 6.1 -> 6.1, systemd running, verified"]}
    events = trail.ordered(trail.end_events("4711", BEFORE, AFTER, rem, T0 + 60, drained=True))
    assert [e["reason"] for e in events] == ["Drained", "FixApplied", "FixApplied", "Rebooted", "FindingsStillOpen",
                                             "Uncordoned"]
    assert events[1]["note"] == "run 4711: nodefix.k8s.gvisor: runsc 20230101 -> 20240729"
    assert events[2]["note"] == "run 4711: nodefix.k8s.kubelet: kubelet kubeAPIQPS 5 -> 50"
    assert "still open after the new audit: pids.zombie_leaker" in events[4]["note"] and events[4]["type"] == "Warning"
    # one time for the steps at the end, in order a microsecond apart, all after the start
    times = [e["time"] for e in events]
    assert times == sorted(times) and len(set(times)) == len(times) and times[0] == int((T0 + 60) * 1000000)
    assert all(e["note"].startswith("run 4711: ") for e in events)


@pytest.mark.parametrize("rem, drained, cordoned, drain_error, reasons", [
    ({"status": "ok", "roles": ["nodefix.k8s.kubelet"]}, True, True, "", ["Drained", "FixApplied", "RemediationVerified",
                                                                          "LeftCordoned"]),
    # a failed remediation names no role whose change the audits did not read (it may not have run)
    ({"status": "failed", "roles": ["nodefix.k8s.containerd"], "msg": "Restart containerd: rolled back to the last-good"
      " config"}, True, False, "", ["Drained", "RolledBack", "Uncordoned"]),
    ({"status": "failed", "roles": ["nodefix.k8s.kubelet"], "msg": "Ensure the kubelet configuration: bad"}, False,
     False, "", ["RemediationFailed"]),
    ({"status": "failed", "roles": ["nodefix.k8s.reboot"], "msg": "reboot gate: window; nothing was drained or changed"},
     False, False, "", ["RemediationFailed"]),
    ({"status": "skipped", "roles": [], "msg": "nothing to fix"}, False, False, "", ["NothingToFix"]),
    ({"status": "skipped", "roles": ["nodefix.k8s.kubelet"], "msg": "drain failed; node left as it was"}, False, False,
     "drain failed: PodDisruptionBudget", ["DrainFailed"]),
])
def test_each_outcome_has_its_reason(rem, drained, cordoned, drain_error, reasons):
    after = {"findings": []}
    events = trail.end_events("r", BEFORE, after, rem, T0, drained=drained, drain_error=drain_error,
                              cordoned_before=cordoned)
    assert [e["reason"] for e in events] == reasons


def test_a_failed_remediation_names_the_fixes_the_audits_read():
    rem = {"status": "failed", "roles": ["nodefix.k8s.gvisor", "nodefix.k8s.kubelet"], "msg": "Restart kubelet: failed"}
    after = dict(AFTER, checks=dict(AFTER["checks"], kubelet=BEFORE["checks"]["kubelet"]))   # the kubelet unchanged
    events = trail.end_events("r", BEFORE, after, rem, T0)
    assert [(e["reason"], e["note"]) for e in events if e["reason"] == "FixApplied"] == [
        ("FixApplied", "run r: nodefix.k8s.gvisor: runsc 20230101 -> 20240729")]


def test_the_annotation_is_a_bounded_json_summary():
    (key, text), = trail.annotation("4711", {"status": "ok"}, BEFORE, AFTER, T0).items()
    assert key == "nodefix.k8s/last-remediation"
    assert json.loads(text) == {"time": "2025-11-26T09:40:00Z", "outcome": "ok", "run": "4711",
                                "fixed": ["gvisor.runsc_outdated", "kubelet.api_qps_low"], "stillOpen": ["pids.zombie_leaker"]}
    many = {"findings": [finding("kubelet.x%03d" % i) for i in range(200)]}
    summary = json.loads(trail.annotation("r", {"status": "ok"}, many, {"findings": []}, T0)[trail.ANNOTATION])
    assert len(summary["fixed"]) == trail.ANNOTATION_IDS and summary["truncated"] is True


def test_a_note_never_passes_the_apis_limit():
    many = {"findings": [finding("kubelet.setting_%03d_is_far_too_low_on_this_node" % i) for i in range(300)]}
    (event,) = trail.start_events("r", many, PLAN, T0)
    assert len(event["note"]) <= trail.NOTE_MAX and "(+292 more)" in event["note"]


@pytest.mark.parametrize("call, words", [
    (lambda: trail.start_events("r", "audit", {}, T0), "not a node_audit result"),
    (lambda: trail.start_events("r", BEFORE, {}, "soon"), "started must be a Unix time"),
    (lambda: trail.end_events("r", BEFORE, AFTER, None, T0), "remediation record is not a mapping"),
    (lambda: trail.end_events("r", BEFORE, AFTER, {}, True), "finished must be a Unix time"),
])
def test_facts_of_the_wrong_shape_make_no_trail(call, words):
    with pytest.raises(trail.TrailInputError, match=words):
        call()


def test_times_are_the_apis_microtime():
    assert trail.iso(int(T0 * 1000000) + 7) == "2025-11-26T09:40:00.000007Z"


def test_the_evidence_kept_before_the_disruption_comes_first_or_says_it_could_not_be_kept():
    kept = {"path": "/r/remediate/evidence/n1/4711.json", "bytes": 5000, "before": ["drain"], "missing": ["kernel"]}
    rem = {"status": "ok", "roles": ["nodefix.k8s.kubelet"], "evidence": kept}
    events = trail.end_events("4711", BEFORE, AFTER, rem, T0, drained=True)
    assert events[0]["reason"] == "EvidenceKept" and events[1]["reason"] == "Drained"
    assert events[0]["note"] == ("run 4711: kept before the drain: /r/remediate/evidence/n1/4711.json (5000 bytes; "
                                 "missing: kernel)")
    failed = dict(rem, evidence={"before": ["reboot"], "error": "Read it on the node: unreachable"})
    (first,) = [e for e in trail.end_events("4711", BEFORE, AFTER, failed, T0) if e["reason"].startswith("Evidence")]
    assert first["reason"] == "EvidenceNotKept" and first["type"] == "Warning" and "unreachable" in first["note"]


def test_without_an_audit_after_the_fixes_nothing_is_called_fixed_or_verified():
    rem = {"status": "ok", "roles": ["nodefix.k8s.kubelet"]}
    events = trail.end_events("r", BEFORE, None, rem, T0)
    assert [e["reason"] for e in events] == ["FixApplied", "NotVerified"] and events[-1]["type"] == "Warning"
    assert not any("verified by a new audit" in e["note"] for e in events)
    summary = json.loads(trail.annotation("r", rem, BEFORE, None, T0)[trail.ANNOTATION])
    assert summary["fixed"] == [] and summary["stillOpen"] == [] and summary["verified"] is False
