# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Review #1: the claim is judged again and renewed RIGHT BEFORE EVERY reboot path of playbooks/tasks/fix.yml - the
mount-unit cleanup's (inside its role), the kernel upgrade's, the pending reboot - never once before the first of
them (the kernel install and the other roles would then run on a lease renewed too early). Each such task is
immediately preceded, in the order Ansible runs the file, by a ``nodefix.k8s.rollout`` ``phase: recheck`` whose
result vars/rollout.yml reads (``_nodefix_recheck_last``)."""

import os

import yaml

import yaml_tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "playbooks", "tasks", "fix.yml")
VARS = os.path.join(ROOT, "playbooks", "vars", "rollout.yml")
INCLUDE = ("ansible.builtin.include_role", "include_role")


def ordered(path):
    """The tasks of ``path`` that run something, in file order (blocks flattened, their always after rescue)."""
    with open(path) as handle:
        loaded = yaml.safe_load(handle)
    return [t for t in yaml_tasks.tasks(loaded) if not any(k in t for k in ("block", "rescue", "always"))]


def reboot_paths(tasks):
    out = []
    for n, task in enumerate(tasks):
        role = next((task[k] for k in INCLUDE if k in task), None)
        if not isinstance(role, dict):
            continue
        rebooting = (role.get("name") == "nodefix.k8s.reboot" and role.get("tasks_from") == "reboot") or (
            role.get("name") == "nodefix.k8s.mount_units")
        if rebooting:
            out.append(n)
    return out


def test_every_reboot_path_is_right_after_a_recheck():
    tasks = ordered(FIX)
    paths = reboot_paths(tasks)
    assert len(paths) == 3, [tasks[n]["name"] for n in paths]       # mount units, the kernel's, the pending reboot
    registers = []
    for n in paths:
        before = tasks[n - 1]
        assert before.get("nodefix.k8s.rollout", {}).get("phase") == "recheck", (tasks[n]["name"], before["name"])
        assert "always" in before.get("tags", []), before["name"]
        registers.append(before["register"])
    assert len(set(registers)) == 3, registers          # a skipped recheck never overwrites one that ran
    with open(VARS) as handle:
        rollout_vars = yaml.safe_load(handle)
    for name in registers:
        assert name in rollout_vars["_nodefix_recheck_last"], name
    assert "_nodefix_recheck_last" in rollout_vars["_nodefix_state"]
    assert "_nodefix_recheck_last" in rollout_vars["reboot_allowed"]
