# SPDX-License-Identifier: GPL-3.0-or-later
"""A reboot-lock slot an earlier run left is given back by the next run, and control-plane nodes are held or
disrupted one at a time while etcd is healthy - playbooks/remediate.yml against lab/apiserver-double (a TEST DOUBLE of
kube-apiserver: no Debian package ships one; its Leases answer 409 as the real server does, its etcd
static pods and /readyz/etcd answer in the real shapes) with the real kubernetes.core modules.

The "nodes" are the controller itself over a local connection (as in test_13_rollout_double), audited
read-only with only the kernel detector, a pretended old kernel and, where a node must need a reboot,
a dying-memcg threshold of 0 with nodefix_reboot_dying_memcgs. Nothing on the test machine changes:
ansible.builtin.reboot refuses a local connection ("would reboot the control node"), and the test's
power-cycle hook is ``true``; the evidence and reports go to tmp_path.

Both tests' nodes are remediated in ONE run (module fixture ``runs``), each test's nodes in their own double; each
test asserts on its nodes' report entries, its double's Leases and log. A run SIGKILLed right after its gate took
a slot (a real kill of ansible-playbook before issue 62 step 8) is a kill point of the rollout machine's unit tests
(tests/unit/plugins/module_utils/test_rollout_machine_kill.py: killed after each write, the Lease's among them,
the next run gives the slot back); test_13b keeps a real SIGKILL of the playbook end to end."""

import json
import os
import sys
import threading
import time

import pytest
import requests

from conftest import ROOT, ApiServerDouble, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
CP = "node-role.kubernetes.io/control-plane"
NEEDS_REBOOT = {"nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws", "dying_memcgs_threshold": 0}},
                "nodefix_reboot_dying_memcgs": True}


def host_vars(tmp_path, double, own=None, observations="lock-observations.json"):
    """A local-connection host that is a Node of ``double``, with its own variables ``own``."""
    base = {"nodefix_kubeconfig": double.kubeconfig, "ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
            "nodefix_audit_checks": ["kernel"], "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}},
            "nodefix_drain_timeout": 20, "reboot_max_concurrent": 2, "nodefix_storm_percent": 100,
            "reboot_lock_observations": str(tmp_path / observations)}
    base.update(own or {})
    return base


def inventory(tmp_path, hosts, serial=1):
    """ansible-playbook's argv for remediate over ``hosts`` ({host: host_vars(...)})."""
    path = tmp_path / ("inventory-%d.json" % len(list(tmp_path.glob("inventory-*.json"))))
    path.write_text(json.dumps({"all": {"hosts": hosts}}))
    return [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(path),
            "-e", "nodefix_report_dir=%s" % (tmp_path / "reports"), "-e", "nodefix_serial=%d" % serial, os.path.join(ROOT, "playbooks", "remediate.yml")]


def leases(double):
    # (the lock slots; the storm breaker's reserve, Lease nodefix-storm, is not one)
    return dict((k.split("/", 1)[1], v["spec"].get("holderIdentity")) for k, v in double.state()["leases"].items()
                if k.split("/", 1)[1] != "nodefix-storm")


def lease_log(double, name):
    return [(e["method"], e.get("holder"), e.get("refused")) for e in double.state()["log"]
            if e["path"].endswith("/leases/" + name) or ("/leases/" in e["path"] and e["path"].rsplit("/", 1)[1] == name)]


def cordons(double):
    return [e["path"].rsplit("/", 1)[1] for e in double.state()["log"]
            if e["method"] == "PATCH" and e["path"].startswith("/api/v1/nodes/")
            and (e["body"].get("spec") or {}).get("unschedulable") is True]


def rebooting(double):
    """The nodes the reboot path is taking down: its nodefix.k8s/last-reboot record PATCHed on the Node."""
    return [e["path"].rsplit("/", 1)[1] for e in double.state()["log"]
            if e["method"] == "PATCH" and e["path"].startswith("/api/v1/nodes/")
            and "nodefix.k8s/last-reboot" in json.dumps(e["body"])]


def remediation(tmp_path):
    """{host: its remediation} of the run's report (reports/remediate/report.json)."""
    with open(str(tmp_path / "reports" / "remediate" / "report.json")) as fh:
        return dict((n["host"], n.get("remediation") or {}) for n in json.load(fh)["nodes"])


def take_slot(double, holder):
    """A slot taken through the collection's own lock code and the real client (an earlier run's)."""
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
    from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import reboot_api
    lock = reboot_gate_lib.LeaseLock(reboot_api.KubeApi(double.kubeconfig), "kube-system", "nodefix-reboot", 2,
                                     holder)
    slot, _holders = lock.acquire("an earlier run")
    assert slot
    return slot


def test_an_earlier_runs_slot_is_given_back_by_the_next_run_and_a_down_nodes_stays(runs):
    double, a_slot, down_slot = runs["reclaim"], runs["a_slot"], runs["down_slot"]
    # run 2: nothing to reboot on either node; node-a is Ready and gives its slot back, node-down is not Ready
    report = runs["report"]
    assert report["node-a"]["status"] != "failed" and report["node-down"]["status"] != "failed", runs["out"][-3000:]
    assert leases(double) == {down_slot: "node-down"}
    assert lease_log(double, a_slot)[-1] == ("DELETE", "node-a", None)
    assert "released %s that node-a held since " % a_slot in report["node-a"]["msg"], report
    assert "from an earlier run: no reboot of node-a is pending or in progress and it is Ready" in report["node-a"]["msg"]
    assert [r["slot"] for r in report["node-a"]["lock_reclaimed"]] == [a_slot]
    assert "node-down keeps %s" % down_slot in report["node-down"]["msg"]
    assert "not Ready in the API server - it went down and is not back" in report["node-down"]["msg"]


class EtcdMembers(object):
    """The etcd members' side of a disruption (what the kubelet would report): a control-plane node's
    etcd pod turns NotReady when the node goes down for its reboot (the reboot path's record on the Node, written
    right before it: a cordon and a drain leave a static pod running), and Ready again only after the control
    plane's release has looked at it (seen NotReady) at least once."""

    def __init__(self, double):
        self.double = double
        self.base = "http://127.0.0.1:%s" % open(os.path.join(os.path.dirname(double.state_path), "apiserver.port")).read().strip()
        self.done = threading.Event()
        self.flipped = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def ready(self, node, ready):
        url = "%s/api/v1/namespaces/kube-system/pods/etcd-%s/status" % (self.base, node)
        body = {"status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
        requests.patch(url, json=body, headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
        self.flipped.append((node, ready))

    def run(self):
        down = None
        while not self.done.is_set():
            st = self.double.state()
            if down is None and rebooting(self.double):
                down = rebooting(self.double)[0]
                self.ready(down, False)
                reads = None
            if down is not None and reads is None and ("DELETE", down, None) in lease_log(self.double, "nodefix-reboot-0"):
                reads = st.get("etcd_reads", 0)     # the node is back: the reboot slot was given back
            if down is not None and reads is not None and st.get("etcd_reads", 0) > reads:
                self.ready(down, True)
                return
            time.sleep(0.2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both tests' remediate runs after the killed one in ONE run (issue 56: a run each), each test's nodes in its own
    API server double, all five hosts in one batch (nodefix_serial 5, as each test's were one batch):
    - "reclaim": node-a and node-down, each holding a slot an earlier run took (through the collection's lock code)
      and never gave back: node-a is Ready, node-down went down for that reboot; in the shared run neither needs a
      reboot.
    - "control plane": cp-off (not opted in), cp-1 and cp-2 (opted in, each needing a reboot), each with an etcd
      static pod; EtcdMembers plays the members' side."""
    tmp = tmp_path_factory.mktemp("lock")
    doubles, found = {}, {}
    try:
        (tmp / "reclaim").mkdir()
        doubles["reclaim"] = double = ApiServerDouble(
            tmp / "reclaim", {"node-a": {"unschedulable": False}, "node-down": {"unschedulable": False, "ready": False}},
            [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"}])
        found["down_slot"] = take_slot(double, "node-down")     # node-down went down for an earlier run's reboot
        found["a_slot"] = take_slot(double, "node-a")           # node-a's earlier run died before giving it back
        assert leases(double) == {found["down_slot"]: "node-down", found["a_slot"]: "node-a"}

        nodes = {"cp-off": {"unschedulable": False, "labels": {"node-role.kubernetes.io/master": ""}},
                 "cp-1": {"unschedulable": False, "labels": {CP: ""}},
                 "cp-2": {"unschedulable": False, "labels": {CP: ""}}}
        pods = [{"namespace": "kube-system", "name": "etcd-%s" % n, "node": n, "mirror": True,
                 "labels": {"component": "etcd", "tier": "control-plane"}} for n in nodes]
        pods += [{"namespace": "default", "name": "web-%s" % n, "node": n, "owner": "ReplicaSet"} for n in nodes]
        (tmp / "control-plane").mkdir()
        doubles["control plane"] = cp = ApiServerDouble(tmp / "control-plane", nodes, pods)
        found["members"] = members = EtcdMembers(cp)
        rebooting = dict(NEEDS_REBOOT, nodefix_control_plane=True, reboot_power_cycle_command=["true"], reboot_services=[],
                         reboot_kubelet_healthz_url="", reboot_settle_timeout=5, reboot_etcd_wait=120, reboot_lock_poll=1)
        argv = inventory(tmp, {
            "node-a": host_vars(tmp, double), "node-down": host_vars(tmp, double),
            "cp-off": host_vars(tmp, cp, NEEDS_REBOOT, "cp-observations.json"),
            "cp-1": host_vars(tmp, cp, rebooting, "cp-observations.json"),
            "cp-2": host_vars(tmp, cp, rebooting, "cp-observations.json")}, serial=5)
        try:
            found["rc"], found["out"] = run_logged("lock-reclaim-and-control-plane", argv, timeout=900)
        finally:
            members.done.set()
        found["report"] = remediation(tmp)
        found.update(doubles)
        yield found
    finally:
        for each in doubles.values():
            each.stop()


def test_control_plane_nodes_held_or_one_at_a_time_while_etcd_is_healthy(runs):
    double, members, rc, out, report = runs["control plane"], runs["members"], runs["rc"], runs["out"], runs["report"]
    # one control-plane node was drained (and its reboot attempted): the one that took the control plane's slot
    (winner,) = cordons(double)
    loser = {"cp-1": "cp-2", "cp-2": "cp-1"}[winner]
    assert lease_log(double, "nodefix-control-plane-0")[0] == ("POST", winner, None), out[-3000:]
    assert report[loser]["status"] == "skipped" and report[loser]["msg"].startswith(
        "held: control plane: another control-plane node is being disrupted (nodefix-control-plane-0 held by %s" % winner)
    assert report["cp-off"]["status"] == "skipped" and report["cp-off"]["msg"].startswith(
        "held: control plane: cp-off is a control-plane node and nodefix_control_plane is false")
    # its slot came back only once its etcd member was Ready again (the release saw it NotReady first)
    assert members.flipped == [(winner, False), (winner, True)], out[-3000:]
    log = double.state()["log"]
    ready_again = [i for i, e in enumerate(log) if e["path"].endswith("/etcd-%s/status" % winner) and e["ready"]]
    released = [i for i, e in enumerate(log) if e["method"] == "DELETE" and e["path"].endswith("/nodefix-control-plane-0")]
    assert ready_again and released and released[0] > ready_again[0]
    assert leases(double) == {}
    # the reboot itself was the local connection's refusal and the test's power cycle: not proven fixed
    assert "would reboot the control node" in out and rc != 0
    # a held node is not remediated: it fails (after the report), with the reason
    assert "not remediated: held: control plane: cp-off is a control-plane node" in " ".join(out.split()), out[-3000:]

    # an unhealthy etcd member holds an opted-in control-plane node (the real client, the module alone)
    members.ready("cp-1", False)
    params = {"node": "cp-2", "kubeconfig": double.kubeconfig, "allow": True}
    rc, out = run_logged("control-plane-etcd-unhealthy", [
        os.path.join(ROOT, ".venv", "bin", "ansible"), "localhost", "-c", "local", "-e",
        "ansible_python_interpreter=%s" % PY, "-m", "nodefix.k8s.control_plane_gate", "-a", json.dumps(params)],
        timeout=300)
    assert rc == 0 and "etcd is not healthy: etcd member etcd-cp-1 on cp-1 is not Ready" in out, out[-3000:]
    assert leases(double) == {}
