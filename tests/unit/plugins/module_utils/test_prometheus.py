# SPDX-License-Identifier: GPL-3.0-or-later
"""Findings as Prometheus textfile series, checked with the official parser (prometheus_client)."""

from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.nodefix.k8s.plugins.module_utils._report import prometheus as report_prometheus
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import build_model


def finding(fid, severity, subject=None, check="gvisor"):
    return {"id": fid, "severity": severity, "subject": subject, "check": check, "title": "t", "remedy": "r"}


AUDIT = {
    "checks": {"gvisor": {}, "kubelet": {"error": "x"}, "pids": {}},
    "findings": [
        finding("gvisor.runsc_outdated", "high", "/usr/bin/runsc"),
        finding("gvisor.sandbox_oversized", "critical", 'sandbox "a"\\b\nc'),
        finding("gvisor.sandbox_oversized", "critical", "sandbox-2"),
        finding("audit.check_failed", "high", "kubelet", check="kubelet"),
        # the same id twice without a subject is one series (the format forbids duplicates)
        finding("pids.zombies", "low", None, check="pids"),
        finding("pids.zombies", "low", None, check="pids"),
    ],
}


def parse(text):
    return dict((fam.name, fam.samples) for fam in text_string_to_metric_families(text))


def test_node_textfile_parses_with_one_series_per_open_finding():
    text = report_prometheus.node_textfile(AUDIT)
    fams = parse(text)
    findings = fams["nodefix_finding"]
    assert len(findings) == 5
    assert all(s.value == 1 for s in findings)
    subjects = sorted(s.labels["subject"] for s in findings if s.labels["id"] == "gvisor.sandbox_oversized")
    # escaping survives the official parser: the subject comes back byte for byte
    assert subjects == ['sandbox "a"\\b\nc', "sandbox-2"]
    counts = dict((s.labels["severity"], s.value) for s in fams["nodefix_findings"])
    assert counts == {"critical": 2, "high": 2, "medium": 0, "low": 2, "info": 0}
    failed = dict((s.labels["check"], s.value) for s in fams["nodefix_audit_check_failed"])
    assert failed == {"gvisor": 0, "kubelet": 1, "pids": 0}
    # no timestamp series: the bytes depend on the findings only (the mtime is the heartbeat)
    assert not [name for name in fams if "timestamp" in name]


def test_clean_node_still_exports_zero_counts_and_no_finding_series():
    fams = parse(report_prometheus.node_textfile({"checks": {"gvisor": {}}, "findings": []}))
    assert "nodefix_finding" not in fams
    assert sum(s.value for s in fams["nodefix_findings"]) == 0 and len(fams["nodefix_findings"]) == 5


def test_long_subject_is_bounded():
    text = report_prometheus.node_textfile({"findings": [finding("x.y", "low", "s" * 5000)]})
    subject = parse(text)["nodefix_finding"][0].labels["subject"]
    assert len(subject) == report_prometheus.MAX_LABEL and subject.endswith("...")


def test_same_findings_same_bytes():
    assert report_prometheus.node_textfile(AUDIT) == report_prometheus.node_textfile(AUDIT)
    assert report_prometheus.node_textfile(AUDIT) != report_prometheus.node_textfile(
        {"checks": AUDIT["checks"], "findings": AUDIT["findings"][:1]})


def test_fleet_textfile_labels_nodes_keeps_waived_apart_and_marks_unaudited():
    results = {
        "n1": AUDIT,
        "n2": {"checks": {"pids": {}}, "findings": [finding("pids.zombies", "low", "1234", check="pids")]},
        "n3": {"unreachable": True, "msg": "ssh: timeout"},
    }
    waivers = [{"id": "pids.zombies", "hosts": ["n2"], "reason": "workload bug, ticket OPS-1"}]
    model = build_model(results, waivers=waivers)
    fams = parse(report_prometheus.fleet_textfile(model))
    audited = dict((s.labels["node"], s.value) for s in fams["nodefix_node_audited"])
    assert audited == {"n1": 1, "n2": 1, "n3": 0}
    nodes = set(s.labels["node"] for s in fams["nodefix_finding"])
    assert nodes == {"n1"}  # n2's only finding is waived, n3 was not audited
    waived = fams["nodefix_finding_waived"]
    assert [(s.labels["node"], s.labels["id"], s.labels["subject"]) for s in waived] == [("n2", "pids.zombies", "1234")]
    n2 = dict((s.labels["severity"], s.value) for s in fams["nodefix_findings"] if s.labels["node"] == "n2")
    assert n2["low"] == 0
    assert not any(s.labels["node"] == "n3" for s in fams["nodefix_findings"])


def reboot_finding(fid, reasons):
    out = finding(fid, "medium", "6.1.0-28-amd64", check="reboot")
    out["evidence"] = {"reasons": reasons}
    return out


def test_reboot_pending_per_reason_on_the_node_and_in_the_fleet_file():
    pending = {"checks": {"reboot": {}}, "findings": [
        reboot_finding("reboot.required", ["/var/run/reboot-required exists (packages: libc6)"]),
        reboot_finding("reboot.kernel_not_running", ["kernel 6.12.95+deb12-amd64 is installed, 6.1.0-28-amd64 is running"])]}
    fams = parse(report_prometheus.node_textfile(pending))
    assert sorted((s.labels["reason"], s.value) for s in fams["nodefix_reboot_pending"]) == [
        ("/var/run/reboot-required exists (packages: libc6)", 1),
        ("kernel 6.12.95+deb12-amd64 is installed, 6.1.0-28-amd64 is running", 1)]
    quiet = parse(report_prometheus.node_textfile({"checks": {"reboot": {}}, "findings": []}))
    assert [(s.labels["reason"], s.value) for s in quiet["nodefix_reboot_pending"]] == [("", 0)]
    # the detector did not run, or could not read the node: no claim either way
    assert "nodefix_reboot_pending" not in parse(report_prometheus.node_textfile({"checks": {"pids": {}}, "findings": []}))
    failed = {"checks": {"reboot": {"error": "x"}}, "findings": [finding("audit.check_failed", "medium", "reboot",
                                                                         check="reboot")]}
    assert "nodefix_reboot_pending" not in parse(report_prometheus.node_textfile(failed))
    model = build_model({"n1": pending, "n2": {"checks": {"reboot": {}}, "findings": []}})
    fleet = parse(report_prometheus.fleet_textfile(model))
    series = sorted((s.labels["node"], s.value) for s in fleet["nodefix_reboot_pending"])
    assert series == [("n1", 1), ("n1", 1), ("n2", 0)]


def test_an_audit_report_has_no_remediation_series_and_a_remediation_one_has_each_node_once():
    results = {"a": {"findings": []}, "b": {"findings": []}}
    audit = report_prometheus.fleet_textfile(build_model(results))
    assert "_nodefix_remediation" not in audit
    rem = {"a": {"status": "skipped", "msg": "nothing to fix", "seconds": 1.5, "finished": 100},
           "b": {"status": "ok", "seconds": 60, "finished": 200, "reboot": {"status": "held"}}}
    text = report_prometheus.fleet_textfile(build_model(results, before=results, remediation=rem))
    fams = dict((f.name, f.samples) for f in text_string_to_metric_families(text))
    outcome = [(s.labels["node"], s.labels["outcome"]) for s in fams["nodefix_remediation_outcome"] if s.value == 1]
    assert sorted(outcome) == [("a", "skipped"), ("b", "ok")]
    assert len(fams["nodefix_remediation_outcome"]) == 2 * len(report_prometheus.OUTCOMES)
    # a held reboot did not happen
    assert [s.value for s in fams["nodefix_remediation_reboots"]] == [0, 0]
    assert dict((s.labels["outcome"], s.value) for s in fams["nodefix_remediation_nodes"]) == {
        "ok": 1, "failed": 0, "skipped": 1, "not_run": 0, "unreachable": 0}
