# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine and a kernel upgrade stopped between its install - which arms the new kernel's one-time boot
(kernel_boot state=once) - and the boot's confirmation (state=confirm): review R2's remainder. The record on the
Node says it (``kernelPending``, written in the same write as the kernel path's recheck renewal, before the install);
the end half removes it once the kernel role confirmed the boot, or disarms the boot (the machine's ``always``); a
run that finds it left by a dead run disarms it (``kernel_boot state=disarm``, GRUB's default back on the running
kernel - or, when the node runs the armed kernel unconfirmed, on the previous one, the kernel not kept) and ends
``held`` - never clean; a disarm that cannot be made keeps the record for the next run. Every kill
point of a kernel upgrade's rollout is a test."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, Killed, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, context, outcomes

NEW = "6.12.95+deb12-amd64"
KERNEL = {"id": "kernel.below_minimum", "check": "kernel", "reason": "kernel 6.1 below the minimum 6.12"}
FIRST = {"host": "controller", "pid": 100, "boot": "boot-c"}
SECOND = {"host": "controller", "pid": 200, "boot": "boot-c"}


class Node(object):
    """A double of the node side of the disarm (``kernel_boot state=disarm``): what it was asked, and its answer (the
    module's RETURN keys: running_release, disarmed, unconfirmed, held) or error. ``running=NEW``: the node booted the
    armed kernel and it was never confirmed - the module puts GRUB's default on the previous kernel and answers
    ``held`` (``previous=False``: it could not tell the previous kernel, changed nothing: disarmed false)."""

    def __init__(self, error=None, running="6.1.0-50-amd64", previous=True):
        self.asked, self.error, self.running, self.previous = [], error, running, previous

    def disarm(self, release):
        self.asked.append(release)
        if self.error:
            raise NodefixError(self.error)
        if self.running != release:
            return {"running_release": self.running, "disarmed": True, "changed": True, "unconfirmed": False,
                    "held": ""}
        held = ("kernel %s booted but was never confirmed healthy: not kept (recorded as failed), GRUB's default is "
                "back on the previous kernel" % release) if self.previous else (
                    "kernel %s booted but was never confirmed healthy, and the previous kernel is not known: GRUB's "
                    "default was left as it is" % release)
        return {"running_release": self.running, "disarmed": self.previous, "changed": self.previous,
                "unconfirmed": True, "held": held}


def _api():
    return ApiDouble([node(), node("node-b")], [pod("web-1")])


def _ctx(api, here=None, run_id="run-1", disarm=None, **kw):
    ctx = context(api, roles=(CONTAINERD,), here=here or FIRST, run_id=run_id, **kw)
    ctx.plan = dict(ctx.plan, reboot_reasons=[KERNEL])
    ctx.kernel_disarm = disarm.disarm if disarm else None
    return ctx


def _pending(api):
    text = api.notes().get(record.ANNOTATION)
    return json.loads(text).get(record.KERNEL_PENDING) if text else None


def _kernel_rollout(api, disarm, confirmed=True, status="ok", **kw):
    """begin -> the kernel path's recheck -> (the install, the reboot, the confirmation) -> end."""
    ctx = _ctx(api, disarm=disarm, **kw)
    first = machine.begin(ctx)
    assert first["outcome"] is None, first["lines"]
    again = machine.recheck(ctx, first["state"], kernel_release=NEW)
    ended = machine.end(ctx, again["state"], {"status": status, "roles": [CONTAINERD], "msg": "" if status == "ok"
                                              else "the reboot path failed", "kernel_confirmed": confirmed,
                                              "kernel_kept": confirmed})
    return first, again, ended


def test_the_kernel_path_s_recheck_writes_kernelPending_before_the_install_and_a_confirmed_boot_clears_it():
    api, side = _api(), Node()
    ctx = _ctx(api, disarm=side)
    first = machine.begin(ctx)
    again = machine.recheck(ctx, first["state"], kernel_release=NEW)
    pending = _pending(api)
    assert pending == {"release": NEW, "run": "run-1", "at": pending["at"]} and pending["at"].endswith("Z")
    fixes = {"status": "ok", "roles": [CONTAINERD], "msg": "", "kernel_confirmed": True, "kernel_kept": True}
    ended = machine.end(ctx, again["state"], fixes)
    assert ended["outcome"] == Outcome.OK, ended["lines"]
    said = [s["detail"] for s in ended["steps"] if s["name"] == "kernel_boot"][0]
    assert "the kernel role confirmed kernel %s's boot" % NEW in said
    assert side.asked == [] and record.ANNOTATION not in api.notes() and not api.cordoned()


def test_a_held_recheck_arms_nothing_and_writes_no_kernelPending():
    api, side = _api(), Node()
    ctx = _ctx(api, disarm=side)
    first = machine.begin(ctx)
    ctx.window = gate.Window(["mo"], "00:00", "01:00", "UTC")        # closed now (a Sunday, 07:00)
    machine.recheck(ctx, first["state"], kernel_release=NEW)
    assert _pending(api) is None


def test_a_fix_phase_that_failed_after_arming_disarms_the_boot_in_the_end_half():
    # the reboot path failed before upgrade_confirm could run: the end half is the always - the boot is disarmed
    api, side = _api(), Node()
    _first, _again, ended = _kernel_rollout(api, side, confirmed=False, status="failed")
    assert side.asked == [NEW]
    step = [s for s in ended["steps"] if s["name"] == "kernel_boot"][0]
    assert step["outcome"] == "done" and "disarmed - GRUB's default is the running kernel 6.1.0-50-amd64" in step["detail"]
    assert ended["outcome"] == Outcome.NOT_VERIFIED and record.ANNOTATION not in api.notes()
    held = json.loads(api.notes()[cordon.HELD])["reason"]
    assert "stopped between arming kernel %s's one-time boot and its confirmation" % NEW in held


def test_a_disarm_that_cannot_be_made_keeps_the_record_and_the_next_run_disarms_it():
    api, lost = _api(), Node(error="the node could not be reached")
    _first, _again, ended = _kernel_rollout(api, lost, confirmed=False, status="unreachable")
    assert ended["outcome"] == Outcome.UNREACHABLE and lost.asked == [NEW]
    assert _pending(api)["release"] == NEW, "the record keeps kernelPending for the next run"
    release = [s for s in ended["steps"] if s["name"] == "release"][0]
    assert "kept this run's record: kernel %s's one-time boot may still be armed" % NEW in release["detail"]
    # the node lost at its fixes was left held: a person clears the hold (kubectl annotate node NODE
    # nodefix.k8s/held- and kubectl uncordon NODE) - the record's kernelPending stays
    notes = api.nodes["node-a"]["metadata"]["annotations"]
    assert notes.pop(cordon.HELD) and api.nodes["node-a"]["spec"].pop("unschedulable")
    # the next run (another process on this controller; the first's is gone) takes the record over and disarms
    side = Node()
    ctx = _ctx(api, here=SECOND, run_id="run-2", disarm=side)
    ctx.plan = dict(ctx.plan, fix_roles=[], reboot_reasons=[], disruptive=[])       # nothing to fix now
    begun = machine.begin(ctx)
    assert side.asked == [NEW] and outcomes(begun)["kernel_boot"] == "done"
    assert begun["outcome"] == Outcome.HELD, begun["lines"]   # never clean: a person sees it
    assert "run run-1's kernel upgrade stopped between arming kernel %s's one-time boot" % NEW in begun["detail"]
    assert record.ANNOTATION not in api.notes(), "disarmed: the record is released"


def test_a_run_that_cannot_disarm_what_a_dead_run_left_holds_the_node_and_keeps_the_record():
    api = _api()
    ctx = _ctx(api, disarm=Node())
    machine.recheck(ctx, machine.begin(ctx)["state"], kernel_release=NEW)     # then killed
    begun = machine.begin(_ctx(api, here=SECOND, run_id="run-2", disarm=Node(error="sudo: a password is required")))
    assert begun["outcome"] == Outcome.HELD and "could not be disarmed: sudo" in begun["detail"], begun["lines"]
    assert "drain" not in [w[0] for w in api.writes[-3:]] and _pending(api)["release"] == NEW
    # without a node-side disarm at all: held the same, never taken for clean
    begun = machine.begin(_ctx(api, here={"host": "controller", "pid": 300, "boot": "boot-c"}, run_id="run-3"))
    assert begun["outcome"] == Outcome.HELD and "no node-side disarm was given" in begun["detail"]


def test_a_held_node_keeps_an_unconfirmed_kernel_boot_in_its_record_and_says_so():
    api = _api()
    _first, _again, ended = _kernel_rollout(api, Node(error="unreachable"), confirmed=False, status="unreachable")
    assert api.notes().get(cordon.HELD) and _pending(api)
    begun = machine.begin(_ctx(api, here=SECOND, run_id="run-2", disarm=Node()))
    assert begun["outcome"] == Outcome.HELD and "left untouched until a person clears the hold" in begun["detail"]
    assert "one-time boot may still be armed" in begun["detail"] and _pending(api)["release"] == NEW


def test_a_kernel_that_booted_but_was_never_confirmed_is_not_kept_and_the_node_ends_held():
    # the node rebooted into the armed kernel, but upgrade_confirm did not confirm it (it failed): the end half's
    # disarm puts GRUB's default back on the previous kernel and the kernel is recorded as not kept - held, never clean
    api, side = _api(), Node(running=NEW)
    _first, _again, ended = _kernel_rollout(api, side, confirmed=False)
    step = [s for s in ended["steps"] if s["name"] == "kernel_boot"][0]
    assert side.asked == [NEW] and step["outcome"] == Outcome.HELD, ended["lines"]
    assert "booted but was never confirmed healthy: not kept" in step["detail"]
    # never clean: the node stays cordoned with nodefix.k8s/held naming the unconfirmed kernel (a person decides)
    assert ended["outcome"] == Outcome.NOT_VERIFIED and record.ANNOTATION not in api.notes(), ended["lines"]
    assert api.cordoned() and "never confirmed healthy" in json.loads(api.notes()[cordon.HELD])["reason"]


def test_a_dead_run_s_kernel_that_booted_unconfirmed_holds_the_next_run_before_anything_is_drained():
    api = _api()
    ctx = _ctx(api, disarm=Node())
    machine.recheck(ctx, machine.begin(ctx)["state"], kernel_release=NEW)     # then killed; the node rebooted into NEW
    side = Node(running=NEW)
    begun = machine.begin(_ctx(api, here=SECOND, run_id="run-2", disarm=side))
    assert side.asked == [NEW] and begun["outcome"] == Outcome.HELD, begun["lines"]
    assert "never confirmed healthy: not kept" in begun["detail"] and "nothing was drained" in begun["detail"]
    assert "drain" not in [w[0] for w in api.writes[-3:]]
    # the previous kernel not known: the node changed nothing, the record keeps kernelPending - every run holds again
    api = _api()
    ctx = _ctx(api, disarm=Node())
    machine.recheck(ctx, machine.begin(ctx)["state"], kernel_release=NEW)
    begun = machine.begin(_ctx(api, here=SECOND, run_id="run-2", disarm=Node(running=NEW, previous=False)))
    assert begun["outcome"] == Outcome.HELD and "GRUB's default was left as it is" in begun["detail"], begun["lines"]
    assert _pending(api)["release"] == NEW


@pytest.mark.parametrize("text", [json.dumps({"release": NEW}), json.dumps("6.12"),
                                  json.dumps({"release": "", "run": "r"})])
def test_a_kernelPending_that_is_not_one_refuses_the_node(text):
    import datetime
    now = datetime.datetime(2026, 12, 6, 7, tzinfo=datetime.timezone.utc)
    body = dict(record.new("r", now, FIRST, 1800, version=record.MACHINE_VERSION), kernelPending=json.loads(text))
    with pytest.raises(record.MalformedRecord, match="kernelPending"):
        record.read({record.ANNOTATION: record.text(body)})


def _writes_of_a_kernel_rollout():
    api = _api()
    _kernel_rollout(api, Node())
    return len(api.writes)


@pytest.mark.parametrize("k", range(1, _writes_of_a_kernel_rollout() + 1))
def test_killed_after_any_write_of_a_kernel_upgrade_the_next_run_leaves_nothing_armed(k):
    api, side = _api(), Node()
    api.kill_at = k
    with pytest.raises(Killed):
        _kernel_rollout(api, side)
    left = _pending(api)
    # the next run, with nothing to fix now: whatever the first armed is disarmed, and said so - never clean
    nxt = Node()
    ctx = _ctx(api, here=SECOND, run_id="run-2", disarm=nxt)
    ctx.plan = dict(ctx.plan, fix_roles=[], reboot_reasons=[], disruptive=[])
    begun = machine.begin(ctx)
    assert _pending(api) is None and record.ANNOTATION not in api.notes(), (k, begun["lines"])
    assert api.held_leases() == []
    if left:
        assert nxt.asked == [NEW] and begun["outcome"] == Outcome.HELD, (k, begun["lines"])
    else:
        assert nxt.asked == [] and begun["outcome"] == Outcome.NOTHING_TO_FIX, (k, begun["lines"])
