# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.control_plane_gate's release (the control plane's slot given back only once the node's
own etcd member is Ready again) and nodefix.k8s.reboot_gate's reclaim (slots a dead run left), over
the fake API of test_reboot_control_plane and a fake clock."""

from ansible_collections.nodefix.k8s.plugins.modules import control_plane_gate, reboot_gate
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
from plugins.module_utils.test_reboot_control_plane import three, guard, lock, node


def params(**kw):
    p = dict((k, v.get("default")) for k, v in control_plane_gate.argument_spec().items())
    p.update(node="cp-1", kubeconfig="/dev/null", wait=60, poll=5)
    p.update(kw)
    return p


class Clock(object):
    def __init__(self, at_poll=None):
        self.t = 0.0
        self.at_poll = at_poll or {}
        self.polls = 0

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds
        self.polls += 1
        if self.polls in self.at_poll:
            self.at_poll[self.polls]()


def test_release_waits_for_the_etcd_member_to_be_ready_again():
    api = three()
    assert guard(api, "cp-1")["allowed"]
    member = api.pods[0]["status"]["conditions"][0]
    member["status"] = "False"     # the member restarts with the node
    clk = Clock({3: lambda: member.update(status="True")})
    out = control_plane_gate.release(params(), api, lock(api, "cp-1"), None, clk.now, clk.sleep)
    assert out["released"] == "nodefix-control-plane-0" and out["polls"] == 4 and api.leases == {}


def test_release_keeps_the_slot_when_the_member_stays_not_ready():
    api = three()
    assert guard(api, "cp-1")["allowed"]
    api.pods[0]["status"]["conditions"][0]["status"] = "False"
    clk = Clock()
    out = control_plane_gate.release(params(wait=20), api, lock(api, "cp-1"), None, clk.now, clk.sleep)
    assert out["released"] is None and "nodefix-control-plane-0" in api.leases
    assert out["kept"].startswith("cp-1 keeps nodefix-control-plane-0: etcd member etcd-cp-1 on cp-1 is not Ready after 20 s")
    assert "kubectl -n kube-system delete lease nodefix-control-plane-0" in out["kept"]
    # kept on purpose: the Lease says so, so no other control-plane node takes it over when its TTL runs out
    assert api.leases["nodefix-control-plane-0"]["metadata"]["annotations"][reboot_gate_lib.KEPT] == out["kept"]


class Module(object):
    check_mode = False

    def run_command(self, argv):
        return 0, "", ""


def reclaim_params(**kw):
    p = dict((k, v.get("default")) for k, v in reboot_gate.argument_spec().items())
    p.update(state="reclaim", node="w-1", kubeconfig="/dev/null", max_concurrent=2)
    p.update(kw)
    return p


def test_reclaim_gives_back_both_locks_slots_of_a_node_that_is_back():
    api = three()
    api.nodes["cp-2"] = node("cp-2", {"node-role.kubernetes.io/control-plane": ""})
    assert guard(api, "cp-2")["allowed"]
    reboot_gate_lib.LeaseLock(api, "kube-system", "nodefix-reboot", 2, "cp-2").acquire("r")
    out = reboot_gate.reclaim(Module(), reclaim_params(node="cp-2", reclaim=["reboot", "control_plane"]), api)
    assert [r["slot"] for r in out["lock"]["reclaimed"]] == ["nodefix-reboot-0", "nodefix-control-plane-0"]
    assert out["msg"].startswith("released nodefix-reboot-0 that cp-2 held since ") and api.leases == {}
    assert "from an earlier run: no reboot of cp-2 is pending or in progress and it is Ready" in out["msg"]


def test_reclaim_keeps_what_is_not_asked_for_and_the_slot_of_a_node_that_is_down():
    api = three()
    reboot_gate_lib.LeaseLock(api, "kube-system", "nodefix-reboot", 2, "w-1").acquire("r")
    assert guard(api, "cp-1")["allowed"]
    # only the reboot lock asked: cp-1's control-plane slot is this run's
    out = reboot_gate.reclaim(Module(), reclaim_params(node="cp-1"), api)
    assert out["lock"]["reclaimed"] == [] and out["msg"] == "" and len(api.leases) == 2
    api.nodes["w-1"]["status"]["conditions"][0]["status"] = "Unknown"
    out = reboot_gate.reclaim(Module(), reclaim_params(), api)
    assert out["lock"]["reclaimed"] == [] and "it is not Ready in the API server" in out["lock"]["kept"][0]
    assert "nodefix-reboot-0" in api.leases
