# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.rollout: one node's rollout, the state machine of ``_rollout/machine`` driven on the controller
(plugins/modules/rollout.py holds the docs; docs/rollout-machine.md the interface). As ansible-core's ``reboot``
action runs its sequence in one ``run()``: every API call in-process through one ``RolloutApi`` (the collection's
one client), the node-side work (``node_evidence``, ``node_audit``) one module round trip each, one line a step
printed as it ends, the whole result through the one redacting exit."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import socket
import tempfile
import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.common.process import get_bin_path
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.nodefix.k8s.plugins.module_utils._core import spawn
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import leave_action, redacted_run
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_values import of_mapping as secret_mapping_values
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import events_api
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s.rollout_api import RolloutApi
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus.transport import OpenUrl
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import control_plane
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate
from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import observed
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import interface
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.before import evidence_before
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.steps import DONE, WOULD
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

display = Display()
# the steps whose "done" (or a hold's "held") wrote to the cluster or the report directory
WRITING = ("claim", "kernel_boot", "control_plane", "reboot_gate", "reclaim_slots", "start_event", "evidence", "storm",
           "cordon", "drain",
           "fix", "give_back", "release_slots", "end_event", "release")
EVENTS_NAMESPACE = "default"


def secret_values(args):
    """The credentials among the secret options (``interface.SECRET``), removed as they are from every line, Event,
    annotation and result: the password, and only the values of the headers and environment variables whose names
    are a secret's (``_core.secret_values``) - a tenant header or ``ETCDCTL_USER=root`` is not one."""
    out = set()
    for name in interface.SECRET:
        value = args.get(name)
        if isinstance(value, dict):
            out.update(secret_mapping_values(value))
        elif value not in (None, "") and not isinstance(value, bool):
            out.add("%s" % value)
    return out


# the machine's own fields of the result and of its state: codes, flags and names phase=end is given back, never
# text a credential can be in - masked as substrings, a short credential (ETCDCTL_PASSWORD=ok) would turn the
# outcome "ok" and a lock slot's name into VALUE_SPECIFIED_IN_NO_LOG_PARAMETER and the end phase would work from a
# mangled state. Every other field (msg, detail, lines, warnings, the state's detail, reboot_held, given_back, each
# step's detail) is masked.
MACHINE_FIELDS = ("outcome", "failed", "changed", "fix_roles", "reboot_allowed", "reboot_reasons",
                  "reboot_timeout_cover", "drained", "cordoned_before")
STATE_CODES = ("fix_roles", "claimed", "previous", "cordoned_before", "cordoned", "drained", "slots", "outcome",
               "started", "record")
STEP_CODES = ("name", "outcome")


def _masked_except(mapping, keep, values):
    """``mapping`` without any of ``values`` in its fields but ``keep`` (and its ``steps``' codes)."""
    out = remove_values(dict((k, v) for k, v in mapping.items() if k not in keep + ("steps", "state")), values)
    out.update((k, mapping[k]) for k in keep if k in mapping)
    if isinstance(mapping.get("steps"), list):
        out["steps"] = [_masked_except(step, STEP_CODES, values) if isinstance(step, dict) else
                        remove_values(step, values) for step in mapping["steps"]]
    return out


def scrubbed(result, values):
    """``result`` without any of ``values`` in its texts (see MACHINE_FIELDS); the machine's codes as they are."""
    if not values:
        return result
    out = _masked_except(result, MACHINE_FIELDS, values)
    if isinstance(result.get("state"), dict):
        out["state"] = _masked_except(result["state"], STATE_CODES, values)
    elif "state" in result:
        out["state"] = result["state"]
    return out


def redactor(values):
    """``text`` -> the text without any of ``values``: what the machine's ``Runner`` applies to a step's detail after
    the redaction by shape."""
    return lambda text: remove_values(text, values) if values else text


def write_evidence(path, bundle):
    """The evidence bundle, atomically, 0600 in a 0700 directory (a temporary file renamed over the path)."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    handle, temp = tempfile.mkstemp(prefix=".evidence-", dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(bundle, indent=4, sort_keys=True) + "\n")
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def etcd_runner(environment, timeout):
    """``run_command(argv)`` -> (rc, stdout, stderr) of the etcd health command on the controller: argv[0] found on
    PATH, a C locale, ``environment`` (secret) added, killed after ``timeout`` seconds."""
    def run(argv):
        argv = list(argv)
        try:
            argv[0] = argv[0] if "/" in argv[0] else get_bin_path(argv[0])
        except ValueError as exc:
            return 127, "", "%s" % exc
        env = dict(os.environ, LC_ALL="C", LANG="C")
        env.update((k, "%s" % v) for k, v in (environment or {}).items())
        try:
            rc, out, err, killed = spawn.run(argv, env, timeout)
        except OSError as exc:          # not executable, gone between the look-up and the run
            return 126, "", "%s" % exc
        err = err.decode("utf-8", "replace") + (" (killed after %s s)" % timeout if killed else "")
        return rc, out.decode("utf-8", "replace"), err
    return run


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _validated(self):
        """The task's arguments, validated and with every default (``interface.argument_spec``); a bad one fails the
        task naming it (ansible-core's validator names the option, never its value), before anything is read or
        written."""
        try:
            _result, args = self.validate_argument_spec(argument_spec=interface.argument_spec(),
                                                        required_if=interface.REQUIRED_IF)
        except AnsibleActionFail as exc:
            raise AnsibleActionFail("nodefix.k8s.rollout: %s; nothing was read or written" % exc.message)
        try:
            interface.machine_options(args)
        except NodefixError as exc:
            raise AnsibleActionFail("nodefix.k8s.rollout: %s; nothing was read or written" % exc)
        if not 1 <= args["api_timeout"] <= 600:
            raise AnsibleActionFail("nodefix.k8s.rollout: api_timeout must be 1 to 600 seconds, "
                                    "got %s; nothing was read or written" % args["api_timeout"])
        return args

    def _drop_tmp(self):
        """The node's temporary directory removed right after its module, while the node is there: the task's own
        cleanup would reach the node again after the give-back (a node that went away then would lose the whole
        result, the task unreachable); a node that cannot be reached now keeps it."""
        if self._connection._shell.tmpdir:
            try:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            except AnsibleError:
                self._connection._shell.tmpdir = None

    def _node_module(self, name, module_args, task_vars):
        """One module on the node (the task's connection and become): its result; NodefixError when it failed or
        the node could not be reached."""
        try:
            out = self._execute_module(module_name=name, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            raise NodefixError("%s: the node could not be reached: %s" % (name, exc), unreachable=True)
        except AnsibleError as exc:     # the module could not be run (found, templated, transferred)
            raise NodefixError("%s could not be run: %s" % (name, exc))
        finally:
            self._drop_tmp()
        if out.get("unreachable"):
            raise NodefixError("%s: the node could not be reached: %s" % (name, out.get("msg") or "no answer"),
                               unreachable=True)
        if out.get("failed"):
            raise NodefixError("%s failed: %s" % (name, out.get("msg") or "failed"))
        return out

    def _work(self, args, node, task_vars, api):
        """The machine's injected work; options that cannot work (a window, an alert filter, Prometheus's
        options) raise NodefixError here, before anything is read or written."""
        window = gate.Window(args["window_days"] or None, args["window_start"], args["window_end"], args["time_zone"],
                             wrap=args["window_wrap"])
        work = {"window": window,
                "run_command": etcd_runner(args["etcd_health_environment"], args["api_timeout"] * 4),
                "audit": lambda: self._node_module("nodefix.k8s.node_audit", args["audit_args"], task_vars),
                "redact": redactor(secret_values(args)),
                "after_step": lambda step: display.display("%s%s | %s" % (
                    "(check) " if self._task.check_mode else "", node, step.line()))}
        if args["prometheus_url"]:
            client = prometheus_client.from_params(OpenUrl(), args)
            filter_re = gate.alert_filter(args["alert_filter_regexp"])
            for warning in client.warnings:
                display.warning(warning)
            work["alerts"] = lambda: gate.blocking_alerts(gate.fetch_alerts(client), filter_re,
                                                          args["alert_firing_only"])
        for warning in control_plane.health_command_warnings(args["etcd_health_command"]):
            display.warning(warning)
        if args["evidence_path"]:
            work["evidence"] = lambda: self._evidence(args, task_vars)
        if args["observed_dir"]:
            work["observe"] = observed.Observations(args["observed_dir"], node, record.controller()["boot"],
                                                    time.monotonic, record.fingerprint)
            # what this controller saw of the lock slots, carried across steps, halves, nodes and runs (saved by _drive),
            # on its monotonic clock: the sights of another boot are dropped
            boot = record.controller()["boot"]
            work["lock_observed"] = observed.LockObservations(args["observed_dir"]).load(boot)
            work["lock_time"] = lambda: (time.monotonic(), boot)
        if api is not None:
            work["events"] = lambda phase, state: self._events(args, node, api, phase, state)
            # an unconfirmed kernel boot (the record's kernelPending) put back on the running kernel, on the node
            work["kernel_disarm"] = lambda release: self._node_module(
                "nodefix.k8s.kernel_boot", {"state": "disarm", "release": release}, task_vars)
        return work

    def _evidence(self, args, task_vars):
        plan = args["plan"] or {}
        out = self._node_module("nodefix.k8s.node_evidence", {"audit": args["audit_before"],
                                                              "roles": list(plan.get("fix_roles") or [])}, task_vars)
        bundle = out.get("evidence") or {}
        try:
            write_evidence(args["evidence_path"], bundle)
        except (IOError, OSError) as exc:
            raise NodefixError("the evidence could not be written to %s: %s" % (args["evidence_path"], exc))
        return {"path": args["evidence_path"], "bytes": bundle.get("bytes"),
                "before": evidence_before(plan),
                "missing": [m.get("source") for m in bundle.get("missing") or [] if isinstance(m, dict)]}

    def _events(self, args, node, api, phase, state):
        """The start or end Events (``_report.trail``'s words, as the node_events module posts them) and, at the
        end, the ``nodefix.k8s/last-remediation`` annotation: [what was not written] when the API accepted some of
        it; NodefixError naming what was not written when it accepted nothing."""
        before = args["audit_before"]
        if phase == "start":
            events, note = trail.start_events(args["run_id"], before, args["plan"] or {}, args["started"]), {}
        else:
            finished = time.time()
            rec = interface.remediation_record(state, args["remediation"], state.get("started") or args["started"],
                                               finished)
            after = state.get("audit_after")
            events = trail.end_events(args["run_id"], before, after, rec, finished, state["drained"],
                                      interface.drain_error(state), bool(state["cordoned_before"]))
            note = trail.annotation(args["run_id"], rec, before, after, finished)
        instance = trail.cut_bytes(socket.gethostname(), trail.INSTANCE_MAX, "")
        # what leaves for the cluster (kept there after the run) goes through the steps' redactor once more: the
        # roles' own message (remediation.msg) is not a step's detail
        values = secret_values(args)
        events = [remove_values(redact(e), values) for e in events]
        note = remove_values(redact(note), values)
        posted, annotated, errors = events_api.post(api.kube, node, EVENTS_NAMESPACE, instance,
                                                    trail.ordered(events), note)
        if errors and not (posted or annotated):
            raise NodefixError("; ".join(errors))
        return errors

    def _drive(self, args, node, task_vars):
        """The machine's result of the phase (NodefixError, nothing written, for a kubeconfig that cannot be loaded,
        options that cannot work, a ``state`` that is not begin's or a ``remediation.status`` that is not one)."""
        check = bool(self._task.check_mode)
        # without a kubeconfig: no API server (remediate.yml's path without nodefix_kubeconfig; machine.BEFORE_LOCAL)
        api = RolloutApi(args["kubeconfig"], args["context"], args["api_timeout"]) if args["kubeconfig"] else None
        work = self._work(args, node, task_vars, api)
        plan = dict(args["plan"] or {}, refused=args["refused"]) if args["phase"] == "begin" else {}
        ctx = mctx.Context(api, node, args["run_id"], record.controller(), record.pid_alive, args["audit_before"],
                           plan, lambda: datetime.datetime.now(datetime.timezone.utc), time.sleep,
                           interface.machine_options(args), check, **work)
        try:
            return self._phase(args, ctx)
        finally:
            if args["observed_dir"] and not check:      # check mode writes nothing (not even what it saw)
                observed.LockObservations(args["observed_dir"]).save(ctx.lock_observed)

    @staticmethod
    def _phase(args, ctx):
        if args["phase"] == "begin":
            return machine.begin(ctx)
        state = checked_state(args["state"])
        if args["phase"] == "recheck":
            return machine.recheck(ctx, state, args["kernel_release"] or "")
        remediation = args["remediation"]
        if remediation.get("status") not in ("ok", "failed", "unreachable"):
            raise NodefixError("remediation.status must be ok, failed or unreachable, got %r"
                               % remediation.get("status"))
        return machine.end(ctx, state, remediation)

    @redacted_run
    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._validated()
        node = args["node"] or task_vars.get("inventory_hostname")
        if args["phase"] == "begin":
            args["started"] = args["started"] if args["started"] is not None else time.time()
        try:
            out = self._drive(args, node, task_vars)
        except NodefixError as exc:
            # raised before the machine ran a step (options, kubeconfig, state): nothing was read or written
            raise AnsibleActionFail(remove_values("nodefix.k8s.rollout %s on %s: %s; nothing was drained or changed" % (
                args["phase"], node, exc), secret_values(args)))
        result.update(self._answer(args, out))
        return leave_action(scrubbed(result, secret_values(args)))

    def _answer(self, args, out):
        state, steps = out["state"], out["steps"]
        if args["phase"] == "begin":
            state["started"] = args["started"]
        outcome = out["outcome"]    # (recheck: None, or failed when another run took the node over)
        if self._task.check_mode:
            changed = any(s["outcome"] == WOULD for s in steps)
        else:
            # without an API server the rollout writes nothing on the cluster: only the evidence file is a change
            writing = WRITING if args.get("kubeconfig") else ("evidence",)
            changed = any(s["outcome"] in (DONE, Outcome.HELD) and s["name"] in writing for s in steps)
        answer = {"outcome": outcome, "detail": out["detail"] if outcome else "", "steps": steps,
                  "lines": out["lines"], "state": state, "failed": interface.failed(outcome), "changed": changed}
        if out.get("warnings"):     # an Event the API did not accept: a warning, never a change
            answer["warnings"] = list(out["warnings"])
        if args["phase"] in ("begin", "recheck"):
            lock = "%s/%s" % (args["lock_namespace"], args["lock_name"])
            answer.update(fix_roles=state["fix_roles"], reboot_held=state["reboot_held"],
                          reboot_reasons=state["reboot_reasons"] if mctx.REBOOT_ROLE in state["fix_roles"] else [],
                          reboot_allowed=interface.reboot_allowed(state, lock))
        if args["phase"] == "recheck":
            answer["reboot_timeout_cover"] = int(state.get("reboot_timeout_cover") or 0)
        if args["phase"] == "begin":
            answer.update(drained=state["drained"], cordoned_before=state["cordoned_before"])
            if state.get("evidence"):
                answer["evidence"] = state["evidence"]
        if args["phase"] == "end" and state.get("audit_after") is not None:
            answer["audit_after"] = state["audit_after"]
        if outcome is not None:
            answer["remediation"] = interface.remediation_record(
                state, args["remediation"], state.get("started"), time.time())
        answer["msg"] = "%s: %s" % (outcome, out["detail"]) if outcome else (
            "run the fix roles: %s" % ", ".join(state["fix_roles"]) if args["phase"] == "begin"
            else "reboot %s" % ("allowed" if answer["reboot_allowed"] else "held: " + "; ".join(state["reboot_held"])))
        return answer


def checked_state(state):
    """``begin``'s state as the play passed it back; NodefixError when it is not one (nothing is written)."""
    missing = sorted(set(mctx.new_state({})) - set(state or {}))
    if missing:
        raise NodefixError("state is not the state phase=begin answered (missing %s)" % ", ".join(missing))
    return dict(state)
