# SPDX-License-Identifier: GPL-3.0-or-later
"""Cordon/drain/uncordon as remediate does it: the real kubernetes.core.k8s_drain
module (official Python client) against lab/apiserver-double, a TEST DOUBLE of
kube-apiserver that answers in the real API's shapes (discovery, nodes, pods,
the eviction API refusing a pod protected by a PodDisruptionBudget with 429).
Runs on the controller only; no container, no cluster.

Every case is one host of ONE ansible-playbook run (tests/integration/playbooks/drain_cases.yml,
shared by the module's tests): each its own double, drained, then uncordoned - an uncordon that changes
the node ("marked schedulable") shows it was still cordoned after the drain; each test asserts on its own
case's double and task results (the json stdout callback)."""

import json
import os

import pytest

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
PODS = [
    {"namespace": "default", "name": "web-7d4b9-abcde", "node": "node-a", "owner": "ReplicaSet"},
    {"namespace": "kube-system", "name": "proxy-x1", "node": "node-a", "owner": "DaemonSet"},
    {"namespace": "default", "name": "cache-0", "node": "node-a", "owner": "StatefulSet", "emptydir": True},
    {"namespace": "default", "name": "db-0", "node": "node-b", "owner": "StatefulSet", "pdb": True},
]
# case: (the double's nodes, its pods, the node drained, uncordoned afterwards)
CASES = {"evict": (["node-a", "node-b"], PODS, "node-a", True),
         "pdb": (["node-a", "node-b"], PODS, "node-b", True),
         "unknown": (["node-a"], [], "node-z", False)}
# the same drains with the oldest kubernetes client the collection's range admits (issue 60: both ends of the
# range; the venv's pin is the newest): the modules run by a python whose path puts that release first
CASES.update(("%s-floor" % case, CASES[case]) for case in ("evict", "pdb"))
with open(os.path.join(ROOT, ".cache", "k8s-clients", "tested.json"), encoding="utf-8") as _fh:
    CLIENTS = json.load(_fh)


@pytest.fixture(scope="module")
def drained(module_doubles, tmp_path_factory):
    """The one run: {case: (double, {task name: the case's result})}."""
    work = tmp_path_factory.mktemp("drain-cases")
    doubles = dict((case, module_doubles(case, nodes, [dict(p) for p in pods]))
                   for case, (nodes, pods, _node, _unc) in CASES.items())
    floor_py = work / "python-with-the-oldest-client"
    floor_py.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (
        os.path.join(ROOT, ".cache", "k8s-clients", CLIENTS["floor"]), PY))
    floor_py.chmod(0o755)
    hosts = dict((case, {"ansible_connection": "local",
                         "ansible_python_interpreter": str(floor_py) if case.endswith("-floor") else PY,
                         "case_kubeconfig": doubles[case].kubeconfig, "case_node": node, "case_uncordon": unc})
                 for case, (_nodes, _pods, node, unc) in CASES.items())
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    rc, out = run_logged("drain-double-cases", [
        os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
        os.path.join(ROOT, "tests", "integration", "playbooks", "drain_cases.yml")], timeout=600,
        env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    assert rc == 0, out[-3000:]   # the drains' failures are the cases' results, not the run's
    tasks = json.loads(out[out.index("{"):])["plays"][0]["tasks"]
    return dict((case, (doubles[case], dict((t["task"]["name"], t["hosts"].get(case, {})) for t in tasks)))
                for case in CASES)


def test_each_case_ran_its_client_release(drained):
    """The floor cases really imported the oldest release, the others the venv's (the newest)."""
    for case, (_double, results) in drained.items():
        said = results["The kubernetes client the modules import"]["stdout"]
        assert said == (CLIENTS["floor"] if case.endswith("-floor") else CLIENTS["newest"]), (case, said)


@pytest.mark.parametrize("suffix", ["", "-floor"])
def test_drain_evicts_then_uncordon(drained, suffix):
    double, results = drained["evict" + suffix]
    assert not results["Drain the node (the options remediate gives)"].get("failed"), results
    st = double.state()
    left = sorted((p["namespace"], p["name"]) for p in st["pods"])
    # the DaemonSet pod stays (ignore_daemonsets), the others were evicted
    assert left == [("default", "db-0"), ("kube-system", "proxy-x1")]
    assert sorted(e["path"].rsplit("/", 2)[-2] for e in st["log"] if e["method"] == "POST") == ["cache-0", "web-7d4b9-abcde"]
    # cordoned by the drain (the uncordon found it so), then uncordoned
    uncordon = results["Uncordon the node"]
    assert uncordon.get("changed") is True and uncordon["result"] == "node node-a marked schedulable.", uncordon
    assert st["nodes"]["node-a"]["unschedulable"] is False


@pytest.mark.parametrize("suffix", ["", "-floor"])
def test_pdb_refusal_fails_the_drain_and_leaves_the_node_cordoned(drained, suffix):
    # what remediate's rescue is for: k8s_drain does not undo its cordon when an
    # eviction is refused, so the playbook uncordons the node itself
    double, results = drained["pdb" + suffix]
    drain = results["Drain the node (the options remediate gives)"]
    assert drain.get("failed") is True and "disruption budget" in drain["msg"], drain
    st = double.state()
    assert any(e.get("refused") == "DisruptionBudget" for e in st["log"])
    assert ("default", "db-0") in [(p["namespace"], p["name"]) for p in st["pods"]]
    # still cordoned after the failed drain: the uncordon found it so
    uncordon = results["Uncordon the node"]
    assert uncordon.get("changed") is True and uncordon["result"] == "node node-b marked schedulable.", uncordon
    assert st["nodes"]["node-b"]["unschedulable"] is False


def test_unknown_node_is_a_clear_failure(drained):
    _double, results = drained["unknown"]
    drain = results["Drain the node (the options remediate gives)"]
    assert drain.get("failed") is True and "Node node-z not found" in drain["msg"], drain
