# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/tasks/dry_run_plan.yml hands the plan builder what remediate's check-mode tasks registered, each with a
``default``: a misspelt name would silently plan nothing for its role. Every variable it reads must be one that
another task file, play or role of the collection sets (``register:``, ``set_fact``, a role's defaults or vars, a
``vars:`` block) or a documented input of the playbooks (``playbooks/vars/arguments.yml``) - the plan file itself
does not count - and every field it reads of a collection module's
registered result (``_nodefix_rollout.state``: the rollout's check-mode drain step) must be in that module's RETURN."""

import glob
import json
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAN = os.path.join(ROOT, "playbooks", "tasks", "dry_run_plan.yml")
MAGIC = {"hostvars", "inventory_hostname", "ansible_check_mode"}
# what every registered result has, whatever its module returns
COMMON = {"changed", "failed", "msg", "skipped"}
EXPR = re.compile(r"\{\{(.*?)\}\}", re.S)
REF = re.compile(r"^\s*\(*\s*([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)?)")


def read_refs(text):
    """{(name, field or '')} of the first name of every {{ expression }} the plan task's facts hold."""
    facts = yaml.safe_load(text)[0]["vars"]["_facts"]
    refs = set()
    for expr in EXPR.findall(json.dumps(facts)):   # every string value of the facts, in one text
        match = REF.match(expr)
        if match and match.group(1) not in ("none", "true", "false"):
            refs.add((match.group(1), match.group(2).lstrip(".")))
    return refs


def _walk(node, found, registered, in_defaults):
    if isinstance(node, dict):
        if in_defaults:
            found.update(k for k in node if isinstance(k, str))
        if isinstance(node.get("register"), str):
            module = [k for k in node if isinstance(k, str) and k.startswith("nodefix.k8s.")]
            found.add(node["register"])
            registered[node["register"]] = module[0] if module else None
        for key in ("ansible.builtin.set_fact", "set_fact", "vars"):
            if isinstance(node.get(key), dict):
                found.update(k for k in node[key] if isinstance(k, str))
        for value in node.values():
            _walk(value, found, registered, False)
    elif isinstance(node, list):
        for value in node:
            _walk(value, found, registered, False)


def set_names():
    """({names set anywhere but the plan file}, {registered name: the nodefix.k8s module that returns it})."""
    found, registered = set(), {}
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "**", "*.yml"), recursive=True)
                       + glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True)):
        if os.path.samefile(path, PLAN) or "/meta/" in path or "/templates/" in path:
            continue
        with open(path) as fh:
            docs = list(yaml.safe_load_all(fh))
        defaults = os.path.basename(os.path.dirname(path)) in ("defaults", "vars")
        for doc in docs:
            if path.endswith(os.path.join("playbooks", "vars", "arguments.yml")):
                found.update(doc["arguments"])   # the playbooks' documented inputs (the preflight's spec)
                continue
            _walk(doc, found, registered, defaults)
    return found, registered


def returns(module):
    path = os.path.join(ROOT, "plugins", "modules", module.split(".")[-1] + ".py")
    with open(path) as fh:
        text = fh.read()
    doc = text.split('RETURN = r"""', 1)[1].split('"""', 1)[0]
    return set(yaml.safe_load(doc) or {})


def problems(refs):
    names, registered = set_names()
    out = []
    for name, field in sorted(refs):
        if name in MAGIC:
            continue
        if name not in names:
            out.append("%s: nothing sets it" % name)
        elif field and registered.get(name) and field not in returns(registered[name]) | COMMON:
            out.append("%s.%s: %s returns no %s" % (name, field, registered[name], field))
    return out


def test_every_variable_and_field_the_plan_reads_is_set_somewhere():
    with open(PLAN) as fh:
        refs = read_refs(fh.read())
    assert {("mount_units_estimate", ""), ("gvisor_eviction_results", ""), ("_nodefix_rollout", "state")} <= refs
    assert problems(refs) == []


def test_a_misspelt_name_or_field_in_the_plan_is_caught():
    with open(PLAN) as fh:
        text = fh.read()
    broken = (text.replace("gvisor_eviction_results", "gvisor_eviction_resluts")
              .replace("_nodefix_rollout.state.drain_plan.pods ", "_nodefix_rollout.stat.drain_plan.pods "))
    assert problems(read_refs(broken)) == ["_nodefix_rollout.stat: nodefix.k8s.rollout returns no stat",
                                           "gvisor_eviction_resluts: nothing sets it"]
