# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory plugin's way out, through the REAL ``ansible-inventory`` binary (Ansible's own config, option
conversion and error handling - issue 63: any failure to answer is a failed parse, never a warning with an empty
inventory), against a Prometheus HTTP API TEST DOUBLE that answers the odd shapes a real Prometheus would not give
(a label that is not a string, a 401 whose body echoes the credential, a finding's label and a warning carrying
one). Every failure exits non-zero with no host, and no credential of the plugin's - from its options, the
environment, its token file or its headers - nor one a node or the server wrote, reaches stdout, stderr or the
inventory cache. The real Prometheus end to end is tests/unit/plugins/modules/test_prometheus_real.py."""

import http.server
import json
import os
import socket
import subprocess
import threading
import time

import pytest
from ansible.module_utils.six.moves.urllib.parse import parse_qs, urlsplit

PASSWORD = "Echo-Pw-63"


class Double(http.server.BaseHTTPRequestHandler):
    """A Prometheus HTTP API TEST DOUBLE: one healthy node (node-a) unless ``Double.odd`` changes an answer."""
    odd = {}

    def do_GET(self):  # noqa: N802 - the name http.server calls
        query = parse_qs(urlsplit(self.path).query)
        expr = query["query"][0]
        status, body = Double.odd.get("status") or (200, None)
        if body is None and "time" not in query:  # the server's clock: time() at its own now, as Prometheus answers
            assert expr == "time()", expr
            now = time.time() + Double.odd.get("clock_ahead", 0)
            body = {"status": "success", "data": {"resultType": "scalar", "result": [now, "%.3f" % now]}}
        elif body is None:
            at = float(query["time"][0])
            body = {"status": "success", "data": {"resultType": "vector", "result": self.samples(expr, at)}}
            if Double.odd.get("warning"):
                body["warnings"] = [Double.odd["warning"]]
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(raw)

    @staticmethod
    def samples(expr, at):
        def sample(labels, value):
            return {"metric": labels, "value": [at, str(value)]}
        if "kube_node_info" in expr:  # and kube-state-metrics' own up (the query's 'or')
            return [sample(Double.odd.get("ksm_labels") or {"node": "node-a", "internal_ip": "10.0.0.1"}, 1),
                    sample({"__name__": "up", "job": "kube-state-metrics", "instance": "10.0.9.1:8080"}, 1)]
        if expr.startswith("min by (instance) (up"):  # "up": 0 - the exporter is down
            return [sample(Double.odd.get("up_labels") or {"instance": "node-a:9100"}, Double.odd.get("up", 1))]
        if "node_textfile" in expr:
            return [sample({"instance": "node-a:9100", "__name__": "node_textfile_scrape_error"}, 0),
                    sample({"instance": "node-a:9100", "__name__": "node_textfile_mtime_seconds"}, at - 60),
                    sample({"instance": "node-a:9100", "nodefix_clock": "offset"}, 0.002)]  # the node's clock
        if expr.startswith("nodefix_finding") and Double.odd.get("clean"):  # "clean": node-a has no finding
            return []
        if expr.startswith("nodefix_finding"):
            return [sample({"instance": "node-a:9100", "id": "kubelet.eviction_thresholds", "severity": "high",
                            "check": "kubelet", "subject": Double.odd.get("subject", "")}, 1)]
        return []

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture(scope="module")
def url():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Double)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


def inventory(tmp_path, url, odd, extra="", env=None, args=()):
    Double.odd = odd
    path = tmp_path / "fleet.nodefix_triage.yml"
    path.write_text("plugin: nodefix.k8s.triage\nprometheus_url: %s\nrequired_checks: []\nmax_unknown_percent: 100\n"
                    "expected_nodes: %s\n%s" % (url, "kube_state_metrics" if "ksm_labels" in odd else
                                                "list\nnodes: %s" % json.dumps(odd.get("nodes", ["node-a"])), extra))
    environ = dict((k, v) for k, v in os.environ.items() if not k.startswith(("NODEFIX_PROMETHEUS_", "ANSIBLE_INVENTORY_")))
    return subprocess.run(["ansible-inventory", "-i", str(path), "--list"] + list(args), capture_output=True, text=True,
                          check=False, env=dict(environ, **(env or {})))


def no_hosts(out):
    try:
        listed = json.loads(out.stdout or "{}")
    except ValueError:
        return False
    return not (listed.get("_meta") or {}).get("hostvars") and not listed.get("nodefix_triage_findings")


def test_the_double_answers_a_healthy_parse(tmp_path, url):
    # the baseline every failure below differs from by one odd answer: node-a with its finding, exit 0
    out = inventory(tmp_path, url, {})
    assert out.returncode == 0, out.stderr
    assert "node-a" in json.loads(out.stdout)["nodefix_triage_findings"]["hosts"]


@pytest.mark.parametrize("odd, extra, says", [
    ({"up_labels": {"instance": 5}}, "", "labels are not all strings"),               # a label that is not a string
    ({"ksm_labels": {"node": 7, "internal_ip": "10.0.0.1"}}, "", "labels are not all strings"),
    ({}, "max_unknown_percent: '5%'\n", "max_unknown_percent"),                      # Ansible's own option check
    ({}, "node_label_regex: '('\n", "node_label_regex"),                              # the plugin's own option check
    ({"status": (200, b"<html>")}, "", "not JSON"),
    ({"status": (503, {"status": "error", "error": "overloaded"})}, "", "did not answer"),
    ({"clock_ahead": 600}, "", "above max_clock_skew 60 s"),                           # the clocks disagree: refused
])
def test_every_failure_fails_the_command_with_no_host(tmp_path, url, odd, extra, says):
    out = inventory(tmp_path, url, odd, extra)
    assert out.returncode != 0 and says in out.stderr, (out.returncode, out.stderr)
    assert no_hosts(out), out.stdout
    assert "No inventory was parsed" not in out.stderr or "ERROR" in out.stderr


@pytest.mark.parametrize("body, extra, env", [
    # the password only in the environment; the 401's body echoes it
    (b"Unauthorized (invalid credentials robot/Echo-Pw-63)", "",
     {"NODEFIX_PROMETHEUS_USERNAME": "robot", "NODEFIX_PROMETHEUS_PASSWORD": PASSWORD}),
    # a header's value echoed
    (b"X-Api-Key Echo-Pw-63 rejected", "prometheus_headers:\n  X-Api-Key: Echo-Pw-63\n", {}),
    # the token read from the token file echoed
    (b"token Echo-Pw-63 expired", "prometheus_token_file: {token}\n", {}),
])
def test_a_failure_echoing_the_plugins_own_credential_never_shows_it(tmp_path, url, body, extra, env):
    token = tmp_path / "token"
    token.write_text(PASSWORD + "\n")
    out = inventory(tmp_path, url, {"status": (401, body)}, extra.replace("{token}", str(token)), env)
    assert out.returncode != 0 and "401" in out.stderr, out.stderr
    assert body.decode().split()[0] in out.stderr, out.stderr  # the body is shown, its credential is not
    assert PASSWORD not in out.stdout + out.stderr and no_hosts(out)


def test_labels_and_warnings_reach_neither_the_list_nor_a_cache_with_a_credential(tmp_path, url):
    cache = tmp_path / "cache"
    extra = ("cache: true\ncache_plugin: ansible.builtin.jsonfile\ncache_connection: %s\nadd_clean_hosts: true\n"
             % cache)
    out = inventory(tmp_path, url, {"subject": "stderr: token: SubjTok-63 ; password=SubjPw-63",
                                    "warning": "partial answer; note: password: WarnPw-63"}, extra)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert listed["_meta"]["hostvars"]["node-a"]["nodefix_triage"]  # the node is there (unknown: a warning)
    # the triage is never written to the cache (never served from it either: below)
    written = "".join(p.read_text() for p in cache.iterdir()) if cache.exists() else ""
    assert "node-a" not in written and "partial answer" not in written
    for secret in ("SubjTok-63", "SubjPw-63", "WarnPw-63"):
        assert secret not in out.stdout + out.stderr + written


def test_a_clean_node_that_broke_is_never_served_clean_from_the_cache(tmp_path, url):
    """Hostile review of 2026-12-07 (D2): with cache: true run 1's clean verdict was served for up to max_audit_age
    after the node's exporter went down, with no request to Prometheus. Every parse asks: run 2 says unknown."""
    cache = tmp_path / "cache"
    extra = ("cache: true\ncache_plugin: ansible.builtin.jsonfile\ncache_connection: %s\ncache_timeout: 3600\n"
             "add_clean_hosts: true\n" % cache)
    out = inventory(tmp_path, url, {"clean": True}, extra)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["nodefix_triage_clean"]["hosts"] == ["node-a"]
    out = inventory(tmp_path, url, {"clean": True, "up": 0}, extra)  # the exporter went down since
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert "node-a" not in listed.get("nodefix_triage_clean", {}).get("hosts", []), listed
    assert listed["nodefix_triage_unknown"]["hosts"] == ["node-a"], listed
    assert "exporter_down" in json.dumps(listed["_meta"]["hostvars"]["node-a"]["nodefix_triage"]["reasons"])
    assert "cache is ignored" in out.stderr, out.stderr  # the cache options are accepted, and say so


@pytest.mark.parametrize("odd, refused", [
    ({"nodes": ["node-a", "localhost", "127.0.0.1", "::1", "127.0.1.1", "ip6-localhost", "[::ffff:127.0.0.1]"]},
     ["localhost", "127.0.0.1", "::1", "127.0.1.1", "ip6-localhost", "[::ffff:127.0.0.1]"]),
    ({"ksm_labels": {"node": "node-a", "internal_ip": "127.0.0.1"}}, ["node-a"]),  # its internal IP: the controller
    # L1: what inet_aton reads as a loopback or unspecified address, RHEL's /etc/hosts names, the controller's own name
    ({"nodes": ["node-a", "127.1", "0x7f000001", "2130706433", "0177.0.0.1", "127.000.000.001", "0", "localhost4",
                "localhost4.localdomain4", "localhost6.localdomain6", socket.gethostname().lower()]},
     ["127.1", "0x7f000001", "2130706433", "0177.0.0.1", "127.000.000.001", "0", "localhost4",
      "localhost4.localdomain4", "localhost6.localdomain6", socket.gethostname().lower()]),
    ({"ksm_labels": {"node": "node-a", "internal_ip": "0x7f000001"}}, ["node-a"]),
])
def test_an_expected_node_that_is_the_controller_is_never_a_host(tmp_path, url, odd, refused):
    """Hostile review of 2026-12-07 (D4): an expected node named localhost (or whose address is a loopback one) became
    a host, and the next play ran on the controller. Reported in the summary (not_hosts), never a host."""
    out = inventory(tmp_path, url, odd, args=["--export"])  # all's vars under all (node-a is no host in the 2nd)
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    hostvars = listed["_meta"]["hostvars"]
    summary = listed["all"]["vars"]["nodefix_triage_summary"]
    assert sorted(summary["not_hosts"]) == sorted(refused), summary
    for name in refused:
        assert name not in hostvars and "the controller itself" in json.dumps(summary["not_hosts"][name])
    assert "localhost" not in json.dumps(listed.get("nodefix_triage_unknown", {}))
    assert summary["targets"] == (0 if "ksm_labels" in odd else 1)  # node-a's finding (list), not the refused ones
