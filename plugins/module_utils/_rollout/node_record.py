# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""A node's finished remediation record, worked out from what remediate's rolling play REGISTERED for it - never a
``set_fact`` copy (issue 62's acceptance: no fact of the playbooks stores a node's outcome). The report, the fleet
gate and the fail play read it through the ``remediation_records`` filter.

The rolling play's results it reads (a host's variables, ``hostvars[host]``):

- ``_nodefix_audit_now`` - the plan step's audit before (registered, skipped or not, for every node the rolling play
  reached: a node without it was never reached - a later batch, a stopped rollout - and has no record);
- ``_nodefix_audit_now`` failed (the node answered; sudo, python, the module failed): ``failed`` at
  ``audit before``, with its message;
- ``_nodefix_audit_preflight`` - the storm breaker's audit: unreachable there, the node is ``unreachable`` at
  ``storm audit`` (failed there, ``failed`` at ``storm audit``);
- ``_nodefix_rollout`` / ``_nodefix_rollout_end`` - nodefix.k8s.rollout's begin and end: the action's own finished
  record (``remediation``: outcome, status, msg, seconds, finished); a rollout task that failed without one (its
  arguments could not be templated) is ``failed`` with its message;
- ``_nodefix_audit_again`` - the audit after of a node the rollout's end did not audit: unreachable there, the node
  is ``unreachable`` at ``audit after``, with what was recorded before it;
- ``_nodefix_dry_run_plan`` - check mode's plan of the node (kept as the record's ``plan``).

No I/O here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

# the registered results this reads (tests/unit/test_no_outcome_facts.py holds that no set_fact writes them)
REGISTERED = ("_nodefix_audit_now", "_nodefix_audit_preflight", "_nodefix_rollout", "_nodefix_rollout_end",
              "_nodefix_audit_again")
MSG_MAX = 300


def _result(hostvars, name):
    """A registered result of the host (a mapping), {} when there is none."""
    value = hostvars.get(name) if hasattr(hostvars, "get") else None
    return value if isinstance(value, dict) else {}


def one_line(text, limit=MSG_MAX):
    """``text`` on one line (white space squeezed), cut at a word before ``limit`` characters with ``...``."""
    text = re.sub(r"\s+", " ", "%s" % text)
    if len(text) <= limit:
        return text
    return text[:limit - 3].rsplit(" ", 1)[0] + "..."


def lost(step, result, roles, before=None):
    """The record of a node lost at ``step`` (``result``: that step's registered result): unreachable, with what the
    connection said and what was recorded before it."""
    msg = one_line(result.get("msg") or "unreachable")
    if before and before.get("status") != "unreachable":
        msg += " (before it: %s%s)" % (before.get("status"), ": %s" % before["msg"] if before.get("msg") else "")
    return {"status": "unreachable", "outcome": Outcome.UNREACHABLE, "step": step, "roles": list(roles), "msg": msg}


def failed_at(step, result):
    """The record of a node that answered but whose ``step`` failed (``result``: its registered result): failed,
    with the step's message."""
    return {"status": "failed", "outcome": Outcome.FAILED, "step": step, "roles": [],
            "msg": one_line(result.get("msg") or "failed")}


def _rollout_record(begin, end, plan):
    """The rollout action's finished record (end's, else begin's); a rollout task that failed without one: failed,
    with its message; None when no rollout task ran."""
    for result in (end, begin):
        if isinstance(result.get("remediation"), dict):
            return dict(result["remediation"])
    failed = end if end.get("failed") else begin if begin.get("failed") else None
    if failed is None:
        return None
    return {"status": "failed", "outcome": Outcome.FAILED, "roles": list(plan.get("fix_roles") or []),
            "msg": "%s" % (failed.get("msg") or "failed")}


def node_record(hostvars):
    """The finished remediation record of one node from its registered results (module docstring); None for a node
    the rolling play did not reach or that failed before its rollout task."""
    audit_now, preflight, begin, end, again = [_result(hostvars, name) for name in REGISTERED]
    if not audit_now:
        return None
    if audit_now.get("skipped") and preflight.get("unreachable"):
        return lost("storm audit", preflight, [])
    if audit_now.get("unreachable"):
        return lost("audit before", audit_now, [])
    # a node that answered but whose audit failed (sudo, python, a crash) is failed there, never "unreachable"
    if audit_now.get("skipped") and preflight.get("failed"):
        return failed_at("storm audit", preflight)
    if audit_now.get("failed"):
        return failed_at("audit before", audit_now)
    record = _rollout_record(begin, end, _result(hostvars, "_nodefix_plan"))
    if record is None:
        return None
    if again.get("unreachable"):
        record = lost("audit after", again, begin.get("fix_roles") or [], before=record)
    plan = _result(hostvars, "_nodefix_dry_run_plan")
    if plan:
        record["plan"] = plan
    return record


def records(hostvars, hosts, not_run=None, complete=False):
    """{host: its record} for each of ``hosts`` that has one (``hostvars``: Ansible's hostvars). ``complete``: every
    host, one without a record as ``{"not_run": true, "msg": why}`` when ``not_run`` names it (left alone on purpose:
    a rollout stopped before it), else ``{"unreachable": true, "msg": ...}`` (lost or failed before its rollout) - the
    report lists it instead of dropping it."""
    not_run = not_run or {}
    out = {}
    for host in hosts:
        try:
            rec = node_record(hostvars[host])
        except KeyError:
            rec = None
        if rec is not None:
            out[host] = rec
        elif complete and host in not_run:
            out[host] = {"not_run": True, "msg": "%s" % not_run[host]}
        elif complete:
            out[host] = {"unreachable": True, "msg": "no remediation record for this host (unreachable or failed "
                                                     "before its rollout)"}
    return out
