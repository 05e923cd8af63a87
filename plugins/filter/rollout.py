# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for remediate's rollout outcome (``_rollout.outcome``): what became of a node, as one value of the
outcome enum, never read from a message's text; each node's record from its registered results
(``_rollout.node_record``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_record as _node_record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import outcome as _outcome


def rollout_outcome(record):
    """The outcome (ok, nothing_to_fix, held, refused, drain_failed, not_verified, failed, unreachable, stopped) of a
    node's remediation record."""
    try:
        return _outcome.outcome_of(record)
    except NodefixError as exc:
        raise AnsibleFilterError("rollout_outcome: %s" % exc.msg)


def remediation_records(hostvars, hosts, not_run=None, complete=False):
    """{host: its finished remediation record}, worked out from what remediate's rolling play registered for each
    host (``_rollout.node_record``) - never a fact copy."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("remediation_records: hosts must be a list of host names, got %s"
                                 % type(hosts).__name__)
    if not_run is not None and not isinstance(not_run, dict):
        raise AnsibleFilterError("remediation_records: not_run must be a dict of host: reason, got %s"
                                 % type(not_run).__name__)
    return _node_record.records(hostvars, hosts, not_run, bool(complete))


class FilterModule(object):
    def filters(self):
        return {"remediation_records": remediation_records, "rollout_outcome": rollout_outcome}
