# SPDX-License-Identifier: GPL-3.0-or-later
"""An unreachable node in the report and the trail: unreachable at the step remediate lost it (its
remediation record's ``step``: storm audit, audit before, fixes, audit after; an audit result's
``step``), never "fixed" without an audit after, and a Warning Event naming the step."""

import json

import pytest
from junitparser import JUnitXml

from ansible_collections.nodefix.k8s.plugins.module_utils._report import console as report_console
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model as report_model
from ansible_collections.nodefix.k8s.plugins.module_utils._report import prometheus
from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail

FINDING = {"id": "kernel.no_psi", "severity": "medium", "title": "no PSI", "check": "kernel"}
BEFORE = {"node-a": {"findings": [FINDING]}, "node-b": {"findings": [FINDING]}}
# what audit_results gives for a host with no audit after (tasks/unreachable.yml skips it)
NO_AFTER = {"unreachable": True, "msg": "no _nodefix_audit result for this host (unreachable or failed before it ran)"}


@pytest.mark.parametrize("step", ["storm audit", "audit before", "fixes", "audit after"])
def test_a_node_lost_at_a_step_is_unreachable_at_that_step(step):
    after = {"node-a": dict(NO_AFTER) if step != "audit after" else {"unreachable": True, "msg": "ssh: timed out"},
             "node-b": {"findings": []}}
    rem = {"node-a": {"status": "unreachable", "step": step, "msg": "ssh: timed out", "roles": ["nodefix.k8s.kernel"]},
           "node-b": {"status": "ok", "roles": ["nodefix.k8s.kernel"]}}
    model = report_model.build_model(after, before=BEFORE, remediation=rem)
    a, b = model["nodes"]
    assert a["status"] == "unreachable" and a["unreachable_at"] == step
    assert a["error"] == "unreachable at %s: ssh: timed out" % step
    assert a["fixed"] == [] and a["remediation"]["status"] == "unreachable"  # nothing read after: nothing fixed
    assert b["status"] == "ok" and b["fixed"] == ["kernel.no_psi"] and "unreachable_at" not in b
    lines = report_console.table_lines(model)
    row = [line for line in lines if line.startswith("node-a")][0].split()
    assert row[-1] == "unreachable" and row[3] == "0"
    assert "  error: unreachable at %s: ssh: timed out" % step in lines
    assert "**unreachable**: unreachable at %s: ssh: timed out" % step in report_document.to_markdown(model)
    suite = [s for s in JUnitXml.fromstring(report_document.to_junit(model)) if s.name == "node-a"][0]
    assert suite.errors == 1


def test_a_record_without_a_step_still_says_unreachable():
    model = report_model.build_model({"n": dict(NO_AFTER)}, before={"n": {"findings": []}},
                                     remediation={"n": {"status": "unreachable", "msg": "gone"}})
    assert model["nodes"][0]["error"] == "unreachable at an unnamed step: gone"


def test_an_audit_result_names_its_step():
    model = report_model.build_model({"n": {"unreachable": True, "step": "audit", "msg": "ssh: no route"}})
    assert model["nodes"][0]["unreachable_at"] == "audit"
    assert model["nodes"][0]["error"] == "unreachable at audit: ssh: no route"


def test_an_audit_after_that_failed_fixes_nothing():
    """Before this change every finding of the audit before counted as fixed when the audit after had none
    to give (unreachable, or the audit failed)."""
    model = report_model.build_model({"n": {"failed": True, "msg": "module failure"}}, before={"n": {"findings": [FINDING]}},
                                     remediation={"n": {"status": "ok"}})
    assert model["nodes"][0]["status"] == "error" and model["nodes"][0]["fixed"] == []


def test_the_trail_says_where_the_node_was_lost():
    events = trail.end_events("run-1", {"findings": [FINDING]}, None,
                              {"status": "unreachable", "step": "fixes", "msg": "ssh: timed out",
                               "roles": ["nodefix.k8s.kernel"]}, 1700000000, drained=True)
    reasons = [e["reason"] for e in events]
    assert reasons == ["Drained", "NodeUnreachable", "Uncordoned"], reasons
    lost = events[1]
    assert lost["type"] == "Warning" and "could not be reached at fixes: ssh: timed out" in lost["note"]


@pytest.mark.parametrize("after", [{"unreachable": True, "msg": "ssh: timed out", "changed": False},
                                   {"skipped": True, "changed": False, "false_condition": "x"}],
                         ids=["unreachable", "skipped"])
def test_the_annotation_never_lists_a_fix_no_audit_after_read(after):
    """Ansible's unreachable (or skipped) result in place of the audit after is no audit: before this change
    the annotation listed every finding of the audit before as fixed."""
    note = trail.annotation("run-1", {"status": "unreachable", "step": "audit after"}, {"findings": [FINDING]}, after,
                            1700000000)
    summary = json.loads(note[trail.ANNOTATION])
    assert summary["fixed"] == [] and summary["verified"] is False, summary


def test_the_textfile_counts_an_unreachable_node():
    model = report_model.build_model({"n": dict(NO_AFTER)}, before={"n": {"findings": []}},
                                     remediation={"n": {"status": "unreachable", "step": "fixes", "msg": "gone"}})
    text = prometheus.fleet_textfile(model)
    assert 'nodefix_remediation_outcome{node="n",outcome="unreachable"} 1' in text, text
