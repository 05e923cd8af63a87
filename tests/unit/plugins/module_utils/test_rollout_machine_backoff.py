# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.machine's backoff step on what the Node says (issue 62 step 8: cases of
tests/integration/test_18_reboot_backoff_double.py moved down a layer): an annotation that cannot be read holds the
reboot (fail closed), and a recorded reboot the Node's own ``status.nodeInfo.bootID`` says never happened does not
count - the reboot goes on to the gate. The other fixes and the give-back go on either way. Against the API double
(rollout_api_double.py)."""

import datetime

from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

from plugins.module_utils.rollout_api_double import ApiDouble, node, pod
from plugins.module_utils.rollout_machine_harness import CONTAINERD, REASON, REBOOT, rollout

NOW = datetime.datetime(2026, 12, 6, 7, 0, tzinfo=datetime.timezone.utc)     # the harness's Clock


def step(result, name):
    return [s for s in result["steps"] if s["name"] == name][0]


def test_an_annotation_that_cannot_be_read_holds_the_reboot_and_the_other_fixes_go_on():
    """test_18_reboot_backoff_double's node-b: held all the same, saying why; the annotation is left as it is."""
    api = ApiDouble([node(**{backoff.ANNOTATION: "{not json"})], [pod("web-1")])
    first, second = rollout(api, roles=(CONTAINERD, REBOOT))
    held = step(first, "backoff")
    assert held["outcome"] == Outcome.HELD, first["steps"]
    assert "the nodefix.k8s/last-reboot annotation on node-a cannot be read (not JSON" in held["detail"], held
    assert first["state"]["fix_roles"] == [CONTAINERD] and api.leases == {}
    assert second["outcome"] == Outcome.OK and not api.cordoned()       # fixed, verified, given back
    assert api.nodes["node-a"]["metadata"]["annotations"][backoff.ANNOTATION] == "{not json"


def test_a_recorded_reboot_in_the_boot_the_node_still_reports_does_not_count():
    """test_18_reboot_backoff_double's node-d: a record of a reboot an hour ago for the same reason, written in the
    boot the Node still reports (a run killed between the record and the reboot): not counted, said so, and the
    reboot goes on to the gate (a closed window holds it here). A record written in another boot holds it (the
    control: the same record, the Node rebooted since)."""
    when = NOW - datetime.timedelta(hours=1)
    window = gate.Window(days=["sat"], start="01:00", end="02:00")    # 2026-12-06 07:00 UTC is a Sunday
    for boot, counted in (("boot-1", False), ("boot-0", True)):
        last = backoff.record(when, "earlier-run", [REASON], boot_id=boot, backoff_seconds=21600)
        api = ApiDouble([node(boot="boot-1", **{backoff.ANNOTATION: last})], [pod("web-1")])
        first, second = rollout(api, roles=(CONTAINERD, REBOOT), window=window)
        said = step(first, "backoff")
        if counted:
            assert said["outcome"] == Outcome.HELD and "still open: needs a person" in said["detail"], said
            assert step(first, "reboot_gate")["outcome"] != "done", first["steps"]
            continue
        assert said["outcome"] != Outcome.HELD, said
        assert "did not happen - node-a still reports the boot it was recorded in (bootID boot-1)" in said["detail"]
        assert "outside the reboot window" in step(first, "reboot_gate")["detail"], first["steps"]
        assert first["state"]["fix_roles"] == [CONTAINERD] and api.leases == {}
        assert second["outcome"] == Outcome.OK
