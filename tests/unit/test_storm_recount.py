# SPDX-License-Identifier: GPL-3.0-or-later
"""The storm breaker re-counts before every batch (issue 62, the rollout review): 10 nodes, 2 NotReady at the start,
3 more NotReady during the first node's drain - the second node was still drained, exit 0, because the breaker
judged once per run. The verdict over a fresh read of the Nodes stops the rollout (the decision, over the storm
record as storm_gate builds it), and the rolling play's fleet gate - run before every batch - asks for that fresh
count before every batch after the first, unsliced (tasks/fleet_gate.yml)."""

import os

import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm

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


def test_the_fleet_gate_counts_the_storm_again_before_every_later_batch():
    with open(os.path.join(ROOT, "playbooks", "remediate.yml"), encoding="utf-8") as fh:
        rolling = [p for p in yaml.safe_load(fh) if p.get("name") == "Remediate Kubernetes nodes (rolling)"][0]
    assert rolling["tasks"][0].get("ansible.builtin.import_tasks") == "tasks/fleet_gate.yml"   # before every batch
    with open(os.path.join(ROOT, "playbooks", "tasks", "fleet_gate.yml"), encoding="utf-8") as fh:
        tasks = yaml.safe_load(fh)
    recount = [t for t in tasks if "nodefix.k8s.storm_gate" in t and "kubeconfig" in t["nodefix.k8s.storm_gate"]]
    assert len(recount) == 1, "one storm_gate task in the fleet gate reads the cluster's Nodes again"
    task = recount[0]
    assert "nodefix_slice is not defined" in task["when"] and "hostvars.localhost._nodefix_last_batch is defined" in \
        task["when"]
    stop = [t for t in tasks if t.get("ansible.builtin.set_fact", {}).get("_nodefix_storm") == "{{ _nodefix_storm_recount }}"]
    end = [i for i, t in enumerate(tasks) if t.get("ansible.builtin.meta") == "end_play" and "_nodefix_storm.stop" in
           str(t.get("when"))]
    assert stop and end and tasks.index(stop[0]) < end[0], "a storm counted again ends the play before the batch"
