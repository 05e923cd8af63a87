# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""A dry run's plan for one node, built from what remediate's check-mode tasks registered - never derived again.

``build_plan(facts)`` (the ``dry_run_plan`` filter; playbooks/tasks/dry_run_plan.yml passes the facts) returns
what the run would do on the node: the files and keys it would change (before -> after, as the roles' own
check-mode results say: kubelet_config's ``before``/``effective``, containerd_config's and runsc_config's
``changes``, the pids role's sysctl result), the services it would restart, the units it would stop (or that the
mount-unit reboot path would clear), the pods the gVisor role would evict (opt-in), the packages or kernels it
would install, the drain and the reboot, and what each gate said (storm breaker, control-
plane guard, reboot backoff, the reboot gate's window and lock). ``plan_lines(plan)`` words it for the console and
the reports (one wording: the "Plan for <node>" task and the reports' "Plan (dry run)" sections).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import yaml_flow

UNSET = "(unset)"


def _res(value):
    """A registered result that ran (not skipped, not undefined), else {}."""
    if not isinstance(value, dict) or value.get("skipped"):
        return {}
    return value


def _text(value):
    if value is None:
        return UNSET
    return yaml_flow(value) if isinstance(value, (list, dict)) else str(value)


def _short_role(role):
    return str(role).rsplit(".", 1)[-1]


def _kubelet_changes(result):
    """kubelet_config's check-mode result: each setting whose value would change, in the file it would be written to."""
    out = []
    before, after = result.get("before") or {}, result.get("effective") or {}
    where = result.get("target_path") or ", ".join(str(f.get("path")) for f in result.get("files") or []) or "kubelet"
    for field in sorted(set(before) | set(after)):
        b, a = (before.get(field) or {}).get("value"), (after.get(field) or {}).get("value")
        if b != a:
            out.append({"role": "kubelet", "file": where, "key": field, "before": _text(b), "after": _text(a)})
    for edit in result.get("flag_edits") or []:
        if isinstance(edit, dict):
            out.append({"role": "kubelet", "file": str(edit.get("path") or where), "key": str(edit.get("flag")),
                        "before": _text(edit.get("old")),
                        "after": "(removed)" if edit.get("action") == "remove" else _text(edit.get("new"))})
    return out


def _toml_changes(role, result):
    """containerd_config's or runsc_config's ``changes`` (the tables or keys that would change, as the module words
    them) in their file."""
    path = result.get("real_path") or result.get("path") or "?"
    return [{"role": role, "file": str(path), "key": str(change), "before": None, "after": None}
            for change in result.get("changes") or []]


def _sysctl_changes(pids):
    """The pids role: kernel.pid_max (and kernel.threads-max) in its sysctl.d file, and live when it applies them."""
    out = []
    read = pids.get("read") or {}
    path = pids.get("file")
    for key, target, result, live in (("kernel.pid_max", pids.get("pid_max"), _res(pids.get("pid_max_result")),
                                       read.get("pid_max")),
                                      ("kernel.threads-max", pids.get("threads_max"),
                                       _res(pids.get("threads_max_result")), read.get("threads_max"))):
        if not result.get("changed") or target is None:
            continue
        persisted = (read.get("pid_max_persisted") or {}) if key == "kernel.pid_max" else {}
        in_file = [a.get("value") for a in persisted.get("assignments") or [] if a.get("path") == path]
        out.append({"role": "pids", "file": str(path), "key": key,
                    "before": in_file[-1] if in_file else UNSET, "after": str(target)})
        if pids.get("apply_live") and live is not None and str(live) != str(target):
            out.append({"role": "pids", "file": "(live, /proc/sys)", "key": key, "before": str(live),
                        "after": str(target)})
    return out


def _changes(results):
    out = _kubelet_changes(_res(results.get("kubelet"))) if _res(results.get("kubelet")).get("changed") else []
    for role, key in (("gvisor", "gvisor_containerd"), ("gvisor", "gvisor_containerd_norestart"),
                      ("gvisor", "gvisor_shim"), ("containerd", "containerd_config")):
        result = _res(results.get(key))
        if result.get("changed"):
            out += _toml_changes(role, result)
    out += _sysctl_changes(results.get("pids") or {})
    return out


def _restarts(results):
    out = []
    kubelet = _res(results.get("kubelet"))
    if kubelet.get("changed") and kubelet.get("restart_required", True):
        out.append("kubelet" + (" (after systemctl daemon-reload)" if kubelet.get("daemon_reload_required") else ""))
    if (results.get("containerd_upgrade") or {}).get("to") or any(
            _res(results.get(k)).get("changed") for k in ("gvisor_containerd", "containerd_config")):
        out.append("containerd")
    return out


def _installs(results, facts):
    out = []
    kernel = _res(results.get("kernel_upgrade"))
    if facts.get("kernel_upgrading") and kernel.get("package"):
        out.append({"what": "kernel", "package": kernel["package"], "version": kernel.get("version"),
                    "release": kernel.get("release")})
    containerd = results.get("containerd_upgrade") or {}
    if containerd.get("to"):
        how = "containerd (%s, from %s)" % (containerd.get("method"), containerd.get("from"))
        out.append({"what": "containerd", "package": how, "version": containerd["to"], "release": None})
    runsc = _res(results.get("runsc_install"))
    if runsc.get("changed"):
        out.append({"what": "runsc", "package": "runsc", "version": runsc.get("version"), "release": None})
    return out


def _stop_units(results, stopped):
    """The leaked kubelet units the run would stop - or that the mount-unit reboot path would clear (its estimate's
    units: a drained reboot drops every transient unit at once)."""
    if stopped:
        return {"count": 0, "units": [], "by": "systemctl stop"}
    estimate = _res(results.get("mount_units_estimate"))
    if results.get("mount_units_reboot_chosen") and estimate:
        return {"count": int(estimate.get("to_stop") or 0), "units": list(estimate.get("to_stop_units") or []),
                "by": "reboot", "estimate_seconds": estimate.get("estimate_seconds")}
    units = _res(results.get("mount_units"))
    return {"count": int(units.get("to_stop") or 0), "units": list(units.get("to_stop_units") or []),
            "by": "systemctl stop"}


def _evictions(results, stopped):
    """The gVisor role's opt-in evictions (gvisor_evict_pods): each pod whose sandbox is over its pod's memory limit,
    and what the check-mode run says would happen to it ("would evict", or skipped/not attempted and why)."""
    if stopped:
        return []
    out = []
    for entry in results.get("gvisor_evictions") or []:
        if not isinstance(entry, dict):
            continue
        out.append({"pod": str(entry.get("pod") or "uid %s" % entry.get("uid")), "result": str(entry.get("result")),
                    "reason": str(entry["reason"]) if entry.get("reason") else None})
    return out


def _pod(pod):
    """{namespace, name, owner, mirror} of a Pod object (k8s_info) or of such a summary; nothing else of it."""
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else pod
    owners = meta.get("ownerReferences") or []
    return {"namespace": meta.get("namespace"), "name": meta.get("name"),
            "owner": pod.get("owner") or (owners[0].get("kind") if owners and isinstance(owners[0], dict) else None),
            "mirror": bool(pod.get("mirror") or "kubernetes.io/config.mirror" in (meta.get("annotations") or {}))}


def _drain(facts):
    drain = facts.get("drain") or {}
    if not facts.get("roles"):
        return {"would": False, "text": "no drain: nothing to fix"}
    if not drain.get("kubeconfig"):
        return {"would": False, "text": "no drain (no nodefix_kubeconfig): a restart below would be WITHOUT draining"}
    if not drain.get("enabled", True):
        return {"would": False, "text": "no drain (nodefix_drain is false)"}
    if drain.get("error"):
        return {"would": False, "text": "the drain would fail: %s" % drain["error"]}
    if not drain.get("drained"):
        return {"would": False, "text": "no drain (the node is left alone before it)"}
    pods = [p for p in (_pod(p) for p in drain.get("pods") or [] if isinstance(p, dict))
            if p["owner"] != "DaemonSet" and not p["mirror"]]
    names = ", ".join("%s/%s" % (p.get("namespace"), p.get("name")) for p in pods[:20])
    more = " and %d more" % (len(pods) - 20) if len(pods) > 20 else ""
    how = ("cordoned before this run: drained, and left cordoned after" if drain.get("cordoned_before")
           else "cordon, then uncordon once verified")
    return {"would": True, "pods": ["%s/%s" % (p.get("namespace"), p.get("name")) for p in pods],
            "text": "drain (%s); %d pod(s) to evict%s" % (how, len(pods), (": " + names + more) if pods else ""),
            "budgets": _budget_warnings(drain)}


def _budget_warnings(drain):
    """What the PodDisruptionBudgets say now (node_cordon's check-mode look): each that would refuse an eviction,
    or that they could not be read."""
    if drain.get("budgets_error"):
        return ["PodDisruptionBudgets not checked: %s" % drain["budgets_error"]]
    out = []
    for b in drain.get("budgets") or []:
        if not isinstance(b, dict):
            continue
        pods = ", ".join(str(p) for p in b.get("pods") or [])
        if b.get("several"):
            out.append("PodDisruptionBudget %s/%s: %s under more than one budget, which the Eviction API refuses at "
                       "once: the drain would fail (nothing fixed, the node given back)"
                       % (b.get("namespace"), b.get("name"), ", ".join(str(p) for p in b["several"])))
        if b.get("refused", 0) > len(b.get("several") or []):
            out.append("PodDisruptionBudget %s/%s allows %s disruption(s) now and would refuse %s of %s: the drain "
                       "would retry until nodefix_drain_timeout, then fail unless the budget makes room (nothing "
                       "fixed, the node given back)"
                       % (b.get("namespace"), b.get("name"), b.get("allowed"),
                          b["refused"] - len(b.get("several") or []), pods))
    return out


def _gates(facts):
    """[{gate, says}] of every gate the node met, in the order the run meets them."""
    out = []
    storm = facts.get("storm") or {}
    if storm:
        out.append({"gate": "storm breaker", "says": ("would STOP the rollout: " if storm.get("stop") else "go: ")
                    + str(storm.get("msg") or "%s of %s node(s) disrupted" % (storm.get("affected"), storm.get("size")))})
    elif facts.get("storm_off"):
        out.append({"gate": "storm breaker", "says": "off (nodefix_storm_percent 100)"})
    held = facts.get("control_plane_held") or []
    cp = _res(facts.get("control_plane"))
    if held:
        out.append({"gate": "control-plane guard", "says": "HELD whole: " + "; ".join(map(str, held))})
    elif cp.get("control_plane"):
        out.append({"gate": "control-plane guard", "says": "allowed (nodefix_control_plane): %s" % (
            "; ".join(map(str, cp.get("held_by") or [])) or "etcd healthy, the control plane's slot free")})
    backoff = _res(facts.get("backoff"))
    if backoff:
        out.append({"gate": "reboot backoff", "says": "HELD: " + "; ".join(map(str, backoff.get("held_by") or []))
                    if backoff.get("held") else "no recent reboot for these reasons"})
    gate = _res(facts.get("reboot_gate"))
    if gate:
        window = gate.get("window") or {}
        lock = gate.get("lock") or {}
        says = "allowed" if gate.get("allowed") else "HELD: " + "; ".join(map(str, gate.get("held_by") or []))
        extra = []
        if isinstance(window, dict) and window:
            extra.append("window %s%s" % ("open" if window.get("open", True) else "closed",
                                          " (%s)" % window["describe"] if window.get("describe") else ""))
        if isinstance(lock, dict) and lock:
            held = len(lock.get("holders") or [])
            extra.append("lock: %s" % (("slot %s would be taken" % lock["slot"]) if lock.get("slot") else
                                       "%d of %s slot(s) held" % (held, lock.get("max_concurrent", "?"))))
        out.append({"gate": "reboot gate (window, blocking pods, alerts, lock)",
                    "says": says + ("; " + ", ".join(extra) if extra else "")})
    return out


def build_plan(facts):
    """The plan of one node from remediate's check-mode facts (see playbooks/tasks/dry_run_plan.yml for the keys)."""
    facts = facts or {}
    results = facts.get("results") or {}
    roles = [str(r) for r in facts.get("roles") or []]
    remediation = facts.get("remediation") or {}
    refused = bool(facts.get("refused"))
    drain = facts.get("drain") if isinstance(facts.get("drain"), dict) else {}
    # a drain that would fail stops the node's run as a refusal does: no fix, no restart, no reboot
    drain_fails = bool(roles and drain.get("error") and drain.get("kubeconfig") and drain.get("enabled", True)
                       and not refused)
    stopped = refused or drain_fails
    reasons = [str(r.get("reason") if isinstance(r, dict) else r) for r in facts.get("reboot_reasons") or []]
    rebooting = bool(facts.get("reboot_allowed")) and bool(reasons) and not stopped
    drain_plan = _drain(dict(facts, roles=roles)) if not refused else {"would": False, "text": "no drain (refused)"}
    # the real run drains before the gVisor role: the pods of oversized sandboxes are gone by then
    evictions = _evictions(results, stopped)
    plan = {
        "node": str(facts.get("node") or ""),
        "status": ("refused" if refused and remediation.get("status") == "failed" else "held" if refused
                   else "failed (the drain would fail: nothing would be fixed)" if drain_fails
                   else "would fix" if roles else "nothing to fix"),
        "msg": (str(remediation.get("msg") or "") if refused or not roles
                else str(drain.get("error")) if drain_fails else ""),
        "findings": sorted(set(str(f) for f in facts.get("findings") or [])),
        "roles": [_short_role(r) for r in roles],
        "drain": drain_plan,
        "changes": _changes(results) if not stopped else [],
        "restarts": _restarts(results) if not stopped else [],
        "stop_units": _stop_units(results, stopped),
        "evictions": [] if drain_plan["would"] else evictions,
        "evictions_note": ("the gVisor role's evictions: none of their own - the drain above evicts those pods first"
                           if drain_plan["would"] and evictions else ""),
        "install": _installs(results, facts) if not stopped else [],
        "reboot": {"would": rebooting, "reasons": reasons,
                   "text": ("reboot: " + "; ".join(reasons)) if rebooting else
                           ("no reboot: the drain would fail (pending: %s)" % "; ".join(reasons) if drain_fails and reasons
                            else "reboot HELD (%s): %s" % ("; ".join(reasons), "see the gates") if reasons
                            else "no reboot")},
        "gates": _gates(facts),
    }
    return redact(plan)


def plan_lines(plan):
    """The plan in words, one line a step (the console's "Plan for <node>" and the reports' sections)."""
    if not isinstance(plan, dict) or not plan:
        return []
    plan = redact(plan)
    why = (" - " + plan["msg"]) if plan.get("msg") else ""
    lines = ["DRY RUN plan for %s: %s%s" % (plan.get("node"), plan.get("status"), why)]
    if plan.get("findings"):
        lines.append("findings: %s" % ", ".join(plan["findings"]))
    if plan.get("roles"):
        lines.append("roles: %s" % ", ".join(plan["roles"]))
    for gate in plan.get("gates") or []:
        lines.append("gate %s: %s" % (gate["gate"], gate["says"]))
    if plan.get("roles"):
        lines.append((plan.get("drain") or {}).get("text") or "no drain")
        lines.extend((plan.get("drain") or {}).get("budgets") or [])
    for c in plan.get("changes") or []:
        values = "" if c.get("before") is None and c.get("after") is None else " %s -> %s" % (c["before"], c["after"])
        lines.append("change %s: %s%s" % (c["file"], c["key"], values))
    for r in plan.get("restarts") or []:
        lines.append("restart %s" % r)
    stop = plan.get("stop_units") or {}
    if stop.get("count"):
        shown = stop.get("units") or []
        listed = (": " + ", ".join(shown[:10]) + (" ..." if len(shown) > 10 else "")) if shown else ""
        if stop.get("by") == "reboot":
            lines.append("clear %d leaked kubelet unit(s) by the reboot below (~%s s to stop them through systemd)%s"
                         % (stop["count"], int(stop.get("estimate_seconds") or 0), listed))
        else:
            lines.append("stop %d leaked kubelet unit(s)%s" % (stop["count"], listed))
    if plan.get("evictions_note"):
        lines.append(plan["evictions_note"])
    for e in plan.get("evictions") or []:
        if e.get("result") == "would evict":
            lines.append("evict %s (gVisor sandbox over its pod's memory limit; its controller recreates it)" % e["pod"])
        else:
            lines.append("not evicted %s: %s%s" % (e["pod"], e.get("result"), (" - " + e["reason"]) if e.get("reason") else ""))
    for i in plan.get("install") or []:
        lines.append("install %s %s %s%s" % (i["what"], i.get("package"), i.get("version") or "",
                                             (" (kernel %s)" % i["release"]) if i.get("release") else ""))
    reboot = plan.get("reboot") or {}
    if reboot.get("reasons") or reboot.get("would"):
        lines.append(reboot.get("text"))
    if plan.get("status") == "would fix" and not (plan.get("changes") or plan.get("restarts") or stop.get("count")
                                                  or plan.get("install") or reboot.get("would")
                                                  or any(e.get("result") == "would evict"
                                                         for e in plan.get("evictions") or [])):
        lines.append("no file, service, unit or package would change (the roles would only report)")
    return lines
