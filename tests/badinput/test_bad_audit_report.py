# SPDX-License-Identifier: GPL-3.0-or-later
"""audit_report with malformed results, waivers and destinations: clear errors, nothing written."""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import audit_report
from ansible_collections.nodefix.k8s.tests.badinput.conftest import read, refused

FINDING = {"id": "gvisor.runsc_outdated", "severity": "high", "title": "runsc predates the fix"}


@pytest.fixture
def dest(tmp_path):
    base = tmp_path / "out"
    (base / "report").mkdir(parents=True)
    return str(base), str(base / "report")


BAD = [
    ({"results": {"n1": {"findings": [dict(FINDING, severity="urgent")]}}},
     ["results[n1].findings[0]", "unknown severity 'urgent'"]),
    ({"results": {"n1": {"findings": [dict(FINDING, severity=None)]}}}, ["unknown severity None"]),
    ({"results": {"n1": {"findings": {"id": "x"}}}}, ["results[n1].findings must be a list"]),
    ({"results": {"n1": {"findings": ["gvisor.runsc_outdated"]}}}, ["results[n1].findings[0] must be a dict"]),
    ({"results": {"n1": {"findings": [{"severity": "high"}]}}}, ["results[n1].findings[0] has no id"]),
    ({"results": {"n1": {"findings": [dict(FINDING, title=["a"])]}}}, ["title must be a string"]),
    ({"results": {"n1": {"findings": [dict(FINDING, subject={"a": 1})]}}}, ["subject must be a string"]),
    ({"results": {"n1": ["not", "a", "result"]}}, ["results[n1] must be a node_audit result"]),
    ({"results": {"n1": {"findings": []}}, "before": {"n1": {"findings": [dict(FINDING, severity="bad")]}}},
     ["before[n1].findings[0]", "unknown severity"]),
    ({"results": {"n1": {"findings": []}}, "remediation": {"n1": "ok"}}, ["remediation[n1] must be a dict"]),
    ({"results": {"n1": {"findings": []}}, "waivers": [{"id": "x", "reason": "r", "expires": "soon"}]},
     ["bad waiver", "expires must be a date"]),
    ({"results": {"n1": {"findings": []}}, "waivers": [{"id": "x", "reason": ""}]}, ["bad waiver", "reason"]),
]


@pytest.mark.parametrize("args,words", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_refused(run_module, dest, args, words):
    base, report = dest
    refused(run_module, audit_report, dict(args, dest=report), base, words)


def test_dest_that_is_a_file_is_refused(run_module, dest):
    base, report = dest
    os.rmdir(report)
    with open(report, "w") as fh:
        fh.write("x\n")
    refused(run_module, audit_report, {"results": {"n1": {"findings": [FINDING]}}, "dest": report}, base,
            ["is not a directory"])


def test_dangling_report_symlink_is_refused(run_module, dest):
    base, report = dest
    os.symlink("/nonexistent/report.json", os.path.join(report, "report.json"))
    refused(run_module, audit_report, {"results": {"n1": {"findings": [FINDING]}}, "dest": report}, base,
            ["dangling symlink"])


def test_report_written_through_a_symlink_and_idempotent(run_module, dest):
    base, report = dest
    target = os.path.join(base, "published.md")
    with open(target, "w") as fh:
        fh.write("old\n")
    os.symlink(target, os.path.join(report, "report.md"))
    args = {"results": {"n1": {"findings": [FINDING]}}, "dest": report, "generated": "2026-11-22T00:00:00Z"}
    result, failed, _t = run_module(audit_report, args)
    assert not failed and result["changed"]
    assert os.path.islink(os.path.join(report, "report.md")) and "gvisor.runsc_outdated" in read(target)
    again, failed, _t = run_module(audit_report, args)
    assert not failed and again["changed"] is False
