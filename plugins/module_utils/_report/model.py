# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The fleet report's model from node_audit results (and its JSON): each node's findings, before/after, changes
and remediation, checked and assembled; the renderers read it (``_report.console``: the console table and the
sentences every format opens with; ``_report.document``: Markdown and JUnit XML; ``_report.html_page``: HTML).

Pure functions over plain data so they can be unit tested; the audit_report module writes their output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
from html import escape as _html_escape

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact, redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import (
    SEVERITIES,
    findings_at_or_above,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import printable, yaml_flow
from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import failed_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.waivers import check_waivers, waiver_for
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

NO_NODE = "no node was audited (the targets matched no host, or every host was left out)"
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
        "generated": printable(redact_text(generated)) if isinstance(generated, str) else generated,
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
        "waivers_expired": printable(redact(expired)),
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


def run_entry(run, generated):
    """What the report is of (audit_report's ``run``: its id, status, failure...), redacted as every report text is,
    with the report's time."""
    entry = printable(redact(dict((k, v) for k, v in run.items() if v is not None)))
    entry["generated"] = generated
    return entry


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
