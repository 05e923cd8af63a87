# SPDX-License-Identifier: GPL-3.0-or-later
"""The kube-apiserver TEST DOUBLE (lab/apiserver-double) serves a pod's controller as its pods make it - one
ReplicaSet, StatefulSet or ReplicationController a (namespace, kind, name), the uid its pods' ownerReferences
carry, spec.replicas its pods not terminating (or the state's ``controllers``: a replica missing wholly),
status.readyReplicas those Ready - so the gVisor eviction (_k8s.evictions over _k8s.replicas, the module
pod_recreate) runs against it as against a real API server: TWINS of tests/integration/test_13_rollout_double.py
still evicted, a controller short of a replica held."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import evictions

pytest.importorskip("kubernetes")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOUBLE = os.path.join(REPO, "lab", "apiserver-double", "apiserver.py")
# test_13_rollout_double.py's gVisor pods, and a StatefulSet and a ReplicationController
PODS = [
    {"namespace": "shop", "name": "cart-a", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "cart"},
     "replace": True},
    {"namespace": "shop", "name": "cart-b", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "cart"}},
    {"namespace": "shop", "name": "cart-c", "node": "node-b", "owner": "ReplicaSet", "labels": {"app": "cart"}},
    {"namespace": "shop", "name": "db-0", "node": "node-a", "owner": "StatefulSet", "replace": True},
    {"namespace": "shop", "name": "db-1", "node": "node-b", "owner": "StatefulSet", "ready": False},
    {"namespace": "legacy", "name": "rc-1", "node": "node-a", "owner": "ReplicationController", "replace": True}]


def call(port, path):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open("http://127.0.0.1:%d%s" % (port, path), timeout=10) as resp:
            return resp.status, json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode())


@pytest.fixture
def double(tmp_path):
    made = []

    def start(state):
        where = tmp_path / ("d%d" % len(made))
        where.mkdir()
        (where / "state.json").write_text(json.dumps(dict({"nodes": {"node-a": {}, "node-b": {}}}, **state)))
        proc = subprocess.Popen([sys.executable, DOUBLE, "--state", str(where / "state.json"), "--port-file",
                                 str(where / "port"), "--kubeconfig", str(where / "kubeconfig")])
        made.append(proc)
        for _dummy in range(100):
            if (where / "port").exists():
                break
            time.sleep(0.1)
        return int((where / "port").read_text()), str(where / "kubeconfig"), where / "state.json"
    yield start
    for proc in made:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_pods_controller_is_served_as_its_pods_make_it(double):
    port, _kubeconfig, _state = double({"pods": PODS})
    code, pod = call(port, "/api/v1/namespaces/shop/pods/cart-a")
    ref = pod["metadata"]["ownerReferences"][0]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "ReplicaSet", "cart")
    _code, sibling = call(port, "/api/v1/namespaces/shop/pods/cart-c")
    assert sibling["metadata"]["ownerReferences"][0]["uid"] == ref["uid"]     # one controller, one uid
    code, rs = call(port, "/apis/apps/v1/namespaces/shop/replicasets/cart")
    assert code == 200 and rs["kind"] == "ReplicaSet" and rs["metadata"]["uid"] == ref["uid"]
    assert rs["spec"]["replicas"] == 3 and rs["status"]["readyReplicas"] == 3
    code, sts = call(port, "/apis/apps/v1/namespaces/shop/statefulsets/db")
    assert code == 200 and sts["spec"]["replicas"] == 2 and sts["status"]["readyReplicas"] == 1
    code, rc = call(port, "/api/v1/namespaces/legacy/replicationcontrollers/rc")
    assert code == 200 and rc["apiVersion"] == "v1" and rc["status"]["readyReplicas"] == 1
    _code, pod = call(port, "/api/v1/namespaces/legacy/pods/rc-1")
    assert pod["metadata"]["ownerReferences"][0]["apiVersion"] == "v1"
    for path in ("/apis/apps/v1/namespaces/shop/replicasets/db", "/apis/apps/v1/namespaces/other/replicasets/cart",
                 "/api/v1/namespaces/shop/replicasets/cart", "/apis/apps/v1/namespaces/legacy/replicationcontrollers/rc"):
        code, body = call(port, path)
        assert code == 404 and body["reason"] == "NotFound", (path, body)


def test_the_gvisor_eviction_runs_against_the_double(double):
    """cart-a (its ReplicaSet 3 of 3) evicted and its replacement Ready; db-0 held (its StatefulSet 1 of 2: db-1 not
    Ready - the sibling check says so first); rc-1 evicted."""
    port, kubeconfig, state = double({"pods": PODS})
    uid = dict((p["metadata"]["name"], p["metadata"]["uid"]) for p in call(port, "/api/v1/pods")[1]["items"])
    api = kube.Kube(kubeconfig, None, 10)
    changed, results = evictions.recreate(api, "node-a", [uid["cart-a"], uid["db-0"], uid["rc-1"]], sleep=1,
                                          ready_timeout=5)
    assert changed is True
    assert [(r.get("pod"), r["result"]) for r in results] == [
        ("shop/cart-a", "evicted, replacement Ready"), (None, "skipped"), ("legacy/rc-1", "evicted, replacement Ready")]
    assert results[1]["reason"].startswith("another pod of StatefulSet/db is not Ready (shop/db-1 is not Ready)")
    log = json.loads(state.read_text())["log"]
    assert [e["path"] for e in log if e["method"] == "POST"] == [
        "/api/v1/namespaces/shop/pods/cart-a/eviction", "/api/v1/namespaces/legacy/pods/rc-1/eviction"]


def test_a_controller_short_of_a_replica_holds_the_eviction_against_the_double(double):
    """The state's ``controllers`` wants 4 replicas of cart: 3 Ready, one missing wholly - cart-a is held; check
    mode the same."""
    port, kubeconfig, state = double({"pods": PODS, "controllers": {"shop/ReplicaSet/cart": {"replicas": 4}}})
    uid = dict((p["metadata"]["name"], p["metadata"]["uid"]) for p in call(port, "/api/v1/pods")[1]["items"])
    api = kube.Kube(kubeconfig, None, 10)
    for check in (True, False):
        changed, results = evictions.recreate(api, "node-a", [uid["cart-a"]], check_mode=check)
        assert changed is False and results == [{"uid": uid["cart-a"], "result": "skipped", "reason":
                                                 "its ReplicaSet cart has 3 of 4 replicas ready: evicting this pod "
                                                 "would take another one down"}], results
    assert not [e for e in json.loads(state.read_text())["log"] if e["method"] == "POST"]
