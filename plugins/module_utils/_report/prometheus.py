# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Findings in the Prometheus text exposition format, for node_exporter's textfile collector.

node_exporter reads every ``*.prom`` file of its ``--collector.textfile.directory``
(https://github.com/prometheus/node_exporter#textfile-collector) on each scrape;
a file must be written atomically (a temporary file in the same directory, then a
rename), which ``node_audit`` does. The format is
https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format.

Series (all gauges):

- ``nodefix_finding{check,id,severity,subject}`` 1 for every open finding; the
  series disappears when the finding is fixed (alert on its presence).
- ``nodefix_findings{severity}``: open findings per severity (0 included, so
  a clean node is visible as such).
- ``nodefix_audit_check_failed{check}``: 1 when a detector could not run (its
  findings are unknown), 0 when it ran.
- ``nodefix_reboot_pending{reason}``: when the ``reboot`` detector ran, 1 for
  each reason the node asks for a reboot (``/var/run/reboot-required`` and its
  packages, ``needs-restarting -r``, a newer kernel installed), or a single
  ``reason=""`` series at 0 when it asks for none - kured's "reboot required"
  as a series to alert or plan on.

The file node-problem-detector's tick writes (the npd role's ``npd_textfile``,
``tick_textfile``) carries the same series, only for the checks it looked at, and
three more: ``nodefix_audit_timestamp_seconds`` (Unix time of the oldest look the
file holds: the heartbeat), ``nodefix_build_info{version}`` 1 (the collection's
version), and ``nodefix_audit_check_failed{check}`` is 1 also when the detector
ran but said it could not see everything (a ``CANNOT_CHECK`` finding of
``_npd/plugin.py``); a check with no series was not looked at.

No timestamp series in ``node_audit``'s file: its bytes depend only on the findings, so an
unchanged node keeps an unchanged file (``changed=false``, honestly). Its
modification time is refreshed on every run (``refresh``): node_exporter's own
``node_textfile_mtime_seconds{file}`` is the time of the last audit (alert
when stale).

The fleet file (``audit_report`` format ``prometheus``) carries the same series
with a ``node`` label, waived findings as ``nodefix_finding_waived`` (not as
``nodefix_finding``: a waiver is a decision not to alert), and
``nodefix_node_audited{node}`` (0 when a node could not be audited).

A remediation's fleet file adds, per node, ``nodefix_remediation_outcome{node,outcome}``
(one series per outcome - ok, failed, skipped, not_run - 1 for the node's, a state set),
``nodefix_remediation_duration_seconds{node}``, ``nodefix_remediation_last_timestamp_seconds{node}``
(when the node's remediation ended) and ``nodefix_remediation_reboots{node}`` (the reboots it
took, 0 or 1), ``nodefix_remediation_result{node,result}`` (one series per value of the rollout's
outcome enum, ``_rollout.outcome``: ok, nothing_to_fix, held, refused, drain_failed, not_verified,
failed, unreachable, stopped - 1 for the node's) and for the fleet ``nodefix_remediation_nodes{outcome}``. A remediation is an
event: these files change with every run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import printable
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome, outcome_of

HELP = {
    "nodefix_finding": "An open nodefix.k8s finding (1); the series goes away when the finding is fixed.",
    "nodefix_finding_waived": "A nodefix.k8s finding that a waiver keeps out of nodefix_finding (1).",
    "nodefix_findings": "Open nodefix.k8s findings per severity.",
    "nodefix_audit_check_failed": "1 when a nodefix.k8s detector could not run (its findings are unknown), else 0.",
    "nodefix_audit_timestamp_seconds": "When the oldest look at the node this file holds began (Unix time): the "
                                       "heartbeat of node-problem-detector's tick or the nodefix.k8s timer.",
    "nodefix_build_info": "The nodefix.k8s collection version that wrote this file (1).",
    "nodefix_node_audited": "1 when the node was audited, 0 when it could not be (unreachable or failed).",
    "nodefix_reboot_pending": "1 per reason the node asks for a reboot (0 with reason=\"\" when none); "
                              "only when the reboot detector ran.",
    "nodefix_remediation_outcome": "1 for the outcome of the node's last nodefix.k8s remediation, 0 for the others.",
    "nodefix_remediation_result": "1 for the rollout outcome (held, drain_failed, not_verified, ...) of the node's last "
                                  "nodefix.k8s remediation, 0 for the others.",
    "nodefix_remediation_duration_seconds": "How long the node's last nodefix.k8s remediation took (audit to audit).",
    "nodefix_remediation_last_timestamp_seconds": "When the node's last nodefix.k8s remediation ended (Unix time).",
    "nodefix_remediation_reboots": "Reboots the node's last nodefix.k8s remediation took.",
    "nodefix_remediation_nodes": "Nodes of the last nodefix.k8s remediation run per outcome.",
}

# a remediation's outcomes (the report's statuses; "not run" as a label value without a space)
OUTCOMES = ("ok", "failed", "skipped", "not_run", "unreachable")
# the reboot role's outcomes of a node that went down and came back
REBOOTED = ("verified", "not fixed")

# A label value is bounded so one odd subject cannot bloat every scrape.
MAX_LABEL = 200


def escape(value):
    """A label value as the text format wants it (backslash, double quote and newline escaped)."""
    text = printable("" if value is None else str(value))
    if len(text) > MAX_LABEL:
        text = text[:MAX_LABEL - 3] + "..."
    return text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _series(name, labels, value):
    if labels:
        inner = ",".join('%s="%s"' % (k, escape(v)) for k, v in sorted(labels.items()))
        return "%s{%s} %s" % (name, inner, value)
    return "%s %s" % (name, value)


def _number(value):
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


class _Text(object):
    """Collects series by metric so each metric's HELP/TYPE comes once, before its samples."""

    def __init__(self):
        self.metrics = {}
        self.order = []

    def add(self, name, labels, value):
        if name not in self.metrics:
            self.metrics[name] = {}
            self.order.append(name)
        key = tuple(sorted((labels or {}).items()))
        # the format forbids two samples with one label set (e.g. an id reported twice without a subject)
        self.metrics[name].setdefault(key, _number(value))

    def render(self):
        out = []
        for name in self.order:
            out.append("# HELP %s %s" % (name, HELP[name]))
            out.append("# TYPE %s gauge" % name)
            for key, value in self.metrics[name].items():
                out.append(_series(name, dict(key), value))
        return "\n".join(out) + "\n"


def _finding_labels(finding, extra=None):
    labels = {"id": finding.get("id"), "severity": finding.get("severity"),
              "check": finding.get("check") or "", "subject": finding.get("subject") or ""}
    labels.update(extra or {})
    return labels


def failed_checks(result):
    """{check: 0|1} for the detectors of one node_audit result."""
    checks = dict((name, 0) for name in (result.get("checks") or {}))
    for f in result.get("findings") or []:
        if f.get("id") == "audit.check_failed" and f.get("subject"):
            checks[f["subject"]] = 1
    return checks


def _node_series(text, findings, checks_failed, extra=None):
    for f in findings:
        text.add("nodefix_finding", _finding_labels(f, extra), 1)
    for level in SEVERITIES:
        labels = dict(extra or {}, severity=level)
        text.add("nodefix_findings", labels, sum(1 for f in findings if f.get("severity") == level))
    for name in sorted(checks_failed):
        text.add("nodefix_audit_check_failed", dict(extra or {}, check=name), checks_failed[name])
    if checks_failed.get("reboot") == 0:
        reasons = sorted(set(reason for f in findings if f.get("check") == "reboot"
                             for reason in (f.get("evidence") or {}).get("reasons") or [f.get("title") or ""]))
        for reason in reasons or [""]:
            text.add("nodefix_reboot_pending", dict(extra or {}, reason=reason), 1 if reason else 0)


def node_textfile(result):
    """The textfile of one node from its node_audit result (findings, checks)."""
    text = _Text()
    result = redact(result)
    _node_series(text, list(result.get("findings") or []), failed_checks(result))
    return text.render()


def tick_textfile(looks, heartbeat, version):
    """The textfile of node-problem-detector's tick (the npd role's ``npd_textfile``): ``looks`` {check: {failed:
    0|1, findings: [...]}} of the checks looked at, ``heartbeat`` the Unix time of the oldest look, ``version`` the
    collection's."""
    text = _Text()
    looks = redact(looks)
    text.add("nodefix_audit_timestamp_seconds", None, int(heartbeat))
    text.add("nodefix_build_info", {"version": version}, 1)
    findings = [f for check in sorted(looks) for f in looks[check]["findings"]]
    _node_series(text, findings, dict((check, looks[check]["failed"]) for check in looks))
    return text.render()


def _outcome(remediation):
    return str(remediation.get("status") or "").replace(" ", "_")


def _result(remediation):
    """The rollout outcome of a record (a record from before the enum, or "not run": what its fields say)."""
    if remediation.get("status") == "not run":
        return Outcome.STOPPED
    try:
        return outcome_of(remediation)
    except NodefixError:   # a record the enum cannot read has no result series at 1
        return None


def _remediation_series(text, nodes):
    """A remediation's series (see the file's docstring); nothing for an audit's report."""
    done = [(n["host"], n["remediation"]) for n in nodes if isinstance(n.get("remediation"), dict)]
    for host, rem in done:
        labels = {"node": host}
        for outcome in OUTCOMES:
            text.add("nodefix_remediation_outcome", dict(labels, outcome=outcome), 1 if _outcome(rem) == outcome else 0)
        result = _result(rem)
        for value in Outcome.ALL:
            text.add("nodefix_remediation_result", dict(labels, result=value), 1 if result == value else 0)
        for name, key in (("nodefix_remediation_duration_seconds", "seconds"),
                          ("nodefix_remediation_last_timestamp_seconds", "finished")):
            if isinstance(rem.get(key), (int, float)) and not isinstance(rem.get(key), bool):
                text.add(name, labels, rem[key])
        reboot = rem.get("reboot") if isinstance(rem.get("reboot"), dict) else {}
        text.add("nodefix_remediation_reboots", labels, 1 if reboot.get("status") in REBOOTED else 0)
    if done:
        for outcome in OUTCOMES:
            text.add("nodefix_remediation_nodes", {"outcome": outcome}, sum(1 for _h, r in done if _outcome(r) == outcome))


def fleet_textfile(model):
    """The fleet file from audit_report's model (open and waived findings, checks_failed per node; a
    remediation's outcome, duration, time and reboots)."""
    text = _Text()
    model = redact(model)
    for node in model["nodes"]:
        host = {"node": node["host"]}
        text.add("nodefix_node_audited", host, 1 if node["status"] == "ok" else 0)
        if node["status"] != "ok":
            continue
        _node_series(text, node["findings"], node.get("checks_failed") or {}, host)
        for f in node.get("waived") or []:
            text.add("nodefix_finding_waived", _finding_labels(f, host), 1)
    _remediation_series(text, model["nodes"])
    return text.render()


def refresh(path):
    """Set ``path``'s modification time to now, its bytes untouched: the audit's heartbeat,
    read by node_exporter as ``node_textfile_mtime_seconds`` (a file whose findings did not
    change is not rewritten, and would otherwise look as old as its last change). A link is never
    followed (the textfile directory may be writable by node_exporter's user)."""
    os.utime(path, None, follow_symlinks=False)
