# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbooks' preflight through ansible-playbook: a user's mistake is refused before any node is
touched, naming the variable (and the closest known name for a typo) - nothing is audited, nothing runs
on a node, and the refusal is the run's error.

The "node" is a local-connection host that is never reached: the preflight runs on the controller before
the first task that would touch it (asserted: no node_audit ran).

One playbook run per playbook, each with several mistakes at once (the preflight names every problem it
finds in one refusal): each mistake's words must be in the run's error and the report. Each mistake alone,
and the value variants (nodefix_storm_percent "abc", 150, "100.5"), are refused by the same action plugin
run in process in tests/unit/plugins/action/test_preflight_action.py; "100.5" as text (as ``-e key=value``
gives it) also end to end here (issue 56, 62: the same behaviours in fewer playbook runs)."""

import json
import os

import pytest

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
CASES = [
    ("audit", {"nodefix_rebot": True, "nodefix_fail_onn": "medium", "nodefix_fail_on": "hgh"},
     ["nodefix_rebot is not a variable", "did you mean nodefix_reboot?", "did you mean nodefix_fail_on?",
      "nodefix_fail_on must be one of", "did you mean high?"]),
    # "100.5" as text, as -e nodefix_storm_percent=100.5 gives it (test_18_storm's run of its own before, issue 62
    # step 8); 150 and the other variants are test_preflight_variables.py's
    ("remediate", {"nodefix_storm_percent": "100.5", "nodefix_serial": 0, "nodefix_drain_timeout": "ten"},
     ['nodefix_storm_percent must be a whole number, got "100.5"', "nodefix_serial must be at least 1 node",
      "nodefix_drain_timeout must be a whole number"]),
    ("npd", {"nodefix_audit_checks": "kernel,kubelett"}, ['nodefix_audit_checks has "kubelett"', "did you mean kubelet?"]),
] + [
    # a pattern that matches no host: before, every play was skipped and the run exited 0 ("no node was audited")
    (playbook, {"nodefix_targets": "k8s_nodez"},
     ["nodefix_targets=k8s_nodez matches no host", "the inventory's groups: k8s_nodes", "did you mean k8s_nodes?"])
    for playbook in ("audit", "remediate", "npd", "merge")
]


@pytest.mark.parametrize("playbook,extra,words", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_is_refused_before_any_node(tmp_path, playbook, extra, words):
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {"k8s_nodes": {"hosts": {"node-a": {
        "ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False}}}}}}))
    # an older report in the report directory: the refused run must not leave it looking current
    kind_dir = tmp_path / "reports" / playbook
    kind_dir.mkdir(parents=True)
    (kind_dir / "report.json").write_text(json.dumps({"title": "an older run", "nodes": []}))
    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(dict(extra, nodefix_report_dir=str(tmp_path / "reports"))))
    rc, out = run_logged("preflight-%s-%s" % (playbook, "-".join(extra)), [
        os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e", "@%s" % extra_file,
        os.path.join(ROOT, "playbooks", "%s.yml" % playbook)], timeout=300)
    assert rc != 0, out[-3000:]
    assert "refused before any node" in out, out[-3000:]
    for word in words:
        assert word in out, (word, out[-3000:])
    # nothing reached the node: no detector, no role ran
    assert "TASK [Run every nodefix.k8s detector" not in out and "TASK [Audit before]" not in out
    assert "TASK [Install and verify the plugin]" not in out
    if playbook in ("audit", "remediate") or "nodefix_targets" in extra and playbook == "merge":
        kind_dir = tmp_path / "reports" / ("audit" if playbook == "merge" else playbook)
        # the refused run's report replaced the older one: marked failed, with why, and when
        with open(kind_dir / "report.json") as fh:
            report = json.load(fh)
        assert report["run"]["status"] == "failed" and "refused before any node" in report["run"]["failure"], report
        assert report["run"]["mode"] == playbook and report["run"]["generated"].endswith("Z"), report["run"]
        for word in words:
            assert word in report["run"]["failure"], (word, report["run"]["failure"])
        with open(kind_dir / "report.md") as fh:
            assert "**FAILED: nodefix.k8s %s refused before any node" % playbook in fh.read()


def test_a_node_where_the_run_is_not_root_is_refused_before_anything(tmp_path):
    """nodefix_become false and a connection user that is not root (here the controller's python run as
    nobody through setpriv, pipelined): remediate --check refuses the node with the reason, before the gate,
    a drain or any role, instead of saying ok (check mode) or failing task by task (a real run)."""
    wrapper = tmp_path / "python-as-nobody"
    wrapper.write_text("#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups %s \"$@\"\n" % PY)
    wrapper.chmod(0o755)
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"node-a": {
        "ansible_connection": "local", "ansible_python_interpreter": str(wrapper), "ansible_pipelining": True,
        "nodefix_become": False, "nodefix_audit_checks": ["pids"], "nodefix_storm_percent": 100,
        # a floor no machine reaches: a pids finding, so the plan has a role to run
        "nodefix_audit_options": {"pids": {"threads_max_min": 1073741823}}}}}}))
    rc, out = run_logged("preflight-not-root", [
        os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "--check",
        "-e", "nodefix_report_dir=%s" % (tmp_path / "reports"), os.path.join(ROOT, "playbooks", "remediate.yml")],
        timeout=300)
    assert rc != 0, out[-3000:]
    with open(tmp_path / "reports" / "remediate" / "report.json") as fh:
        node = json.load(fh)["nodes"][0]
    assert node["remediation"]["status"] == "failed", node["remediation"]
    assert "not root" in node["remediation"]["msg"] and "uid 65534" in node["remediation"]["msg"], node["remediation"]
    assert "nodefix.k8s.pids :" not in out  # the role was never included


WRAPPER = """\
- name: A team's wrapper registers and sets its own nodefix_* names first
  hosts: all
  gather_facts: false
  tasks:
    - name: Wait for the node (the lab's own wait registers nodefix_boot)
      ansible.builtin.ping:
      register: nodefix_boot
    - name: A fact of the wrapper's own
      ansible.builtin.set_fact:
        nodefix_site_note: wrapper
        cacheable: true

- name: Remediate
  ansible.builtin.import_playbook: nodefix.k8s.remediate

- name: Audit after
  ansible.builtin.import_playbook: nodefix.k8s.audit
"""


@pytest.mark.parametrize("typo", [False, "extra", "import"], ids=["registered-results-audit", "typo-refused",
                                                                  "import-vars-typo-refused"])
def test_a_wrapper_that_registers_nodefix_names_runs_and_a_typo_is_still_refused(tmp_path, typo):
    """Issue 60: a site playbook that registers nodefix_boot and set_facts a nodefix_* name, then imports
    remediate followed by audit in ONE run, is not refused (the second audit used to be refused for the
    facts remediate registered); the same wrapper with -e nodefix_rebot=true is refused before any node,
    naming nodefix_reboot and not the registered names, and so is a typo in the wrapper's vars: on the
    import_playbook (the play's vars, not the hosts'). The node is the controller run as nobody with
    detector options no machine trips (nothing to fix: nothing runs on it but the read-only audit)."""
    wrapper = tmp_path / "python-as-nobody"
    wrapper.write_text("#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups %s \"$@\"\n" % PY)
    wrapper.chmod(0o755)
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {"k8s_nodes": {"hosts": {"node-a": {
        "ansible_connection": "local", "ansible_python_interpreter": str(wrapper), "ansible_pipelining": True,
        "nodefix_become": False, "nodefix_audit_checks": ["pids"],
        "nodefix_audit_options": {"pids": {"usage_percent": 100, "threads_max_min": 0, "pid_max_min": 301,
                                           "zombie_threshold": 1000000}}}}}}}}))
    site = tmp_path / "site.yml"
    site.write_text(WRAPPER if typo != "import" else WRAPPER.replace(
        "  ansible.builtin.import_playbook: nodefix.k8s.remediate\n",
        "  ansible.builtin.import_playbook: nodefix.k8s.remediate\n  vars:\n    nodefix_drain_timout: 5\n"))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "--check",
            "-e", "nodefix_report_dir=%s" % (tmp_path / "reports"), "-e", "nodefix_targets=k8s_nodes"]
    if typo == "extra":
        argv += ["-e", "nodefix_rebot=true"]
    rc, out = run_logged("preflight-wrapper-%s" % (typo or "ok"), argv + [str(site)], timeout=300)
    assert "nodefix_boot is not a variable" not in out and "nodefix_site_note is not" not in out, out[-3000:]
    if typo:
        assert rc != 0, out[-3000:]
        assert "refused before any node" in out, out[-3000:]
        assert ("did you mean nodefix_reboot?" if typo == "extra" else "did you mean nodefix_drain_timeout?") in out, \
            out[-3000:]
        assert "TASK [Run every nodefix.k8s detector" not in out and "TASK [Audit before]" not in out
        return
    assert rc == 0, out[-3000:]
    assert "refused before any node" not in out, out[-3000:]
    with open(tmp_path / "reports" / "remediate" / "report.json") as fh:
        remediated = json.load(fh)
    with open(tmp_path / "reports" / "audit" / "report.json") as fh:
        audited = json.load(fh)
    assert [n["host"] for n in remediated["nodes"]] == ["node-a"], remediated["nodes"]
    # the audit after remediate ran on the node (its report is this run's, not refused)
    assert [n["host"] for n in audited["nodes"]] == ["node-a"] and audited["run"]["status"] != "failed", audited["run"]
