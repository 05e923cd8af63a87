# SPDX-License-Identifier: GPL-3.0-or-later
"""The storm breaker (playbooks/tasks/storm.yml): before the rolling play touches a node, every target is
audited and planned; when more than nodefix_storm_percent of the fleet is unavailable already (NotReady,
Ready Unknown or cordoned in the API server, unreachable from the controller) or needs a drain, reboot or
restart, the rollout stops - unless nodefix_storm_override - in one run and across slices, and the merged
report of the slices keeps the verdict.

Against lab/apiserver-double (a TEST DOUBLE of kube-apiserver, as test_13): a drain is the disruptive
action, seen in the double's log as the cordon PATCH. The "nodes" are this machine over a local
connection, audited read-only with only the kernel detector: a pretended old release on the broken ones
(the fix role, nodefix.k8s.kernel, only reads and reports), a current one and thresholds nothing reaches on
the others (no finding, so no drain). Nothing on the test machine changes.
"""

import json
import os
import socket

import pytest

from conftest import ROOT, ApiServerDouble, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]
OLD = {"kernel": {"release": "4.4.0-1069-aws"}}
CLEAN = {"kernel": {"release": "6.12.0-1-amd64", "dying_memcgs_threshold": 100000000, "memory_stat_slow_ms": 100000}}


def closed_port():
    """A port on 127.0.0.1 nothing listens on: ssh to it is refused at once (an unreachable node)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def remediate(tmp_path, name, double, hosts, broken, extra=None, unreachable=(), host_extra=None):
    host_vars = {}
    for host in hosts:
        host_vars[host] = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
                           "nodefix_audit_checks": ["kernel"], "nodefix_audit_options": OLD if host in broken else CLEAN,
                           "nodefix_kubeconfig": double.kubeconfig, "nodefix_drain_timeout": 20}
        host_vars[host].update((host_extra or {}).get(host) or {})
        if host in unreachable:
            host_vars[host].update({"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": closed_port(),
                                    "ansible_ssh_common_args": "-o BatchMode=yes -o ConnectTimeout=5"})
    inventory = tmp_path / ("%s.json" % name)
    inventory.write_text(json.dumps({"all": {"hosts": host_vars}}))
    # the trail and the evidence have their own tests (test_13, the lab): off here, fewer round trips
    extra = dict({"nodefix_report_dir": str(tmp_path / "reports"), "nodefix_events": False, "nodefix_evidence": False},
                 **(extra or {}))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e", json.dumps(extra)]
    argv += [os.path.join(ROOT, "playbooks", "remediate.yml")]
    return run_logged("storm-%s" % name, argv, timeout=600)


def cordoned(double, log=None):
    """The nodes the rollout cordoned (the drain's first PATCH), in order (in ``log``: the double's log as it was)."""
    return [e["path"].rsplit("/", 1)[-1] for e in (double.state()["log"] if log is None else log)
            if e["method"] == "PATCH" and (e["body"].get("spec") or {}).get("unschedulable") is True]


def report(tmp_path, slice_name=None):
    sub = os.path.join("slices", slice_name) if slice_name else ""
    with open(os.path.join(str(tmp_path / "reports"), sub, "remediate", "report.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """ONE run over five targets (issue 56: the drain case and the reboot case were a run each; issue 62 step 8: the
    nodes already down were a run of their own): of the worker pool's 6 Nodes (nodefix_storm_node_selector), node-c is
    NotReady and node-d Ready Unknown in the API server and neither answers ssh, node-e answers neither (but is
    Ready), node-f - not a target - is cordoned by an operator; node-a and node-b need a drain (the kernel role's
    finding) and a reboot too - the kernel below the fleet's minimum, with kernel upgrades on for them (host
    variables): each would be drained and rebooted into a new kernel. node-g, NotReady in another pool, is not
    counted. 6 of 6 is a storm: nothing is planned on a node, nothing installed, nothing drained (the rollout never
    starts, so nothing here can reboot this machine). The double's log and the run's report are kept as they were
    after this run: {double, rc, out, log, report, markdown}."""
    tmp = tmp_path_factory.mktemp("storm-stop")
    workers = {"pool": "workers"}
    double = ApiServerDouble(tmp, {"node-a": {"labels": workers}, "node-b": {"labels": workers},
                                   "node-c": {"labels": workers, "ready": "False"},
                                   "node-d": {"labels": workers, "ready": "Unknown"}, "node-e": {"labels": workers},
                                   "node-f": {"labels": workers, "unschedulable": True},
                                   "node-g": {"labels": {"pool": "gpu"}, "ready": "False"}}, [])
    try:
        upgrade = {"nodefix_kernel_upgrade": True, "nodefix_kernel_min_release": "5.10"}
        rc, out = remediate(tmp, "stop", double, NODES, broken=("node-a", "node-b"),
                            unreachable=("node-c", "node-d", "node-e"),
                            extra={"nodefix_storm_node_selector": "pool=workers"},
                            host_extra={"node-a": upgrade, "node-b": upgrade})
        yield {"double": double, "rc": rc, "out": out, "log": double.state()["log"],
               "report": report(tmp), "markdown": (tmp / "reports" / "remediate" / "report.md").read_text()}
    finally:
        double.stop()


def test_nodes_to_drain_stop_the_rollout_before_the_first(stopped):
    rc, out = stopped["rc"], stopped["out"]
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert "2 need a drain, reboot or restart (drain 2, reboot 2), over nodefix_storm_percent (20%)" in said, said[-3000:]
    assert "stops before touching a node" in said
    assert cordoned(None, stopped["log"]) == [] and "TASK [Audit before]" not in out   # no node was touched
    nodes = {n["host"]: n for n in stopped["report"]["nodes"]}
    assert set(nodes) == set(NODES) and all(n["status"] == "not run" for n in nodes.values()), nodes
    assert all("storm breaker" in n["error"] for n in nodes.values())
    # the report says it first, with the findings on that share of the fleet
    storm = stopped["report"]["storm"]
    assert storm["stop"] and storm["disruptive"] == 2 and storm["size"] == 6
    assert "kernel.no_oom_reaper" in [w["id"] for w in storm["fleet_wide"]]
    assert stopped["markdown"].index("## Storm breaker") < stopped["markdown"].index("## Nodes")
    # the override proceeds: slice-b's run in test_the_breaker_holds_across_slices_early_and_the_merge_keeps_it
    # (issue 62 step 8: it was a run of its own here; the rule is test_storm.py's
    # test_the_override_proceeds_and_says_so)


def test_a_planted_finding_that_needs_a_reboot_stops_the_rollout_too(stopped):
    """node-a and node-b of the run above: the reboot they would need is counted and named, and nothing of the
    kernel upgrade ran."""
    rc, out = stopped["rc"], stopped["out"]
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert "(drain 2, reboot 2)" in said, said[-3000:]
    assert "kernel.below_minimum on 2 (33.3%)" in said
    assert cordoned(None, stopped["log"]) == [] and "TASK [Plan the kernel upgrade" not in out
    assert stopped["report"]["storm"]["disruptive"] == 2


def test_nodes_down_already_count_and_hold_the_rollout(stopped):
    """53.4: node-c, node-d and node-e of the run above are down or unreachable, node-f (not a target) cordoned: they
    count with the two to drain - 6 of 6. The old breaker counted only the targets it audited. node-g, NotReady in
    another pool, is not counted. Nothing is touched, and the run says what it counted."""
    rc, out = stopped["rc"], stopped["out"]
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert ("storm breaker: 6 of 6 node(s) (100%) are unavailable or would be disrupted: 4 unavailable (node-c: NotReady, "
            "unreachable from the controller; node-d: Ready Unknown, unreachable from the controller; node-e: unreachable "
            "from the controller; node-f: cordoned); 2 need a drain") in said, said[-3000:]
    assert "counted the 6 Node(s) the API server lists selected by pool=workers and every target" in said
    assert [e for e in stopped["log"] if e["method"] != "GET" and "selfsubjectaccessreviews" not in e["path"]] == []
    assert stopped["report"]["storm"]["share"] == 100


def test_the_breaker_holds_across_slices_early_and_the_merge_keeps_it(apiserver_double, tmp_path):
    """slice-a (1 of its 2 nodes to drain) judges first: the 3 hosts of nodefix_fleet_size (5) no slice has recorded
    yet are counted as possibly disrupted - 4 of 5 - and it stops before its first node (the old breaker let it drain
    node-a: 1 of 5, and one node is a repair). slice-b then sees every record: 2 of 5, a storm; the override lets
    slice-b proceed, saying so. The merged report keeps the storm section: slice-a stopped, with the fleet-wide
    finding (the old merge dropped it: nodes "not run", 0 findings)."""
    double = apiserver_double(NODES, [])
    shared = {"nodefix_slice": "slice-a", "nodefix_rollout": "rollout-1", "nodefix_fleet_size": 5,
              "nodefix_storm_slice_wait": 0}
    rc, out = remediate(tmp_path, "slice-a", double, ["node-a", "node-b"], broken=("node-a",), extra=shared)
    said = " ".join(out.split())
    assert rc != 0 and cordoned(double) == [], out[-3000:]
    assert ("storm breaker: 4 of 5 node(s) (80%) are unavailable or would be disrupted: 1 need a drain, reboot or restart "
            "(drain 1); 3 host(s) of nodefix_fleet_size (5) in no slice's record yet, counted as possibly disrupted "
            "(early, never late)") in said, said[-3000:]
    # slice-b sees every record: its node-c and slice-a's node-a, 2 of 5 - a storm (node-c alone, 1 of 5, is not);
    # the override lets it proceed (one run: issue 62 step 8 - without the override it was a run of its own that
    # touched nothing, with two nodes to drain; the stop is test_storm.py's
    # test_slices_add_up_and_the_fleet_size_counts_the_slices_not_yet_recorded)
    shared.update({"nodefix_slice": "slice-b", "nodefix_storm_override": True})
    rc, out = remediate(tmp_path, "slice-b-override", double, ["node-c", "node-d", "node-e"], broken=("node-c",),
                        extra=shared)
    assert rc == 0, out[-3000:]
    said = " ".join(out.split())
    assert "storm breaker: 2 of 5 node(s) (40%)" in said, said[-3000:]
    assert "proceeding: nodefix_storm_override is set" in said
    assert cordoned(double) == ["node-c"]     # the broken one drained (node-d and node-e need nothing)
    stored = json.loads((tmp_path / "reports" / "slices" / "slice-b" / "storm.json").read_text())
    assert stored["rollout"] == "rollout-1" and sorted(stored["nodes"]) == ["node-c", "node-d", "node-e"]
    assert sorted(stored["cluster"]["nodes"]) == NODES   # its view of the cluster, for the re-judging before each batch
    # the merge of the two slices' reports
    inventory = tmp_path / "all.json"
    inventory.write_text(json.dumps({"all": {"hosts": dict((h, {"ansible_connection": "local"}) for h in NODES)}}))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e",
            json.dumps({"nodefix_report_dir": str(tmp_path / "reports"), "nodefix_report_kind": "remediate"}),
            os.path.join(ROOT, "playbooks", "merge.yml")]
    rc, out = run_logged("storm-merge", argv, timeout=600)
    assert rc == 0, out[-3000:]
    merged = report(tmp_path)
    assert merged["storm"]["stop"] and merged["storm"]["msg"].startswith("slice slice-a: storm breaker: 4 of 5 node(s)")
    assert [(s["slice"], s["stop"]) for s in merged["storm"]["slices"]] == [("slice-a", True), ("slice-b", False)]
    assert "kernel.no_oom_reaper" in [w["id"] for w in merged["storm"]["fleet_wide"]]
    markdown = (tmp_path / "reports" / "remediate" / "report.md").read_text()
    assert markdown.index("## Storm breaker") < markdown.index("## Nodes")
