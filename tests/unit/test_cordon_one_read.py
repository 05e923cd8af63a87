# SPDX-License-Identifier: GPL-3.0-or-later
"""One module round trip per check per node, before a drain: the Node is read ONCE (nodefix.k8s.node_cordon,
in playbooks/tasks/reclaim_cordon.yml), and that answer feeds the give-back, whether the node was cordoned
before, the pods before the drain and the cordon - cordon_drain.yml asks the API server nothing before the
drain. (Before: two kubernetes.core.k8s_info reads of the same Node, one of its pods, one k8s PATCH.)"""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = os.path.join(ROOT, "playbooks", "tasks")


def tasks(name):
    with open(os.path.join(TASKS, name)) as fh:
        todo, out = list(yaml.safe_load(fh)), []
    while todo:
        task = todo.pop(0)
        out.append(task)
        for key in ("block", "rescue", "always"):
            todo.extend(task.get(key) or [])
    return out


def modules(task_list):
    return [k for t in task_list for k in t if k.startswith(("kubernetes.core.", "nodefix.k8s."))]


def test_the_node_is_read_once_and_cordon_drain_asks_nothing_before_the_drain():
    reclaim, drain = tasks("reclaim_cordon.yml"), tasks("cordon_drain.yml")
    assert modules(reclaim) == ["nodefix.k8s.node_cordon"]
    before_drain = []
    for task in drain:
        if "kubernetes.core.k8s_drain" in task:
            break
        before_drain.append(task)
    assert modules(before_drain) == []
    # the pods before the drain and whether it was cordoned before are that one run's answer
    text = open(os.path.join(TASKS, "cordon_drain.yml")).read()
    assert "_nodefix_node_cordon.pods | nodefix.k8s.drain_outcome(" in text
    assert "_nodefix_node_cordon.cordoned_before" in text


def test_the_one_read_cordons_exactly_the_nodes_cordon_drain_drains():
    with open(os.path.join(ROOT, "playbooks", "remediate.yml")) as fh:
        plays = yaml.safe_load(fh)
    rolling = [p for p in plays if p.get("name") == "Remediate Kubernetes nodes (rolling)"][0]["tasks"]
    reclaim = [t for t in rolling if (t.get("ansible.builtin.include_tasks") or {}).get("file") == "tasks/reclaim_cordon.yml"][0]
    drain = [t for t in rolling if (t.get("ansible.builtin.include_tasks") or {}).get("file") == "tasks/cordon_drain.yml"][0]
    assert rolling.index(drain) == rolling.index(reclaim) + 1   # nothing between the read and the drain
    assert sorted(drain["when"]) == sorted(reclaim["when"] + ["_nodefix_fix_roles | length > 0", "not _nodefix_refused"])
    assert reclaim["vars"]["_nodefix_cordon"] == "{{ _nodefix_fix_roles | length > 0 and not _nodefix_refused }}"
