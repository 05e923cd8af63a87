# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.reboot_gate's decision over a fake clock, a fake sleep, fake Prometheus answers and
the in-memory Lease store of test_reboot (it answers as the API server does: 409 on a taken name
or a stale resourceVersion)."""

import datetime
import json

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import reboot_gate
from plugins.module_utils.test_reboot import FakeLeases, at

UTC = datetime.timezone.utc


class Clock(object):
    """now() and sleep(): sleeping moves the clock, and runs what the test scheduled for then."""

    def __init__(self, start, events=None):
        self.t = at(start)
        self.events = sorted((at(k), v) for k, v in (events or {}).items())
        self.slept = []

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.t += datetime.timedelta(seconds=seconds)
        while self.events and self.events[0][0] <= self.t:
            self.events.pop(0)[1]()


class Pods(FakeLeases):
    def __init__(self):
        super(Pods, self).__init__()
        self.pods = []

    def list_pods(self, node, selector):
        return list(self.pods)


def params(**kw):
    p = dict((k, v.get("default")) for k, v in reboot_gate.argument_spec().items())
    p.update(node="node-b", kubeconfig="/dev/null", reason="kernel")
    p.update(kw)
    return p


def decide(p, api, clk, observed=None):
    window, filter_re = reboot_gate.validate(p)
    return reboot_gate.decide(p, window, filter_re, api, False, clk.now, clk.sleep, observed)


def holders(api):
    return [lease["spec"]["holderIdentity"] for lease in api.leases.values()]


def hold_slot(api, holder):
    assert api.create_lease("kube-system", {"metadata": {"name": "nodefix-reboot-0"},
                                            "spec": {"holderIdentity": holder}})


def test_a_slot_freed_after_the_window_closed_is_not_taken():
    api = Pods()
    hold_slot(api, "node-a")
    # the window closes at 04:00; node-a gives its slot back at 04:05; b waits up to 30 minutes
    clk = Clock("2026-11-25 03:50", {"2026-11-25 04:05": api.leases.clear})
    out = decide(params(window_start="22:00", window_end="04:00", lock_wait=1800, lock_poll=60), api, clk)
    assert out["lock"]["slot"] is None and "node-b" not in holders(api)
    assert len(out["held_by"]) == 1 and out["held_by"][0].startswith("outside the reboot window")
    assert clk.t <= at("2026-11-25 04:01")                   # the wait ended when the window closed


def test_an_alert_that_fires_during_the_wait_ends_it(monkeypatch):
    api = Pods()
    hold_slot(api, "node-a")
    answers = {"alerts": []}
    monkeypatch.setattr(reboot_gate.reboot_gate_lib, "fetch_alerts",
                        lambda client: {"status": "success", "data": dict(answers)})
    clk = Clock("2026-11-25 12:00", {
        "2026-11-25 12:02": lambda: answers.update(alerts=[{"labels": {"alertname": "Etcd"}, "state": "firing"}]),
        "2026-11-25 12:03": api.leases.clear})
    out = decide(params(prometheus_url="http://prom:9090", lock_wait=600, lock_poll=30), api, clk)
    assert out["lock"]["slot"] is None and "node-b" not in holders(api) and out["alerts"] == ["Etcd"]
    assert out["held_by"] == ["firing alert(s) at http://prom:9090: Etcd"]


def test_a_blocking_pod_that_starts_during_the_wait_ends_it():
    api = Pods()
    hold_slot(api, "node-a")
    pod = {"metadata": {"namespace": "db", "name": "pg-0"}, "status": {"phase": "Running"}}
    clk = Clock("2026-11-25 12:00", {"2026-11-25 12:01": lambda: api.pods.append(pod),
                                     "2026-11-25 12:02": api.leases.clear})
    out = decide(params(blocking_pod_selectors=["app=pg"], lock_wait=600, lock_poll=30), api, clk)
    assert out["lock"]["slot"] is None and out["blocking_pods"] == ["db/pg-0 (app=pg)"]


def test_a_wait_takes_the_slot_while_every_control_holds():
    api = Pods()
    hold_slot(api, "node-a")
    clk = Clock("2026-11-25 12:00", {"2026-11-25 12:02": api.leases.clear})
    out = decide(params(lock_wait=600, lock_poll=30), api, clk)
    assert out["held_by"] == [] and out["lock"]["slot"] == "nodefix-reboot-0"
    assert api.leases["nodefix-reboot-0"]["spec"]["holderIdentity"] == "node-b"
    # and a wait that runs out says the lock is full
    clk = Clock("2026-11-25 12:00")
    out = decide(params(node="node-c", lock_wait=90, lock_poll=30), api, clk)
    assert out["lock"]["slot"] is None and out["held_by"][0].startswith("the reboot lock is full")
    assert sum(clk.slept) == 90


def test_a_slot_taken_as_the_window_closes_is_given_back():
    api = Pods()
    clk = Clock("2026-11-25 03:59")
    original = api.create_lease

    def slow_create(namespace, body):  # the write lands after the window closed
        clk.t = at("2026-11-25 04:01")
        return original(namespace, body)
    api.create_lease = slow_create
    out = decide(params(window_start="22:00", window_end="04:00"), api, clk)
    assert out["lock"]["slot"] is None and api.leases == {}
    assert "closed while a slot was taken" in out["held_by"][0]


@pytest.mark.parametrize("body", [
    {"status": "success", "data": {}},
    {"status": "success", "data": {"alerts": None}},
    {"status": "success", "data": {"alerts": "x"}},
    {"status": "success", "data": {"alerts": [None]}},
    {"status": "success", "warnings": ["store unreachable"], "data": {"alerts": []}},
])
def test_a_malformed_prometheus_answer_holds_and_says_why(monkeypatch, body):
    api = Pods()
    monkeypatch.setattr(reboot_gate.reboot_gate_lib, "fetch_alerts", lambda client: body)
    out = decide(params(prometheus_url="http://prom:9090"), api, Clock("2026-11-25 12:00"))
    assert out["lock"]["slot"] is None and api.leases == {}
    assert len(out["held_by"]) == 1 and "gave no well-formed answer" in out["held_by"][0]


def test_observations_survive_a_run_and_a_bad_file_is_nothing_seen(tmp_path):
    path = str(tmp_path / "obs.json")
    assert reboot_gate.load_observations(path) == {}
    for text in ("[1]", "{", "null", '{"nodefix-reboot-0": 3}', "[" * 100000):
        with open(path, "w") as handle:
            handle.write(text)
        assert reboot_gate.load_observations(path) == {}
    with open(path, "w") as handle:
        json.dump({"nodefix-reboot-0": {"key": "a|1|t", "seen": "2026-11-25T12:00:00Z"}}, handle)
    assert reboot_gate.load_observations(path)["nodefix-reboot-0"]["key"] == "a|1|t"
