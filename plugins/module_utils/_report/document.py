# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The report's documents: report.md (Markdown, every text from a node or a run through ``_report.markdown``) and
junit.xml (JUnit XML), over the model ``_report.model`` builds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import xml.etree.ElementTree as ET

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES, at_or_above
from ansible_collections.nodefix.k8s.plugins.module_utils._report import markdown as md
from ansible_collections.nodefix.k8s.plugins.module_utils._report.console import (
    needs_no_attention,
    run_lines,
    slices_line,
    storm_lines,
    table_lines,
    waived_groups,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.dry_run import plan_lines
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import NO_NODE, change_rows, evidence_line, not_durable_notes


def to_markdown(model):
    """report.md: every text that came from a node or a run goes through _report.markdown (text, never Markdown)."""
    t = model["totals"]
    out = ["# %s" % md.text(model["title"]), ""]
    run = run_lines(model)
    if run:
        out += [md.text(run[0]) + "."]
        for line in run[1:]:
            out += ["", "**%s.**" % md.text(line)]
        out.append("")
    elif model.get("generated"):
        out += ["Generated: %s" % md.text(model["generated"]), ""]
    out.append("%d node(s), %d with findings, %d in error; %d finding(s): %s%s." % (
        t["nodes"], t["nodes_with_findings"], t["nodes_in_error"], t["findings"],
        ", ".join("%s %d" % (s, t["by_severity"][s]) for s in SEVERITIES if t["by_severity"][s]) or "none",
        "; %d waived" % t["waived"] if t.get("waived") else "") + ("" if t["nodes"] else " **%s.**" % NO_NODE))
    if model.get("slices"):
        out += ["", md.text(slices_line(model)) + "."]
    storm = storm_lines(model)
    if storm:
        out += ["", "## Storm breaker", ""] + ["%s." % md.line(line.rstrip(".")) for line in storm]
    out += plan_markdown(model)
    for w in model.get("waivers_expired") or []:
        out += ["", "**Expired waiver** (its findings count again): %s on %s, expired %s - %s" % (
            md.code(w["id"]), md.text(", ".join(w["hosts"])), md.text(w["expires"]), md.text(w["reason"]))]
    table = table_lines(dict(model, storm=None))
    out += ["", "## Nodes", "", md.fence(table)] + table + [md.fence(table), ""]
    if model["finding_ids"]:
        out += ["## Findings", "", "| id | severity | nodes | fixed by | title |", "|---|---|---|---|---|"]
        for e in model["finding_ids"]:
            fix = md.text(e["fix"].get("role") or "manual")
            if e["fix"].get("tag"):
                fix += " (tag %s)" % md.code(e["fix"]["tag"])
            cells = (md.code(e["id"]), md.text(e["severity"]), md.text(", ".join(e["hosts"])), fix,
                     md.text(e["title"] or ""))
            out.append("| %s | %s | %s | %s | %s |" % cells)
        out.append("")
    clean = [n["host"] for n in model["nodes"] if needs_no_attention(n)]
    if clean:
        out += ["## Nodes with no open findings (%d)" % len(clean), "", md.line(", ".join(clean)), ""]
    waived = waived_groups(model)
    if waived:
        out += ["## Waived", "", "| id | reason | until | nodes |", "|---|---|---|---|"]
        out += ["| %s | %s | %s | %d: %s |" % (
            md.code(w["id"]), md.text(w["reason"]), md.text(w["expires"] or "-"), len(w["hosts"]),
            md.text(", ".join(w["hosts"]))) for w in waived]
        out.append("")
    for n in model["nodes"]:
        if not needs_no_attention(n):
            out += _node_markdown(n)
    return "\n".join(out)


def _node_markdown(n):
    out = ["## %s" % md.text(n["host"]), ""]
    if n["status"] != "ok":
        out += ["**%s**: %s" % (md.text(n["status"]), md.text(n["error"])), ""]
    rem = n.get("remediation")
    if rem:
        out += ["Remediation: **%s**%s%s" % (md.text(rem.get("status")), (" in %ss" % md.text(rem["seconds"]))
                                             if rem.get("seconds") else "",
                                             (" - " + md.text(rem.get("msg"))) if rem.get("msg") else ""), ""]
    if n.get("before"):
        out += [md.text("Before: %s finding(s); fixed: %s; still open: %s; new: %s%s" % (
            n["before"].get("total"), ", ".join(n.get("fixed") or []) or "none",
            ", ".join(n.get("still_open") or []) or "none", ", ".join(n.get("new") or []) or "none",
            ("; not verified (its detector could not run after the fixes): %s" % ", ".join(n["not_verified"]))
            if n.get("not_verified") else "")), ""]
        rows = change_rows(n)
        if rows:
            out += ["| setting | before | after | durable (or where to make it so) |", "|---|---|---|---|"]
            out += ["| %s | %s | %s | %s |" % tuple(
                md.text(r[k]) for k in ("setting", "before", "after", "durable")) for r in rows]
            out.append("")
        for note in not_durable_notes(n):
            out.append("- not durable (unchanged by this run): %s - %s" % (md.text(note["setting"]), md.text(note["where"])))
        if n.get("pods_to_recreate"):
            out.append("- pods to recreate: %s" % md.text(", ".join(n["pods_to_recreate"])))
        for action in (rem or {}).get("actions") or []:
            out.append("- %s" % md.text(action))
        if evidence_line(n):
            out.append("- %s" % md.text(evidence_line(n)))
        out.append("")
    if not n["findings"] and n["status"] == "ok":
        out += ["No findings.", ""]
    for f in n["findings"]:
        subject = " (%s)" % md.text(f["subject"]) if f.get("subject") else ""
        out.append("- **%s** %s%s: %s" % (md.text(f.get("severity")), md.code(f["id"]), subject, md.text(f.get("title"))))
        if f.get("evidence"):
            out.append("  - evidence: %s" % md.code(json.dumps(f["evidence"], sort_keys=True, default=str)[:600]))
        if f.get("remedy"):
            out.append("  - remedy: %s" % md.text(f["remedy"]))
    for f in n.get("waived") or []:
        subject = " (%s)" % md.text(f["subject"]) if f.get("subject") else ""
        until = ", until %s" % md.text(f["waiver"]["expires"]) if f["waiver"].get("expires") else ""
        out.append("- waived %s %s%s: %s" % (md.text(f.get("severity")), md.code(f["id"]), subject, md.text(f.get("title"))))
        out.append("  - waiver%s: %s" % (until, md.text(f["waiver"]["reason"])))
    out.append("")
    return out


def plan_markdown(model):
    """The "Plan (dry run)" section: each node's plan in words (``_rollout.dry_run``); none without a plan."""
    planned = [n for n in model["nodes"] if n.get("plan")]
    if not planned:
        return []
    out = ["", "## Plan (dry run)", "", "What the run would do on each node; nothing was changed."]
    for n in planned:
        lines = plan_lines(n["plan"])
        out += ["", "### %s" % md.text(n["host"]), ""] + ["- %s" % md.text(line) for line in lines[1:] or lines]
    return out


def _finding_case(suite, host, finding):
    """The JUnit test case of one finding: ``<host>.<check>`` / ``<id> [<subject>]``."""
    name = finding["id"] + (" [%s]" % finding["subject"] if finding.get("subject") else "")
    return ET.SubElement(suite, "testcase", classname="%s.%s" % (host, finding.get("check") or "audit"), name=name)


def to_junit(model, fail_on="medium"):
    """JUnit XML: a testsuite per node, a testcase per finding id or check.

    Findings at ``fail_on`` or worse are failures; milder ones are reported
    as passing test cases with the finding in system-out; waived findings are
    skipped test cases whose message is the waiver's reason. A node in error
    is an error test case.
    """
    failing = at_or_above(fail_on)
    suites = ET.Element("testsuites", name=model["title"])
    for n in model["nodes"]:
        suite = ET.SubElement(suites, "testsuite", name=n["host"])
        tests = failures = errors = skipped = 0
        if n["status"] != "ok":
            case = ET.SubElement(suite, "testcase", classname=n["host"], name="audit")
            err = ET.SubElement(case, "error", message=str(n["error"]), type=n["status"])
            err.text = str(n["error"])
            tests += 1
            errors += 1
        else:
            checks = sorted(set(f.get("check") or f["id"].split(".", 1)[0] for f in n["findings"]))
            case = ET.SubElement(suite, "testcase", classname=n["host"], name="audit completed")
            tests += 1
            for f in n["findings"]:
                tests += 1
                case = _finding_case(suite, n["host"], f)
                evidence = json.dumps(f.get("evidence") or {}, sort_keys=True, default=str)
                body = "%s\nremedy: %s\nevidence: %s" % (f.get("title"), f.get("remedy"), evidence)
                if f.get("severity") in failing:
                    fail = ET.SubElement(case, "failure", message="%s: %s" % (f.get("severity"), f.get("title")),
                                         type=f.get("severity") or "finding")
                    fail.text = body
                    failures += 1
                else:
                    out = ET.SubElement(case, "system-out")
                    out.text = body
            for f in n.get("waived") or []:
                tests += 1
                skipped += 1
                case = _finding_case(suite, n["host"], f)
                ET.SubElement(case, "skipped", message="waived: %s" % f["waiver"]["reason"])
            suite.set("checks", ",".join(checks))
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
