# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.reboot_gate - kured's controls and the fleet's reboot lock - run by Ansible on the
controller against lab/apiserver-double (a TEST DOUBLE of kube-apiserver: no Debian package ships one;
its Leases answer as the real server does - 409 AlreadyExists on a taken name, 409 Conflict on a stale
resourceVersion) through the official Python client, and against a Prometheus TEST DOUBLE (a few lines
below answering ``GET /api/v1/alerts`` in the HTTP API's JSON shape). No container, no cluster."""

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from conftest import ROOT, run_logged

PODS = [
    {"namespace": "rook-ceph", "name": "rook-ceph-osd-3-6d9f", "node": "node-b", "owner": "ReplicaSet",
     "labels": {"app": "ceph-osd"}},
    {"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "web"}},
]


def gate(name, double, **args):
    params = dict({"node": "node-a", "kubeconfig": double.kubeconfig if double else None, "reason": "test"}, **args)
    params = dict((k, v) for k, v in params.items() if v is not None)
    argv = ["ansible", "localhost", "-c", "local", "-e", "ansible_python_interpreter=%s" % os.path.join(
        ROOT, ".venv", "bin", "python"), "-m", "nodefix.k8s.reboot_gate", "-a", json.dumps(params)]
    rc, out = run_logged("reboot-gate-%s" % name, argv, timeout=300)
    # "localhost | CHANGED => " then the result in the project's YAML callback
    return rc, yaml.safe_load(out.split("=>", 1)[1]) if "=>" in out else {}, out


def lease_writes(double):
    return [e for e in double.state()["log"] if "/leases/" in e["path"] and e["method"] != "GET"]


class Prometheus(object):
    """A Prometheus TEST DOUBLE: ``GET /api/v1/alerts`` answers ``alerts`` as the HTTP API does."""

    def __init__(self, alerts):
        body = json.dumps({"status": "success", "data": {"alerts": alerts}}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                code = 200 if self.path == "/api/v1/alerts" else 404
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body if code == 200 else b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lock_acquire_check_release(apiserver_double):
    double = apiserver_double(["node-a", "node-b"], PODS)
    rc, a, out = gate("acquire-a", double)
    assert rc == 0 and a["changed"] and a["allowed"] and a["lock"]["slot"] == "nodefix-reboot-0", out[-2000:]
    rc, again, out = gate("acquire-a-again", double)
    assert rc == 0 and again["allowed"] and not again["changed"], out[-2000:]   # a re-run keeps its slot
    rc, b, out = gate("acquire-b", double, node="node-c")
    assert rc == 0 and not b["allowed"] and not b["changed"]
    assert b["held_by"] == ["the reboot lock is full (max_concurrent 1): nodefix-reboot-0 held by node-a since %s"
                            % a["lock"]["holders"][0]["since"]]
    rc, released, out = gate("release-a", double, state="release")
    assert rc == 0 and released["changed"] and released["lock"]["released"] == "nodefix-reboot-0"
    rc, check, out = gate("check-b", double, node="node-c", state="check")
    assert rc == 0 and check["allowed"] and not check["changed"]
    writes = lease_writes(double)
    assert [(w["method"], w.get("holder")) for w in writes] == [("POST", "node-a"), ("DELETE", "node-a")], writes


def test_blocking_pod_and_window_hold_without_taking_the_lock(apiserver_double):
    double = apiserver_double(["node-a", "node-b"], PODS)
    rc, held, out = gate("blocking-pod", double, node="node-b", blocking_pod_selectors=["app=ceph-osd"])
    assert rc == 0 and not held["allowed"] and held["blocking_pods"] == ["rook-ceph/rook-ceph-osd-3-6d9f (app=ceph-osd)"]
    assert "blocking pod(s) on the node" in held["held_by"][0] and held["lock"]["slot"] is None
    rc, free, out = gate("not-blocking", double, blocking_pod_selectors=["app=ceph-osd"], state="check")
    assert rc == 0 and free["allowed"] and free["blocking_pods"] == []
    # a window that is never open now: one minute, twelve hours away
    rc, closed, out = gate("window", double, window_start="00:00", window_end="00:01", time_zone="Pacific/Kiritimati")
    rc2, closed2, out2 = gate("window-other", double, window_start="12:00", window_end="12:01",
                              time_zone="Pacific/Kiritimati")
    assert rc == 0 and rc2 == 0
    shut = [r for r in (closed, closed2) if not r["allowed"]]
    assert shut and all("outside the reboot window" in r["held_by"][0] for r in shut)
    assert all(r["lock"]["slot"] is None for r in shut)
    assert lease_writes(double) == []


def test_firing_alerts_hold_and_a_silent_prometheus_fails(apiserver_double):
    double = apiserver_double(["node-a"], [])
    prom = Prometheus([{"labels": {"alertname": "Watchdog"}, "state": "firing"},
                       {"labels": {"alertname": "KubeNodeNotReady"}, "state": "firing"}])
    try:
        rc, held, out = gate("alerts", double, prometheus_url=prom.url, alert_filter_regexp="^Watchdog$")
        assert rc == 0 and not held["allowed"] and held["alerts"] == ["KubeNodeNotReady"], out[-2000:]
        rc, ok, out = gate("alerts-filtered", double, prometheus_url=prom.url,
                           alert_filter_regexp="^(Watchdog|KubeNodeNotReady)$", state="check")
        assert rc == 0 and ok["allowed"]
    finally:
        prom.stop()
    rc, failed, out = gate("no-prometheus", double, prometheus_url="http://127.0.0.1:%d" % free_port())
    assert rc != 0 and "did not answer" in failed["msg"] and "nothing was drained" in failed["msg"]
    assert lease_writes(double) == []


@pytest.mark.parametrize("args, message", [
    ({"window_days": ["someday"]}, "is not a day of the week"),
    ({"window_start": "7 o'clock"}, "is not a time of day"),
    ({"time_zone": "Europe/Atlantis"}, "is not an IANA time zone"),
    ({"alert_filter_regexp": "(", "prometheus_url": "http://127.0.0.1:9"}, "is not a regular expression"),
    ({"kubeconfig": None}, "need(s) the API server"),
    ({"max_concurrent": -1}, "must not be negative"),
])
def test_bad_input_fails_before_any_request(apiserver_double, args, message):
    double = apiserver_double(["node-a"], [])
    rc, failed, out = gate("bad-%s" % message.split()[-1], double, **args)
    assert rc != 0 and message in failed["msg"], out[-2000:]
    assert double.state()["log"] == []


def test_racing_controllers_never_share_a_slot(apiserver_double):
    """Eight controllers (threads, each its own client) race for one slot, five rounds: each round
    exactly one wins, through the real client and the double's 409s."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
    double = apiserver_double(["node-a"], [])
    for round_no in range(5):
        won, barrier = [], threading.Barrier(8)

        def race(i):
            lock = reboot_gate_lib.LeaseLock(reboot_gate_lib.KubeApi(double.kubeconfig), "kube-system", "nodefix-reboot",
                                             1, "node-%d" % i)
            barrier.wait()
            slot, _holders = lock.acquire("race %d" % round_no)
            if slot:
                won.append(i)
        threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(won) == 1, (round_no, won)
        reboot_gate_lib.LeaseLock(reboot_gate_lib.KubeApi(double.kubeconfig), "kube-system", "nodefix-reboot", 1,
                                  "node-%d" % won[0]).release()
    refused = [e for e in double.state()["log"] if e.get("refused")]
    assert refused, "no controller ever lost a race: the test proved nothing"
