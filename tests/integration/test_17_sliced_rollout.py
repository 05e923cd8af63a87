# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet-wide failure limit of a remediation run in slices (playbooks/tasks/fleet_gate.yml).

Ansible's ``max_fail_percentage`` is per play, so per slice. Two slices of a four-node fleet
run one after the other, each with its own inventory (as AWX job slicing gives each slice),
sharing one report directory. The "nodes" are this machine over the local connection, audited
read-only with only the kernel detector and a pretended old release, so the one fix role is
nodefix.k8s.kernel, which only reads and reports: nothing on the test machine changes. A
negative dying-memcg threshold makes that role fail on the host it is set for: the injected
failure.
"""

import json
import os
import shutil
import sys

import pytest

from conftest import ROOT, run_logged

FLEET = {"slice-a": ["a1", "a2"], "slice-b": ["b1", "b2"]}


def remediate(tmp_path, base, name, max_fail, failing=()):
    hosts = {}
    for host in FLEET[name]:
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "nodefix_become": False, "nodefix_audit_checks": ["kernel"],
                       "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}}}
        if host in failing:
            hosts[host]["kernel_dying_memcgs_threshold"] = -1
    inventory = tmp_path / ("%s.json" % name)
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    extra = {"nodefix_report_dir": str(base), "nodefix_slice": name, "nodefix_rollout": "rollout-1",
             "nodefix_max_fail_percentage": max_fail,
             "nodefix_fleet_size": 4}
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e", json.dumps(extra),
            "nodefix.k8s.remediate"]
    return run_logged("sliced-rollout-%s-%s" % (name, max_fail), argv, timeout=600)


def record(base, name):
    with open(os.path.join(base, "slices", name, "rollout.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def slice_a(tmp_path_factory):
    """slice-a's run: a1 fails; with one node per batch more than the limit (20%) of the batch failed, so slice-a
    stops before a2. Its report directory is copied for slice-b."""
    tmp = tmp_path_factory.mktemp("slice-a")
    rc, out = remediate(tmp, tmp / "shared", "slice-a", 20, failing=("a1",))
    return tmp / "shared", rc, out


def test_a_slice_does_not_start_when_the_fleet_is_over_the_limit(slice_a, tmp_path):
    """slice-b (20 %) after slice-a: 1 of the 4 fleet nodes failed = 25 %, over the limit - slice-b starts nothing.
    The same records within a limit (30 %: slice-b goes on) and the rule itself are the unit tests'
    (tests/unit/plugins/module_utils/test_fleet_gate_rules.py ``test_the_fleet_is_every_slice``); an unsliced
    rollout the gate stops (its report written, no slice record) is test_13_unreachable_double's
    ``test_the_fleet_gate_counts_an_unreachable_node`` (issue 62 step 8: docs/rollout-machine.md)."""
    shared, rc, out = slice_a
    assert rc != 0, out[-3000:]
    # a1 failed: with one node per batch, more than the limit of the batch failed, so slice-a
    # stops before a2 (Ansible's rule) - and still writes its report
    assert "more than nodefix_max_fail_percentage (20%) of the last batch failed: 1 of 1 node(s) (a1)" in out
    base = tmp_path / "shared"
    shutil.copytree(str(shared), str(base))
    assert record(base, "slice-a") == dict(record(base, "slice-a"), hosts=["a1", "a2"], failed=["a1"])
    with open(os.path.join(base, "slices", "slice-a", "remediate", "report.json"), encoding="utf-8") as fh:
        nodes = {n["host"]: n for n in json.load(fh)["nodes"]}
    assert nodes["a1"]["remediation"]["status"] == "failed" and nodes["a2"]["status"] == "not run"
    assert "of the last batch failed" in nodes["a2"]["error"]
    assert nodes["a2"]["remediation"] == {"status": "not run", "msg": nodes["a2"]["error"]}
    # 1 of 4 fleet nodes failed = 25 %: over 20
    rc, out = remediate(tmp_path, base, "slice-b", 20)
    assert rc != 0 and not ("TASK [Audit before]" in out and "ok: [b1]" in out), out[-3000:]
    assert "over nodefix_max_fail_percentage (20%): 1 of 4 node(s) failed (a1)" in out
    # the hosts the gate kept out are not failures of the fleet
    assert record(base, "slice-b")["failed"] == [] and record(base, "slice-b")["hosts"] == ["b1", "b2"]
    with open(os.path.join(base, "slices", "slice-b", "remediate", "report.json"), encoding="utf-8") as fh:
        assert {n["host"]: n["status"] for n in json.load(fh)["nodes"]} == {"b1": "not run", "b2": "not run"}
