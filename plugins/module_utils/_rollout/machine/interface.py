# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The contract of the action ``nodefix.k8s.rollout`` (docs/rollout-machine.md, "The action plugin"): its argument
spec - the machine's options with their defaults from ``context.DEFAULTS``, named once, and the action's own from
``ACTION_DEFAULTS`` -, which outcome fails the task, and the remediation record the report, the Events and the fail
play read (``_nodefix_remediation``'s shape) built from the machine's state. No I/O here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.context import DEFAULTS
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

PHASES = ("begin", "end", "recheck")
# the action's own defaults (the reboot role's and the playbook's of the same names)
ACTION_DEFAULTS = {
    "api_timeout": 30,              # nodefix_api_timeout (whole seconds, 1 to 600)
    "refused": "",
    "audit_args": {},
    "window_days": [],              # reboot_window_days
    "window_start": "00:00",
    "window_end": "23:59:59",
    "window_wrap": "kured",
    "time_zone": "UTC",
    "prometheus_timeout": 10,
    "alert_firing_only": True,
    "etcd_health_environment": {},  # nodefix_etcd_health_environment (secret)
    "backoff": backoff.DEFAULT_BACKOFF,     # nodefix_reboot_backoff: a duration (6h, 90m, 21600), the machine's
                                            # backoff_seconds (reboot_backoff's parser, _reboot.backoff)
}
# the machine's options the action takes in another form (backoff_seconds: the duration ``backoff``)
DERIVED = ("backoff_seconds",)
# the options without a default (unset: None), and their types
UNSET = (("kubeconfig", "path"), ("context", "str"), ("node", "str"), ("audit_before", "dict"), ("plan", "dict"),
         ("state", "dict"), ("remediation", "dict"), ("started", "float"), ("evidence_path", "path"),
         ("observed_dir", "path"), ("kernel_release", "str"),
         ("prometheus_url", "str"), ("alert_filter_regexp", "str"))
# the options whose values are secrets: never in a result, a message or -vvv's invocation
SECRET = ("prometheus_password", "prometheus_headers", "etcd_health_environment")
FAILED = (Outcome.REFUSED, Outcome.DRAIN_FAILED, Outcome.NOT_VERIFIED, Outcome.FAILED, Outcome.UNREACHABLE)
# the record's status of each outcome (_rollout/outcome.py's table; stopped: not started, skipped)
STATUS = {Outcome.OK: "ok", Outcome.NOTHING_TO_FIX: "skipped", Outcome.HELD: "skipped", Outcome.STOPPED: "skipped",
          Outcome.REFUSED: "failed", Outcome.DRAIN_FAILED: "failed", Outcome.NOT_VERIFIED: "failed",
          Outcome.FAILED: "failed", Outcome.UNREACHABLE: "unreachable"}
REQUIRED_IF = [("phase", "begin", ("audit_before", "plan")),
               ("phase", "end", ("audit_before", "state", "remediation")),
               ("phase", "recheck", ("state",))]


def _typed(value):
    """An argument spec entry for an option whose default is ``value``."""
    kind = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}[type(value)]
    out = {"type": kind, "default": copy.deepcopy(value)}
    if kind == "list":
        out["elements"] = "str"
    return out


def argument_spec():
    """The action's argument spec (``validate_argument_spec``; plugins/modules/rollout.py documents it, tested
    equal)."""
    spec = dict((name, {"type": kind}) for name, kind in UNSET)
    spec["phase"] = {"type": "str", "required": True, "choices": list(PHASES)}
    spec["run_id"] = {"type": "str", "required": True}
    spec.update(prometheus_client.argument_spec())
    for name, value in list(ACTION_DEFAULTS.items()) + list(DEFAULTS.items()):
        if name not in DERIVED:
            spec[name] = _typed(value)
    spec["window_wrap"]["choices"] = ["kured", "opening_day"]
    spec["storm_batch"]["elements"] = "dict"
    spec["etcd_health_environment"]["no_log"] = True
    return spec


def machine_options(args):
    """The machine's options (``context.DEFAULTS``' names) of the validated arguments; NodefixError naming an option
    that is not well-formed (``backoff``: a duration as the ``reboot_backoff`` module takes it)."""
    out = dict((name, args[name]) for name in DEFAULTS if name not in DERIVED)
    out["backoff_seconds"] = backoff.parse_duration(args["backoff"], "backoff (nodefix_reboot_backoff)")
    return out


def reboot_allowed(state, lock):
    """Whether this node may reboot now - any of the reboot paths (the reboot role's pending reboot, the kernel
    upgrade's boot, the mount-unit cleanup's reboot): a reason to reboot (``reboot_reasons``, the kernel upgrade's
    among them), none of the gates held it (backoff, window, pods, alerts, lock; judged again by ``recheck``), this
    run drained the node and holds the reboot lock's slot ``lock`` ("namespace/name")."""
    return bool(state["reboot_reasons"]) and not state["reboot_held"] and bool(state["drained"]) \
        and lock in state["slots"]


def failed(outcome):
    """Whether the task fails: the outcome, never a message's text."""
    return outcome in FAILED


def drain_error(state):
    """Why the drain failed ("" when it did not)."""
    drain = state.get("drain") or {}
    return drain.get("msg") or "" if state.get("outcome") == Outcome.DRAIN_FAILED else ""


def remediation_record(state, given=None, started=None, finished=None):
    """The node's remediation record (``_nodefix_remediation``: status, outcome, roles, msg and what the rollout
    adds - held, drain, given_back, evidence, seconds, finished) for a state whose outcome is set; ``given``: what
    the fix roles said (roles, actions, not_durable, reboot, step)."""
    given = given or {}
    outcome = state["outcome"]
    msg = state.get("detail") or ""
    if state.get("given_back"):
        msg = "; ".join(s for s in (state["given_back"], msg) if s)
    out = {"status": STATUS[outcome], "outcome": outcome, "roles": list(given.get("roles") or state["fix_roles"]),
           "msg": msg}
    for key in ("actions", "not_durable", "reboot", "step"):
        if given.get(key) is not None:
            out[key] = given[key]
    if state.get("unreachable_at"):
        out["step"] = state["unreachable_at"]
    if state.get("reboot_held") and outcome == Outcome.HELD and not state["fix_roles"]:
        out["roles"] = []
    # what became of the slots an earlier run left (the reclaim_slots step) and of a slot this run kept
    reclaimed = list(state.get("reclaim_said") or [])
    said = reclaimed + [k for k in state.get("slot_kept") or [] if k not in reclaimed]
    if said:
        out["msg"] = "; ".join(s for s in [out["msg"]] + said if s)
    extra = {"held": state.get("hold"), "given_back": state.get("given_back"), "evidence": state.get("evidence"),
             "drain": state.get("drain") if outcome == Outcome.DRAIN_FAILED else None,
             "refused": True if outcome == Outcome.REFUSED else None,
             "lock_reclaimed": state.get("lock_reclaimed"), "slot_kept": "; ".join(state.get("slot_kept") or [])}
    out.update((k, v) for k, v in extra.items() if v)
    if started is not None and finished is not None:
        out.update(seconds=round(finished - started, 1), finished=int(round(finished)))
    return out
