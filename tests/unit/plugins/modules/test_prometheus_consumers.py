# SPDX-License-Identifier: GPL-3.0-or-later
"""The Prometheus files read by their REAL consumers: Debian 12's node_exporter 1.5.0
(its textfile collector) and promtool 2.42 (metrics lint, and the alerting rules of
docs/monitoring.md run by `promtool test rules`).

The binaries come from scripts/setup.sh (tests/unit/fixtures/containerd/fetch-debs.sh
into lab/cache/prometheus, not committed); these tests skip when they are absent.
"""

import glob
import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.modules import audit_report, node_audit
from test_node_audit import critical, fake_detectors

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CACHE = os.path.join(REPO, "lab", "cache", "prometheus")


def real(pattern, name):
    found = glob.glob(os.path.join(CACHE, pattern, "usr", "bin", name))
    if not found:
        pytest.skip("real %s not unpacked (scripts/setup.sh fetches it into lab/cache/prometheus)" % name)
    return found[0]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NodeExporter(object):
    """node_exporter with only its textfile collector, on a free local port."""

    def __init__(self, directory):
        self.url = "http://127.0.0.1:%d/metrics" % free_port()
        self.proc = subprocess.Popen([real("prometheus-node-exporter_*", "prometheus-node-exporter"),
                                      "--collector.disable-defaults", "--collector.textfile",
                                      "--collector.textfile.directory=%s" % directory,
                                      "--web.listen-address=%s" % self.url.split("/")[2]],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def scrape(self):
        for _dummy in range(100):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as resp:
                    return resp.read().decode()
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError("node_exporter exited: %s" % self.proc.stderr.read().decode())
                time.sleep(0.1)
        raise AssertionError("node_exporter did not answer on %s" % self.url)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def sample(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + ("{" + want + "}" if labels else " ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_node_exporter_reads_the_node_file_and_its_heartbeat(run_module, monkeypatch, tmp_path):
    (tmp_path / "textfile").mkdir()
    dest = tmp_path / "textfile" / "nodefix.prom"
    fake_detectors(monkeypatch, {"gvisor": [critical("gvisor.runsc_outdated")]})
    args = {"root": str(tmp_path), "textfile": "/textfile/nodefix.prom"}
    result, failed, _dummy = run_module(node_audit, args)
    assert not failed and result["textfile"]["written"]
    exporter = NodeExporter(tmp_path / "textfile")
    try:
        first = exporter.scrape()
        assert sample(first, "node_textfile_scrape_error") == 0, first
        assert 'nodefix_finding{check="gvisor",id="gvisor.runsc_outdated",severity="critical",subject=""} 1' in first
        assert sample(first, "nodefix_findings", severity="critical") == 1
        stamp = sample(first, "node_textfile_mtime_seconds", file=str(dest))
        assert stamp == int(dest.stat().st_mtime), first
        # the same findings an hour later: the same bytes, and node_exporter sees the new heartbeat
        os.utime(str(dest), (stamp - 3600, stamp - 3600))
        before = dest.read_bytes()
        result, failed, _dummy = run_module(node_audit, args)
        assert not failed and result["changed"] is False and dest.read_bytes() == before
        assert sample(exporter.scrape(), "node_textfile_mtime_seconds", file=str(dest)) >= stamp
    finally:
        exporter.stop()


def scraped(directory):
    """One scrape of node_exporter's textfile collector over ``directory``, which it read without an error."""
    exporter = NodeExporter(directory)
    try:
        text = exporter.scrape()
    finally:
        exporter.stop()
    assert sample(text, "node_textfile_scrape_error") == 0, text
    return text


def test_node_exporter_reads_the_fleet_file(run_module, tmp_path):
    results = {"n1": {"checks": {"pids": {}}, "findings": [
        {"id": "pids.zombie_leaker", "severity": "medium", "title": "t", "subject": "42", "evidence": {},
         "remedy": "r", "check": "pids"}]}, "n2": {"checks": {"pids": {}}, "findings": []}}
    result, failed, _dummy = run_module(audit_report, {"results": results, "dest": str(tmp_path / "out"),
                                                       "formats": ["prometheus"]})
    assert not failed, result
    text = scraped(tmp_path / "out")
    assert sample(text, "nodefix_node_audited", node="n1") == 1 and sample(text, "nodefix_node_audited", node="n2") == 1
    assert sample(text, "nodefix_findings", node="n1", severity="medium") == 1


REMEDIATED = {
    "n1": {"status": "ok", "seconds": 42.5, "finished": 1764000000,
           "reboot": {"status": "verified", "seconds_away": 30}},
    "n2": {"status": "failed", "seconds": 12.0, "finished": 1764000100, "msg": "Restart containerd: failed",
           "reboot": None},
    "n3": {"status": "not run", "msg": "not run: storm breaker: ..."},
}


def remediation_report(run_module, tmp_path):
    results = dict((h, {"checks": {"pids": {}}, "findings": []}) for h in REMEDIATED)
    result, failed, _dummy = run_module(audit_report, {"results": results, "before": results, "remediation": REMEDIATED,
                                                       "dest": str(tmp_path / "out"), "formats": ["prometheus"]})
    assert not failed, result
    return tmp_path / "out" / "nodefix.prom"


def test_node_exporter_reads_a_remediations_metrics(run_module, tmp_path):
    remediation_report(run_module, tmp_path)
    text = scraped(tmp_path / "out")
    assert sample(text, "nodefix_remediation_outcome", node="n1", outcome="ok") == 1
    assert sample(text, "nodefix_remediation_outcome", node="n1", outcome="failed") == 0
    assert sample(text, "nodefix_remediation_outcome", node="n3", outcome="not_run") == 1
    assert sample(text, "nodefix_remediation_duration_seconds", node="n1") == 42.5
    assert sample(text, "nodefix_remediation_last_timestamp_seconds", node="n2") == 1764000100
    assert sample(text, "nodefix_remediation_reboots", node="n1") == 1
    assert sample(text, "nodefix_remediation_reboots", node="n2") == 0
    assert sample(text, "nodefix_remediation_nodes", outcome="failed") == 1
    assert sample(text, "nodefix_remediation_nodes", outcome="skipped") == 0


def test_promtool_lints_both_files(run_module, monkeypatch, tmp_path):
    promtool = real("prometheus_*", "promtool")
    (tmp_path / "textfile").mkdir()
    fake_detectors(monkeypatch, {"gvisor": [critical("gvisor.runsc_outdated")]})
    run_module(node_audit, {"root": str(tmp_path), "textfile": "/textfile/nodefix.prom"})
    run_module(audit_report, {"results": {"n1": {"findings": []}}, "dest": str(tmp_path / "out"), "formats": ["prometheus"]})
    remediated = remediation_report(run_module, tmp_path / "rem")
    for path in (tmp_path / "textfile" / "nodefix.prom", tmp_path / "out" / "nodefix.prom", remediated):
        proc = subprocess.run([promtool, "check", "metrics"], input=path.read_bytes(), capture_output=True, check=False)
        assert proc.returncode == 0, (path, proc.stdout, proc.stderr)


def docs_rules():
    with open(os.path.join(REPO, "docs", "monitoring.md")) as fh:
        text = fh.read()
    block = re.search(r"```yaml\n(groups:.*?)```", text, re.S).group(1)
    return yaml.safe_load(block)


def test_the_documented_alerts_fire_as_documented(tmp_path):
    # promtool runs the rules of docs/monitoring.md against series shaped as node_exporter exports them
    promtool = real("prometheus_*", "promtool")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(docs_rules()))
    prom = "/var/lib/prometheus/node-exporter/nodefix.prom"
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            # a heartbeat every 30 min until 01:00 on node a; node b keeps beating
            {"series": 'node_textfile_mtime_seconds{file="%s",instance="a"}' % prom,
             "values": " ".join(str(60 * 30 * (m // 30)) for m in range(0, 61)) + " " + " ".join(["3600"] * 240)},
            {"series": 'node_textfile_mtime_seconds{file="%s",instance="b"}' % prom,
             "values": " ".join(str(60 * m) for m in range(0, 301))},
            {"series": 'nodefix_finding{check="gvisor",id="gvisor.runsc_outdated",instance="a",severity="critical",'
                       'subject=""}', "values": "1x300"},
            # node a asks for a reboot from the start; node b's pending series is 0 (none asked)
            {"series": 'nodefix_reboot_pending{instance="a",reason="/var/run/reboot-required exists"}',
             "values": "1x1600"},
            {"series": 'nodefix_reboot_pending{instance="b",reason=""}', "values": "0x1600"},
            # the controller's remediation file: node c's last remediation failed, then (from 2h) one of three
            {"series": 'nodefix_remediation_outcome{instance="ctl",node="c",outcome="failed"}', "values": "0x30 1x300"},
            {"series": 'nodefix_remediation_outcome{instance="ctl",node="d",outcome="failed"}', "values": "0x300"},
            {"series": 'nodefix_remediation_nodes{instance="ctl",outcome="failed"}', "values": "1x119 3x200"},
        ],
        "alert_rule_test": [
            {"eval_time": "2h30m", "alertname": "NodefixAuditStale", "exp_alerts": []},
            {"eval_time": "3h30m", "alertname": "NodefixAuditStale", "exp_alerts": [{
                "exp_labels": {"file": prom, "instance": "a"},
                "exp_annotations": {"summary": "no nodefix.k8s audit on a for 2 hours"}}]},
            {"eval_time": "23h", "alertname": "NodefixRebootPending", "exp_alerts": []},
            {"eval_time": "25h", "alertname": "NodefixRebootPending", "exp_alerts": [{
                "exp_labels": {"instance": "a", "reason": "/var/run/reboot-required exists"},
                "exp_annotations": {
                    "summary": "a has waited a day for a reboot: /var/run/reboot-required exists",
                    "description": "ansible-playbook nodefix.k8s.remediate -e nodefix_reboot=true (the reboot role's "
                                   "window, lock and blocking pods apply)."}}]},
            {"eval_time": "20m", "alertname": "NodefixRemediationFailed", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "NodefixRemediationFailed", "exp_alerts": [{
                "exp_labels": {"node": "c"},
                "exp_annotations": {
                    "summary": "the last nodefix.k8s remediation of c failed",
                    "description": "Its report (remediate/report.html) says which step failed and why."}}]},
            {"eval_time": "1h", "alertname": "NodefixRemediationsFailing", "exp_alerts": []},
            {"eval_time": "2h30m", "alertname": "NodefixRemediationsFailing", "exp_alerts": [{
                "exp_labels": {}, "exp_annotations": {"summary": "3 nodes failed their last nodefix.k8s remediation"}}]},
            {"eval_time": "10m", "alertname": "NodefixFindingCritical", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "NodefixFindingCritical", "exp_alerts": [{
                # an empty label value is no label at all for Prometheus (subject="")
                "exp_labels": {"id": "gvisor.runsc_outdated", "instance": "a", "severity": "page"},
                "exp_annotations": {
                    "summary": "gvisor.runsc_outdated on a ()",
                    "description": "See docs/findings.md of nodefix.k8s; remediate with ansible-playbook "
                                   "nodefix.k8s.remediate --limit the node."}}]},
        ],
    }]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    proc = subprocess.run([promtool, "test", "rules", "tests.yml"], cwd=str(tmp_path), capture_output=True, check=False)
    assert proc.returncode == 0, (proc.stdout.decode() + proc.stderr.decode())
