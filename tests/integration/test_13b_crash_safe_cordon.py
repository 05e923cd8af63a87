# SPDX-License-Identifier: GPL-3.0-or-later
"""A rollout that survives its own failures (issue 53, items 1, 5, 6): playbooks/remediate.yml against
lab/apiserver-double (a TEST DOUBLE of kube-apiserver: no Debian package ships one), with the real
kubernetes.core modules on the controller.

Each "node" is the controller over a local connection, audited read-only with only the kernel detector and a
pretended kernel release (an old one: the kernel role, which only reads and reports, is the fix and the node is
drained; a new one: nothing to fix), so nothing on the test machine changes.

- A REAL ``SIGKILL`` of ansible-playbook and its children while the drain waits for a pod that never leaves
  (the double's ``"stuck": true``: evicted, Terminating for good) leaves the node cordoned with
  ``nodefix.k8s/cordoned-by``; the re-run, which finds nothing to fix there, gives it back and says so; an
  operator's cordon (no record) in the same re-run stays.
- In that same re-run: a drain that times out on a Terminating pod, and one a PodDisruptionBudget stops midway
  (429 retried until the drain timeout), are failed drains - nothing fixed, the node given back, the pods evicted
  and those that blocked named; a remediation that failed leaves its node cordoned with ``nodefix.k8s/held``.
"""

import json
import os
import signal
import subprocess
import time

from conftest import ENV, LOGS, ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
OLD, NEW = "4.4.0-1069-aws", "6.12.0-1-amd64"   # a kernel role to run (drained), nothing to fix
CORDONED_BY, HELD = "nodefix.k8s/cordoned-by", "nodefix.k8s/held"


def host(release, **extra):
    return dict({"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
                 "nodefix_audit_checks": ["kernel"], "nodefix_audit_options": {"kernel": {"release": release}},
                 "nodefix_drain_timeout": 3}, **extra)


def argv(tmp_path, double, hosts, run_id):
    common = {"nodefix_kubeconfig": double.kubeconfig, "nodefix_report_dir": str(tmp_path / "reports")}
    inventory = tmp_path / ("inventory-%s.json" % run_id)
    inventory.write_text(json.dumps({"all": {"hosts": dict((h, dict(common, **v)) for h, v in hosts.items())}}))
    # every node in one batch, none stopping the others: each case is judged on its own
    extra = {"nodefix_report_dir": str(tmp_path / "reports"), "nodefix_run": run_id, "nodefix_serial": len(hosts),
             "nodefix_max_fail_percentage": 100, "nodefix_storm_percent": 100}
    return [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-f", "5",
            "-e", json.dumps(extra), os.path.join(ROOT, "playbooks", "remediate.yml")]


def kill_during_the_drain(tmp_path, double, hosts, pod_path):
    """Start the run in its own session, wait until the double saw the eviction of ``pod_path`` (the drain now
    waits for it), then SIGKILL the whole process group."""
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, "crash-safe-cordon-killed.log"), "w") as log:
        proc = subprocess.Popen(argv(tmp_path, double, hosts, "killed-1"), cwd=ROOT, env=ENV, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            for _dummy in range(1200):
                if [e for e in double.state()["log"] if e["path"] == pod_path and e.get("terminating")]:
                    break
                assert proc.poll() is None, "the run ended before its drain waited"
                time.sleep(0.25)
            else:
                raise AssertionError("the drain never evicted %s" % pod_path)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode


def events(double, node):
    return [e for e in double.state()["events"] if e["regarding"]["name"] == node]


def test_a_killed_runs_cordon_is_given_back_and_failed_drains_and_unverified_fixes_are_not(apiserver_double, tmp_path):
    pods = [{"namespace": "default", "name": "stuck-0", "node": "node-a", "owner": "StatefulSet", "stuck": True},
            {"namespace": "default", "name": "web-c", "node": "node-c", "owner": "ReplicaSet"},
            {"namespace": "default", "name": "stuck-c", "node": "node-c", "owner": "StatefulSet", "stuck": True},
            {"namespace": "default", "name": "web-d", "node": "node-d", "owner": "ReplicaSet"},
            {"namespace": "default", "name": "db-d", "node": "node-d", "owner": "StatefulSet", "pdb": True},
            {"namespace": "kube-system", "name": "proxy-d", "node": "node-d", "owner": "DaemonSet"},
            {"namespace": "default", "name": "web-e", "node": "node-e", "owner": "ReplicaSet"}]
    double = apiserver_double({"node-a": {"unschedulable": False}, "node-b": {"unschedulable": True},
                               "node-c": {"unschedulable": False}, "node-d": {"unschedulable": False},
                               "node-e": {"unschedulable": False}}, pods)

    # 1. killed (SIGKILL, the whole process group) while the drain waits for a pod that never leaves
    rc = kill_during_the_drain(tmp_path, double, {"node-a": host(OLD, nodefix_drain_timeout=600)},
                               "/api/v1/namespaces/default/pods/stuck-0/eviction")
    assert rc == -signal.SIGKILL
    left = double.state()["nodes"]["node-a"]
    assert left["unschedulable"] is True and json.loads(left["annotations"][CORDONED_BY])["run"] == "killed-1", left

    # 2. the re-run: node-a has nothing to fix, node-b is an operator's cordon, node-c's drain times out on a
    #    Terminating pod, node-d's is stopped by a PodDisruptionBudget after web-d went, node-e's fix fails
    rc, out = run_logged("crash-safe-cordon-rerun", argv(tmp_path, double, {
        "node-a": host(NEW), "node-b": host(NEW), "node-c": host(OLD), "node-d": host(OLD, nodefix_drain_timeout=20),
        "node-e": host(OLD, kernel_dying_memcgs_threshold=-1)}, "rerun-2"), timeout=900)
    assert rc != 0, out[-3000:]   # failed nodes: a non-zero exit
    st = double.state()
    nodes = st["nodes"]
    with open(str(tmp_path / "reports" / "remediate" / "report.json"), encoding="utf-8") as fh:
        report = dict((n["host"], n["remediation"]) for n in json.load(fh)["nodes"])

    # node-a: given back, the record removed, said in the output, the report and an Event
    assert nodes["node-a"]["unschedulable"] is False and CORDONED_BY not in nodes["node-a"].get("annotations", {})
    assert "cordoned by nodefix run killed-1" in out and "given back" in out
    assert "killed-1" in report["node-a"]["given_back"] and report["node-a"]["status"] != "failed", report["node-a"]
    (given,) = [e for e in events(double, "node-a") if e["reason"] == "GivenBack"]
    assert given["note"].startswith("run rerun-2: cordoned by nodefix run killed-1 at ")

    # node-b: an operator's cordon stays an operator's, never a PATCH of its schedulability
    assert nodes["node-b"]["unschedulable"] is True
    assert not [e for e in st["log"] if e["path"] == "/api/v1/nodes/node-b" and "spec" in e.get("body", {})]
    assert "GivenBack" not in [e["reason"] for e in events(double, "node-b")]

    # node-c: the drain timed out - failed, nothing fixed, given back, the pods named
    assert nodes["node-c"]["unschedulable"] is False and not nodes["node-c"].get("annotations", {}).get(CORDONED_BY)
    c = report["node-c"]
    assert c["status"] == "failed" and "timed out after 3 s" in c["msg"], c
    assert "evicted: default/web-c" in c["msg"] and "blocked: default/stuck-c (terminating)" in c["msg"], c
    assert c["outcome"] == "drain_failed", c   # (given back: the node's state above; the machine's give_back step)
    reasons = [e["reason"] for e in events(double, "node-c")]
    assert "DrainFailed" in reasons and "FixApplied" not in reasons and "Drained" not in reasons, reasons
    (failed,) = [e for e in events(double, "node-c") if e["reason"] == "DrainFailed"]
    assert "blocked: default/stuck-c (terminating)" in failed["note"]

    # node-d: a PodDisruptionBudget midway, its 429 retried until the drain timeout - failed, given back
    assert nodes["node-d"]["unschedulable"] is False
    d = report["node-d"]
    assert d["status"] == "failed" and "PodDisruptionBudget" in d["msg"], d
    assert "evicted: default/web-d" in d["msg"] and "default/db-d (refused by a PodDisruptionBudget)" in d["msg"], d
    # retried (every 5 s, as kubectl drain does, within its 20 s: under load a 10 s timeout left room for one try)
    assert len([e for e in st["log"] if e["path"].endswith("/db-d/eviction")]) >= 2
    assert "FixApplied" not in [e["reason"] for e in events(double, "node-d")]

    # node-e: its remediation failed - not verified, it stays cordoned, nodefix.k8s/held names reason and run
    assert nodes["node-e"]["unschedulable"] is True
    held = json.loads(nodes["node-e"]["annotations"][HELD])
    assert held["run"] == "rerun-2" and "remediation failed" in held["reason"], held
    assert CORDONED_BY not in nodes["node-e"]["annotations"]
    assert report["node-e"]["status"] == "failed" and "left cordoned" in report["node-e"]["msg"]
    assert [e["reason"] for e in events(double, "node-e")][-1] == "LeftCordonedUnverified"

    # the recap: the failed drains and the held node are failed hosts; the others are not
    recap = dict((line.split()[0], line) for line in out.split("PLAY RECAP", 1)[1].splitlines() if ":" in line)
    for name, failed in (("node-a", False), ("node-b", False), ("node-c", True), ("node-d", True), ("node-e", True)):
        assert ("failed=0" not in recap[name]) == failed, recap[name]
