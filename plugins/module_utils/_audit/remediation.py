# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What ``nodefix.k8s.remediate`` does for a node, decided from its before-audit: the roles to run,
the reasons to reboot it and whether the kubelet's guard rails go on. The playbook only sequences
(``remediation_plan`` filter); this is the one place the decisions are made, with unit tests.

- A pending reboot (``reboot.*``) is a reason only with ``reboot``; dying memory cgroups
  (``kernel.dying_memcgs``: a reboot frees them) only with ``dying_memcgs``; a slow mount-unit
  cleanup (``mount_units.cleanup_slow``) only with ``mount_units_reboot`` (the mount_units role
  reboots for it, so it does not add the reboot role). No reason at all on a node this run will not
  drain (no kubeconfig, or draining turned off): only a drained node is rebooted.
- The reboot role runs when a reason other than the slow cleanup is there; every other role the
  audit's findings name runs.
- The kubelet guard rails (eviction threshold, reserved memory, pod PID limit): ``auto`` turns them
  on when the audit found one missing (``kubelet.no_eviction_guard``, ``kubelet.pod_pids_unlimited``);
  ``true``/``false`` as told.
- What disrupts the node's workloads (what the storm breaker counts, ``_rollout.storm``): ``drain`` when
  the node gets any role and this run drains it, ``reboot`` when there is a reason to reboot (a kernel
  below the minimum counts with ``kernel_upgrade``: the upgrade boots it), ``restart`` when a role that
  restarts containerd or the kubelet runs on a node this run does not drain.
- Whether the evidence a disruption would wipe is kept first (``evidence``): on any disruption, and when
  the mount_units role will stop at least ``evidence_units`` (100) leaked units.
- A host the audit found is not a Kubernetes node (``audit.not_kubernetes_node``: no kubelet, no container
  runtime) gets nothing: no role, no reboot, no disruption, and ``skip`` says why.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._audit.detect import fix_roles
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

REBOOT_ROLE = "nodefix.k8s.reboot"
SLOW_CLEANUP = "mount_units.cleanup_slow"
GUARD_RAIL_IDS = ("kubelet.no_eviction_guard", "kubelet.pod_pids_unlimited")
# roles whose fix restarts containerd (the gVisor registration does too) or the kubelet
RESTART_ROLES = ("nodefix.k8s.containerd", "nodefix.k8s.gvisor", "nodefix.k8s.kubelet")
KERNEL_BELOW = "kernel.below_minimum"
NOT_A_NODE = "audit.not_kubernetes_node"
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class PlanInputError(NodefixError, ValueError):
    """A before-audit or a switch of the wrong shape: nothing is decided from it."""


def _switch(name, value, allow_auto=False):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if allow_auto and text == "auto":
        return "auto"
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise PlanInputError("%s must be true or false%s, got %r" % (name, " or auto" if allow_auto else "", value))


def _findings(audit):
    if not isinstance(audit, dict) or not isinstance(audit.get("findings", []), list):
        raise PlanInputError("the before-audit is not a node_audit result (a dict with a findings list): %s"
                             % type(audit).__name__)
    found = audit.get("findings") or []
    bad = [i for i, f in enumerate(found) if not isinstance(f, dict) or not isinstance(f.get("id"), str)]
    if bad:
        raise PlanInputError("the before-audit's finding %d has no id" % bad[0])
    bad = [f["id"] for f in found if not isinstance(f.get("fix", {}), dict)]
    if bad:
        raise PlanInputError("the before-audit's finding %s has a fix that is not a mapping" % bad[0])
    return found


def _reason(finding):
    """The reboot reason a finding gives: {id, check, reason}."""
    fid = finding["id"]
    evidence = finding.get("evidence") if isinstance(finding.get("evidence"), dict) else {}
    if fid == "kernel.dying_memcgs":
        text = "%s dying memory cgroups (threshold %s)" % (evidence.get("count"), evidence.get("threshold"))
    else:
        reasons = evidence.get("reasons") if isinstance(evidence.get("reasons"), list) else []
        text = "; ".join(str(r) for r in reasons) or finding.get("title") or fid
    return {"id": fid, "check": finding.get("check") or fid.split(".", 1)[0], "reason": text}


def _units_to_stop(found):
    return sum(int((f.get("evidence") or {}).get("count") or 0) for f in found
               if f["id"] in ("mount_units.leaked_scopes", "mount_units.dead_mount_units")
               and isinstance((f.get("evidence") or {}).get("count"), int))


def plan(audit, drainable=False, reboot=False, mount_units_reboot=False, dying_memcgs=False,
         kubelet_guard_rails="auto", kernel_upgrade=False, evidence_units=100):
    """{fix_roles, reboot_reasons, kubelet_guard_rails, disruptive, evidence, skip} for one node's before-audit
    (node_audit's result). ``evidence``: keep the evidence first - a disruption, or the mount_units role
    stopping at least ``evidence_units`` leaked units. ``skip``: why the host gets nothing at all (not a
    Kubernetes node), else empty."""
    found = _findings(audit)
    drainable = _switch("drainable", drainable)
    reboot = _switch("nodefix_reboot", reboot)
    mount_units_reboot = _switch("nodefix_mount_units_reboot", mount_units_reboot)
    dying_memcgs = _switch("nodefix_reboot_dying_memcgs", dying_memcgs)
    guard = _switch("nodefix_kubelet_guard_rails", kubelet_guard_rails, allow_auto=True)
    kernel_upgrade = _switch("nodefix_kernel_upgrade", kernel_upgrade)
    if isinstance(evidence_units, bool) or not isinstance(evidence_units, int) or evidence_units < 0:
        try:
            evidence_units = int(str(evidence_units))
        except ValueError:
            evidence_units = -1
        if evidence_units < 0:
            raise PlanInputError("nodefix_evidence_units must be a whole number of units (0 or more)")
    reasons = [_reason(f) for f in (found if drainable else [])
               if (f["id"].startswith("reboot.") and reboot) or (f["id"] == SLOW_CLEANUP and mount_units_reboot)
               or (f["id"] == "kernel.dying_memcgs" and dying_memcgs)]
    roles = [role for role in fix_roles(found) if role != REBOOT_ROLE]
    if [r for r in reasons if r["id"] != SLOW_CLEANUP]:
        roles.append(REBOOT_ROLE)
    ids = set(f["id"] for f in found)
    if NOT_A_NODE in ids:
        return {"fix_roles": [], "reboot_reasons": [], "kubelet_guard_rails": False, "disruptive": [], "evidence": False,
                "skip": "not a Kubernetes node (no kubelet, no container runtime): left alone"}
    disruptive = []
    if drainable and roles:
        disruptive.append("drain")
    if reasons or (drainable and kernel_upgrade and KERNEL_BELOW in ids):
        disruptive.append("reboot")
    if not drainable and set(roles) & set(RESTART_ROLES):
        disruptive.append("restart")
    stops = "nodefix.k8s.mount_units" in roles and _units_to_stop(found) >= evidence_units
    return {"fix_roles": roles, "reboot_reasons": reasons,
            "kubelet_guard_rails": bool(ids & set(GUARD_RAIL_IDS)) if guard == "auto" else guard,
            "disruptive": disruptive, "evidence": bool(disruptive) or stops, "skip": ""}
