# SPDX-License-Identifier: GPL-3.0-or-later
"""_report renders only redacted text (issue 61): a credential in a failed remediation's message, a gate's
held_by or a finding reaches no report format, no Event note, no annotation, no slice record and no dry-run
plan; and report.md shows node text as text (raw HTML, a newline + heading, a table row, a list, a fence)."""

import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._report import console as report_console
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model, prometheus, trail
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import dry_run
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import records

SECRET_MSG = "GET https://robot:Report-Mirror-61@mirror.example.com/x failed; etcdctl --user=root:Report-Etcd-61"
SECRETS = ("Report-Mirror-61", "Report-Etcd-61", "Report-Finding-61")
AUDIT = {"findings": [{"id": "kubelet.api_qps_low", "severity": "medium", "check": "kubelet", "title": "t",
                       "evidence": {"cmdline": "kubelet --token Report-Finding-61"}}],
         "checks": {"kubelet": {}}}
REMEDIATION = {"n1": {"status": "failed", "msg": SECRET_MSG, "roles": ["nodefix.k8s.kubelet"]}}


def leaks(text):
    return [s for s in SECRETS if s in text]


def test_every_report_format_and_the_textfile_are_redacted(tmp_path):
    m = model.build_model({"n1": AUDIT}, before={"n1": AUDIT}, remediation=REMEDIATION)
    for text in (model.to_json(m), report_document.to_markdown(m), report_document.to_junit(m), "\n".join(report_console.table_lines(m)),
                 prometheus.fleet_textfile(m), prometheus.node_textfile(AUDIT)):
        assert leaks(text) == [], text
    assert "mirror.example.com" in report_document.to_markdown(m) and "robot:%s@" % MARK in model.to_json(m)
    records.write_record(str(tmp_path), "slice-1", "storm.json", {"nodes": {"n1": {"msg": SECRET_MSG}}})
    assert leaks((tmp_path / "slice-1" / "storm.json").read_text()) == []


def test_events_annotations_hold_reasons_and_the_plan_are_redacted():
    events = trail.end_events("run-1", AUDIT, AUDIT, REMEDIATION["n1"], 1700000000.0)
    bodies = [trail.event_body(e, "n1", "uid", "default", "ctl") for e in trail.ordered(events)]
    note = trail.annotation("run-1", REMEDIATION["n1"], AUDIT, AUDIT, 1700000000.0)
    reasons = cordon.hold_reasons(REMEDIATION["n1"], AUDIT)
    plan = dry_run.build_plan({"node": "n1", "refused": True, "remediation": REMEDIATION["n1"], "roles": []})
    dumped = json.dumps([bodies, note, reasons, plan, dry_run.plan_lines(plan)])
    assert leaks(dumped) == [] and "mirror.example.com" in dumped and "--user=root:" + MARK in dumped


def test_node_text_is_text_in_report_md():
    hostile = "<script>x</script>\n## Injected heading\n| a | b |\n- item\n```"
    m = model.build_model({"n1": {"findings": [{"id": "kubelet.api_qps_low", "severity": "medium", "check": "kubelet",
                                                "title": hostile, "subject": hostile, "remedy": hostile}],
                                  "checks": {"kubelet": {}}}},
                          remediation={"n1": {"status": "failed", "msg": hostile}})
    md = report_document.to_markdown(m)
    # the node table is a fenced code block (literal text); everything outside it must hold no Markdown of the node's
    fences = [i for i, ln in enumerate(md.splitlines()) if ln.startswith("```") and not ln.strip("`")]
    assert len(fences) == 2
    lines = md.splitlines()[:fences[0]] + md.splitlines()[fences[1] + 1:]
    md = "\n".join(lines)
    assert re.search(r"(?<!\\)<", md) is None and "\\<script>" in md      # every '<' escaped: no raw HTML
    assert not [ln for ln in lines if ln.startswith("## Injected") or ln.startswith("| a |") or ln == "- item"]
    assert not [ln for ln in lines if ln.startswith("```") and ln.strip("`")]   # no fence opened by node text


def test_the_tick_textfile_is_redacted_as_the_node_textfile_is():
    """node-problem-detector's tick textfile: a reboot reason quoting a credential shows redacted (review item 3)."""
    looks = {"reboot": {"failed": 0, "findings": [
        {"id": "reboot.required", "severity": "high", "check": "reboot", "title": "t",
         "evidence": {"reasons": ["pending after etcdctl --user=root:Report-Etcd-61 on db.example.com"]}}]}}
    for text in (prometheus.tick_textfile(looks, 1700000000, "1.2.0"),
                 prometheus.node_textfile({"findings": looks["reboot"]["findings"], "checks": {"reboot": {}}})):
        assert leaks(text) == [], text
        assert "db.example.com" in text and "root:" in text, text
