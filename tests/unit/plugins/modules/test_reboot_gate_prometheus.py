# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.reboot_gate against a REAL Prometheus server: Debian 12's prometheus 2.42 (unpacked
by scripts/setup.sh into lab/cache/prometheus), started here with a rules file whose alerts are
firing, pending and inactive, and asked ``GET /api/v1/alerts`` through the module's own code
(Ansible's open_url). The shapes a real server cannot produce are in test_reboot_gate.py."""

import datetime
import glob
import os
import socket
import subprocess
import time
import urllib.request

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import reboot_gate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BINARY = os.path.join(REPO, "lab", "cache", "prometheus", "prometheus_*", "usr", "bin", "prometheus")

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


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    found = glob.glob(BINARY)
    assert found, "the real prometheus is not unpacked in lab/cache/prometheus: run scripts/setup.sh"
    tmp = tmp_path_factory.mktemp("prometheus")
    (tmp / "rules.yml").write_text(RULES)
    (tmp / "prometheus.yml").write_text("global:\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n")
    url = "http://127.0.0.1:%d" % free_port()
    proc = subprocess.Popen([found[0], "--config.file=%s" % (tmp / "prometheus.yml"),
                             "--storage.tsdb.path=%s" % (tmp / "data"), "--web.listen-address=%s" % url[7:]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while True:  # until the first evaluation has made NodeDown fire
            try:
                with urllib.request.urlopen(url + "/api/v1/alerts", timeout=5) as resp:
                    if b'"NodeDown"' in resp.read():
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise AssertionError("prometheus did not come up: %s" % proc.stderr.read().decode()[-2000:])
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def gate(**kw):
    p = dict((k, v.get("default")) for k, v in reboot_gate.argument_spec().items())
    p.update(node="node-a", max_concurrent=0)
    p.update(kw)
    window, filter_re = reboot_gate.validate(p)
    now = datetime.datetime.now(datetime.timezone.utc)
    return reboot_gate.decide(p, window, filter_re, None, False, lambda: now, time.sleep)


def test_firing_alerts_hold_the_reboot(prometheus):
    out = gate(prometheus_url=prometheus)
    assert out["alerts"] == ["NodeDown", "Watchdog"]          # not the pending nor the inactive one
    assert out["held_by"] == ["firing alert(s) at %s: NodeDown, Watchdog" % prometheus]


def test_the_filter_lets_alerts_through(prometheus):
    out = gate(prometheus_url=prometheus, alert_filter_regexp="^Watchdog$")
    assert out["alerts"] == ["NodeDown"]
    out = gate(prometheus_url=prometheus, alert_filter_regexp="^(Watchdog|NodeDown)$")
    assert out["alerts"] == [] and out["held_by"] == []       # a well-formed answer with nothing firing: allowed


def test_pending_alerts_hold_when_not_firing_only(prometheus):
    out = gate(prometheus_url=prometheus, alert_firing_only=False, alert_filter_regexp="^(Watchdog|NodeDown)$")
    assert out["alerts"] == ["DiskSlow"]


def test_a_path_that_is_not_the_alerts_api_is_no_answer(prometheus):
    # the server's health endpoint under the URL: a text page (not JSON) holds the reboot, never allows it
    out = gate(prometheus_url=prometheus + "/-/healthy?x=", alert_filter_regexp=".*")
    assert out["held_by"] and ("gave no well-formed answer" in out["held_by"][0]), out
