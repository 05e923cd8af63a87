# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: the playbooks run through ansible-runner with a private data dir.

Real runs, no mocks: nodefix.k8s.audit (read-only) against this machine as a
single inventory host with the local connection, through
``ansible_runner.run()``, through the ``ansible-runner run`` command line, and
from the example private data dir (examples/runner) through its project/
wrapper. remediate is never run here: it would change this machine.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from conftest import ENV, ROOT

ansible_runner = pytest.importorskip("ansible_runner")

pytestmark = pytest.mark.slow

HOST = "nodefix-runner-node"
GROUP = "k8s_nodes"


def write_pdd(pdd, reports, with_envvars=True):
    """A private data dir: inventory/hosts, env/extravars, env/envvars."""
    os.makedirs(os.path.join(pdd, "inventory"), exist_ok=True)
    os.makedirs(os.path.join(pdd, "env"), exist_ok=True)
    with open(os.path.join(pdd, "inventory", "hosts"), "w") as fh:
        fh.write("[%s]\n%s ansible_connection=local ansible_python_interpreter=%s\n" % (GROUP, HOST, sys.executable))
    with open(os.path.join(pdd, "env", "extravars"), "w") as fh:
        yaml.safe_dump({"nodefix_targets": GROUP, "nodefix_become": False, "nodefix_report_dir": str(reports)}, fh)
    if with_envvars:
        with open(os.path.join(pdd, "env", "envvars"), "w") as fh:
            yaml.safe_dump(runner_envvars(), fh)


def runner_envvars():
    """What env/envvars must carry for the run to find the collection and tools."""
    return {
        "ANSIBLE_COLLECTIONS_PATH": ENV["ANSIBLE_COLLECTIONS_PATH"],
        "PATH": ENV["PATH"],
        "ANSIBLE_HOME": ENV["ANSIBLE_HOME"],
        "ANSIBLE_LOCAL_TEMP": ENV["ANSIBLE_LOCAL_TEMP"],
        "ANSIBLE_NOCOLOR": "1",
    }


def bare_env():
    """The test's environment without any Ansible setting: only env/envvars may provide them."""
    env = {k: v for k, v in ENV.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = ENV["PATH"]
    return env


def node_audit_runs(events):
    """{host: number of nodefix.k8s.node_audit results} from runner events."""
    counts = {}
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped") \
                and data.get("task_action") == "nodefix.k8s.node_audit":
            counts[data["host"]] = counts.get(data["host"], 0) + 1
    return counts


def artifact_events(pdd):
    """Events of the one run in pdd/artifacts, as the command line leaves them."""
    runs = glob.glob(os.path.join(pdd, "artifacts", "*"))
    assert len(runs) == 1, runs
    events = []
    for path in glob.glob(os.path.join(runs[0], "job_events", "*.json")):
        with open(path) as fh:
            events.append(json.load(fh))
    events.sort(key=lambda e: e.get("counter", 0))
    return runs[0], events


def assert_reports(reports):
    """report.json/report.html/junit.xml written for the one host, and parse."""
    audit = os.path.join(str(reports), "audit")
    with open(os.path.join(audit, "report.json")) as fh:
        report = json.load(fh)
    nodes = report["nodes"]
    assert [n["host"] for n in nodes] == [HOST], nodes
    assert nodes[0]["error"] is None, nodes[0]
    assert isinstance(nodes[0]["findings"], list)
    with open(os.path.join(audit, "report.html")) as fh:
        html = fh.read()
    assert html.lstrip().lower().startswith("<!doctype html") and HOST in html
    root = ET.parse(os.path.join(audit, "junit.xml")).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    assert [s.get("name") for s in suites] == [HOST]
    assert int(suites[0].get("tests")) >= 1
    assert os.path.exists(os.path.join(audit, "report.md"))
    return report


def test_run_api_private_data_dir(tmp_path):
    """ansible_runner.run(private_data_dir=..., playbook='nodefix.k8s.audit')."""
    pdd = str(tmp_path / "pdd")
    reports = tmp_path / "reports"
    write_pdd(pdd, reports)
    result = ansible_runner.run(private_data_dir=pdd, playbook="nodefix.k8s.audit", quiet=True)
    stdout = result.stdout.read()
    assert result.status == "successful", stdout[-4000:]
    assert result.rc == 0
    events = list(result.events)
    assert node_audit_runs(events) == {HOST: 1}, stdout[-4000:]
    assert not [e for e in events if e["event"] in ("runner_on_failed", "runner_on_unreachable")]
    stats = result.stats
    assert stats["failures"] == {} and stats["dark"] == {}
    # the audit checks its variables and prerequisites (nodefix.k8s.preflight) and remembers the collection's
    # version, checks that a limit keeps the report play, records the hosts it targets for the report (the four
    # on localhost), then audits
    assert stats["ok"][HOST] == 5, stats
    report = assert_reports(reports)
    # the runner's view of the node and the report agree
    res = [e for e in events if e["event"] == "runner_on_ok"
           and e["event_data"]["task_action"] == "nodefix.k8s.node_audit"][0]["event_data"]["res"]
    assert sorted(f["id"] for f in res["findings"]) == sorted(f["id"] for f in report["nodes"][0]["findings"])
    # a host without a kubelet and a container runtime (this test machine) is reported as not a Kubernetes
    # node, with what was looked for; the report carries the same finding
    bare = res["checks"]["kubelet"]["kubelet"]["present"] is False and res["checks"]["containerd"]["installed"] is False
    assert res["summary"]["kubernetes_node"] is (not bare), res["summary"]
    assert ("audit.not_kubernetes_node" in res["summary"]["ids"]) is bare, res["summary"]
    if bare:
        found = [f for f in report["nodes"][0]["findings"] if f["id"] == "audit.not_kubernetes_node"][0]
        assert found["severity"] == "info" and found["evidence"]["kubelet"]["present"] is False, found


def test_run_api_check_mode_writes_reports(tmp_path):
    """audit in check mode (--check through the runner's cmdline) still reports."""
    pdd = str(tmp_path / "pdd")
    reports = tmp_path / "reports"
    write_pdd(pdd, reports)
    result = ansible_runner.run(private_data_dir=pdd, playbook="nodefix.k8s.audit", cmdline="--check", quiet=True)
    assert result.status == "successful", result.stdout.read()[-4000:]
    assert "--check" in result.config.command
    assert node_audit_runs(result.events) == {HOST: 1}
    assert_reports(reports)


def test_run_cli_private_data_dir(tmp_path):
    """`ansible-runner run <pdd> -p nodefix.k8s.audit`, Ansible settings only from env/envvars."""
    pdd = str(tmp_path / "pdd")
    reports = tmp_path / "reports"
    write_pdd(pdd, reports)
    argv = [shutil.which("ansible-runner", path=ENV["PATH"]), "run", pdd, "-p", "nodefix.k8s.audit"]
    proc = subprocess.run(argv, env=bare_env(), cwd=str(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    run_dir, events = artifact_events(pdd)
    with open(os.path.join(run_dir, "status")) as fh:
        assert fh.read().strip() == "successful"
    with open(os.path.join(run_dir, "rc")) as fh:
        assert fh.read().strip() == "0"
    with open(os.path.join(run_dir, "command")) as fh:
        command = json.load(fh)
    # the collection path reached ansible-playbook through env/envvars only
    assert command["env"]["ANSIBLE_COLLECTIONS_PATH"] == ENV["ANSIBLE_COLLECTIONS_PATH"]
    assert "ANSIBLE_COLLECTIONS_PATH" not in bare_env()
    assert command["command"][-1] == "nodefix.k8s.audit"
    assert node_audit_runs(events) == {HOST: 1}, proc.stdout[-4000:]
    stats = [e for e in events if e["event"] == "playbook_on_stats"][0]["event_data"]
    assert stats["failures"] == {} and stats["dark"] == {}
    assert_reports(reports)


def test_run_cli_without_envvars_cannot_find_the_collection(tmp_path):
    """Control: the same run without env/envvars fails, so the previous test proves envvars is used."""
    pdd = str(tmp_path / "pdd")
    write_pdd(pdd, tmp_path / "reports", with_envvars=False)
    env = bare_env()
    empty_cfg = tmp_path / "empty.cfg"  # no ansible.cfg with a collections_path either
    empty_cfg.write_text("[defaults]\n")
    env["ANSIBLE_CONFIG"] = str(empty_cfg)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(tmp_path / "empty")
    env["ANSIBLE_COLLECTIONS_SCAN_SYS_PATH"] = "false"
    argv = [shutil.which("ansible-runner", path=ENV["PATH"]), "run", pdd, "-p", "nodefix.k8s.audit"]
    proc = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode != 0
    assert "nodefix.k8s.audit" in proc.stdout + proc.stderr and "could not be found" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def test_example_private_data_dir(tmp_path):
    """examples/runner: its layout and project/ wrappers run as documented (docs/ansible-runner.md)."""
    example = os.path.join(ROOT, "examples", "runner")
    pdd = str(tmp_path / "runner")
    shutil.copytree(example, pdd)
    for path in ("inventory/hosts", "env/envvars", "env/extravars", "project/audit.yml", "project/remediate.yml"):
        assert os.path.isfile(os.path.join(pdd, path)), path
    with open(os.path.join(pdd, "env", "envvars")) as fh:
        envvars = yaml.safe_load(fh)
    with open(os.path.join(pdd, "env", "extravars")) as fh:
        extravars = yaml.safe_load(fh)
    assert "ANSIBLE_COLLECTIONS_PATH" in envvars and extravars["nodefix_targets"] == GROUP
    # Point the example at this machine and this checkout's collections; keep the rest.
    reports = tmp_path / "reports"
    write_pdd(pdd, reports, with_envvars=False)
    envvars.update(runner_envvars())
    with open(os.path.join(pdd, "env", "envvars"), "w") as fh:
        yaml.safe_dump(envvars, fh)
    result = ansible_runner.run(private_data_dir=pdd, playbook="audit.yml", quiet=True)
    assert result.status == "successful", result.stdout.read()[-4000:]
    assert result.rc == 0
    assert result.config.cwd == os.path.join(pdd, "project")
    assert node_audit_runs(result.events) == {HOST: 1}
    assert_reports(reports)
