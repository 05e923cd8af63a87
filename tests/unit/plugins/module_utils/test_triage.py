# SPDX-License-Identifier: GPL-3.0-or-later
"""The triage's classifier: every unknown reason, and zero nodes called clean under each injected fault.

Prometheus here is a TEST DOUBLE (``Tsdb``): a list of series as a real server would hold them at the
evaluation time, answering the triage's six queries (identified by the collection's own ``queries()``)
the way PromQL does. The queries themselves are held to a REAL Prometheus 2.42 in
tests/unit/plugins/module_utils/test_triage_prometheus.py."""

import gc
import re

import hypothesis
import hypothesis.strategies
import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube_client
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import expected as triage_expected
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import observe as triage_observe
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import run as triage_run

AT = 1800000000.0
CHECKS = ("containerd", "kubelet", "reboot")


class Tsdb(object):
    """A Prometheus TEST DOUBLE: series at the evaluation time; answers the triage's queries as PromQL would."""

    def __init__(self, conf, series, warnings=None, down=False):
        self.conf, self.series, self.warnings, self.down = conf, series, warnings or {}, down
        self.names = dict((v, k) for k, v in triage_observe.queries(conf).items())
        self.names[triage_expected.ksm_query(conf)] = "kube_node_info"
        # the selector's matchers, applied to every series the queries select (PromQL's label matchers)
        self.matchers = [(k, op, v.replace('\\"', '"')) for k, op, v in re.findall(
            r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', conf.get("selector") or "")]
        self.requests = 0
        self.where = "http://prometheus.test:9090"
        self.asked_at = set()
        self.clock = AT  # the server's own clock

    def _selected(self, labels, job):
        """Whether a series' labels pass ``job=~job`` and the selector's matchers."""
        def match(k, op, v):
            got = labels.get(k, "")
            return {"=": got == v, "!=": got != v, "=~": bool(re.fullmatch(v, got)),
                    "!~": not re.fullmatch(v, got)}[op]
        return bool(re.fullmatch(job, labels.get("job", ""))) and all(match(*m) for m in self.matchers)

    def _of(self, metric, job=None):
        job = self.conf["exporter_job"] if job is None else job
        return [s for s in self.series if s[0] == metric and self._selected(s[1], job)]

    @staticmethod
    def _max_by(series, keep, name=False, pick=max):
        """``max by (keep...)`` (with ``__name__`` when ``name``): one sample a group, its highest value (``pick``
        min: ``min by``)."""
        groups = {}
        for metric, labels, value in series:
            key = (metric if name else "", tuple((k, labels[k]) for k in keep if labels.get(k)))
            groups[key] = pick(value, groups.get(key, value))
        return [(metric, dict(labels), value) for (metric, labels), value in groups.items()]

    def _answer(self, name):
        label = self.conf["node_label"]
        if name == "kube_node_info":  # and kube-state-metrics' own up, as the 'or' in the query adds it
            return self._max_by(self._of("kube_node_info", ".*"), ("node", "internal_ip")) + [
                ("up", dict(labels), value) for metric, labels, value in self._of("up", self.conf["kube_state_metrics_job"])]
        if name == "up":
            return self._max_by(self._of("up"), (label,), pick=min)
        if name == "textfile":
            # the file label: absent, or a path whose last part is nodefix.prom; the node's clock offset (what
            # node_time_seconds - timestamp(node_time_seconds) computes) is given as a series "clock_offset"
            # node_textfile_scrape_error only where it is not 0 after the max (NaN != 0 holds, as in PromQL), marked
            # by its own label as the query's label_replace marks it (the clock offset too)
            return [s for s in self._max_by([s for s in self.series if self._selected(s[1], self.conf["exporter_job"])
                                             and s[0] in ("node_textfile_scrape_error", "node_textfile_mtime_seconds",
                                                          "nodefix_audit_timestamp_seconds", "clock_offset",
                                                          "gathering_increase")
                                             and (s[1].get("file") or "").rsplit("/", 1)[-1] in ("", "nodefix.prom")],
                                            (label,), name=True)
                    # node_exporter's gathering errors: what increase(...[15m]) computes, given as a series
                    # "gathering_increase", kept where it is above 0 (the query's '> 0')
                    if (s[0] != "node_textfile_scrape_error" or s[2] != 0) and (s[0] != "gathering_increase" or s[2] > 0)] \
                + self._gathering_counter_absent() + self._foreign()
        if name == "findings":
            return self._of("nodefix_finding")
        reported = {}
        for s in self._of("nodefix_audit_check_failed"):
            if s[1]["check"] in self.conf["required_checks"]:
                reported.setdefault(s[1][label], set()).add(s[1]["check"])
        if name == "checks":
            return [("", {label: k}, len(v)) for k, v in reported.items()]
        assert name == "failed"
        incomplete = set(k for k, v in reported.items() if len(v) < len(self.conf["required_checks"]))
        # '!= 0' as PromQL compares (NaN != 0 holds), then the reported checks of the nodes that miss one
        out = [s for s in self._of("nodefix_audit_check_failed") if s[2] != 0]
        out += [s for s in self._of("nodefix_audit_check_failed") if s[2] == 0 and s[1][label] in incomplete
                and s[1]["check"] in self.conf["required_checks"]]
        return out

    def _gathering_counter_absent(self):
        """The nodes scraped (an up series) without two samples of their gathering counter in the window: what
        count_over_time(...[15m]) computes, given as a series "gathering_samples" (the query's '> 1' and 'unless')."""
        if not self.conf["require_gathering_counter"]:
            return []
        label = self.conf["node_label"]
        counted = set(s[1].get(label) for s in self._of("gathering_samples") if s[2] > 1)
        return [("gathering_absent", {label: k}, 1) for k in sorted(set(s[1].get(label) for s in self._of("up")))
                if k not in counted]

    def _foreign(self):
        """count by (node label, node, exported_node) of the nodefix_* series with either (node: unless it is the
        node label)."""
        names = triage_observe.foreign_labels(self.conf)
        keep = (self.conf["node_label"],) + names
        return [("foreign_count", labels, value) for dummy, labels, value in self._max_by(
            [("", s[1], 1) for s in self.series if s[0].startswith("nodefix_") and self._selected(
                s[1], self.conf["exporter_job"]) and any(s[1].get(k) for k in names)], keep, pick=lambda a, b: a + b)]

    def get(self, path, params):
        """The real client's ``get``: only ``time()`` at the server's own now (``clock``), as Prometheus answers it."""
        self.requests += 1
        assert path == "/api/v1/query" and params["query"] == "time()" and "time" not in params, params
        if self.down:
            raise prometheus_client.NoAnswer("Prometheus at %s did not answer: URLError: refused" % self.where)
        return {"status": "success", "data": {"resultType": "scalar", "result": [self.clock, "%.3f" % self.clock]}}

    @staticmethod
    def secret_values():
        """The real client's contract: the credential values it sent (this double sends none)."""
        return set()

    def query(self, expr, at):
        self.requests += 1
        self.asked_at.add(at)
        if self.down:
            raise prometheus_client.NoAnswer("Prometheus at %s did not answer: URLError: refused" % self.where)
        name = self.names[expr]
        marks = {"clock_offset": (triage_observe.CLOCK_OFFSET, "offset"),
                 "node_textfile_scrape_error": (triage_observe.TEXTFILE_ERROR, "error"),
                 "gathering_increase": (triage_observe.GATHERING_ERROR, "error"),
                 "gathering_absent": (triage_observe.GATHERING_COUNTER, "absent"),
                 "foreign_count": (triage_observe.FOREIGN, "series")}
        result = [{"metric": dict(labels, **dict([marks[metric]]))
                   if name == "textfile" and metric in marks else
                   dict(labels, __name__=metric) if metric else dict(labels), "value": [at, str(value)]}
                  for metric, labels, value in self._answer(name)]
        return result, list(self.warnings.get(name, []))


def healthy(node, ip=None, instance=None, age=60, checks=CHECKS, extra=None):
    """The series of a node whose exporter and audit are fine (``extra`` labels on all: a replica)."""
    inst = instance or "%s:9100" % (ip or node)
    lab = dict({"instance": inst, "job": "node"}, **(extra or {}))
    out = [("kube_node_info", {"node": node, "internal_ip": ip or ""}, 1),
           ("up", lab, 1), ("node_textfile_scrape_error", lab, 0),
           ("node_textfile_mtime_seconds", dict(lab, file="nodefix.prom"), AT - age),
           ("clock_offset", lab, 0.01),  # node_exporter's time collector: the node's clock as Prometheus'
           ("gathering_samples", lab, 60)]  # samples of its gathering-error counter in the window (one scrape a 15 s)

    out += [("nodefix_audit_check_failed", dict(lab, check=c), 0) for c in checks]
    return out


def conf(**kw):
    kw.setdefault("required_checks", list(CHECKS))
    kw.setdefault("exporter_job", "node")  # the exporters' job (kube-state-metrics' up is not theirs)
    return triage_classify.settings(**kw)


def triage(series, warnings=None, down=False, clean_records=True, **kw):
    c = conf(**kw)
    db = Tsdb(c, series, warnings, down)
    return triage_run.triage(db, c, "kube_state_metrics", at=AT, clean_records=clean_records), db


def replace(series, metric, instance, value=None, drop=False, **labels):
    """``series`` with ``metric`` of ``instance`` (matching ``labels``) set to ``value`` or dropped."""
    out = []
    for s in series:
        if s[0] == metric and s[1].get("instance") == instance and all(s[1].get(k) == v for k, v in labels.items()):
            if drop:
                continue
            s = (s[0], s[1], value)
        out.append(s)
    return out


KSM_UP = ("up", {"job": "kube-state-metrics", "instance": "10.0.9.1:8080"}, 1)


def fleet():
    return healthy("node-a") + healthy("node-b") + healthy("node-c") + [KSM_UP]


FAULTS = {
    "exporter_down": lambda s, i: [x for x in replace(s, "up", i, 0) if not (x[0] != "up" and x[1].get("instance") == i)],
    "textfile_error": lambda s, i: replace(s, "node_textfile_scrape_error", i, 1),
    # another textfile with the same nodefix_* series (or a check listed twice): node_exporter exports one of them,
    # node_textfile_scrape_error stays 0, only its gathering errors rise - here the one it kept says kubelet looked
    "duplicate_series": lambda s, i: s + [("gathering_increase", {"instance": i, "job": "node"}, 4.0)],
    "stale": lambda s, i: replace(s, "node_textfile_mtime_seconds", i, AT - 7200),
    "check_failed": lambda s, i: replace(s, "nodefix_audit_check_failed", i, 1, check="kubelet"),
    "check_missing": lambda s, i: replace(s, "nodefix_audit_check_failed", i, drop=True, check="reboot"),
    "no_series": lambda s, i: [x for x in s if x[0] == "kube_node_info" or x[1].get("instance") != i],
    "no_textfile": lambda s, i: [x for x in s if x[1].get("instance") != i
                                 or x[0] in ("up", "node_textfile_scrape_error", "gathering_samples")],
    # review 2 D1: a relabel rule or an allowlist drops promhttp_* (or one sample in the window): a duplicate is unseen
    "no_gathering_counter": lambda s, i: replace(s, "gathering_samples", i, drop=True),
    # review 2 D2: the fleet file of audit_report (every node's series, node="...") replaced the node's nodefix.prom
    "foreign_series": lambda s, i: [(x[0], dict(x[1], node="node-x"), x[2]) if x[0].startswith("nodefix_")
                                    and x[1].get("instance") == i else x for x in s],
}


def test_a_healthy_fleet_is_clean_and_asks_few_requests_at_one_instant():
    result, db = triage(fleet())
    assert [r["state"] for r in result["nodes"].values()] == ["clean"] * 3
    assert result["summary"]["counts"] == {"findings": 0, "unknown": 0, "clean": 3, "orphan": 0}
    assert result["summary"]["requests"] == db.requests == 6 and db.asked_at == {AT}
    assert result["nodes"]["node-a"]["audit_age_s"] == 60


@pytest.mark.parametrize("reason", sorted(FAULTS))
def test_each_fault_makes_the_node_unknown_with_its_reason_never_clean(reason):
    result, dummy = triage(FAULTS[reason](fleet(), "node-b:9100"))
    node = result["nodes"]["node-b"]
    assert node["state"] == "unknown" and node["reasons"] == [reason], node
    assert result["nodes"]["node-a"]["state"] == result["nodes"]["node-c"]["state"] == "clean"
    # the lean triage (the inventory without add_clean_hosts) lists the same record, only the clean ones left out
    lean, dummy = triage(FAULTS[reason](fleet(), "node-b:9100"), clean_records=False)
    assert lean["nodes"] == {"node-b": node} and lean["summary"]["counts"] == result["summary"]["counts"]


@pytest.mark.parametrize("reason", sorted(FAULTS))
def test_zero_nodes_called_clean_when_the_fault_is_fleet_wide(reason):
    series = fleet()
    for node in ("node-a", "node-b", "node-c"):
        series = FAULTS[reason](series, node + ":9100")
    result, dummy = triage(series, max_unknown_percent=100)
    assert result["summary"]["counts"]["clean"] == 0
    assert all(r["state"] == "unknown" and r["reasons"] == [reason] for r in result["nodes"].values())


def test_the_heartbeat_inside_the_file_counts_too():
    series = fleet() + [("nodefix_audit_timestamp_seconds", {"instance": "node-b:9100", "job": "node"}, AT - 9000)]
    result, dummy = triage(series)
    assert result["nodes"]["node-b"]["reasons"] == ["stale"] and result["nodes"]["node-b"]["audit_age_s"] == 9000
    # and a stamp from the future is no proof of life either: the node's clock is wrong
    series = replace(fleet(), "node_textfile_mtime_seconds", "node-c:9100", AT + 7200)
    assert triage(series)[0]["nodes"]["node-c"]["reasons"] == ["clock_skew"]


@pytest.mark.parametrize("heartbeat", [AT + 365 * 86400, float("inf")])
def test_a_heartbeat_ahead_of_the_clock_is_unknown_beside_a_fresh_mtime(heartbeat):
    # each stamp judged on its own: the fresh mtime does not vouch for a heartbeat a year (or +Inf) ahead
    series = fleet() + [("nodefix_audit_timestamp_seconds", {"instance": "node-b:9100", "job": "node"}, heartbeat)]
    node = triage(series)[0]["nodes"]["node-b"]
    if heartbeat == float("inf"):  # not a time at all: a bad value, and never clean
        assert node["state"] == "unknown" and node["reasons"] == ["bad_value"], node
    else:
        assert node["state"] == "unknown" and node["reasons"] == ["clock_skew"], node
        assert "ahead of Prometheus' clock" in node["notes"][0]


FINDING = {"instance": "node-b:9100", "job": "node", "id": "kubelet.eviction_thresholds", "severity": "high",
           "check": "kubelet", "subject": ""}


@pytest.mark.parametrize("odd, says", [
    (lambda s: replace(s, "node_textfile_scrape_error", "node-b:9100", float("nan")), "node_textfile_scrape_error"),
    (lambda s: replace(s, "up", "node-b:9100", 2), "up is 2"),
    (lambda s: s + [("nodefix_audit_timestamp_seconds", {"instance": "node-b:9100", "job": "node"}, float("nan"))],
     "nodefix_audit_timestamp_seconds is nan"),
    (lambda s: replace(s, "node_textfile_mtime_seconds", "node-b:9100", float("-inf")), "node_textfile_mtime_seconds"),
    (lambda s: s + [("nodefix_finding", FINDING, 2)], "nodefix_finding{id=kubelet.eviction_thresholds} is 2"),
    (lambda s: s + [("nodefix_finding", dict(FINDING, id=""), 1)], "without its id"),
    (lambda s: s + [("nodefix_finding", dict(FINDING, severity=""), 1)], "without its id or severity"),
])
def test_a_value_a_series_cannot_mean_makes_the_node_unknown_never_clean(odd, says):
    node = triage(odd(fleet()))[0]["nodes"]["node-b"]
    assert node["state"] == "unknown" and "bad_value" in node["reasons"], node
    assert says in node["notes"][node["reasons"].index("bad_value")], node["notes"]


def test_an_answer_with_warnings_calls_no_node_clean():
    series = fleet() + [("nodefix_finding", {"instance": "node-a:9100", "job": "node", "id": "gvisor.runsc_outdated",
                                             "severity": "critical", "check": "gvisor", "subject": ""}, 1)]
    result, dummy = triage(series, warnings={"up": ["store 10.0.0.9:10901 unreachable"]}, max_unknown_percent=100)
    assert result["summary"]["counts"]["clean"] == 0
    assert result["nodes"]["node-a"]["state"] == "findings"  # what is seen is seen
    assert result["nodes"]["node-b"]["reasons"] == ["partial_answer"]
    assert "store 10.0.0.9:10901 unreachable" in result["nodes"]["node-b"]["notes"][0]


def test_kube_node_info_with_warnings_is_an_error():
    with pytest.raises(NodefixError, match="in part"):
        triage(fleet(), warnings={"kube_node_info": ["partial"]})


def test_prometheus_down_is_an_error_never_an_empty_result():
    with pytest.raises(prometheus_client.NoAnswer, match="did not answer"):
        triage(fleet(), down=True)


def test_no_expected_node_is_an_error():
    with pytest.raises(NodefixError, match="named no node"):
        triage([s for s in fleet() if s[0] != "kube_node_info"])


def test_findings_by_ip_instance_with_replicas_deduplicated_and_orphans_reported():
    series = healthy("node-a", ip="10.0.0.1", extra={"replica": "0"}) + healthy("node-a", ip="10.0.0.1",
                                                                                extra={"replica": "1"})
    series += healthy("node-b", ip="10.0.0.2") + healthy("stray", instance="10.9.9.9:9100") + [KSM_UP]
    series = [s for s in series if not (s[0] == "kube_node_info" and s[1]["node"] == "stray")]
    for replica in ("0", "1"):
        series.append(("nodefix_finding", {"instance": "10.0.0.1:9100", "job": "node", "replica": replica,
                                           "id": "kubelet.eviction_thresholds", "severity": "high",
                                           "check": "kubelet", "subject": ""}, 1))
    # the audit's own finding for a failed detector is a reason, not a finding
    series.append(("nodefix_finding", {"instance": "10.0.0.2:9100", "job": "node", "id": "audit.check_failed",
                                       "severity": "medium", "check": "", "subject": "kernel"}, 1))
    result, dummy = triage(series)
    a = result["nodes"]["node-a"]
    assert a["state"] == "findings" and a["ids"] == ["kubelet.eviction_thresholds"] and len(a["findings"]) == 1
    assert result["nodes"]["node-b"]["state"] == "clean"
    assert list(result["orphans"]) == ["10.9.9.9"] and result["summary"]["fleet_size"] == 2


def test_waivers_severity_and_id_filters_decide_what_counts():
    def finding(fid, severity):
        return ("nodefix_finding", {"instance": "node-a:9100", "job": "node", "id": fid, "severity": severity,
                                    "check": fid.split(".")[0], "subject": ""}, 1)
    series = fleet() + [finding("kubelet.eviction_thresholds", "low"), finding("reboot.required", "high")]
    assert triage(series)[0]["nodes"]["node-a"]["ids"] == ["kubelet.eviction_thresholds", "reboot.required"]
    node = triage(series, min_severity="medium", exclude_ids=["reboot.*"])[0]["nodes"]["node-a"]
    assert node["state"] == "clean" and sorted(f["why"] for f in node["not_counted"]) == [
        "below min_severity", "in exclude_ids"]
    waiver = [{"id": "reboot.*", "reason": "kernel freeze", "hosts": ["node-a"]}]
    node = triage(series, waivers=waiver, include_ids=["reboot.*", "kubelet.*"])[0]["nodes"]["node-a"]
    assert node["ids"] == ["kubelet.eviction_thresholds"] and node["not_counted"][0]["why"] == "waived: kernel freeze"


def test_a_stale_node_with_findings_is_unknown_and_a_failed_check_beside_findings_is_findings():
    finding = ("nodefix_finding", {"instance": "node-b:9100", "job": "node", "id": "reboot.required",
                                   "severity": "high", "check": "reboot", "subject": ""}, 1)
    stale = FAULTS["stale"](fleet(), "node-b:9100") + [finding]
    assert triage(stale)[0]["nodes"]["node-b"]["state"] == "unknown"
    failed = FAULTS["check_failed"](fleet(), "node-b:9100") + [finding]
    node = triage(failed)[0]["nodes"]["node-b"]
    assert node["state"] == "findings" and node["reasons"] == ["check_failed"]


def test_gathering_errors_make_the_node_unknown_even_with_findings_and_on_one_replica_only():
    """Review D1: a duplicate series hides whichever file node_exporter read second; only its gathering errors say so.
    The counter is read in the textfile query (no request more), from any replica, its 0 never downloaded."""
    finding = ("nodefix_finding", {"instance": "node-b:9100", "job": "node", "id": "reboot.required",
                                   "severity": "high", "check": "reboot", "subject": ""}, 1)
    node = triage(FAULTS["duplicate_series"](fleet(), "node-b:9100") + [finding])[0]["nodes"]["node-b"]
    assert node["state"] == "unknown" and node["reasons"] == ["duplicate_series"], node
    assert "4 gathering error(s)" in node["notes"][0] and "nodefix.prom" in node["notes"][0]
    replicas = (healthy("node-a", extra={"replica": "a"}) + healthy("node-a", extra={"replica": "b"})[1:]
                + [("gathering_increase", {"instance": "node-a:9100", "job": "node", "replica": "b"}, 1.0), KSM_UP])
    result, db = triage(replicas)
    assert result["nodes"]["node-a"]["reasons"] == ["duplicate_series"] and db.requests == 6
    # a counter that did not rise is no error (the query keeps only increase > 0)
    result, dummy = triage(fleet() + [("gathering_increase", {"instance": "node-b:9100", "job": "node"}, 0.0)])
    assert result["nodes"]["node-b"]["state"] == "clean"
    textfile = triage_observe.queries(conf())["textfile"]
    assert 'increase(promhttp_metric_handler_errors_total{job=~"node",cause="gathering"}[15m])) > 0' in textfile
    assert sorted(triage_observe.queries(conf())) == ["checks", "failed", "findings", "textfile", "up"]


def test_a_gathering_counter_dropped_or_seen_once_is_unknown_unless_not_required():
    """Review 2 D1: a metric_relabel_configs rule or an allowlist that drops promhttp_* hides the only sign of a
    duplicate series; one sample in the window (a first scrape, a scrape interval of half the window) shows no rise
    either. Asked in the textfile query (no request more); require_gathering_counter: false accepts it."""
    for series in (replace(fleet(), "gathering_samples", "node-b:9100", drop=True),
                   replace(fleet(), "gathering_samples", "node-b:9100", 1)):
        result, db = triage(series)
        node = result["nodes"]["node-b"]
        assert node["state"] == "unknown" and node["reasons"] == ["no_gathering_counter"] and db.requests == 6, node
        assert "relabel" in node["notes"][0] and result["nodes"]["node-a"]["state"] == "clean"
        assert triage(series, require_gathering_counter=False)[0]["nodes"]["node-b"]["state"] == "clean"
    finding = ("nodefix_finding", {"instance": "node-b:9100", "job": "node", "id": "reboot.required",
                                   "severity": "high", "check": "reboot", "subject": ""}, 1)
    assert triage(FAULTS["no_gathering_counter"](fleet(), "node-b:9100") + [finding])[0]["nodes"]["node-b"]["state"] \
        == "unknown"  # its findings may be a hidden file's
    # an exporter down is exporter_down only (no counter is expected of it)
    assert triage(FAULTS["exporter_down"](fleet(), "node-b:9100"))[0]["nodes"]["node-b"]["reasons"] == ["exporter_down"]
    textfile = triage_observe.queries(conf())["textfile"]
    assert 'unless on (instance) (max by (instance) (count_over_time(promhttp_metric_handler_errors_total{job=~"node",' \
           'cause="gathering"}[15m])) > 1)' in textfile
    assert "count_over_time" not in triage_observe.queries(conf(require_gathering_counter=False))["textfile"]


def test_another_nodes_series_in_a_nodes_exporter_is_unknown_and_read_as_nobodys():
    """Review 2 D2: audit_report's fleet file (every node's series labelled node="...") in a node's textfile directory.
    The collection writes a node label only there: a value that names another node makes the node unknown
    (foreign_series), its failed checks and findings are not the node's; a node label that names the node itself (a
    target relabelled with its own node label; the fleet file of a report of this node alone) is its own."""
    fleet_file = [(m, dict(lab, node=n), v) for n in ("node-b", "node-x") for m, lab, v in healthy("node-b")
                  if m.startswith("nodefix_")]
    fleet_file += [("nodefix_audit_check_failed", {"instance": "node-b:9100", "job": "node", "check": "kubelet",
                                                   "node": "node-y"}, 1),
                   ("nodefix_finding", {"instance": "node-b:9100", "job": "node", "id": "reboot.required",
                                        "severity": "high", "check": "reboot", "subject": "", "node": "node-y"}, 1)]
    series = [s for s in fleet() if not (s[0].startswith("nodefix_") and s[1].get("instance") == "node-b:9100")]
    result, db = triage(series + fleet_file)
    node = result["nodes"]["node-b"]
    assert node["state"] == "unknown" and node["reasons"] == ["foreign_series"] and db.requests == 6, node
    assert "node-x, node-y" in node["notes"][0] and node["findings"] == []
    assert result["nodes"]["node-a"]["state"] == "clean"
    # the node's own name (or its internal IP) in the label: its own series
    own = [(m, dict(lab, node="node-a"), v) if m.startswith("nodefix_") else (m, lab, v) for m, lab, v in fleet()]
    assert triage(own)[0]["nodes"]["node-a"]["state"] == "clean"
    # node_label node (the target's own): the file's label is exported_node
    by_node = [(m, dict(lab, node=lab["instance"].split(":")[0]) if lab.get("instance") else lab, v) for m, lab, v in fleet()]
    assert [r["state"] for r in triage(by_node, node_label="node")[0]["nodes"].values()] == ["clean"] * 3
    by_node = [(m, dict(lab, exported_node="node-x") if m.startswith("nodefix_") and lab.get("node") == "node-c" else lab, v)
               for m, lab, v in by_node]
    assert triage(by_node, node_label="node")[0]["nodes"]["node-c"]["reasons"] == ["foreign_series"]
    assert ',node!=""' not in triage_observe.queries(conf(node_label="node"))["textfile"]


def test_above_max_unknown_percent_fails_loudly():
    result, dummy = triage(FAULTS["stale"](fleet(), "node-b:9100"))
    with pytest.raises(NodefixError, match=r"1 of 3 nodes \(33.3%\) are unknown, above max_unknown_percent 10 \(stale 1\)"):
        triage_classify.check_unknown_budget(conf(), result)
    triage_classify.check_unknown_budget(conf(max_unknown_percent=34), result)


@pytest.mark.parametrize("kw, error", [
    ({"max_audit_age": 0}, "max_audit_age"), ({"max_audit_age": "15m"}, "max_audit_age"),
    ({"min_severity": "urgent"}, "min_severity"), ({"node_label": "in-stance"}, "node_label"),
    ({"node_label_regex": "("}, "node_label_regex"), ({"node_label_regex": "node"}, "needs a group"),
    ({"max_unknown_percent": 101}, "max_unknown_percent"), ({"exclude_ids": [""]}, "exclude_ids"),
    ({"waivers": [{"id": "x"}]}, "reason"), ({"required_checks": ["a|b"]}, "required_checks"),
    ({"exporter_job": "("}, "exporter_job"),
])
def test_settings_name_what_is_wrong(kw, error):
    with pytest.raises(NodefixError, match=error):
        conf(**kw)


@pytest.mark.parametrize("value, node", [
    ("10.0.0.1:9100", "10.0.0.1"), ("node-a", "node-a"), ("[fd00::1]:9100", "fd00::1"), ("node-a:9100", "node-a"),
])
def test_the_default_regex_takes_the_host_of_an_instance(value, node):
    assert triage_classify.node_key(conf(), value) == node


def test_the_kubernetes_source_reads_the_node_list_and_internal_ips(monkeypatch):
    seen = []

    class Api(object):  # the collection's Kubernetes client (_k8s.client.Kube): a list's items as dicts
        def __init__(self, kubeconfig, context=None):
            seen.append((kubeconfig, context))

        def items(self, what, path, query=None):
            seen.append(path)
            return [{"metadata": {"name": "node-a"}, "status": {"addresses": [
                {"type": "Hostname", "address": "node-a"}, {"type": "InternalIP", "address": "10.0.0.1"}]}},
                {"metadata": {"name": "node-b"}, "status": {}}, {"metadata": {}}]
    monkeypatch.setattr(kube_client, "Kube", Api)
    got = triage_expected.expected_nodes("kubernetes", None, AT, kubeconfig="/kc", context="prod")
    assert got == {"node-a": {"internal_ip": "10.0.0.1"}, "node-b": {"internal_ip": None}}
    assert seen == [("/kc", "prod"), "/api/v1/nodes"]
    monkeypatch.setattr(Api, "items", lambda self, what, path, query=None: [])
    with pytest.raises(NodefixError, match="named no node"):
        triage_expected.expected_nodes("kubernetes", None, AT, kubeconfig="/kc")


@pytest.mark.parametrize("source, kw, error", [
    ("list", {"nodes": "node-a"}, "list of node names"), ("list", {"nodes": ["node-a", ""]}, "list of node names"),
    ("kube_state_metrics", {"nodes": ["node-a"]}, "only for expected_nodes=list"), ("dns", {}, "is not one of"),
])
def test_the_expected_nodes_options_name_what_is_wrong(source, kw, error):
    with pytest.raises(NodefixError, match=error):
        triage_expected.expected_nodes(source, None, AT, **kw)


@pytest.mark.parametrize("value", [2, 0.5, -1, float("nan"), float("inf")])
def test_every_check_failed_value_but_0_is_unknown_never_clean(value):
    """nodefix_audit_check_failed is written 0 or 1 by the collection; any other value (2 from another writer, NaN)
    is a check that could not look and a bad value - the query asks '!= 0', so it is never dropped on the server."""
    assert triage_observe.queries(conf())["failed"].startswith('nodefix_audit_check_failed{job=~"node"} != 0')
    series = replace(fleet(), "nodefix_audit_check_failed", "node-b:9100", value, check="kubelet")
    node = triage(series)[0]["nodes"]["node-b"]
    assert node["state"] == "unknown" and node["reasons"] == ["bad_value", "check_failed"], node
    # with no required checks at all, too
    node = triage(series, required_checks=[])[0]["nodes"]["node-b"]
    assert node["state"] == "unknown" and "check_failed" in node["reasons"], node


@pytest.mark.parametrize("ghost", [
    ("kube_node_info", {"node": "node-a-old", "internal_ip": "10.0.0.5"}, 1),  # a stale Node, the recycled IP
    ("kube_node_info", {"node": "10.0.0.5", "internal_ip": ""}, 1),            # a node named as another's IP
])
def test_an_address_two_expected_nodes_claim_matches_neither(ghost):
    """H1: the series of 10.0.0.5:9100 cannot be told to be node-b's or the ghost's - both unknown
    (ambiguous_address), neither clean, the address not given to either to connect to, and no orphan."""
    series = healthy("node-b", ip="10.0.0.5") + healthy("node-c", ip="10.0.0.6") + [ghost, KSM_UP]
    series.append(("nodefix_finding", dict(FINDING, instance="10.0.0.5:9100"), 1))
    result, dummy = triage(series, max_unknown_percent=100)
    for name in ("node-b", ghost[1]["node"]):
        node = result["nodes"][name]
        assert node["state"] == "unknown" and node["reasons"] == ["ambiguous_address"], node
        assert "10.0.0.5 is claimed by" in node["notes"][0] and node["internal_ip"] is None and not node["findings"]
    assert result["nodes"]["node-c"]["state"] == "clean" and result["nodes"]["node-c"]["internal_ip"] == "10.0.0.6"
    assert result["orphans"] == {} and result["summary"]["unknown_by_reason"] == {"ambiguous_address": 2}


@pytest.mark.parametrize("subject, could_not_look", [("kubelet", "kubelet"), ("", triage_classify.UNNAMED_CHECK)])
def test_the_audits_own_check_failed_finding_is_a_check_that_could_not_look_whatever_the_gauge(subject, could_not_look):
    """L2: audit.check_failed names a detector that could not look; its gauge at 0 beside it (a file that contradicts
    itself) does not make the node clean - nor does a finding that names no check."""
    failed = dict(FINDING, id="audit.check_failed", severity="medium", check="", subject=subject)
    node = triage(fleet() + [("nodefix_finding", failed, 1)])[0]["nodes"]["node-b"]
    assert node["state"] == "unknown" and node["reasons"] == ["check_failed"], node
    assert node["notes"] == ["could not look: %s" % could_not_look] and node["ids"] == []
    # beside a real finding: the node has findings, the blind detector still listed
    node = triage(fleet() + [("nodefix_finding", failed, 1), ("nodefix_finding", FINDING, 1)])[0]["nodes"]["node-b"]
    assert node["state"] == "findings" and node["reasons"] == ["check_failed"], node


@pytest.mark.parametrize("metric, ahead, reasons", [
    ("node_textfile_mtime_seconds", 30, []),                    # within max_clock_skew (60 s): NTP's jitter
    ("node_textfile_mtime_seconds", 61, ["clock_skew"]),
    ("node_textfile_mtime_seconds", 29 * 60, ["clock_skew"]),    # below max_audit_age ahead: no longer accepted
    ("nodefix_audit_timestamp_seconds", 29 * 60, ["clock_skew"]),
])
def test_a_stamp_ahead_of_prometheus_clock_beyond_max_clock_skew_is_unknown(metric, ahead, reasons):
    """M4: the node's clock is ahead - its audit's age cannot be known, so it is unknown (clock_skew), never clean."""
    if metric == "node_textfile_mtime_seconds":
        series = replace(fleet(), metric, "node-b:9100", AT + ahead)
    else:
        series = fleet() + [(metric, {"instance": "node-b:9100", "job": "node"}, AT + ahead)]
    node = triage(series)[0]["nodes"]["node-b"]
    assert node["reasons"] == reasons and node["state"] == ("unknown" if reasons else "clean"), node


def clocked(controller, server=AT, **kw):
    c = conf(**kw)
    db = Tsdb(c, fleet())
    db.clock = server
    return triage_run.triage(db, c, "kube_state_metrics", now=lambda: controller), db


@pytest.mark.parametrize("controller, max_clock_skew, refused", [
    (AT + 5, 60, False), (AT - 59, 60, False), (AT + 61, 60, True), (AT - 3600, 60, True), (AT + 3600, 7200, False),
])
def test_the_evaluation_time_is_prometheus_clock_and_a_skewed_controller_is_refused(controller, max_clock_skew, refused):
    """M4: every query is asked at Prometheus' own time() (one request), never the controller's clock; when the two
    differ by more than max_clock_skew the run is refused before the fleet is asked."""
    if refused:
        with pytest.raises(NodefixError, match="above max_clock_skew %d s" % max_clock_skew):
            clocked(controller, max_clock_skew=max_clock_skew)
        return
    result, db = clocked(controller, max_clock_skew=max_clock_skew)
    assert db.asked_at == {AT} and result["summary"]["evaluation_time"] == AT
    assert result["summary"]["clock_skew_s"] == controller - AT and result["summary"]["controller_time"] == controller
    assert result["summary"]["requests"] == db.requests == 7  # time() and the six
    assert [r["state"] for r in result["nodes"].values()] == ["clean"] * 3


@pytest.mark.parametrize("data", [
    {"resultType": "scalar", "result": [AT, "NaN"]}, {"resultType": "vector", "result": []},
    {"resultType": "scalar", "result": [AT]}, {"resultType": "scalar", "result": [AT, "+Inf"]}, None,
])
def test_a_clock_that_cannot_be_read_is_an_error(monkeypatch, data):
    monkeypatch.setattr(Tsdb, "get", lambda self, path, params: {"status": "success", "data": data})
    with pytest.raises(prometheus_client.BadAnswer, match="clock cannot be read"):
        clocked(AT)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_while_asking_and_given_back_as_it_was(enabled):
    """run.no_cycle_collection: paused in the triage, the caller's own setting back after it - an error too."""
    seen = []

    class Watched(Tsdb):
        def query(self, expr, at):
            seen.append(gc.isenabled())
            return super(Watched, self).query(expr, at)
    c = conf()
    (gc.enable if enabled else gc.disable)()
    try:
        triage_run.triage(Watched(c, fleet()), c, "kube_state_metrics", at=AT)
        assert seen and not any(seen) and gc.isenabled() is enabled
        with pytest.raises(NodefixError):
            triage_run.triage(Watched(c, []), c, "kube_state_metrics", at=AT)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_a_lean_triage_counts_the_clean_nodes_it_does_not_list():
    """clean_records=False: every node classified and counted, the clean ones' records left out (nothing of theirs
    built or redacted)."""
    series = replace(FAULTS["stale"](fleet(), "node-a:9100"), "node_textfile_mtime_seconds", "node-b:9100", AT - 1700)
    full = triage(series)[0]
    lean = triage(series, clean_records=False)[0]
    assert sorted(lean["nodes"]) == ["node-a"] and lean["nodes"]["node-a"] == full["nodes"]["node-a"]
    assert lean["summary"]["counts"] == full["summary"]["counts"] == {"findings": 0, "unknown": 1, "clean": 2,
                                                                      "orphan": 0}
    assert lean["summary"]["fleet_size"] == 3 and lean["summary"]["unknown_percent"] == 33.333
    assert sorted(lean) == sorted(full) == ["nodes", "orphans", "summary"]


@pytest.mark.parametrize("offset, reasons", [
    (2, []), (-45, []), (29 * 60, ["clock_skew"]), (-120, ["clock_skew"]), (float("nan"), ["no_clock", "bad_value"]),
    (None, ["no_clock"]),  # node_exporter's time collector off: the node's clock cannot be checked
])
def test_a_node_whose_own_clock_is_off_is_unknown(offset, reasons):
    """M4: node-b's clock is ``offset`` s off Prometheus' (node_exporter's node_time_seconds against its scrape's
    time); 29 min ahead with its audit stopped 55 min ago, its stamps read 26 min old - fresh by the numbers."""
    series = replace(fleet(), "node_textfile_mtime_seconds", "node-b:9100", AT - 55 * 60 + 29 * 60)
    series = replace(series, "clock_offset", "node-b:9100", offset, drop=offset is None)
    node = triage(series, max_audit_age=1800)[0]["nodes"]["node-b"]
    assert node["reasons"] == reasons and node["state"] == ("unknown" if reasons else "clean"), node
    if reasons == ["clock_skew"]:
        assert "the node's clock is %g s" % abs(offset) in node["notes"][0], node["notes"]
    if offset is None:  # unless the user says the clocks are watched otherwise
        node = triage(series, max_audit_age=1800, require_node_clock=False)[0]["nodes"]["node-b"]
        assert node["state"] == "clean", node


@pytest.mark.parametrize("ksm, says", [
    ([KSM_UP, ("up", {"job": "kube-state-metrics", "instance": "10.0.9.2:8080"}, 0)], "10.0.9.2:8080 are down"),
    ([], "no up of kube-state-metrics"),
    ([("up", {"job": "ksm-shard", "instance": "10.0.9.1:8080"}, 1)], "no up of kube-state-metrics"),
])
def test_an_incomplete_kube_state_metrics_is_an_error_never_a_smaller_fleet(ksm, says):
    """M1: a kube-state-metrics shard or replica down drops its nodes from kube_node_info: the triage refuses rather than
    call them orphans and count the storm breaker against a smaller fleet; none scraped cannot be known complete."""
    series = [s for s in fleet() if s != KSM_UP] + ksm
    with pytest.raises(NodefixError, match=says):
        triage(series)
    # its job named: the shard's up is kube-state-metrics'
    if ksm and ksm[0][1]["job"] == "ksm-shard":
        assert triage(series, kube_state_metrics_job="ksm-shard")[0]["summary"]["fleet_size"] == 3


def test_an_orphan_that_exports_findings_is_an_error_never_dropped():
    """M1 (t1.py #2): node-b is missing from kube_node_info, its exporter exports a critical finding - the triage fails
    naming it; an orphan without findings (or whose findings do not count) is only reported."""
    series = [s for s in fleet() if not (s[0] == "kube_node_info" and s[1]["node"] == "node-b")]
    result = triage(series)[0]
    assert list(result["orphans"]) == ["node-b"] and result["summary"]["fleet_size"] == 2
    series.append(("nodefix_finding", dict(FINDING, id="containerd.cve", severity="critical"), 1))
    with pytest.raises(NodefixError, match=r"export findings but are not expected nodes: node-b \(containerd.cve\)"):
        triage(series)
    result = triage(series, exclude_ids=["containerd.*"])[0]
    assert result["orphans"]["node-b"]["state"] == "orphan" and result["orphans"]["node-b"]["ids"] == []


def test_the_selector_scopes_every_query_to_one_cluster():
    """M1: a global Prometheus (Thanos) holds two clusters with the same node names; ``selector`` adds its matchers to
    every query, so one cluster's nodes are triaged alone - not merged by max with the other's."""
    prod = [(m, dict(lab, cluster="prod"), v) for m, lab, v in fleet()]
    staging = [(m, dict(lab, cluster="staging"), v) for m, lab, v in fleet()]
    staging.append(("nodefix_finding", dict(FINDING, cluster="staging"), 1))
    staging = replace(staging, "up", "node-c:9100", 0)
    series = prod + staging
    result, db = triage(series, selector='cluster="prod"')
    assert [r["state"] for r in result["nodes"].values()] == ["clean"] * 3
    assert all('cluster="prod"' in q for q in db.names), db.names
    result = triage(series, selector=' cluster = "staging" ,')[0]["nodes"]
    assert result["node-b"]["state"] == "findings" and result["node-c"]["reasons"] == ["exporter_down"]
    # without it the two clusters' node-c merge (the lowest up): one cluster's down exporter makes the merged node
    # unknown - never hidden by the other's
    assert triage(series, max_unknown_percent=100)[0]["nodes"]["node-c"]["reasons"] == ["exporter_down"]


@pytest.mark.parametrize("selector", ['cluster=prod', 'a="x"} or vector(1) or up{', '__name__="up"', 'a="x" b="y"'])
def test_a_selector_that_is_not_label_matchers_is_refused(selector):
    with pytest.raises(NodefixError, match="selector"):
        conf(selector=selector)


def test_replicas_that_disagree_on_up_are_an_exporter_down_never_clean():
    """Review of issue 63 (2026-12-07): one replica finds the exporter down (its textfile series stale, gone), the
    other still holds an up=1 and the textfile samples in its lookback: ``max by`` said up, the node was clean."""
    down = [s for s in healthy("node-a", extra={"replica": "0"}) if s[0] in ("kube_node_info", "up")]
    down = [(m, l, 0 if m == "up" else v) for m, l, v in down]
    series = down + healthy("node-a", extra={"replica": "1"}) + healthy("node-b") + [KSM_UP]
    result, dummy = triage(series)
    assert result["nodes"]["node-a"]["state"] == "unknown" and "exporter_down" in result["nodes"]["node-a"]["reasons"]
    assert result["nodes"]["node-b"]["state"] == "clean"


def test_a_bare_ipv6_label_is_the_node_as_it_is():
    """Review of issue 63 (2026-12-07): the default regex took a bare IPv6 address's last group for a port -
    2001:db8::1:1 read as 2001:db8::1, so one node's healthy series spoke for another whose exporter was down."""
    c = conf()
    assert triage_classify.node_key(c, "2001:db8::1:1") == "2001:db8::1:1"
    assert triage_classify.node_key(c, "fd00::1") == "fd00::1"
    assert triage_classify.node_key(c, "[fd00::1]:9100") == "fd00::1"
    assert triage_classify.node_key(c, "10.0.0.5:9100") == "10.0.0.5"
    series = healthy("x", ip="2001:db8::1", instance="2001:db8::1") + healthy(
        "y", ip="2001:db8::1:1", instance="2001:db8::1:1") + [KSM_UP]
    series = replace(series, "up", "2001:db8::1", 0)
    result, dummy = triage(series)
    assert result["nodes"]["x"]["state"] == "unknown" and result["nodes"]["y"]["state"] == "clean"


@pytest.mark.parametrize("value,labels", [(2, {}), (float("nan"), {}), (1, {"severity": None})])
def test_an_orphan_that_exports_any_finding_is_an_error(value, labels):
    """Review of issue 63 (2026-12-07): an orphan's finding of a value other than 1, or without a severity, was
    dropped in silence (an expected node's would be unknown)."""
    series = fleet() + healthy("stray", instance="10.9.9.9:9100")
    series = [s for s in series if not (s[0] == "kube_node_info" and s[1]["node"] == "stray")]
    finding = {"instance": "10.9.9.9:9100", "job": "node", "id": "kubelet.x", "severity": "high", "check": "kubelet"}
    finding.update(labels)
    series.append(("nodefix_finding", dict((k, v) for k, v in finding.items() if v is not None), value))
    with pytest.raises(NodefixError):
        triage(series)


def test_a_label_the_regex_does_not_match_is_no_node_name_and_an_expected_node_is_never_an_orphan():
    """Review D1/D3 (2026-12-07): under ``^(.+):9100$`` a series ``instance="node-a"`` (no port) was taken as the node
    named node-a by its raw value: node-a was unknown (a target) AND an orphan, its inventory host overwritten."""
    series = healthy("node-a", instance="node-a") + healthy("node-b") + [KSM_UP]
    result, dummy = triage(series, node_label_regex="^(.+):9100$", max_unknown_percent=100)
    assert result["nodes"]["node-a"]["state"] == "unknown" and result["nodes"]["node-a"]["reasons"] == ["no_series"]
    assert result["nodes"]["node-b"]["state"] == "clean"
    assert list(result["orphans"]) == ["unmapped_node-a"]
    # an orphan's name that is an expected node's (the classifier's own guard), and one that is unmapped_ + it too
    c = conf()
    got = triage_classify.classify(c, {"node-a": {}, "unmapped_node-a": {}}, {}, {"node-a": [], "x": []}, AT,
                                   clean_records=True)
    assert sorted(got["orphans"]) == ["unmapped_unmapped_node-a", "x"] and sorted(got["nodes"]) == [
        "node-a", "unmapped_node-a"]


LABELS = ("node-a", "node-a:9100", "node-b:9100", "10.0.0.1", "10.0.0.1:9100", "unmapped_node-a", "node-c:8080",
          "[fd00::1]:9100", "x")
REGEXES = (None, "^(.+):9100$", "^(?P<node>node-[a-z])", "^unmapped_(.+)$", "^(.*)$", "^[^:]+:(.+)$")


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(expected=hypothesis.strategies.dictionaries(
    hypothesis.strategies.sampled_from(("node-a", "node-b", "node-c", "unmapped_node-a", "10.0.0.1", "x")),
    hypothesis.strategies.sampled_from(("", "10.0.0.1", "10.0.0.2", "fd00::1")), min_size=1, max_size=4),
    labels=hypothesis.strategies.lists(hypothesis.strategies.sampled_from(LABELS), max_size=5, unique=True),
    up=hypothesis.strategies.lists(hypothesis.strategies.sampled_from((0, 1)), min_size=5, max_size=5),
    regex=hypothesis.strategies.sampled_from(REGEXES))
def test_every_expected_node_is_in_exactly_one_class_whatever_the_labels(expected, labels, up, regex):
    """Review D3: random label values, node_label_regex and expected nodes (names, internal IPs, shared or not):
    every expected node has exactly one record of one class, and no orphan is named as an expected node."""
    series = [("kube_node_info", {"node": n, "internal_ip": ip}, 1) for n, ip in expected.items()] + [KSM_UP]
    for label, value in zip(labels, up):
        lab = {"instance": label, "job": "node"}
        series += [("up", lab, value), ("node_textfile_mtime_seconds", dict(lab, file="nodefix.prom"), AT - 60),
                   ("clock_offset", lab, 0.0)] + [("nodefix_audit_check_failed", dict(lab, check=c), 0) for c in CHECKS]
    result, dummy = triage(series, node_label_regex=regex, max_unknown_percent=100)
    assert sorted(result["nodes"]) == sorted(expected)
    assert all(r["state"] in ("findings", "unknown", "clean") for r in result["nodes"].values())
    assert not set(result["orphans"]) & set(expected), result["orphans"]
    assert all(r["state"] == "orphan" for r in result["orphans"].values())
    counts = result["summary"]["counts"]
    assert counts["findings"] + counts["unknown"] + counts["clean"] == len(expected)
    assert counts["orphan"] == len(result["orphans"])
