# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/triage/e2e.py's own pieces (the run itself takes the lab for minutes: a measurement, not a test
layer): the lab's inventory without the emulated VM, and the connection count read from ansible-playbook -vvv."""

import importlib.util
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def e2e():
    spec = importlib.util.spec_from_file_location("triage_e2e", os.path.join(ROOT, "benchmarks", "triage", "e2e.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lab_inventory_without_the_vm(tmp_path):
    path, nodes = e2e().containers_inventory(str(tmp_path))
    with open(path) as fh:
        inv = yaml.safe_load(fh)
    lab = inv["all"]["children"]["nodefix_lab"]
    assert "nodefix_lab_vms" not in lab["children"] and nodes == sorted(lab["children"]["nodefix_lab_containers"]["hosts"])
    assert nodes and inv["all"]["vars"]["nodefix_waivers"]  # the lab's own variables stay


def test_connections_are_counted_from_the_connection_plugins_lines_and_the_recap(tmp_path):
    log = tmp_path / "remediate.log"
    log.write_text(
        "<127.0.0.1> ESTABLISH LOCAL CONNECTION FOR USER: root\n"
        "<nodefix-lab-debian12> RUN ['/usr/sbin/runc', 'exec', 'x', '/bin/sh']\n"
        "<nodefix-lab-debian12> RUN ['/usr/sbin/runc', 'exec', 'x', '/bin/sh']\n"
        "<10.0.0.7> ESTABLISH SSH CONNECTION FOR USER: None\n"
        "ok: [nodefix-lab-debian12]\n"
        "PLAY RECAP *********************************************************************\n"
        "localhost                  : ok=3    changed=0    unreachable=0    failed=0\n"
        "nodefix-lab-debian12       : ok=40   changed=9    unreachable=0    failed=0\n"
        "node-00042                 : ok=0    changed=0    unreachable=1    failed=0\n")
    seen, recap = e2e().connections(str(log))
    assert seen == {"127.0.0.1": 1, "nodefix-lab-debian12": 2, "10.0.0.7": 1}
    assert recap == ["node-00042", "nodefix-lab-debian12"]
