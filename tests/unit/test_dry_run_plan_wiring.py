# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/tasks/dry_run_plan.yml hands the plan builder what remediate's check-mode tasks registered, each with a
``default``: a misspelt name would silently plan nothing for its role. Every variable it reads must be one that a
role or playbook of the collection really sets (``register:``, ``set_fact``, a role default or a play's vars)."""

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = os.path.join(ROOT, "playbooks", "tasks", "dry_run_plan.yml")
# names Ansible itself provides
MAGIC = {"hostvars", "inventory_hostname", "ansible_check_mode"}


def _strings(node):
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def read_names():
    """The first name of every {{ expression }} of the facts the plan task passes."""
    with open(PLAN) as fh:
        tasks = yaml.safe_load(fh)
    facts = tasks[0]["vars"]["_facts"]
    names = set()
    for text in _strings(facts):
        for expr in re.findall(r"\{\{(.*?)\}\}", text, re.S):
            match = re.match(r"\s*\(*\s*([A-Za-z_][A-Za-z0-9_]*)", expr)
            if match and match.group(1) not in ("none", "true", "false"):
                names.add(match.group(1))
    return names


def set_names():
    """Every name the collection's roles and playbooks register, set_fact, default or give as vars."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "**", "*.yml"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True):
        with open(path) as fh:
            text = fh.read()
        names.update(re.findall(r"^\s*register:\s*([A-Za-z_][A-Za-z0-9_]*)", text, re.M))
        # set_fact keys, role defaults, vars: a key at any indentation followed by a colon
        names.update(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*):", text, re.M))
    return names


def test_every_variable_the_plan_reads_is_set_somewhere():
    names = read_names()
    assert {"kubelet_config_result", "mount_units_estimate", "gvisor_eviction_results"} <= names, names
    missing = sorted(n for n in names - MAGIC if n not in set_names())
    assert missing == [], "dry_run_plan.yml reads variables nothing sets: %s" % missing


def test_a_misspelt_name_is_caught():
    # the check itself: a name no file sets is reported
    assert "gvisor_eviction_resluts" not in set_names()
