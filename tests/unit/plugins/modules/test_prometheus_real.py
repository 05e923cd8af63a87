# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's Prometheus consumers against a REAL Prometheus server: Debian 12's prometheus 2.42 and
prometheus-node-exporter 1.5 (unpacked by scripts/setup.sh into lab/cache/prometheus), one server for the
whole module, started behind TLS and basic auth (its own --web.config.file) so every question goes through
the collection's one client (module_utils/_prometheus) with the CA bundle and the credentials.

- nodefix.k8s.reboot_gate asks ``GET /api/v1/alerts`` of a rules file whose alerts are firing, pending
  and inactive (the shapes a real server cannot produce are in test_reboot_gate.py);
- the triage (module_utils/_triage, the inventory plugin through ``ansible-inventory``) reads the real
  node_exporters' textfile collectors - the collection's own textfile renderers' nodefix.prom, healthy (the
  audit's and the tick's), with a finding, corrupt, stale (a fresh other file beside it), its heartbeat
  inside stale, with a detector that could not look, with a required check missing - one target that is
  down, one expected node that never exported and one exporter nobody expects; a second real Prometheus
  in front of the first answers with warnings (a remote-read store that is down). Issue 63's zero-clean
  faults each fail a test here when the code that guards them is taken out (checked by hand, 2026-12-06).
"""

import datetime
import glob
import json
import os
import socket
import subprocess
import time

import pytest

from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.common import warnings
from ansible.module_utils.urls import open_url

from ansible_collections.nodefix.k8s.plugins.modules import reboot_gate
from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import transport as prometheus_transport
from ansible_collections.nodefix.k8s.plugins.module_utils._report import prometheus as report_prometheus
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import observe as triage_observe
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import run as triage_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CACHE = os.path.join(REPO, "lab", "cache", "prometheus")
USER, PASSWORD = "nodefix", "tr1age-s3cret"
# bcrypt of PASSWORD at cost 4 (Prometheus' web config wants a bcrypt hash; cost 4 keeps each request cheap)
PASSWORD_HASH = "$2b$04$SnPq9x1is0j8gGWoaTu.BuC2ycETYUTAls2VanP5DjjeYvkYy1ZEG"

RULES = """groups:
  - name: nodefix-test
    interval: 1s
    rules:
      - alert: NodeDown          # firing at the first evaluation
        expr: vector(1)
      - alert: Watchdog          # firing, and what a filter lets through
        expr: vector(1)
      - alert: DiskSlow          # pending for an hour
        expr: vector(1)
        for: 1h
      - alert: Quiet             # inactive: its expression has no result
        expr: vector(1) > 2
"""


def real(pattern, name):
    found = glob.glob(os.path.join(CACHE, pattern, "usr", "bin", name))
    assert found, "the real %s is not unpacked in lab/cache/prometheus: run scripts/setup.sh" % name
    return found[0]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_file(findings=(), failed=(), skip=()):
    """nodefix.prom as the collection's textfile renderer writes it for a node_audit result."""
    checks = dict((name, {}) for name in audit_checks.CHECK_NAMES if name not in skip)
    found = [dict(f) for f in findings] + [{"id": "audit.check_failed", "severity": "medium", "subject": name,
                                            "check": None} for name in failed]
    return report_prometheus.node_textfile({"checks": checks, "findings": found})


def tick_file(heartbeat_age, failed=()):
    """nodefix.prom as the npd role's tick writes it: with the heartbeat inside (nodefix_audit_timestamp_seconds)."""
    looks = dict((name, {"failed": int(name in failed), "findings": []}) for name in audit_checks.CHECK_NAMES)
    return report_prometheus.tick_textfile(looks, time.time() - heartbeat_age, "1.2.0")


FINDING = {"id": "gvisor.runsc_outdated", "severity": "critical", "check": "gvisor", "subject": ""}
# node name -> (textfile bytes or None, seconds its mtime lies in the past); max_audit_age is an hour below
NODES = {
    "node-clean": (node_file(), 0),
    "node-findings": (node_file([FINDING]), 0),
    "node-corrupt": ("nodefix_finding{id=\"x\" 1\ngarbage\n", 0),
    # a fresh, whole nodefix.prom beside another file node_exporter cannot read: node_textfile_scrape_error 1 with the
    # mtime in the same answer (a query that drops the error beside it calls the node clean)
    "node-corrupt-other": (node_file(), 0),
    "node-stale": (node_file(), 4 * 3600),           # another textfile beside it is fresh: only nodefix.prom counts
    "node-tick": (tick_file(60), 0),                   # the tick's file, heartbeat inside: clean
    "node-heartbeat-stale": (tick_file(4 * 3600), 0),  # written now (mtime fresh), its heartbeat four hours old
    "node-failed": (node_file(failed=["kubelet"]), 0),
    "node-missing": (node_file(skip=["reboot"]), 0),
    # a value the collection never writes (2: another writer's "could not run"; NaN): read, never dropped by the query
    "node-failed-2": (node_file().replace('nodefix_audit_check_failed{check="kubelet"} 0',
                                          'nodefix_audit_check_failed{check="kubelet"} 2'), 0),
    "node-failed-nan": (node_file().replace('nodefix_audit_check_failed{check="kernel"} 0',
                                            'nodefix_audit_check_failed{check="kernel"} NaN'), 0),
    # the audit's own audit.check_failed finding with the check's gauge at 0: a file that contradicts itself
    "node-failed-finding": (node_file(failed=["kubelet"]).replace('nodefix_audit_check_failed{check="kubelet"} 1',
                                                                  'nodefix_audit_check_failed{check="kubelet"} 0'), 0),
    # review D1: node_exporter exports ONE of two series with the same labels (the file it reads first, by name), keeps
    # node_textfile_scrape_error 0 and only counts a gathering error - the tick's fresh nodefix.prom whose kubelet
    # detector could not look (the gauge 1, no finding) beside an old nodefix-audit.prom (another name, sorted first) that says every check looked (the
    # sibling is written in exporters()), and a check listed twice in nodefix.prom itself, its 0 first
    "node-duplicate": (tick_file(60, failed=["kubelet"]), 0),
    "node-duplicate-check": (node_file().replace('nodefix_audit_check_failed{check="kubelet"} 0\n',
                                                 'nodefix_audit_check_failed{check="kubelet"} 0\n'
                                                 'nodefix_audit_check_failed{check="kubelet"} 1\n'), 0),
    "node-orphan": (node_file(), 0),
    # review 2 D1: a whole, fresh nodefix.prom, but Prometheus drops promhttp_* of this target (metric_relabel_configs in
    # config(): what a drop rule or an allowlist does) - a duplicate beside it could not be seen
    "node-no-gathering": (node_file(), 0),
    # review 2 D2: audit_report's fleet file (another node's series, node="node-x", every check looked) written as
    # <dest>/nodefix.prom into this node's textfile directory - it fills every required check of the node
    "node-fleet-file": (report_prometheus.fleet_textfile({"nodes": [{
        "host": "node-x", "status": "ok", "findings": [], "checks_failed": dict((c, 0) for c in audit_checks.CHECK_NAMES)}]}), 0),
}
EXPECTED = sorted(set(NODES) - {"node-orphan"}) + ["node-down", "node-never"]
CLASSES = {"node-clean": ("clean", []), "node-findings": ("findings", []), "node-corrupt": ("unknown", ["textfile_error"]),
           "node-corrupt-other": ("unknown", ["textfile_error"]),
           "node-stale": ("unknown", ["stale"]), "node-tick": ("clean", []),
           "node-heartbeat-stale": ("unknown", ["stale"]), "node-failed": ("unknown", ["check_failed"]),
           "node-missing": ("unknown", ["check_missing"]), "node-failed-2": ("unknown", ["bad_value", "check_failed"]),
           "node-failed-nan": ("unknown", ["bad_value", "check_failed"]),
           "node-failed-finding": ("unknown", ["check_failed"]),
           "node-duplicate": ("unknown", ["duplicate_series"]), "node-duplicate-check": ("unknown", ["duplicate_series"]),
           "node-no-gathering": ("unknown", ["no_gathering_counter"]), "node-fleet-file": ("unknown", ["foreign_series"]),
           "node-down": ("unknown", ["exporter_down"]),
           "node-never": ("unknown", ["no_series"])}


def tls(tmp):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "2",
                    "-keyout", str(tmp / "key.pem"), "-out", str(tmp / "cert.pem")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (tmp / "web.yml").write_text("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n"
                                 % (tmp / "cert.pem", tmp / "key.pem", USER, PASSWORD_HASH))
    return str(tmp / "cert.pem")


def exporters(tmp, procs):
    """One real node_exporter per node (its textfile collector only); {node: host:port}."""
    targets = {}
    for node, (text, age) in NODES.items():
        directory = tmp / node
        directory.mkdir()
        (directory / "nodefix.prom").write_text(text)
        then = time.time() - age
        os.utime(directory / "nodefix.prom", (then, then))
        if age:  # a fresh file of another exporter's in the same directory proves nothing of the audit
            (directory / "other.prom").write_text("# TYPE other_job_last_run gauge\nother_job_last_run 1\n")
        if node == "node-duplicate":  # two days old, its bytes as node_audit renders them: every check looked
            (directory / "nodefix-audit.prom").write_text(node_file())
            os.utime(directory / "nodefix-audit.prom", (time.time() - 2 * 86400,) * 2)
        if node == "node-corrupt-other":
            (directory / "other.prom").write_text("other_job_last_run{ 1\n")
        targets[node] = "127.0.0.1:%d" % free_port()
        procs.append(subprocess.Popen([real("prometheus-node-exporter_*", "prometheus-node-exporter"),
                                       "--collector.disable-defaults", "--collector.textfile", "--collector.time",
                                       "--collector.textfile.directory=%s" % directory,
                                       "--web.listen-address=%s" % targets[node]],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    targets["node-down"] = "127.0.0.1:%d" % free_port()  # nothing listens
    return targets


def kube_state_metrics(tmp, procs):
    """kube-state-metrics' kube_node_info of the expected nodes (kube-state-metrics' own exposition, served by one more
    real node_exporter's textfile collector): its host:port, scraped as job kube-state-metrics."""
    directory = tmp / "kube-state-metrics"
    directory.mkdir()
    (directory / "ksm.prom").write_text("# TYPE kube_node_info gauge\n" + "".join(
        'kube_node_info{node="%s",internal_ip="10.0.0.%d",kernel_version="6.1.0"} 1\n' % (n, i + 1)
        for i, n in enumerate(sorted(EXPECTED))))
    address = "127.0.0.1:%d" % free_port()
    procs.append(subprocess.Popen([real("prometheus-node-exporter_*", "prometheus-node-exporter"),
                                   "--collector.disable-defaults", "--collector.textfile",
                                   "--collector.textfile.directory=%s" % directory, "--web.listen-address=%s" % address],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return address


def config(targets, ksm):
    static = "\n".join("      - targets: ['%s']\n        labels: {nodename: %s}" % (t, n) for n, t in sorted(targets.items()))
    return ("global:\n  evaluation_interval: 1s\n  scrape_interval: 1s\nrule_files: [rules.yml]\n"
            "scrape_configs:\n  - job_name: node\n"
            # one target's promhttp_* dropped, as a relabel rule or an allowlist does (node-no-gathering)
            "    metric_relabel_configs: [{source_labels: [nodename, __name__], regex: 'node-no-gathering;promhttp_.*',"
            " action: drop}]\n    static_configs:\n%s\n"
            "  - job_name: kube-state-metrics\n    static_configs:\n      - targets: ['%s']\n" % (static, ksm))


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prometheus")
    procs = []
    try:
        ca = tls(tmp)
        targets = exporters(tmp, procs)
        ksm = kube_state_metrics(tmp, procs)
        (tmp / "rules.yml").write_text(RULES)
        (tmp / "prometheus.yml").write_text(config(targets, ksm))
        url = "https://127.0.0.1:%d" % free_port()
        proc = subprocess.Popen([real("prometheus_*", "prometheus"), "--config.file=%s" % (tmp / "prometheus.yml"),
                                 "--web.config.file=%s" % (tmp / "web.yml"), "--storage.tsdb.path=%s" % (tmp / "data"),
                                 "--web.listen-address=%s" % url[8:]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        client = prometheus_client.Client(open_url, url, username=USER, password=PASSWORD, ca_path=ca)
        deadline = time.time() + 60
        while True:  # until NodeDown fires and every target has been scraped (the down one as down)
            try:
                up, dummy = client.query("up", time.time())
                firing = b'"NodeDown"' in json.dumps(client.get("/api/v1/alerts")).encode()
                if firing and len(up) == len(targets) + 1 and client.query("kube_node_info", time.time())[0] \
                        and client.query("node_textfile_scrape_error", time.time())[0] \
                        and len(client.query('promhttp_metric_handler_errors_total{cause="gathering"} > 0',
                                             time.time())[0]) == 2 \
                        and len(client.query('count_over_time(promhttp_metric_handler_errors_total{job="node",cause='
                                             '"gathering"}[15m]) > 1', time.time())[0]) == len(targets) - 2:
                    # the counter rises from the second scrape on, and the triage reads it from two samples on (every
                    # target's but node-down's and node-no-gathering's)
                    break
            except prometheus_client.NoAnswer:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise AssertionError("prometheus did not come up: %s" % proc.stderr.read().decode()[-2000:])
            time.sleep(0.2)
        yield {"url": url, "ca": ca, "tmp": tmp}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def start(proc, url, stop_when):
    """Wait until ``stop_when()`` (polled); AssertionError with the server's log when it dies or takes a minute."""
    deadline = time.time() + 60
    while True:
        try:
            if stop_when():
                return
        except prometheus_client.NoAnswer:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError("prometheus at %s did not come up: %s" % (url, proc.stderr.read().decode()[-2000:]))
        time.sleep(0.2)


@pytest.fixture(scope="module")
def partial(prometheus):
    """A second REAL Prometheus that answers with warnings, as a querier in front of a broken store does: it reads
    the first one's series over remote read (read_recent: every query) and a second remote-read endpoint where
    nothing listens. Prometheus turns a failed secondary store into ``warnings`` beside the data it has (its
    fanout storage; the HTTP API's ``warnings``) - the answer is complete-looking but partial."""
    tmp = prometheus["tmp"] / "partial"
    tmp.mkdir()
    (tmp / "prometheus.yml").write_text(
        "remote_read:\n"
        "  - url: %s/api/v1/read\n    read_recent: true\n    basic_auth: {username: %s, password: %s}\n"
        "    tls_config: {ca_file: %s}\n"
        "  - url: http://127.0.0.1:%d/api/v1/read\n    read_recent: true\n"
        % (prometheus["url"], USER, PASSWORD, prometheus["ca"], free_port()))
    url = "http://127.0.0.1:%d" % free_port()
    proc = subprocess.Popen([real("prometheus_*", "prometheus"), "--config.file=%s" % (tmp / "prometheus.yml"),
                             "--storage.tsdb.path=%s" % (tmp / "data"), "--web.listen-address=%s" % url[7:]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        c = prometheus_client.Client(open_url, url)
        start(proc, url, lambda: c.query("up", time.time())[0])
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- the reboot gate ----------------------------------------------------------------------------------

def gate(prom, **kw):
    p = dict((k, v.get("default")) for k, v in reboot_gate.argument_spec().items())
    p.update(node="node-a", max_concurrent=0, prometheus_url=prom["url"], prometheus_username=USER,
             prometheus_password=PASSWORD, prometheus_ca_path=prom["ca"])
    p.update(kw)
    window, filter_re = reboot_gate.validate(p)
    now = datetime.datetime.now(datetime.timezone.utc)
    return reboot_gate.decide(p, window, filter_re, None, False, lambda: now, time.sleep)


def test_firing_alerts_hold_the_reboot(prometheus):
    out = gate(prometheus)
    assert out["alerts"] == ["NodeDown", "Watchdog"]          # not the pending nor the inactive one
    assert out["held_by"] == ["firing alert(s) at %s: NodeDown, Watchdog" % prometheus["url"]]


def test_the_filter_lets_alerts_through(prometheus):
    out = gate(prometheus, alert_filter_regexp="^Watchdog$")
    assert out["alerts"] == ["NodeDown"]
    out = gate(prometheus, alert_filter_regexp="^(Watchdog|NodeDown)$")
    assert out["alerts"] == [] and out["held_by"] == []       # a well-formed answer with nothing firing: allowed


def test_pending_alerts_hold_when_not_firing_only(prometheus):
    out = gate(prometheus, alert_firing_only=False, alert_filter_regexp="^(Watchdog|NodeDown)$")
    assert out["alerts"] == ["DiskSlow"]


def test_a_path_that_is_not_the_alerts_api_is_no_answer(prometheus):
    # the server's health endpoint under the URL: a text page (not JSON) holds the reboot, never allows it
    out = gate(prometheus, prometheus_url=prometheus["url"] + "/-/healthy?x=", alert_filter_regexp=".*")
    assert out["held_by"] and ("gave no well-formed answer" in out["held_by"][0]), out


@pytest.mark.parametrize("kw, says", [
    ({"prometheus_password": "wrong-pass-word"}, "401"),
    ({"prometheus_username": None, "prometheus_password": None}, "401"),
    ({"prometheus_ca_path": None}, "CERTIFICATE_VERIFY_FAILED"),
])
def test_the_gate_fails_without_its_credentials_and_names_none(prometheus, kw, says):
    with pytest.raises(reboot_gate.NodefixError) as err:
        gate(prometheus, **kw)
    assert "did not answer" in err.value.msg and says in err.value.msg, err.value.msg
    assert PASSWORD not in err.value.msg and "wrong-pass-word" not in err.value.msg


def test_a_url_with_user_information_works_warns_and_is_shown_without_it(prometheus, run_module, monkeypatch):
    """Issue 61 item 1 against the real server: the credentials only in the URL (percent-encoded: '%73' is 's'),
    none as options - the module asks with them, warns naming the options, and no output holds them."""
    # a module's warnings go into its result, not to the controller's display (a test that imported controller code
    # earlier in this process makes Ansible 2.19 believe it runs on the controller)
    monkeypatch.setattr(ansible_internal, "is_controller", False, raising=False)
    encoded = PASSWORD.replace("s", "%73")
    url = prometheus["url"].replace("https://", "https://%s:%s@" % (USER, encoded))
    result, failed, _t = run_module(reboot_gate, {"node": "node-a", "max_concurrent": 0, "prometheus_url": url,
                                                  "prometheus_ca_path": prometheus["ca"], "reason": "kernel"})
    assert not failed, result
    assert result["held_by"] == ["firing alert(s) at %s: NodeDown, Watchdog" % prometheus["url"]]
    said = warnings.get_warning_messages()
    assert [w for w in said if "prometheus_username" in str(w) and "prometheus_token_file" in str(w)], said
    shown = json.dumps(result) + json.dumps([str(w) for w in said])
    assert PASSWORD not in shown and encoded not in shown and prometheus["url"][8:] in shown


# -- the triage ----------------------------------------------------------------------------------------

def settings(**kw):
    kw = dict(dict(node_label="nodename", required_checks=list(audit_checks.CHECK_NAMES), max_unknown_percent=100,
                   max_audit_age=3600), **kw)
    return triage_classify.settings(**kw)


def client(prom):
    return prometheus_client.Client(open_url, prom["url"], username=USER, password=PASSWORD, ca_path=prom["ca"])


def test_the_triage_classifies_every_node_as_injected(prometheus):
    c = client(prometheus)
    result = triage_run.triage(c, settings(), "list", nodes=EXPECTED)
    got = dict((name, (r["state"], r["reasons"] if r["state"] == "unknown" else [])) for name, r in result["nodes"].items())
    assert {k: (v[0], [x for x in v[1] if x in CLASSES[k][1]]) for k, v in got.items()} == CLASSES, got
    assert result["nodes"]["node-findings"]["ids"] == ["gvisor.runsc_outdated"]
    assert result["nodes"]["node-failed"]["notes"] == ["could not look: kubelet"]
    assert result["nodes"]["node-missing"]["notes"] == ["required check(s) missing: reboot"]
    assert result["nodes"]["node-failed-2"]["notes"][1:] == ["could not look: kubelet"]
    assert 'audit.check_failed' in NODES["node-failed-finding"][0] and 'check="kubelet"} 0' in NODES["node-failed-finding"][0]
    assert result["nodes"]["node-failed-finding"]["notes"] == ["could not look: kubelet"]
    assert list(result["orphans"]) == ["node-orphan"]
    assert result["summary"]["requests"] == c.requests == 6  # Prometheus' clock and five; the list source asks nothing
    # the planted files' ages (an hour of margin: the clean one is as old as this module's run)
    clean, stale = result["nodes"]["node-clean"]["audit_age_s"], result["nodes"]["node-stale"]["audit_age_s"]
    assert 0 <= clean < 3600 < 4 * 3600 <= stale  # not-timed: ages of planted files, not how long the test took


def test_the_evaluation_time_is_prometheus_clock_and_each_nodes_clock_is_read(prometheus):
    """Issue 63 review M4 against the real server: the evaluation time is Prometheus' own time() (the controller's
    clock an hour ahead is refused before the fleet is asked), and each node's clock offset comes from node_exporter's
    time collector (node_time_seconds against its scrape's timestamp: these nodes share the machine's clock)."""
    c = client(prometheus)
    result = triage_run.triage(c, settings(), "list", nodes=EXPECTED)
    assert abs(result["summary"]["clock_skew_s"]) < 60, result["summary"]  # not-timed: one machine's one clock
    with pytest.raises(NodefixError, match="ahead of Prometheus' .* above max_clock_skew 60 s"):
        triage_run.triage(client(prometheus), settings(), "list", nodes=EXPECTED, now=lambda: time.time() + 3600)
    conf = settings()
    observed, dummy_orphans, warned = triage_observe.observe(c, conf, dict((n, {}) for n in EXPECTED),
                                                             result["summary"]["evaluation_time"])
    offsets = dict((n, o.get("clock_offset")) for n, o in observed.items() if o.get("up") == 1)
    assert offsets and all(o is not None and abs(o) < 60 for o in offsets.values()), offsets
    assert not warned


def test_kube_state_metrics_as_the_source_and_its_own_targets_checked(prometheus):
    """Issue 63 review M1 against the real server: kube_node_info and kube-state-metrics' own up in one answer; the
    classes are the list source's. A kube-state-metrics job with a target down (here the node job: node-down's target
    refuses connections) is refused - a shard down would drop its nodes; a selector scopes every query."""
    c = client(prometheus)
    result = triage_run.triage(c, settings(exporter_job="node"), "kube_state_metrics")
    assert dict((n, r["state"]) for n, r in result["nodes"].items()) == dict((n, v[0]) for n, v in CLASSES.items())
    assert result["nodes"]["node-clean"]["internal_ip"] == "10.0.0.%d" % (sorted(EXPECTED).index("node-clean") + 1)
    assert list(result["orphans"]) == ["node-orphan"] and result["summary"]["requests"] == c.requests == 7
    with pytest.raises(NodefixError, match=r"kube-state-metrics target\(s\) 127.0.0.1:[0-9]+ are down"):
        triage_run.triage(client(prometheus), settings(kube_state_metrics_job="node"), "kube_state_metrics")
    scoped = triage_run.triage(client(prometheus), settings(selector='nodename=~"node-(clean|tick)"'), "list",
                               nodes=["node-clean", "node-tick"])
    assert [r["state"] for r in scoped["nodes"].values()] == ["clean", "clean"] and scoped["orphans"] == {}


def test_one_tls_context_for_all_requests_and_certificates_still_checked(prometheus):
    # the plugin's and the module's transport: open_url's checks with one context (not one a request)
    transport = prometheus_transport.OpenUrl()
    c = prometheus_client.Client(transport, prometheus["url"], username=USER, password=PASSWORD, ca_path=prometheus["ca"])
    result = triage_run.triage(c, settings(), "list", nodes=EXPECTED)
    assert result["summary"]["requests"] == 6 and transport.contexts_made == 1
    for kw, says in (({}, "CERTIFICATE_VERIFY_FAILED"), ({"ca_path": prometheus["ca"], "password": "nope"}, "401")):
        bad = prometheus_client.Client(transport, prometheus["url"], username=USER, **dict({"password": PASSWORD}, **kw))
        with pytest.raises(prometheus_client.NoAnswer, match=says):
            bad.query("up", time.time())
    assert transport.contexts_made == 2  # the system's CA store: a context of its own


def test_an_answer_with_warnings_calls_no_node_clean(partial):
    # the same series as the first server's (every node has its data), each answer with a warning
    c = prometheus_client.Client(open_url, partial)
    result = triage_run.triage(c, settings(), "list", nodes=EXPECTED)
    assert result["summary"]["warnings"] and result["summary"]["counts"]["clean"] == 0, result["summary"]
    assert result["nodes"]["node-clean"]["state"] == result["nodes"]["node-tick"]["state"] == "unknown"
    assert result["nodes"]["node-clean"]["reasons"] == ["partial_answer"]
    assert result["nodes"]["node-findings"]["state"] == "findings"  # what is seen is seen
    # kube-state-metrics' answer with a warning: the fleet itself cannot be known - an error, never a fleet
    with pytest.raises(NodefixError, match="in part"):
        triage_run.triage(c, settings(), "kube_state_metrics")


def test_a_required_check_set_and_the_severity_floor(prometheus):
    # only what is required counts: kubelet not required, the failed node is clean; a critical floor keeps the finding
    result = triage_run.triage(client(prometheus), settings(required_checks=["gvisor", "containerd"],
                                                            min_severity="critical"), "list", nodes=EXPECTED)
    assert result["nodes"]["node-failed"]["state"] == result["nodes"]["node-missing"]["state"] == "clean"
    assert result["nodes"]["node-findings"]["state"] == "findings"


def plain(value):
    """``ansible-inventory --list``'s JSON without ansible-core 2.19's ``{"__ansible_unsafe": ...}`` wrappers (the
    plugin's values come from the nodes: never templates)."""
    if isinstance(value, dict):
        return plain(value["__ansible_unsafe"]) if set(value) == {"__ansible_unsafe"} else dict(
            (k, plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def inventory(prom, text, env=None):
    path = prom["tmp"] / "fleet.nodefix_triage.yml"
    path.write_text(text)
    return subprocess.run(["ansible-inventory", "-i", str(path), "--list"], capture_output=True, text=True, check=False,
                          env=dict(os.environ, **(env or {})))


def plugin_file(prom, **extra):
    lines = ["plugin: nodefix.k8s.triage", "prometheus_url: %s" % prom["url"], "prometheus_ca_path: %s" % prom["ca"],
             "expected_nodes: list", "nodes: %s" % json.dumps(EXPECTED), "node_label: nodename", "max_audit_age: 3600"]
    return "\n".join(lines + ["%s: %s" % kv for kv in extra.items()]) + "\n"


def test_the_inventory_plugin_end_to_end_with_credentials_from_the_environment(prometheus):
    env = {"NODEFIX_PROMETHEUS_USERNAME": USER, "NODEFIX_PROMETHEUS_PASSWORD": PASSWORD}
    out = inventory(prometheus, plugin_file(prometheus, max_unknown_percent=90, add_clean_hosts="true"), env)
    assert out.returncode == 0, out.stderr
    inv = plain(json.loads(out.stdout))
    assert sorted(inv["nodefix_triage_targets"]["children"]) == ["nodefix_triage_findings", "nodefix_triage_unknown"]
    assert inv["nodefix_triage_findings"]["hosts"] == ["node-findings"]
    assert sorted(inv["nodefix_triage_unknown"]["hosts"]) == sorted(n for n, c in CLASSES.items() if c[0] == "unknown")
    assert sorted(inv["nodefix_triage_clean"]["hosts"]) == ["node-clean", "node-tick"]
    assert inv["nodefix_triage_orphans"]["hosts"] == ["node-orphan"]
    assert inv["nodefix_finding_gvisor_runsc_outdated"]["hosts"] == inv["nodefix_severity_critical"]["hosts"] == [
        "node-findings"]
    hostvars = inv["_meta"]["hostvars"]
    assert hostvars["node-stale"]["nodefix_triage"]["reasons"] == ["stale"]
    assert set(hostvars["node-never"]["nodefix_triage"]) >= {"state", "ids", "findings", "reasons", "audit_age_s"}  # not-timed: key names
    summary = hostvars["node-clean"]["nodefix_triage_summary"]  # all's vars, as --list gives them to each host
    assert hostvars["node-orphan"]["nodefix_triage_fleet_size"] == len(EXPECTED) == summary["fleet_size"]
    unknown = sum(1 for c in CLASSES.values() if c[0] == "unknown")
    assert summary["counts"] == {"findings": 1, "unknown": unknown, "clean": 2, "orphan": 1} and summary["requests"] == 6
    assert PASSWORD not in out.stdout + out.stderr


@pytest.mark.parametrize("extra, env, says", [
    ({"prometheus_username": USER, "prometheus_password": "wrong-pass-word"}, {}, "401"),
    ({"prometheus_url": "https://127.0.0.1:%d" % free_port()}, {}, "did not answer"),
])
def test_the_inventory_fails_the_command_never_an_empty_inventory(prometheus, extra, env, says):
    text = plugin_file(prometheus)
    if "prometheus_url" in extra:
        text = text.replace("prometheus_url: %s" % prometheus["url"], "prometheus_url: %s" % extra.pop("prometheus_url"))
    out = inventory(prometheus, text + "".join("%s: %s\n" % kv for kv in extra.items()), env)
    assert out.returncode != 0 and says in out.stderr, out.stderr
    assert "wrong-pass-word" not in out.stdout + out.stderr and PASSWORD not in out.stdout + out.stderr


def test_the_inventory_takes_a_url_with_user_information_warns_and_shows_none(prometheus):
    encoded = PASSWORD.replace("s", "%73")
    text = plugin_file(prometheus, max_unknown_percent=90).replace(
        "prometheus_url: https://", "prometheus_url: https://%s:%s@" % (USER, encoded))
    out = inventory(prometheus, text)
    assert out.returncode == 0, out.stderr
    assert "prometheus_url carries credentials" in out.stderr and "prometheus_username" in out.stderr, out.stderr
    assert plain(json.loads(out.stdout))["nodefix_triage_findings"]["hosts"] == ["node-findings"]
    assert PASSWORD not in out.stdout + out.stderr and encoded not in out.stdout + out.stderr


# -- the triage playbook (module + add_host, then remediate) -----------------------------------------------

def playbook(prom, nodes, selector=None, **extra):
    options = {"prometheus_url": prom["url"], "prometheus_ca_path": prom["ca"], "prometheus_username": USER,
               "prometheus_password": PASSWORD, "expected_nodes": "list", "nodes": nodes, "node_label": "nodename",
               "max_audit_age": 3600, "max_unknown_percent": 60, "selector": selector}
    extra_file = prom["tmp"] / "extra.json"
    extra_file.write_text(json.dumps(dict(extra, nodefix_triage_options=options,
                                          nodefix_report_dir=str(prom["tmp"] / "reports"))))
    site = prom["tmp"] / "site.json"  # the site inventory: no node (the implicit localhost runs the triage)
    site.write_text(json.dumps({"all": {"hosts": {}}}))
    return subprocess.run(["ansible-playbook", "-i", str(site), "-e", "@%s" % extra_file,
                           os.path.join(REPO, "playbooks", "triage.yml")], capture_output=True, text=True, check=False)


def test_the_playbook_with_every_node_clean_has_nothing_to_do(prometheus):
    # the other nodes' exporters scoped out (node-findings would be an orphan with findings: an error)
    out = playbook(prometheus, ["node-clean"], selector='nodename="node-clean"')
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "nothing to do: nodefix_triage_targets has no host - the triage found no node" in out.stdout
    with open(prometheus["tmp"] / "reports" / "remediate" / "report.json") as fh:
        report = json.load(fh)
    assert report["nodes"] == [] and "nothing to do" in report["title"], report["title"]
    assert PASSWORD not in out.stdout + out.stderr


def test_the_playbook_hands_only_the_targets_to_remediate(prometheus):
    # a remediate variable out of range: remediate's own preflight refuses on the handed-over hosts, before any node
    out = playbook(prometheus, ["node-clean", "node-findings", "node-stale"], nodefix_storm_percent=150)
    assert out.returncode != 0 and "nodefix_storm_percent must be at most 100" in out.stdout, out.stdout[-3000:]
    assert "node-findings (findings)" in out.stdout and "node-stale (unknown)" in out.stdout
    assert "[node-findings -> localhost]" in out.stdout and "node-clean (" not in out.stdout
    assert PASSWORD not in out.stdout + out.stderr


def test_the_playbook_never_hands_on_a_node_that_is_the_controller(prometheus):
    """Hostile review of 2026-12-07 (D4): an expected node named localhost (no series: unknown) was a target, and
    add_host made the next play connect to the controller. It is counted and named, never handed on."""
    out = playbook(prometheus, ["node-clean", "localhost"], selector='nodename="node-clean"')
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    said = " ".join(out.stdout.split())  # the callback wraps long messages
    assert "1 unknown" in said and "0 target(s) handed to remediate; never targets - the controller itself: localhost" \
        in said, out.stdout
    assert "localhost (unknown)" not in said  # add_host's loop label: no item
    assert "nothing to do: nodefix_triage_targets has no host" in said
