# SPDX-License-Identifier: GPL-3.0-or-later
"""kubeadm: a kubelet fix survives ``kubeadm upgrade node`` because the role also puts it in the
kube-system/kubelet-config ConfigMap - against lab/apiserver-double (a TEST DOUBLE of kube-apiserver)
and lab/kubeadm-double/kubeadm (a TEST DOUBLE of ``kubeadm upgrade node``'s kubelet-config phase:
it rewrites /var/lib/kubelet/config.yaml from the ConfigMap, as the real one does). The node is a
copy of the kubeadm layout under a root directory; nothing on the test machine changes.

The cases share three playbook runs (module fixture ``runs``): each case is a local-connection host with its own
node tree and its own double, and each test asserts on its host's results, its double and its host's output."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, ApiServerDouble, assert_ok, run_logged

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


def run_play(tmp_path, name, nodes, check=False):
    """ONE run of the test playbook over several local-connection hosts, each a case with its own node tree and
    its own API server double: nodes {host: (double, root, {durable, restart_problem})}. {host: results}, output."""
    hosts = {}
    for host, (double, root, opts) in nodes.items():
        hosts[host] = dict({"durable": True, "restart_problem": ""}, **opts)
        hosts[host].update({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                            "node_root": str(root), "kubeconfig": double.kubeconfig,
                            "results_file": str(tmp_path / ("%s-%s.json" % (name, host)))})
    inventory = tmp_path / ("%s-inventory.json" % name)
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
            os.path.join(ROOT, "tests", "integration", "playbooks", "kubeadm_durable.yml")]
    if check:
        argv += ["--check", "--diff"]
    rc, out = run_logged("kubeadm-durable-%s" % name, argv, timeout=300)
    assert_ok("kubeadm-durable-%s" % name, rc, out)
    return dict((h, json.loads((tmp_path / ("%s-%s.json" % (name, h))).read_text())) for h in hosts), out


def said_by(out, host):
    """What the run printed for ``host``: each ``<status>: [host]`` line with the indented lines under it."""
    said, mine = [], False
    for line in out.splitlines():
        if line and not line[0].isspace():
            mine = bool(re.match(r"^\w+: \[%s\]" % re.escape(host), line))
        if mine:
            said.append(line)
    return "\n".join(said)


def kubeadm_upgrade_node(double, root):
    proc = subprocess.run([sys.executable, KUBEADM, "upgrade", "node", "--kubeconfig", double.kubeconfig,
                           "--root", str(root)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Writing kubelet configuration to file" in proc.stdout
    return yaml.safe_load((root / "var" / "lib" / "kubelet" / "config.yaml").read_text())


def configmap(state):
    """The kubelet key of kube-system/kubelet-config in a state of the double (``double.state()``)."""
    return state["configmaps"]["kube-system/kubelet-config"]["kubelet"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The module's cases in three playbook runs (issue 56: six before), each case its own node tree and its own
    API server double: run 1 - "run" (the fix, durable), "rolled-back" (the restart rolled back), "nocm" (no
    ConfigMap); run 2 (--check) - "check"; kubeadm upgrade node on "run"'s tree; run 3 - "run" again on its double
    and tree, and "node-only" (durable false) on "check"'s double and tree; kubeadm upgrade node on that tree.
    What each test asserts is kept as it stood at its step (``seen``)."""
    tmp = tmp_path_factory.mktemp("kubeadm")
    doubles, roots, seen = {}, {}, {}
    try:
        for case in ("run", "check", "rolled-back", "nocm"):
            base = tmp / case
            base.mkdir()
            configmaps = {} if case == "nocm" else {"kube-system/kubelet-config": {"kubelet": CLUSTER_CONFIG}}
            doubles[case] = ApiServerDouble(base, [], [], configmaps)
            roots[case] = node_tree(base)
        seen["first"], seen["first_out"] = run_play(tmp, "first", {
            "run": (doubles["run"], roots["run"], {}),
            "rolled-back": (doubles["rolled-back"], roots["rolled-back"], {"restart_problem": "healthz not ok"}),
            "nocm": (doubles["nocm"], roots["nocm"], {})})
        seen["run_state"] = doubles["run"].state()
        seen["rolled_state"] = doubles["rolled-back"].state()
        seen["check"], seen["check_out"] = run_play(tmp, "check", {"check": (doubles["check"], roots["check"], {})},
                                                    check=True)
        seen["check_state"] = doubles["check"].state()
        seen["run_upgraded"] = kubeadm_upgrade_node(doubles["run"], roots["run"])
        seen["second"], _out = run_play(tmp, "second", {
            "run": (doubles["run"], roots["run"], {}),
            "node-only": (doubles["check"], roots["check"], {"durable": False})})
        seen["run_state_again"] = doubles["run"].state()
        seen["node_only_state"] = doubles["check"].state()
        seen["node_only_upgraded"] = kubeadm_upgrade_node(doubles["check"], roots["check"])
        yield seen
    finally:
        for double in doubles.values():
            double.stop()


def test_the_fix_survives_kubeadm_upgrade_node(runs):
    result = runs["first"]["run"]
    assert result["config"]["durability"]["manager"] == "kubeadm"
    assert result["plan"]["changed"] and "kubeAPIQPS" in result["plan"]["fields"]
    # the node's values changed in this run: the ConfigMap waits for the restarted kubelet to prove them
    assert result["before_restart"] == CLUSTER_CONFIG and result["pending"] is False
    cm = yaml.safe_load(configmap(runs["run_state"]))
    assert (cm["kubeAPIQPS"], cm["kubeAPIBurst"], cm["serializeImagePulls"], cm["maxParallelImagePulls"]) == (50, 100, False, 5)
    # the ConfigMap's other lines are the cluster's, byte for byte
    changed = [line for line in configmap(runs["run_state"]).splitlines() if line not in CLUSTER_CONFIG.splitlines()]
    assert all(line.split(":")[0] in ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst", "serializeImagePulls",
                                      "maxParallelImagePulls") for line in changed), changed
    after = runs["run_upgraded"]
    assert (after["kubeAPIQPS"], after["kubeAPIBurst"], after["maxParallelImagePulls"]) == (50, 100, 5)
    # a second run changes nothing in the cluster
    patches = [e for e in runs["run_state"]["log"] if e["method"] == "PATCH"]
    assert len(patches) == 1 and not patches[0]["dryRun"]
    # one JSON merge patch, conditional on the ConfigMap's resourceVersion as read in this run (the double refuses a
    # stale one with 409 Conflict, as the real server does)
    assert patches[0]["content_type"] == "application/merge-patch+json" and patches[0]["resourceVersion"], patches
    again = runs["second"]["run"]
    assert again["plan"]["changed"] is False
    assert [e for e in runs["run_state_again"]["log"] if e["method"] == "PATCH"] == patches


def test_without_the_configmap_update_the_upgrade_undoes_the_fix(runs):
    # check mode: the plan is made, the patch is only a server-side dry run
    result = runs["check"]["check"]
    assert result["plan"]["changed"] and "would set" in said_by(runs["check_out"], "check")
    # the patch step ran now (check mode): no word of a ConfigMap left alone for want of a restart
    assert "NOT set" not in said_by(runs["check_out"], "check")
    # nodefix.k8s.kubelet_configmap sends its conditional merge patch with ?dryRun=All in check mode (RBAC and
    # admission judge it, as kubernetes.core's check mode did) - only that: no other write, the ConfigMap unchanged
    writes = [e for e in runs["check_state"]["log"] if e["method"] in ("PATCH", "PUT")]
    assert writes and all(e["method"] == "PATCH" and e["dryRun"] for e in writes), writes
    assert all(e["content_type"] == "application/merge-patch+json" and e["resourceVersion"] for e in writes), writes
    assert configmap(runs["check_state"]) == CLUSTER_CONFIG
    # the control: the node fixed alone (the file kubelet reads says 50) ...
    result = runs["second"]["node-only"]
    assert result["config"]["effective"]["kubeAPIQPS"]["value"] == 50
    assert configmap(runs["node_only_state"]) == CLUSTER_CONFIG
    # ... and kubeadm upgrade node puts the cluster's 5 back
    assert runs["node_only_upgraded"]["kubeAPIQPS"] == 5


def test_a_rolled_back_restart_leaves_the_configmap_alone(runs):
    """The ConfigMap reaches every node at its next kubeadm upgrade node: a value the restarted
    kubelet did not accept (rolled back) must never get there."""
    result = runs["first"]["rolled-back"]
    assert result["plan"]["changed"] and result["pending"] is True
    assert configmap(runs["rolled_state"]) == CLUSTER_CONFIG
    assert not [e for e in runs["rolled_state"]["log"] if e["method"] in ("PATCH", "PUT")]
    assert "is set once the restarted kubelet is verified" in " ".join(said_by(runs["first_out"], "rolled-back").split())


def test_no_configmap_says_where_the_fix_lives(runs):
    result = runs["first"]["nocm"]
    assert result["plan"] is None
    said = said_by(runs["first_out"], "nocm")
    assert "does not exist" in said and "/var/lib/kubelet/config.yaml" in said, said
    lost = [f for f in result["config"]["findings"] if f["id"] == "kubelet.fix_not_durable"]
    assert lost and "kubeAPIQPS" in lost[0]["evidence"]["settings"]
