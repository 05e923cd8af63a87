# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's finished remediation record, worked out from what remediate's rolling play registered
(``_rollout/node_record.py``; the ``remediation_records`` filter the report, the fleet gate and the fail play read):
the rollout action's own record, an honest ``unreachable`` at the step that lost the node, ``failed`` for a rollout
task that failed without a record - never a set_fact copy (tests/unit/test_no_outcome_facts.py)."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.filter.rollout import remediation_records
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_record

SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
LOST = {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh:\n  timed   out"}
OK = {"status": "ok", "outcome": "ok", "roles": ["nodefix.k8s.containerd"], "msg": "fixed and verified",
      "seconds": 12.5, "finished": 1700000000}
BEGIN = {"outcome": None, "fix_roles": ["nodefix.k8s.containerd"], "state": {}, "changed": True}
PLAN = {"fix_roles": ["nodefix.k8s.containerd"], "reboot_reasons": []}


def host(**registered):
    return dict({"_nodefix_audit_now": SKIPPED, "_nodefix_plan": PLAN}, **registered)


def test_a_node_the_rolling_play_did_not_reach_has_no_record():
    # a later batch, a stopped rollout: the storm breaker's audit alone says nothing of its rollout
    assert node_record.node_record({"_nodefix_audit_preflight": LOST}) is None
    assert node_record.node_record({}) is None


def test_unreachable_at_the_storm_audit_or_the_audit_before():
    rec = node_record.node_record({"_nodefix_audit_preflight": LOST, "_nodefix_audit_now": SKIPPED})
    assert rec == {"status": "unreachable", "outcome": "unreachable", "step": "storm audit", "roles": [],
                   "msg": "Failed to connect to the host via ssh: timed out"}
    rec = node_record.node_record({"_nodefix_audit_preflight": {"findings": []}, "_nodefix_audit_now": LOST})
    assert (rec["outcome"], rec["step"]) == ("unreachable", "audit before")


def test_a_failed_audit_before_is_failed_there_not_unreachable():
    """Review R6: a node that answered but whose audit before failed (sudo, python, a crash) had no record, and the
    report called it unreachable."""
    audit = {"failed": True, "msg": "Missing sudo password"}
    rec = node_record.node_record({"_nodefix_audit_preflight": {"findings": []}, "_nodefix_audit_now": audit})
    assert rec == {"status": "failed", "outcome": "failed", "step": "audit before", "roles": [],
                   "msg": "Missing sudo password"}
    out = node_record.records({"n1": {"_nodefix_audit_now": audit}}, ["n1"], {}, True)["n1"]
    assert out["status"] == "failed" and "unreachable" not in out


def test_the_rollout_actions_own_record_end_before_begin():
    begin_done = dict(BEGIN, outcome="nothing_to_fix", remediation={"status": "skipped", "outcome": "nothing_to_fix",
                                                                    "roles": [], "msg": "", "seconds": 1.0})
    assert node_record.node_record(host(_nodefix_rollout=begin_done, _nodefix_rollout_end=SKIPPED))["outcome"] \
        == "nothing_to_fix"
    rec = node_record.node_record(host(_nodefix_rollout=BEGIN, _nodefix_rollout_end={"remediation": OK},
                                       _nodefix_audit_again=SKIPPED))
    assert rec == OK


def test_a_rollout_task_that_failed_without_a_record_is_failed_with_its_message():
    failed = {"failed": True, "msg": "The task includes an option with an undefined variable"}
    rec = node_record.node_record(host(_nodefix_rollout=failed, _nodefix_rollout_end=SKIPPED))
    assert rec == {"status": "failed", "outcome": "failed", "roles": PLAN["fix_roles"], "msg": failed["msg"]}
    rec = node_record.node_record(host(_nodefix_rollout=BEGIN, _nodefix_rollout_end=failed))
    assert (rec["outcome"], rec["msg"]) == ("failed", failed["msg"])


def test_a_node_that_failed_before_its_rollout_task_has_no_record():
    # the play failed it (templating, a module error): the fleet gate counts it as a crashed host, the report as lost
    assert node_record.node_record(host()) is None


def test_lost_at_the_audit_after_says_what_was_recorded_before_it():
    held = {"status": "skipped", "outcome": "held", "roles": [], "msg": "held: backoff"}
    begin = dict(BEGIN, outcome="held", remediation=held)
    rec = node_record.node_record(host(_nodefix_rollout=begin, _nodefix_rollout_end=SKIPPED, _nodefix_audit_again=LOST))
    assert rec["outcome"] == "unreachable" and rec["step"] == "audit after"
    assert rec["msg"].endswith("(before it: skipped: held: backoff)")
    assert rec["roles"] == BEGIN["fix_roles"]


def test_the_message_is_one_line_and_bounded():
    rec = node_record.node_record({"_nodefix_audit_now": dict(LOST, msg="word " * 200)})
    assert "\n" not in rec["msg"] and len(rec["msg"]) <= node_record.MSG_MAX and rec["msg"].endswith("...")


def test_check_modes_plan_joins_the_record():
    plan = {"node": "n", "steps": []}
    rec = node_record.node_record(host(_nodefix_rollout=BEGIN, _nodefix_rollout_end={"remediation": OK},
                                       _nodefix_dry_run_plan=plan))
    assert rec == dict(OK, plan=plan)


def test_the_filter_maps_hosts_and_fills_the_rest_only_when_complete():
    hostvars = {"a": host(_nodefix_rollout=BEGIN, _nodefix_rollout_end={"remediation": OK}), "b": {}, "c": {}}
    assert remediation_records(hostvars, ["a", "b", "gone"]) == {"a": OK}
    out = remediation_records(hostvars, ["a", "b", "c"], {"b": "stopped: over the limit"}, True)
    assert out["a"] == OK and out["b"] == {"not_run": True, "msg": "stopped: over the limit"}
    assert out["c"]["unreachable"] is True


@pytest.mark.parametrize("hosts, not_run", [("a", None), (["a"], ["b"])])
def test_the_filter_refuses_what_is_not_a_host_list_or_a_reason_map(hosts, not_run):
    with pytest.raises(AnsibleFilterError, match="remediation_records"):
        remediation_records({}, hosts, not_run)
