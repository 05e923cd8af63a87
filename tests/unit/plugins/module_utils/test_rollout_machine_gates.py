# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine's parts the action nodefix.k8s.rollout needs beyond the first build (docs/rollout-machine.md,
Status): a refusal the play decided (step plan), the reboot lock's wait and poll (reboot_lock_wait/poll: every poll
judges the window, pods and alerts again), the re-judge right before the reboot (recheck), the etcd health command
of an etcd outside the cluster (nodefix_etcd_health_command), and a node lost at the after-audit (unreachable)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Clock, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, REBOOT, Work, context, names, outcomes

CP = {"node-role.kubernetes.io/control-plane": ""}
HEALTH = ["etcdctl", "endpoint", "health", "--cluster"]


def test_a_refusal_the_play_decided_stops_at_plan_and_touches_nothing():
    api = ApiDouble([node()], [pod("web-1")])
    work = Work()
    ctx = context(api, work=work)
    ctx.plan["refused"] = "kernel upgrade: no package of kernel 6.1 in the node's sources"
    first = machine.begin(ctx)
    assert first["outcome"] == Outcome.REFUSED and "kernel upgrade: no package" in first["detail"]
    assert names(first) == ["plan"] + list(machine.FINISH) and api.writes == []
    assert work.events == [("end", Outcome.REFUSED)]


class _Freeing(Clock):
    """A clock whose first sleep runs ``then`` (another holder gives its slot back, an alert starts firing)."""

    def __init__(self, then):
        super(_Freeing, self).__init__()
        self.then = then

    def sleep(self, seconds):
        super(_Freeing, self).sleep(seconds)
        if self.then:
            self.then()
            self.then = None


def _full_lock(api):
    api.create_lease("kube-system", {"metadata": {"name": "nodefix-reboot-0"}, "spec": {"holderIdentity": "node-b"}})


def test_the_reboot_lock_wait_polls_and_takes_a_slot_freed_meanwhile():
    api = ApiDouble([node(), node("node-b")], [pod("web-1")])
    _full_lock(api)
    clock = _Freeing(lambda: api.leases.pop(("kube-system", "nodefix-reboot-0")))
    first = machine.begin(context(api, roles=(REBOOT,), clock=clock, options={"lock_wait": 30, "lock_poll": 10}))
    assert first["outcome"] is None and first["state"]["fix_roles"] == [REBOOT] and clock.slept == [10]
    assert "took the reboot lock's slot nodefix-reboot-0" in [s["detail"] for s in first["steps"]
                                                              if s["name"] == "reboot_gate"][0]


def test_a_lock_wait_ends_held_as_soon_as_an_alert_fires_and_without_a_wait_at_once():
    api = ApiDouble([node(), node("node-b")], [pod("web-1")])
    _full_lock(api)
    work = Work()
    clock = _Freeing(lambda: work.firing.append("NodeDown"))
    first = machine.begin(context(api, roles=(REBOOT,), clock=clock, work=work,
                                  options={"lock_wait": 300, "lock_poll": 10}))
    assert first["outcome"] == Outcome.HELD and clock.slept == [10] and "alert NodeDown is firing" in first["detail"]
    api2 = ApiDouble([node(), node("node-b")], [pod("web-1")])
    _full_lock(api2)
    clock2 = Clock()
    held = machine.begin(context(api2, roles=(REBOOT,), clock=clock2))
    assert held["outcome"] == Outcome.HELD and clock2.slept == [] and "the reboot lock is full" in held["detail"]


@pytest.mark.parametrize("change,held", [
    (None, ""),
    ("window", "outside the reboot window"),
    ("alert", "alert NodeDown is firing"),
    ("prometheus", "the reboot gate could not be judged again: Prometheus did not answer"),
], ids=["still-open", "window-closed", "alert", "unreadable"])
def test_recheck_right_before_the_reboot_judges_window_and_alerts_again(change, held):
    api = ApiDouble([node()], [pod("web-1")])
    work = Work()
    ctx = context(api, roles=(CONTAINERD, REBOOT), work=work)
    first = machine.begin(ctx)
    assert first["outcome"] is None and REBOOT in first["state"]["fix_roles"]
    if change == "window":
        ctx.window = gate.Window(days=["sat"], start="01:00", end="02:00")   # 2026-12-06 is a Sunday
    elif change == "alert":
        work.firing.append("NodeDown")
    elif change == "prometheus":
        def unreadable():
            raise NodefixError("Prometheus did not answer")
        ctx.alerts = unreadable
    again = machine.recheck(ctx, first["state"])
    assert again["outcome"] is None and names(again) == ["reboot_recheck"]
    if not held:
        assert outcomes(again)["reboot_recheck"] == "done" and REBOOT in again["state"]["fix_roles"]
    else:
        assert outcomes(again)["reboot_recheck"] == Outcome.HELD and held in again["steps"][0]["detail"]
        assert again["state"]["fix_roles"] == [CONTAINERD] and held in again["state"]["reboot_held"][0]
    # the slot taken at the gate is kept for the give-back at the end
    assert api.held_leases() != []


class _Health(object):
    """The etcd health command's runner: its rc, and the argv it was asked."""

    def __init__(self, rc):
        self.rc, self.asked = rc, []

    def __call__(self, argv):
        self.asked.append(list(argv))
        return self.rc, "", "" if self.rc == 0 else "127.0.0.1:2379 is unhealthy"


@pytest.mark.parametrize("rc", [0, 1])
def test_an_external_etcd_is_judged_by_the_health_command(rc):
    nodes = [node(labels=CP), node("node-b", labels=CP), node("node-c", labels=CP)]
    api = ApiDouble(nodes, [pod("web-1")])
    health = _Health(rc)
    ctx = context(api, options={"control_plane": True, "etcd_health_command": HEALTH})
    ctx.run_command = health
    first = machine.begin(ctx)
    assert health.asked and health.asked[0] == HEALTH
    if rc:
        assert first["outcome"] == Outcome.HELD and "exited 1" in first["detail"]
        return
    assert first["outcome"] is None and "kube-system/nodefix-control-plane" in first["state"]["slots"]
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": [CONTAINERD], "msg": ""})
    # the control plane's slot is given back once the health command passes again
    assert second["outcome"] == Outcome.OK and api.held_leases() == [] and len(health.asked) >= 2


def test_an_external_etcd_without_a_health_command_is_held():
    nodes = [node(labels=CP), node("node-b", labels=CP), node("node-c", labels=CP)]
    api = ApiDouble(nodes, [pod("web-1")])
    first = machine.begin(context(api, options={"control_plane": True}))
    assert first["outcome"] == Outcome.HELD and "no etcd health command" in first["detail"]


def test_a_node_lost_at_the_after_audit_is_unreachable_and_stays_held():
    api = ApiDouble([node()], [pod("web-1")])
    work = Work()

    def lost():
        raise NodefixError("nodefix.k8s.node_audit: the node could not be reached: ssh: timed out", unreachable=True)
    ctx = context(api, work=work)
    ctx.audit = lost
    first = machine.begin(ctx)
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": [CONTAINERD], "msg": ""})
    assert second["outcome"] == Outcome.UNREACHABLE and second["state"]["unreachable_at"] == "audit after"
    assert outcomes(second)["verify"] == Outcome.UNREACHABLE and api.cordoned() and cordon.HELD in api.notes()


class _NoApi(object):
    """No API server: any request is a defect of the machine."""

    def __getattr__(self, name):
        raise AssertionError("an API call (%s) without an API server" % name)


def _local(roles, **kw):
    ctx = context(_NoApi(), roles=roles, **kw)
    ctx.api = None
    return ctx


def test_without_an_api_server_the_fixes_run_undrained_and_are_verified():
    work = Work()
    ctx = _local((CONTAINERD, REBOOT), work=work)
    first = machine.begin(ctx)
    assert first["outcome"] is None and names(first) == list(machine.BEFORE_LOCAL)
    # only a drained node is rebooted: the reboot is dropped, the other fixes go on
    assert first["state"]["fix_roles"] == [CONTAINERD] and "not drained" in first["state"]["reboot_held"][0]
    second = machine.end(ctx, first["state"], {"status": "ok", "roles": [CONTAINERD], "msg": ""})
    assert second["outcome"] == Outcome.OK and names(second) == list(machine.AFTER) and work.audits == 1
    assert work.events == []


def test_without_an_api_server_require_drain_refuses_restarts():
    first = machine.begin(_local((CONTAINERD,), options={"require_drain": True}))
    assert first["outcome"] == Outcome.REFUSED and "(no nodefix_kubeconfig)" in first["detail"]
    assert names(first) == list(machine.BEFORE_LOCAL[:-1])


@pytest.mark.parametrize("hint", [True, False])
def test_a_node_the_inventory_names_control_plane_is_guarded_without_its_labels(hint):
    """``control_plane_hint`` (the node is in one of reboot_control_plane_groups): a node with no control-plane label
    is guarded as one - held while the etcd health command fails; without the hint it is a worker (test_41's
    control-plane run)."""
    api = ApiDouble([node(), node("node-b"), node("node-c")], [pod("web-1")])
    health = _Health(1)
    ctx = context(api, options={"control_plane": True, "etcd_health_command": HEALTH, "control_plane_hint": hint})
    ctx.run_command = health
    first = machine.begin(ctx)
    if hint:
        assert first["outcome"] == Outcome.HELD and "exited 1" in first["detail"], first
        assert api.writes and not api.cordoned(), api.writes
    else:
        assert first["outcome"] is None and "kube-system/nodefix-control-plane" not in first["state"]["slots"], first
