# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""What Prometheus holds about the fleet at one pinned instant: five instant queries (six with the
expected nodes from kube-state-metrics), whatever the fleet's size.

The series read (the collection's textfile renderer, ``_report/prometheus.py``, writes the ``nodefix_*``
ones into ``nodefix.prom``; node_exporter's textfile collector exports the ``node_textfile_*`` ones):

- ``up`` of the exporter's targets (``exporter_job``);
- ``node_textfile_scrape_error`` where it is not 0 (a file node_exporter could not read),
  ``node_textfile_mtime_seconds{file}`` of ``nodefix.prom`` (the audit's heartbeat as the file's modification
  time) and, where the file carries it, ``nodefix_audit_timestamp_seconds`` (the heartbeat inside it);
- ``nodefix_audit_check_failed{check}``: per node, how many required checks it reports (one number a
  node), and every series that is not 0 (the collection writes 1 for a check that could not look; any other
  value - 2, NaN, a negative number, from another writer or a hand - is read as a check that could not look
  AND a bad value, never dropped by the query: ``!= 0``, not ``== 1``) or of nodes that miss a required check;
- ``nodefix_finding{id,severity,check,subject}``: the open findings (few nodes have any);
- ``promhttp_metric_handler_errors_total{cause="gathering"}`` (node_exporter's own), where it rose in the last
  ``GATHERING_WINDOW``: a series the exporter collected twice (a second textfile with the ``nodefix_*`` series beside
  ``nodefix.prom``, a check listed twice) - it exports one of them, keeps ``node_textfile_scrape_error`` 0 and only
  counts the error, so the file it shows may not be ``nodefix.prom`` (``duplicate_series``); and the nodes whose
  exporter is scraped but whose counter has fewer than two samples in that window (dropped by a relabel rule or an
  allowlist, a scrape interval of half the window or more, a first scrape): blind to a duplicate
  (``no_gathering_counter``);
- ``nodefix_*`` series with a ``node`` label (``exported_node`` when the target has one): the collection writes
  it only into the fleet file (``audit_report``'s ``nodefix.prom`` with every node's series), never into a node's own
  file - a value that does not name the node is another node's series in its exporter (``foreign_series``; read
  neither as its checks nor as its findings).

HA pairs and Thanos replicas: every series is read per node and merged (the LOWEST ``up`` - one replica that
finds the exporter down is an exporter down -, the newest heartbeat, a check failed on any replica, the union of
findings), so replica labels never split a node. ``up`` is asked ``min by`` and the textfile series ``max by``
the node label (Prometheus merges the replicas of one label value the same way and answers one small sample a
node and metric: at 10,000 nodes that halves the bytes the controller parses - benchmarks/triage/).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import TEXTFILE
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify

HEARTBEAT = "nodefix_audit_timestamp_seconds"
CLOCK_OFFSET = "nodefix_clock"  # the label that marks the node's clock offset in the textfile answer
TEXTFILE_ERROR = "nodefix_textfile_error"  # the label that marks a node_textfile_scrape_error that is not 0 in it
GATHERING_ERROR = "nodefix_gathering_error"  # the label that marks the node's gathering errors in it
# how far back node_exporter's gathering errors are counted: a duplicate series fails every scrape while it lasts,
# so a few scrapes are enough (a short window also lets a node whose duplicate is gone be read again)
GATHERING_WINDOW = "15m"
# the label that marks a node whose gathering counter has fewer than two samples in GATHERING_WINDOW in the answer
GATHERING_COUNTER = "nodefix_gathering_counter"
# the label that marks a count of nodefix_* series with a node (exported_node) label in it; the labels that carry the
# fleet file's node name (exported_node: the file's node label beside a target's own node label)
FOREIGN = "nodefix_foreign"
FOREIGN_LABELS = ("node", "exported_node")
AMBIGUOUS = object()  # Mapper's answer for a key two or more expected nodes claim


def promql_string(value):
    """A PromQL double-quoted string literal (backslash and double quote escaped)."""
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def queries(conf):
    """{name: PromQL} of the fleet's observation (the expected nodes' query is ``expected``'s)."""
    job = "job=~%s" % promql_string(conf["exporter_job"]) + ("," + conf["selector"] if conf.get("selector") else "")
    label = conf["node_label"]
    # aggregated by the node label: one small sample a node and metric (replicas merged as APPLY merges them),
    # node_textfile_mtime_seconds of nodefix.prom only (the heartbeat has no file label: "" matches it)
    out = {
        # up: the LOWEST of the replicas' (HA pairs, Thanos without deduplication) - one replica that finds the
        # exporter down while another still holds an older 1 in its lookback is an exporter down, never a clean node
        "up": "min by (%s) (up{%s})" % (label, job),
        "textfile": 'max by (%s, __name__) ({__name__=~"node_textfile_mtime_seconds|%s",%s,file=~"|(.*/)?%s"})'
                    % (label, HEARTBEAT, job, TEXTFILE.replace(".", "[.]"))
                    # 'or' matches label sets without the metric name: each series added by 'or' carries a label of
                    # its own or it would be dropped beside the node's mtime. node_textfile_scrape_error only where it
                    # is not 0 (NaN != 0 holds): a node without one reads as no error already, and the 0 of every
                    # healthy node was a quarter of the answer (TEXTFILE_ERROR)
                    + ' or label_replace(max by (%s) (node_textfile_scrape_error{%s}) != 0, "%s", "error", "", "")'
                      % (label, job, TEXTFILE_ERROR)
                    # the node's clock against Prometheus' (node_exporter's time collector: its clock at the scrape
                    # minus the scrape's time) in the same answer (CLOCK_OFFSET)
                    + ' or label_replace(max by (%s) (node_time_seconds{%s} - timestamp(node_time_seconds{%s})), '
                      '"%s", "offset", "", "")' % (label, job, job, CLOCK_OFFSET)
                    # node_exporter's gathering errors (a series collected twice - a second textfile with the nodefix_*
                    # series, a check listed twice in one -: it keeps one of them, node_textfile_scrape_error stays 0,
                    # the scrape succeeds and only this counter says so) where they rose lately (GATHERING_ERROR)
                    + ' or label_replace(max by (%s) (increase(promhttp_metric_handler_errors_total{%s,cause="gathering"}'
                      '[%s])) > 0, "%s", "error", "", "")' % (label, job, GATHERING_WINDOW, GATHERING_ERROR)
                    + _foreign(conf, job),
        "findings": "nodefix_finding{%s}" % job,
        # every value but 0 (NaN != 0 holds in PromQL as in Go): a value the query dropped would be a node called clean
        "failed": "nodefix_audit_check_failed{%s} != 0" % job,
    }
    if conf.get("require_gathering_counter", True):
        # the nodes scraped whose counter cannot show a rise: fewer than two samples in the window (increase() needs
        # two; none where a relabel rule or an allowlist drops promhttp_*) - in a healthy fleet, none (GATHERING_COUNTER)
        out["textfile"] += (' or label_replace(count by (%s) (up{%s}) unless on (%s) (max by (%s) (count_over_time('
                            'promhttp_metric_handler_errors_total{%s,cause="gathering"}[%s])) > 1), "%s", "absent", "", "")'
                            % (label, job, label, label, job, GATHERING_WINDOW, GATHERING_COUNTER))
    required = conf["required_checks"]
    if required:
        checks = 'nodefix_audit_check_failed{%s,check=~"%s"}' % (job, "|".join(required))
        out["checks"] = "count by (%s) (count by (%s, check) (%s))" % (label, label, checks)
        # the failing checks, and every reported check of the nodes that miss one (to name what is missing)
        out["failed"] += " or (%s and on (%s) (%s < %d))" % (checks, label, out["checks"], len(required))
    return out


def foreign_labels(conf):
    """The labels that name the node of a fleet file's series: ``exported_node``, and ``node`` unless it is the node
    label itself (a target's own)."""
    return tuple(name for name in FOREIGN_LABELS if name != conf["node_label"])


def _foreign(conf, job):
    """The query's part that counts, per node and fleet-file label value, the nodefix_* series that carry one (none
    where no fleet file is in a textfile directory and no target has a node label of its own)."""
    names = foreign_labels(conf)
    by = ", ".join((conf["node_label"],) + names)
    return ' or label_replace(count by (%s) (%s), "%s", "series", "", "")' % (by, " or ".join(
        '{__name__=~"nodefix_.+",%s,%s!=""}' % (job, name) for name in names), FOREIGN)


def claims(expected):
    """{key: set of expected nodes} of every name and internal IP a series' node label may name: a key two or more
    nodes claim (a stale Node holding a recycled cloud IP, a node named as another's IP) names none of them."""
    out = {}
    for name, info in expected.items():
        out.setdefault(name, set()).add(name)
        if info.get("internal_ip"):
            out.setdefault(info["internal_ip"], set()).add(name)
    return out


def ambiguous(expected, claimed=None):
    """{node: note} of the expected nodes that share a name or internal IP with another: their series cannot be told
    apart, so none is read as theirs (``ambiguous_address``: unknown, never clean, no ``ansible_host`` from it).
    ``claimed``: ``claims(expected)`` when the caller has it."""
    out = {}
    for key, names in sorted((claims(expected) if claimed is None else claimed).items()):
        if len(names) > 1:
            for name in names:
                out.setdefault(name, []).append("%s is claimed by %s" % (key, ", ".join(sorted(names))))
    return dict((name, "; ".join(notes)) for name, notes in out.items())


class Mapper(object):
    """A label value -> the expected node's name (by name, then by internal IP), or an orphan's key; a key that two or
    more expected nodes claim maps to ``AMBIGUOUS`` (neither theirs nor an orphan); a value ``node_label_regex`` does
    not match is never read as a node's name - an orphan named ``unmapped_<value>`` (``classify.unmapped``)."""

    def __init__(self, conf, expected):
        self.conf = conf
        self.claims = claims(expected)
        self.seen = {}

    def node(self, labels):
        """(name, expected?) of a sample's labels; (None, False) without the node label, (AMBIGUOUS, True) for a key
        claimed by several expected nodes."""
        value = labels.get(self.conf["node_label"])
        if not value:
            return None, False
        try:
            return self.seen[value]  # every node's label value comes in each of the queries
        except KeyError:
            self.seen[value] = found = self._lookup(value)
            return found

    def owns(self, value, name):
        """Whether a fleet-file label's value (``node``) names the expected node ``name``: its name or internal IP, or
        a value that maps to it as its node label's would."""
        return self.claims.get(value) == {name} or self.node({self.conf["node_label"]: value}) == (name, True)

    def _lookup(self, value):
        key = triage_classify.node_key(self.conf, value)
        if key is None:  # node_label_regex does not match: not a node's name, whatever it reads as (an orphan apart)
            return triage_classify.unmapped(value, self.claims), False
        names = self.claims.get(key)
        if names:
            return (next(iter(names)), True) if len(names) == 1 else (AMBIGUOUS, True)
        return key, False


def _merge_max(obs, key, value):
    if value is not None and (obs.get(key) is None or value > obs[key]):
        obs[key] = value


def _bad(obs, what):
    obs.setdefault("bad", set()).add(what)


def _merge_min(obs, key, value):
    if value is not None and (obs.get(key) is None or value < obs[key]):
        obs[key] = value


def _boolean(obs, key, metric, value, merge=_merge_max):
    """A 0/1 series merged (the highest, or as ``merge`` merges); anything else (NaN, 2, Inf) makes the node unknown
    (bad_value), never clean."""
    if value in (0, 1):
        merge(obs, key, value)
    else:
        _bad(obs, "%s is %s (0 or 1 expected)" % (metric, value))


def _finite(obs, key, metric, value):
    """A time or a count merged; NaN or an infinity makes the node unknown (bad_value)."""
    if math.isnan(value) or math.isinf(value):
        _bad(obs, "%s is %s (a finite number expected)" % (metric, value))
    elif obs.get(key) is None or value > obs[key]:
        obs[key] = value


def _finding(labels):
    return {"id": labels.get("id") or "", "severity": labels.get("severity") or "", "check": labels.get("check") or "",
            "subject": labels.get("subject") or ""}


def _apply_up(labels, value, obs):
    # the lowest of the label values that name one node (an address and a name, two ports): as the query's min by
    _boolean(obs, "up", "up", value, _merge_min)


def _apply_textfile(labels, value, obs):
    metric = CLOCK_OFFSET if labels.get(CLOCK_OFFSET) == "offset" else "node_textfile_scrape_error" if labels.get(
        TEXTFILE_ERROR) == "error" else GATHERING_ERROR if labels.get(GATHERING_ERROR) == "error" else \
        GATHERING_COUNTER if labels.get(GATHERING_COUNTER) == "absent" else labels.get("__name__")
    if metric == GATHERING_COUNTER:  # scraped, but fewer than two samples of its gathering counter in the window
        obs["no_gathering_counter"] = True
    elif metric == GATHERING_ERROR:  # how many the exporter counted lately (> 0: the query keeps no other)
        obs["gathering_errors"] = max(value, obs.get("gathering_errors") or 0)
    elif metric == "node_textfile_scrape_error":
        _boolean(obs, "scrape_error", metric, value)
    elif metric == "node_textfile_mtime_seconds":  # of nodefix.prom: the query selects that file's
        _finite(obs, "mtime", metric, value)
    elif metric == HEARTBEAT:
        _finite(obs, "heartbeat", metric, value)
    elif metric == CLOCK_OFFSET:  # replicas: the offset farthest from 0 (a clock off on any one is off)
        if math.isnan(value) or math.isinf(value):
            _bad(obs, "node_time_seconds gives a clock offset of %s (a finite number expected)" % value)
        elif obs.get("clock_offset") is None or abs(value) > abs(obs["clock_offset"]):
            obs["clock_offset"] = value


def _apply_checks(labels, value, obs):
    _finite(obs, "checks_reported", "the count of required checks", value)


def _apply_failed(labels, value, obs):
    check = labels.get("check") or ""
    if not check:
        _bad(obs, "nodefix_audit_check_failed without its check label")
        return
    obs.setdefault("checks_present", set()).add(check)
    if value != 0:  # NaN too: only 0 says the check looked
        obs.setdefault("failed", set()).add(check)
    if value not in (0, 1):
        _bad(obs, "nodefix_audit_check_failed{check=%s} is %s (0 or 1 expected)" % (check, value))


def _apply_findings(labels, value, obs):
    finding = _finding(labels)
    if value not in (0, 1):
        _bad(obs, "nodefix_finding{id=%s} is %s (0 or 1 expected)" % (finding["id"], value))
    elif not (finding["id"] and finding["severity"]):  # check is empty for the audit's own finding
        _bad(obs, "a nodefix_finding series without its id or severity label")
    elif value == 1:
        obs.setdefault("findings_seen", {})[tuple(sorted(finding.items()))] = finding
        if finding["id"] == triage_classify.CHECK_FAILED_ID:  # the audit's own "could not look", whatever the gauge
            obs.setdefault("failed", set()).add(finding["subject"] or triage_classify.UNNAMED_CHECK)


# each query's samples into the node's observations (merged across replicas)
APPLY = {"up": _apply_up, "textfile": _apply_textfile, "checks": _apply_checks, "failed": _apply_failed,
         "findings": _apply_findings}


def observe(client, conf, expected, at):
    """Ask Prometheus at ``at``: ({expected name: observations}, {orphan: its findings}, warnings). Raises
    prometheus_client.NoAnswer / BadAnswer (never an empty answer for a server that did not answer).
    One pass over each answer (tens of thousands of samples at a fleet's size: the work a sample is kept small - a
    label value seen before goes straight to its node's observations)."""
    mapper = Mapper(conf, expected)
    observed, orphans, warnings = {}, {}, []
    label, number = conf["node_label"], prometheus_client.sample_value  # NaN and +-Inf kept: APPLY judges them
    of_value, name_of = {}, {}  # label value -> the observations of the expected node it names, its name
    foreign = foreign_labels(conf)
    for name, expr in sorted(queries(conf).items()):
        result, warned = client.query(expr, at)
        warnings.extend("%s: %s" % (name, w) for w in warned)
        apply_one = APPLY[name]
        for sample in result:
            labels = sample["metric"]
            obs = of_value.get(labels.get(label))
            if obs is None:
                node, known = mapper.node(labels)
                if node is None or node is AMBIGUOUS:
                    continue
                if not known:  # an orphan: its findings kept (one that exports findings is not dropped in silence)
                    if name == "up":
                        orphans.setdefault(node, [])
                    elif name == "findings" and number(sample) != 0:   # any value but 0 (NaN too), any labels
                        orphans.setdefault(node, []).append(_finding(labels))
                    continue
                obs = of_value[labels[label]] = observed.setdefault(node, {})
                name_of[labels[label]] = node
            if name in ("textfile", "failed", "findings"):
                # a fleet file's series (its node label): another node's are neither checks nor findings of this one
                marked = [labels[k] for k in foreign if labels.get(k)]
                if marked:
                    others = [v for v in marked if not mapper.owns(v, name_of[labels[label]])]
                    if others:
                        obs.setdefault("foreign", set()).update(others)
                        continue
            apply_one(labels, number(sample), obs)
    for obs in observed.values():
        obs["findings"] = list(obs.pop("findings_seen", {}).values())
    for node, note in ambiguous(expected, mapper.claims).items():
        observed.setdefault(node, {"findings": []})["ambiguous"] = note
    return observed, orphans, warnings
