# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.outcome (issue 62): a node's outcome is one value of the enum that the report's metrics, the Events and
the exit code read - "held" and "nothing to fix" were both ``status: skipped``, told apart by ``msg is
match('held:')``. The playbook's fail task reads the filter; no playbook tests a message prefix any more."""

import glob
import os
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.nodefix.k8s.plugins.filter.rollout import rollout_outcome
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._report import prometheus as report_prometheus
from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import build_model
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome, outcome_of

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


@pytest.mark.parametrize("record, outcome", [
    ({"status": "skipped", "outcome": "held", "msg": "nothing to fix, says the text"}, Outcome.HELD),
    ({"status": "skipped", "msg": "held: a message prefix is not read"}, Outcome.NOTHING_TO_FIX),
    ({"status": "ok"}, Outcome.OK),
    ({"status": "failed", "held": ["still open after the fix: x"]}, Outcome.NOT_VERIFIED),
    ({"status": "failed", "drain": {}}, Outcome.DRAIN_FAILED),
    ({"status": "failed", "refused": True}, Outcome.REFUSED),
    ({"status": "failed"}, Outcome.FAILED),
    ({"status": "unreachable", "step": "fixes"}, Outcome.UNREACHABLE),
    (None, Outcome.STOPPED),
], ids=lambda v: str(v)[:40])
def test_the_outcome_comes_from_the_record_never_from_its_text(record, outcome):
    assert outcome_of(record) == outcome and rollout_outcome(record) == outcome


@pytest.mark.parametrize("record", [{"status": "ok", "outcome": "fine"}, {"status": "weird"}, ["not", "a", "dict"]])
def test_a_record_the_enum_cannot_read_is_an_error_naming_it(record):
    with pytest.raises(NodefixError):
        outcome_of(record)


def test_a_held_node_is_a_held_event_not_nothing_to_fix():
    held = {"status": "skipped", "outcome": "held", "roles": ["nodefix.k8s.kubelet"],
            "msg": "held: held cordoned by run r1: still open after the fix"}
    events = trail.end_events("r2", {"findings": []}, {"findings": []}, held, 1764150000.0)
    assert [(e["reason"], e["type"]) for e in events] == [("Held", "Warning")]


def test_the_metrics_carry_the_enum():
    results = {"a": {"findings": []}, "b": {"findings": []}, "c": {"findings": []}}
    rem = {"a": {"status": "skipped", "outcome": "held", "msg": "held: x"}, "b": {"status": "skipped", "msg": "nothing"},
           "c": {"status": "failed", "outcome": "drain_failed", "msg": "drain failed"}}
    text = report_prometheus.fleet_textfile(build_model(results, before=results, remediation=rem))
    fams = dict((f.name, f.samples) for f in text_string_to_metric_families(text))
    on = sorted((s.labels["node"], s.labels["result"]) for s in fams["nodefix_remediation_result"] if s.value == 1)
    assert on == [("a", "held"), ("b", "nothing_to_fix"), ("c", "drain_failed")]
    assert len(fams["nodefix_remediation_result"]) == 3 * len(Outcome.ALL)


def test_no_playbook_or_plugin_tells_an_outcome_by_a_message_prefix():
    said = []
    for path in glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")) + \
            glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True):
        with open(path) as handle:
            text = handle.read()
        said += ["%s: %s" % (os.path.relpath(path, ROOT), m) for m in re.findall(r"msg[^\n]*is match\('[^']*'\)", text)]
    assert said == []
