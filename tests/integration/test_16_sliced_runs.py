# SPDX-License-Identifier: GPL-3.0-or-later
"""Sliced runs merge into one fleet report (nodefix.k8s.merge).

Real runs of nodefix.k8s.audit over six inventory hosts, all this machine through the
local connection, read-only: only the kernel detector runs, each host judging a
pretended kernel release of its own (``nodefix_audit_options``), so the fleet has a mix
of findings and clean nodes and nothing on the test machine changes. The fleet is
audited once whole, then as three slices the way AWX job slicing splits an inventory
(each slice a run over its part: ``--limit``, or ansible-runner with one private data
dir and the slice's own inventory each), and nodefix.k8s.merge joins the slices'
reports. The merged report must be the single run's, but for the list of slices; a
slice that never ran must show as missing nodes that fail ``nodefix_fail_on``.
"""

import json
import os
import shutil
import sys

import ansible_runner
import pytest
import yaml

from conftest import ENV, ROOT, run_logged

PLAYBOOK = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
RELEASES = {  # kernel.no_oom_reaper (high), no_psi, ... on the old ones; nothing on the new
    "node-1": "4.4.0-1069-aws", "node-2": "6.1.0-26-amd64", "node-3": "4.15.0-213-generic",
    "node-4": "6.1.0-26-amd64", "node-5": "4.19.0-27-amd64", "node-6": "6.12.9-amd64",
}
SLICES = [["node-1", "node-4"], ["node-2", "node-5"], ["node-3", "node-6"]]  # AWX's round robin of 3


def host_vars(host):
    return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "nodefix_become": False,
            "nodefix_audit_checks": ["kernel"], "nodefix_audit_options": {"kernel": {"release": RELEASES[host]}}}


def inventory(path, hosts):
    path.write_text(json.dumps({"all": {"children": {"k8s_nodes": {"hosts": {h: host_vars(h) for h in hosts}}}}}))
    return str(path)


def playbook(name, inv, extra, *args):
    argv = [PLAYBOOK, "-i", inv, "-e", json.dumps(extra)] + list(args)
    return run_logged("sliced-%s" % name, argv, timeout=600)


def report(base, kind="audit"):
    with open(os.path.join(base, kind, "report.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("single")
    inv = inventory(tmp / "inventory.json", sorted(RELEASES))
    rc, out = playbook("single", inv, {"nodefix_report_dir": str(tmp / "reports"), "nodefix_targets": "k8s_nodes"},
                       "nodefix.k8s.audit")
    assert rc == 0, out[-3000:]
    model = report(tmp / "reports")
    assert model["totals"]["nodes"] == 6
    assert len({tuple(n["ids"]) for n in model["nodes"]}) > 1, "the pretended releases must make a mix of findings"
    return tmp / "reports"


def merge(inv, base, name, fail_on=None):
    extra = {"nodefix_report_dir": str(base), "nodefix_targets": "k8s_nodes"}
    if fail_on:
        extra["nodefix_fail_on"] = fail_on
    return playbook("merge-%s" % name, inv, extra, "nodefix.k8s.merge")


def assert_same_fleet_report(merged_base, single_base, slices):
    merged, one = report(merged_base), report(single_base)
    assert [s["nodes"] for s in merged.pop("slices")] == [len(s) for s in slices]
    # when and which run made each report differ (every report says them: audit_report's run)
    for key in ("generated", "run"):
        assert merged.pop(key) and one.pop(key)
    assert merged == one
    for name in ("junit.xml", "nodefix.prom"):
        with open(os.path.join(merged_base, "audit", name), encoding="utf-8") as a, \
                open(os.path.join(single_base, "audit", name), encoding="utf-8") as b:
            assert a.read() == b.read(), name


def runner_slice(tmp, base, name, hosts):
    """One slice through ansible-runner, the way AWX runs a job slice: its own private data dir with the slice's own
    inventory in it (not a --limit of the whole one), the shared report directory in its extravars."""
    pdd = tmp / ("pdd-%s" % name)
    (pdd / "inventory").mkdir(parents=True)
    (pdd / "env").mkdir()
    inventory(pdd / "inventory" / "hosts.json", hosts)
    (pdd / "env" / "extravars").write_text(yaml.safe_dump({
        "nodefix_report_dir": str(base), "nodefix_slice": name, "nodefix_targets": "k8s_nodes"}))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({
        k: ENV[k] for k in ("ANSIBLE_COLLECTIONS_PATH", "PATH", "ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP")}))
    run = ansible_runner.run(private_data_dir=str(pdd), playbook="nodefix.k8s.audit", quiet=True)
    assert run.rc == 0 and run.status == "successful", run.stdout.read()[-3000:]


@pytest.fixture(scope="module")
def limit_slices(tmp_path_factory):
    """The three slices into one report directory: the first two by --limit of the whole inventory, the third
    through ansible-runner with its own inventory (issue 62 step 8: the three runner slices were a fleet of their
    own, merged on their own - the same merge, three more runs). After the first two, a copy of that directory
    is kept: the fleet with its third slice never run (issue 56: the partial fleet's two slices ran again on
    their own). (the inventory, the full directory, the partial copy)."""
    tmp = tmp_path_factory.mktemp("limit")
    inv = inventory(tmp / "inventory.json", sorted(RELEASES))
    base, partial = tmp / "shared", tmp / "partial"
    for number, hosts in enumerate(SLICES, 1):
        if number == len(SLICES):
            shutil.copytree(str(base), str(partial))
            runner_slice(tmp, base, str(number), hosts)
        else:
            rc, out = playbook("limit-%d" % number, inv, {"nodefix_report_dir": str(base), "nodefix_slice": str(number),
                                                          "nodefix_targets": "k8s_nodes"},
                               "--limit", ",".join(hosts + ["localhost"]), "nodefix.k8s.audit")
            assert rc == 0, out[-3000:]
        assert [n["host"] for n in report(base / "slices" / str(number))["nodes"]] == sorted(hosts)
    assert not (base / "audit").exists(), "a slice wrote the fleet report"
    return inv, base, partial


def test_slices_by_limit_and_through_ansible_runner_merge_into_the_single_run_report(single, limit_slices):
    inv, base, _partial = limit_slices
    rc, out = merge(inv, base, "limit", fail_on="critical")
    assert rc == 0, out[-3000:]
    assert_same_fleet_report(base, single, SLICES)
    assert "Merged from 3 slice(s)" in (base / "audit" / "report.md").read_text()


def test_a_slice_that_never_ran_is_missing_nodes_and_fails_the_policy(single, limit_slices, tmp_path):
    inv, _full, partial = limit_slices
    base = tmp_path / "shared"      # slices 1 and 2 by --limit (the fixture's copy before slice 3 ran)
    shutil.copytree(str(partial), str(base))
    assert sorted(os.listdir(str(base / "slices"))) == ["1", "2"]
    rc, out = merge(inv, base, "partial", fail_on="critical")
    assert rc != 0, "a fleet with a slice missing passed nodefix_fail_on=critical"
    assert "not audited: node-3, node-6" in out
    merged = report(base)
    assert {n["host"]: n["status"] for n in merged["nodes"] if n["status"] == "missing"} == {
        "node-3": "missing", "node-6": "missing"}
    assert merged["totals"]["nodes"] == 6
    assert "node-3" in (base / "audit" / "report.html").read_text()
    # with no policy the merged report is still written and says so, and passes
    shutil.rmtree(base / "audit")
    rc, out = merge(inv, base, "partial-never")
    assert rc == 0 and report(base)["totals"]["nodes_in_error"] == 2, out[-3000:]


def test_a_bad_slice_name_writes_nothing(tmp_path):
    inv = inventory(tmp_path / "inventory.json", ["node-1"])
    rc, out = playbook("bad-name", inv, {"nodefix_report_dir": str(tmp_path / "shared"), "nodefix_slice": "../x",
                                         "nodefix_targets": "k8s_nodes"}, "nodefix.k8s.audit")
    assert rc != 0 and "nodefix_slice must be a plain name" in out
    assert not (tmp_path / "shared").exists() and not (tmp_path / "x").exists()


def test_a_limit_without_localhost_is_refused_before_any_node_is_audited(tmp_path):
    # the report play runs on localhost: a limit leaving it out would end the run with no report
    inv = inventory(tmp_path / "inventory.json", ["node-1", "node-2"])
    rc, out = playbook("no-localhost", inv, {"nodefix_report_dir": str(tmp_path / "shared"),
                                             "nodefix_targets": "k8s_nodes"}, "--limit", "node-1", "nodefix.k8s.audit")
    assert rc != 0 and "leaves out localhost" in out and "node-1,localhost" in out
    assert "Run every nodefix.k8s detector" not in out
