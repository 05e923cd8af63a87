# SPDX-License-Identifier: GPL-3.0-or-later
"""The storm breaker re-counts before every node (issue 62, the rollout review): 10 nodes, 2 NotReady at the start,
3 more NotReady during the first node's drain - the second node was still drained, exit 0, because the breaker
judged once per run. The verdict over a fresh read of the Nodes stops the rollout (the decision, over the storm
record as storm_gate builds it). ONE place counts again: the rollout machine's storm step, right before each node's
cordon (test_rollout_machine.py::test_a_storm_that_grows_during_a_drain_stops_the_next_node); the rolling play
passes it every storm option, and the fleet gate reads no Nodes of its own (review 9a: its per-batch re-count was a
second rule beside the machine's step, which was never fed)."""

import os

import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES = ["node-%02d" % i for i in range(10)]


def record(not_ready):
    """The unsliced storm record: the targets' plans (node-00 and node-01 need a drain) and the cluster's view."""
    plans = dict((n, {"node": n, "disruptive": ["drain"] if n in ("node-00", "node-01") else [], "findings": []})
                 for n in NODES)
    view = {"selector": None, "error": None, "nodes": dict((n, ["NotReady"] if n in not_ready else []) for n in NODES)}
    return {"run": storm.record("run", plans, "2026-12-06T07:00:00Z", cluster=view)}


def test_a_storm_that_grows_during_the_rollout_stops_it_at_the_next_count():
    first = storm.verdict(record(["node-08"]), 30)                       # 3 of 10 (30 %): not over 30 %
    assert not first["stop"] and first["affected"] == 3, first
    later = storm.verdict(record(["node-08", "node-07", "node-06", "node-05"]), 30)   # 6 of 10 during the drain
    assert later["stop"] and later["affected"] == 6 and "storm breaker: 6 of 10 node(s) (60%)" in later["msg"], later


def test_one_place_counts_again_the_rollout_given_every_storm_option():
    with open(os.path.join(ROOT, "playbooks", "vars", "rollout.yml"), encoding="utf-8") as fh:
        options = yaml.safe_load(fh)["_nodefix_rollout_options"]
    storm_options = [k for k in mctx.DEFAULTS if k.startswith("storm_")]
    assert storm_options and all(k in options for k in storm_options), storm_options
    assert "_nodefix_storm_percent" in options["storm_percent"] and "ansible_play_batch" in options["storm_batch"]
    with open(os.path.join(ROOT, "playbooks", "tasks", "fleet_gate.yml"), encoding="utf-8") as fh:
        tasks = yaml.safe_load(fh)
    recount = [t for t in tasks if "nodefix.k8s.storm_gate" in t and "kubeconfig" in t["nodefix.k8s.storm_gate"]]
    assert recount == [], "the fleet gate reads no Nodes: the rollout's storm step is the one re-count"
