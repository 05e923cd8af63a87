# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.reboot_gate - kured's controls and the fleet's reboot lock - run by Ansible on the
controller against lab/apiserver-double (a TEST DOUBLE of kube-apiserver: no Debian package ships one;
its Leases answer as the real server does - 409 AlreadyExists on a taken name, 409 Conflict on a stale
resourceVersion) through the official Python client, and against a Prometheus TEST DOUBLE (a few lines
below answering ``GET /api/v1/alerts`` in the HTTP API's JSON shape). No container, no cluster.

The module's calls are made in the order each test made them, each test's calls against its own double (module
fixture ``gate_calls``): the first of the lock's and one refused call are the tasks of ONE playbook run (the module
as Ansible ships and runs it), the others run the module's ``main()`` in this process (``module_call``: the same
arguments, argument spec, code, kubernetes client and double, none of Ansible's per-task start-up; issue 62 step 8 -
they were 16 more tasks of that run, issue 56: 18 runs of ``ansible -m`` before). Each test asserts on its calls'
results."""

import contextlib
import io
import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import ROOT, ApiServerDouble, run_logged

PODS = [
    {"namespace": "rook-ceph", "name": "rook-ceph-osd-3-6d9f", "node": "node-b", "owner": "ReplicaSet",
     "labels": {"app": "ceph-osd"}},
    {"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "web"}},
]


def gate_playbook(path, calls):
    """ONE playbook whose tasks are the reboot_gate calls, in order: [(label, kubeconfig, args)] - each task's
    result registered whatever it is (a failed call does not end the play), as a run of
    ``ansible -m nodefix.k8s.reboot_gate`` per call gave it (issue 56: one playbook run for the module's calls)."""
    tasks = []
    for label, kubeconfig, args in calls:
        params = dict({"node": "node-a", "kubeconfig": kubeconfig, "reason": "test"}, **args)
        params = dict((k, v) for k, v in params.items() if v is not None)
        tasks.append({"name": label, "nodefix.k8s.reboot_gate": params, "ignore_errors": True})
    path.write_text(json.dumps([{"name": "reboot_gate calls", "hosts": "localhost", "gather_facts": False,
                                 "tasks": tasks}]))
    argv = ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % os.path.join(
        ROOT, ".venv", "bin", "python"), str(path)]
    rc, out = run_logged("reboot-gate-calls", argv, timeout=600,
                         env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    assert rc == 0, out[-3000:]     # every call's failure is ignored: rc != 0 would be the run itself failing
    played, _end = json.JSONDecoder().raw_decode(out[out.index("{"):])
    results = dict((t["task"]["name"], t["hosts"]["localhost"]) for t in played["plays"][0]["tasks"])
    assert list(results) == [label for label, _k, _a in calls], list(results)
    return results


def module_call(args):
    """The reboot_gate module's ``main()`` in this process with ``args`` (the task's arguments as ``gate_playbook``
    gives them), its result as Ansible would register it: what the module printed on exit."""
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible.module_utils import basic
    from ansible.module_utils.common.text.converters import to_bytes
    from ansible_collections.nodefix.k8s.plugins.modules import reboot_gate
    payload = dict((k, v) for k, v in args.items() if v is not None)
    payload.update({"_ansible_check_mode": False, "_ansible_diff": False, "_ansible_remote_tmp": "/tmp",
                    "_ansible_keep_remote_files": False})
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload})))
        patch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
        with contextlib.redirect_stdout(printed), pytest.raises(SystemExit):
            reboot_gate.main()
    return json.loads(printed.getvalue())


def lease_writes(double):
    return [e for e in double.state()["log"] if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"] and e["method"] != "GET"]


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


BAD_INPUT = [
    ({"window_days": ["someday"]}, "is not a day of the week"),
    ({"window_start": "7 o'clock"}, "is not a time of day"),
    ({"time_zone": "Europe/Atlantis"}, "is not an IANA time zone"),
    ({"alert_filter_regexp": "(", "prometheus_url": "http://127.0.0.1:9"}, "is not a regular expression"),
    ({"kubeconfig": None}, "need(s) the API server"),
    ({"max_concurrent": -1}, "must not be negative"),
]


@pytest.fixture(scope="module")
def gate_calls(tmp_path_factory):
    """Every reboot_gate call of the tests below in ONE playbook run, each test's calls against its own API server
    double (as each test had its own) and in the order the test made them: {case: double}, {label: result}."""
    doubles = {}
    prom = Prometheus([{"labels": {"alertname": "Watchdog"}, "state": "firing"},
                       {"labels": {"alertname": "KubeNodeNotReady"}, "state": "firing"}])
    try:
        for case, nodes, pods in (("lock", ["node-a", "node-b"], PODS), ("blocking", ["node-a", "node-b"], PODS),
                                  ("alerts", ["node-a"], []), ("bad", ["node-a"], [])):
            doubles[case] = ApiServerDouble(tmp_path_factory.mktemp("gate-%s" % case), nodes, pods)
        lock, blocking, alerts = (doubles[c].kubeconfig for c in ("lock", "blocking", "alerts"))
        calls = [
            ("acquire-a", lock, {}),
            ("acquire-a-again", lock, {}),
            ("acquire-b", lock, {"node": "node-c"}),
            ("release-a", lock, {"state": "release"}),
            ("check-b", lock, {"node": "node-c", "state": "check"}),
            ("blocking-pod", blocking, {"node": "node-b", "blocking_pod_selectors": ["app=ceph-osd"]}),
            ("not-blocking", blocking, {"blocking_pod_selectors": ["app=ceph-osd"], "state": "check"}),
            # a window that is never open now: one minute, twelve hours away
            ("window", blocking, {"window_start": "00:00", "window_end": "00:01", "time_zone": "Pacific/Kiritimati"}),
            ("window-other", blocking, {"window_start": "12:00", "window_end": "12:01",
                                        "time_zone": "Pacific/Kiritimati"}),
            ("alerts", alerts, {"prometheus_url": prom.url, "alert_filter_regexp": "^Watchdog$"}),
            ("alerts-filtered", alerts, {"prometheus_url": prom.url,
                                         "alert_filter_regexp": "^(Watchdog|KubeNodeNotReady)$", "state": "check"}),
            ("no-prometheus", alerts, {"prometheus_url": "http://127.0.0.1:%d" % free_port()}),
        ]
        calls += [("bad-%d" % i, doubles["bad"].kubeconfig, args) for i, (args, _m) in enumerate(BAD_INPUT)]
        # through Ansible: the lock's first call (it takes a slot) and the first refused one
        through_ansible = ("acquire-a", "bad-0")
        results = gate_playbook(tmp_path_factory.mktemp("gate-play") / "gate.json",
                                [c for c in calls if c[0] in through_ansible])
        for label, kubeconfig, args in calls:
            if label not in through_ansible:
                results[label] = module_call(dict({"node": "node-a", "kubeconfig": kubeconfig, "reason": "test"}, **args))
        yield doubles, results
    finally:
        prom.stop()
        for double in doubles.values():
            double.stop()


def test_lock_acquire_check_release(gate_calls):
    doubles, results = gate_calls
    a = results["acquire-a"]
    assert not a.get("failed") and a["changed"] and a["allowed"] and a["lock"]["slot"] == "nodefix-reboot-0", a
    again = results["acquire-a-again"]
    assert not again.get("failed") and again["allowed"] and not again["changed"], again   # a re-run keeps its slot
    b = results["acquire-b"]
    assert not b.get("failed") and not b["allowed"] and not b["changed"]
    assert b["held_by"] == ["the reboot lock is full (max_concurrent 1): nodefix-reboot-0 held by node-a since %s"
                            % a["lock"]["holders"][0]["since"]]
    released = results["release-a"]
    assert not released.get("failed") and released["changed"] and released["lock"]["released"] == "nodefix-reboot-0"
    check = results["check-b"]
    assert not check.get("failed") and check["allowed"] and not check["changed"]
    writes = lease_writes(doubles["lock"])
    assert [(w["method"], w.get("holder")) for w in writes] == [("POST", "node-a"), ("DELETE", "node-a")], writes


def test_blocking_pod_and_window_hold_without_taking_the_lock(gate_calls):
    doubles, results = gate_calls
    held = results["blocking-pod"]
    assert not held.get("failed") and not held["allowed"]
    assert held["blocking_pods"] == ["rook-ceph/rook-ceph-osd-3-6d9f (app=ceph-osd)"]
    assert "blocking pod(s) on the node" in held["held_by"][0] and held["lock"]["slot"] is None
    free = results["not-blocking"]
    assert not free.get("failed") and free["allowed"] and free["blocking_pods"] == []
    closed, closed2 = results["window"], results["window-other"]
    assert not closed.get("failed") and not closed2.get("failed")
    shut = [r for r in (closed, closed2) if not r["allowed"]]
    assert shut and all("outside the reboot window" in r["held_by"][0] for r in shut)
    assert all(r["lock"]["slot"] is None for r in shut)
    assert lease_writes(doubles["blocking"]) == []


def test_firing_alerts_hold_and_a_silent_prometheus_fails(gate_calls):
    doubles, results = gate_calls
    held = results["alerts"]
    assert not held.get("failed") and not held["allowed"] and held["alerts"] == ["KubeNodeNotReady"], held
    ok = results["alerts-filtered"]
    assert not ok.get("failed") and ok["allowed"]
    failed = results["no-prometheus"]
    assert failed.get("failed") and "did not answer" in failed["msg"] and "nothing was drained" in failed["msg"]
    assert lease_writes(doubles["alerts"]) == []


@pytest.mark.parametrize("number", range(len(BAD_INPUT)), ids=[m for _a, m in BAD_INPUT])
def test_bad_input_fails_before_any_request(gate_calls, number):
    doubles, results = gate_calls
    failed = results["bad-%d" % number]
    assert failed.get("failed") and BAD_INPUT[number][1] in failed["msg"], failed
    # the six calls share one double: none of them sent it anything
    assert doubles["bad"].state()["log"] == []


def test_racing_controllers_never_share_a_slot(apiserver_double):
    """Eight controllers (threads, each its own client) race for one slot, five rounds: each round
    exactly one wins, through the real client and the double's 409s."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
    from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import reboot_api
    double = apiserver_double(["node-a"], [])
    for round_no in range(5):
        won, barrier = [], threading.Barrier(8)

        def race(i):
            lock = reboot_gate_lib.LeaseLock(reboot_api.KubeApi(double.kubeconfig), "kube-system", "nodefix-reboot",
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
        reboot_gate_lib.LeaseLock(reboot_api.KubeApi(double.kubeconfig), "kube-system", "nodefix-reboot", 1,
                                  "node-%d" % won[0]).release()
    refused = [e for e in double.state()["log"] if e.get("refused")]
    assert refused, "no controller ever lost a race: the test proved nothing"
