# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Which PodDisruptionBudgets would refuse a drain's evictions now - for the dry run's plan (nodefix.k8s.node_cordon
in check mode reads the budgets once; the real drain meets them as the Eviction API's 429).

The eviction API (``pkg/registry/core/pod/storage/eviction.go``) deletes without looking at any budget a pod that
is Succeeded, Failed or Pending, or already being deleted (``canIgnorePDB``); it refuses a pod matched by more than
one budget at once ("This pod has more than one PodDisruptionBudget", a 500: no retry helps); a pod that is not
Ready is evicted without taking a disruption when its budget's ``spec.unhealthyPodEvictionPolicy`` is
``AlwaysAllow``, or (``IfHealthyBudget``, the default) when ``status.currentHealthy >= status.desiredHealthy > 0``;
any other eviction needs ``status.disruptionsAllowed`` > 0 and takes one. A budget the disruption controller has
not judged since its last change (``status.observedGeneration`` missing or below ``metadata.generation``) admits
none. A budget's selector is a LabelSelector: ``matchLabels`` AND ``matchExpressions`` (In, NotIn, Exists,
DoesNotExist); in ``policy/v1`` an empty selector selects every pod of the namespace, a null one none
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/).

Each node is judged alone: nodes drained at the same time (``nodefix_serial`` above 1) share their budgets' room.

``blocking(budgets, pods)`` -> [{namespace, name, allowed, pods, refused, several}]: for each budget selecting any
of the drain's pods (``pods``: [{namespace, name, labels, phase, deleting, ready}]), how many disruptions it allows
now, the pods it covers here, how many of their evictions it would refuse and which of them are under more than one
budget; names only, nothing else of a pod or a budget.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError


def _requirement(labels, expr):
    """One matchExpressions term; NodefixError for one the API server would have refused."""
    if not isinstance(expr, dict) or not isinstance(expr.get("key"), str):
        raise NodefixError("a PodDisruptionBudget's matchExpressions term is not {key, operator, values}")
    key, op, values = expr["key"], expr.get("operator"), expr.get("values") or []
    if not isinstance(values, list):
        raise NodefixError("a PodDisruptionBudget's matchExpressions values are not a list")
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise NodefixError("a PodDisruptionBudget's matchExpressions operator %r is not In, NotIn, Exists or "
                       "DoesNotExist" % (op,))


def selects(selector, labels):
    """Whether a policy/v1 LabelSelector selects a pod with ``labels`` (None selects nothing, {} everything)."""
    if selector is None:
        return False
    if not isinstance(selector, dict):
        raise NodefixError("a PodDisruptionBudget's selector is not a mapping")
    match = selector.get("matchLabels") or {}
    if not isinstance(match, dict):
        raise NodefixError("a PodDisruptionBudget's matchLabels is not a mapping")
    exprs = selector.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise NodefixError("a PodDisruptionBudget's matchExpressions is not a list")
    return all(labels.get(k) == v for k, v in match.items()) and all(_requirement(labels, e) for e in exprs)


def _number(status, key):
    value = status.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise NodefixError("a PodDisruptionBudget's status.%s is not a whole number: %r" % (key, value))
    return value


def _allowed(budget):
    """The disruptions the budget admits now: 0 while the disruption controller has not judged its last change."""
    status = budget.get("status") or {}
    if not isinstance(status, dict):
        raise NodefixError("a PodDisruptionBudget's status is not a mapping")
    seen, generation = status.get("observedGeneration"), (budget.get("metadata") or {}).get("generation")
    if seen is None or (isinstance(generation, int) and isinstance(seen, int) and seen < generation):
        return 0
    return max(_number(status, "disruptionsAllowed"), 0)


def _free_when_unready(budget):
    """A pod that is not Ready is evicted without taking one of this budget's disruptions."""
    status = budget.get("status") if isinstance(budget.get("status"), dict) else {}
    if (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    desired = _number(status, "desiredHealthy")
    return desired > 0 and _number(status, "currentHealthy") >= desired


def ignores_budgets(pod):
    """The Eviction API deletes this pod without looking at any budget (canIgnorePDB)."""
    return bool(pod.get("deleting")) or pod.get("phase") in ("Succeeded", "Failed", "Pending")


def blocking(budgets, pods):
    """The budgets that select any of ``pods`` ([{namespace, name, labels}]: the pods the drain would evict) and
    what they would refuse now, in the order the drain meets the pods."""
    covered = {}
    for budget in budgets:
        meta = (budget or {}).get("metadata") if isinstance(budget, dict) else None
        if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
            raise NodefixError("a PodDisruptionBudget in the API server's answer has no namespace and name")
        spec = budget.get("spec") or {}
        if not isinstance(spec, dict):
            raise NodefixError("PodDisruptionBudget %s/%s: its spec is not a mapping" % (meta["namespace"], meta["name"]))
        here = [p for p in pods if p.get("namespace") == meta["namespace"] and not ignores_budgets(p)
                and selects(spec.get("selector"), p.get("labels") or {})]
        if here:
            covered[(meta["namespace"], meta["name"])] = (_allowed(budget), here, _free_when_unready(budget))
    counts = {}
    for _allowed_now, here, _free in covered.values():
        for p in here:
            counts[(p["namespace"], p["name"])] = counts.get((p["namespace"], p["name"]), 0) + 1
    out = []
    for (namespace, name), (allowed, here, free) in sorted(covered.items()):
        # a pod under two budgets is refused whatever they allow; a not-Ready pod may go free; the others take this
        # budget's disruptions
        several = ["%s/%s" % (p["namespace"], p["name"]) for p in here if counts[(p["namespace"], p["name"])] > 1]
        single = len([p for p in here if counts[(p["namespace"], p["name"])] == 1
                      and not (free and p.get("ready") is False)])
        out.append({"namespace": namespace, "name": name, "allowed": allowed,
                    "pods": ["%s/%s" % (p["namespace"], p["name"]) for p in here],
                    "refused": len(several) + max(single - allowed, 0), "several": several})
    return [b for b in out if b["refused"]]
