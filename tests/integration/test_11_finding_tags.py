# SPDX-License-Identifier: GPL-3.0-or-later
"""The tag a report names for a finding runs that fix through ``remediate`` (one run).

``pids.zombie_leaker``'s fix is ``--tags zombies``. The "node" is the controller over a local
connection, in CHECK MODE, audited with only the pids detector and a threads-max floor no machine
reaches (``threads_max_min``: a ``pids.threads_max_low`` finding whose role is nodefix.k8s.pids), so
the plan runs the pids role: with ``--tags zombies`` only its read and zombie-report tasks run, never
the sysctl ones (and check mode writes nothing whatever runs). Before every include carried its role's
finding tags (tests/unit/test_finding_tags.py), ``--tags zombies`` skipped the whole role and said "ok".
"""

import json
import os

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")


def test_tags_zombies_runs_the_zombie_report_and_nothing_else(tmp_path):
    host_vars = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
                 "nodefix_audit_checks": ["pids"], "nodefix_storm_percent": 100,
                 "nodefix_audit_options": {"pids": {"threads_max_min": 1073741823}}}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"node-a": host_vars}}}))
    rc, out = run_logged("finding-tags-zombies", [
        os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "--check", "--tags", "zombies",
        "-e", "nodefix_report_dir=%s" % (tmp_path / "reports"), os.path.join(ROOT, "playbooks", "remediate.yml")],
        timeout=600)
    assert rc == 0, out[-3000:]
    assert "TASK [nodefix.k8s.pids : Report each leaker with the advice]" in out, out[-3000:]
    assert "TASK [nodefix.k8s.pids : Read PID usage, zombies" in out, out[-3000:]
    # the role's sysctl and threads-max concerns (tags pids, pid_limits) did not run
    for name in ("Work out the value to persist", "Persist kernel.pid_max", "Persist and apply kernel.pid_max",
                 "Check (and optionally persist) kernel.threads-max", "Work out kernel.threads-max"):
        assert name not in out, name
    with open(tmp_path / "reports" / "remediate" / "report.json") as fh:
        report = json.load(fh)
    node = report["nodes"][0]
    # a dry run says so, in every format, with when and what (the run's id, the collection's version)
    run = report["run"]
    assert run["check_mode"] is True and run["mode"] == "remediate" and run["status"] == "complete", run
    assert run["generated"].endswith("Z") and run["id"] and run["collection_version"], run
    assert run["inventory_size"] == 1, run
    for name in ("report.md", "report.html"):
        with open(tmp_path / "reports" / "remediate" / name) as fh:
            assert "DRY RUN (check mode)" in fh.read(), name
    assert node["remediation"]["roles"] == ["nodefix.k8s.pids"], node["remediation"]
