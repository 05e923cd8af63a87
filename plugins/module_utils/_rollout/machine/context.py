# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""What one node's rollout machine is given (``Context``) and what it keeps between its two halves (``State``, a
plain JSON-able mapping the action plugin carries from ``phase: begin`` to ``phase: end``; its durable part is the
``nodefix.k8s/rollout`` record on the Node, ``_rollout.machine.ledger``).

Every default lives here once (``DEFAULTS``: the playbook's ``| default(...)`` values of the same options);
``options`` that are not known, or of the wrong type, are refused before anything is read or written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm

DEFAULTS = {
    "lease": 1800,                  # nodefix_rollout_lease: the margin every write of the record adds (lease_for)
    "drain": True,                  # nodefix_drain (and a kubeconfig)
    "require_drain": False,         # nodefix_require_drain
    "drain_timeout": 600,           # nodefix_drain_timeout
    "control_plane": False,         # nodefix_control_plane
    "quorum_override": False,       # nodefix_control_plane_quorum_override
    "control_plane_hint": False,    # the node is in one of reboot_control_plane_groups (the inventory says so)
    "backoff_seconds": backoff.parse_duration(backoff.DEFAULT_BACKOFF),  # nodefix_reboot_backoff (6h)
    "max_reboots": 2,               # nodefix_reboot_backoff_max_reboots
    "blocking_selectors": [],       # reboot_blocking_pod_selectors
    "lock_namespace": "kube-system",
    "lock_name": "nodefix-reboot",
    "lock_slots": 1,                # reboot_max_concurrent
    "lock_ttl": 7200,
    "lock_wait": 0,                 # reboot_lock_wait: seconds to wait for a free slot of the reboot lock
    "lock_poll": 5,                 # reboot_lock_poll: every poll judges the window, pods and alerts again
    "control_plane_lock_name": "nodefix-control-plane",
    "etcd_health_command": [],      # nodefix_etcd_health_command (etcd outside the cluster)
    "etcd_wait": 300,               # reboot_etcd_wait: seconds the control plane's slot waits for the etcd member
    "evidence": True,               # nodefix_evidence
    "events": True,                 # nodefix_events
    "reboot_timeout": 900,          # reboot_timeout: the reboot role's wait for the node to come back
    "reboot_settle_timeout": 300,   # reboot_settle_timeout: each of its waits after the boot
    "fix_timeout": 3600,            # nodefix_fix_timeout: the fix roles' worst case before a reboot (the fix phase's
                                    # lease covers it; the longest in-place fix, the mount-unit cleanup, becomes a
                                    # reboot above nodefix_mount_units_reboot_over_seconds, 3600)
    # the storm breaker's re-count right before this node's cordon (before.storm): its options, and the plans of the
    # nodes of this batch (the storm breaker's audit: {node, disruptive, findings}), in flight beside this one
    "storm_percent": 20,            # nodefix_storm_percent (100: off)
    "storm_min_nodes": 2,           # nodefix_storm_min_nodes
    "storm_override": False,        # nodefix_storm_override
    "storm_node_selector": "",      # nodefix_storm_node_selector ("": every Node)
    "storm_batch": [],
}
# the roles whose restarts need a drained node under nodefix_require_drain
RESTARTING_ROLES = ("nodefix.k8s.containerd", "nodefix.k8s.gvisor", "nodefix.k8s.kubelet")
REBOOT_ROLE = "nodefix.k8s.reboot"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def options(given):
    """``DEFAULTS`` updated with ``given``; NodefixError naming an unknown option or one of the wrong type."""
    out = copy.deepcopy(DEFAULTS)
    for key, value in (given or {}).items():
        if key not in DEFAULTS:
            raise NodefixError("rollout option %r is not one of %s" % (key, ", ".join(sorted(DEFAULTS))))
        want = type(DEFAULTS[key])
        if isinstance(value, bool) != (want is bool) or not isinstance(value, want):
            raise NodefixError("rollout option %s must be a %s, got %r" % (key, want.__name__, value))
        out[key] = value
    for key in ("lease", "reboot_timeout", "reboot_settle_timeout", "fix_timeout",
                "drain_timeout", "backoff_seconds", "max_reboots", "lock_slots", "lock_ttl", "lock_wait",
                "etcd_wait"):
        if out[key] < 0:
            raise NodefixError("rollout option %s must not be negative, got %d" % (key, out[key]))
    if out["lock_poll"] < 1 or out["lock_slots"] < 1:
        raise NodefixError("rollout options lock_poll and lock_slots must be at least 1, got %d and %d"
                           % (out["lock_poll"], out["lock_slots"]))
    if not all(isinstance(a, str) for a in out["etcd_health_command"] + out["blocking_selectors"]):
        raise NodefixError("rollout options etcd_health_command and blocking_selectors are lists of strings")
    storm.check_percent(out["storm_percent"])
    if out["storm_min_nodes"] < 1:
        raise NodefixError("rollout option storm_min_nodes must be at least 1, got %d" % out["storm_min_nodes"])
    for n, entry in enumerate(out["storm_batch"]):
        storm.check_node("%d" % n, entry, where="rollout option storm_batch: entry")
        if not isinstance(entry.get("node"), str) or not entry["node"]:
            raise NodefixError("rollout option storm_batch: entry %d has no node (its Node name)" % n)
    return out


def reboot_worst(given):
    """Seconds the reboot path may take at worst, as the reboot role waits: the reboot (``reboot_timeout``), the
    power-cycle's wait (``reboot_timeout`` again) and the four waits after the boot - systemd, the services,
    kubelet's healthz, Ready (``reboot_settle_timeout`` each); roles/reboot/defaults/main.yml's reboot_lock_ttl
    arithmetic."""
    return 2 * given["reboot_timeout"] + 4 * given["reboot_settle_timeout"]


def lease_for(given, seconds=0):
    """The record's ``leaseSeconds`` before a step whose worst case is ``seconds``: the step's worst case plus
    ``lease`` (nodefix_rollout_lease) as the margin - a live run's claim never runs out inside the step it guards
    (a second controller would take the node over mid-reboot)."""
    return given["lease"] + seconds


class Context(object):
    """One node's rollout: the API object (``_k8s.rollout_api.RolloutApi`` or a double honouring its contract),
    the node, the run, this controller (``here``: {host, pid, boot}; ``pid_alive``), the before-audit and plan
    ({fix_roles, reboot_reasons, disruptive}), the options, and the injected work:

    - ``clock()``: an aware UTC datetime; ``sleep(seconds)``;
    - ``evidence()``: the node-side evidence bundle's summary (a dict; raises NodefixError when it cannot be kept);
    - ``audit()``: the after-audit (the node_audit result), NodefixError when it cannot run;
    - ``alerts()``: the firing alerts that hold a reboot ([name]; NodefixError when Prometheus cannot be read);
    - ``events(phase, state)``: post the start/end Events: [what the API did not accept] when it accepted some (an
      Event, the annotation); NodefixError when it accepted nothing. A failure is a warning, never the rollout's
      outcome, and only what was accepted is a change;
    - ``window``: a ``_reboot.gate.Window`` or None (always open);
    - ``run_command(argv)``: (rc, stdout, stderr) of the etcd health command (``etcd_health_command``; its
      environment, a secret, is the caller's);
    - ``redact(text)``: a step's detail as it is recorded, after the redaction by shape (``steps.Runner``: the
      action removes its secret options' values);
    - ``observe(record)``: for how many seconds this controller has seen another run's record unchanged, on its own
      monotonic clock, None the first time (``_rollout.observed``; unset: every sight is a first one);
    - ``lock_observed``: what this controller saw of the lock slots' Leases ({lock id: {slot: {key, seen}}},
      ``_reboot.gate.LeaseLock``'s ``observed``), ONE mapping every step's lock reads and adds to - carried from
      step to step, half to half and node to node (the action keeps it in ``observed_dir``): a Lease first seen
      counts as live for a whole lease, so a lock re-observed from scratch at each step could never be taken over
      (unset: this context's own, empty);
    - ``lock_time()``: (seconds, boot id) of this controller's monotonic clock, on which ``lock_observed`` is kept
      (a sight of another boot is a first sight again; unset: ``clock()``'s seconds, one boot - the tests' clock);
    - ``kernel_disarm(release)``: ``kernel_boot state=disarm`` on the node (its result: running_release, disarmed),
      NodefixError when it failed or the node could not be reached - an unconfirmed kernel boot put back on the
      running kernel (``_rollout.machine.kernel``; unset: it cannot be disarmed, the node is held)."""

    def __init__(self, api, node, run_id, here, pid_alive, audit_before, plan, clock, sleep, given=None,
                 check_mode=False, **work):
        self.api, self.node, self.run_id, self.here, self.pid_alive = api, node, str(run_id), here, pid_alive
        self.audit_before, self.plan = audit_before or {}, plan or {}
        self.clock, self.sleep, self.check_mode = clock, sleep, check_mode
        self.options = options(given)
        unknown = set(work) - set(("evidence", "audit", "alerts", "events", "window", "after_step", "run_command",
                                  "redact", "observe", "lock_observed", "lock_time", "kernel_disarm"))
        if unknown:
            raise NodefixError("unknown rollout callables: %s" % ", ".join(sorted(unknown)))
        self.evidence = work.get("evidence")
        self.audit = work.get("audit")
        self.alerts = work.get("alerts") or (lambda: [])
        self.events = work.get("events") or (lambda phase, state: None)
        self.window = work.get("window")
        self.after_step = work.get("after_step")
        self.run_command = work.get("run_command")
        self.redact = work.get("redact")
        self.observe = work.get("observe")
        self.kernel_disarm = work.get("kernel_disarm")
        self.lock_observed = work.get("lock_observed") if work.get("lock_observed") is not None else {}
        self.lock_time = work.get("lock_time") or (lambda: ((self.clock() - _EPOCH).total_seconds(), ""))


def new_state(plan):
    """The run's state at the start: what the plan asks for, nothing held, nothing cordoned."""
    return {"fix_roles": list(plan.get("fix_roles") or []), "reboot_reasons": list(plan.get("reboot_reasons") or []),
            "claimed": False, "previous": None, "cordoned_before": None, "cordoned": False, "drained": False,
            "slots": [], "reboot_held": [], "outcome": None, "detail": "", "given_back": "", "evidence": None,
            "steps": []}
