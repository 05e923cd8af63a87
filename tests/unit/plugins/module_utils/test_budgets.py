# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout/budgets.py: which PodDisruptionBudgets would refuse a drain's evictions now (the dry run's plan),
by the Eviction API's rules: disruptionsAllowed > 0 admits one eviction each, a pod under two budgets is refused,
a budget without a status from the disruption controller admits none; LabelSelector semantics of policy/v1."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import budgets
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.node_cordon import budgets_now


def budget(name, selector, allowed=0, ns="shop", status=True):
    out = {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector}}
    if status:
        out["status"] = {"observedGeneration": 1, "disruptionsAllowed": allowed}
    return out


POD = {"namespace": "shop", "name": "db-0", "labels": {"app": "db", "tier": "data"}}
WEB = [{"namespace": "shop", "name": "web-%d" % i, "labels": {"app": "web"}} for i in range(3)]


@pytest.mark.parametrize("selector, selected", [
    ({"matchLabels": {"app": "db"}}, True),
    ({"matchLabels": {"app": "db", "tier": "cache"}}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "x"]}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    ({"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, False),
    ({}, True),            # policy/v1: an empty selector selects every pod of the namespace
    (None, False),         # a null one none
])
def test_label_selector_semantics(selector, selected):
    assert budgets.selects(selector, POD["labels"]) is selected


def test_a_budget_allowing_fewer_disruptions_than_its_pods_here_refuses_the_rest():
    out = budgets.blocking([budget("web", {"matchLabels": {"app": "web"}}, allowed=1),
                            budget("db", {"matchLabels": {"app": "db"}}, allowed=0),
                            budget("roomy", {"matchLabels": {"app": "web"}}, allowed=5, ns="other")], WEB + [POD])
    assert out == [{"namespace": "shop", "name": "db", "allowed": 0, "pods": ["shop/db-0"], "refused": 1, "several": []},
                   {"namespace": "shop", "name": "web", "allowed": 1, "pods": ["shop/web-0", "shop/web-1", "shop/web-2"],
                    "refused": 2, "several": []}]
    # enough disruptions: nothing to say
    assert budgets.blocking([budget("web", {"matchLabels": {"app": "web"}}, allowed=3)], WEB) == []


def test_a_pod_under_two_budgets_is_refused_and_a_budget_without_status_admits_nothing():
    out = budgets.blocking([budget("a", {"matchLabels": {"app": "db"}}, allowed=9),
                            budget("b", {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, allowed=9)], [POD])
    assert [(b["name"], b["refused"], b["several"]) for b in out] == [("a", 1, ["shop/db-0"]), ("b", 1, ["shop/db-0"])]
    fresh = budgets.blocking([budget("new", {"matchLabels": {"app": "db"}}, status=False)], [POD])
    assert [(b["allowed"], b["refused"]) for b in fresh] == [(0, 1)]


@pytest.mark.parametrize("bad", [
    {"metadata": {"name": "x"}, "spec": {}},
    budget("x", {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}),
    budget("x", {"matchLabels": ["app"]}),
    budget("x", {"matchLabels": {"app": "db"}}, allowed="1"),
])
def test_a_malformed_budget_is_an_error_naming_it(bad):
    with pytest.raises(NodefixError, match="PodDisruptionBudget"):
        budgets.blocking([bad], [POD])


class Api(object):
    def __init__(self, answer):
        self.answer = answer
        self.calls = 0

    def list_budgets(self):
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def pod(name, kind="ReplicaSet", labels=None, mirror=False):
    meta = {"namespace": "shop", "name": name, "labels": labels or {}, "ownerReferences": [{"kind": kind}]}
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    return {"metadata": meta}


def test_the_dry_runs_look_skips_what_a_drain_does_not_evict_and_says_when_it_could_not_read():
    everything = budget("all", {})
    api = Api([everything])
    assert budgets_now(api, [pod("ds", "DaemonSet"), pod("static", "Node", mirror=True)]) == {"budgets": []}
    assert api.calls == 0   # nothing a drain evicts: no request
    assert budgets_now(api, [pod("db-0", labels={"app": "db"})])["budgets"][0]["pods"] == ["shop/db-0"]
    said = budgets_now(Api(NodefixError("listing the PodDisruptionBudgets: the API server answered 403 forbidden")),
                       [pod("db-0")])
    assert said == {"budgets_error": "could not read the PodDisruptionBudgets: listing the PodDisruptionBudgets: "
                                     "the API server answered 403 forbidden"}
    assert "budgets_error" in budgets_now(Api([{"metadata": {}}]), [pod("db-0")])


def status(allowed=0, current=1, desired=1, seen=1):
    return {"observedGeneration": seen, "disruptionsAllowed": allowed, "currentHealthy": current,
            "desiredHealthy": desired}


def test_what_the_eviction_api_lets_through_without_a_budget_is_not_refused():
    """Review finding: canIgnorePDB - Succeeded, Failed and Pending pods and pods being deleted are deleted without
    a budget check; they were counted as refused."""
    tight = budget("db", {"matchLabels": {"app": "db"}})
    for done in (dict(POD, phase="Succeeded"), dict(POD, phase="Failed"), dict(POD, phase="Pending"),
                 dict(POD, deleting=True)):
        assert budgets.blocking([tight], [done]) == [], done
    assert budgets.blocking([tight], [dict(POD, phase="Running", ready=True)])[0]["refused"] == 1


def test_a_pod_that_is_not_ready_goes_free_as_the_budgets_policy_says():
    unready = dict(POD, phase="Running", ready=False)
    always = budget("db", {"matchLabels": {"app": "db"}})
    always["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
    assert budgets.blocking([always], [unready]) == []
    # IfHealthyBudget (the default): free only while the budget is healthy (currentHealthy >= desiredHealthy > 0)
    healthy = dict(budget("db", {"matchLabels": {"app": "db"}}), status=status(current=2, desired=2))
    assert budgets.blocking([healthy], [unready]) == []
    short = dict(budget("db", {"matchLabels": {"app": "db"}}), status=status(current=1, desired=2))
    assert budgets.blocking([short], [unready])[0]["refused"] == 1
    # a Ready pod always takes a disruption
    assert budgets.blocking([healthy], [dict(unready, ready=True)])[0]["refused"] == 1


def test_a_budget_changed_since_the_controller_judged_it_admits_nothing():
    """Review finding: observedGeneration below metadata.generation is a 429 ("still being processed")."""
    edited = dict(budget("db", {"matchLabels": {"app": "db"}}), status=status(allowed=5, seen=3))
    edited["metadata"]["generation"] = 4
    assert [(b["allowed"], b["refused"]) for b in budgets.blocking([edited], [POD])] == [(0, 1)]
    edited["metadata"]["generation"] = 3
    assert budgets.blocking([edited], [POD]) == []
