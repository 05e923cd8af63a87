# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""Fleet triage: every expected node in exactly one class, from what Prometheus holds at one instant.

The classes (docs/triage.md):

- ``findings``: the node's current textfile (exporter up, file fresh and parsed, answers complete)
  names open findings that count (not waived, at or above ``min_severity``, ``include_ids`` /
  ``exclude_ids``);
- ``unknown``: one or more reasons (``REASONS``) say the node's state cannot be read - never clean;
- ``clean``: only when none of the reasons holds and no finding counts;
- ``orphan``: a node that exports but is not expected (reported, never a target).

A node is a target when it is ``findings`` or ``unknown``. This file decides; ``observe`` asks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import ipaddress
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import waivers as audit_waivers
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES

# why a node is unknown; the order is the order they are listed in a record
REASONS = {
    "ambiguous_address": "the node's name or internal IP is another expected node's too (a stale Node holding a "
                         "recycled IP): no series can be told to be its own",
    "no_series": "Prometheus has no series of the node's exporter (it never exported, or its target is not scraped)",
    "exporter_down": "the node's exporter target is down (up == 0)",
    "textfile_error": "node_exporter could not read a textfile (node_textfile_scrape_error == 1): the file may be corrupt",
    "duplicate_series": "node_exporter counted gathering errors lately (promhttp_metric_handler_errors_total{cause="
                        "\"gathering\"}): a series collected twice - a second textfile with the nodefix_* series beside "
                        "nodefix.prom, a check listed twice - is exported once, from whichever file it read first",
    "foreign_series": "the node's exporter exports nodefix_* series labelled for another node (node=\"...\": the fleet "
                      "file audit_report writes, in its textfile directory): what it exports of the node may not be its "
                      "own",
    "no_gathering_counter": "the exporter is up but Prometheus holds fewer than two samples of its gathering-error "
                            "counter (promhttp_metric_handler_errors_total{cause=\"gathering\"}) in the last 15 "
                            "minutes - dropped by a relabel rule or an allowlist, a scrape interval of 7.5 minutes or "
                            "more, a first scrape: a duplicate series cannot be seen (require_gathering_counter)",
    "no_textfile": "the exporter is up but exports no nodefix.prom (the collection's textfile is not written)",
    "stale": "the audit's heartbeat is older than max_audit_age",
    "clock_skew": "the node's clock (node_time_seconds) or a stamp of its audit is off Prometheus' clock by more than "
                  "max_clock_skew: its audit's age cannot be known",
    "no_clock": "node_exporter exports no node_time_seconds (its time collector is off): the node's clock, and so its "
                "audit's age, cannot be checked (require_node_clock)",
    "check_failed": "a required detector could not look (nodefix_audit_check_failed is not 0, or the audit's own "
                    "audit.check_failed finding names it)",
    "check_missing": "a required detector is missing from the node's textfile",
    "partial_answer": "an answer came with warnings (a querier's partial answer): no node can be called clean",
    "bad_value": "a series of the node has a value it cannot mean (not 0 or 1 where a boolean is expected, NaN or "
                 "infinite where a time or a count is expected) or a finding series lacks its labels",
}
# reasons that say the node's findings themselves cannot be trusted (its class is unknown even with findings)
UNTRUSTED = ("ambiguous_address", "no_series", "exporter_down", "textfile_error", "duplicate_series", "foreign_series",
             "no_gathering_counter", "no_textfile", "stale", "clock_skew", "no_clock", "bad_value")
STATES = ("findings", "unknown", "clean", "orphan")
# reasons that say no check of the node could be read (a required check is not "missing" beside them)
BLIND = ("no_series", "exporter_down", "no_textfile")
# the audit's own finding for a detector that failed: a reason (check_failed), not a finding
CHECK_FAILED_ID = "audit.check_failed"
# that finding's subject names the check; without one it is a check that could not look all the same
UNNAMED_CHECK = "(a check the audit.check_failed finding does not name)"
# PromQL label matchers (the selector option): label op "string", comma-separated
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\n]|\\.)*"\s*'
SELECTOR = re.compile(r"^%s(?:,%s)*$" % (_MATCHER, _MATCHER))
# the prefix of an orphan's name whose node label node_label_regex does not match (``unmapped``; "_": in no DNS name)
UNMAPPED = "unmapped_"
# instance -> node: the host of host:port, IPv6 in brackets ([fd00::1]:9100)
DEFAULT_NODE_REGEX = r"^\[?(?P<node>[^\[\]]+?)\]?(?::[0-9]+)?$"


def _globs(value, name):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise NodefixError("%s must be a list of finding ids or globs" % name)
    return value


def settings(max_audit_age=1800, node_label="instance", node_label_regex=None, min_severity="info",
             include_ids=None, exclude_ids=None, required_checks=None, waivers=None, exporter_job=".*",
             max_unknown_percent=10.0, max_clock_skew=60, require_node_clock=True, selector=None,
             require_gathering_counter=True, kube_state_metrics_job="kube-state-metrics|.*kube-state-metrics.*", today=None):
    """The classifier's settings checked, before anything is asked; NodefixError naming the option otherwise."""
    if isinstance(max_audit_age, bool) or not isinstance(max_audit_age, int) or max_audit_age < 1:
        raise NodefixError("max_audit_age must be a whole number of seconds above 0 (got %r)" % (max_audit_age,))
    if min_severity not in SEVERITIES:
        raise NodefixError("min_severity %r is not one of %s" % (min_severity, ", ".join(SEVERITIES)))
    if not isinstance(node_label, str) or not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]*$", node_label):
        raise NodefixError("node_label %r is not a Prometheus label name" % (node_label,))
    try:
        regex = re.compile(node_label_regex or DEFAULT_NODE_REGEX)
    except re.error as exc:
        raise NodefixError("node_label_regex %r is not a regular expression: %s" % (node_label_regex, exc))
    if not regex.groups:
        raise NodefixError("node_label_regex %r needs a group that captures the node (named node, or the first)"
                           % (node_label_regex,))
    try:
        re.compile(exporter_job)
    except (re.error, TypeError) as exc:
        raise NodefixError("exporter_job %r is not a regular expression: %s" % (exporter_job, exc))
    try:
        re.compile(kube_state_metrics_job)
    except (re.error, TypeError) as exc:
        raise NodefixError("kube_state_metrics_job %r is not a regular expression: %s" % (kube_state_metrics_job, exc))
    selector = (selector or "").strip().rstrip(",").strip()
    if selector and (not SELECTOR.match(selector) or re.search(r"(^|,)\s*__name__\s*[=!]", selector)):
        raise NodefixError("selector %r is not PromQL label matchers (label=\"value\", comma-separated; =, !=, =~, !~)"
                           % (selector,))
    if isinstance(max_unknown_percent, bool) or not isinstance(max_unknown_percent, (int, float)) \
            or not 0 <= max_unknown_percent <= 100:
        raise NodefixError("max_unknown_percent must be a number from 0 to 100 (got %r)" % (max_unknown_percent,))
    if isinstance(max_clock_skew, bool) or not isinstance(max_clock_skew, int) or max_clock_skew < 0:
        raise NodefixError("max_clock_skew must be a whole number of seconds, 0 or more (got %r)" % (max_clock_skew,))
    checks = list(required_checks or [])
    if not all(isinstance(c, str) and re.match(r"^[a-z0-9_]+$", c) for c in checks):
        raise NodefixError("required_checks must be detector names (e.g. containerd, kubelet)")
    active = audit_waivers.check_waivers(waivers or [], today=today)[0]
    return {"max_audit_age": max_audit_age, "node_label": node_label, "node_regex": regex,
            "min_severity": min_severity, "include_ids": _globs(include_ids or [], "include_ids"),
            "exclude_ids": _globs(exclude_ids or [], "exclude_ids"), "required_checks": sorted(set(checks)),
            "waivers": active, "exporter_job": exporter_job, "max_unknown_percent": float(max_unknown_percent),
            "max_clock_skew": max_clock_skew, "require_node_clock": bool(require_node_clock), "selector": selector,
            "require_gathering_counter": bool(require_gathering_counter),
            "kube_state_metrics_job": kube_state_metrics_job}


def node_key(conf, value):
    """The node a label value names (``10.0.0.5:9100`` -> ``10.0.0.5``), or None when the regex does not match. Under
    the default regex a bare IPv6 address (``2001:db8::1:1``, a label relabelled to the node's InternalIP) is the
    node as it is: its last group is not a port (``[2001:db8::1]:9100`` is the form with one)."""
    if conf["node_regex"].pattern == DEFAULT_NODE_REGEX and value and ":" in value and "]" not in value:
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            pass
    m = conf["node_regex"].match(value or "")
    if not m:
        return None
    key = m.groupdict().get("node") if "node" in conf["node_regex"].groupindex else m.group(1)
    return key or None


def unmapped(value, taken):
    """The orphan's name of a node label value ``node_label_regex`` does not match (``instance="node-a"`` under
    ``^(.+):9100$``): ``UNMAPPED`` and the value, never a name in ``taken`` (the expected nodes' names and IPs) - the
    raw value may well be an expected node's name, and one node is never in two classes."""
    name = UNMAPPED + (value or "")
    while name in taken:
        name = UNMAPPED + name
    return name


def _counts(conf, finding, node):
    """Whether a finding counts toward the node's class (a waiver, the severity floor, the id filters)."""
    fid, severity = finding["id"], finding["severity"]
    # a severity the collection does not know counts (never hidden by the floor)
    if severity in SEVERITIES and SEVERITIES.index(severity) > SEVERITIES.index(conf["min_severity"]):
        return "below min_severity"
    if conf["include_ids"] and not any(fnmatch.fnmatchcase(fid, g) for g in conf["include_ids"]):
        return "not in include_ids"
    if any(fnmatch.fnmatchcase(fid, g) for g in conf["exclude_ids"]):
        return "in exclude_ids"
    waiver = audit_waivers.waiver_for(conf["waivers"], node, finding)
    if waiver:
        return "waived: %s" % waiver["reason"]
    return None


def _by_id_and_subject(finding):
    return finding["id"], finding["subject"]


def _ages(obs, at):
    """{stamp: age in seconds} of node_exporter's mtime of nodefix.prom and the heartbeat the file carries (when it
    carries one); a negative age is a stamp ahead of the clock."""
    return {k: round(at - obs[k], 3) for k in ("mtime", "heartbeat") if obs.get(k) is not None}


def _reasons(conf, obs, ages, partial):
    """(reason codes, notes) of one expected node's observations (``ages``: ``_ages``')."""
    reasons, notes = [], []

    def add(code, note):
        reasons.append(code)
        notes.append(note)
    if obs.get("ambiguous"):
        add("ambiguous_address", "%s: its series cannot be told from the other node's, none is read as its own (nor "
                                 "its address used to connect)" % obs["ambiguous"])
    if obs.get("up") is None:
        if not obs.get("ambiguous"):  # its exporter's series may well be there: not ours to say
            add("no_series", "no up series of the node's exporter at the evaluation time")
    elif obs["up"] < 1:
        add("exporter_down", "up == 0: the last scrape of the node's exporter failed")
    else:
        if obs.get("scrape_error"):
            add("textfile_error", "node_textfile_scrape_error == 1: node_exporter could not read a textfile")
        if obs.get("gathering_errors"):
            add("duplicate_series", "node_exporter counted %g gathering error(s) lately (promhttp_metric_handler_errors_"
                                    "total{cause=\"gathering\"}): a series it collected twice (another textfile with "
                                    "the nodefix_* series beside nodefix.prom? a check listed twice?) is exported from "
                                    "one file only - what it exports may not be nodefix.prom's" % obs["gathering_errors"])
        if obs.get("foreign"):
            add("foreign_series", "the exporter exports nodefix_* series of %s (node label; the fleet file of "
                                  "audit_report in the node's textfile directory?): neither read as the node's"
                % ", ".join(sorted(obs["foreign"])[:10]))
        if obs.get("no_gathering_counter") and conf.get("require_gathering_counter", True):
            add("no_gathering_counter", "fewer than two samples of promhttp_metric_handler_errors_total{cause=\"gathering"
                                        "\"} in the last 15 minutes (dropped by a relabel rule or an allowlist? a "
                                        "scrape interval of 7.5 min or more?): a duplicate series cannot be seen")
        if obs.get("mtime") is None:
            add("no_textfile", "the exporter exports no node_textfile_mtime_seconds for nodefix.prom")
        else:
            # each stamp judged on its own: a heartbeat ahead of the clock is no proof of life beside a fresh mtime
            limit, skew = conf["max_audit_age"], conf["max_clock_skew"]
            old = sorted((k, a) for k, a in ages.items() if a > limit)
            if old:
                add("stale", "; ".join("the audit's %s is %g s old (max_audit_age %d s)" % (k, a, limit) for k, a in old))
            off = ["the audit's %s is %g s ahead of Prometheus' clock" % (k, -a) for k, a in sorted(ages.items())
                   if a < -skew]
            if obs.get("clock_offset") is not None and abs(obs["clock_offset"]) > skew:
                off.insert(0, "the node's clock is %g s %s Prometheus' (node_time_seconds)" % (
                    abs(obs["clock_offset"]), "ahead of" if obs["clock_offset"] > 0 else "behind"))
            if off:
                add("clock_skew", "%s (max_clock_skew %d s): the node's clock is wrong, its audit's age unknown"
                    % ("; ".join(off), skew))
            elif obs.get("clock_offset") is None and conf.get("require_node_clock", True):
                add("no_clock", "no node_time_seconds of the node's exporter (its time collector is off): a clock "
                                "running ahead would make a stopped audit look fresh")
    if obs.get("bad"):
        add("bad_value", "; ".join(sorted(obs["bad"]))[:300])
    required = conf["required_checks"]
    # the gauge != 0 or the audit's own audit.check_failed finding (a file whose gauge says 0 beside it is not clean)
    failed = sorted(c for c in obs.get("failed") or () if c in required or not required or c == UNNAMED_CHECK)
    if failed:
        add("check_failed", "could not look: %s" % ", ".join(failed))
    # no check could be there (an ambiguous node without a series of its own: none read)
    blind = any(code in BLIND for code in reasons) or (obs.get("ambiguous") and obs.get("up") is None)
    if required and obs.get("checks_reported", 0) < len(required) and not blind:
        present = obs.get("checks_present")
        missing = sorted(set(required) - set(present)) if present is not None else required
        add("check_missing", "required check(s) missing: %s" % ", ".join(missing or ["%d of %d" % (
            len(required) - obs.get("checks_reported", 0), len(required))]))
    if partial:
        add("partial_answer", "an answer came with warnings: %s" % "; ".join(partial)[:300])
    return reasons, notes


def classify_node(conf, name, obs, at, partial=()):
    """One expected node's record: ``state``, ``ids``, ``findings``, ``reasons``, ``notes``, ``audit_age_s``,
    ``not_counted`` (findings a waiver or a filter keeps out, with why)."""
    ages = _ages(obs, at)
    age = max(ages.values()) if ages else None  # the older stamp
    reasons, notes = _reasons(conf, obs, ages, list(partial))
    counted, not_counted = [], []
    for f in sorted(obs.get("findings") or (), key=_by_id_and_subject):
        if f["id"] == CHECK_FAILED_ID:
            continue
        why = _counts(conf, f, name)
        if why:
            not_counted.append(dict(f, why=why))
        else:
            counted.append(f)
    if any(r in UNTRUSTED for r in reasons):
        state = "unknown"
    elif counted:
        state = "findings"
    elif reasons:
        state = "unknown"
    else:
        state = "clean"
    return {"state": state, "ids": sorted(set(f["id"] for f in counted)), "findings": counted, "reasons": reasons,
            "notes": notes, "audit_age_s": age, "not_counted": not_counted}


def _orphan(conf, name, findings):
    """An orphan's record: reported, never a target; the findings it exports that would count (``ids``)."""
    counted = [f for f in sorted(findings or [], key=_by_id_and_subject)
               if f["id"] != CHECK_FAILED_ID and not _counts(conf, f, name)]
    return {"state": "orphan", "ids": sorted(set(f["id"] for f in counted)), "findings": counted, "reasons": [],
            "notes": ["exports to Prometheus but is not an expected node: reported, never a target"],
            "audit_age_s": None, "not_counted": [], "internal_ip": None}


def _refuse_orphans_with_findings(orphans):
    """NodefixError when a node that is not expected exports findings that count: the source of expected nodes is
    missing a node that needs a look (a kube-state-metrics shard down, a Node list from another cluster, a name left
    out of ``nodes``) - it is never dropped in silence. ``selector`` (or ``exporter_job``) leaves out exporters that
    are not the fleet's (docs/triage.md)."""
    found = sorted((name, r["ids"]) for name, r in orphans.items() if r["ids"])
    if found:
        raise NodefixError("%d node(s) export findings but are not expected nodes: %s - the source of expected nodes "
                           "may be incomplete (a kube-state-metrics shard down? another cluster's exporters? a name "
                           "missing from nodes?); scope the triage with selector or exporter_job if they are not this "
                           "fleet's. Nothing was handed on" % (len(found), "; ".join(
                               "%s (%s)" % (name, ", ".join(ids)) for name, ids in found[:10])))


def classify(conf, expected, observed, orphans, at, warnings=(), clean_records=True):
    """The fleet's triage from ``observe``'s answer: {nodes: {name: record}, orphans: {name: record}, summary}.
    ``expected``: {name: {"internal_ip": ...}}; ``observed``: {name: observations} of expected nodes. Every expected
    node is classified and counted; ``clean_records`` False leaves the clean nodes' records out of ``nodes`` (the lean
    inventory shows none of them: no record built, nothing of theirs to redact)."""
    if not expected:
        raise NodefixError("no expected node: the source of expected nodes named none (an empty fleet is never "
                           "called clean)")
    nodes, by_reason = {}, {}
    counts = dict((s, 0) for s in STATES)
    for name in sorted(expected):
        record = classify_node(conf, name, observed.get(name) or {}, at, warnings)
        state = record["state"]
        counts[state] += 1
        if state == "unknown":
            for code in record["reasons"]:
                by_reason[code] = by_reason.get(code, 0) + 1
        if state == "clean" and not clean_records:
            continue
        # an address another expected node claims too is not this node's to connect to
        record["internal_ip"] = None if "ambiguous_address" in record["reasons"] else expected[name].get("internal_ip")
        nodes[name] = record
    # an expected node is never an orphan (one class a node): an orphan under an expected node's name is renamed
    orphans = orphans if isinstance(orphans, dict) else dict((name, None) for name in orphans or ())
    taken = set(expected) | set(orphans)
    orphan_records = {}
    for name in sorted(orphans):
        key = unmapped(name, taken) if name in expected else name
        taken.add(key)
        orphan_records[key] = _orphan(conf, key, orphans[name])
    orphan_records = dict(sorted(orphan_records.items()))
    _refuse_orphans_with_findings(orphan_records)
    counts["orphan"] = len(orphan_records)
    summary = {"fleet_size": len(expected), "counts": counts, "targets": counts["findings"] + counts["unknown"],
               "unknown_percent": round(100.0 * counts["unknown"] / len(expected), 3), "unknown_by_reason": by_reason,
               "reasons": dict((code, REASONS[code]) for code in by_reason),
               "evaluation_time": at, "warnings": list(warnings)}
    return {"nodes": nodes, "orphans": orphan_records, "summary": summary}


def check_unknown_budget(conf, result):
    """NodefixError when more of the fleet is unknown than ``max_unknown_percent`` allows: thousands of
    blind SSH connections are a decision for a person, not a default."""
    summary = result["summary"]
    if summary["unknown_percent"] > conf["max_unknown_percent"]:
        reasons = ", ".join("%s %d" % kv for kv in sorted(summary["unknown_by_reason"].items()))
        raise NodefixError("%d of %d nodes (%.1f%%) are unknown, above max_unknown_percent %g (%s): is the exporter, "
                           "the textfile or Prometheus itself broken? Nothing was handed on"
                           % (summary["counts"]["unknown"], summary["fleet_size"], summary["unknown_percent"],
                              conf["max_unknown_percent"], reasons))
