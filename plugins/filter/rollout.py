# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for remediate's rollout outcome (``_rollout.outcome``): what became of a node, as one value of the
outcome enum, never read from a message's text."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import outcome as _outcome


def rollout_outcome(record):
    """The outcome (ok, nothing_to_fix, held, refused, drain_failed, not_verified, failed, unreachable, stopped) of a
    node's remediation record."""
    try:
        return _outcome.outcome_of(record)
    except NodefixError as exc:
        raise AnsibleFilterError("rollout_outcome: %s" % exc.msg)


class FilterModule(object):
    def filters(self):
        return {"rollout_outcome": rollout_outcome}
