# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.node_cordon as Ansible runs it (a subprocess reading its arguments file, the official
kubernetes client on a real socket): against the kube-apiserver TEST DOUBLE (lab/apiserver-double) it
makes the one read, the pod list and the cordon as merge PATCHes the double records; an API server that
accepts the connection and never answers fails the module after request_timeout, naming the read,
never holding the run; a refused connection fails it the same way. The subprocess timeout only guards
the test run, it is not asserted."""

import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")


def kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": "u", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def run(tmp_path, kc, **over):
    args = dict({"kubeconfig": kc, "node": "node-a", "run_id": "4711", "cordon": True}, **over)
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=COLLECTIONS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for key in list(env):
        if key.lower().endswith("_proxy"):
            del env[key]
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.nodefix.k8s.plugins.modules.node_cordon",
                           str(args_file)], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def double(tmp_path, nodes, pods):
    state, port = tmp_path / "state.json", tmp_path / "port"
    state.write_text(json.dumps({"nodes": nodes, "pods": pods, "configmaps": {}}))
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py"),
                             "--state", str(state), "--port-file", str(port), "--kubeconfig", str(tmp_path / "kc")])
    for _dummy in range(100):
        if port.exists():
            return proc, str(tmp_path / "kc"), state
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the apiserver double did not start")


def test_one_read_gives_back_a_dead_runs_cordon_lists_the_pods_and_cordons_with_the_record(tmp_path):
    dead = json.dumps({"run": "dead-1", "time": "2026-11-27T10:00:00Z"})
    proc, kc, state = double(tmp_path, {"node-a": {"unschedulable": True, "annotations": {"nodefix.k8s/cordoned-by": dead}}},
                             [{"namespace": "default", "name": "web-1", "node": "node-a", "uid": "u1"}])
    try:
        rc, out = run(tmp_path, kc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert rc == 0, out
    assert out["reclaim"]["action"] == "give_back" and out["cordoned_before"] is False and out["cordoned"] is True
    assert [p["metadata"]["name"] for p in out["pods"]] == ["web-1"]
    log = json.loads(state.read_text())["log"]
    assert [(e["method"], e["body"]["spec"].get("unschedulable")) for e in log] == [("PATCH", False), ("PATCH", True)]
    assert json.loads(log[1]["body"]["metadata"]["annotations"]["nodefix.k8s/cordoned-by"])["run"] == "4711"
    node = json.loads(state.read_text())["nodes"]["node-a"]
    assert node["unschedulable"] is True and json.loads(node["annotations"]["nodefix.k8s/cordoned-by"])["run"] == "4711"


def test_an_unknown_node_fails_the_cordon_and_writes_nothing(tmp_path):
    proc, kc, state = double(tmp_path, {"node-b": {"unschedulable": False}}, [])
    try:
        rc, out = run(tmp_path, kc)
        rc2, out2 = run(tmp_path, kc, cordon=False)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert rc != 0 and "node node-a not found in the API server" in out["msg"] and "cordoned_before" not in out
    assert rc2 == 0 and out2["found"] is False and not out2["changed"]
    assert json.loads(state.read_text()).get("log", []) == []


def test_an_api_server_that_accepts_and_never_answers_fails_after_the_timeout_naming_the_read(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        rc, out = run(tmp_path, kubeconfig(tmp_path, silent.getsockname()[1]), request_timeout=1)
    finally:
        silent.close()
    assert rc != 0 and out["failed"] and "reading Node node-a: no answer from the API server" in out["msg"], out
    assert "timed out" in out["msg"].lower() and "cordoned_before" not in out


def test_a_refused_connection_fails_naming_the_read(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    rc, out = run(tmp_path, kubeconfig(tmp_path, port), cordon=False)
    assert rc != 0 and "reading Node node-a: no answer from the API server" in out["msg"], out


def test_a_dry_run_names_the_disruption_budgets_that_would_refuse_the_drain_and_writes_nothing(tmp_path):
    """Check mode (a dry run's plan): one list of the PodDisruptionBudgets; the double's db-0 budget allows no
    disruption, so the drain would be refused for db-0; the DaemonSet pod's budget does not count (a drain does not
    evict it). The real run does not list them."""
    pods = [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"},
            {"namespace": "default", "name": "db-0", "node": "node-a", "owner": "StatefulSet", "pdb": True},
            {"namespace": "kube-system", "name": "proxy-a", "node": "node-a", "owner": "DaemonSet", "pdb": True}]
    proc, kc, state = double(tmp_path, {"node-a": {"unschedulable": False}}, pods)
    try:
        rc, out = run(tmp_path, kc, _ansible_check_mode=True)
        real_rc, real = run(tmp_path, kc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert rc == 0, out
    assert out["budgets"] == [{"namespace": "default", "name": "db-0-pdb", "allowed": 0, "pods": ["default/db-0"],
                               "refused": 1, "several": []}], out
    assert out["cordoned"] is False and "budgets_error" not in out
    assert real_rc == 0 and "budgets" not in real and "budgets_error" not in real, real
    # the check-mode run wrote nothing; the real run's one PATCH is the cordon
    log = json.loads(state.read_text())["log"]
    assert [(e["method"], e["body"]["spec"].get("unschedulable")) for e in log] == [("PATCH", True)], log
