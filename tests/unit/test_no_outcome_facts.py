# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 62's acceptance: no ``set_fact`` in the playbooks stores a node's outcome. A node's record is the rollout
action's own finished record, or worked out from what the rolling play registered (``_rollout/node_record.py``, the
``remediation_records`` filter): a fact that copies, amends or makes one up is the YAML state machine coming back.

Guarded, in every ``set_fact`` of ``playbooks/`` (blocks, rescue and always walked):
- the facts that held a node's record or the fixes' verdict (``GUARDED``) and the results the record is worked out
  from (``node_record.REGISTERED``: written by a set_fact they would no longer be what the play registered);
- any fact whose value names an ``outcome`` or a ``status`` key (a record made up under another name)."""

import glob
import os
import re

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_record

from yaml_tasks import tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUARDED = ("_nodefix_remediation", "nodefix_remediation", "_nodefix_fixes", "_nodefix_outcome",
           "_nodefix_fix_failure") + node_record.REGISTERED
SET_FACT = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
# a key `outcome:` / `status:` in a YAML mapping, or 'outcome': / "status": in a Jinja dict
OUTCOME_KEY = re.compile(r"""(^|[\s{,])['"]?(outcome|status)['"]?\s*:""")


def playbook_files():
    return sorted(glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True))


def outcome_facts(path):
    """(fact, why) for each set_fact of ``path`` that writes a node's outcome."""
    with open(path) as handle:
        loaded = yaml.safe_load(handle)
    found = []
    for task in tasks(loaded):
        args = next((task[k] for k in SET_FACT if k in task), None)
        if not isinstance(args, dict):
            continue
        for fact, value in args.items():
            if fact in GUARDED:
                found.append((fact, "a guarded fact"))
            elif OUTCOME_KEY.search(value if isinstance(value, str) else yaml.safe_dump(value)):
                found.append((fact, "its value has an outcome or status key"))
    return found


def test_the_playbooks_are_walked():
    names = [os.path.relpath(p, ROOT) for p in playbook_files()]
    assert "playbooks/remediate.yml" in names and "playbooks/tasks/fix.yml" in names
    assert "playbooks/tasks/record.yml" in names


@pytest.mark.parametrize("path", playbook_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_no_set_fact_stores_a_nodes_outcome(path):
    assert outcome_facts(path) == []


@pytest.mark.parametrize("text, fact", [
    ("- ansible.builtin.set_fact:\n    _nodefix_remediation: {status: ok}\n", "_nodefix_remediation"),
    ("- block:\n  - set_fact: {x: 1}\n  rescue:\n  - set_fact:\n      _nodefix_fixes: {msg: m}\n", "_nodefix_fixes"),
    ("- ansible.builtin.set_fact:\n    _other: \"{{ {'outcome': 'held'} }}\"\n", "_other"),
    ("- ansible.builtin.set_fact:\n    _other:\n      status: unreachable\n", "_other"),
    ("- ansible.builtin.set_fact:\n    _nodefix_rollout: {}\n", "_nodefix_rollout"),
])
def test_the_guard_finds_an_outcome_fact(tmp_path, text, fact):
    path = tmp_path / "t.yml"
    path.write_text(text)
    assert [f for f, _why in outcome_facts(str(path))] == [fact]


def test_the_guard_leaves_other_facts_alone(tmp_path):
    path = tmp_path / "t.yml"
    path.write_text("- ansible.builtin.set_fact:\n    _nodefix_plan: \"{{ a | b }}\"\n    _nodefix_audit: {checks: {}}\n")
    assert outcome_facts(str(path)) == []
