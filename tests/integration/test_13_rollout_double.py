# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/remediate.yml's rollout against lab/apiserver-double (a TEST DOUBLE of kube-apiserver:
no Debian package ships one), with the real kubernetes.core modules on the controller.

The "node" is the controller itself over a local connection, audited read-only with only the
kernel detector and a pretended old kernel release (``nodefix_audit_options``), so the one fix role
is nodefix.k8s.kernel, which only reads and reports: nothing on the test machine changes. A
negative kernel threshold makes that role fail, which is the failure path.

The cases share runs (each ansible-playbook run costs seconds): every case with a kubeconfig is one host
of ONE remediation (``MAIN``, its own Node and pods in one double, made once for the module), each test
asserting on its own node - its Node and pods in the double, its PATCHes and Events, its entry in the
report and its line of the recap (its own exit status: the run's exit code is every node's). The cases
without a kubeconfig share a second run; the check-mode ones share a third (--check is play-wide).

The dry run's plan (issue 55 item 3; this module's since issue 56, before tests/integration/test_13c_dry_run_plan.py):
two more "nodes" with their own double (``dry``), hosts of the --check run and then of the main run, so the real
run starts from the cluster the plan was made of:
- dry-a: the kernel detector and the pretended old kernel, as the main cases - drained through its double
  (web-1 evicted, the DaemonSet pod stays) and given back;
- dry-b: only the pids detector, with a threads-max floor no machine reaches (a pids finding, so the pids role
  runs), no kubeconfig (no drain), and the role's sysctl.d file in the test's directory with the live value
  left alone (pids_apply_live: false): the one file the real run writes is the test's own.
"""

import json
import os
import re

import pytest

from conftest import ROOT, read_k8s, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
RUN = "run-main"
# host (= its Node): (cordoned before the run, its remediation fails, a PodDisruptionBudget stops its drain)
MAIN = {
    "node-a": (False, False, False),   # drained, verified, given back
    "node-f": (False, True, False),    # drained, its remediation failed: held
    "node-c": (True, False, False),    # an operator's cordon, the remediation succeeds
    "node-d": (False, False, True),    # the drain fails (PDB) on a schedulable node
}
# (an operator's cordon with a failed remediation, and a failed drain on a cordoned node, are the rollout machine's
# unit tests since issue 62 step 3: test_rollout_machine.py test_a_node_cordoned_before_the_run_stays_cordoned[failed],
# test_a_pdb_that_never_allows_...[was-cordoned]; these hosts are the wiring's end-to-end smoke)


def pods_of(node, pdb=False):
    """The node's pods: web-<x> (a ReplicaSet's), proxy-<x> (a DaemonSet's), and db-<x> protected by a PDB."""
    x = node.split("-", 1)[1]
    return ([{"namespace": "default", "name": "web-" + x, "node": node, "owner": "ReplicaSet"},
             {"namespace": "kube-system", "name": "proxy-" + x, "node": node, "owner": "DaemonSet"}]
            + ([{"namespace": "default", "name": "db-" + x, "node": node, "owner": "StatefulSet", "pdb": True}]
               if pdb else []))


def remediate(work, name, hosts, extra=None, check=False, whole=False):
    """One remediation of ``hosts`` ({host: its own vars}): rc, output and the report's nodes by host (None
    when no report was written); ``whole``: and the report itself. ``check``: remediate --check --diff."""
    base = {
        "ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
        "nodefix_audit_checks": ["kernel"],
        "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}},
        "nodefix_report_dir": str(work / "reports"), "nodefix_drain_timeout": 20,
    }
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": dict((h, dict(base, **v)) for h, v in hosts.items())}}))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
            "-e", "nodefix_report_dir=%s" % (work / "reports"),  # the report play runs on localhost
            "-e", json.dumps(extra or {}),
            os.path.join(ROOT, "playbooks", "remediate.yml")] + (["--check", "--diff"] if check else [])
    rc, out = run_logged("rollout-double-%s" % name, argv, timeout=600)
    path = work / "reports" / "remediate" / "report.json"
    report = json.loads(path.read_text()) if path.exists() else None
    nodes = dict((n["host"], n) for n in report["nodes"]) if report else None
    return (rc, out, nodes, report) if whole else (rc, out, nodes)


# the dry run's cases (the module's docstring): dry-a's pods in its own double, dry-b's detector and role options
DRY_PODS = [
    {"namespace": "default", "name": "web-1", "node": "dry-a", "owner": "ReplicaSet"},
    {"namespace": "kube-system", "name": "proxy-a", "node": "dry-a", "owner": "DaemonSet"},
]


@pytest.fixture(scope="module")
def dry(module_doubles, tmp_path_factory):
    """The dry-run cases' double and their host variables (dry-b's sysctl.d file: the test's own, not there yet),
    shared by the --check run and then the main run: (double, {host: its vars}, the sysctl.d file)."""
    double = module_doubles("dry", ["dry-a", "dry-b"], [dict(p) for p in DRY_PODS])
    sysctl = tmp_path_factory.mktemp("dry-files") / "sysctl.d" / "60-nodefix-pid-max.conf"
    sysctl.parent.mkdir()
    sysctl = str(sysctl)
    hosts = {
        "dry-a": {"nodefix_kubeconfig": double.kubeconfig},
        "dry-b": {"nodefix_audit_checks": ["pids"], "pids_sysctl_file": sysctl, "pids_apply_live": False,
                  "nodefix_audit_options": {"pids": {"threads_max_min": 1073741823, "sysctl_file": sysctl}}},
    }
    return double, hosts, sysctl


@pytest.fixture(scope="module")
def check_run(dry, tmp_path_factory):
    """The one remediate --check --diff: the require-drain case (node-a: a fake old runc makes the audit ask for
    the containerd role, which restarts containerd; no kubeconfig) and the dry-run cases (dry-a, dry-b), in one
    batch, none stopping the others. Their double's state and whether dry-b's sysctl.d file exists are read
    right after it (the main run changes both later): a dict of rc, out, nodes, report, state, sysctl_exists."""
    double, dry_hosts, sysctl = dry
    work = tmp_path_factory.mktemp("check")
    fake = work / "bin" / "runc"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "runc version 1.0.0-rc4"\necho "spec: 1.0.0"\n')
    fake.chmod(0o755)
    # the containerd detector owns runc.cpu_quota_rounding_bug (fixed by the containerd role)
    hosts = dict(dry_hosts, **{"node-a": {
        "nodefix_audit_checks": ["containerd"],
        "nodefix_audit_options": {"containerd": {"runc_binary": str(fake), "check_socket": False}},
        "nodefix_require_drain": True}})
    # two of the three would be disrupted (dry-a's drain, node-a's restart): a storm of two nodes stops the run
    # before any node; three nodes make one (dry-b's, alone, was one disruption of two nodes: under the minimum)
    extra = {"nodefix_run": "check", "nodefix_serial": len(hosts), "nodefix_max_fail_percentage": 100,
             "nodefix_storm_min_nodes": 3}
    rc, out, nodes, report = remediate(work, "check", hosts, extra, check=True, whole=True)
    return {"rc": rc, "out": out, "nodes": nodes, "report": report, "state": double.state(),
            "sysctl_exists": os.path.exists(sysctl), "reports": work / "reports" / "remediate"}


@pytest.fixture(scope="module")
def main_run(module_doubles, tmp_path_factory, dry, check_run):
    """The one remediation of every MAIN case and of the dry-run cases (after their --check run, on their own
    double): (double, rc, output, report nodes by host, the report)."""
    double = module_doubles("main", dict((n, {"unschedulable": c}) for n, (c, _f, _p) in MAIN.items()),
                            [p for n, (_c, _f, pdb) in MAIN.items() for p in pods_of(n, pdb)])
    hosts = {}
    for node, (_cordoned, fail, pdb) in MAIN.items():
        hosts[node] = {"nodefix_kubeconfig": double.kubeconfig}
        if fail:
            hosts[node]["kernel_dying_memcgs_threshold"] = -1
        if pdb:
            hosts[node]["nodefix_drain_timeout"] = 3
    # every case in one batch and none stopping the others (a failed node would stop the next batches under
    # the default limit): each is judged on its own; the storm breaker (every node needs a drain here) is
    # overridden, so its audit still runs and is the audit before, as in a one-node run
    hosts.update(dry[1])
    extra = {"nodefix_run": RUN, "nodefix_serial": len(hosts), "nodefix_max_fail_percentage": 100,
             "nodefix_storm_override": True}
    rc, out, nodes, report = remediate(tmp_path_factory.mktemp("main"), "main", hosts, extra, whole=True)
    assert nodes is not None and sorted(nodes) == sorted(hosts), out[-3000:]
    return double, rc, out, nodes, report


@pytest.fixture(scope="module")
def main(main_run):
    """The main remediation: (MAIN's double, rc, output, report nodes by host)."""
    return main_run[:4]


@pytest.fixture(scope="module")
def kubectl_reads(main):
    """The Events and the Nodes of the main run, read through kubernetes.core.k8s_info as kubectl reads them
    (`kubectl get events --field-selector involvedObject.kind=Node`): (events by node, Nodes by name)."""
    double = main[0]
    events = read_k8s("events-main", double.kubeconfig, kind="Event", namespace="default",
                      field_selectors=["involvedObject.kind=Node"])
    by_node = {}
    for e in events:
        by_node.setdefault(e["involvedObject"]["name"], []).append(e)
    nodes = read_k8s("nodes-main", double.kubeconfig, kind="Node")
    return by_node, dict((n["metadata"]["name"], n) for n in nodes)


def patches(double, node):
    """The cordon/uncordon PATCHes (spec.unschedulable) of ``node``, in order; the annotation's PATCH is
    metadata only."""
    return [e["body"]["spec"]["unschedulable"] for e in double.state()["log"]
            if e["method"] == "PATCH" and e["path"] == "/api/v1/nodes/%s" % node and "spec" in e["body"]]


def recap_failed(out, host):
    """The recap's failed= count of ``host``: whether Ansible failed that node (the run's exit code is every
    node's)."""
    (line,) = [x for x in out.split("PLAY RECAP", 1)[1].splitlines() if re.match(r"^%s\s+:\s+ok=" % re.escape(host), x)]
    return int(re.search(r"failed=(\d+)", line).group(1))


def task_hosts(out, prefix):
    """The hosts named in the results of the tasks whose name starts with ``prefix`` ("ok: [node-a]")."""
    hosts = set()
    for section in out.split("\nTASK [")[1:]:
        if section.startswith(prefix):
            hosts.update(re.findall(r"^\w+: \[([^\]\s]+)", section, re.M))
    return hosts


def test_the_run_exits_non_zero_when_a_node_failed_and_only_those_nodes_fail(main):
    """The exit code is the run's (any failed node); which node failed is each one's own recap line."""
    _double, rc, out, _nodes = main
    assert rc != 0, out[-3000:]
    failed = sorted(n for n in list(MAIN) + ["dry-a", "dry-b"] if recap_failed(out, n) > 0)
    assert failed == ["node-d", "node-f"], out.split("PLAY RECAP", 1)[1]


@pytest.mark.parametrize("node", ["node-a", "node-f"], ids=["success", "failed-remediation"])
def test_node_uncordoned_before_is_drained_and_given_back(main, node):
    """Given back when verified; a failed remediation is not verified: the node stays cordoned, and
    nodefix.k8s/held names the reason and the run (issue 53 item 6; before, it was uncordoned)."""
    double, _rc, out, nodes = main
    fail = MAIN[node][1]
    assert (recap_failed(out, node) > 0) == fail, out[-3000:]
    assert nodes[node]["remediation"]["status"] == ("failed" if fail else "ok"), nodes[node]
    st = double.state()
    assert st["nodes"][node]["unschedulable"] is fail
    # cordoned (with nodefix.k8s/cordoned-by, in the same PATCH) by the drain; uncordoned after unless held
    assert patches(double, node) == ([True] if fail else [True, False])
    cordon = [e["body"] for e in st["log"] if e["method"] == "PATCH" and e["path"] == "/api/v1/nodes/%s" % node
              and "spec" in e["body"]][0]
    assert json.loads(cordon["metadata"]["annotations"]["nodefix.k8s/cordoned-by"])["run"] == RUN
    notes = st["nodes"][node].get("annotations", {})
    assert "nodefix.k8s/cordoned-by" not in notes   # removed when given back, and when held
    if fail:
        held = json.loads(notes["nodefix.k8s/held"])
        assert held["run"] == RUN and held["reason"].startswith("remediation failed: "), held
        # the rollout's step line, as AWX's job output shows it (nodefix.k8s.rollout prints one a step)
        assert re.search(r"^%s \| give_back +held .*nodefix\.k8s/held" % node, out, re.M), out[-3000:]
    else:
        assert "nodefix.k8s/held" not in notes
    x = node.split("-", 1)[1]
    assert [p["name"] for p in st["pods"] if p["node"] == node] == ["proxy-" + x]  # drained (the DaemonSet pod stays)


def test_node_cordoned_before_stays_cordoned(main):
    double, _rc, out, _nodes = main
    node = "node-c"
    assert (recap_failed(out, node) > 0) == MAIN[node][1], out[-3000:]
    assert double.state()["nodes"][node]["unschedulable"] is True
    assert False not in patches(double, node)  # never an uncordon
    assert re.search(r"^%s \| give_back +skipped .*cordoned before this run: it stays cordoned" % node, out, re.M)


@pytest.mark.parametrize("node", ["node-a", "node-f"], ids=["verified", "failed"])
def test_the_run_leaves_its_story_on_the_node_as_kubectl_reads_it(main, kubectl_reads, node):
    """Events on the Node object (events.k8s.io/v1, read as core/v1 Events the way `kubectl get events
    --field-selector involvedObject.kind=Node` reads them, through kubernetes.core), in the order the steps
    happened, each with the run's id; and the nodefix.k8s/last-remediation annotation."""
    double, _rc, out, _nodes = main
    fail = MAIN[node][1]
    assert (recap_failed(out, node) > 0) == fail, out[-3000:]
    events = sorted(kubectl_reads[0].get(node, []), key=lambda e: e["eventTime"])
    # the kernel role only reports: it ran (FixApplied) when the run succeeded; after the failure it is not
    # named, since nothing it changed shows in the audits
    # a failed remediation is not verified: the node stays cordoned (issue 53 item 6)
    steps = (["Drained", "RemediationFailed", "LeftCordonedUnverified"] if fail
             else ["Drained", "FixApplied", "FindingsStillOpen", "Uncordoned"])
    assert [e["reason"] for e in events] == ["FindingsDetected", "EvidenceKept"] + steps, events
    assert all(e["message"].startswith("run %s: " % RUN) for e in events), events
    assert all(e["source"]["component"] == "nodefix.k8s" and e["involvedObject"]["kind"] == "Node" for e in events)
    assert [e["type"] for e in events] == ["Warning", "Normal"] + (
        ["Normal", "Warning", "Warning"] if fail else ["Normal", "Normal", "Warning", "Normal"])
    # the evidence read before the drain is where its Event says, bounded, with the node's findings
    path = events[1]["message"].split("kept before the drain: ", 1)[1].split(" (", 1)[0]
    kept = json.loads(open(path).read())
    assert os.path.getsize(path) < 5 * 1024 * 1024 and "kernel.no_oom_reaper" in [f["id"] for f in kept["findings"]]
    assert set(kept["sources"]) | set(m["source"] for m in kept["missing"]) >= {"journal-kubelet", "journal-containerd",
                                                                                "kernel", "failed-units"}
    assert "plan: roles kernel, drain" in events[0]["message"]
    summary = json.loads(kubectl_reads[1][node]["metadata"]["annotations"]["nodefix.k8s/last-remediation"])
    assert summary["run"] == RUN and summary["outcome"] == ("failed" if fail else "ok")
    assert "kernel.no_oom_reaper" in summary["stillOpen"]   # a pretended release: the role only reports
    assert double.state()["nodes"][node]["unschedulable"] is fail   # the annotation's PATCH is not a cordon


def test_failed_drain_restores_exactly_the_state_before(main):
    """A drain a PodDisruptionBudget stops after web-<x> was evicted is a failed drain (issue 53 item 5; before,
    it was "left as it was" and the run exited 0): nothing fixed, the schedulability given back as it was."""
    double, _rc, out, nodes = main
    node = "node-d"
    cordoned, x = MAIN[node][0], node.split("-", 1)[1]
    assert recap_failed(out, node) > 0, out[-3000:]  # the node is failed (after the report)
    assert nodes[node]["remediation"]["status"] == "failed", nodes[node]
    assert "drain failed: a PodDisruptionBudget refused an eviction until the drain timeout; evicted: " \
           "default/web-%s; blocked: default/db-%s (refused by a PodDisruptionBudget)" % (x, x) in out, out[-3000:]
    st = double.state()
    assert st["nodes"][node]["unschedulable"] is cordoned
    assert "nodefix.k8s/cordoned-by" not in st["nodes"][node].get("annotations", {})
    kernel = task_hosts(out, "nodefix.k8s.kernel :")
    assert "node-a" in kernel and node not in kernel, kernel  # no fix ran here (node-a's did)


@pytest.fixture(scope="module")
def without_kubeconfig(tmp_path_factory):
    """One remediation of two nodes, neither with a kubeconfig (nothing drained, no Event: play-wide)."""
    return remediate(tmp_path_factory.mktemp("nokube"), "no-kubeconfig", {"node-a": {}, "node-b": {}})


def test_a_run_without_a_kubeconfig_writes_no_event(without_kubeconfig):
    rc, out, _nodes = without_kubeconfig
    # the rollout ran (its lines), without an API server: no claim, no cordon, no Event
    assert rc == 0 and re.search(r"^node-a \| fix +done", out, re.M), out[-3000:]
    assert not re.search(r"^node-[ab] \| (claim|cordon|start_event|end_event) ", out, re.M), out[-3000:]


def test_without_kubeconfig_it_says_so_once(without_kubeconfig):
    rc, out, _nodes = without_kubeconfig
    assert rc == 0, out[-3000:]
    assert out.count("WITHOUT draining their pods") == 1 and "node-a, node-b" in out


def test_require_drain_refuses_to_restart_an_undrained_node(check_run):
    """A fake old runc makes the audit ask for the containerd role (it restarts containerd): refused.

    Run in check mode as a second guard: even a broken refusal could not change the test machine.
    """
    rc, out = check_run["rc"], check_run["out"]
    assert rc != 0 and recap_failed(out, "node-a") > 0, out[-3000:]   # node-a's failure (the dry-run nodes pass)
    assert check_run["nodes"]["node-a"]["remediation"]["status"] == "failed", check_run["nodes"]["node-a"]
    assert "refused: nodefix_require_drain is true and this node was not drained" in out
    assert "nodefix.k8s.containerd :" not in out  # not one task of the containerd role ran


# ---- the dry run's plan (issue 55 item 3), and the real run doing what it listed ---------------------------

def task_result(out, prefix, host):
    """The output of ``host``'s results ("ok: [dry-a] => ..." and what follows, up to the next result) in the
    tasks whose name starts with ``prefix``, one string a result."""
    shown = []
    for section in out.split("\nTASK [")[1:]:
        if section.startswith(prefix):
            for result in re.split(r"\n(?=\w+: \[)", section)[1:]:
                if re.match(r"^\w+: \[%s[\] ]" % re.escape(host), result):
                    shown.append(result)
    return shown


def test_the_dry_run_shows_each_nodes_plan_and_changes_nothing(check_run, dry):
    """remediate --check --diff shows each node's plan on the console and in every report, and changes nothing."""
    _double, _hosts, sysctl = dry
    out = check_run["out"]
    assert recap_failed(out, "dry-a") == 0 and recap_failed(out, "dry-b") == 0, out[-3000:]

    # check mode changed nothing: no cordon, no eviction, no lease, not even the trail (node_events posts nothing in
    # check mode) - the one request is the drain preflight's question (SelfSubjectAccessReviews change nothing)
    st = check_run["state"]
    assert [e for e in st["log"] if "/selfsubjectaccessreviews" not in e["path"]] == [], st["log"]
    assert st["nodes"]["dry-a"]["unschedulable"] is False and len(st["pods"]) == 2
    assert not check_run["sysctl_exists"]

    # the console: one "Plan for this node" output a node
    a, b = (task_result(out, "Plan for this node (dry run)]", host) for host in ("dry-a", "dry-b"))
    assert len(a) == 1 and len(b) == 1, out[-3000:]
    a, b = a[0], b[0]
    assert "DRY RUN plan for dry-a: would fix" in a and "DRY RUN plan for dry-b: would fix" in b
    assert "drain (cordon, then uncordon once verified); 1 pod(s) to evict: default/web-1" in a, a
    # (the console's YAML callback may wrap a long line: the words, not the line)
    assert "kernel.pid_max (unset) -> 4194304" in b and "no drain (no nodefix_kubeconfig)" in b, b
    assert "gate storm breaker: go:" in a, a

    # the reports: DRY RUN and each node's plan in JSON, Markdown and HTML
    report, reports = check_run["report"], check_run["reports"]
    assert report["run"]["check_mode"] is True
    plans = dict((n["host"], n["plan"]) for n in report["nodes"])
    assert plans["dry-a"]["roles"] == ["kernel"] and plans["dry-a"]["drain"]["pods"] == ["default/web-1"]
    assert plans["dry-b"]["roles"] == ["pids"] and plans["dry-b"]["drain"]["would"] is False
    assert plans["dry-b"]["changes"] == [{"role": "pids", "file": sysctl, "key": "kernel.pid_max",
                                          "before": "(unset)", "after": "4194304"}]
    assert [g["gate"] for g in plans["dry-a"]["gates"]] == ["storm breaker"]
    md = (reports / "report.md").read_text()
    assert "**DRY RUN (check mode)" in md and "## Plan (dry run)" in md and "### dry-b" in md
    assert "- change %s: kernel.pid_max (unset) -> 4194304" % sysctl in md
    html = (reports / "report.html").read_text().replace("<wbr>", "")
    assert "DRY RUN (check mode)" in html and "Plan (dry run)</h2>" in html and "default/web-1" in html


def test_the_real_run_does_what_the_dry_run_listed(check_run, dry, main_run):
    """The main run, on the double the --check run left as it was, does what the plan listed, and nothing it did
    not."""
    double, _hosts, sysctl = dry
    _main_double, _rc, out, nodes, report = main_run
    plans = dict((n["host"], n["plan"]) for n in check_run["report"]["nodes"])
    assert recap_failed(out, "dry-a") == 0 and recap_failed(out, "dry-b") == 0, out[-3000:]
    st = double.state()
    evicted = [e["path"].split("/pods/")[1].split("/")[0] for e in st["log"]
               if e["method"] == "POST" and e["path"].endswith("/eviction")]
    assert ["default/" + name for name in evicted] == plans["dry-a"]["drain"]["pods"]
    cordons = [e["body"]["spec"]["unschedulable"] for e in st["log"] if e["method"] == "PATCH" and "spec" in e["body"]]
    assert cordons == [True, False]   # the planned "cordon, then uncordon once verified"
    with open(sysctl) as fh:
        written = dict(line.split("=", 1) for line in fh.read().split() if "=" in line)
    assert [(c["key"], c["after"]) for c in plans["dry-b"]["changes"]] == list(written.items())
    assert all("plan" not in n for n in nodes.values()) and report["run"]["check_mode"] is False
    assert nodes["dry-a"]["remediation"]["roles"] == ["nodefix.k8s.kernel"]
    assert nodes["dry-b"]["remediation"]["roles"] == ["nodefix.k8s.pids"]
    assert "Plan for this node" not in out


# ---- gVisor: evict exactly the pod whose sandbox is oversized -----------------------------------------

TWINS = [
    {"namespace": "shop", "name": "cart-a", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "cart"},
     "replace": True},
    {"namespace": "shop", "name": "cart-b", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "cart"}},
    {"namespace": "shop", "name": "cart-c", "node": "node-b", "owner": "ReplicaSet", "labels": {"app": "cart"}},
]


# the eviction cases: host -> (its double's pods, the UIDs to recreate (names, or a UID no pod has))
GVISOR = {
    "g-evict": (TWINS, ["cart-a"]),
    "g-pdb": ([dict(TWINS[0], pdb=True)] + TWINS[1:], ["cart-a"]),
    "g-replaced": (TWINS, ["0d6a5c38-0000-4000-8000-000000000000"]),
    "g-no-python": (TWINS, ["cart-a"]),
}
# a case's own role variables: g-no-python's eviction cannot run at all (no such interpreter on the delegate)
GVISOR_VARS = {"g-no-python": {"gvisor_evict_python": "/nonexistent/python3"}}
# a case whose kubeconfig names an API server nobody listens on (port 1; no double): host -> the UIDs to recreate
UNREACHABLE = {"g-unreachable": ["0d6a5c38-0000-4000-8000-00000000beef", "0d6a5c38-0000-4000-8000-00000000cafe"]}
UNREACHABLE_TOKEN = "g-unreachable-token-61"
# nodefix.k8s.pod_eviction alone: host -> (its double's pods, name, namespace, wait_timeout)
POD_EVICTION = {
    "p-no-such-pod": (TWINS, "cart-z", "shop", 0),
    "p-wrong-namespace": (TWINS, "cart-a", "other", 0),
    "p-refused": ([dict(TWINS[0], pdb=True)] + TWINS[1:], "cart-a", "shop", 3),
}


def uid_of(double, name):
    return [p["uid"] for p in double.state()["pods"] if p["name"] == name][0]


def evict(work, name, doubles, gvisor, pod_eviction=None, check=False, kubeconfigs=None):
    """tests/integration/playbooks/gvisor_evict.yml, one host a case, each its own double: rc, output and
    {host: the results it handed back (None when it wrote none)}. ``gvisor``: {host: UIDs to recreate};
    ``pod_eviction``: {host: (name, namespace, wait_timeout)}; ``kubeconfigs``: {host: its kubeconfig} for a host
    without a double."""
    base = {"ansible_connection": "local", "ansible_python_interpreter": PY}
    kubeconfigs = dict(kubeconfigs or {})
    groups = {"gvisor": {"hosts": dict((h, dict(base, gvisor_pods_to_recreate=uids, gvisor_node_name="node-a",
                                                gvisor_kubeconfig=kubeconfigs.get(h) or doubles[h].kubeconfig,
                                                results_file=str(work / ("%s.json" % h)), **GVISOR_VARS.get(h, {})))
                                       for h, uids in gvisor.items())},
              "pod_eviction": {"hosts": dict((h, dict(base, case_kubeconfig=doubles[h].kubeconfig, case_pod=pod,
                                                      case_namespace=ns, case_wait_timeout=timeout,
                                                      results_file=str(work / ("%s.json" % h))))
                                             for h, (pod, ns, timeout) in (pod_eviction or {}).items())}}
    inventory = work / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": groups}}))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
            os.path.join(ROOT, "tests", "integration", "playbooks", "gvisor_evict.yml")] + (["--check"] if check else [])
    rc, out = run_logged("gvisor-evict-%s" % name, argv, timeout=600)
    results = dict((h, json.loads((work / ("%s.json" % h)).read_text()) if (work / ("%s.json" % h)).exists() else None)
                   for h in list(gvisor) + list(pod_eviction or {}))
    return rc, out, results


@pytest.fixture(scope="module")
def evictions(module_doubles, tmp_path_factory):
    """The one run of every eviction case: (rc, output, {host: (its double, its results)}, {host: the UIDs
    it was given})."""
    doubles = dict((h, module_doubles(h, ["node-a", "node-b"], [dict(p) for p in pods]))
                   for h, (pods, *_rest) in list(GVISOR.items()) + list(POD_EVICTION.items()))
    gvisor = dict((h, [uid_of(doubles[h], u) if u.startswith("cart-") else u for u in uids])
                  for h, (_pods, uids) in GVISOR.items())
    gvisor.update(UNREACHABLE)
    work = tmp_path_factory.mktemp("evictions")
    unreachable = work / "unreachable-kubeconfig"
    unreachable.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": UNREACHABLE_TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    rc, out, results = evict(work, "cases", doubles, gvisor,
                             dict((h, rest) for h, (_pods, *rest) in POD_EVICTION.items()),
                             kubeconfigs=dict((h, str(unreachable)) for h in UNREACHABLE))
    return rc, out, dict((h, (doubles.get(h), results[h])) for h in list(doubles) + list(UNREACHABLE)), gvisor


def test_the_eviction_run_goes_on_past_a_refused_eviction(evictions):
    rc, out, results, _uids = evictions
    assert rc == 0, out[-3000:]   # a refusal is reported per pod (the role) or handed back (the module's case)
    assert all(r is not None for _d, r in results.values()), results


def test_only_the_named_pod_is_evicted_and_the_node_is_not_cordoned(evictions):
    _rc, out, results, uids = evictions
    double, result = results["g-evict"]
    st = double.state()
    names = sorted(p["name"] for p in st["pods"])
    assert names == ["cart-a-r1", "cart-b", "cart-c"]  # cart-b has the same labels on the same node: kept
    assert [e["path"] for e in st["log"] if e["method"] == "POST"] == ["/api/v1/namespaces/shop/pods/cart-a/eviction"]
    assert not [e for e in st["log"] if e["method"] == "PATCH"]  # never cordoned
    assert result == [{"uid": uids["g-evict"][0], "pod": "shop/cart-a", "result": "evicted, replacement Ready"}]
    assert "cart-b" not in out and '"env"' not in out  # pod listings are not logged


def test_check_mode_evicts_nothing(apiserver_double, tmp_path):
    double = apiserver_double(["node-a", "node-b"], [dict(p) for p in TWINS])
    rc, out, results = evict(tmp_path, "check", {"g-check": double}, {"g-check": [uid_of(double, "cart-a")]}, check=True)
    assert rc == 0, out[-3000:]
    assert not [e for e in double.state()["log"] if e["method"] in ("POST", "PATCH", "DELETE")]


def test_pdb_refusal_is_reported_and_the_pod_stays(evictions):
    double, result = evictions[2]["g-pdb"]
    assert result[0]["result"] == "failed" and "PodDisruptionBudget" in result[0]["reason"]
    assert "cart-a" in [p["name"] for p in double.state()["pods"]]
    assert len([e for e in double.state()["log"] if e.get("refused") == "DisruptionBudget"]) >= 2  # retried


def test_a_replaced_pod_is_not_evicted_again(evictions):
    """The UID precondition: a pod of that name but another UID is left alone."""
    double, result = evictions[2]["g-replaced"]
    assert result[0]["result"] == "skipped" and "no pod with this uid" in result[0]["reason"]
    assert not [e for e in double.state()["log"] if e["method"] == "POST"]


def test_an_api_server_that_cannot_be_reached_leaves_every_pod_not_attempted(evictions):
    """The listing fails (nothing listens): every pod is reported "not attempted" with the reason, the token never
    quoted, and the run goes on (test_the_eviction_run_goes_on_past_a_refused_eviction)."""
    _rc, out, results, uids = evictions
    _none, result = results["g-unreachable"]
    assert [(r["uid"], r["result"]) for r in result] == [(u, "not attempted") for u in uids["g-unreachable"]], result
    assert result[0]["reason"].startswith("cannot list the pods of node node-a: the API server could not be reached")
    assert "Connection refused" in result[0]["reason"], result
    assert UNREACHABLE_TOKEN not in out and UNREACHABLE_TOKEN not in json.dumps(result)


def test_an_eviction_module_that_cannot_run_leaves_every_pod_not_attempted_and_the_run_goes_on(evictions):
    """The role's rescue: the module itself failed (no such interpreter for gvisor_evict_python) - every pod is
    "not attempted" with the reason, nothing was sent, and the run went on."""
    _rc, _out, results, uids = evictions
    double, result = results["g-no-python"]
    assert [(r["uid"], r["result"]) for r in result] == [(uids["g-no-python"][0], "not attempted")], result
    assert result[0]["reason"].startswith("the eviction did not run on localhost: "), result
    assert not [e for e in double.state()["log"] if e["method"] in ("POST", "PATCH", "DELETE")]


# ---- pod_eviction alone against the double --------------------------------------------------------

@pytest.mark.parametrize("host", ["p-no-such-pod", "p-wrong-namespace"], ids=["no-such-pod", "wrong-namespace"])
def test_pod_eviction_of_a_missing_pod_touches_nothing(evictions, host):
    double, result = evictions[2][host]
    assert not result.get("failed") and result["result"] == "gone" and result["changed"] is False, result
    st = double.state()
    assert len(st["pods"]) == 3 and not [e for e in st["log"] if e["method"] in ("POST", "PATCH", "DELETE")]


def test_pod_eviction_refused_until_the_timeout_fails_naming_the_pod(evictions):
    double, result = evictions[2]["p-refused"]
    assert result.get("failed") is True, result
    assert "eviction of pod shop/cart-a refused by a PodDisruptionBudget" in result["msg"], result
    st = double.state()
    assert len(st["pods"]) == 3
    assert len([e for e in st["log"] if e.get("refused") == "DisruptionBudget"]) >= 2  # retried
    assert not [e for e in st["log"] if e["method"] == "PATCH"]
