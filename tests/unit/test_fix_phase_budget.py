# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Review R3/R8: what playbooks/tasks/fix.yml runs is bounded by what the rollout's claim assumes - the in-place
mount-unit cleanup by the fix phase's cover (nodefix_fix_timeout; the role's own default, mount_units_max_seconds 0,
is no budget at all), the mount-unit reboot by the rollout's reboot_timeout (the recheck's lease is computed from it;
the role's own mount_units_reboot_timeout, 900 unless set, is not)."""

import os

import jinja2
import yaml

import yaml_tasks

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "playbooks", "tasks", "fix.yml")
VARS = os.path.join(ROOT, "playbooks", "vars", "rollout.yml")


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _mount_units_vars():
    task = next(t for t in yaml_tasks.tasks(_load(FIX))
                if (t.get("ansible.builtin.include_role") or {}).get("name") == "nodefix.k8s.mount_units")
    return task["vars"]


def _budget(**given):
    # plain Jinja2 (the filters used - default, int, float, max, min - are Jinja2's own, as Ansible runs them)
    text = _load(VARS)["_nodefix_mount_units_budget"]
    return float(jinja2.Environment().from_string(text).render(**given))


def test_the_in_place_cleanup_is_bounded_by_the_fix_phase_cover():
    assert _mount_units_vars()["mount_units_max_seconds"] == "{{ _nodefix_mount_units_budget }}"
    assert "nodefix_fix_timeout" in _load(VARS)["_nodefix_mount_units_budget"]
    assert _budget() == mctx.DEFAULTS["fix_timeout"] - 300 == 3300
    assert _budget(nodefix_fix_timeout=7200) == 6900
    assert _budget(nodefix_fix_timeout=200) == 100          # a short cover: half of it
    assert _budget(nodefix_fix_timeout=0) == 1              # never 0, the role's "no budget"
    assert _budget(nodefix_mount_units_max_seconds=600) == 600
    assert _budget(nodefix_mount_units_max_seconds=9999) == 3300      # the user's setting never outlives the cover
    assert _budget(nodefix_mount_units_max_seconds=0) == 3300


def test_the_mount_unit_reboot_keeps_the_role_s_own_timeout():
    # review R8 is not fixed: setting mount_units_reboot_timeout from reboot_timeout inside the include made the role's
    # `reboot_timeout: "{{ mount_units_reboot_timeout }}"` a template loop ("Recursive loop detected", every reboot
    # of the reboot lab failed); both default to 900, and the lease assumes the action's reboot_timeout
    assert "mount_units_reboot_timeout" not in _mount_units_vars()
