# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/remediate.yml's rollout against lab/apiserver-double (a TEST DOUBLE of kube-apiserver:
no Debian package ships one), with the real kubernetes.core modules on the controller.

The "node" is the controller itself over a local connection, audited read-only with only the
kernel detector and a pretended old kernel release (``nodefix_audit_options``), so the one fix role
is nodefix.k8s.kernel, which only reads and reports: nothing on the test machine changes. A
negative kernel threshold makes that role fail, which is the failure path.
"""

import json
import os

import pytest

from conftest import ROOT, read_k8s, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
PODS = [
    {"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"},
    {"namespace": "kube-system", "name": "proxy-a", "node": "node-a", "owner": "DaemonSet"},
]
PDB_POD = {"namespace": "default", "name": "db-0", "node": "node-a", "owner": "StatefulSet", "pdb": True}


def remediate(tmp_path, name, double=None, extra=None, hosts=("node-a",), check=False):
    host_vars = {
        "ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
        "nodefix_audit_checks": ["kernel"],
        "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}},
        "nodefix_report_dir": str(tmp_path / "reports"), "nodefix_drain_timeout": 20,
    }
    if double is not None:
        host_vars["nodefix_kubeconfig"] = double.kubeconfig
    host_vars.update(extra or {})
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": dict((h, host_vars) for h in hosts)}}))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
            "-e", "nodefix_report_dir=%s" % (tmp_path / "reports"),  # the report play runs on localhost
            os.path.join(ROOT, "playbooks", "remediate.yml")] + (["--check"] if check else [])
    return run_logged("rollout-double-%s" % name, argv, timeout=600)


def patches(double):
    """The cordon/uncordon PATCHes (spec.unschedulable), in order; the annotation's PATCH is metadata only."""
    return [e["body"]["spec"]["unschedulable"] for e in double.state()["log"]
            if e["method"] == "PATCH" and "spec" in e["body"]]


def k8s_info(tmp_path, double, label, **args):
    """kubernetes.core.k8s_info against the double, as kubectl reads: its resources."""
    return read_k8s(label, double.kubeconfig, **args)


@pytest.mark.parametrize("fail", [False, True], ids=["success", "failed-remediation"])
def test_node_uncordoned_before_is_drained_and_given_back(apiserver_double, tmp_path, fail):
    double = apiserver_double(["node-a"], list(PODS))
    rc, out = remediate(tmp_path, "uncordoned-%s" % fail, double,
                        {"kernel_dying_memcgs_threshold": -1} if fail else None)
    assert (rc != 0) == fail, out[-3000:]
    st = double.state()
    assert st["nodes"]["node-a"]["unschedulable"] is False
    assert patches(double) == [True, False]  # cordoned by the drain, uncordoned after
    assert [p["name"] for p in st["pods"]] == ["proxy-a"]  # drained (the DaemonSet pod stays)


@pytest.mark.parametrize("fail", [False, True], ids=["success", "failed-remediation"])
def test_node_cordoned_before_stays_cordoned(apiserver_double, tmp_path, fail):
    double = apiserver_double({"node-a": {"unschedulable": True}}, list(PODS))
    rc, out = remediate(tmp_path, "cordoned-%s" % fail, double,
                        {"kernel_dying_memcgs_threshold": -1} if fail else None)
    assert (rc != 0) == fail, out[-3000:]
    assert double.state()["nodes"]["node-a"]["unschedulable"] is True
    assert False not in patches(double)  # never an uncordon
    assert "was cordoned before this run" in out


@pytest.mark.parametrize("fail", [False, True], ids=["verified", "failed"])
def test_the_run_leaves_its_story_on_the_node_as_kubectl_reads_it(apiserver_double, tmp_path, fail):
    """Events on the Node object (events.k8s.io/v1, read as core/v1 Events the way `kubectl get events
    --field-selector involvedObject.name=node-a` reads them, through kubernetes.core), in the order the steps
    happened, each with the run's id; and the nodefix.k8s/last-remediation annotation."""
    double = apiserver_double(["node-a"], list(PODS))
    rc, out = remediate(tmp_path, "events-%s" % fail, double,
                        dict({"kernel_dying_memcgs_threshold": -1} if fail else {}, nodefix_run="run-%s" % fail))
    assert (rc != 0) == fail, out[-3000:]
    events = k8s_info(tmp_path, double, "events-%s" % fail, kind="Event", namespace="default",
                      field_selectors=["involvedObject.name=node-a", "involvedObject.kind=Node"])
    events.sort(key=lambda e: e["eventTime"])
    # the kernel role only reports: it ran (FixApplied) when the run succeeded; after the failure it is not
    # named, since nothing it changed shows in the audits
    steps = ["Drained", "RemediationFailed"] if fail else ["Drained", "FixApplied", "FindingsStillOpen"]
    assert [e["reason"] for e in events] == ["FindingsDetected", "EvidenceKept"] + steps + ["Uncordoned"], events
    assert all(e["message"].startswith("run run-%s: " % fail) for e in events), events
    assert all(e["source"]["component"] == "nodefix.k8s" and e["involvedObject"]["kind"] == "Node" for e in events)
    assert [e["type"] for e in events] == ["Warning", "Normal"] + (
        ["Normal", "Warning"] if fail else ["Normal", "Normal", "Warning"]) + ["Normal"]
    # the evidence read before the drain is where its Event says, bounded, with the node's findings
    path = events[1]["message"].split("kept before the drain: ", 1)[1].split(" (", 1)[0]
    kept = json.loads(open(path).read())
    assert os.path.getsize(path) < 5 * 1024 * 1024 and "kernel.no_oom_reaper" in [f["id"] for f in kept["findings"]]
    assert set(kept["sources"]) | set(m["source"] for m in kept["missing"]) >= {"journal-kubelet", "journal-containerd",
                                                                                "kernel", "failed-units"}
    assert "plan: roles kernel, drain" in events[0]["message"]
    (node,) = k8s_info(tmp_path, double, "node-%s" % fail, kind="Node", name="node-a")
    summary = json.loads(node["metadata"]["annotations"]["nodefix.k8s/last-remediation"])
    assert summary["run"] == "run-%s" % fail and summary["outcome"] == ("failed" if fail else "ok")
    assert "kernel.no_oom_reaper" in summary["stillOpen"]   # a pretended release: the role only reports
    assert double.state()["nodes"]["node-a"]["unschedulable"] is False   # the annotation's PATCH is not a cordon


def test_a_run_without_a_kubeconfig_writes_no_event(tmp_path):
    rc, out = remediate(tmp_path, "no-events", None)
    assert rc == 0 and "Tell the cluster" in out and "ok: [node-a -> localhost]" not in out.split(
        "Tell the cluster what this run found", 1)[1].split("TASK [", 1)[0], out[-3000:]


@pytest.mark.parametrize("cordoned", [False, True], ids=["was-schedulable", "was-cordoned"])
def test_failed_drain_restores_exactly_the_state_before(apiserver_double, tmp_path, cordoned):
    double = apiserver_double({"node-a": {"unschedulable": cordoned}}, list(PODS) + [PDB_POD])
    rc, out = remediate(tmp_path, "drainfail-%s" % cordoned, double)
    assert rc != 0, out[-3000:]  # a node that cannot be drained is left alone and failed (after the report)
    assert "could not be drained" in out or "drain failed" in out
    assert double.state()["nodes"]["node-a"]["unschedulable"] is cordoned


def test_without_kubeconfig_it_says_so_once(tmp_path):
    rc, out = remediate(tmp_path, "nodrain", None, hosts=("node-a", "node-b"))
    assert rc == 0, out[-3000:]
    assert out.count("WITHOUT draining their pods") == 1 and "node-a, node-b" in out


def test_require_drain_refuses_to_restart_an_undrained_node(tmp_path):
    """A fake old runc makes the audit ask for the containerd role (it restarts containerd): refused.

    Run in check mode as a second guard: even a broken refusal could not change the test machine.
    """
    fake = tmp_path / "bin" / "runc"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "runc version 1.0.0-rc4"\necho "spec: 1.0.0"\n')
    fake.chmod(0o755)
    # the containerd detector owns runc.cpu_quota_rounding_bug (fixed by the containerd role)
    extra = {"nodefix_audit_checks": ["containerd"],
             "nodefix_audit_options": {"containerd": {"runc_binary": str(fake), "check_socket": False}},
             "nodefix_require_drain": True}
    rc, out = remediate(tmp_path, "require-drain", None, extra, check=True)
    assert rc != 0, out[-3000:]
    assert "refused: nodefix_require_drain is true and this node was not drained" in out
    assert "nodefix.k8s.containerd :" not in out  # not one task of the containerd role ran


# ---- gVisor: evict exactly the pod whose sandbox is oversized -----------------------------------------

TWINS = [
    {"namespace": "shop", "name": "cart-a", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "cart"},
     "replace": True},
    {"namespace": "shop", "name": "cart-b", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "cart"}},
    {"namespace": "shop", "name": "cart-c", "node": "node-b", "owner": "ReplicaSet", "labels": {"app": "cart"}},
]


def evict(tmp_path, double, uids, check=False, name="run"):
    results = tmp_path / "evictions.json"
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter=%s" % PY,
            "-e", json.dumps({"gvisor_pods_to_recreate": uids, "gvisor_kubeconfig": double.kubeconfig,
                              "gvisor_node_name": "node-a", "results_file": str(results)}),
            os.path.join(ROOT, "tests", "integration", "playbooks", "gvisor_evict.yml")] + (["--check"] if check else [])
    rc, out = run_logged("gvisor-evict-%s" % name, argv, timeout=600)
    return rc, out, (json.loads(results.read_text()) if results.exists() else None)


def uid_of(double, name):
    return [p["uid"] for p in double.state()["pods"] if p["name"] == name][0]


def test_only_the_named_pod_is_evicted_and_the_node_is_not_cordoned(apiserver_double, tmp_path):
    double = apiserver_double(["node-a", "node-b"], [dict(p) for p in TWINS])
    target = uid_of(double, "cart-a")
    rc, out, results = evict(tmp_path, double, [target], name=target[:8])
    assert rc == 0, out[-3000:]
    st = double.state()
    names = sorted(p["name"] for p in st["pods"])
    assert names == ["cart-a-r1", "cart-b", "cart-c"]  # cart-b has the same labels on the same node: kept
    assert [e["path"] for e in st["log"] if e["method"] == "POST"] == ["/api/v1/namespaces/shop/pods/cart-a/eviction"]
    assert not [e for e in st["log"] if e["method"] == "PATCH"]  # never cordoned
    assert results == [{"uid": target, "pod": "shop/cart-a", "result": "evicted, replacement Ready"}]
    assert "cart-b" not in out and '"env"' not in out  # pod listings are not logged


def test_check_mode_evicts_nothing(apiserver_double, tmp_path):
    double = apiserver_double(["node-a", "node-b"], [dict(p) for p in TWINS])
    rc, out, results = evict(tmp_path, double, [uid_of(double, "cart-a")], check=True)
    assert rc == 0, out[-3000:]
    assert not [e for e in double.state()["log"] if e["method"] in ("POST", "PATCH", "DELETE")]


def test_pdb_refusal_is_reported_and_the_pod_stays(apiserver_double, tmp_path):
    pods = [dict(p) for p in TWINS]
    pods[0]["pdb"] = True
    double = apiserver_double(["node-a", "node-b"], pods)
    target = uid_of(double, "cart-a")
    rc, out, results = evict(tmp_path, double, [target], name=target[:8])
    assert rc == 0, out[-3000:]  # reported per pod, the run goes on
    assert results[0]["result"] == "failed" and "PodDisruptionBudget" in results[0]["reason"]
    assert "cart-a" in [p["name"] for p in double.state()["pods"]]
    assert len([e for e in double.state()["log"] if e.get("refused") == "DisruptionBudget"]) >= 2  # retried


def test_a_replaced_pod_is_not_evicted_again(apiserver_double, tmp_path):
    """The UID precondition: a pod of that name but another UID is left alone."""
    double = apiserver_double(["node-a", "node-b"], [dict(p) for p in TWINS])
    rc, out, results = evict(tmp_path, double, ["0d6a5c38-0000-4000-8000-000000000000"])
    assert rc == 0, out[-3000:]
    assert results[0]["result"] == "skipped" and "no pod with this uid" in results[0]["reason"]
    assert not [e for e in double.state()["log"] if e["method"] == "POST"]


# ---- pod_eviction alone against the double --------------------------------------------------------

def pod_eviction(tmp_path, double, name, namespace, uid=None, timeout=0):
    args = {"kubeconfig": double.kubeconfig, "name": name, "namespace": namespace, "wait_timeout": timeout,
            "wait_sleep": 1}
    if uid:
        args["uid"] = uid
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible"), "localhost", "-c", "local", "-e",
            "ansible_python_interpreter=%s" % PY, "-m", "nodefix.k8s.pod_eviction", "-a", json.dumps(args)]
    return run_logged("pod-eviction-%s-%s" % (namespace, name), argv, timeout=300)


@pytest.mark.parametrize("name,namespace", [("cart-z", "shop"), ("cart-a", "other")], ids=["no-such-pod", "wrong-namespace"])
def test_pod_eviction_of_a_missing_pod_touches_nothing(apiserver_double, tmp_path, name, namespace):
    double = apiserver_double(["node-a", "node-b"], [dict(p) for p in TWINS])
    rc, out = pod_eviction(tmp_path, double, name, namespace)
    assert rc == 0 and "result: gone" in out and "changed: false" in out, out[-3000:]
    st = double.state()
    assert len(st["pods"]) == 3 and not [e for e in st["log"] if e["method"] in ("POST", "PATCH", "DELETE")]


def test_pod_eviction_refused_until_the_timeout_fails_naming_the_pod(apiserver_double, tmp_path):
    pods = [dict(p) for p in TWINS]
    pods[0]["pdb"] = True
    double = apiserver_double(["node-a", "node-b"], pods)
    rc, out = pod_eviction(tmp_path, double, "cart-a", "shop", timeout=3)
    assert rc != 0 and "eviction of pod shop/cart-a refused by a PodDisruptionBudget" in out, out[-3000:]
    st = double.state()
    assert len(st["pods"]) == 3
    assert len([e for e in st["log"] if e.get("refused") == "DisruptionBudget"]) >= 2  # retried
    assert not [e for e in st["log"] if e["method"] == "PATCH"]
