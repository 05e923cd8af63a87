# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Fleet reports from node_audit results: JSON, Markdown, HTML, JUnit XML.

Pure functions over plain data so they can be unit tested; the
audit_report module writes their output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import fnmatch
import json
import textwrap
import xml.etree.ElementTree as ET
from html import escape as _html_escape

from ansible_collections.nodefix.k8s.plugins.module_utils._common import SEVERITIES, at_or_above, findings_at_or_above
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import failed_checks, fleet_textfile
COLOURS = {
    "critical": "#b71c1c",
    "high": "#e65100",
    "medium": "#f9a825",
    "low": "#1565c0",
    "info": "#607d8b",
    "ok": "#2e7d32",
    "error": "#6a1b9a",
    "waived": "#9e9e9e",
}

WAIVER_KEYS = ("id", "reason", "hosts", "subject", "expires")


class WaiverError(ValueError):
    pass


def check_waivers(waivers, today=None):
    """Validate waivers; return (active, expired).

    A waiver is ``{"id": <finding id or glob>, "reason": <text>, "hosts":
    [<host globs>], "subject": <glob>, "expires": "YYYY-MM-DD"}``; ``id`` and
    ``reason`` are required. A waiver past its ``expires`` date no longer
    applies (its findings count again) and is returned in ``expired``.
    Raises WaiverError on bad input.
    """
    today = today or datetime.date.today()
    active, expired = [], []
    for i, w in enumerate(waivers or []):
        if not isinstance(w, dict):
            raise WaiverError("waivers[%d] must be a dict, got %s" % (i, type(w).__name__))
        unknown = sorted(set(w) - set(WAIVER_KEYS))
        if unknown:
            raise WaiverError("waivers[%d] has unknown key(s) %s (known: %s)" % (i, ", ".join(unknown), ", ".join(WAIVER_KEYS)))
        for key in ("id", "reason"):
            if not isinstance(w.get(key), str) or not w[key].strip():
                raise WaiverError("waivers[%d] needs a non-empty %s" % (i, key))
        hosts = w.get("hosts") or ["*"]
        if isinstance(hosts, str):
            hosts = [hosts]
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise WaiverError("waivers[%d].hosts must be a list of host names or globs" % i)
        norm = {"id": w["id"].strip(), "reason": w["reason"].strip(), "hosts": hosts,
                "subject": w.get("subject") or "*", "expires": None}
        if w.get("expires"):
            try:
                until = datetime.datetime.strptime(str(w["expires"]), "%Y-%m-%d").date()
            except ValueError:
                raise WaiverError("waivers[%d].expires must be a date YYYY-MM-DD, got %r" % (i, w["expires"]))
            norm["expires"] = until.isoformat()
            if until < today:
                expired.append(norm)
                continue
        active.append(norm)
    return active, expired


def waiver_for(waivers, host, finding):
    """The first active waiver (from ``check_waivers``) that matches ``finding`` on ``host``, else None."""
    for w in waivers:
        if (any(fnmatch.fnmatchcase(host, h) for h in w["hosts"])
                and fnmatch.fnmatchcase(finding.get("id") or "", w["id"])
                and fnmatch.fnmatchcase(str(finding.get("subject") or ""), w["subject"])):
            return w
    return None


def _esc(value):
    return _html_escape("" if value is None else str(value), quote=True)


def _rank(severity):
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def _node_state(result):
    """(status, findings, error) of one host's node_audit result."""
    if result is None:
        return "missing", [], "no audit result"
    if result.get("not_run"):
        return "not run", [], result.get("msg") or "not run"
    if result.get("unreachable"):
        return "unreachable", [], result.get("msg") or "unreachable"
    if result.get("failed") and "findings" not in result:
        return "error", [], result.get("msg") or "audit failed"
    return "ok", list(result.get("findings") or []), None


def _node(host, result, before, remediation, waivers=()):
    status, findings, error = _node_state(result)
    findings = sorted(findings, key=lambda f: (_rank(f.get("severity")), f.get("id"), str(f.get("subject"))))
    open_findings, waived = [], []
    for f in findings:
        w = waiver_for(waivers, host, f)
        if w:
            waived.append(dict(f, waiver={"reason": w["reason"], "expires": w["expires"], "id": w["id"]}))
        else:
            open_findings.append(f)
    node = {
        "host": host,
        "status": status,
        "error": error,
        "findings": open_findings,
        "counts": dict((s, sum(1 for f in open_findings if f.get("severity") == s)) for s in SEVERITIES),
        "ids": sorted(set(f["id"] for f in open_findings)),
        "waived": waived,
        "waived_ids": sorted(set(f["id"] for f in waived)),
        "checks_failed": failed_checks(result) if status == "ok" else {},
    }
    if host in before:
        b_status, b_findings, b_error = _node_state(before[host])
        b_ids = set(f["id"] for f in b_findings)
        node["before"] = {"status": b_status, "error": b_error, "ids": sorted(b_ids), "total": len(b_findings)}
        node["fixed"] = sorted(b_ids - set(node["ids"]) - set(node["waived_ids"]))
        node["new"] = sorted(set(node["ids"]) - b_ids)
        node["still_open"] = sorted(set(node["ids"]) & b_ids)
        node["changes"] = changes((before[host] or {}).get("checks"), (result or {}).get("checks"))
        node["pods_to_recreate"] = list(_dig((result or {}).get("checks"), "gvisor.plan.recreate.pods") or [])
    if host in remediation:
        rem = dict(remediation[host] or {})
        if rem.get("unreachable") or rem.get("not_run"):
            rem = {"status": "not run", "msg": rem.get("msg")}
        node["remediation"] = rem
    return node


# What a remediation changed, read from the facts of the audits before and after it (node_audit's
# ``checks``): (label, detector, dotted path). A value that differs is listed as before -> after.
CHANGE_FACTS = [
    ("containerd", "containerd", "version"),
    ("containerd restarted (start time)", "containerd", "daemon.started"),
    ("runc", "containerd", "runc.version"),
    ("runsc", "gvisor", "runsc.version"),
    ("runsc.toml systemd-cgroup", "gvisor", "shim_config.systemd_cgroup"),
    ("runsc runtimes in containerd", "gvisor", "containerd.runsc_runtimes"),
    ("kubelet flags deprecated by its config file", "kubelet", "kubelet.deprecated_flags"),
    # each label says exactly what its fact counts (test_report.py holds them to kubelet_mount_units' facts)
    ("leaked kubelet scopes", "mount_units", "mount_units.orphaned_scopes"),
    ("leaked kubelet units (scopes and mounts)", "mount_units", "mount_units.orphaned"),
    ("kubelet scopes (live and leaked)", "mount_units", "mount_units.scopes"),
    ("dead mount units", "mount_units", "mount_units.dead_mount_units"),
    ("kernel.pid_max", "pids", "pid_max"),
    ("kernel.pid_max persisted", "pids", "pid_max_persisted.value"),
    ("zombies", "pids", "zombies"),
]


def _dig(facts, dotted):
    for key in dotted.split("."):
        if not isinstance(facts, dict) or key not in facts:
            return None
        facts = facts[key]
    return facts


def _short(value):
    if isinstance(value, list):
        return "%d item(s)" % len(value) if len(json.dumps(value, default=str)) > 60 else json.dumps(value, default=str)
    if isinstance(value, float) and value > 1e9:
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).strftime("%H:%M:%S UTC")
    return str(value)


def changes(before_checks, after_checks):
    """[{what, before, after}] of the facts a remediation changed (CHANGE_FACTS, and every kubelet
    setting's effective value), read from the two audits' ``checks``; nothing when a side is missing."""
    before_checks, after_checks = before_checks or {}, after_checks or {}
    specs = list(CHANGE_FACTS)
    fields = set((_dig(before_checks.get("kubelet"), "kubelet.effective") or {})) | set(
        (_dig(after_checks.get("kubelet"), "kubelet.effective") or {}))
    specs += [("kubelet %s" % f, "kubelet", "kubelet.effective.%s.value" % f) for f in sorted(fields)]
    out = []
    for label, check, path in specs:
        b, a = _dig(before_checks.get(check), path), _dig(after_checks.get(check), path)
        if b is None or a is None or b == a:
            continue
        out.append({"what": label, "before": _short(b), "after": _short(a)})
    return out


class ReportInputError(ValueError):
    """A node_audit result (or before/remediation entry) of the wrong shape."""


def check_results(results, what="results"):
    """Refuse results that are not node_audit results, naming host, index and key."""
    if results is None:
        return
    if not isinstance(results, dict):
        raise ReportInputError("%s must be a dict keyed by host, got %s" % (what, type(results).__name__))
    for host, result in results.items():
        if result is None:
            continue
        if not isinstance(result, dict):
            raise ReportInputError("%s[%s] must be a node_audit result (a dict), got %s"
                                   % (what, host, type(result).__name__))
        findings = result.get("findings")
        if findings is None:
            continue
        if not isinstance(findings, list):
            raise ReportInputError("%s[%s].findings must be a list, got %s" % (what, host, type(findings).__name__))
        for idx, f in enumerate(findings):
            where = "%s[%s].findings[%d]" % (what, host, idx)
            if not isinstance(f, dict):
                raise ReportInputError("%s must be a dict, got %s" % (where, type(f).__name__))
            if not isinstance(f.get("id"), str) or not f.get("id"):
                raise ReportInputError("%s has no id (a non-empty string)" % where)
            if f.get("severity") not in SEVERITIES:
                raise ReportInputError("%s (%s) has unknown severity %r (known: %s)"
                                       % (where, f["id"], f.get("severity"), ", ".join(SEVERITIES)))
            for key in ("title", "remedy"):
                if f.get(key) is not None and not isinstance(f.get(key), str):
                    raise ReportInputError("%s (%s).%s must be a string" % (where, f["id"], key))
            if f.get("subject") is not None and not isinstance(f.get("subject"), (str, int)):
                raise ReportInputError("%s (%s).subject must be a string" % (where, f["id"]))


def check_remediation(remediation):
    if remediation is None:
        return
    if not isinstance(remediation, dict):
        raise ReportInputError("remediation must be a dict keyed by host, got %s" % type(remediation).__name__)
    for host, rem in remediation.items():
        if rem is not None and not isinstance(rem, dict):
            raise ReportInputError("remediation[%s] must be a dict (status, msg, roles), got %s"
                                   % (host, type(rem).__name__))


def build_model(results, before=None, remediation=None, title="nodefix.k8s fleet audit", generated=None,
                waivers=None, today=None):
    """Normalise per-host results into the report model.

    ``results``: {host: node_audit result}; ``before``: the same shape from an
    earlier audit (remediate's before/after); ``remediation``:
    {host: {"status": "ok"|"failed"|"skipped", "msg": ..., "roles": [...]}};
    ``waivers``: see check_waivers (waived findings are listed apart and do
    not count as findings). Raises WaiverError on a bad waiver.
    """
    before = before or {}
    remediation = remediation or {}
    active, expired = check_waivers(waivers, today)
    nodes = [_node(host, results[host], before, remediation, active) for host in sorted(results)]
    return assemble(nodes, title, generated, expired)


def missing_node(host, error):
    """The node entry of a host no result exists for (status ``missing``)."""
    node = _node(host, None, {}, {})
    node["error"] = error
    return node


def assemble(nodes, title, generated, expired):
    """The report model around its node entries (sorted by host): finding ids, totals.

    Shared by build_model and the merge of sliced runs (_report_merge), so a merged
    report is the single run's model. Linear in the nodes: a finding id's hosts are
    collected in order without a membership scan of the list.
    """
    ids = {}
    seen = set()
    for node in nodes:
        for f in node["findings"]:
            entry = ids.get(f["id"])
            if entry is None:
                entry = ids[f["id"]] = {"id": f["id"], "severity": f.get("severity"), "title": f.get("title"),
                                        "remedy": f.get("remedy"), "fix": f.get("fix") or {}, "hosts": []}
            if (f["id"], node["host"]) not in seen:
                seen.add((f["id"], node["host"]))
                entry["hosts"].append(node["host"])
            if _rank(f.get("severity")) < _rank(entry["severity"]):
                entry["severity"] = f.get("severity")
    totals = dict((s, sum(n["counts"][s] for n in nodes)) for s in SEVERITIES)
    return {
        "title": title,
        "generated": generated,
        "nodes": nodes,
        "finding_ids": sorted(ids.values(), key=lambda e: (_rank(e["severity"]), e["id"])),
        "totals": {
            "nodes": len(nodes),
            "nodes_with_findings": sum(1 for n in nodes if n["findings"]),
            "nodes_in_error": sum(1 for n in nodes if n["status"] != "ok"),
            "findings": sum(totals.values()),
            "by_severity": totals,
            "waived": sum(len(n["waived"]) for n in nodes),
        },
        "waivers_expired": expired,
    }


def policy(model, fail_on="never"):
    """The fail policy over the open (not waived) findings of every node.

    ``failed`` is true when a finding is at ``fail_on`` or worse, or when a
    node could not be audited (its findings are unknown) and a policy is set,
    or when no node was audited at all (an empty report is not a clean fleet).
    """
    failing = [{"host": n["host"], "id": f["id"], "severity": f.get("severity"), "subject": f.get("subject")}
               for n in model["nodes"] for f in findings_at_or_above(n["findings"], fail_on)]
    unaudited = [n["host"] for n in model["nodes"] if n["status"] != "ok"] if fail_on != "never" else []
    empty = fail_on != "never" and not model["nodes"]
    msg = None
    if empty:
        return {"fail_on": fail_on, "failed": True, "failing": [], "unaudited": [],
                "msg": "%s: nothing was checked" % NO_NODE}
    if failing or unaudited:
        parts = []
        if failing:
            parts.append("%d finding(s) at %s or worse: %s" % (
                len(failing), fail_on, ", ".join(sorted(set("%s on %s" % (f["id"], f["host"]) for f in failing)))))
        if unaudited:
            parts.append("not audited: %s" % ", ".join(unaudited))
        msg = "; ".join(parts)
    return {"fail_on": fail_on, "failed": bool(failing or unaudited), "failing": failing, "unaudited": unaudited,
            "msg": msg}


def to_json(model):
    return json.dumps(model, indent=2, sort_keys=True, default=str) + "\n"


def _node_cell(node):
    """Short text for a node's result: worst severity and count, or its error."""
    if node["status"] != "ok":
        return node["status"].upper()
    if not node["findings"]:
        return "clean (%d waived)" % len(node["waived"]) if node.get("waived") else "clean"
    worst = next(s for s in SEVERITIES if node["counts"][s])
    return "%d (%s)" % (len(node["findings"]), worst)


NO_NODE = "no node was audited (the targets matched no host, or every host was left out)"


# The console is often 80-120 columns: one line per node with counts, the ids below it, wrapped.
TABLE_WIDTH = 100


def _wrap(label, items, width):
    """``  label: a, b, c`` wrapped to ``width`` with the continuation lines indented."""
    if not items:
        return []
    return textwrap.wrap(", ".join(items), width=width, initial_indent="  %s: " % label,
                         subsequent_indent=" " * (len(label) + 4), break_on_hyphens=False, break_long_words=True)


def _rem_text(node):
    rem = node.get("remediation") or {}
    text = rem.get("status", "-")
    if rem.get("seconds") is not None:
        text += " %ss" % rem["seconds"]
    return text


def table_lines(model, width=TABLE_WIDTH):
    """Plain-text table for the console, no line longer than ``width``.

    One row a node with counts (before/after/fixed/new when a before-audit is
    known, the remediation status and time), then the ids below it, wrapped.
    """
    width = max(int(width or TABLE_WIDTH), 60)
    has_before = any("before" in n for n in model["nodes"])
    has_rem = any("remediation" in n for n in model["nodes"])
    header = ["node"] + (["before", "after", "fixed", "new"] if has_before else ["findings", "worst"])
    header += ["waived"] + (["remediation"] if has_rem else [])
    rows = []
    for n in model["nodes"]:
        if has_before:
            b = n.get("before") or {}
            row = [str(b.get("total", "-")) if b.get("status", "ok") == "ok" else b.get("status", "-").upper(),
                   _node_cell(n).split(" (")[0], str(len(n.get("fixed") or [])), str(len(n.get("new") or []))]
        else:
            worst = next((s for s in SEVERITIES if n["counts"][s]), "-")
            row = [str(len(n["findings"])) if n["status"] == "ok" else n["status"].upper(), worst]
        rows.append([n["host"]] + row + [str(len(n.get("waived") or []))] + ([_rem_text(n)] if has_rem else []))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(1, len(header))]
    # the node column takes what is left, at least 12 characters (longer names are cut with "~")
    node_w = max(12, min(max(len(r[0]) for r in [header] + rows), width - sum(w + 2 for w in widths)))
    widths = [node_w] + widths

    def fmt(row):
        cells = [row[0] if len(row[0]) <= node_w else row[0][:node_w - 1] + "~"] + row[1:]
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()[:width]

    lines = [fmt(header), fmt(["-" * w for w in widths])]
    if not model["nodes"]:
        lines += textwrap.wrap(NO_NODE, width=width)
    for n, row in zip(model["nodes"], rows):
        lines.append(fmt(row))
        if n["status"] != "ok":
            lines += _wrap("error", [str(n.get("error") or n["status"]).splitlines()[0]], width)
        if has_before:
            lines += _wrap("fixed", n.get("fixed") or [], width)
            lines += _wrap("open", n.get("still_open") or [], width)
            lines += _wrap("new", n.get("new") or [], width)
        else:
            lines += _wrap("ids", n["ids"], width)
        lines += _wrap("waived", n.get("waived_ids") or [], width)
        lines += _wrap("changed", ["%s %s -> %s" % (c["what"], c["before"], c["after"]) for c in n.get("changes") or []],
                       width)
        lines += _wrap("pods to recreate", n.get("pods_to_recreate") or [], width)
        lines += _wrap("not durable", (n.get("remediation") or {}).get("not_durable") or [], width)
        lines += _wrap("actions", (n.get("remediation") or {}).get("actions") or [], width)
        rem = n.get("remediation") or {}
        if rem.get("msg") and rem.get("status") in ("failed", "skipped", "not run"):
            msg = str(rem["msg"]).splitlines()[0]
            lines += _wrap(rem["status"], [msg if len(msg) <= 300 else msg[:297] + "..."], width)
    return lines


def to_markdown(model):
    t = model["totals"]
    out = ["# %s" % model["title"], ""]
    if model.get("generated"):
        out += ["Generated: %s" % model["generated"], ""]
    out.append("%d node(s), %d with findings, %d in error; %d finding(s): %s%s." % (
        t["nodes"], t["nodes_with_findings"], t["nodes_in_error"], t["findings"],
        ", ".join("%s %d" % (s, t["by_severity"][s]) for s in SEVERITIES if t["by_severity"][s]) or "none",
        "; %d waived" % t["waived"] if t.get("waived") else "") + ("" if t["nodes"] else " **%s.**" % NO_NODE))
    if model.get("slices"):
        out += ["", "Merged from %d slice(s): %s." % (len(model["slices"]), "; ".join(
            "%s (%d node(s), %s)" % (s["name"], s["nodes"], s.get("generated") or "time not given")
            for s in model["slices"]))]
    for w in model.get("waivers_expired") or []:
        out += ["", "**Expired waiver** (its findings count again): `%s` on %s, expired %s - %s" % (
            w["id"], ", ".join(w["hosts"]), w["expires"], w["reason"])]
    out += ["", "## Nodes", "", "```"] + table_lines(model) + ["```", ""]
    if model["finding_ids"]:
        out += ["## Findings", "", "| id | severity | nodes | fixed by | title |", "|---|---|---|---|---|"]
        for e in model["finding_ids"]:
            fix = e["fix"].get("role") or "manual"
            if e["fix"].get("tag"):
                fix += " (tag `%s`)" % e["fix"]["tag"]
            title = (e["title"] or "").replace("|", "\\|")
            out.append("| `%s` | %s | %s | %s | %s |" % (e["id"], e["severity"], ", ".join(e["hosts"]), fix, title))
        out.append("")
    for n in model["nodes"]:
        out += ["## %s" % n["host"], ""]
        if n["status"] != "ok":
            out += ["**%s**: %s" % (n["status"], n["error"]), ""]
        rem = n.get("remediation")
        if rem:
            out += ["Remediation: **%s**%s%s" % (rem.get("status"), (" in %ss" % rem["seconds"]) if rem.get("seconds") else "",
                                                 (" - " + str(rem.get("msg"))) if rem.get("msg") else ""), ""]
        if n.get("before"):
            out += ["Before: %s finding(s); fixed: %s; still open: %s; new: %s" % (
                n["before"].get("total"), ", ".join(n.get("fixed") or []) or "none",
                ", ".join(n.get("still_open") or []) or "none", ", ".join(n.get("new") or []) or "none"), ""]
            for c in n.get("changes") or []:
                out.append("- changed: %s %s -> %s" % (c["what"], c["before"], c["after"]))
            if n.get("pods_to_recreate"):
                out.append("- pods to recreate: %s" % ", ".join(n["pods_to_recreate"]))
            for where in (rem or {}).get("not_durable") or []:
                out.append("- not durable, make it so in: %s" % where)
            for action in (rem or {}).get("actions") or []:
                out.append("- %s" % action)
            out.append("")
        if not n["findings"] and n["status"] == "ok":
            out += ["No findings.", ""]
        for f in n["findings"]:
            subject = " (%s)" % f["subject"] if f.get("subject") else ""
            out.append("- **%s** `%s`%s: %s" % (f.get("severity"), f["id"], subject, f.get("title")))
            if f.get("evidence"):
                out.append("  - evidence: `%s`" % json.dumps(f["evidence"], sort_keys=True, default=str)[:600])
            if f.get("remedy"):
                out.append("  - remedy: %s" % f["remedy"])
        for f in n.get("waived") or []:
            subject = " (%s)" % f["subject"] if f.get("subject") else ""
            until = ", until %s" % f["waiver"]["expires"] if f["waiver"].get("expires") else ""
            out.append("- waived %s `%s`%s: %s" % (f.get("severity"), f["id"], subject, f.get("title")))
            out.append("  - waiver%s: %s" % (until, f["waiver"]["reason"]))
        out.append("")
    return "\n".join(out)


def _id_list(ids, css):
    if not ids:
        return "<span class=\"muted\">-</span>"
    return "<br>".join("<code class=\"%s\">%s</code>" % (css, _esc(i)) for i in ids)


def _html_before_after(model):
    """What a remediation did, node by node: before -> after, fixed, still open, new, waived, status and time."""
    h = ["<h2>Before and after</h2>",
         "<table id=\"before-after\"><thead><tr><th>node</th><th>before</th><th>after</th><th>fixed</th>"
         "<th>still open</th><th>new</th><th>waived</th><th>what changed</th><th>remediation</th></tr></thead><tbody>"]
    for n in model["nodes"]:
        b = n.get("before") or {}
        rem = n.get("remediation") or {}
        status = rem.get("status", "-")
        if rem.get("seconds") is not None:
            status += " in %ss" % rem["seconds"]
        css = {"ok": "s-ok", "failed": "s-error"}.get(rem.get("status"), "s-info")
        changed = ["%s: %s &rarr; %s" % (_esc(c["what"]), _esc(c["before"]), _esc(c["after"]))
                   for c in n.get("changes") or []]
        if n.get("pods_to_recreate"):
            changed.append("pods to recreate: %s" % _esc(", ".join(n["pods_to_recreate"])))
        for where in rem.get("not_durable") or []:
            changed.append("<span class=\"muted\">not durable, make it so in: %s</span>" % _esc(where))
        changed += [_esc(action) for action in rem.get("actions") or []]
        h.append("<tr><th>%s</th><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                 "<td><span class=\"sev %s\">%s</span> %s%s</td></tr>" % (
                     _esc(n["host"]), _esc(b.get("total", "-") if b.get("status", "ok") == "ok" else b.get("status")),
                     _esc(_node_cell(n)), _id_list(n.get("fixed"), "fixed"), _id_list(n.get("still_open"), "open"),
                     _id_list(n.get("new"), "new"), _id_list(n.get("waived_ids"), "waived"),
                     "<br>".join(changed) or "<span class=\"muted\">-</span>", css, _esc(status),
                     _esc(rem.get("msg") or ""),
                     ("<br><span class=\"muted\">roles: %s</span>" % _esc(", ".join(rem["roles"])))
                     if rem.get("roles") else ""))
    h.append("</tbody></table>")
    return h


# Long on purpose (~100 lines): the HTML page top to bottom, in the order it renders.
def to_html(model):
    """A self-contained page: nodes x findings matrix coloured by severity."""
    t = model["totals"]
    ids = model["finding_ids"]
    css = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121}
h1{font-size:22px}table{border-collapse:collapse;margin:12px 0}
th,td{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left;vertical-align:top}
th.rot{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
td.cell{text-align:center;color:#fff;font-weight:600}
.sev{display:inline-block;padding:1px 6px;border-radius:3px;color:#fff;font-size:12px}
.muted{color:#757575}details{margin:6px 0}code{font-size:12px}
code.fixed{color:#2e7d32}code.new{color:#c62828;font-weight:600}code.waived{color:#757575}
"""
    for level, colour in COLOURS.items():
        css += ".s-%s{background:%s}\n" % (level, colour)
    h = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
         "<title>%s</title><style>%s</style></head><body>" % (_esc(model["title"]), css),
         "<h1>%s</h1>" % _esc(model["title"])]
    if model.get("generated"):
        h.append("<p class=\"muted\">Generated %s</p>" % _esc(model["generated"]))
    h.append("<p id=\"summary\">%d node(s), %d with findings, %d in error; %d finding(s) " % (
        t["nodes"], t["nodes_with_findings"], t["nodes_in_error"], t["findings"]))
    if not t["nodes"]:
        h.append("<strong>%s.</strong> " % _esc(NO_NODE))
    h.append(" ".join("<span class=\"sev s-%s\">%s %d</span>" % (s, s, t["by_severity"][s]) for s in SEVERITIES))
    if t.get("waived"):
        h.append("<span class=\"sev s-waived\">waived %d</span>" % t["waived"])
    h.append("</p>")
    if model.get("slices"):
        h.append("<p id=\"slices\" class=\"muted\">Merged from %d slice(s): %s</p>" % (len(model["slices"]), _esc("; ".join(
            "%s (%d node(s), %s)" % (s["name"], s["nodes"], s.get("generated") or "time not given")
            for s in model["slices"]))))
    for w in model.get("waivers_expired") or []:
        h.append("<p><span class=\"sev s-error\">expired waiver</span> <code>%s</code> on %s, expired %s: %s "
                 "(its findings count again)</p>"
                 % (_esc(w["id"]), _esc(", ".join(w["hosts"])), _esc(w["expires"]), _esc(w["reason"])))
    if any("before" in n for n in model["nodes"]):
        h += _html_before_after(model)
    # matrix
    h.append("<table id=\"matrix\"><thead><tr><th>node</th><th>status</th>")
    h += ["<th class=\"rot\" title=\"%s\">%s</th>" % (_esc(e["title"]), _esc(e["id"])) for e in ids]
    h.append("</tr></thead><tbody>")
    for n in model["nodes"]:
        if n["status"] != "ok":
            status_class = "error"
        elif not n["findings"]:
            status_class = "ok"
        else:
            status_class = next(s for s in SEVERITIES if n["counts"][s])
        label = _node_cell(n)
        h.append("<tr><th>%s</th><td class=\"cell s-%s\">%s</td>" % (_esc(n["host"]), status_class, _esc(label)))
        for e in ids:
            hits = [f for f in n["findings"] if f["id"] == e["id"]]
            if hits:
                sev = hits[0].get("severity")
                h.append("<td class=\"cell s-%s\" title=\"%s\">%s</td>" % (sev, _esc(sev), len(hits)))
            else:
                h.append("<td></td>")
        h.append("</tr>")
    h.append("</tbody></table>")
    # legend of ids
    if ids:
        h.append("<h2>Findings</h2><table><thead><tr><th>id</th><th>severity</th><th>title</th><th>fixed by</th>"
                 "<th>remedy</th></tr></thead><tbody>")
        for e in ids:
            fix = e["fix"].get("role") or "manual"
            if e["fix"].get("tag"):
                fix += " (tag %s)" % e["fix"]["tag"]
            h.append("<tr><td><code>%s</code></td><td><span class=\"sev s-%s\">%s</span></td><td>%s</td><td>%s</td>"
                     "<td>%s</td></tr>" % (_esc(e["id"]), _esc(e["severity"]), _esc(e["severity"]),
                                           _esc(e["title"]), _esc(fix), _esc(e["remedy"])))
        h.append("</tbody></table>")
    # per node details
    h.append("<h2>Nodes</h2>")
    for n in model["nodes"]:
        is_open = " open" if n["findings"] or n["status"] != "ok" else ""
        h.append("<details%s><summary><b>%s</b> - %s</summary>" % (is_open, _esc(n["host"]), _esc(_node_cell(n))))
        if n["status"] != "ok":
            h.append("<p><span class=\"sev s-error\">%s</span> %s</p>" % (_esc(n["status"]), _esc(n["error"])))
        if n.get("before"):
            h.append("<p>before: %s finding(s); fixed: %s</p>" % (_esc(n["before"].get("total")),
                                                                  _esc(", ".join(n.get("fixed") or []) or "none")))
        rem = n.get("remediation")
        if rem:
            h.append("<p>remediation: <b>%s</b> %s</p>" % (_esc(rem.get("status")), _esc(rem.get("msg") or "")))
        if n["findings"]:
            h.append("<ul>")
            for f in n["findings"]:
                h.append("<li><span class=\"sev s-%s\">%s</span> <code>%s</code>%s %s<br><span class=\"muted\">%s</span>"
                         "<br><code>%s</code></li>" % (
                             _esc(f.get("severity")), _esc(f.get("severity")), _esc(f["id"]),
                             (" (%s)" % _esc(f["subject"])) if f.get("subject") else "", _esc(f.get("title")),
                             _esc(f.get("remedy")), _esc(json.dumps(f.get("evidence") or {}, sort_keys=True, default=str)[:800])))
            h.append("</ul>")
        if n.get("waived"):
            h.append("<p class=\"muted\">waived:</p><ul class=\"waived\">")
            for f in n["waived"]:
                until = " (until %s)" % f["waiver"]["expires"] if f["waiver"].get("expires") else ""
                h.append("<li><span class=\"sev s-waived\">waived</span> <code>%s</code>%s %s<br>"
                         "<span class=\"muted\">%s%s</span></li>" % (
                             _esc(f["id"]), (" (%s)" % _esc(f["subject"])) if f.get("subject") else "",
                             _esc(f.get("title")), _esc(f["waiver"]["reason"]), _esc(until)))
            h.append("</ul>")
        h.append("</details>")
    h.append("</body></html>")
    return "\n".join(h) + "\n"


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


RENDERERS = {
    "json": ("report.json", to_json),
    "markdown": ("report.md", to_markdown),
    "html": ("report.html", to_html),
    "junit": ("junit.xml", to_junit),
    "prometheus": ("nodefix.prom", fleet_textfile),
}
