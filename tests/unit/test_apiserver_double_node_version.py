# SPDX-License-Identifier: GPL-3.0-or-later
"""The kube-apiserver TEST DOUBLE keeps a real resourceVersion per Node (review finding M1: it derived every Node's
from its log's length, so no conditional write could be tested): every write of a Node bumps it, a write of another
Node does not, and a PATCH whose ``metadata.resourceVersion`` is stale is answered 409 Conflict and changes nothing,
as the real server answers it. Then the rollout claim (nodefix.k8s.node_rollout) through the collection's one client:
of two runs that read the Node at once, one claims it and the other is refused, naming it."""

import datetime
import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record as rollout
from ansible_collections.nodefix.k8s.plugins.modules import node_rollout
from plugins.module_utils.test_rollout_record import after_read
from test_apiserver_double_budgets import call

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOUBLE = os.path.join(REPO, "lab", "apiserver-double", "apiserver.py")
T0 = datetime.datetime(2026, 12, 6, 7, 0, 0, tzinfo=datetime.timezone.utc)
AWX = {"host": "awx-job-4711", "pid": 42, "boot": "boot-a"}
CLI = {"host": "laptop", "pid": 4242, "boot": "boot-b"}


@pytest.fixture
def double(tmp_path, request):
    """The double on a free port; its state (it reads it once, at its start) node-a and node-b, or the test's
    (``@pytest.mark.parametrize("double", [state], indirect=True)``)."""
    state, port_file, config = tmp_path / "state.json", tmp_path / "port", tmp_path / "kubeconfig"
    state.write_text(json.dumps(getattr(request, "param", None) or {"nodes": {"node-a": {}, "node-b": {}}}))
    proc = subprocess.Popen([sys.executable, DOUBLE, "--state", str(state), "--port-file", str(port_file),
                             "--kubeconfig", str(config)])
    try:
        for _dummy in range(100):
            if port_file.exists():
                break
            time.sleep(0.1)
        yield {"port": int(port_file.read_text()), "state": state, "kubeconfig": str(config)}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def version(port, name):
    return call(port, "GET", "/api/v1/nodes/" + name)[1]["metadata"]["resourceVersion"]


def test_each_node_has_its_own_version_and_a_stale_patch_is_a_conflict(double):
    port = double["port"]
    a0, b0 = version(port, "node-a"), version(port, "node-b")
    assert a0 == version(port, "node-a")   # reads do not move it
    code, answer = call(port, "PATCH", "/api/v1/nodes/node-a", {"metadata": {"annotations": {"x": "1"}}})
    a1 = answer["metadata"]["resourceVersion"]
    assert code == 200 and int(a1) > int(a0) and version(port, "node-b") == b0
    code, answer = call(port, "PATCH", "/api/v1/nodes/node-a", {"metadata": {"resourceVersion": a0,
                                                                             "annotations": {"x": "2"}}})
    assert code == 409 and answer["reason"] == "Conflict" and "the object has been modified" in answer["message"]
    assert call(port, "GET", "/api/v1/nodes/node-a")[1]["metadata"]["annotations"] == {"x": "1"}
    assert version(port, "node-a") == a1
    code, answer = call(port, "PATCH", "/api/v1/nodes/node-a", {"metadata": {"resourceVersion": a1,
                                                                             "annotations": {"x": "2"}}})
    assert code == 200 and answer["metadata"]["annotations"] == {"x": "2"}


def test_two_runs_that_read_the_node_at_once_one_claims_the_other_is_refused(double):
    first_api = node_api.NodeApi(double["kubeconfig"], timeout=10)
    first = {}
    second_api = after_read(node_api.NodeApi(double["kubeconfig"], timeout=10), lambda: first.update(
        node_rollout.claim(first_api, "node-a", "4711", 1800, T0, AWX, False, lambda pid: True)))
    out = node_rollout.claim(second_api, "node-a", "cli-1", 1800, T0, CLI, False, lambda pid: True)
    assert first["action"] == "claim"
    assert out["action"] == "refuse" and "nodefix run 4711 (awx-job-4711, process 42) holds this node" in out["msg"]
    held = call(double["port"], "GET", "/api/v1/nodes/node-a")[1]["metadata"]["annotations"][rollout.ANNOTATION]
    assert json.loads(held)["run"] == "4711"
    log = json.loads(double["state"].read_text())["log"]
    assert [e.get("refused") for e in log if e["path"] == "/api/v1/nodes/node-a"] == [None, "Conflict"]
    # the winner releases its own record, conditionally as well
    assert node_rollout.release(first_api, "node-a", "4711", AWX, False)["action"] == "release"
    notes = call(double["port"], "GET", "/api/v1/nodes/node-a")[1]["metadata"].get("annotations") or {}
    assert rollout.ANNOTATION not in notes
