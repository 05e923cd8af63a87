# SPDX-License-Identifier: GPL-3.0-or-later
"""_report.trail: the Events and the annotation a remediation leaves on the Node object."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
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


# --- Events as the real API server validates them (issue 54 item 2) ------------------------------------------

def _double_validation():
    """lab/apiserver-double/validation.py: the API server double's transcription of Kubernetes' rules."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "..", "lab", "apiserver-double", "validation.py")
    spec = importlib.util.spec_from_file_location("apiserver_double_validation", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_note_is_cut_to_1024_bytes_on_a_character_boundary():
    # 1024 characters of a non-ASCII failure message are 1962 bytes: the old cut (characters) kept them all
    msg = ("сбой проверки: ошибка " * 60)[:1024]
    assert len(msg.encode("utf-8")) > 1800
    rem = {"status": "failed", "roles": ["nodefix.k8s.kubelet"], "msg": msg}
    event = trail.end_events("4711", BEFORE, AFTER, rem, T0)[-1]
    assert event["reason"] == "RemediationFailed"
    data = event["note"].encode("utf-8")
    assert len(data) <= 1024 and event["note"].endswith("...")
    data.decode("utf-8")   # whole characters only
    assert len(trail.cut_bytes("é" * 600, 1024).encode("utf-8")) == 1023   # 1021 bytes of é: 510 of them, and "..."


def test_a_251_character_node_name_gives_a_generate_name_the_server_accepts_and_the_full_name_in_the_note():
    node = ".".join(["n" * 62] * 4)[:251].rstrip(".")
    node = node + "x" * (251 - len(node))
    assert len(node) == 251
    prefix, short = trail.generate_name(node)
    assert short and len(prefix) + 5 <= 253 and prefix.endswith(".nodefix-") and not prefix[:-9].endswith((".", "-"))
    (event,) = trail.ordered(trail.start_events("4711", BEFORE, PLAN, T0))
    body = trail.event_body(event, node, "uid-1", "default", "controller-1")
    assert body["note"].startswith("node %s: run 4711: " % node) and len(body["note"].encode("utf-8")) <= 1024
    assert body["regarding"]["name"] == node
    val = _double_validation()
    meta = dict(body["metadata"], name=val.generated_name(body["metadata"]["generateName"], "abcde"))
    assert val.event_errors(dict(body, metadata=meta), "default") == []
    assert trail.generate_name("node-a") == ("node-a.nodefix-", False)


def test_every_event_the_trail_makes_passes_the_servers_validation():
    val = _double_validation()
    msg = "失败: " * 400
    rem = {"status": "ok", "roles": ["nodefix.k8s.gvisor", "nodefix.k8s.kubelet"], "msg": msg,
           "actions": ["rebooted: " + msg], "evidence": {"path": "/r/" + "é" * 900, "bytes": 1}}
    events = trail.ordered(trail.start_events("r" * 300, BEFORE, PLAN, T0) + trail.end_events(
        "r" * 300, BEFORE, AFTER, rem, T0, drained=True, drain_error=msg))
    assert len(events) >= 6
    for namespace in trail.NODE_EVENT_NAMESPACES:
        for e in events:
            body = trail.event_body(e, "node-a", "uid", namespace, "é" * 200)
            meta = dict(body["metadata"], name=body["metadata"]["generateName"] + "abcde")
            assert val.event_errors(dict(body, metadata=meta), namespace) == [], e["reason"]
    note = trail.annotation("r" * 300, rem, BEFORE, AFTER, T0)
    assert val.annotations_errors(note) == [] and trail.is_qualified_name(trail.ANNOTATION)


@pytest.mark.parametrize("namespace, instance, words", [
    ("nodefix-system", None, "namespace 'nodefix-system': a Node is cluster-scoped"),
    ("default", "i" * 200, "instance: the Event's reportingInstance must be 1 to 128 bytes, got 200"),
    ("default", "é" * 65, "got 130"),
    ("default", "", "got 0"),
])
def test_options_the_server_could_never_accept_are_refused(namespace, instance, words):
    with pytest.raises(trail.TrailInputError, match=words):
        trail.check_options(namespace, instance)


def test_the_controller_name_is_a_qualified_name():
    trail.check_options("kube-system", None)
    assert trail.is_qualified_name(trail.CONTROLLER)
    assert not trail.is_qualified_name("nodefix k8s!") and not trail.is_qualified_name("a/b/c")


# --- Verified means the after-audit ran (issue 53 item 11) ---------------------------------------------------

def test_a_finding_whose_detector_failed_after_the_fixes_is_not_verified():
    """gvisor.runsc_outdated is gone after the fixes only because the gvisor detector could not run."""
    after = {"findings": [{"id": "audit.check_failed", "severity": "medium", "check": "gvisor", "subject": "gvisor"}],
             "checks": {"kubelet": AFTER["checks"]["kubelet"], "gvisor": {"error": "runsc: permission denied"},
                        "pids": {}}}
    rem = {"status": "ok", "roles": ["nodefix.k8s.gvisor", "nodefix.k8s.kubelet"]}
    events = trail.end_events("r", BEFORE, after, rem, T0)
    outcome = events[-1]
    assert outcome["reason"] == "NotVerified" and outcome["type"] == "Warning"
    assert outcome["note"] == ("run r: fixed kubelet.api_qps_low, pids.zombie_leaker; not verified (its detector could "
                               "not run after the fixes): gvisor.runsc_outdated")
    assert not any(e["reason"] == "RemediationVerified" for e in events)
    summary = json.loads(trail.annotation("r", rem, BEFORE, after, T0)[trail.ANNOTATION])
    assert "gvisor.runsc_outdated" not in summary["fixed"]
    assert summary["notVerified"] == ["gvisor.runsc_outdated"] and summary["verified"] is False
    # with a finding still open, the note says both
    still = dict(after, findings=after["findings"] + [finding("pids.zombie_leaker")])
    outcome = trail.end_events("r", BEFORE, still, rem, T0)[-1]
    assert outcome["reason"] == "FindingsStillOpen" and "not verified (its detector could not run after the fixes): " \
        "gvisor.runsc_outdated" in outcome["note"]


def test_the_report_calls_it_not_verified_never_fixed():
    from ansible_collections.nodefix.k8s.plugins.module_utils._report import model  # pylint: disable=import-outside-toplevel
    after = {"findings": [{"id": "audit.check_failed", "severity": "medium", "check": "gvisor", "subject": "gvisor"}],
             "checks": {"kubelet": {}, "gvisor": {"error": "x"}, "pids": {}}}
    m = model.build_model({"n1": after}, before={"n1": BEFORE}, remediation={"n1": {"status": "ok"}})
    (node,) = m["nodes"]
    assert node["not_verified"] == ["gvisor.runsc_outdated"]
    assert node["fixed"] == ["kubelet.api_qps_low", "pids.zombie_leaker"]
    assert "not verified (its detector could not run after the fixes): gvisor.runsc_outdated" in report_document.to_markdown(m)
