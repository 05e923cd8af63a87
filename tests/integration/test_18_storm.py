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


def remediate(tmp_path, name, double, hosts, broken, extra=None, unreachable=(), argv_extra=(), host_extra=None):
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
    argv += list(argv_extra) + [os.path.join(ROOT, "playbooks", "remediate.yml")]
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
    """ONE run over five nodes (issue 56: the drain case and the reboot case were a run each): node-a and node-d
    need a drain (the kernel role's finding), node-b and node-e a drain and a reboot too - the kernel below the
    fleet's minimum, with kernel upgrades on for those two (host variables): each would be drained and rebooted into
    a new kernel. 4 of 5 is a storm: nothing is planned on a node, nothing installed, nothing drained (the rollout
    never starts, so nothing here can reboot this machine). The double's log and the run's report are kept as they
    were after this run: {tmp, double, rc, out, log, report, markdown}."""
    tmp = tmp_path_factory.mktemp("storm-stop")
    double = ApiServerDouble(tmp, NODES, [])
    try:
        upgrade = {"nodefix_kernel_upgrade": True, "nodefix_kernel_min_release": "5.10"}
        rc, out = remediate(tmp, "stop", double, NODES, broken=("node-a", "node-b", "node-d", "node-e"),
                            host_extra={"node-b": upgrade, "node-e": upgrade})
        yield {"tmp": tmp, "double": double, "rc": rc, "out": out, "log": double.state()["log"],
               "report": report(tmp), "markdown": (tmp / "reports" / "remediate" / "report.md").read_text()}
    finally:
        double.stop()


def test_nodes_to_drain_stop_the_rollout_before_the_first_and_the_override_proceeds(stopped):
    rc, out = stopped["rc"], stopped["out"]
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert ("storm breaker: 4 of 5 node(s) (80%) need a drain, reboot or restart (drain 4, reboot 2), over "
            "nodefix_storm_percent (20%); fleet-wide: kernel.") in said, said[-3000:]
    assert "stops before touching a node" in said
    assert cordoned(None, stopped["log"]) == [] and "TASK [Audit before]" not in out   # no node was touched
    nodes = {n["host"]: n for n in stopped["report"]["nodes"]}
    assert set(nodes) == set(NODES) and all(n["status"] == "not run" for n in nodes.values()), nodes
    assert all("storm breaker" in n["error"] for n in nodes.values())
    # the report says it first, with the findings on that share of the fleet
    storm = stopped["report"]["storm"]
    assert storm["stop"] and storm["disruptive"] == 4 and storm["size"] == 5
    assert "kernel.no_oom_reaper" in [w["id"] for w in storm["fleet_wide"]]
    assert stopped["markdown"].index("## Storm breaker") < stopped["markdown"].index("## Nodes")
    # the override: a storm (2 of 5 to drain, no kernel upgrade) is remediated, the broken nodes drained (the clean
    # ones need nothing)
    tmp, double = stopped["tmp"], stopped["double"]
    rc, out = remediate(tmp, "override", double, NODES, broken=("node-a", "node-d"),
                        extra={"nodefix_storm_override": True})
    assert rc == 0, out[-3000:]
    said = " ".join(out.split())
    assert "storm breaker: 2 of 5 node(s) (40%) need a drain, reboot or restart (drain 2)" in said, said[-3000:]
    assert "proceeding: nodefix_storm_override is set" in said
    assert sorted(cordoned(double)) == ["node-a", "node-d"]


def test_a_planted_finding_that_needs_a_reboot_stops_the_rollout_too(stopped):
    """node-b and node-e of the run above: the reboot they would need is counted and named, and nothing of the
    kernel upgrade ran."""
    rc, out = stopped["rc"], stopped["out"]
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert "(drain 4, reboot 2)" in said, said[-3000:]
    assert "kernel.below_minimum on 2 (40%)" in said
    assert cordoned(None, stopped["log"]) == [] and "TASK [Plan the kernel upgrade" not in out
    assert stopped["report"]["storm"]["disruptive"] == 4


def test_nodes_down_already_count_and_hold_the_rollout(apiserver_double, tmp_path):
    """53.4: of the worker pool's 6 Nodes (nodefix_storm_node_selector), node-c is NotReady and node-d Ready Unknown
    in the API server and neither answers ssh, node-e answers neither (but is Ready), node-f - not a target - is
    cordoned by an operator, and node-b needs a drain: 5 of 6 down or disrupted. The old breaker counted only the
    two targets it audited (1 of 2, one node is a repair) and drained node-b. node-g, NotReady in another pool, is not
    counted. Nothing is touched, and the run says what it counted."""
    workers = {"pool": "workers"}
    double = apiserver_double({"node-a": {"labels": workers}, "node-b": {"labels": workers},
                               "node-c": {"labels": workers, "ready": "False"},
                               "node-d": {"labels": workers, "ready": "Unknown"}, "node-e": {"labels": workers},
                               "node-f": {"labels": workers, "unschedulable": True},
                               "node-g": {"labels": {"pool": "gpu"}, "ready": "False"}}, [])
    rc, out = remediate(tmp_path, "unhealthy", double, NODES, broken=("node-b",), unreachable=("node-c", "node-d", "node-e"),
                        extra={"nodefix_storm_node_selector": "pool=workers"})
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert ("storm breaker: 5 of 6 node(s) (83.3%) are unavailable or would be disrupted: 4 unavailable (node-c: NotReady, "
            "unreachable from the controller; node-d: Ready Unknown, unreachable from the controller; node-e: unreachable "
            "from the controller; node-f: cordoned); 1 need a drain, reboot or restart (drain 1), over "
            "nodefix_storm_percent (20%)") in said, said[-3000:]
    assert "counted the 6 Node(s) the API server lists selected by pool=workers and every target" in said
    assert cordoned(double) == [] and "TASK [Audit before]" not in out   # no node was touched
    assert [e for e in double.state()["log"] if e["method"] != "GET" and "selfsubjectaccessreviews" not in e["path"]] == []
    stopped = report(tmp_path)
    assert stopped["storm"]["stop"] and stopped["storm"]["size"] == 6 and stopped["storm"]["share"] == 83.33
    assert {n["host"]: n["status"] for n in stopped["nodes"]} == dict((h, "not run") for h in NODES)


def test_a_storm_percent_outside_0_100_is_refused_before_any_node(apiserver_double, tmp_path):
    """54.5: 100.5 (as -e key=value gives it: text) skipped the breaker without a word; now the run stops at once,
    naming the variable, before any node is audited and before any report is written."""
    double = apiserver_double(NODES, [])
    rc, out = remediate(tmp_path, "percent", double, ["node-a", "node-b"], broken=("node-a", "node-b"),
                        argv_extra=["-e", "nodefix_storm_percent=100.5"])
    assert rc != 0, out[-3000:]
    # the playbooks' preflight refuses it first, naming it (the storm play's own guard says the same below it)
    assert ('refused before any node: nodefix_storm_percent must be a whole number, got "100.5"') in " ".join(out.split()), \
        out[-3000:]
    assert "TASK [Audit every target" not in out and "TASK [Audit before]" not in out and cordoned(double) == []
    # the refused run's report says so (an older report never looks current), with no node in it
    refused = report(tmp_path)
    assert refused["run"]["status"] == "failed" and "nodefix_storm_percent" in refused["run"]["failure"]
    assert refused["nodes"] == []


def test_the_breaker_holds_across_slices_early_and_the_merge_keeps_it(apiserver_double, tmp_path):
    """slice-a (1 of its 2 nodes to drain) judges first: the 3 hosts of nodefix_fleet_size (5) no slice has recorded
    yet are counted as possibly disrupted - 4 of 5 - and it stops before its first node (the old breaker let it drain
    node-a: 1 of 5, and one node is a repair). slice-b then sees every record: 3 of 5, a storm - it touches nothing;
    the override lets slice-b proceed. The merged report keeps the storm section: slice-a stopped, with the fleet-wide
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
    shared["nodefix_slice"] = "slice-b"
    rc, out = remediate(tmp_path, "slice-b", double, ["node-c", "node-d", "node-e"], broken=("node-c", "node-d"),
                        extra=shared)
    assert rc != 0 and cordoned(double) == [], out[-3000:]
    assert "storm breaker: 3 of 5 node(s) (60%)" in " ".join(out.split())
    stored = json.loads((tmp_path / "reports" / "slices" / "slice-b" / "storm.json").read_text())
    assert stored["rollout"] == "rollout-1" and sorted(stored["nodes"]) == ["node-c", "node-d", "node-e"]
    assert sorted(stored["cluster"]["nodes"]) == NODES   # its view of the cluster, for the re-judging before each batch
    assert all(n["status"] == "not run" for n in report(tmp_path, "slice-b")["nodes"])
    shared["nodefix_storm_override"] = True
    rc, out = remediate(tmp_path, "slice-b-override", double, ["node-c", "node-d", "node-e"],
                        broken=("node-c", "node-d"), extra=shared)
    assert rc == 0, out[-3000:]
    assert sorted(cordoned(double)) == ["node-c", "node-d"]
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
