# SPDX-License-Identifier: GPL-3.0-or-later
"""The kube-apiserver TEST DOUBLE's PodDisruptionBudgets (lab/apiserver-double): served as policy/v1 lists (items
without kind/apiVersion, as the real server lists them), their status from the pods they select, and the eviction
following them as pkg/registry/core/pod/storage/eviction.go does - a pod the real API deletes without a budget
check (Succeeded, Failed, Pending) is evicted, a Ready pod whose budget allows no disruption is refused (429)."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOUBLE = os.path.join(REPO, "lab", "apiserver-double", "apiserver.py")


def call(port, method, path, body=None):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode())


def test_budgets_are_listed_and_evictions_follow_them(tmp_path):
    state, port_file = tmp_path / "state.json", tmp_path / "port"
    state.write_text(json.dumps({"nodes": {"n": {}}, "configmaps": {}, "pods": [
        {"namespace": "shop", "name": "db-0", "node": "n", "owner": "StatefulSet", "pdb": True},
        {"namespace": "shop", "name": "job-1", "node": "n", "owner": "Job", "pdb": True, "phase": "Succeeded"},
        {"namespace": "shop", "name": "web-1", "node": "n", "owner": "ReplicaSet"}]}))
    proc = subprocess.Popen([sys.executable, DOUBLE, "--state", str(state), "--port-file", str(port_file)])
    try:
        for _dummy in range(100):
            if port_file.exists():
                break
            time.sleep(0.1)
        port = int(port_file.read_text())
        code, body = call(port, "GET", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets")
        assert code == 200 and body["kind"] == "PodDisruptionBudgetList" and body["apiVersion"] == "policy/v1"
        by_name = dict((b["metadata"]["name"], b) for b in body["items"])
        assert sorted(by_name) == ["db-0-pdb", "job-1-pdb"]
        assert all("kind" not in b and "apiVersion" not in b for b in body["items"])
        assert by_name["db-0-pdb"]["status"]["disruptionsAllowed"] == 0
        assert by_name["db-0-pdb"]["spec"]["selector"] == {"matchLabels": {"nodefix.test/pdb-of": "db-0"}}
        assert by_name["job-1-pdb"]["status"]["currentHealthy"] == 0   # a Succeeded pod is not healthy
        code, pod = call(port, "GET", "/api/v1/namespaces/shop/pods/db-0")
        assert pod["metadata"]["labels"] == {"nodefix.test/pdb-of": "db-0"}
        code, _pods = call(port, "GET", "/apis/policy/v1")
        assert "poddisruptionbudgets" in [r["name"] for r in _pods["resources"]]
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0", "namespace": "shop"}}
        code, body = call(port, "POST", "/api/v1/namespaces/shop/pods/db-0/eviction", eviction)
        assert code == 429 and body["details"]["causes"][0]["reason"] == "DisruptionBudget"
        eviction["metadata"]["name"] = "job-1"
        code, _body = call(port, "POST", "/api/v1/namespaces/shop/pods/job-1/eviction", eviction)
        assert code == 201   # canIgnorePDB: a Succeeded pod is deleted whatever its budget says
    finally:
        proc.terminate()
        proc.wait(timeout=10)
