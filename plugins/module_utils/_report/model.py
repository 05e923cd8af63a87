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
import json
import textwrap
import xml.etree.ElementTree as ET
from html import escape as _html_escape

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact, redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import (
    SEVERITIES,
    at_or_above,
    findings_at_or_above,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import printable, yaml_flow
from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import failed_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._report.dry_run import plan_lines
from ansible_collections.nodefix.k8s.plugins.module_utils._report import markdown as md
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.waivers import check_waivers, waiver_for
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

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
        # gone after, but its detector could not look: not verified, never "fixed"
        gone = b_ids - set(node["ids"]) - set(node["waived_ids"])
        node["not_verified"] = not_verified(b_findings, result, gone) if status == "ok" else sorted(gone)
        node["fixed"] = sorted(gone - set(node["not_verified"]))
        node["new"] = sorted(set(node["ids"]) - b_ids)
        node["still_open"] = sorted(set(node["ids"]) & b_ids)
        node["changes"] = changes((before[host] or {}).get("checks"), (result or {}).get("checks"))
        node["pods_to_recreate"] = list(_dig((result or {}).get("checks"), "gvisor.plan.recreate.pods") or [])
    if host in remediation:
        rem = dict(remediation[host] or {})
        plan = rem.pop("plan", None)   # a dry run's plan (remediate --check: tasks/dry_run_plan.yml)
        if isinstance(plan, dict):
            node["plan"] = plan
        if rem.get("unreachable") or rem.get("not_run"):
            rem = {"status": "not run", "msg": rem.get("msg")}
        node["remediation"] = rem
        if rem.get("status") == "unreachable":
            unreachable_at(node, rem.get("step"), rem.get("msg"))
    elif status == "unreachable" and (result or {}).get("step"):
        unreachable_at(node, result["step"], result.get("msg"))
    return node


def unreachable_at(node, step, msg):
    """Mark ``node`` unreachable at ``step`` (remediate's storm audit, audit before, fixes, audit after; the
    audit's audit): its status, ``unreachable_at`` and error say where the run lost it; nothing is fixed."""
    step = str(step or "an unnamed step")
    node.update(status="unreachable", unreachable_at=step, checks_failed={},
                error="unreachable at %s: %s" % (step, msg or "no answer"))
    if "fixed" in node:
        node["fixed"] = []


def detectors_blind(audit):
    """The detectors of a node_audit result that could not look: an ``audit.check_failed`` finding names
    them, or their facts carry an ``error``. None when ``audit`` is not a result at all."""
    if not isinstance(audit, dict):
        return None
    checks = audit.get("checks") if isinstance(audit.get("checks"), dict) else {}
    blind = set(name for name, out in checks.items() if isinstance(out, dict) and "error" in out)
    blind.update(f.get("subject") or f.get("check") for f in audit.get("findings") or []
                 if isinstance(f, dict) and f.get("id") == "audit.check_failed")
    return blind


def not_verified(before_findings, after, gone):
    """The ids of ``gone`` (before-audit finding ids the after-audit did not report) whose detector could not look
    after the fixes (``audit.check_failed``, an error in its facts, or absent from an after-audit that lists its
    detectors): a detector that could not run proves nothing, so such a finding is not verified, never fixed
    (as the reboot's verification reads it: _reboot/detect.py reasons_after)."""
    blind = detectors_blind(after)
    if blind is None:
        return []
    checks = after.get("checks") if isinstance(after.get("checks"), dict) else {}
    out = set()
    for f in before_findings or []:
        if not isinstance(f, dict) or f.get("id") not in gone:
            continue
        name = f.get("check") or str(f["id"]).split(".", 1)[0]
        if name in blind or (checks and name not in checks):
            out.add(f["id"])
    return sorted(out)


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
    """A changed value in a cell: a list or map as YAML flow (never a Python repr), "N item(s)" when long."""
    if isinstance(value, (list, dict)):
        text = yaml_flow(value)
        return "%d item(s)" % len(value) if len(text) > 60 else text
    if isinstance(value, float) and value > 1e9:
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).strftime("%H:%M:%S UTC")
    return str(value)


UNSET = "(unset)"


def _clip(value, limit=120):
    text = yaml_flow(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _value_rows(label, b, a, depth=0):
    """Rows of one changed value: a map as the keys that changed, a list of named items (runtimes) as the
    items that came, went or changed, anything else as before -> after - never two identical cells."""
    if isinstance(b, dict) and isinstance(a, dict) and depth < 3:
        rows = []
        for key in sorted(set(b) | set(a), key=str):
            if key in b and key in a and b[key] == a[key]:
                continue
            if key in b and key in a:
                rows += _value_rows("%s.%s" % (label, key), b[key], a[key], depth + 1)
            else:
                rows.append({"what": "%s.%s" % (label, key), "before": _short(b[key]) if key in b else UNSET,
                             "after": _short(a[key]) if key in a else UNSET})
        return rows
    named = isinstance(b, list) and isinstance(a, list) and all(isinstance(x, dict) and "name" in x for x in b + a)
    if named and depth < 3:
        before, after = dict((str(x["name"]), x) for x in b), dict((str(x["name"]), x) for x in a)
        rows = []
        for name in sorted(set(before) | set(after)):
            where = "%s[%s]" % (label, name)
            if name not in before:
                rows.append({"what": where, "before": UNSET, "after": "added"})
            elif name not in after:
                rows.append({"what": where, "before": "present", "after": "removed"})
            elif before[name] != after[name]:
                rows += _value_rows(where, before[name], after[name], depth + 1)
        return rows
    if _short(b) == _short(a):
        return [{"what": label, "before": _clip(b), "after": _clip(a)}]
    return [{"what": label, "before": UNSET if b is None else _short(b), "after": UNSET if a is None else _short(a)}]


def change_check(what):
    """The detector a change row is about (its CHANGE_FACTS label, or ``kubelet`` for a kubelet setting)."""
    if what.startswith("kubelet ") and not any(what == lbl or what.startswith(lbl + ".") or what.startswith(lbl + "[")
                                               for lbl, _c, _p in CHANGE_FACTS):
        return "kubelet"
    found = [(len(lbl), check) for lbl, check, _p in CHANGE_FACTS
             if what == lbl or what.startswith(lbl + ".") or what.startswith(lbl + "[")]
    return max(found)[1] if found else ""


def _kubelet_changes(before_eff, after_eff):
    """Rows of the kubelet settings whose effective value changed: a map setting (evictionHard, ...) as
    the keys that changed (``evictionHard.memory.available 100Mi -> 500Mi``); a value only made explicit
    (the same value, no longer the kubelet's default) says so, with the value."""
    out = []
    for field in sorted(set(before_eff) | set(after_eff)):
        b_entry, a_entry = before_eff.get(field) or {}, after_eff.get(field) or {}
        b, a = b_entry.get("value"), a_entry.get("value")
        if b is None or a is None:
            continue
        label = "kubelet %s" % field
        if b != a:
            out += _value_rows(label, b, a)
        elif b_entry.get("source") == "default" and a_entry.get("source") not in (None, "default"):
            out.append({"what": label, "before": "%s (default)" % _short(b),
                        "after": "%s (made explicit: %s)" % (_short(a), a_entry.get("flag") or a_entry.get("source"))})
    return out


def changes(before_checks, after_checks):
    """[{what, before, after}] of the facts a remediation changed (CHANGE_FACTS, and every kubelet
    setting's effective value), read from the two audits' ``checks``; nothing when a side is missing."""
    before_checks, after_checks = before_checks or {}, after_checks or {}
    out = []
    for label, check, path in CHANGE_FACTS:
        b, a = _dig(before_checks.get(check), path), _dig(after_checks.get(check), path)
        if b is None or a is None or b == a:
            continue
        out += _value_rows(label, b, a)
    before_eff = _dig(before_checks.get("kubelet"), "kubelet.effective") or {}
    after_eff = _dig(after_checks.get("kubelet"), "kubelet.effective") or {}
    if isinstance(before_eff, dict) and isinstance(after_eff, dict):
        out += _kubelet_changes(before_eff, after_eff)
    return out


def evidence_text(kept):
    """(kept, text) of a remediation's ``evidence`` record: where the evidence read before the disruption
    is, or why it is not there (``kept`` false) - the report's and the node Events' one wording."""
    before = ", ".join(str(a) for a in kept.get("before") or []) or "the disruption"
    if not kept.get("path"):
        return False, "NOT kept before the %s: %s" % (before, kept.get("error"))
    missing = kept.get("missing") or []
    return True, "kept before the %s: %s (%s bytes%s)" % (before, kept["path"], kept.get("bytes"),
                                                          "; missing: " + ", ".join(missing) if missing else "")


def evidence_line(node):
    """Where the evidence read before the node's disruption is (None when none was to be kept)."""
    kept = (node.get("remediation") or {}).get("evidence")
    if not isinstance(kept, dict):
        return None
    return "evidence " + evidence_text(kept)[1]


def _not_durable(node):
    """{setting: where to make it durable} of the remediation's ``not_durable`` ("kubelet": a place
    without the setting's name)."""
    rem = node.get("remediation") or {}
    lost = {}
    entries = rem.get("not_durable") or []
    if isinstance(entries, dict):  # {setting: where}, as remediate records it
        entries = [{"setting": k, "where": v} for k, v in sorted(entries.items())]
    for entry in entries:
        if isinstance(entry, dict):
            lost[str(entry.get("setting"))] = str(entry.get("where"))
        else:
            lost.setdefault("kubelet", str(entry))
    return lost


def _setting_of(what):
    """The kubelet setting a change row is about (``evictionHard`` for ``kubelet evictionHard.memory.available``)."""
    return what[len("kubelet "):].split(".", 1)[0] if what.startswith("kubelet ") else None


def change_rows(node):
    """What a remediation changed on ``node`` as rows a person scans: {setting, before, after, durable}.

    Only rows that changed. ``durable`` is for kubelet settings: "yes", or where to make the setting
    survive the node's cluster tool (the remediation's ``not_durable``); "" where it does not apply (a
    package, a file the collection owns). A setting the cluster tool will overwrite that this run did
    not change is not a row: not_durable_notes() lists it.
    """
    lost = _not_durable(node)
    rows = []
    for c in node.get("changes") or []:
        setting = _setting_of(c["what"])
        durable = "" if setting is None else lost.get(setting, "yes")
        rows.append({"setting": c["what"], "before": c["before"], "after": c["after"], "durable": durable})
    return rows


def not_durable_notes(node):
    """[{setting, where}] of the kubelet settings the cluster tool would overwrite that no change row names."""
    named = set(_setting_of(c["what"]) for c in node.get("changes") or [])
    return [{"setting": setting, "where": where} for setting, where in sorted(_not_durable(node).items())
            if setting not in named]


class ReportInputError(NodefixError, ValueError):
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
                waivers=None, today=None, storm=None):
    """Normalise per-host results into the report model.

    ``results``: {host: node_audit result}; ``before``: the same shape from an
    earlier audit (remediate's before/after); ``remediation``:
    {host: {"status": "ok"|"failed"|"skipped", "msg": ..., "roles": [...]}};
    ``waivers``: see check_waivers (waived findings are listed apart and do
    not count as findings); ``storm``: the storm breaker's verdict (storm_gate's result, check_storm).
    Raises WaiverError on a bad waiver.
    """
    before = before or {}
    remediation = remediation or {}
    kept = check_storm(storm)
    active, expired = check_waivers(waivers, today)
    nodes = [_node(host, results[host], before, remediation, active) for host in sorted(results)]
    model = assemble(nodes, title, generated, expired)
    if kept is not None:
        model["storm"] = redact(kept)
    return model


def missing_node(host, error):
    """The node entry of a host no result exists for (status ``missing``)."""
    node = _node(host, None, {}, {})
    node["error"] = error
    return node


def assemble(nodes, title, generated, expired):
    """The report model around its node entries (sorted by host): finding ids, totals.

    Shared by build_model and the merge of sliced runs (_report.merge), so a merged
    report is the single run's model. Linear in the nodes: a finding id's hosts are
    collected in order without a membership scan of the list.
    """
    # the one pass every report text goes through (_core.redact): the nodes' results, messages and remediation
    nodes = printable(redact(nodes))
    title = printable(redact_text(title))
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


def check_storm(storm):
    """The storm breaker's verdict (storm_gate's result) as the report keeps it, or None; ReportInputError
    when it is not one (the report would say something it cannot back)."""
    if storm is None:
        return None
    if not isinstance(storm, dict):
        raise ReportInputError("storm must be the storm_gate result (a mapping), got %s" % type(storm).__name__)
    kept = {}
    for key, kinds in (("stop", (bool,)), ("over", (bool,)), ("overridden", (bool,)), ("percent", (int,)),
                       ("size", (int,)), ("share", (int, float)), ("msg", (str, type(None)))):
        if not isinstance(storm.get(key), kinds) or (kinds != (bool,) and isinstance(storm.get(key), bool)):
            raise ReportInputError("storm: %s is missing or of the wrong type (%r)" % (key, storm.get(key)))
        kept[key] = storm[key]
    disruptive, wide = storm.get("disruptive"), storm.get("fleet_wide")
    if not isinstance(disruptive, list) or not all(isinstance(h, str) for h in disruptive):
        raise ReportInputError("storm: disruptive must be a list of host names")
    if not isinstance(wide, list) or not all(isinstance(w, dict) and isinstance(w.get("id"), str)
                                             and isinstance(w.get("nodes"), int) for w in wide):
        raise ReportInputError("storm: fleet_wide must be a list of {id, nodes, share}")
    kept["disruptive"] = len(disruptive)
    kept["fleet_wide"] = [{"id": w["id"], "nodes": w["nodes"], "share": w.get("share")} for w in wide]
    return kept


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
    """The "Plan (dry run)" section: each node's plan in words (``_report.dry_run``); none without a plan."""
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
