# SPDX-License-Identifier: GPL-3.0-or-later
"""An unreachable node is one failed node, and a drain that cannot run is refused before the first node:
playbooks/remediate.yml and playbooks/audit.yml against lab/apiserver-double (a TEST DOUBLE of
kube-apiserver: no Debian package ships one), with the real kubernetes.core modules on the controller.

As in test_13_rollout_double.py the reachable "nodes" are the controller over a local connection,
audited read-only with only the kernel detector and a pretended old kernel (its role only reports):
nothing on the test machine changes. An unreachable node is a real SSH connection to a name that cannot
resolve (``.invalid``, RFC 2606): Ansible's own `unreachable` result, at once.
"""

import json
import os
import re

import pytest

from conftest import ENV, ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
GONE = {"ansible_connection": "ssh", "ansible_host": "nodefix-unreachable.invalid"}
PODS = [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"}]


def run(tmp_path, name, hosts, playbook="remediate.yml", common=None, localhost=None, targets=None, env=None):
    """ansible-playbook with ``hosts`` ({name: vars}, in this order), every one with ``common``; the report's
    JSON (None when none was written), rc and output."""
    host_vars = {"ansible_python_interpreter": PY, "nodefix_become": False, "nodefix_audit_checks": ["kernel"],
                 "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}}, "nodefix_drain_timeout": 20}
    host_vars.update(common or {})
    inventory = {"all": {"children": {"nodes": {"hosts": dict((h, dict(host_vars, **v)) for h, v in hosts.items())}}}}
    if localhost is not None:  # the controller's own vars (the Python the drain runs with)
        inventory["all"]["hosts"] = {"localhost": dict({"ansible_connection": "local"}, **localhost)}
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inventory))
    reports = tmp_path / "reports"
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(path),
            "-e", "nodefix_report_dir=%s" % reports, "-e", "nodefix_targets=%s" % (targets or "nodes"),
            os.path.join(ROOT, "playbooks", playbook)]
    rc, out = run_logged("unreachable-%s" % name, argv, timeout=900, env=env)
    kind = "remediate" if playbook == "remediate.yml" else "audit"
    report = reports / kind / "report.json"
    model = json.loads(report.read_text()) if report.exists() else None
    return rc, out, (dict((n["host"], n) for n in model["nodes"]) if model else None)


def recap(out, host):
    line = [x for x in out.splitlines() if re.match(r"^%s\s+:\s+ok=" % re.escape(host), x)][-1]
    return dict((k, int(v)) for k, v in (part.split("=") for part in line.split(":", 1)[1].split()))


def patches(double, node):
    return [e["body"]["spec"]["unschedulable"] for e in double.state()["log"]
            if e["method"] == "PATCH" and e["path"] == "/api/v1/nodes/%s" % node and "spec" in e["body"]]


@pytest.fixture(scope="module")
def rollout(module_doubles, tmp_path_factory):
    """ONE run, one node a batch (the default), the failure limit at 100 % (every case goes on), the storm
    breaker overridden (its audit runs - where the first node is lost - and no node is held by it): the
    unresolvable node FIRST, then node-a (needs a fix: drained, fixed, given back), node-b (its Node is not in
    the API server: its drain fails), node-c and node-d (tests/integration/connection_plugins/nodefix_flaky.py,
    a TEST DOUBLE of a node that went down: the local connection until the API server double logged node-c's
    cordon, or node-d's uncordon). (double, rc, output, the report's nodes)."""
    reachable = ("node-a", "node-c", "node-d")   # the Nodes in the API server (node-b's is not), a pod each
    double = module_doubles("rollout", list(reachable),
                            [dict(p, name="%s-%s" % (p["name"], n[-1]), node=n) for p in PODS for n in reachable])
    rules = {"node-c": {"state": double.state_path, "node": "node-c", "after": "cordon"},
             "node-d": {"state": double.state_path, "node": "node-d", "after": "uncordon"}}
    env = {"NODEFIX_FLAKY": json.dumps(rules), "ANSIBLE_CONNECTION_PLUGINS": "%s:%s" % (
        ENV["ANSIBLE_CONNECTION_PLUGINS"], os.path.join(ROOT, "tests", "integration", "connection_plugins"))}
    flaky = {"ansible_connection": "nodefix_flaky", "nodefix_evidence": False}
    rc, out, nodes = run(tmp_path_factory.mktemp("rollout"), "rollout", {
        "aaa-gone": GONE, "node-a": {"ansible_connection": "local"},
        "node-b": {"ansible_connection": "local", "nodefix_node_name": "node-not-in-the-cluster"},
        "node-c": flaky, "node-d": flaky},
        common={"nodefix_kubeconfig": double.kubeconfig, "nodefix_max_fail_percentage": 100,
                "nodefix_storm_override": True}, env=env)
    assert rc != 0 and nodes is not None, out[-4000:]
    return double, rc, out, nodes


def test_an_unreachable_first_node_is_one_failed_node(rollout):
    """The unresolvable node first (lost at the storm breaker's audit: it was never touched), then node-a and
    node-b (``rollout``). Before this change the run ended at the first node's audit (exit 4), node-a was never
    remediated and no report was written."""
    double, _rc, out, nodes = rollout
    gone = nodes["aaa-gone"]
    assert gone["status"] == "unreachable" and gone["unreachable_at"] == "storm audit", gone
    assert gone["remediation"]["status"] == "unreachable" and "nodefix-unreachable.invalid" in gone["error"]
    # the reachable node after it was remediated: drained, its fix run and verified, given back
    assert nodes["node-a"]["remediation"]["status"] == "ok", nodes["node-a"]
    assert patches(double, "node-a") == [True, False]
    # a drain that fails (for any reason) is a failed node, not "skipped"
    assert nodes["node-b"]["remediation"]["status"] == "failed", nodes["node-b"]
    # (its Node is not in the cluster: since the rollout record, the claim before any gate is where that shows)
    assert "not found in the API server" in nodes["node-b"]["remediation"]["msg"], nodes["node-b"]["remediation"]
    assert recap(out, "aaa-gone")["failed"] == 1 and recap(out, "node-b")["failed"] == 1
    assert recap(out, "node-a")["failed"] == 0 and recap(out, "node-a")["unreachable"] == 0
    assert "not remediated: unreachable at storm audit" in out


def test_the_fleet_gate_counts_an_unreachable_node(apiserver_double, tmp_path):
    """Without the storm breaker (its audit off) the node is lost at the audit before; with the default
    failure limit (30 % of the last batch) the gate stops before node-a and says why; the report is written.
    An unsliced rollout the gate stops (test_17's unsliced run before, issue 62 step 8): its report is written and
    it records nothing for other slices."""
    double = apiserver_double(["node-a"], [dict(p) for p in PODS])
    rc, out, nodes = run(tmp_path, "gate", {"aaa-gone": GONE, "node-a": {"ansible_connection": "local"}},
                         common={"nodefix_kubeconfig": double.kubeconfig, "nodefix_storm_percent": 100})
    assert rc != 0 and nodes is not None, out[-4000:]
    assert nodes["aaa-gone"]["unreachable_at"] == "audit before", nodes["aaa-gone"]
    rem = nodes["node-a"]["remediation"]
    assert rem["status"] == "not run" and "aaa-gone" in rem["msg"] and "nodefix_max_fail_percentage" in rem["msg"], rem
    assert patches(double, "node-a") == []   # not touched
    # the rolling play did nothing on node-a: the gate kept it out
    rolling = out.split("PLAY [Remediate Kubernetes nodes (rolling)]", 1)[1].split("PLAY [Write", 1)[0]
    assert "ok: [node-a]" not in rolling and "changed: [node-a]" not in rolling, rolling[-3000:]
    assert nodes["node-a"]["status"] == "not run" and rem == {"status": "not run", "msg": nodes["node-a"]["error"]}
    assert not (tmp_path / "reports" / "slices").exists()  # an unsliced run records nothing for other slices


def test_a_node_lost_during_its_fixes_or_before_its_audit_after(rollout):
    """Nodes that go away mid-run (``rollout``): node-c is lost after its drain (at the fixes), node-d after
    it was given back (at the audit after). Each is unreachable at that step, never "fixed", its Events say
    so, the run exits non-zero. Before this change Ansible dropped the node, the run ended with its batch and
    no report was written."""
    double, _rc, out, nodes = rollout
    node = nodes["node-c"]
    assert node["unreachable_at"] == "fixes" and node["remediation"]["status"] == "unreachable", node
    assert "is gone since its" in node["error"] and node["fixed"] == [], node
    assert recap(out, "node-c")["failed"] == 1
    # lost with its fixes unverified: it stays cordoned, held, never given back
    st = double.state()["nodes"]["node-c"]
    assert st["unschedulable"] is True and "nodefix.k8s/held" in st.get("annotations", {}), st
    # node-d goes away after it was given back - and the audit after the fixes now comes BEFORE the give-back
    # (not verified, not in service): it was verified while it was there, so it is not unreachable at any step
    assert "unreachable_at" not in nodes["node-d"] and nodes["node-d"]["remediation"]["status"] != "unreachable"
    assert patches(double, "node-d") == [True, False]
    lost = [e for e in double.state()["events"] if e.get("reason") == "NodeUnreachable"]
    assert sorted(e["regarding"]["name"] for e in lost) == ["node-c"], lost
    # the annotation names no fix: no audit after read the node
    summary = json.loads(double.state()["nodes"]["node-c"]["annotations"]["nodefix.k8s/last-remediation"])
    assert summary["outcome"] == "unreachable" and summary["fixed"] == [] and summary["verified"] is False, summary


def test_an_audit_of_unreachable_nodes_writes_its_report(tmp_path):
    """Every node unreachable (before: the run ended before the report play, exit 4, nothing written)."""
    rc, out, nodes = run(tmp_path, "audit", {"aaa-gone": GONE, "bbb-gone": GONE}, playbook="audit.yml")
    assert rc != 0 and nodes is not None, out[-4000:]
    assert [n["status"] for n in nodes.values()] == ["unreachable", "unreachable"], nodes
    assert "nodefix-unreachable.invalid" in nodes["aaa-gone"]["error"]
    assert recap(out, "localhost")["failed"] == 1 and "not audited, unreachable: aaa-gone, bbb-gone" in out


def test_no_kubernetes_library_refuses_before_the_first_node(apiserver_double, tmp_path):
    """The controller's Python (localhost's interpreter: the one kubernetes.core runs with) has no
    `kubernetes` library. Before: every drain failed, the table said "skipped: drain failed", exit 0."""
    system_python = "/usr/bin/python3"
    probe = run_logged("unreachable-probe-python", [system_python, "-c", "import kubernetes"], timeout=60)
    assert probe[0] != 0, "%s has the kubernetes library: this case needs a Python without it" % system_python
    double = apiserver_double(["node-a"], [dict(p) for p in PODS])
    rc, out, nodes = run(tmp_path, "nolib", {"node-a": {"ansible_connection": "local"}},
                         common={"nodefix_kubeconfig": double.kubeconfig}, localhost={"ansible_python_interpreter": system_python})
    assert rc != 0 and nodes is not None, out[-4000:]
    rem = nodes["node-a"]["remediation"]
    assert rem["status"] == "not run" and "refused before the first node" in rem["msg"], rem
    assert "kubernetes" in rem["msg"]
    assert not [e for e in double.state()["log"] if e["method"] in ("PATCH", "POST", "DELETE")
                and "selfsubjectaccessreviews" not in e["path"]]   # (the reviews change nothing)


def test_rbac_denied_by_the_api_server_refuses_before_the_first_node(apiserver_double, tmp_path):
    """The API server (the double's SelfSubjectAccessReview) denies evictions: refused, nothing touched."""
    double = apiserver_double(["node-a"], [dict(p) for p in PODS],
                              access_denials=[{"verb": "create", "resource": "pods", "subresource": "eviction"}])
    rc, out, nodes = run(tmp_path, "rbac", {"node-a": {"ansible_connection": "local"}},
                         common={"nodefix_kubeconfig": double.kubeconfig})
    assert rc != 0 and nodes is not None, out[-4000:]
    rem = nodes["node-a"]["remediation"]
    assert "denies this run (its kubeconfig's user) create pods/eviction" in rem["msg"], rem
    assert not [e for e in double.state()["log"] if e["method"] in ("PATCH", "POST", "DELETE")
                and "selfsubjectaccessreviews" not in e["path"]]   # (the reviews change nothing)
