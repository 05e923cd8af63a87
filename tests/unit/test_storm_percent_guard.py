# SPDX-License-Identifier: GPL-3.0-or-later
"""The storm play's first task (playbooks/remediate.yml) refuses nodefix_storm_percent outside 0-100 or not a
whole number, before any node - the same values storm_gate refuses (_rollout.storm.check_percent).

The play's guard used to be ``nodefix_storm_percent | int < 100``: 101, 150, 1e3 and 100.5 skipped the breaker
without a word. Here the task's own ``that`` is evaluated by Ansible's templating for each value (the playbooks'
preflight refuses the same values before it: test_09_preflight.py's remediate run, "100.5" as text, proves that
stops the run)."""

import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm

try:  # ansible-core 2.19 templates only what is marked trusted (a playbook's text is)
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older cores trust every string
    def trust_as_template(text):
        return text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VALUES = [0, 20, "20", " 20 ", 20.0, "20.0", 100, "100", 101, 150, "150", "1e3", 1e3, 100.5, "100.5", 20.5, -1, "-1",
          True, False, "20%", "", "twenty", "0x14", "1_0", "\t20", "\u0662\u0660"]


def storm_play_tasks():
    with open(os.path.join(ROOT, "playbooks", "remediate.yml"), encoding="utf-8") as fh:
        plays = yaml.safe_load(fh)
    play = [p for p in plays if p.get("name", "").startswith("Storm breaker")][0]
    return play["tasks"]


def guard():
    tasks = storm_play_tasks()
    assert tasks[0]["name"].startswith("Refuse a storm percent"), "the check must come before the storm audit"
    return tasks[0]


def storm_percent_default():
    """The one place nodefix_storm_percent's default is written (playbooks/vars/plan.yml, the play's vars_files)."""
    with open(os.path.join(ROOT, "playbooks", "vars", "plan.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)["_nodefix_storm_percent"]


def passes(value):
    variables = {"_nodefix_storm_percent": trust_as_template(storm_percent_default())}
    if value is not None:
        variables["nodefix_storm_percent"] = value
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.evaluate_conditional(trust_as_template(guard()["ansible.builtin.assert"]["that"]))


@pytest.mark.parametrize("value", VALUES)
def test_the_play_refuses_what_storm_gate_refuses(value):
    try:
        storm.check_percent(value)
        whole = True
    except storm.StormInputError:
        whole = False
    assert passes(value) is whole


def test_the_check_runs_first_once_on_the_controller_and_ends_the_run():
    task = guard()
    assert task["run_once"] and task["delegate_to"] == "localhost" and task["any_errors_fatal"]
    assert "nodefix_storm_percent must be a whole number from 0 to 100" in task["ansible.builtin.assert"]["fail_msg"]
    include = storm_play_tasks()[1]
    assert include["ansible.builtin.include_tasks"]["file"] == "tasks/storm.yml"


def test_unset_is_the_default_20():
    assert storm_percent_default() == "{{ nodefix_storm_percent | default(20) }}"
    assert passes(None) is True
