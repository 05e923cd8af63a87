# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The fleet report as one self-contained HTML page, readable at any fleet size; the renderers.

Top to bottom: the totals; the nodes grouped by what is wrong with them (a person finds the 12
broken nodes among 10,000 in the first lines: one row per group, worst first, the clean nodes
one row at the end); a filter box (node name or finding id) over everything below it; the
before/after table of a remediation with, per node, what changed as a table (setting, before,
after, durable or where to make it so); the nodes x findings matrix and the per-node details of
the nodes that are not clean only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES, TEXTFILE
from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import fleet_textfile
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.dry_run import plan_lines
from ansible_collections.nodefix.k8s.plugins.module_utils._report.console import (
    needs_no_attention,
    node_cell,
    run_lines,
    slices_line,
    storm_lines,
    waived_groups,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._report.document import to_junit, to_markdown
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import (
    COLOURS,
    NO_NODE,
    _esc,
    change_rows,
    evidence_line,
    not_durable_notes,
    to_json,
)

# a break opportunity after a '.', '_' or '/' followed by a letter or digit (ids, node names, dotted settings,
# paths; browsers break after none of them)
_BREAK_AFTER = re.compile(r"([._/])(?=[A-Za-z0-9])")

# hosts named in a group's row before the rest go behind "and N more"
GROUP_SAMPLE = 12

# Laid out for a 1280-pixel window and a phone's 390 (tests/unit/plugins/module_utils/test_report_layout.py
# measures both in headless Chromium): no table cell breaks a word inside (cells wrap at spaces, and ids and
# node names at the <wbr> after their '.', '_' and '/'); headers stay on one line; free text (messages, remedies)
# wraps a token too long for any line; a table wider than the window scrolls in its own box (.scroll), the
# page never does; the matrix keeps the node column in view while it scrolls.
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121}
@media (max-width:600px){body{margin:12px}}
h1{font-size:22px}h1,h2,p,li,summary{overflow-wrap:anywhere}
.banner{background:#fff3cd;border-left:4px solid #b26a00;padding:6px 10px}
.scroll{overflow-x:auto;max-width:100%;margin:12px 0}table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left;vertical-align:top;overflow-wrap:normal}
thead th{white-space:nowrap}
th.rot{writing-mode:vertical-rl;transform:rotate(180deg);padding:6px 1px;font-size:12px;line-height:1.15}
td.cell{text-align:center;color:#fff;font-weight:600;padding:2px 3px}
#matrix tbody th,#matrix thead th:first-child{position:sticky;left:0;background:#fff;z-index:1}
.free{overflow-wrap:anywhere;min-width:16em}table.changes .free{min-width:9em}
.ids{min-width:min(19em,30vw)}#before-after .ids{min-width:0}
.sev{display:inline-block;white-space:nowrap;padding:1px 6px;border-radius:3px;color:#fff;font-size:12px}
.muted{color:#757575}details{margin:6px 0}code{font-size:12px}
code.fixed{color:#2e7d32}code.new{color:#c62828;font-weight:600}code.waived{color:#757575}
table.changes td,table.changes th{font-size:12px;padding:2px 6px}
#before-after{width:100%}
#filter{font-size:14px;padding:4px 8px;width:28em;max-width:100%;box-sizing:border-box;margin:8px 0}
"""

# the filter box: hides every element with a data-search text that does not contain the query
FILTER_JS = ("document.getElementById('filter').addEventListener('input',function(e){"
             "var q=e.target.value.trim().toLowerCase();"
             "document.querySelectorAll('[data-search]').forEach(function(el){"
             "el.style.display=(!q||el.getAttribute('data-search').indexOf(q)>=0)?'':'none';});});")


def _brk(text):
    """``text`` escaped, with a ``<wbr>`` after each '.', '_' and '/' inside a word: where a finding id
    (containerd.version_below_minimum) or a node name (ip-10-0-1-2.eu-west-1.compute.internal) may break
    when its column is narrow - never inside a word."""
    return _BREAK_AFTER.sub("\\1<wbr>", _esc(text))


def _free(text, css="free"):
    """Free text (a message, a remedy) in a table cell: wraps at spaces and at ids' '.'/'_', and a token too
    long for any line wraps anywhere; the cell keeps room for its ordinary words (.free's min-width)."""
    return "<div class=\"%s\">%s</div>" % (css, _brk(text))


def _id_list(ids, css):
    if not ids:
        return "<span class=\"muted\">-</span>"
    return "<div class=\"ids\">%s</div>" % "<br>".join("<code class=\"%s\">%s</code>" % (css, _brk(i)) for i in ids)


def _search(node):
    return _esc(" ".join([node["host"], node["status"]] + node["ids"] + node.get("waived_ids", [])).lower())


def _worst(node):
    if node["status"] != "ok":
        return "error"
    return next((s for s in SEVERITIES if node["counts"][s]), "ok")


def groups(model):
    """Nodes with the same state and the same open finding ids, worst first, the largest first within."""
    by_key = {}
    for n in model["nodes"]:
        key = (_worst(n), n["status"], tuple(n["ids"]))
        by_key.setdefault(key, []).append(n["host"])
    order = dict((s, i) for i, s in enumerate(["error"] + list(SEVERITIES) + ["ok"]))
    return [{"worst": k[0], "status": k[1], "ids": list(k[2]), "hosts": hosts}
            for k, hosts in sorted(by_key.items(), key=lambda kv: (order[kv[0][0]], -len(kv[1]), kv[0]))]


def _html_groups(model):
    h = ["<h2>Nodes by state</h2><div class=\"scroll\"><table id=\"groups\"><thead><tr><th>nodes</th><th>state</th><th>open findings</th>"
         "<th>hosts</th></tr></thead><tbody>"]
    for g in groups(model):
        hosts = g["hosts"]
        shown = ", ".join(hosts[:GROUP_SAMPLE])
        if len(hosts) > GROUP_SAMPLE:
            shown = "%s <details><summary>and %d more</summary>%s</details>" % (
                _brk(shown), len(hosts) - GROUP_SAMPLE, _brk(", ".join(hosts[GROUP_SAMPLE:])))
        else:
            shown = _brk(shown)
        state = g["status"] if g["status"] != "ok" else ("no findings" if g["worst"] == "ok" else "worst: " + g["worst"])
        h.append("<tr><td>%d</td><td><span class=\"sev s-%s\">%s</span></td><td>%s</td><td>%s</td></tr>" % (
            len(hosts), g["worst"], _esc(state), _id_list(g["ids"], "open"), shown))
    h.append("</tbody></table></div>")
    return h


def _changes_table(node):
    rows = change_rows(node)
    if not rows:
        return ""
    cells = "".join("<tr class=\"change\"><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
        _brk(r["setting"]), _brk(r["before"]), _brk(r["after"]),
        _esc(r["durable"]) if r["durable"] in ("", "yes") else "<div class=\"free\"><b>no</b>: %s</div>" % _brk(r["durable"]))
        for r in rows)
    return ("<table class=\"changes\"><thead><tr class=\"change\"><th>setting</th><th>before</th><th>after</th>"
            "<th>durable</th></tr></thead><tbody>%s</tbody></table>" % cells)


def _html_before_after(model):
    """What a remediation did, node by node: before -> after, fixed, still open, new, waived, status and time."""
    h = ["<h2>Before and after</h2>",
         "<div class=\"scroll\"><table id=\"before-after\"><thead><tr><th>node</th><th>before</th><th>after</th><th>fixed</th>"
         "<th>still open</th><th>new</th><th>waived</th><th>what changed</th><th>remediation</th></tr></thead><tbody>"]
    for n in model["nodes"]:
        b = n.get("before") or {}
        rem = n.get("remediation") or {}
        status = rem.get("status", "-")
        if rem.get("seconds") is not None:
            status += " in %ss" % rem["seconds"]
        css = {"ok": "s-ok", "failed": "s-error"}.get(rem.get("status"), "s-info")
        changed = [_changes_table(n)] if change_rows(n) else []
        changed += [_free("not durable (unchanged by this run): %s - %s" % (e["setting"], e["where"]))
                    for e in not_durable_notes(n)]
        if n.get("pods_to_recreate"):
            changed.append(_free("pods to recreate: %s" % ", ".join(n["pods_to_recreate"])))
        changed += [_free(action) for action in rem.get("actions") or []]
        if evidence_line(n):
            changed.append(_free(evidence_line(n), "free muted"))
        h.append("<tr data-search=\"%s\"><th>%s</th><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                 "<td>%s</td><td><span class=\"sev %s\">%s</span> %s%s</td></tr>" % (
                     _search(n), _brk(n["host"]),
                     _esc(b.get("total", "-") if b.get("status", "ok") == "ok" else b.get("status")),
                     _esc(node_cell(n)), _id_list(n.get("fixed"), "fixed"), _id_list(n.get("still_open"), "open"),
                     _id_list(n.get("new"), "new"), _id_list(n.get("waived_ids"), "waived"),
                     "".join(changed) or "<span class=\"muted\">-</span>", css, _esc(status),
                     _free(rem["msg"]) if rem.get("msg") else "",
                     ("<br><span class=\"muted\">roles: %s</span>" % _brk(", ".join(rem["roles"])))
                     if rem.get("roles") else ""))
    h.append("</tbody></table></div>")
    return h


def _html_matrix(model, shown):
    ids = model["finding_ids"]
    h = ["<div class=\"scroll\"><table id=\"matrix\"><thead><tr><th>node</th><th>status</th>"]
    h += ["<th class=\"rot\" title=\"%s\">%s</th>" % (_esc(e["title"]), _esc(e["id"])) for e in ids]
    h.append("</tr></thead><tbody>")
    for n in shown:
        h.append("<tr data-search=\"%s\"><th>%s</th><td class=\"cell s-%s\">%s</td>" % (
            _search(n), _brk(n["host"]), "error" if n["status"] != "ok" else _worst(n), _esc(node_cell(n))))
        counts = {}
        for f in n["findings"]:
            counts.setdefault(f["id"], [f.get("severity"), 0])[1] += 1
        for e in ids:
            if e["id"] in counts:
                sev, count = counts[e["id"]]
                h.append("<td class=\"cell s-%s\" title=\"%s\">%s</td>" % (sev, _esc(sev), count))
            else:
                h.append("<td></td>")
        h.append("</tr>")
    h.append("</tbody></table></div>")
    return h


def _html_node(n):
    h = ["<details open data-search=\"%s\"><summary><b>%s</b> - %s</summary>" % (
        _search(n), _brk(n["host"]), _esc(node_cell(n)))]
    if n["status"] != "ok":
        h.append("<p><span class=\"sev s-error\">%s</span> %s</p>" % (_esc(n["status"]), _brk(n["error"])))
    if n.get("before"):
        h.append("<p>before: %s finding(s); fixed: %s</p>" % (_esc(n["before"].get("total")),
                                                              _brk(", ".join(n.get("fixed") or []) or "none")))
    rem = n.get("remediation")
    if rem:
        h.append("<p>remediation: <b>%s</b> %s</p>" % (_esc(rem.get("status")), _brk(rem.get("msg") or "")))
    if n["findings"]:
        h.append("<ul>")
        for f in n["findings"]:
            h.append("<li><span class=\"sev s-%s\">%s</span> <code>%s</code>%s %s<br><span class=\"muted\">%s</span>"
                     "<br><code>%s</code></li>" % (
                         _esc(f.get("severity")), _esc(f.get("severity")), _brk(f["id"]),
                         (" (%s)" % _brk(f["subject"])) if f.get("subject") else "", _brk(f.get("title")),
                         _brk(f.get("remedy")), _brk(json.dumps(f.get("evidence") or {}, sort_keys=True, default=str)[:800])))
        h.append("</ul>")
    if n.get("waived"):
        h.append("<p class=\"muted\">waived:</p><ul class=\"waived\">")
        for f in n["waived"]:
            until = " (until %s)" % f["waiver"]["expires"] if f["waiver"].get("expires") else ""
            h.append("<li><span class=\"sev s-waived\">waived</span> <code>%s</code>%s %s<br>"
                     "<span class=\"muted\">%s%s</span></li>" % (
                         _brk(f["id"]), (" (%s)" % _brk(f["subject"])) if f.get("subject") else "",
                         _brk(f.get("title")), _brk(f["waiver"]["reason"]), _esc(until)))
        h.append("</ul>")
    h.append("</details>")
    return h


def to_html(model):
    """The self-contained page (no external resource; the filter box is a few lines of inline script)."""
    t = model["totals"]
    ids = model["finding_ids"]
    css = CSS + "".join(".s-%s{background:%s}\n" % (level, colour) for level, colour in COLOURS.items())
    h = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
         "<title>%s</title><style>%s</style></head><body>" % (_esc(model["title"]), css),
         "<h1>%s</h1>" % _esc(model["title"])]
    run = run_lines(model)
    if run:
        h.append("<p id=\"run\" class=\"muted\">%s</p>" % _esc(run[0]))
        h.extend("<p class=\"banner\"><strong>%s</strong></p>" % _esc(line) for line in run[1:])
    elif model.get("generated"):
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
        h.append("<p id=\"slices\" class=\"muted\">%s</p>" % _brk(slices_line(model)))
    storm = storm_lines(model)
    if storm:
        h.append("<h2>Storm breaker</h2>")
        h += ["<p class=\"storm\">%s</p>" % _brk(line) for line in storm]
    planned = [n for n in model["nodes"] if n.get("plan")]
    if planned:
        h.append("<h2 id=\"plan\">Plan (dry run)</h2><p class=\"muted\">What the run would do on each node; nothing "
                 "was changed.</p>")
        for n in planned:
            lines = plan_lines(n["plan"])
            h.append("<h3>%s</h3><ul class=\"plan\">%s</ul>" % (_brk(n["host"]), "".join(
                "<li>%s</li>" % _brk(line) for line in lines[1:] or lines)))
    for w in model.get("waivers_expired") or []:
        h.append("<p><span class=\"sev s-error\">expired waiver</span> <code>%s</code> on %s, expired %s: %s "
                 "(its findings count again)</p>"
                 % (_brk(w["id"]), _brk(", ".join(w["hosts"])), _esc(w["expires"]), _brk(w["reason"])))
    if model["nodes"]:
        h += _html_groups(model)
        h.append("<input id=\"filter\" type=\"search\" placeholder=\"filter nodes: name, state or finding id\">")
    if any("before" in n for n in model["nodes"]):
        h += _html_before_after(model)
    shown = [n for n in model["nodes"] if not needs_no_attention(n)]
    quiet = len(model["nodes"]) - len(shown)
    if shown:
        h.append("<h2>Nodes x findings</h2>")
        if quiet:
            h.append("<p class=\"muted\">%d node(s) with no open finding are not repeated below (see Nodes by state; "
                     "their waived findings are under Waived).</p>" % quiet)
        h += _html_matrix(model, shown)
    if ids:
        h.append("<h2>Findings</h2><div class=\"scroll\"><table id=\"findings\"><thead><tr><th>id</th><th>severity</th><th>nodes</th>"
                 "<th>title</th><th>fixed by</th><th>remedy</th></tr></thead><tbody>")
        for e in ids:
            fix = e["fix"].get("role") or "manual"
            if e["fix"].get("tag"):
                fix += " (tag %s)" % e["fix"]["tag"]
            h.append("<tr><td><div class=\"ids\"><code>%s</code></div></td><td><span class=\"sev s-%s\">%s</span></td><td>%d</td><td>%s</td>"
                     "<td>%s</td><td>%s</td></tr>" % (_brk(e["id"]), _esc(e["severity"]), _esc(e["severity"]),
                                                      len(e["hosts"]), _free(e["title"]), _brk(fix), _free(e["remedy"])))
        h.append("</tbody></table></div>")
    waived = waived_groups(model)
    if waived:
        h.append("<h2>Waived</h2><div class=\"scroll\"><table id=\"waived\"><thead><tr><th>id</th><th>reason</th><th>until</th>"
                 "<th>nodes</th></tr></thead><tbody>")
        for w in waived:
            hosts = w["hosts"]
            names = _brk(", ".join(hosts[:GROUP_SAMPLE]))
            if len(hosts) > GROUP_SAMPLE:
                names += " <details><summary>and %d more</summary>%s</details>" % (
                    len(hosts) - GROUP_SAMPLE, _brk(", ".join(hosts[GROUP_SAMPLE:])))
            h.append("<tr data-search=\"%s\"><td><code class=\"waived\">%s</code></td><td>%s</td><td>%s</td>"
                     "<td>%d: %s</td></tr>" % (_esc(" ".join([w["id"]] + hosts).lower()), _brk(w["id"]),
                                               _free(w["reason"]), _esc(w["expires"] or "-"), len(hosts), names))
        h.append("</tbody></table></div>")
    if shown:
        h.append("<h2>Nodes</h2>")
    for n in shown:
        h += _html_node(n)
    if model["nodes"]:
        h.append("<script>%s</script>" % FILTER_JS)
    h.append("</body></html>")
    return "\n".join(h) + "\n"


RENDERERS = {
    "json": ("report.json", to_json),
    "markdown": ("report.md", to_markdown),
    "html": ("report.html", to_html),
    "junit": ("junit.xml", to_junit),
    "prometheus": (TEXTFILE, fleet_textfile),
}
