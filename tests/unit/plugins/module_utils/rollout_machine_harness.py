# SPDX-License-Identifier: GPL-3.0-or-later
"""What the rollout machine's tests share: a node's before-audit and plan, the injected work (clock, sleep, audit,
evidence, alerts, events: recorded), and ``rollout`` - one whole rollout (``begin``, the fixes as the roles
would report them, ``end``) against the API double (rollout_api_double.py)."""

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine

from plugins.module_utils.rollout_api_double import Clock

CONTAINERD = "nodefix.k8s.containerd"
REBOOT = "nodefix.k8s.reboot"
FINDINGS = {CONTAINERD: {"id": "containerd.config_drift", "check": "containerd", "fix": {"role": CONTAINERD}},
            REBOOT: {"id": "reboot.pending", "check": "reboot", "fix": {"role": REBOOT}}}
REASON = {"id": "reboot.pending", "check": "reboot", "reason": "a reboot is pending"}


def audit_before(roles, euid=0):
    return {"euid": euid, "findings": [FINDINGS[r] for r in roles], "checks": {"containerd": {}, "reboot": {}}}


def plan(roles):
    return {"fix_roles": list(roles), "reboot_reasons": [REASON] if REBOOT in roles else [],
            "disruptive": ["drain"] if roles else [], "evidence": bool(roles)}


class Work(object):
    """The injected callables, recording what they were asked; ``after`` the after-audit's findings."""

    def __init__(self, after=(), alerts=()):
        self.after, self.firing = list(after), list(alerts)
        self.events, self.audits, self.evidences = [], 0, 0

    def audit(self):
        self.audits += 1
        return {"findings": [FINDINGS[r] for r in self.after], "checks": {"containerd": {}, "reboot": {}}}

    def evidence(self):
        self.evidences += 1
        return {"path": "/tmp/evidence.json", "bytes": 10}

    def kw(self):
        return {"audit": self.audit, "evidence": self.evidence, "alerts": lambda: list(self.firing),
                "events": lambda phase, state: self.events.append((phase, state["outcome"]))}


HERE = {"host": "controller", "pid": 100, "boot": "boot-c"}


def context(api, roles=(CONTAINERD,), clock=None, work=None, options=None, here=None, check_mode=False,
            after_step=None, euid=0, window=None, run_id="run-1", node_name="node-a", lock_observed=None):
    here = here or HERE
    work = work or Work()
    clock = clock or Clock()
    kw = work.kw()
    if window is not None:
        kw["window"] = window
    if after_step is not None:
        kw["after_step"] = after_step
    if lock_observed is not None:
        kw["lock_observed"] = lock_observed
    return mctx.Context(api, node_name, run_id, here, lambda pid: pid == here["pid"], audit_before(roles, euid),
                        plan(roles), clock.now, clock.sleep, dict(options or {}), check_mode, **kw)


def rollout(api, roles=(CONTAINERD,), status="ok", **kw):
    """begin, the fix roles' report, end: (begin's result, end's result or None)."""
    ctx = context(api, roles, **kw)
    first = machine.begin(ctx)
    if first["outcome"] is not None:
        return first, None
    remediation = {"status": status, "roles": first["state"]["fix_roles"], "msg": "" if status == "ok" else "boom"}
    return first, machine.end(ctx, first["state"], remediation)


def names(result):
    return [s["name"] for s in result["steps"]]


def outcomes(result):
    return dict((s["name"], s["outcome"]) for s in result["steps"])
