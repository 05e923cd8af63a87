# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""Findings: the one shape every detector returns, severities and their order.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


SEVERITIES = ("critical", "high", "medium", "low", "info")
# the name of a node's file of the nodefix_* series in node_exporter's textfile directory, whoever writes it (node_audit,
# the npd tick) and what reads it (the triage): node_exporter exports a series two files carry from one of them only,
# so there is one file
TEXTFILE = "nodefix.prom"


def make_finding(fid, severity, title, evidence=None, remedy=None, fix_role=None, fix_tag=None, subject=None):
    """Return one finding in the collection's shape.

    ``fid`` is a stable dotted identifier documented in docs/findings.md,
    ``subject`` optionally names the object the finding is about (a sandbox
    id, a unit, a cgroup) so that one id can be reported several times.
    """
    if severity not in SEVERITIES:
        raise ValueError("unknown severity %r" % (severity,))
    return {
        "id": fid,
        "severity": severity,
        "title": title,
        "subject": subject,
        "evidence": evidence or {},
        "remedy": remedy,
        "fix": {"role": fix_role, "tag": fix_tag},
    }


def finding_from(registry, fid, evidence=None, subject=None, title=None, severity=None):
    """Build a finding from a registry entry ``registry[fid]``.

    A registry maps finding ids to dicts with ``severity``, ``title``,
    ``remedy``, ``role`` and ``tag``; each detector module_utils file keeps
    its own registry (``FINDINGS``) so that docs/findings.md can be checked
    against the code.
    """
    entry = registry[fid]
    return make_finding(
        fid,
        severity or entry["severity"],
        title or entry["title"],
        evidence=evidence,
        remedy=entry.get("remedy"),
        fix_role=entry.get("role"),
        fix_tag=entry.get("tag"),
        subject=subject,
    )


def at_or_above(threshold):
    """The severities at ``threshold`` or worse; () for ``never``/``none``/None.

    The one severity ladder of the collection: node_audit's and
    audit_report's ``fail_on``, the JUnit report and the
    ``nodefix.k8s.findings_at_or_above`` filter (roles) all use it.
    """
    if threshold in (None, "never", "none"):
        return ()
    if threshold not in SEVERITIES:
        raise ValueError("severity %r is not one of %s (or never)" % (threshold, ", ".join(SEVERITIES)))
    return SEVERITIES[:SEVERITIES.index(threshold) + 1]


def findings_at_or_above(findings, threshold, ignore=()):
    """The findings at ``threshold`` or worse, leaving out the ids in ``ignore``."""
    levels = at_or_above(threshold)
    return [f for f in findings if f.get("severity") in levels and f.get("id") not in ignore]


def worst_severity(findings):
    """The most severe level among ``findings`` (None when there are none)."""
    levels = [f["severity"] for f in findings]
    for level in SEVERITIES:
        if level in levels:
            return level
    return None
