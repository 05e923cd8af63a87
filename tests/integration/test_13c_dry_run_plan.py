# SPDX-License-Identifier: GPL-3.0-or-later
"""remediate --check shows each node's plan (issue 55 item 3), and the real run then does what it listed.

Against lab/apiserver-double (a TEST DOUBLE of kube-apiserver; the real kubernetes.core modules on the controller).
Two "nodes", both the controller over a local connection, in ONE inventory (one --check run, then one real run):
- node-a: only the kernel detector, judging a pretended old kernel (the kernel role only reports) - drained
  through the double (web-1 evicted, the DaemonSet pod stays) and given back;
- node-b: only the pids detector, with a threads-max floor no machine reaches (a pids finding, so the pids role
  runs), no kubeconfig (no drain), and the role's sysctl.d file in the test's directory with the live value
  left alone (pids_apply_live: false): the one file the real run writes is the test's own.
Nothing on the test machine changes.
"""

import json
import os

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
PODS = [
    {"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"},
    {"namespace": "kube-system", "name": "proxy-a", "node": "node-a", "owner": "DaemonSet"},
]


def remediate(tmp_path, name, double, check):
    common = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
              "nodefix_drain_timeout": 20}
    sysctl = str(tmp_path / "sysctl.d" / "60-nodefix-pid-max.conf")
    hosts = {
        "node-a": dict(common, nodefix_kubeconfig=double.kubeconfig, nodefix_audit_checks=["kernel"],
                       nodefix_audit_options={"kernel": {"release": "4.4.0-1069-aws"}}),
        "node-b": dict(common, nodefix_audit_checks=["pids"],
                       nodefix_audit_options={"pids": {"threads_max_min": 1073741823, "sysctl_file": sysctl}},
                       pids_sysctl_file=sysctl, pids_apply_live=False),
    }
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {"k8s_nodes": {"hosts": hosts}}}}))
    reports = tmp_path / ("reports-check" if check else "reports")
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
            "-e", "nodefix_report_dir=%s" % reports, "-e", "nodefix_run=%s" % name,
            os.path.join(ROOT, "playbooks", "remediate.yml")] + (["--check", "--diff"] if check else [])
    rc, out = run_logged("dry-run-plan-%s" % name, argv, timeout=600)
    return rc, out, reports / "remediate", sysctl


def test_the_dry_run_shows_the_plan_and_the_real_run_does_it(apiserver_double, tmp_path):
    double = apiserver_double(["node-a", "node-b"], list(PODS))
    (tmp_path / "sysctl.d").mkdir()
    rc, out, reports, sysctl = remediate(tmp_path, "check", double, check=True)
    assert rc == 0, out[-3000:]

    # check mode changed nothing: no cordon, no eviction, no lease, not even the trail (node_events posts nothing in
    # check mode) - the one request is the drain preflight's question (SelfSubjectAccessReviews change nothing)
    st = double.state()
    assert [e for e in st["log"] if "/selfsubjectaccessreviews" not in e["path"]] == [], st["log"]
    assert st["nodes"]["node-a"]["unschedulable"] is False and len(st["pods"]) == 2
    assert not os.path.exists(sysctl)

    # the console: one "Plan for this node" output a node
    shown = out.split("TASK [Plan for this node (dry run)]")
    assert len(shown) == 3, out[-3000:]
    assert "DRY RUN plan for node-a: would fix" in out and "DRY RUN plan for node-b: would fix" in out
    assert "drain (cordon, then uncordon once verified); 1 pod(s) to evict: default/web-1" in out, out[-4000:]
    # (the console's YAML callback may wrap a long line: the words, not the line)
    assert "kernel.pid_max (unset) -> 4194304" in out and "no drain (no nodefix_kubeconfig)" in out, out[-4000:]
    assert "gate storm breaker: go:" in out

    # the reports: DRY RUN and each node's plan in JSON, Markdown and HTML
    report = json.loads((reports / "report.json").read_text())
    assert report["run"]["check_mode"] is True
    plans = dict((n["host"], n["plan"]) for n in report["nodes"])
    assert plans["node-a"]["roles"] == ["kernel"] and plans["node-a"]["drain"]["pods"] == ["default/web-1"]
    assert plans["node-b"]["roles"] == ["pids"] and plans["node-b"]["drain"]["would"] is False
    assert plans["node-b"]["changes"] == [{"role": "pids", "file": sysctl, "key": "kernel.pid_max",
                                           "before": "(unset)", "after": "4194304"}]
    assert [g["gate"] for g in plans["node-a"]["gates"]] == ["storm breaker"]
    md = (reports / "report.md").read_text()
    assert "**DRY RUN (check mode)" in md and "## Plan (dry run)" in md and "### node-b" in md
    assert "- change %s: kernel.pid_max (unset) -> 4194304" % sysctl in md
    html = (reports / "report.html").read_text().replace("<wbr>", "")
    assert "DRY RUN (check mode)" in html and "Plan (dry run)</h2>" in html and "default/web-1" in html

    # the real run does what the plan listed, and nothing it did not
    rc, out, reports, sysctl = remediate(tmp_path, "real", double, check=False)
    assert rc == 0, out[-3000:]
    st = double.state()
    evicted = [e["path"].split("/pods/")[1].split("/")[0] for e in st["log"]
               if e["method"] == "POST" and e["path"].endswith("/eviction")]
    assert ["default/" + name for name in evicted] == plans["node-a"]["drain"]["pods"]
    cordons = [e["body"]["spec"]["unschedulable"] for e in st["log"] if e["method"] == "PATCH" and "spec" in e["body"]]
    assert cordons == [True, False]   # the planned "cordon, then uncordon once verified"
    with open(sysctl) as fh:
        written = dict(line.split("=", 1) for line in fh.read().split() if "=" in line)
    assert [(c["key"], c["after"]) for c in plans["node-b"]["changes"]] == list(written.items())
    real = json.loads((reports / "report.json").read_text())
    assert all("plan" not in n for n in real["nodes"]) and real["run"]["check_mode"] is False
    assert dict((n["host"], n["remediation"]["roles"]) for n in real["nodes"]) == {
        "node-a": ["nodefix.k8s.kernel"], "node-b": ["nodefix.k8s.pids"]}
    assert "Plan for this node" not in out
