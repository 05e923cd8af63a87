# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine's lock slots (review item 3): a slot is held by the node's name, so a re-run of the same node finds
the slot a dead run of it left - whichever slot it was - and uses or gives back that one; and what this controller
saw of the slots' Leases is carried from step to step and node to node (``Context.lock_observed``, one store; the
action keeps it in ``observed_dir``: ``_rollout.observed.LockObservations``). A Lease first seen counts as live for a
whole lease, as client-go's leader election counts it: observations begun from scratch at every step could never
see a dead holder's slot expire within a run."""

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import observed
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Clock, node, pod
from plugins.module_utils.rollout_machine_harness import REBOOT, context, rollout

SLOT = ("kube-system", "nodefix-reboot-0")


def _dead_holder(api, holder="node-b", duration=60, slot=SLOT):
    """A slot whose holder (Ready, back) stopped renewing it: a Lease with a duration, never written again."""
    api.create_lease(slot[0], {"metadata": {"name": slot[1]},
                               "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                                        "renewTime": "2026-12-06T06:00:00.000000Z"}})


def _gate(result):
    return [s for s in result["steps"] if s["name"] == "reboot_gate"][0]["detail"]


def test_a_slot_seen_by_an_earlier_node_of_the_run_is_taken_over_once_seen_unchanged_for_its_ttl():
    api = ApiDouble([node(), node("node-b"), node("node-c")], [pod("web-1"), pod("web-2", node_name="node-c")])
    _dead_holder(api)
    clock, seen = Clock(), {}
    # node-a's turn: the slot is seen for the first time - live for a whole lease: its reboot is held
    first = machine.begin(context(api, roles=(REBOOT,), clock=clock, work=None, lock_observed=seen))
    assert first["outcome"] == Outcome.HELD and "the reboot lock is full" in first["detail"], first["lines"]
    assert seen["kube-system/nodefix-reboot"]["nodefix-reboot-0"]["key"].startswith("node-b|")
    # node-c's turn, 61 s later, on the same controller: the same Lease, unchanged since node-a's gate saw it
    clock.sleep(61)
    begun, ended = rollout(api, roles=(REBOOT,), clock=clock, node_name="node-c", run_id="run-1", lock_observed=seen)
    assert "took the reboot lock's slot nodefix-reboot-0" in _gate(begun), begun["lines"]
    assert ended["outcome"] == Outcome.OK and api.leases.get(SLOT) is None, ended["lines"]


def test_without_the_carried_observations_the_same_slot_is_never_taken_over():
    # the control: each node observing from scratch (its own empty store) sees the Lease for the first time
    api = ApiDouble([node(), node("node-b"), node("node-c")], [pod("web-1"), pod("web-2", node_name="node-c")])
    _dead_holder(api)
    clock = Clock()
    machine.begin(context(api, roles=(REBOOT,), clock=clock, lock_observed={}))
    clock.sleep(61)
    held = machine.begin(context(api, roles=(REBOOT,), clock=clock, node_name="node-c", lock_observed={}))
    assert held["outcome"] == Outcome.HELD and "the reboot lock is full" in held["detail"]


def test_a_holder_that_renewed_meanwhile_is_not_taken_over():
    api = ApiDouble([node(), node("node-b"), node("node-c")], [pod("web-1"), pod("web-2", node_name="node-c")])
    _dead_holder(api)
    clock, seen = Clock(), {}
    machine.begin(context(api, roles=(REBOOT,), clock=clock, lock_observed=seen))
    clock.sleep(61)
    lease = dict(api.leases[SLOT])
    api.replace_lease(SLOT[0], SLOT[1], dict(lease, spec=dict(lease["spec"], renewTime="2026-12-06T07:01:00.000000Z")))
    held = machine.begin(context(api, roles=(REBOOT,), clock=clock, node_name="node-c", lock_observed=seen))
    assert held["outcome"] == Outcome.HELD and "the reboot lock is full" in held["detail"]


def test_a_dead_run_s_slot_is_found_by_the_node_s_name_whichever_slot_it_was_and_given_back():
    # two slots; a dead run of node-a left slot 1 (slot 0 was taken when it ran, and freed since)
    api = ApiDouble([node(), node("node-b")], [pod("web-1")])
    api.create_lease("kube-system", {"metadata": {"name": "nodefix-reboot-1"}, "spec": {"holderIdentity": "node-a"}})
    del api.writes[:]
    begun, ended = rollout(api, roles=(REBOOT,), options={"lock_slots": 2})
    assert "took the reboot lock's slot nodefix-reboot-1" in _gate(begun), begun["lines"]
    assert ended["outcome"] == Outcome.OK and api.leases == {}, api.leases
    # no second slot taken beside its own (the storm breaker's reserve, Lease nodefix-storm, is not a slot)
    assert [w for w in api.writes if w[0] == "create_lease" and w[2] != "nodefix-storm"] == []


def test_the_action_keeps_the_observations_between_runs(tmp_path):
    store = observed.LockObservations(str(tmp_path / "observed"))
    assert store.load("boot-c") == {}
    seen = {"kube-system/nodefix-reboot": {"nodefix-reboot-0": {"key": "node-b|7|t", "mono": 812.5, "boot": "boot-c"},
                                           "nodefix-reboot-1": {"key": "node-c|9|t", "mono": 90.0, "boot": "boot-0"}}}
    store.save(seen)
    # a sight of another boot of this controller (its monotonic clock started again) is dropped: a first sight again
    mine = {"kube-system/nodefix-reboot": {"nodefix-reboot-0": seen["kube-system/nodefix-reboot"]["nodefix-reboot-0"]}}
    assert store.load("boot-c") == mine
    assert oct(os.stat(store.path).st_mode & 0o777) == "0o600"
    # a file others could have written is no observation (the stricter rule: a first sight again)
    os.chmod(store.path, 0o666)
    assert store.load("boot-c") == {}
    # (never a node's own file: node names keep only [A-Za-z0-9._-])
    assert os.path.basename(observed.Observations(str(tmp_path), "@locks", "b", lambda: 1.0, str).path) != \
        observed.LockObservations.NAME


def _kept_by_node_b(api, clock, seen, opts):
    """node-b takes the reboot slot, goes down for its reboot and is not back in service: it keeps the slot."""
    ctx = context(api, roles=(REBOOT,), clock=clock, node_name="node-b", run_id="run-b", options=opts,
                  lock_observed=seen)
    begun = machine.begin(ctx)
    assert begun["outcome"] is None and api.leases[SLOT]["spec"]["holderIdentity"] == "node-b", begun["lines"]
    ended = machine.end(ctx, begun["state"], {"status": "ok", "roles": [REBOOT], "msg": "", "reboot_started": True,
                                              "reboot_back": False})
    assert "not back in service" in " ".join(ended["lines"])
    return ended


def test_a_slot_kept_on_purpose_is_marked_on_its_lease_and_never_taken_over_by_the_ttl():
    # node-b went down for its reboot and is not back in service (its Node says Ready: Ready is not "back"): its slot
    # is kept, the Lease says why (nodefix.k8s/kept), and node-c - on the same controller, well past lock_ttl - waits
    api = ApiDouble([node("node-a"), node("node-b"), node("node-c")],
                    [pod("web-1", node_name="node-b"), pod("web-2", node_name="node-c")])
    clock, seen, opts = Clock(), {}, {"lock_ttl": 600}
    _kept_by_node_b(api, clock, seen, opts)
    assert "not back in service" in api.leases[SLOT]["metadata"]["annotations"][gate.KEPT]
    machine.begin(context(api, roles=(REBOOT,), clock=clock, node_name="node-c", run_id="run-c1", options=opts,
                          lock_observed=seen))
    clock.sleep(6001)
    again = machine.begin(context(api, roles=(REBOOT,), clock=clock, node_name="node-c", run_id="run-c2",
                                  options=opts, lock_observed=seen))
    assert api.leases[SLOT]["spec"]["holderIdentity"] == "node-b" and "the reboot lock is full" in _gate(again)
    # only a person (kubectl -n kube-system delete lease nodefix-reboot-0, docs/safety.md) gives it back
    api.delete_lease(*SLOT, resource_version=None)
    taken = machine.begin(context(api, roles=(REBOOT,), clock=clock, node_name="node-c", run_id="run-c3",
                                  options=opts, lock_observed=seen))
    assert "took the reboot lock's slot nodefix-reboot-0" in _gate(taken), taken["lines"]


def test_the_holder_s_own_next_run_gives_its_kept_slot_back_once_it_is_back():
    api = ApiDouble([node("node-a"), node("node-b")], [pod("web-1", node_name="node-b")])
    clock, seen, opts = Clock(), {}, {"lock_ttl": 600}
    _kept_by_node_b(api, clock, seen, opts)
    # node-b's next run, with nothing to reboot now, and its Node Ready: the slot it kept is given back
    ctx = context(api, roles=(), clock=clock, node_name="node-b", run_id="run-b2", options=opts, lock_observed=seen)
    begun = machine.begin(ctx)
    said = [s for s in begun["steps"] if s["name"] == "reclaim_slots"][0]["detail"]
    assert "released nodefix-reboot-0" in said and SLOT not in api.leases, begun["lines"]


def test_lock_observations_are_on_the_monotonic_clock_a_wall_clock_step_ages_none():
    # the wall clock jumps an hour (NTP step) while this controller's monotonic clock moves 5 s: the dead holder's
    # slot is not taken over; a sight of another boot is a first sight again, whatever its age
    api = ApiDouble([node(), node("node-b"), node("node-c")], [pod("web-1"), pod("web-2", node_name="node-c")])
    _dead_holder(api)
    clock, seen, mono = Clock(), {}, {"at": 100.0, "boot": "boot-c"}

    def begin(node_name):
        ctx = context(api, roles=(REBOOT,), clock=clock, node_name=node_name, lock_observed=seen)
        ctx.lock_time = lambda: (mono["at"], mono["boot"])
        return machine.begin(ctx)

    begin("node-a")
    assert seen["kube-system/nodefix-reboot"]["nodefix-reboot-0"]["mono"] == 100.0
    clock.sleep(3600)
    mono["at"] = 105.0
    assert "the reboot lock is full" in _gate(begin("node-c"))
    mono.update(at=5000.0, boot="boot-d")          # another boot: the old sight is no observation
    assert "the reboot lock is full" in _gate(begin("node-c"))
    mono["at"] = 5061.0                             # seen unchanged for the TTL (60 s) on this boot's clock
    assert "took the reboot lock's slot nodefix-reboot-0" in _gate(begin("node-c"))
