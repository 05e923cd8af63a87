# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""A node's rollout state on the cluster: one documented, versioned record per Node (issue 62), the
annotation ``nodefix.k8s/rollout`` - JSON, as kured keeps its lock's value on the DaemonSet:

``{"version": 1, "run": id, "phase": claimed | drain | reboot, "started": T, "moved": T,
"renewed": T, "leaseSeconds": N, "holder": {"host", "pid", "boot"}, "cordonedBefore": bool}``
(times UTC to the second; ``cordonedBefore`` once the cordon step read it).

Version 2 is the rollout state machine's (``_rollout.machine``; docs/rollout-machine.md): the same fields, a
phase of ``MACHINE_PHASES`` (the step the run is about to take: the record is written BEFORE each disruptive
step), ``cordonedBefore`` (true, false, or null while not read yet) and ``slots`` (["namespace/lock", ...]: the
locks whose slot this node may hold) and, while a kernel upgrade's one-time boot may be armed on the node and is not
confirmed, ``kernelPending`` ({release, run, at}: ``KERNEL_PENDING``). This module reads both versions; ``new``, ``moved`` and ``decide`` write
version 1 unless told ``version=2`` (the node_rollout module's records stay what they were).

- A run **claims** a node before anything else is decided for it (``decide``); it **renews** the
  lease with every step it records (``moved``: the cordon, the reboot), and **releases** it when the
  node's rollout is over (the record removed). ``kubectl get node NODE -o
  jsonpath='{.metadata.annotations.nodefix\\.k8s/rollout}'`` shows it.
- **A live run is told from a dead one** by the lease, judged as client-go's leader election judges one
  (``observedTime``): by how long THIS controller has seen the record unchanged, on its own monotonic
  clock - a record seen unchanged for ``leaseSeconds`` belongs to a dead run; the holder's wall clock is
  never compared with this one's (``observed``: the caller's memory of the records it saw). A record this
  controller sees for the first time is live for a full ``leaseSeconds`` from now, as client-go counts it
  (under AWX every sight is a first: the job's container forgets), whatever the wall clocks say - unless it is
  grossly stale: renewed more than ``STALE_LEASES`` x ``leaseSeconds`` before this controller's clock (a crashed
  run's node is still taken over, by a controller whose clock is off by less than a lease). A ``renewed`` more
  than ``MAX_SKEW`` ahead of this controller's clock is not well-formed: the node is refused, naming it. A holder on this controller (same
  host name, same boot) whose process is gone is a dead run at once (a run SIGKILLed and re-run on the same
  controller). A second run refuses a node a live run holds, naming the run, its holder and when the
  lease runs out; a dead run's record is taken over (said so), and that run's cordon and lock slots
  are then given back by the steps that give back (``_rollout.cordon.reclaim``, the reboot role's reclaim).
- A record this run cannot read (not JSON, another version, missing fields) refuses the node: never a
  guess that nobody holds it (``kubectl annotate node NODE nodefix.k8s/rollout-`` once a person knows
  no run holds it).

Pure functions over plain data, plus ``controller`` (who this run is: the host, the ``ansible-playbook``
process, the boot) read from ``/proc``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import socket

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

ANNOTATION = "nodefix.k8s/rollout"
VERSION = 1
PHASES = ("claimed", "drain", "reboot")
MACHINE_VERSION = 2
# the machine's phases, in the order a rollout enters them (docs/rollout-machine.md)
MACHINE_PHASES = ("claimed", "gates", "cordon", "drain", "fix", "verify", "give_back")
# a version 2 record's field while a kernel upgrade's one-time boot may be armed on the node and is not confirmed:
# {release, run, at} - written right before the install (the kernel path's recheck), removed once the kernel role
# confirmed the boot or the machine disarmed it (_rollout.machine.kernel)
KERNEL_PENDING = "kernelPending"
DEFAULT_LEASE = 1800
# the clock skew allowed between the holder and a reader (seconds): a renewal further in the reader's future is not
# well-formed
MAX_SKEW = 30
# a record seen for the first time is taken for a crashed run's only once renewed this many leases ago (live)
STALE_LEASES = 2
_TIME = "%Y-%m-%dT%H:%M:%SZ"


class MalformedRecord(NodefixError):
    """A ``nodefix.k8s/rollout`` value this run cannot read: the node is refused."""


def _iso(when):
    return when.astimezone(datetime.timezone.utc).strftime(_TIME)


def _when(text, what):
    try:
        return datetime.datetime.strptime(str(text), _TIME).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        raise MalformedRecord("its %s %s is not a UTC time like 2026-12-06T07:00:00Z" % (what, json.dumps(text)[:60]))


def read(annotations):
    """The record on a Node ({} annotations: None); MalformedRecord for one that is not what ``new`` writes."""
    text = (annotations or {}).get(ANNOTATION)
    if text is None:
        return None
    try:
        body = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedRecord("not JSON (%s)" % str(exc)[:100])
    if not isinstance(body, dict):
        raise MalformedRecord("not a JSON object")
    version = body.get("version")
    if isinstance(version, bool) or version not in (VERSION, MACHINE_VERSION):
        raise MalformedRecord("version %s, this collection reads versions %d and %d" % (
            json.dumps(version), VERSION, MACHINE_VERSION))
    phases = _phases(version)
    if not isinstance(body.get("run"), str) or not body["run"] or body.get("phase") not in phases:
        raise MalformedRecord("no run id, or a phase that is not one of %s" % ", ".join(phases))
    if version == MACHINE_VERSION:
        _machine_fields(body)
    holder = body.get("holder")
    if not isinstance(holder, dict) or not isinstance(holder.get("host"), str):
        raise MalformedRecord("its holder is not {host, pid, boot}")
    lease = body.get("leaseSeconds")
    if isinstance(lease, bool) or not isinstance(lease, int) or lease < 1:
        raise MalformedRecord("its leaseSeconds %s is not a whole number of seconds" % json.dumps(lease))
    for key in ("started", "moved", "renewed"):
        _when(body.get(key), key)
    expires(body)
    return body


def _phases(version):
    return MACHINE_PHASES if version == MACHINE_VERSION else PHASES


def _machine_fields(body):
    """A version 2 record's own fields: ``cordonedBefore`` true, false or null; ``slots`` a list of lock names."""
    if body.get("cordonedBefore") not in (True, False, None):
        raise MalformedRecord("its cordonedBefore %s is not true, false or null" % json.dumps(body.get("cordonedBefore")))
    slots = body.get("slots", [])
    if not isinstance(slots, list) or not all(isinstance(s, str) and s.count("/") == 1 for s in slots):
        raise MalformedRecord("its slots are not a list of namespace/lock names")
    pending = body.get(KERNEL_PENDING)
    if pending is not None and not (isinstance(pending, dict) and isinstance(pending.get("release"), str)
                                    and pending["release"] and isinstance(pending.get("run"), str)):
        raise MalformedRecord("its %s %s is not {release, run, at}" % (KERNEL_PENDING, json.dumps(pending)[:80]))


def new(run_id, now, holder, lease_seconds, phase="claimed", started=None, version=VERSION):
    """A record for ``run_id`` claiming the node ``now`` (``version`` 2: the machine's, with its own fields)."""
    out = {"version": version, "run": str(run_id), "phase": phase, "started": _iso(started or now),
           "moved": _iso(now), "renewed": _iso(now), "leaseSeconds": int(lease_seconds), "holder": dict(holder)}
    if version == MACHINE_VERSION:
        out.update(cordonedBefore=None, slots=[])
    return out


def moved(record, phase, now, **fields):
    """The record after a step (``phase``), its lease renewed ``now``; ``fields`` e.g. ``cordonedBefore``."""
    phases = _phases(record.get("version"))
    if phase not in phases:
        raise NodefixError("a rollout phase must be one of %s, got %r" % (", ".join(phases), phase))
    out = dict(record, phase=phase, moved=_iso(now), renewed=_iso(now))
    out.update(fields)
    return out


def renewed(record, now, lease_seconds, **fields):
    """The record with its lease renewed ``now`` for ``lease_seconds``, its phase and ``moved`` as they were (a run
    about to take a long step - the reboot - renews for the step's worst case: ``_rollout.machine.ledger``);
    ``fields`` set too (a None value removes the field)."""
    out = dict(record, renewed=_iso(now), leaseSeconds=int(lease_seconds))
    out.update(fields)
    return dict((k, v) for k, v in out.items() if v is not None or k not in fields)


def text(record):
    """The annotation's value."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def expires(record):
    """When the record's lease runs out; MalformedRecord for a lease no clock can hold (a year 9999 renewal plus
    the lease, 10**12 seconds): held as a record that cannot be read, never a traceback."""
    try:
        return _when(record["renewed"], "renewed") + datetime.timedelta(seconds=record["leaseSeconds"])
    except (OverflowError, ValueError, TypeError) as exc:
        raise MalformedRecord("its lease cannot be computed (renewed %r, leaseSeconds %r: %s)"
                              % (record.get("renewed"), record.get("leaseSeconds"), exc))


def future_renewal(record, now):
    """Why ``record``'s ``renewed`` is not well-formed - more than ``MAX_SKEW`` seconds ahead of ``now``, this
    controller's clock - or "" (a lease renewed in the future would hold the node for as long as the writer liked)."""
    ahead = (_when(record["renewed"], "renewed") - now).total_seconds()
    if ahead > MAX_SKEW:
        return "its renewed %s is %d s ahead of this controller's clock (%s; at most %d s of clock skew is allowed)" % (
            record["renewed"], ahead, _iso(now), MAX_SKEW)
    return ""


def fingerprint(record):
    """What tells one write of a record from the next (every write renews or moves it): its run, phase, times and
    lease - what an observer remembers to time the record on its own clock."""
    return "|".join("%s" % record.get(k) for k in ("run", "phase", "started", "moved", "renewed", "leaseSeconds"))


def live(record, now, here, pid_alive, observed_for=None):
    """(live, why) of a record another run wrote. ``here``: this controller ({host, pid, boot});
    ``pid_alive(pid)``: whether a process of that id runs on this controller; ``observed_for``: for how many seconds
    this controller has seen this record unchanged (its own monotonic clock), None when it sees it for the first
    time."""
    holder = record["holder"]
    if holder.get("host") == here.get("host") and holder.get("boot") and holder.get("boot") == here.get("boot") \
            and isinstance(holder.get("pid"), int) and not pid_alive(holder["pid"]):
        return False, "its process %d on this controller (%s) is gone" % (holder["pid"], holder["host"])
    lease = record["leaseSeconds"]
    if observed_for is not None:
        # client-go's leader election: the lease runs from when this observer saw the record change, on its own clock
        if observed_for >= lease:
            return False, "this controller has seen it unchanged for %d s, past its lease of %d s (its own clock)" % (
                observed_for, lease)
        return True, "this controller has seen it unchanged for %d s of its lease of %d s (its own clock)" % (
            observed_for, lease)
    # first sight: live for a full lease from now (client-go), never judged by comparing wall clocks - but a record
    # renewed STALE_LEASES leases before this controller's clock belongs to a crashed run (taken over eventually)
    try:
        stale = _when(record["renewed"], "renewed") + datetime.timedelta(seconds=STALE_LEASES * lease)
    except (OverflowError, ValueError, TypeError) as exc:
        raise MalformedRecord("its lease cannot be computed (renewed %r, leaseSeconds %r: %s)"
                              % (record.get("renewed"), lease, exc))
    if now >= stale:
        return False, "it was renewed at %s, more than %d x its lease of %d s before this controller's clock" % (
            record["renewed"], STALE_LEASES, lease)
    return True, ("this controller sees it for the first time: live for its full lease of %d s from now (its own "
                  "clock), or until %s on the wall clock (renewed + %d x the lease)"
                  % (lease, _iso(stale), STALE_LEASES))


def decide(annotations, run_id, now, here, lease_seconds, pid_alive, version=VERSION, observed=None):
    """Claim the node for ``run_id``: {action, record, previous, msg} (``version``: of the record written;
    ``observed(record)``: for how many seconds this controller has seen that record unchanged, on its own monotonic
    clock, None the first time - see ``live``).

    ``action``: ``claim`` (no record, or this run's own: written fresh or renewed), ``take_over`` (a dead
    run's: written, said so), ``refuse`` (a live run holds it, or a record that cannot be read)."""
    try:
        previous = read(annotations)
        future = future_renewal(previous, now) if previous is not None else ""
        if future:
            raise MalformedRecord(future)
    except MalformedRecord as exc:
        return {"action": "refuse", "record": None, "previous": None, "msg": (
            "refused: the %s record on the node cannot be read (%s) - another run may hold it; once no run holds "
            "it, remove it (kubectl annotate node NODE %s-)" % (ANNOTATION, exc.msg, ANNOTATION))}
    if previous is None:
        return {"action": "claim", "record": new(run_id, now, here, lease_seconds, version=version), "previous": None,
                "msg": ""}
    if previous["run"] == str(run_id) and previous["holder"] == here:
        return {"action": "claim", "record": new(run_id, now, here, lease_seconds, started=_when(
            previous["started"], "started"), version=version), "previous": previous, "msg": ""}
    alive, why = live(previous, now, here, pid_alive, observed(previous) if observed is not None else None)
    holder = previous["holder"]
    who = "nodefix run %s (%s, process %s)" % (previous["run"], holder.get("host"), holder.get("pid"))
    if alive:
        return {"action": "refuse", "record": None, "previous": previous, "msg": (
            "refused: %s holds this node (phase %s since %s; %s) - two runs never work on one node; nothing was "
            "touched" % (who, previous["phase"], previous["moved"], why))}
    return {"action": "take_over", "record": new(run_id, now, here, lease_seconds, version=version), "previous": previous,
            "msg": "took the node over from %s, which is dead (%s; phase %s since %s)" % (
                who, why, previous["phase"], previous["moved"])}


def release(annotations, run_id, here):
    """Whether this run's record is on the node (then it is removed at the end of its rollout)."""
    try:
        record = read(annotations)
    except MalformedRecord:
        return False
    return bool(record) and record["run"] == str(run_id) and record["holder"] == here


def _stat(pid):
    """(parent pid, command line) of a process on this controller, None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read()
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except (IOError, OSError):
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1]), cmdline


def playbook_pid(start, stat=_stat):
    """The ``ansible-playbook`` process this module runs under: the outermost ancestor of ``start`` whose
    command line names ``ansible-playbook`` (its workers are forks of it, with its command line); ``start``
    when none does (a module run alone)."""
    found, pid = None, start
    for _dummy in range(64):
        seen = stat(pid)
        if seen is None:
            break
        parent, cmdline = seen
        if "ansible-playbook" in cmdline:
            found = pid
        if parent <= 1:
            break
        pid = parent
    return found or start


def controller():
    """This run on this controller: {host, pid (the ansible-playbook process), boot (this boot's id)}."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
    except (IOError, OSError):
        boot = ""
    return {"host": socket.gethostname(), "pid": playbook_pid(os.getppid()), "boot": boot}


def pid_alive(pid):
    """Whether a process of that id runs on this controller."""
    return os.path.exists("/proc/%d" % pid)
