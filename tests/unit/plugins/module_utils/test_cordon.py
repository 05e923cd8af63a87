# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.cordon: who cordoned a node (a dead run's cordon is given back, an operator's stays), whether a drain
is done (kubernetes.core.k8s_drain's rc alone proves nothing), and why a node stays cordoned (not verified);
and the Events the trail tells of them (_report.trail)."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon

T0 = 1764150000.0


def node(unschedulable=False, **annotations):
    return {"kind": "Node", "metadata": {"name": "node-a", "annotations": annotations},
            "spec": {"unschedulable": True} if unschedulable else {}}


def by(run="dead-1", when="2026-11-27T10:00:00Z"):
    return json.dumps({"run": run, "time": when})


def pod(name, ns="default", owner="ReplicaSet", mirror=False, phase="Running", terminating=False):
    meta = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": name.rsplit("-", 1)[0]}]
    if mirror:
        meta["annotations"] = {cordon.MIRROR: "x"}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-27T10:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


# ---- reclaim --------------------------------------------------------------------------------------------------

def test_a_dead_runs_cordon_is_given_back_naming_the_run():
    out = cordon.reclaim(node(True, **{cordon.CORDONED_BY: by()}), "now-2")
    assert out["action"] == "give_back" and out["by"]["run"] == "dead-1"
    assert "dead-1" in out["msg"] and "2026-11-27T10:00:00Z" in out["msg"] and "given back" in out["msg"]


@pytest.mark.parametrize("n,action,says", [
    (node(True), "keep", "operator"),                                                       # an operator's cordon
    (node(True, **{cordon.CORDONED_BY: by(), cordon.HELD: json.dumps({"run": "r9", "reason": "still open: x"})}),
     "keep", "still open: x"),                                                              # held: not verified
    (node(True, **{cordon.CORDONED_BY: "not json"}), "keep", "cannot be read"),             # fail closed
    (node(True, **{cordon.CORDONED_BY: json.dumps({"time": "t"})}), "keep", "cannot be read"),  # no run id
    # a record with this run's own id is an earlier run's (the give-back runs before this run cordons): a reused
    # -e nodefix_run of a killed run never strands its node
    (node(True, **{cordon.CORDONED_BY: by("now-2")}), "give_back", "never gave it back"),
    (node(False, **{cordon.CORDONED_BY: by()}), "clear", "stale"),                          # uncordoned by hand
    (node(False), "none", ""),
], ids=["operator", "held", "unreadable", "no-run", "own-run", "stale", "schedulable"])
def test_only_a_dead_runs_cordon_is_given_back(n, action, says):
    out = cordon.reclaim(n, "now-2")
    assert out["action"] == action and says in out["msg"], out


@pytest.mark.parametrize("bad", [None, [], {"metadata": "x"}, {"metadata": {"annotations": ["x"]}}])
def test_a_node_of_the_wrong_shape_is_refused(bad):
    with pytest.raises(cordon.CordonInputError):
        cordon.reclaim(bad, "r")


# ---- drain_outcome --------------------------------------------------------------------------------------------

BEFORE = [pod("web-1"), pod("db-0", owner="StatefulSet"), pod("proxy-a", ns="kube-system", owner="DaemonSet"),
          pod("etcd-a", ns="kube-system", owner=None, mirror=True), pod("job-1", owner="Job", phase="Succeeded")]


def test_a_drain_that_left_no_evictable_pod_is_done():
    after = [pod("proxy-a", ns="kube-system", owner="DaemonSet"), pod("etcd-a", ns="kube-system", owner=None, mirror=True)]
    out = cordon.drain_outcome(BEFORE, after)
    assert out["done"] and out["evicted"] == ["default/db-0", "default/web-1"] and out["blocked"] == []


def test_a_timed_out_drain_is_not_done_and_names_the_pods():
    """k8s_drain returned (rc 0, changed, a warning): the pod still terminating makes it a failed drain."""
    after = [pod("db-0", owner="StatefulSet", terminating=True), pod("proxy-a", ns="kube-system", owner="DaemonSet")]
    out = cordon.drain_outcome(BEFORE, after, "", 30)
    assert not out["done"] and out["evicted"] == ["default/web-1"]
    assert out["blocked"] == [{"pod": "default/db-0", "why": "terminating"}]
    assert out["msg"] == ("drain failed: timed out after 30 s with pods still on the node; evicted: default/web-1; "
                          "blocked: default/db-0 (terminating)")


def test_a_disruption_budget_midway_names_the_evicted_and_the_refused_pod():
    error = ("Failed to delete pod default/db-0 due to: Cannot evict pod as it would violate the pod's "
             "disruption budget.")
    out = cordon.drain_outcome(BEFORE, [pod("db-0", owner="StatefulSet")], error, 30)
    assert not out["done"] and out["evicted"] == ["default/web-1"]
    assert out["blocked"] == [{"pod": "default/db-0", "why": "refused by a PodDisruptionBudget"}]
    assert "PodDisruptionBudget refused an eviction until the drain timeout" in out["msg"]


def test_a_drain_that_failed_with_nothing_left_is_still_failed():
    out = cordon.drain_outcome(BEFORE, [], "Failed to retrieve node 'node-a' due to: Forbidden")
    assert not out["done"] and "Forbidden" in out["msg"]


def test_an_api_error_that_left_pods_behind_is_the_cause_not_a_timeout():
    """Review 9b: the drain's own error (an eviction the API server answered 500) is what failed it."""
    error = "eviction of pod default/db-0: the API server answered 500 Internal Server Error: etcd is down"
    out = cordon.drain_outcome(BEFORE, [pod("db-0", owner="StatefulSet")], error, 600)
    assert out["msg"] == ("drain failed: %s; evicted: default/web-1; blocked: default/db-0 (still running)" % error)


def test_a_pod_list_of_the_wrong_shape_is_refused():
    with pytest.raises(cordon.CordonInputError):
        cordon.drain_outcome(BEFORE, None)


# ---- hold_reasons ---------------------------------------------------------------------------------------------

def finding(fid, role):
    return {"id": fid, "check": fid.split(".")[0], "fix": {"role": role}}


AUDIT_BEFORE = {"checks": {"kubelet": {}, "kernel": {}},
                "findings": [finding("kubelet.api_qps_low", "nodefix.k8s.kubelet"),
                             finding("kernel.no_oom_reaper", "nodefix.k8s.kernel")]}
OK = {"status": "ok", "roles": ["nodefix.k8s.kubelet", "nodefix.k8s.kernel"]}


def test_a_verified_fix_goes_back_even_with_report_only_findings_open():
    after = {"checks": {"kubelet": {}, "kernel": {}}, "findings": [finding("kernel.no_oom_reaper", "nodefix.k8s.kernel")]}
    assert cordon.hold_reasons(OK, AUDIT_BEFORE, after) == []


@pytest.mark.parametrize("rem,after,error,kept,reason", [
    ({"status": "failed", "msg": "Restart kubelet: failed"}, None, "", None, "remediation failed: Restart kubelet: failed"),
    (OK, None, "", None, "could not run"),
    (OK, {"checks": {}}, "unreachable", None, "could not run: unreachable"),
    (OK, {"checks": {"kubelet": {}, "kernel": {}}, "findings": [finding("kubelet.api_qps_low", "nodefix.k8s.kubelet")]},
     "", None, "still open after the fix: kubelet.api_qps_low"),
    (OK, {"checks": {"kubelet": {"error": "boom"}, "kernel": {}},
          "findings": [{"id": "audit.check_failed", "subject": "kubelet"}]},
     "", None, "not verified (its detector could not run after the fix): kubelet.api_qps_low"),
    (OK, {"checks": {"kernel": {}}, "findings": []}, "", None, "not verified (its detector"),  # not run at all
    (OK, {"checks": {"kubelet": {}, "kernel": {}}, "findings": []}, "", False, "the new kernel was not kept"),
], ids=["failed", "no-after", "verify-error", "still-open", "check-failed", "check-absent", "kernel-not-kept"])
def test_a_node_not_verified_stays_cordoned(rem, after, error, kept, reason):
    reasons = cordon.hold_reasons(rem, AUDIT_BEFORE, after, error, kept)
    assert any(reason in r for r in reasons), reasons


def test_a_node_lost_during_its_fixes_or_its_verify_stays_cordoned():
    """Unreachable at its fixes or at the audit after: what was done to it is unverified - held, never given back."""
    rem = {"status": "unreachable", "step": "fixes", "roles": ["nodefix.k8s.pids"], "msg": "gone"}
    assert cordon.hold_reasons(rem, AUDIT_BEFORE, None) == ["unreachable at fixes: gone"]


def test_a_skipped_remediation_holds_nothing():
    assert cordon.hold_reasons({"status": "skipped"}, AUDIT_BEFORE, None) == []


# ---- the trail's Events -------------------------------------------------------------------------------------

def reasons(rem, **kw):
    return [e["reason"] for e in trail.end_events("r", AUDIT_BEFORE, {"findings": []}, rem, T0, **kw)]


def test_the_trail_says_a_dead_runs_cordon_was_given_back():
    rem = {"status": "skipped", "roles": [], "msg": "nothing to fix", "given_back": "cordoned by nodefix run dead-1"}
    events = trail.end_events("r", AUDIT_BEFORE, {"findings": []}, rem, T0)
    assert [e["reason"] for e in events] == ["GivenBack", "NothingToFix"]
    assert events[0]["note"] == "run r: cordoned by nodefix run dead-1" and events[0]["type"] == "Normal"


def test_the_trail_says_a_node_not_verified_stays_cordoned():
    rem = {"status": "failed", "roles": ["nodefix.k8s.kubelet"], "msg": "not verified", "held": ["still open: x"]}
    events = trail.end_events("r", AUDIT_BEFORE, {"findings": []}, rem, T0, drained=True)
    assert [e["reason"] for e in events][-1] == "LeftCordonedUnverified" and "Uncordoned" not in [e["reason"] for e in events]
    assert "still open: x" in events[-1]["note"] and events[-1]["type"] == "Warning"


def test_a_failed_drain_is_one_event_saying_the_node_was_given_back():
    rem = {"status": "failed", "roles": ["nodefix.k8s.kubelet"], "msg": "drain failed: x; nothing was fixed"}
    assert reasons(rem, drain_error="drain failed: x") == ["DrainFailed"]
    (event,) = trail.end_events("r", AUDIT_BEFORE, {"findings": []}, rem, T0, drain_error="drain failed: x")
    assert event["note"] == "run r: drain failed: x; nothing was fixed, given back"


def test_findings_a_role_only_reports_do_not_hold_the_node():
    """A zombie leaker (the workload's bug) or a gVisor sandbox still sized as before (until its pod is
    recreated) is still there after the fix by design: not a reason to keep the node cordoned."""
    before = {"findings": [{"id": "pids.zombie_leaker", "check": "pids", "fix": {"role": "nodefix.k8s.pids"}},
                           {"id": "gvisor.sandbox_oversized", "check": "gvisor", "fix": {"role": "nodefix.k8s.gvisor"}}]}
    after = {"checks": {"pids": {}, "gvisor": {}}, "findings": [dict(f) for f in before["findings"]]}
    rem = {"status": "ok", "roles": ["nodefix.k8s.pids", "nodefix.k8s.gvisor"]}
    assert cordon.hold_reasons(rem, before, after) == []
