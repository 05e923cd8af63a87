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

The failed drains (a pod stuck Terminating, a PodDisruptionBudget's 429 until the drain timeout) and a failed
remediation held cordoned, once cases of the same re-run, are the rollout machine's unit tests since issue 62 step 3
(tests/unit/plugins/module_utils/test_rollout_machine.py: ``test_a_pod_stuck_terminating_fails_the_drain``,
``test_a_pdb_that_never_allows_fails_the_drain_at_its_timeout_and_gives_everything_back``,
``test_a_pdb_429_is_retried_after_its_retry_after_until_the_eviction_goes_through``,
``test_a_fix_not_verified_leaves_the_node_cordoned_and_held``); test_13_rollout_double's main run keeps a PDB-failed
drain and a held node end to end.
"""

import json
import os
import signal
import subprocess
import time

from conftest import ENV, LOGS, ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
OLD, NEW = "4.4.0-1069-aws", "6.12.0-1-amd64"   # a kernel role to run (drained), nothing to fix
CORDONED_BY = "nodefix.k8s/cordoned-by"


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


def test_a_killed_runs_cordon_is_given_back_and_an_operators_stays(apiserver_double, tmp_path):
    pods = [{"namespace": "default", "name": "stuck-0", "node": "node-a", "owner": "StatefulSet", "stuck": True}]
    double = apiserver_double({"node-a": {"unschedulable": False}, "node-b": {"unschedulable": True}}, pods)

    # 1. killed (SIGKILL, the whole process group) while the drain waits for a pod that never leaves
    rc = kill_during_the_drain(tmp_path, double, {"node-a": host(OLD, nodefix_drain_timeout=600)},
                               "/api/v1/namespaces/default/pods/stuck-0/eviction")
    assert rc == -signal.SIGKILL
    left = double.state()["nodes"]["node-a"]
    assert left["unschedulable"] is True and json.loads(left["annotations"][CORDONED_BY])["run"] == "killed-1", left

    # 2. the re-run: node-a has nothing to fix, node-b is an operator's cordon
    rc, out = run_logged("crash-safe-cordon-rerun", argv(tmp_path, double, {
        "node-a": host(NEW), "node-b": host(NEW)}, "rerun-2"), timeout=900)
    assert rc == 0, out[-3000:]
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
