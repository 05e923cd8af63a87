# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for remediate's dry run (``_rollout.dry_run``): each node's plan from what its check-mode tasks
registered, and the plan in words."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import dry_run as _dry_run


def dry_run_plan(facts):
    """The node's plan (``_rollout.dry_run.build_plan``) from remediate's check-mode facts."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("dry_run_plan: expected a mapping of remediate's facts, got %s" % type(facts).__name__)
    return _dry_run.build_plan(facts)


def dry_run_plan_lines(plan):
    """The plan in words, one line a step (``_rollout.dry_run.plan_lines``)."""
    if not isinstance(plan, dict):
        raise AnsibleFilterError("dry_run_plan_lines: expected a plan (dry_run_plan's result), got %s"
                                 % type(plan).__name__)
    return _dry_run.plan_lines(plan)


class FilterModule(object):
    def filters(self):
        return {"dry_run_plan": dry_run_plan, "dry_run_plan_lines": dry_run_plan_lines}
