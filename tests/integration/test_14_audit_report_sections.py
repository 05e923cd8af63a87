# SPDX-License-Identifier: GPL-3.0-or-later
"""An audit's report shows its own run's sections only (playbooks/report.yml).

One ansible-playbook run as lab/site.yml chains them: a remediation whose storm breaker stopped the rollout
(its verdict and its "stopped" reason left on localhost, as remediate's tasks/storm.yml leaves them), then
nodefix.k8s.audit. A real run over a local connection, read-only (the kernel detector judging a pretended
4.4 release, as test_14_report_policy), plus a host no connection reaches. The audit's report must not
carry the remediation's storm section, and the host it could not reach is "unreachable" - not "not run" for
a rollout the audit never had.
"""

import json
import os

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")

STOPPED = ("storm breaker: 2 of 2 node(s) (100%) need a drain, reboot or restart (drain 2), over "
           "nodefix_storm_percent (20%): the rollout stops before touching a node")
VERDICT = {"stop": True, "over": True, "overridden": False, "percent": 20, "min_nodes": 2, "size": 2, "share": 100.0,
           "msg": STOPPED, "disruptive": ["node-a", "node-gone"],
           "fleet_wide": [{"id": "kernel.no_oom_reaper", "nodes": 2, "share": 100.0}]}


def test_an_audit_after_a_stopped_remediation_reports_only_its_own_run(tmp_path):
    local = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
             "nodefix_audit_checks": ["kernel"], "nodefix_audit_options": {"kernel": {"release": "4.4.0-1069-aws"}}}
    gone = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
            "ansible_ssh_common_args": "-o ConnectTimeout=5 -o BatchMode=yes"}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"node-a": local, "node-gone": gone}}}))
    playbook = tmp_path / "remediated-then-audit.yml"
    playbook.write_text(json.dumps([
        {"name": "What a stopped remediation leaves on localhost (tasks/storm.yml)", "hosts": "localhost",
         "gather_facts": False, "tasks": [{"name": "The storm verdict", "ansible.builtin.set_fact": {
             "_nodefix_storm": VERDICT, "_nodefix_fleet_stopped": STOPPED}}]},
        {"name": "The audit after it", "ansible.builtin.import_playbook": "nodefix.k8s.audit"}]))
    extra = {"nodefix_report_dir": str(tmp_path / "reports")}
    rc, out = run_logged("audit-report-own-sections", [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i",
                                                       str(inventory), "-e", json.dumps(extra), str(playbook)],
                         timeout=600)
    report_dir = tmp_path / "reports" / "audit"
    assert (report_dir / "report.json").exists(), out[-3000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert "storm" not in report, report.get("storm")
    for name in ("report.md", "report.html"):
        assert "Storm breaker" not in (report_dir / name).read_text() and "storm breaker:" not in (
            report_dir / name).read_text(), name
    nodes = dict((n["host"], n) for n in report["nodes"])
    assert nodes["node-a"]["status"] == "ok" and "kernel.no_oom_reaper" in nodes["node-a"]["ids"], nodes["node-a"]
    assert nodes["node-gone"]["status"] == "unreachable", nodes["node-gone"]
    assert "storm breaker" not in json.dumps(nodes), nodes
    assert "storm breaker" not in out.split("TASK [Show the fleet table]", 1)[1].split("PLAY RECAP", 1)[0]
