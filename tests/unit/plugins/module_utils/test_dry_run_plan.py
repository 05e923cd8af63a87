# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout/dry_run.py: a dry run's plan built from what remediate's check-mode tasks registered (issue 55 item 3),
its wording, and the reports' "Plan (dry run)" sections."""

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.dry_run import build_plan, plan_lines
from ansible_collections.nodefix.k8s.plugins.module_utils._report.html_page import to_html
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import build_model
from ansible_collections.nodefix.k8s.plugins.module_utils._report.document import to_markdown

KUBELET = {  # kubelet_config's check-mode result (its before/effective, a flag it would rewrite)
    "changed": True, "restart_required": True, "daemon_reload_required": True,
    "target_path": "/var/lib/kubelet/config.yaml",
    "before": {"kubeAPIQPS": {"value": 5, "source": "default"}, "serializeImagePulls": {"value": False}},
    "effective": {"kubeAPIQPS": {"value": 50, "source": "config"}, "serializeImagePulls": {"value": False}},
    "flag_edits": [{"flag": "--kube-api-qps", "action": "remove", "old": "--kube-api-qps=5",
                    "path": "/etc/default/kubelet"}],
}
POD = {"metadata": {"namespace": "shop", "name": "cart-1", "ownerReferences": [{"kind": "ReplicaSet"}]},
       "spec": {"containers": [{"env": [{"name": "TOKEN", "value": "s3cret"}]}]}}
DS_POD = {"metadata": {"namespace": "kube-system", "name": "proxy", "ownerReferences": [{"kind": "DaemonSet"}]}}
MIRROR = {"metadata": {"namespace": "kube-system", "name": "etcd-n1",
                       "annotations": {"kubernetes.io/config.mirror": "x"}}}


def facts(**over):
    base = {"node": "n1", "findings": ["kubelet.api_qps_low"], "roles": ["nodefix.k8s.kubelet"],
            "drain": {"kubeconfig": True, "enabled": True, "drained": True, "cordoned_before": False,
                      "pods": [POD, DS_POD, MIRROR]},
            "results": {"kubelet": KUBELET}}
    base.update(over)
    return base


def test_every_setting_flag_restart_and_the_drain_come_from_the_registered_results():
    plan = build_plan(facts())
    assert plan["status"] == "would fix" and plan["roles"] == ["kubelet"]
    assert plan["changes"] == [
        {"role": "kubelet", "file": "/var/lib/kubelet/config.yaml", "key": "kubeAPIQPS", "before": "5", "after": "50"},
        {"role": "kubelet", "file": "/etc/default/kubelet", "key": "--kube-api-qps", "before": "--kube-api-qps=5",
         "after": "(removed)"}]
    assert plan["restarts"] == ["kubelet (after systemctl daemon-reload)"]
    # only the pods a drain evicts (not a DaemonSet's, not a mirror pod), and nothing else of them
    assert plan["drain"]["would"] and plan["drain"]["pods"] == ["shop/cart-1"]
    assert "s3cret" not in str(plan)
    lines = plan_lines(plan)
    assert lines[0] == "DRY RUN plan for n1: would fix"
    assert "change /var/lib/kubelet/config.yaml: kubeAPIQPS 5 -> 50" in lines
    assert "restart kubelet (after systemctl daemon-reload)" in lines
    assert "drain (cordon, then uncordon once verified); 1 pod(s) to evict: shop/cart-1" in lines


def test_a_result_that_did_not_change_or_was_skipped_plans_nothing():
    plan = build_plan(facts(results={"kubelet": dict(KUBELET, changed=False), "gvisor_shim": {"skipped": True},
                                     "pids": {"file": "/etc/sysctl.d/60.conf", "pid_max": 4194304,
                                              "pid_max_result": {"changed": False}}}))
    assert plan["changes"] == [] and plan["restarts"] == []
    assert "no file, service, unit or package would change (the roles would only report)" in plan_lines(plan)


def test_the_pids_sysctl_file_and_the_live_value_before_and_after():
    read = {"pid_max": 32768, "pid_max_persisted": {"assignments": [{"path": "/etc/sysctl.d/60.conf", "value": "65536"}]}}
    pids = {"file": "/etc/sysctl.d/60.conf", "read": read, "apply_live": True, "pid_max": 4194304,
            "pid_max_result": {"changed": True}}
    plan = build_plan(facts(roles=["nodefix.k8s.pids"], results={"pids": pids}))
    assert plan["changes"] == [
        {"role": "pids", "file": "/etc/sysctl.d/60.conf", "key": "kernel.pid_max", "before": "65536", "after": "4194304"},
        {"role": "pids", "file": "(live, /proc/sys)", "key": "kernel.pid_max", "before": "32768", "after": "4194304"}]
    plan = build_plan(facts(roles=["nodefix.k8s.pids"], results={"pids": dict(pids, apply_live=False, read={})}))
    assert [(c["file"], c["before"]) for c in plan["changes"]] == [("/etc/sysctl.d/60.conf", "(unset)")]


def test_containerd_units_packages_and_the_restart_of_containerd():
    results = {"gvisor_containerd": {"changed": True, "path": "/etc/containerd/config.toml",
                                     "changes": ['plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc']},
               "containerd_upgrade": {"from": "1.6.2", "to": "1.7.22", "method": "archive"},
               "mount_units": {"to_stop": 3, "to_stop_units": ["a.scope", "b.scope", "c.mount"]},
               "kernel_upgrade": {"package": "linux-image-6.8.0-45-generic", "version": "6.8.0-45.45",
                                  "release": "6.8.0-45-generic"}}
    plan = build_plan(facts(results=results, kernel_upgrading=True, reboot_allowed=True,
                            reboot_reasons=[{"id": "kernel.below_minimum", "reason": "kernel 5.4 below 6.1"}]))
    lines = plan_lines(plan)
    assert 'change /etc/containerd/config.toml: plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc' in lines
    assert "restart containerd" in lines and "stop 3 leaked kubelet unit(s): a.scope, b.scope, c.mount" in lines
    assert "install kernel linux-image-6.8.0-45-generic 6.8.0-45.45 (kernel 6.8.0-45-generic)" in lines
    assert "install containerd containerd (archive, from 1.6.2) 1.7.22" in lines
    assert plan["reboot"] == {"would": True, "reasons": ["kernel 5.4 below 6.1"], "text": "reboot: kernel 5.4 below 6.1"}


def test_what_each_gate_said():
    plan = build_plan(facts(
        storm={"stop": False, "msg": None, "affected": 1, "size": 10},
        control_plane={"control_plane": False}, control_plane_held=[],
        backoff={"held": True, "held_by": ["rebooted 2h ago for the same reason"]},
        reboot_gate={"allowed": False, "held_by": ["outside the window"],
                     "window": {"open": False, "describe": "mon 22:00:00-04:00:00 UTC"},
                     "lock": {"slot": None, "holders": [{"slot": "s0", "holder": "n7"}], "max_concurrent": 1}},
        reboot_reasons=["pending reboot"], reboot_allowed=False))
    says = dict((g["gate"], g["says"]) for g in plan["gates"])
    assert says["storm breaker"] == "go: 1 of 10 node(s) disrupted"
    assert says["reboot backoff"] == "HELD: rebooted 2h ago for the same reason"
    assert says["reboot gate (window, blocking pods, alerts, lock)"] == (
        "HELD: outside the window; window closed (mon 22:00:00-04:00:00 UTC), lock: 1 of 1 slot(s) held")
    allowed = build_plan(facts(reboot_gate={"allowed": True, "window": {"open": True}, "lock": {"slot": "s0"}},
                               reboot_reasons=["pending reboot"], reboot_allowed=True))
    assert allowed["gates"] == [{"gate": "reboot gate (window, blocking pods, alerts, lock)",
                                 "says": "allowed; window open, lock: slot s0 would be taken"}]
    assert allowed["reboot"]["would"] and "reboot: pending reboot" in plan_lines(allowed)
    assert "control-plane guard" not in says   # not a control-plane node: the guard said nothing
    assert plan["reboot"]["would"] is False and plan["reboot"]["text"].startswith("reboot HELD (pending reboot)")
    held = build_plan(facts(control_plane_held=["control plane: n1 is a control-plane node"], refused=True,
                            remediation={"status": "skipped", "msg": "held: control plane"},
                            storm={"stop": True, "msg": "over 20%"}))
    assert held["status"] == "held" and held["msg"] == "held: control plane" and held["changes"] == []
    assert dict((g["gate"], g["says"]) for g in held["gates"]) == {
        "storm breaker": "would STOP the rollout: over 20%",
        "control-plane guard": "HELD whole: control plane: n1 is a control-plane node"}
    assert build_plan(facts(storm_off=True))["gates"] == [{"gate": "storm breaker", "says": "off (nodefix_storm_percent 100)"}]


def test_no_drain_said_why_and_a_refused_node_plans_nothing():
    assert build_plan(facts(drain={"kubeconfig": False}))["drain"]["text"].startswith("no drain (no nodefix_kubeconfig)")
    assert build_plan(facts(drain={"kubeconfig": True, "enabled": False}))["drain"]["text"] == \
        "no drain (nodefix_drain is false)"
    refused = build_plan(facts(refused=True, remediation={"status": "failed", "msg": "refused: not root"}))
    assert refused["status"] == "refused" and refused["changes"] == [] and refused["restarts"] == []
    assert plan_lines(refused)[0] == "DRY RUN plan for n1: refused - refused: not root"
    assert build_plan({"node": "n2"})["status"] == "nothing to fix"


def test_the_reports_carry_the_plan_in_json_markdown_and_html():
    plan = build_plan(facts())
    audit = {"findings": [], "checks": {}}
    model = build_model({"n1": audit, "n2": audit}, before={"n1": audit, "n2": audit},
                        remediation={"n1": {"status": "ok", "roles": ["nodefix.k8s.kubelet"], "plan": plan},
                                     "n2": {"status": "skipped", "msg": "nothing to fix"}})
    model["run"] = {"check_mode": True, "generated": "2026-11-27T18:00:00Z"}
    nodes = dict((n["host"], n) for n in model["nodes"])
    assert nodes["n1"]["plan"] == plan and "plan" not in nodes["n1"]["remediation"] and "plan" not in nodes["n2"]
    md = to_markdown(model)
    assert "**DRY RUN (check mode)" in md and "## Plan (dry run)" in md and "### n1" in md and "### n2" not in md
    assert "- change /var/lib/kubelet/config.yaml: kubeAPIQPS 5 -> 50" in md
    html = to_html(model).replace("<wbr>", "")
    assert "DRY RUN (check mode)" in html and '<h2 id="plan">Plan (dry run)</h2>' in html
    assert "<li>change /var/lib/kubelet/config.yaml: kubeAPIQPS 5 -&gt; 50</li>" in html
    # a real run's report has no plan section
    model = build_model({"n1": audit}, before={"n1": audit}, remediation={"n1": {"status": "ok", "roles": []}})
    assert "Plan (dry run)" not in to_markdown(model) and "Plan (dry run)" not in to_html(model)


def test_a_drain_that_would_fail_plans_no_fix_no_restart_no_reboot():
    """Review finding: with the drain failing (the Node not found, a malformed answer), the plan said "would fix"
    and, with a reboot allowed by the gate (which runs before the drain), "reboot: ..." - the real run skips the
    fixes and the reboot after a failed drain."""
    drain = dict(facts()["drain"], drained=False, error="node n1 not found in the API server")
    plan = build_plan(facts(drain=drain, reboot_allowed=True, reboot_reasons=[{"reason": "reboot-required"}]))
    assert plan["status"].startswith("failed (the drain would fail") and "not found" in plan["msg"], plan
    assert plan["changes"] == [] and plan["restarts"] == [] and plan["install"] == [], plan
    assert not plan["reboot"]["would"] and plan["reboot"]["text"].startswith("no reboot: the drain would fail")
    lines = plan_lines(plan)
    assert "the drain would fail: node n1 not found in the API server" in lines, lines
    assert not [line for line in lines if line.startswith(("change ", "restart ", "reboot:"))], lines


def test_the_mount_unit_reboot_path_lists_the_units_the_reboot_clears():
    """Review gap: with nodefix_mount_units_reboot and a cleanup above the threshold, the plan said "reboot: ..." and
    nothing of the leaked units (the cleanup's result is skipped on that path: the role's estimate holds them)."""
    estimate = {"to_stop": 1200, "to_stop_units": ["run-k1.scope", "run-k2.scope"], "estimate_seconds": 4100.0,
                "reboot_recommended": True}
    reason = {"id": "mount_units.cleanup_slow", "reason": "1200 leaked kubelet mount units, ~4100 s"}
    plan = build_plan(facts(roles=["nodefix.k8s.mount_units"], reboot_allowed=True, reboot_reasons=[reason],
                            results={"mount_units": {"skipped": True}, "mount_units_estimate": estimate,
                                     "mount_units_reboot_chosen": True}))
    assert plan["stop_units"] == {"count": 1200, "units": ["run-k1.scope", "run-k2.scope"], "by": "reboot",
                                  "estimate_seconds": 4100.0}
    lines = plan_lines(plan)
    assert ("clear 1200 leaked kubelet unit(s) by the reboot below (~4100 s to stop them through systemd): "
            "run-k1.scope, run-k2.scope") in lines, lines
    assert "reboot: 1200 leaked kubelet mount units, ~4100 s" in lines
    # the estimate alone (the reboot not chosen: not drained) is not a plan to clear anything
    plan = build_plan(facts(roles=["nodefix.k8s.mount_units"],
                            results={"mount_units": {"to_stop": 2, "to_stop_units": ["a.scope", "b.mount"]},
                                     "mount_units_estimate": estimate, "mount_units_reboot_chosen": False}))
    assert "stop 2 leaked kubelet unit(s): a.scope, b.mount" in plan_lines(plan)


def test_the_gvisor_evictions_the_role_would_make_and_the_pods_it_would_not():
    """Review gap: with gvisor_evict_pods the real run evicts the pods whose sandboxes are over their memory limit;
    the plan did not say so. What the role's check-mode run recorded is shown, each pod with its result."""
    evictions = [{"uid": "u1", "pod": "shop/cart-1", "result": "would evict"},
                 {"uid": "u2", "result": "skipped", "reason": "DaemonSet pods are not evicted; delete it to have it recreated"},
                 "garbage"]
    undrained = dict(facts()["drain"], enabled=False)   # nodefix_drain: false, the kubeconfig given
    plan = build_plan(facts(roles=["nodefix.k8s.gvisor"], drain=undrained, results={"gvisor_evictions": evictions}))
    assert plan["evictions"] == [
        {"pod": "shop/cart-1", "result": "would evict", "reason": None},
        {"pod": "uid u2", "result": "skipped", "reason": "DaemonSet pods are not evicted; delete it to have it recreated"}]
    lines = plan_lines(plan)
    assert "evict shop/cart-1 (gVisor sandbox over its pod's memory limit; its controller recreates it)" in lines
    assert "not evicted uid u2: skipped - DaemonSet pods are not evicted; delete it to have it recreated" in lines
    # an eviction is a change: not "the roles would only report"
    assert not [line for line in lines if line.startswith("no file, service")], lines
    # drained first (review finding): the drain evicts those pods, the role evicts none of its own
    drained = build_plan(facts(roles=["nodefix.k8s.gvisor"], results={"gvisor_evictions": evictions}))
    assert drained["evictions"] == [] and "the drain above evicts those pods first" in drained["evictions_note"]
    assert not [line for line in plan_lines(drained) if line.startswith(("evict ", "not evicted"))]
    # a node whose drain would fail plans no eviction either
    drain = dict(facts()["drain"], drained=False, error="forbidden")
    assert build_plan(facts(roles=["nodefix.k8s.gvisor"], drain=drain,
                            results={"gvisor_evictions": evictions}))["evictions"] == []


def test_the_disruption_budgets_that_would_refuse_the_drain_are_in_the_plan():
    drain = dict(facts()["drain"], budgets=[{"namespace": "shop", "name": "cart", "allowed": 0, "pods": ["shop/cart-1"],
                                             "refused": 1, "several": []}])
    lines = plan_lines(build_plan(facts(drain=drain)))
    assert ("PodDisruptionBudget shop/cart allows 0 disruption(s) now and would refuse 1 of shop/cart-1: the drain "
            "would retry until nodefix_drain_timeout, then fail unless the budget makes room (nothing fixed, the node "
            "given back)") in lines, lines
    # a pod under two budgets: refused at once, no retry helps (review finding)
    two = dict(facts()["drain"], budgets=[{"namespace": "shop", "name": "a", "allowed": 3, "pods": ["shop/cart-1"],
                                           "refused": 1, "several": ["shop/cart-1"]}])
    lines = plan_lines(build_plan(facts(drain=two)))
    assert ("PodDisruptionBudget shop/a: shop/cart-1 under more than one budget, which the Eviction API refuses at "
            "once: the drain would fail (nothing fixed, the node given back)") in lines, lines
    assert not [line for line in lines if "would retry" in line], lines
    unread = dict(facts()["drain"], budgets_error="could not read the PodDisruptionBudgets: 403")
    assert "PodDisruptionBudgets not checked: could not read the PodDisruptionBudgets: 403" in \
        plan_lines(build_plan(facts(drain=unread)))
    assert not [line for line in plan_lines(build_plan(facts())) if "PodDisruptionBudget" in line]
