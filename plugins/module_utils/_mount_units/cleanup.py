# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Stopping the leaked kubelet mount units ``_mount_units.survey`` found (``kubelet_mount_units``
with ``state=absent``, and the role's timer): orphans stopped in batches (one systemd transaction each, or
``systemctl stop``: ``_mount_units.transaction``), ONE
``list-units`` afterwards telling which are still up, failed ones reset by name (never a global
``reset-failed``), optionally one ``daemon-reload`` for dead mount units on systemd < 237, within a
time budget. ``cli()`` runs it without Ansible (``python3 cleanup.py --config FILE``, the systemd
timer of ``nodefix.k8s.mount_units``); it imports only ``_core`` and ``_mount_units``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import runner as core_runner
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import transaction
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.systemd import argv_budget, chunks, parse_list_units
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.errors import MountUnitsError
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.summary import (
    empty_record,
    summarize,
    SYSTEMD_FIX_VERSION,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.survey import survey
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.units import ACTIVE_STATES_TO_STOP


def _transaction(runner, plan, batch, record):
    """Stop ``batch`` in one systemd transaction. When ``systemd-run`` fails, the rest of the run goes the
    ``systemctl stop`` way, and so does what of this batch is still up (re-read: a failure that is not a
    refusal - killed at the deadline, a bus timeout - may leave stops queued or done)."""
    tag = "%d-%d-%d" % (os.getpid(), int(time.time()), record["stop_calls"])
    argv = transaction.argv(plan["stop_tools"], batch, tag)
    rc, _out, err = runner.run(argv, check=False)
    if _not_run(rc, err):
        return NOT_RUN
    record["stop_calls"] += 1
    if rc == 0:
        record["transactions"] += 1
        return None
    refused = transaction.refused(err)
    _error(record, "systemd-run (one transaction stopping %d units, first %s)" % (len(batch), batch[0]), rc, err,
           ignored=refused)
    record["fallbacks"] += 1   # the rest of the run goes the systemctl stop way (apply)
    if refused:
        up = batch        # systemd queued nothing
    else:
        rc, listed, err = _listed(runner, plan["systemctl"])
        if listed is None:   # the batch is stopped again whole: systemctl stop touches only these names
            _error(record, "systemctl list-units (the failed transaction's batch)", rc, err)
        up = [n for n in batch if listed is None or listed.get(n, {}).get("active") in ACTIVE_STATES_TO_STOP]
    if up:
        _systemctl_stop(runner, plan, up, record)
    return None


# a command the runner did not start (SubprocessRunner: its deadline had passed; the timer's max_seconds)
NOT_RUN = "not run"


def _not_run(rc, err):
    return rc == core_runner.SubprocessRunner.TIMED_OUT and (err or "").startswith("not run:")


def _systemctl_stop(runner, plan, batch, record):
    argv = [plan["systemctl"], "stop"] + batch
    rc, _out, err = runner.run(argv, check=False)
    if _not_run(rc, err):
        return NOT_RUN
    record["stop_calls"] += 1
    if rc != 0:
        _error(record, "systemctl stop (%d units, first %s)" % (len(batch), batch[0]), rc, err)
    return None


def _error(record, cmd, rc, err, ignored=None):
    """A command's failure in ``record["errors"]`` (its stderr's tail; ``ignored``: not a failure of the cleanup)."""
    entry = {"cmd": cmd, "rc": rc, "stderr": (err or "")[-2000:]}
    if ignored is not None:
        entry["ignored"] = ignored
    record["errors"].append(entry)


def _listed(runner, systemctl):
    """``(rc, {unit: list-units row} or None when it failed, stderr)``: systemd's units, read again."""
    argv = [systemctl, "list-units", "--all", "--plain", "--no-legend", "--full"]
    rc, out, err = runner.run(argv, check=False)
    return rc, (dict((r["unit"], r) for r in parse_list_units(out)) if rc == 0 else None), err


def _batches(plan, names):
    """(way, batch) pairs: the names a transaction may carry in transactions (both lists, Conflicts= and
    After=, fit the argv budget and each one argv string), then the others in ``systemctl stop`` batches;
    ``batch_size`` names at most, argv kept under its budget."""
    size = int(plan["options"]["batch_size"])
    tx = [n for n in names if transaction.eligible(n)] if plan["stop_tools"] else []
    taken = set(tx)
    rest = [n for n in names if n not in taken]
    budget = min((argv_budget() - 1024) // 2, transaction.PROPERTY_MAX_BYTES)
    out = [("transaction", b) for b in chunks(tx, size, max_bytes=budget, weight=transaction.weight)]
    return out + [("systemctl", b) for b in chunks(rest, size)]


def apply(runner, plan):
    """Stop, reset and reload what ``survey`` decided; returns the record of what was done.

    Orphans are stopped in batches of ``batch_size`` names (argv kept under
    ARG_MAX): each batch of names a transaction may carry in one systemd
    transaction (``_mount_units.transaction``), the others with ``systemctl
    stop``; ONE ``list-units`` afterwards tells which are
    still up (a failure) and which ended ``failed`` (then reset with
    ``systemctl reset-failed <those names>``, never a global reset).
    """
    o = plan["options"]
    systemctl = plan["systemctl"]
    units = plan["units"]
    to_stop = [u["unit"] for u in units if u["action"] == "stop"]
    to_reset = [u["unit"] for u in units if u["action"] == "reset"] if o["reset_failed"] else []
    dead_mounts = [u["unit"] for u in units if u["action"] == "reload"]
    record = empty_record()
    t0 = time.time()
    m0 = time.monotonic()   # the budget's clock: a step of the wall clock moves it not
    budget = float(o["max_seconds"]) if o.get("max_seconds") else None
    attempted = []
    for way, batch in _batches(plan, to_stop):
        if budget is not None and attempted and time.monotonic() - m0 >= budget:
            break  # the budget is spent: the rest is left for the next run (or the node's timer)
        if way == "transaction" and not record["fallbacks"]:
            answer = _transaction(runner, plan, batch, record)
        else:
            answer = _systemctl_stop(runner, plan, batch, record)
        if answer == NOT_RUN:
            break  # the runner's deadline had passed: nothing of this batch was asked; it is left
        attempted.extend(batch)
    done = set(attempted)
    record["left"] = [n for n in to_stop if n not in done]
    to_stop = attempted
    if to_stop:
        _verify(runner, systemctl, to_stop, o, record)
    record["stop_s"] = round(time.time() - t0, 3)
    resets = to_reset + record["reset_after_stop"]
    for batch in chunks(resets, int(o["batch_size"])):
        argv = [systemctl, "reset-failed"] + batch
        rc, out, err = runner.run(argv, check=False)
        if rc != 0:
            # a unit that went away in between makes reset-failed complain: not a failure of the cleanup
            _error(record, "systemctl reset-failed (%d units)" % len(batch), rc, err, ignored=True)
    record["reset"] = to_reset
    # systemd < 237 leaves the mount units just stopped "inactive dead" too
    old = plan["systemd_version"] is not None and plan["systemd_version"] < SYSTEMD_FIX_VERSION
    stopped_mounts = old and any(n.endswith(".mount") for n in record["stopped"])
    if (dead_mounts or stopped_mounts) and o["daemon_reload"]:
        argv = [systemctl, "daemon-reload"]
        rc, out, err = runner.run(argv, check=False)
        if rc != 0:
            _error(record, "systemctl daemon-reload", rc, err)
        else:
            record["daemon_reload"] = True
    return record


def _verify(runner, systemctl, to_stop, o, record):
    """ONE ``list-units`` after the stops: which are still up, which ended failed (the after-state, re-read)."""
    t_verify = time.time()
    rc, after, err = _listed(runner, systemctl)
    if after is None:
        # what could not be read is not reported stopped: the task fails, naming the unread re-read
        record["verified"] = False
        _error(record, "systemctl list-units", rc, err)
        record["verify_s"] = round(time.time() - t_verify, 3)
        return
    for name in to_stop:
        row = after.get(name)
        if row and row["active"] in ACTIVE_STATES_TO_STOP:
            record["still_active"].append(name)
        elif row and row["active"] == "failed" and o["reset_failed"]:
            record["reset_after_stop"].append(name)
    still = set(record["still_active"])
    record["stopped"] = [n for n in to_stop if n not in still]
    record["verify_s"] = round(time.time() - t_verify, 3)


def run(runner, root="/", state="query", check_mode=False, **opts):
    """Survey, then with ``state='absent'`` (and not in check mode) stop the orphans.

    Raises ``MountUnitsError`` before any change when the survey fails (the
    runtime cannot be asked, systemd cannot be listed). Units still up after
    ``systemctl stop`` make ``failed`` true with a message.
    """
    if state not in ("absent", "query"):
        raise MountUnitsError("state must be absent or query, got %r" % (state,))
    plan = survey(runner, root=root, **opts)
    dry = check_mode or state == "query"
    record = empty_record() if dry else apply(runner, plan)
    result = summarize(plan, record, check_mode=dry)
    if state == "query":
        result["changed"] = False  # a report; check mode of state=absent predicts the change instead
    result["state"] = state
    failed = bool(record["still_active"]) or not record["verified"]
    failed = failed or any(e["cmd"] == "systemctl daemon-reload" for e in record["errors"])
    result["failed"] = failed
    if record["still_active"]:
        result["msg"] = "%d of %d orphaned units are still active after the stop" % (
            len(record["still_active"]), len(record["stopped"]) + len(record["still_active"]))
    elif failed:
        result["msg"] = "; ".join("%s: rc=%s %s" % (e["cmd"], e["rc"], e["stderr"].strip()) for e in record["errors"])
    return result


# --------------------------------------------------------------------------
# standalone use (the role's systemd timer): python3 this_file.py --config FILE


class SubprocessRunner(core_runner.SubprocessRunner):
    """The ``Runner`` interface without Ansible; a failed command is a ``MountUnitsError``."""

    error = MountUnitsError


CLI_OPTIONS = ("state", "kubelet_root_dir", "pod_source", "live_pod_uids", "crictl_path", "runtime_endpoint",
               "docker_path", "batch_size", "daemon_reload", "reset_failed", "list_limit", "process_guard",
               "systemctl_path", "root", "max_seconds", "stop_method")


def cli(argv=None):
    """``--config FILE`` (JSON with the module's option names) plus ``--check``; prints one JSON line."""
    import argparse
    parser = argparse.ArgumentParser(description="Stop the leaked kubelet mount units of dead pods "
                                                 "(nodefix.k8s.kubelet_mount_units without Ansible).")
    parser.add_argument("--config", help="JSON file with the options (state, kubelet_root_dir, pod_source, ...)")
    parser.add_argument("--state", choices=("absent", "query"))
    parser.add_argument("--check", action="store_true", help="report what would be stopped, change nothing")
    args = parser.parse_args(argv)
    opts = {}
    if args.config:
        with open(args.config) as fh:
            opts = json.load(fh)
        unknown = sorted(set(opts) - set(CLI_OPTIONS))
        if unknown:
            sys.stdout.write(json.dumps({"failed": True, "msg": "unknown options in %s: %s"
                                         % (args.config, ", ".join(unknown))}) + "\n")
            return 2
    if args.state:
        opts["state"] = args.state
    state = opts.pop("state", "absent")
    root = opts.pop("root", "/")
    # a budget (the timer's) bounds every command too: one that hangs (crictl against a hung runtime)
    # is killed at the budget instead of holding the timer's run while its survey ages
    deadline = time.monotonic() + float(opts["max_seconds"]) if opts.get("max_seconds") else None
    try:
        result = run(SubprocessRunner(deadline=deadline), root=root, state=state, check_mode=args.check, **opts)
    except MountUnitsError as exc:
        out = dict(exc.details, failed=True, changed=False, msg=exc.msg)
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
        return 1
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 1 if result.get("failed") else 0


if __name__ == "__main__":
    raise SystemExit(cli())
