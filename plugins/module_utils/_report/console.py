# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The report's console table (``audit_report``'s ``table``) and the sentences every format opens with (the run,
the storm breaker, the slices), over the model ``_report.model`` builds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import textwrap

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import NO_NODE, change_rows, evidence_line, not_durable_notes


def node_cell(node):
    """Short text for a node's result: worst severity and count, or its error."""
    if node["status"] != "ok":
        return node["status"].upper()
    if not node["findings"]:
        return "clean (%d waived)" % len(node["waived"]) if node.get("waived") else "clean"
    worst = next(s for s in SEVERITIES if node["counts"][s])
    return "%d (%s)" % (len(node["findings"]), worst)


# The console is often 80-120 columns: one line per node with counts, the ids below it, wrapped.
TABLE_WIDTH = 100
# more clean nodes than this are one line of the console table, not a row each
CLEAN_ROWS = 20


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


def storm_lines(model):
    """What the storm breaker saw, in sentences (every format); [] when it saw nothing to say."""
    storm = model.get("storm")
    if not storm or not (storm["over"] or storm["fleet_wide"]):
        return []
    lines = []
    if storm["msg"]:
        lines.append(storm["msg"])
    if storm["fleet_wide"]:
        lines.append("Fleet-wide (on more than %d%% of the %d node(s)): %s - one cause is likelier than %s node faults"
                     % (storm["percent"], storm["size"], ", ".join(
                         "%s on %d (%s%%)" % (w["id"], w["nodes"], ("%.1f" % (w["share"] or 0)).rstrip("0").rstrip("."))
                         for w in storm["fleet_wide"]), "independent"))
    return lines


def run_lines(model):
    """What the report is of, first in every format: when (UTC), which run, which collection, what mode, how much
    of the inventory; a DRY RUN (check mode) and a FAILED run say so in words. Empty for a model without ``run``."""
    run = model.get("run") or {}
    if not run:
        return []
    parts = ["Generated %s" % (run.get("generated") or "at an unknown time")]
    if run.get("collection_version"):
        parts.append("by nodefix.k8s %s" % run["collection_version"])
    if run.get("id"):
        parts.append("run %s" % run["id"])
    what = run.get("mode") or "audit"
    if run.get("inventory_size") is not None:
        what += " of %d of the inventory's %d host(s)" % (model["totals"]["nodes"], run["inventory_size"])
    lines = [", ".join(parts) + ": " + what]
    if run.get("check_mode"):
        lines.append("DRY RUN (check mode): nothing was changed on the nodes; the report shows what the run would do")
    if run.get("status") == "failed":
        lines.append("FAILED: %s" % (run.get("failure") or "the run failed before it finished"))
    return lines


def slices_line(model):
    """The sentence naming the slices a merged report was made from (Markdown and HTML)."""
    return "Merged from %d slice(s): %s" % (len(model["slices"]), "; ".join(
        "%s (%d node(s), %s)" % (s["name"], s["nodes"], s.get("generated") or "time not given")
        for s in model["slices"]))


def _is_clean(node):
    """Audited, nothing open, waived, changed or to say: one name in a list, not a section of its own."""
    return needs_no_attention(node) and not node.get("waived")


def needs_no_attention(node):
    """Audited, nothing open, no remediation story: at most waived findings (listed by waiver, not by node)."""
    return node["status"] == "ok" and not node["findings"] and "before" not in node and "remediation" not in node


def waived_groups(model):
    """The waived findings by waiver (id, reason, expiry): {id, reason, expires, hosts}, most hosts first."""
    by_key = {}
    for n in model["nodes"]:
        for f in n.get("waived") or []:
            w = f["waiver"]
            entry = by_key.setdefault((f["id"], w.get("reason"), w.get("expires")),
                                      {"id": f["id"], "reason": w.get("reason"), "expires": w.get("expires"), "hosts": []})
            if not entry["hosts"] or entry["hosts"][-1] != n["host"]:
                entry["hosts"].append(n["host"])
    return sorted(by_key.values(), key=lambda e: (-len(e["hosts"]), e["id"]))


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
                   node_cell(n).split(" (")[0], str(len(n.get("fixed") or [])), str(len(n.get("new") or []))]
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

    lines = []
    for sentence in run_lines(model) + storm_lines(model):
        lines += textwrap.wrap(sentence, width=width)
    lines += [fmt(header), fmt(["-" * w for w in widths])]
    if not model["nodes"]:
        lines += textwrap.wrap(NO_NODE, width=width)
    clean = [n["host"] for n in model["nodes"] if _is_clean(n)]
    collapse = len(clean) > CLEAN_ROWS
    for n, row in zip(model["nodes"], rows):
        if collapse and _is_clean(n):
            continue
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
        lines += _wrap("not durable", sorted(set([r["setting"] for r in change_rows(n) if r["durable"] not in ("", "yes")]
                                                 + ["kubelet %s" % e["setting"] for e in not_durable_notes(n)])),
                       width)
        lines += _wrap("actions", (n.get("remediation") or {}).get("actions") or [], width)
        if evidence_line(n):
            lines += _wrap("evidence", [evidence_line(n).split(": ", 1)[1]], width)
        rem = n.get("remediation") or {}
        if rem.get("msg") and rem.get("status") in ("failed", "skipped", "not run"):
            msg = str(rem["msg"]).splitlines()[0]
            lines += _wrap(rem["status"], [msg if len(msg) <= 300 else msg[:297] + "..."], width)
    if collapse:
        lines += textwrap.wrap("%d node(s) with no findings, not listed one by one (the report files name them): %s" % (
            len(clean), ", ".join(clean[:5]) + (", ..." if len(clean) > 5 else "")), width=width)
    return lines
