# SPDX-License-Identifier: GPL-3.0-or-later
"""The report play both playbooks import (playbooks/report.yml) and its fail policy.

Real runs of nodefix.k8s.audit against this machine over a local connection,
read-only, with only the kernel detector judging a pretended 4.4 release
(``nodefix_audit_options``), so the findings are known (kernel.no_oom_reaper
is high) and nothing on the test machine changes.

The fail policy (nodefix_fail_on), the waivers, the targets and the result format are play-wide: each
distinct set is ONE run (``RUNS``), made once for the module (``audited``) and shared by the tests that
need it - the threshold and the table of the same policy and format read the same run, and the node named
localhost is a second host of the ``high`` run.
"""

import json
import os

import pytest

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")


def audit(tmp_path, name, fail_on=None, waivers=None, playbook="audit.yml", hosts=("node-a",), targets=None, env=None,
          limit=None):
    host_vars = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
                 "nodefix_audit_checks": ["kernel"],
                 "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}}}
    inventory = tmp_path / "inventory.json"
    inventory_hosts = dict((host, host_vars) for host in hosts)
    if limit:   # the controller as an inventory host of its own, which the limit keeps
        inventory_hosts["localhost"] = {"ansible_connection": "local", "ansible_python_interpreter": PY}
    inventory.write_text(json.dumps({"all": {"hosts": inventory_hosts}}))
    extra = {"nodefix_report_dir": str(tmp_path / "reports"), "nodefix_waivers": waivers or []}
    if targets:
        extra["nodefix_targets"] = targets
    if fail_on:
        extra["nodefix_fail_on"] = fail_on
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e", json.dumps(extra),
            os.path.join(ROOT, "playbooks", playbook)] + (["--limit", limit] if limit else [])
    return run_logged("report-policy-%s" % name, argv, timeout=600, env=env)


# one run a set of play-wide options: {run: audit()'s arguments}
RUNS = {
    "none-yaml": {"env": {"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"}},
    "critical": {"fail_on": "critical"},
    # a node named localhost beside node-a: `ansible-playbook nodefix.k8s.audit -i localhost, -c local`
    "high": {"fail_on": "high", "hosts": ("node-a", "localhost")},
    "info-json": {"fail_on": "info", "env": {"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}},
    "waived": {"fail_on": "info", "waivers": [{"id": "kernel.*", "reason": "kernel upgrade planned, ticket OPS-2"}]},
    # every target left out by a limit of the controller alone (targets that match no host are refused up
    # front: test_09_preflight.py)
    "no-node-none": {"targets": "node-a", "limit": "localhost"},
    "no-node-info": {"fail_on": "info", "targets": "node-a", "limit": "localhost"},
}
THRESHOLD_RUN = {None: "none-yaml", "critical": "critical", "high": "high", "info": "info-json"}


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """run -> (rc, output, its report directory), each run made once, when a test first needs it."""
    done = {}

    def _get(run):
        if run not in done:
            work = tmp_path_factory.mktemp(run)
            rc, out = audit(work, run, **RUNS[run])
            done[run] = (rc, out, work / "reports")
        return done[run]
    return _get


@pytest.mark.parametrize("fail_on, fails", [(None, False), ("critical", False), ("high", True), ("info", True)])
def test_audit_fails_exactly_at_the_threshold(audited, fail_on, fails):
    rc, out, reports = audited(THRESHOLD_RUN[fail_on])
    assert (rc != 0) == fails, out[-3000:]
    # the report is written and the table shown before the verdict
    report = json.loads((reports / "audit" / "report.json").read_text())
    ids = [n for n in report["nodes"] if n["host"] == "node-a"][0]["ids"]
    assert "kernel.no_oom_reaper" in ids and "kernel.no_psi" in ids
    assert "node-a" in out and "reports:" in out and str(reports / "audit" / "report.html") in out
    if fails:
        assert "finding(s) at %s or worse" % fail_on in out and "kernel.no_oom_reaper on node-a" in out


@pytest.mark.parametrize("result_format, run", [("yaml", "none-yaml"), ("json", "info-json")], ids=["yaml", "json"])
def test_the_console_table_reads_as_a_table_in_either_result_format(audited, result_format, run):
    """Under the YAML result format (the project's ansible.cfg, the demo) the table is one literal block, its
    rows never quoted or re-wrapped; under Ansible's default JSON format one row per line. Within 100
    columns either way (the report paths aside: they are the machine's). (The JSON run is the ``info``
    policy's: it fails after the table, by that policy - test_audit_fails_exactly_at_the_threshold.)"""
    rc, out, _reports = audited(run)
    assert "TASK [Show the fleet table]" in out, out[-3000:]
    shown = out.split("TASK [Show the fleet table]", 1)[1].split("PLAY RECAP", 1)[0].split("\nTASK [", 1)[0]
    rows = [line for line in shown.splitlines() if "node-a" in line and "kernel." not in line]
    assert len(rows) == 1, shown
    if result_format == "yaml":
        assert "msg: |-" in shown and rows[0].split("node-a")[0].strip() == "", shown   # a plain row, no quotes
        table = shown.split("msg: |-", 1)[1].split("reports:", 1)[0].splitlines()[1:]
    else:
        assert rows[0].strip().startswith('"node-a') and rows[0].rstrip().endswith('",'), shown
        table = shown.split('"msg": [', 1)[1].split('"reports:"', 1)[0].splitlines()[1:]
    assert table and all(len(line) <= 100 + 12 for line in table), table   # 100 + the callback's indent and quotes
    assert any("kernel.no_oom_reaper" in line for line in table), table


def test_waived_findings_do_not_fail_the_policy(audited):
    rc, out, _reports = audited("waived")
    assert rc == 0, out[-3000:]


def test_a_node_named_localhost_is_reported(audited):
    # `ansible-playbook nodefix.k8s.audit -i localhost, -c local` (and ansible-pull on a node):
    # the audited host is in the report whatever its name (here beside node-a, in the `high` policy's run)
    rc, out, reports = audited("high")
    report = json.loads((reports / "audit" / "report.json").read_text())
    assert sorted(n["host"] for n in report["nodes"]) == ["localhost", "node-a"], report["nodes"]
    mine = [n for n in report["nodes"] if n["host"] == "localhost"][0]
    assert report["totals"]["nodes"] == 2 and "kernel.no_oom_reaper" in mine["ids"]
    assert rc != 0 and "kernel.no_oom_reaper on localhost" in out, out[-3000:]


@pytest.mark.parametrize("fail_on, fails", [(None, False), ("info", True)])
def test_no_audited_node_is_never_a_clean_fleet(audited, fail_on, fails):
    # every target left out: the report says no node was audited, and a policy fails
    rc, out, reports = audited("no-node-%s" % (fail_on or "none"))
    assert (rc != 0) == fails, out[-3000:]
    report = json.loads((reports / "audit" / "report.json").read_text())
    assert report["nodes"] == [] and report["totals"]["nodes"] == 0
    assert "no node was audited" in out
    assert "no node was audited" in (reports / "audit" / "report.md").read_text()
    assert "no node was audited" in (reports / "audit" / "report.html").read_text()
