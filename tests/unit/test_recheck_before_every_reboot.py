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


def kernel_install(task):
    role = next((task[k] for k in INCLUDE if k in task), None) or {}
    return role.get("name") == "nodefix.k8s.kernel" and role.get("tasks_from") == "upgrade"


def test_every_reboot_path_is_right_after_a_recheck():
    tasks = ordered(FIX)
    paths = reboot_paths(tasks)
    assert len(paths) == 3, [tasks[n]["name"] for n in paths]       # mount units, the kernel's, the pending reboot
    registers = []
    for n in paths:
        # (the kernel's reboot: its recheck comes before the install that arms the one-time boot - kernel_install)
        before = tasks[n - 2] if kernel_install(tasks[n - 1]) else tasks[n - 1]
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


def test_the_kernel_recheck_runs_before_the_install_that_arms_the_boot_once():
    """Review R2: the install (roles/kernel/tasks/upgrade.yml) arms kernel_boot state=once; a recheck after it that
    held the reboot left the untested kernel armed for the node's next reboot, whoever does it, and the record said
    no kernel was upgraded. The recheck comes first: held, the install is skipped with the reboot (its block's
    condition, _nodefix_kernel_upgrading, reads reboot_allowed from the latest recheck)."""
    tasks = ordered(FIX)
    install = next(n for n, t in enumerate(tasks) if kernel_install(t))
    recheck = next(n for n, t in enumerate(tasks) if t.get("register") == "_nodefix_recheck_kernel")
    assert recheck == install - 1, (recheck, install)
    with open(VARS) as handle:
        rollout_vars = yaml.safe_load(handle)
    assert "reboot_allowed" in rollout_vars["_nodefix_kernel_upgrading"]
    with open(FIX) as handle:
        block = next(t for t in yaml.safe_load(handle)[0]["block"] if t.get("name") == "Upgrade the kernel and boot it once")
    assert "_nodefix_kernel_upgrading" in block["when"]
