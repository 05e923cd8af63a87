# SPDX-License-Identifier: GPL-3.0-or-later
"""kubeadm: a kubelet fix survives ``kubeadm upgrade node`` because the role also puts it in the
kube-system/kubelet-config ConfigMap - against lab/apiserver-double (a TEST DOUBLE of kube-apiserver)
and lab/kubeadm-double/kubeadm (a TEST DOUBLE of ``kubeadm upgrade node``'s kubelet-config phase:
it rewrites /var/lib/kubelet/config.yaml from the ConfigMap, as the real one does). The node is a
copy of the kubeadm layout under a root directory; nothing on the test machine changes."""

import json
import os
import shutil
import subprocess
import sys

import yaml

from conftest import ROOT, assert_ok, run_logged

LAYOUT = os.path.join(ROOT, "lab", "kubelet-double", "layouts", "kubeadm")
KUBEADM = os.path.join(ROOT, "lab", "kubeadm-double", "kubeadm")
with open(os.path.join(LAYOUT, "var", "lib", "kubelet", "config.yaml")) as fh:
    CLUSTER_CONFIG = fh.read()  # kubeadm wrote the node's file from the ConfigMap: the same text


def node_tree(tmp_path):
    root = tmp_path / "node"
    shutil.copytree(LAYOUT, str(root), symlinks=True)
    kubelet = root / "usr" / "bin" / "kubelet"
    kubelet.parent.mkdir(parents=True, exist_ok=True)
    kubelet.write_text("#!/bin/sh\necho 'Kubernetes v1.29.3'\n")
    kubelet.chmod(0o755)
    return root


def run_play(tmp_path, double, root, name, check=False, durable=True, restart_problem=""):
    results = tmp_path / ("%s.json" % name)
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter=%s" % sys.executable,
            "-e", json.dumps({"node_root": str(root), "kubeconfig": double.kubeconfig, "results_file": str(results),
                              "durable": durable, "restart_problem": restart_problem}),
            os.path.join(ROOT, "tests", "integration", "playbooks", "kubeadm_durable.yml")]
    if check:
        argv += ["--check", "--diff"]
    rc, out = run_logged("kubeadm-durable-%s" % name, argv, timeout=300)
    assert_ok("kubeadm-durable-%s" % name, rc, out)
    return json.loads(results.read_text()), out


def kubeadm_upgrade_node(double, root):
    proc = subprocess.run([sys.executable, KUBEADM, "upgrade", "node", "--kubeconfig", double.kubeconfig,
                           "--root", str(root)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Writing kubelet configuration to file" in proc.stdout
    return yaml.safe_load((root / "var" / "lib" / "kubelet" / "config.yaml").read_text())


def configmap(double):
    return double.state()["configmaps"]["kube-system/kubelet-config"]["kubelet"]


def test_the_fix_survives_kubeadm_upgrade_node(apiserver_double, tmp_path):
    double = apiserver_double([], [], configmaps={"kube-system/kubelet-config": {"kubelet": CLUSTER_CONFIG}})
    root = node_tree(tmp_path)
    result, _out = run_play(tmp_path, double, root, "run")
    assert result["config"]["durability"]["manager"] == "kubeadm"
    assert result["plan"]["changed"] and "kubeAPIQPS" in result["plan"]["fields"]
    # the node's values changed in this run: the ConfigMap waits for the restarted kubelet to prove them
    assert result["before_restart"] == CLUSTER_CONFIG and result["pending"] is False
    cm = yaml.safe_load(configmap(double))
    assert (cm["kubeAPIQPS"], cm["kubeAPIBurst"], cm["serializeImagePulls"], cm["maxParallelImagePulls"]) == (50, 100, False, 5)
    # the ConfigMap's other lines are the cluster's, byte for byte
    changed = [line for line in configmap(double).splitlines() if line not in CLUSTER_CONFIG.splitlines()]
    assert all(line.split(":")[0] in ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst", "serializeImagePulls",
                                      "maxParallelImagePulls") for line in changed), changed
    after = kubeadm_upgrade_node(double, root)
    assert (after["kubeAPIQPS"], after["kubeAPIBurst"], after["maxParallelImagePulls"]) == (50, 100, 5)
    # a second run changes nothing in the cluster
    patches = [e for e in double.state()["log"] if e["method"] == "PATCH"]
    assert len(patches) == 1 and not patches[0]["dryRun"]
    again, _out = run_play(tmp_path, double, root, "again")
    assert again["plan"]["changed"] is False
    assert [e for e in double.state()["log"] if e["method"] == "PATCH"] == patches


def test_without_the_configmap_update_the_upgrade_undoes_the_fix(apiserver_double, tmp_path):
    double = apiserver_double([], [], configmaps={"kube-system/kubelet-config": {"kubelet": CLUSTER_CONFIG}})
    root = node_tree(tmp_path)
    # check mode: the plan is made, nothing is sent
    result, out = run_play(tmp_path, double, root, "check", check=True)
    assert result["plan"]["changed"] and "would set" in out
    writes = [e for e in double.state()["log"] if e["method"] in ("PATCH", "PUT")]
    # kubernetes.core asks the server for a dry run (?dryRun=All), which changes nothing
    assert writes and all(e["dryRun"] for e in writes), writes
    # the control: the node fixed alone (the file kubelet reads says 50) ...
    result, _out = run_play(tmp_path, double, root, "node-only", durable=False)
    assert result["config"]["effective"]["kubeAPIQPS"]["value"] == 50
    assert configmap(double) == CLUSTER_CONFIG
    # ... and kubeadm upgrade node puts the cluster's 5 back
    assert kubeadm_upgrade_node(double, root)["kubeAPIQPS"] == 5


def test_a_rolled_back_restart_leaves_the_configmap_alone(apiserver_double, tmp_path):
    """The ConfigMap reaches every node at its next kubeadm upgrade node: a value the restarted
    kubelet did not accept (rolled back) must never get there."""
    double = apiserver_double([], [], configmaps={"kube-system/kubelet-config": {"kubelet": CLUSTER_CONFIG}})
    root = node_tree(tmp_path)
    result, out = run_play(tmp_path, double, root, "rolled-back", restart_problem="healthz not ok")
    assert result["plan"]["changed"] and result["pending"] is True
    assert configmap(double) == CLUSTER_CONFIG
    assert not [e for e in double.state()["log"] if e["method"] in ("PATCH", "PUT")]
    assert "is set once the restarted kubelet is verified" in " ".join(out.split())


def test_no_configmap_says_where_the_fix_lives(apiserver_double, tmp_path):
    double = apiserver_double([], [])
    root = node_tree(tmp_path)
    result, out = run_play(tmp_path, double, root, "nocm")
    assert result["plan"] is None
    assert "does not exist" in out and "/var/lib/kubelet/config.yaml" in out
    lost = [f for f in result["config"]["findings"] if f["id"] == "kubelet.fix_not_durable"]
    assert lost and "kubeAPIQPS" in lost[0]["evidence"]["settings"]
