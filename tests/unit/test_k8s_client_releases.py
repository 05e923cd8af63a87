# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubernetes client range requirements.txt declares (and execution-environment.yml installs) is tested at both
ends: the oldest release it admits and the newest it admits today (scripts/k8s_clients.py installs each under
.cache/k8s-clients/<version> at set-up and records them; a range changed since then fails here until set-up runs
again). With each release, every module that talks to the API server runs as Ansible runs it - a subprocess
reading its arguments file, that release first on its PYTHONPATH (checked) - against lab/apiserver-double (a TEST
DOUBLE of kube-apiserver, as strict as its validation.py): the cordon with its record, the pod list, evictions (one
evicted, one a PodDisruptionBudget refuses with 429; pod_recreate's listing and eviction), the give-back of a dead
run's cordon, the trail's Events and annotation, the storm breaker's Node list, the reboot backoff's record, the reboot
lock's Lease, the control-plane guard's etcd pods and /readyz/etcd, the kubeadm kubelet-config ConfigMap's read and
conditional patch, the reboot's Ready check and the drain preflight's SelfSubjectAccessReviews. The subprocess
timeouts only guard the test run."""

import json
import os
import subprocess
import sys
import time

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
CLIENTS = os.path.join(ROOT, ".cache", "k8s-clients")
DOUBLE = os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py")
CP = "node-role.kubernetes.io/control-plane"
# the request contract of each end (_k8s.transport): python-legacy's call_api at the floor (24.2.0), the openapi
# generator's param_serialize + call_api at the newest (37.0.3, measured 2026-12-06)
CONTRACT = {"floor": "legacy", "newest": "serialized"}


def declared(path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line and Requirement(line).name.lower() == "kubernetes":
                return Requirement(line).specifier
    raise AssertionError("%s declares no kubernetes range" % path)


def set_up_record():
    """The record scripts/k8s_clients.py wrote at set-up: {range, floor, newest, queried}."""
    path = os.path.join(CLIENTS, "tested.json")
    assert os.path.isfile(path), "%s is missing: run scripts/setup.sh (it installs the clients)" % path
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def test_the_declared_range_is_the_one_whose_ends_the_set_up_installed():
    record = set_up_record()
    with open(os.path.join(ROOT, "execution-environment.yml"), encoding="utf-8") as fh:
        ee = yaml.safe_load(fh)
    assert ee["dependencies"]["python"] == "requirements.txt"   # the EE resolves the same range
    spec = declared(os.path.join(ROOT, "requirements.txt"))
    assert str(spec) == record["range"], (
        "requirements.txt admits kubernetes%s, the set-up tested the ends of %s: run scripts/setup.sh"
        % (spec, record["range"]))
    floor = [s.version for s in spec if s.operator == ">="]
    assert floor == [record["floor"]], "the range's floor %s is not the oldest release tested %s" % (floor, record)
    for version in (record["floor"], record["newest"]):
        assert spec.contains(version)
        assert os.path.isdir(os.path.join(CLIENTS, version, "kubernetes-%s.dist-info" % version)), version
    # the toolchain's pin (every playbook test) is inside the range
    dev = declared(os.path.join(ROOT, "requirements", "dev.txt"))
    assert spec.contains([s.version for s in dev][0])


def kubeconfig(path, port, token_file):
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        # a token file ending in a newline, as `echo $TOKEN > file` writes it: client-go trims it
        "users": [{"name": "u", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


class Release(object):
    """The double and a runner of modules with one client release."""

    def __init__(self, tmp, end):
        self.tmp, self.end, self.version = tmp, end, set_up_record()[end]
        version = self.version
        self.env = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
        self.env["PYTHONPATH"] = os.pathsep.join([COLLECTIONS, os.path.join(CLIENTS, version)])
        self.state = tmp / "state.json"
        nodes = {"node-a": {"unschedulable": False}, "node-b": {}, "node-c": {"ready": "False"},
                 "cp-1": {"labels": {CP: ""}}, "cp-2": {"labels": {CP: ""}}, "cp-3": {"labels": {CP: ""}}}
        pods = [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"},
                {"namespace": "default", "name": "db-0", "node": "node-a", "owner": "StatefulSet", "pdb": True},
                {"namespace": "default", "name": "db-1", "node": "node-b", "owner": "StatefulSet", "pdb": True}]
        pods += [{"namespace": "kube-system", "name": "etcd-%s" % n, "node": n, "mirror": True,
                  "labels": {"component": "etcd", "tier": "control-plane"}} for n in ("cp-1", "cp-2", "cp-3")]
        self.state.write_text(json.dumps({"nodes": nodes, "pods": pods, "configmaps": {"kube-system/kubelet-config": {
            "kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeAPIQPS: 5\n"}}}))
        port = tmp / "port"
        self.proc = subprocess.Popen([sys.executable, DOUBLE, "--state", str(self.state), "--port-file", str(port)])
        for _dummy in range(200):
            if port.exists() and port.read_text().strip():
                break
            time.sleep(0.05)
        token = tmp / "token"
        token.write_text("release-test-token\n")
        self.kubeconfig = kubeconfig(tmp / "kubeconfig", int(port.read_text()), token)

    def python(self, code):
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env=self.env, check=True).stdout.strip()

    def run(self, module, **args):
        args_file = self.tmp / ("%s.json" % module)
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(args, kubeconfig=self.kubeconfig)}))
        proc = subprocess.run([sys.executable, "-m", "ansible_collections.nodefix.k8s.plugins.modules." + module,
                               str(args_file)], capture_output=True, text=True, timeout=180, env=self.env, check=False)
        text = proc.stdout + proc.stderr
        assert "Traceback" not in text and "release-test-token" not in text, text
        return json.loads(proc.stdout)

    def data(self):
        return json.loads(self.state.read_text())


@pytest.fixture(params=["floor", "newest"])
def release(request, tmp_path):
    rel = Release(tmp_path, request.param)
    yield rel
    rel.proc.terminate()
    rel.proc.wait(timeout=10)


def test_cordon_drain_give_back_and_the_trail_work_with_the_release(release):
    # the release on the path is the one named, and the request contract detected is its own
    assert release.python(
        "import kubernetes\n"
        "from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client\n"
        "print(kubernetes.__version__, client.Kube(%r).send.__name__)" % release.kubeconfig).split() == \
        [release.version, CONTRACT[release.end]]
    out = release.run("node_cordon", node="node-a", run_id="run-1", cordon=True)
    assert not out.get("failed") and out["cordoned"] is True and out["cordoned_before"] is False, out
    assert sorted(p["metadata"]["name"] for p in out["pods"]) == ["db-0", "web-1"]
    evicted = release.run("pod_eviction", namespace="default", name="web-1", wait_timeout=0)
    assert evicted["result"] == "evicted" and evicted["attempts"] == 1, evicted
    refused = release.run("pod_eviction", namespace="default", name="db-0", wait_timeout=0)
    assert refused["failed"] and refused["status"] == 429 and "refused by a PodDisruptionBudget" in refused["msg"]
    assert "disruption budget" in refused["msg"], refused
    # pod_recreate (the gVisor role's eviction, one call): the node's pods listed, db-0's budget still refuses (that
    # pod's failure), a UID no pod has is skipped
    db0 = [p["uid"] for p in release.data()["pods"] if p["name"] == "db-0"][0]
    recreated = release.run("pod_recreate", node="node-a", uids=[db0, "uid-gone"], wait_timeout=0)
    assert [(r["uid"], r["result"]) for r in recreated["results"]] == [(db0, "failed"), ("uid-gone", "skipped")], recreated
    assert "refused by a PodDisruptionBudget" in recreated["results"][0]["reason"] and not recreated["changed"]
    # the next run finds run-1's cordon (a dead run's) and gives it back
    back = release.run("node_cordon", node="node-a", run_id="run-2")
    assert back["reclaim"]["action"] == "give_back" and back["changed"], back
    node = release.data()["nodes"]["node-a"]
    assert node["unschedulable"] is False and "nodefix.k8s/cordoned-by" not in (node.get("annotations") or {})
    trail = release.run("node_events", node="node-a", run_id="run-2", phase="end", finished=1764150000.0,
                        audit_before={"findings": [{"id": "kubelet.api_qps_low", "severity": "medium",
                                                    "check": "kubelet", "title": "t"}], "checks": {}},
                        audit_after={"findings": [], "checks": {}}, drained=True,
                        remediation={"status": "ok", "roles": ["nodefix.k8s.kubelet"]})
    assert trail["errors"] == [] and trail["posted"] == len(trail["events"]) > 0 and trail["annotation"], trail
    state = release.data()
    assert {e["reason"] for e in state["events"]} >= {"Drained"}
    assert "nodefix.k8s/last-remediation" in state["nodes"]["node-a"]["annotations"]


def test_the_gates_read_and_write_through_the_release(release):
    storm = release.run("storm_gate", nodes={"node-a": {"disruptive": [], "findings": []}}, api_timeout=10)
    assert not storm.get("failed"), storm
    assert storm["size"] == 6 and "the 6 Node(s) the API server lists" in storm["counted"], storm
    assert list(storm["unavailable"]) == ["node-c"], storm
    reasons = [{"id": "kernel.newer_installed", "reason": "a newer kernel is installed"}]
    recorded = release.run("reboot_backoff", state="record", node="node-b", reasons=reasons, run_id="run-3")
    assert recorded["changed"] and "nodefix.k8s/last-reboot" in release.data()["nodes"]["node-b"]["annotations"]
    checked = release.run("reboot_backoff", state="check", node="node-b", reasons=reasons)
    assert not checked.get("failed") and checked["last"]["run"] == "run-3", checked
    lock = release.run("reboot_gate", state="acquire", node="node-b", reason="kernel",
                       lock_observations=str(release.tmp / "observations.json"))
    assert not lock.get("failed") and lock["lock"]["slot"] == "nodefix-reboot-0", lock
    assert [(e["method"], e["path"].rsplit("/", 1)[-1]) for e in release.data()["log"] if "leases" in e["path"]] \
        == [("POST", "nodefix-reboot-0")]
    guard = release.run("control_plane_gate", node="cp-1", allow=True, wait=0)
    assert not guard.get("failed") and guard["allowed"] is True and guard["etcd"]["readyz"] == "200 ok", guard
    released = release.run("control_plane_gate", state="release", node="cp-1", wait=0)
    assert not released.get("failed") and released["lock"]["released"] == "nodefix-control-plane-0", released


def test_the_kubelet_configmap_is_planned_and_patched_through_the_release(release):
    planned = release.run("kubelet_configmap", settings={"kubeAPIQPS": 50}, request_timeout=10)
    assert not planned.get("failed") and planned["exists"] and planned["plan"]["changed"], planned
    assert planned["changed"] is False and not [e for e in release.data()["log"] if e["method"] == "PATCH"]
    patched = release.run("kubelet_configmap", settings={"kubeAPIQPS": 50}, apply=True, request_timeout=10)
    assert not patched.get("failed") and patched["patched"] and patched["changed"], patched
    state = release.data()
    assert state["configmaps"]["kube-system/kubelet-config"]["kubelet"].endswith("kubeAPIQPS: 50\n")
    (patch,) = [e for e in state["log"] if e["method"] == "PATCH"]
    assert patch["content_type"] == "application/merge-patch+json" and patch["resourceVersion"], patch
    missing = release.run("kubelet_configmap", name="kubelet-config-1.23", settings={"kubeAPIQPS": 50}, apply=True)
    assert not missing.get("failed") and missing["exists"] is False, missing


def test_the_ready_check_and_the_drain_preflight_work_with_the_release(release):
    """node_ready (the reboot's last check) and api_access (the drain preflight: a node read, SelfSubjectAccessReviews
    POSTed and answered) through each release's request contract."""
    ready = release.run("node_ready", node="node-a", wait_timeout=0)
    assert ready["ready"] is True and ready["found"] is True, ready
    not_ready = release.run("node_ready", node="node-c", wait_timeout=0)
    assert not_ready["ready"] is False and "Ready=False (KubeletNotReady)" in not_ready["msg"], not_ready
    reviews = [{"verb": "patch", "resource": "nodes"}, {"verb": "create", "resource": "pods", "subresource": "eviction"}]
    access = release.run("api_access", node="node-a", reviews=reviews)
    assert not access.get("failed") and access["all_allowed"] and access["node"]["found"], access
    assert [e["attributes"] for e in release.data()["log"] if "selfsubjectaccessreviews" in e["path"]] == reviews


ROLLOUT = r"""
import datetime, json, sys
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s.rollout_api import RolloutApi
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx, machine
now = [datetime.datetime(2026, 12, 6, 7, tzinfo=datetime.timezone.utc)]
def sleep(seconds):
    now[0] += datetime.timedelta(seconds=seconds)
role = "nodefix.k8s.kubelet"
plan = {"fix_roles": [role], "reboot_reasons": [], "disruptive": ["drain"], "evidence": False}
before = {"euid": 0, "findings": [{"id": "kubelet.api_qps_low", "check": "kubelet", "fix": {"role": role}}]}
ctx = mctx.Context(RolloutApi(sys.argv[1], timeout=10), "node-b", "run-9", {"host": "c", "pid": 1, "boot": "b"},
                   lambda pid: True, before, plan, lambda: now[0], sleep, {"drain_timeout": 12, "storm_percent": 50})
out = machine.begin(ctx)
print(json.dumps({"outcome": out["outcome"], "detail": out["detail"],
                  "steps": dict((s["name"], s["outcome"]) for s in out["steps"])}))
"""


def test_the_rollout_machine_drives_its_api_object_through_the_release(release):
    """The action nodefix.k8s.rollout's API object (_k8s.rollout_api.RolloutApi) under the machine: the claim (a
    conditional patch), the storm breaker's Node list, the cordon, the evictions (db-1's budget refuses: 429 asked again until the drain's timeout)
    and the give-back, with each release."""
    proc = subprocess.run([sys.executable, "-c", ROLLOUT, release.kubeconfig], capture_output=True, text=True,
                          timeout=120, env=release.env, check=False)
    assert proc.returncode == 0 and "release-test-token" not in proc.stdout + proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outcome"] == "drain_failed" and "default/db-1 (refused by a PodDisruptionBudget)" in out["detail"], out
    # the storm breaker's re-count listed the Nodes through the release (node-c NotReady and node-b: 2 of 6, within 50 %)
    assert out["steps"]["claim"] == out["steps"]["storm"] == out["steps"]["cordon"] == out["steps"]["give_back"] == \
        "done", out
    node = release.data()["nodes"]["node-b"]
    assert not node.get("unschedulable") and "nodefix.k8s/rollout" not in (node.get("annotations") or {}), node
    assert [p["name"] for p in release.data()["pods"] if p["node"] == "node-b"] == ["db-1"]
