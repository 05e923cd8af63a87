# SPDX-License-Identifier: GPL-3.0-or-later
"""The report play both playbooks import (playbooks/report.yml) and its fail policy.

Real runs of nodefix.k8s.audit against this machine over a local connection,
read-only, with only the kernel detector judging a pretended 4.4 release
(``nodefix_audit_options``), so the findings are known (kernel.no_oom_reaper
is high) and nothing on the test machine changes.
"""

import json
import os

import pytest

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
HOST = "node-a"


def audit(tmp_path, name, fail_on=None, waivers=None, playbook="audit.yml", host="node-a", targets=None, env=None,
          limit=None):
    host_vars = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
                 "nodefix_audit_checks": ["kernel"],
                 "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}}}
    inventory = tmp_path / "inventory.json"
    hosts = {host: host_vars}
    if limit:   # the controller as an inventory host of its own, which the limit keeps
        hosts["localhost"] = {"ansible_connection": "local", "ansible_python_interpreter": PY}
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    extra = {"nodefix_report_dir": str(tmp_path / "reports"), "nodefix_waivers": waivers or []}
    if targets:
        extra["nodefix_targets"] = targets
    if fail_on:
        extra["nodefix_fail_on"] = fail_on
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e", json.dumps(extra),
            os.path.join(ROOT, "playbooks", playbook)] + (["--limit", limit] if limit else [])
    return run_logged("report-policy-%s" % name, argv, timeout=600, env=env)


@pytest.mark.parametrize("fail_on, fails", [(None, False), ("critical", False), ("high", True), ("info", True)])
def test_audit_fails_exactly_at_the_threshold(tmp_path, fail_on, fails):
    rc, out = audit(tmp_path, "audit-%s" % fail_on, fail_on)
    assert (rc != 0) == fails, out[-3000:]
    # the report is written and the table shown before the verdict
    report = json.loads((tmp_path / "reports" / "audit" / "report.json").read_text())
    ids = report["nodes"][0]["ids"]
    assert "kernel.no_oom_reaper" in ids and "kernel.no_psi" in ids
    assert "node-a" in out and "reports:" in out and str(tmp_path / "reports" / "audit" / "report.html") in out
    if fails:
        assert "finding(s) at %s or worse" % fail_on in out and "kernel.no_oom_reaper on node-a" in out


@pytest.mark.parametrize("result_format", ["yaml", "json"])
def test_the_console_table_reads_as_a_table_in_either_result_format(tmp_path, result_format):
    """Under the YAML result format (the project's ansible.cfg, the demo) the table is one literal block, its
    rows never quoted or re-wrapped; under Ansible's default JSON format one row per line. Within 100
    columns either way (the report paths aside: they are the machine's)."""
    rc, out = audit(tmp_path, "table-%s" % result_format, env={"ANSIBLE_CALLBACK_RESULT_FORMAT": result_format})
    assert rc == 0, out[-3000:]
    shown = out.split("TASK [Show the fleet table]", 1)[1].split("PLAY RECAP", 1)[0]
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


def test_waived_findings_do_not_fail_the_policy(tmp_path):
    waivers = [{"id": "kernel.*", "reason": "kernel upgrade planned, ticket OPS-2"}]
    rc, out = audit(tmp_path, "waived", "info", waivers)
    assert rc == 0, out[-3000:]


def test_a_node_named_localhost_is_reported(tmp_path):
    # `ansible-playbook nodefix.k8s.audit -i localhost, -c local` (and ansible-pull on a node):
    # the audited host is in the report whatever its name
    rc, out = audit(tmp_path, "localhost", "high", host="localhost")
    report = json.loads((tmp_path / "reports" / "audit" / "report.json").read_text())
    assert [n["host"] for n in report["nodes"]] == ["localhost"], report["nodes"]
    assert report["totals"]["nodes"] == 1 and "kernel.no_oom_reaper" in report["nodes"][0]["ids"]
    assert rc != 0 and "kernel.no_oom_reaper on localhost" in out, out[-3000:]


@pytest.mark.parametrize("fail_on, fails", [(None, False), ("info", True)])
def test_no_audited_node_is_never_a_clean_fleet(tmp_path, fail_on, fails):
    # every target left out (a limit of the controller alone; targets that match no host are refused up front:
    # test_09_preflight.py): the report says no node was audited, and a policy fails
    rc, out = audit(tmp_path, "no-node-%s" % fail_on, fail_on, targets=HOST, limit="localhost")
    assert (rc != 0) == fails, out[-3000:]
    report = json.loads((tmp_path / "reports" / "audit" / "report.json").read_text())
    assert report["nodes"] == [] and report["totals"]["nodes"] == 0
    assert "no node was audited" in out
    assert "no node was audited" in (tmp_path / "reports" / "audit" / "report.md").read_text()
    assert "no node was audited" in (tmp_path / "reports" / "audit" / "report.html").read_text()
