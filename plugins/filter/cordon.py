# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for remediate's cordon, drain and give-back (``_rollout.cordon``): who cordoned a node, whether a
drain is done, why a node stays cordoned."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon as _cordon


def cordon_reclaim(node, run_id):
    """What this run does first with a node an earlier run may have left cordoned (``_rollout.cordon.reclaim``)."""
    try:
        return _cordon.reclaim(node, run_id)
    except NodefixError as exc:
        raise AnsibleFilterError("cordon_reclaim: %s" % exc.msg)


def drain_outcome(before, after, error="", timeout=None):
    """Whether a drain is done, with the pods it evicted and those that blocked it (``_rollout.cordon``)."""
    try:
        return _cordon.drain_outcome(before, after, error, timeout)
    except NodefixError as exc:
        raise AnsibleFilterError("drain_outcome: %s" % exc.msg)


def hold_reasons(remediation, before, after=None, verify_error="", kernel_kept=None):
    """Why a node this run cordoned stays cordoned; empty when it may go back (``_rollout.cordon``)."""
    try:
        return _cordon.hold_reasons(remediation, before, after, verify_error, kernel_kept)
    except NodefixError as exc:
        raise AnsibleFilterError("hold_reasons: %s" % exc.msg)


class FilterModule(object):
    def filters(self):
        return {"cordon_reclaim": cordon_reclaim, "drain_outcome": drain_outcome, "hold_reasons": hold_reasons}
