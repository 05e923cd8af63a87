# SPDX-License-Identifier: GPL-3.0-or-later
"""Cordon/drain/uncordon as remediate does it: the real kubernetes.core.k8s_drain
module (official Python client) against lab/apiserver-double, a TEST DOUBLE of
kube-apiserver that answers in the real API's shapes (discovery, nodes, pods,
the eviction API refusing a pod protected by a PodDisruptionBudget with 429).
Runs on the controller only; no container, no cluster."""

import json
import os

from conftest import ROOT, run_logged

PODS = [
    {"namespace": "default", "name": "web-7d4b9-abcde", "node": "node-a", "owner": "ReplicaSet"},
    {"namespace": "kube-system", "name": "proxy-x1", "node": "node-a", "owner": "DaemonSet"},
    {"namespace": "default", "name": "cache-0", "node": "node-a", "owner": "StatefulSet", "emptydir": True},
    {"namespace": "default", "name": "db-0", "node": "node-b", "owner": "StatefulSet", "pdb": True},
]


def drain(name, double, state):
    argv = ["ansible", "localhost", "-c", "local", "-e", "ansible_python_interpreter=%s" % os.path.join(
        ROOT, ".venv", "bin", "python"), "-m", "kubernetes.core.k8s_drain", "-a", json.dumps({
            "kubeconfig": double.kubeconfig, "name": name, "state": state,
            "delete_options": {"ignore_daemonsets": True, "delete_emptydir_data": True, "wait_timeout": 20,
                               "wait_sleep": 1}})]
    rc, out = run_logged("drain-double-%s-%s" % (state, name), argv, timeout=300)
    return rc, out


def test_drain_evicts_then_uncordon(apiserver_double):
    double = apiserver_double(["node-a", "node-b"], PODS)
    rc, out = drain("node-a", double, "drain")
    assert rc == 0, out[-3000:]
    st = double.state()
    assert st["nodes"]["node-a"]["unschedulable"] is True
    left = sorted((p["namespace"], p["name"]) for p in st["pods"])
    # the DaemonSet pod stays (ignore_daemonsets), the others were evicted
    assert left == [("default", "db-0"), ("kube-system", "proxy-x1")]
    assert sorted(e["path"].rsplit("/", 2)[-2] for e in st["log"] if e["method"] == "POST") == ["cache-0", "web-7d4b9-abcde"]
    rc, out = drain("node-a", double, "uncordon")
    assert rc == 0, out[-3000:]
    assert double.state()["nodes"]["node-a"]["unschedulable"] is False


def test_pdb_refusal_fails_the_drain_and_leaves_the_node_cordoned(apiserver_double):
    # what remediate's rescue is for: k8s_drain does not undo its cordon when an
    # eviction is refused, so the playbook uncordons the node itself
    double = apiserver_double(["node-a", "node-b"], PODS)
    rc, out = drain("node-b", double, "drain")
    assert rc != 0
    assert "disruption budget" in out
    st = double.state()
    assert st["nodes"]["node-b"]["unschedulable"] is True
    assert any(e.get("refused") == "DisruptionBudget" for e in st["log"])
    assert ("default", "db-0") in [(p["namespace"], p["name"]) for p in st["pods"]]
    rc, out = drain("node-b", double, "uncordon")
    assert rc == 0 and double.state()["nodes"]["node-b"]["unschedulable"] is False


def test_unknown_node_is_a_clear_failure(apiserver_double):
    double = apiserver_double(["node-a"], [])
    rc, out = drain("node-z", double, "drain")
    assert rc != 0 and "Node node-z not found" in out
