# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""The reboot backoff: a node rebooted lately for a reason that is still open is not rebooted again.

A reboot that did not cure its reason (a pending-reboot flag that comes back, a kernel that will not
stay, dying cgroups that pile up again) would otherwise get the node drained and rebooted by every
scheduled run, and - the node failing its verification each time - stop a serial rollout there every
time. Just before the node goes down, the reboot path writes the annotation ``nodefix.k8s/last-reboot``
on the Node (``record``): JSON ``{"time", "run", "reasons": [{"id", "reason"}], "bootID"}``, the time in
UTC to the second, ``bootID`` the Node's ``status.nodeInfo.bootID`` when the record was written (the boot
the kubelet reports; a new boot, a new ID). Before the next reboot is even gated, ``decide`` reads it:

- no annotation, or the backoff off (``0``): the reboot goes on to the gate;
- the Node still reports the boot the record was written in (its ``bootID`` unchanged): the recorded reboot
  did not happen - the run was killed between the record and the reboot, or the reboot command never took
  the node down - so it does not count, and the reboot goes on (saying so);
- the last reboot longer ago than the backoff: the reboot goes on;
- within the backoff, for a reason that is open again now (the same finding id): held - "rebooted at
  T for R, still open: needs a person". A person looks at the node, then removes the annotation
  (``kubectl annotate node NODE nodefix.k8s/last-reboot-``) or waits the backoff out;
- within the backoff, for other reasons only: the reboot goes on (a new reason is not the old one);
- an annotation that cannot be read (not JSON, no time, a time that is not one, no reasons list) or a
  Node that cannot be read: held, saying why - fail closed, never "no record".

Every reboot inside the backoff is kept, not only the last (issue 62: a record that each reboot
overwrote let two reasons that take turns reboot a node on every run): the record carries
``"earlier": [{"time", "run", "ids", "bootID"}]``, the reboots before the last one that are still
inside the backoff (the oldest dropped once outside it, at most ``_EARLIER_KEPT``). ``decide`` holds
a reason open again after ANY reboot inside the backoff, and holds the node whatever the reason once
it was rebooted ``max_reboots`` times (default 2) inside the backoff - "rebooted N times within the
backoff: needs a person". A record without ``earlier`` (written before this field) is one reboot.

A time later than this controller's clock (another controller's clock ahead) counts as just now.
kured has no such backoff (it reboots while the sentinel exists); medik8s Node Healthcheck escalates
and stops after its remediators' timeouts, and Cluster API's MachineHealthCheck stops remediating when
``maxUnhealthy`` is crossed: all bound the damage of a remediation that does not cure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

ANNOTATION = "nodefix.k8s/last-reboot"
DEFAULT_BACKOFF = "6h"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_REASONS_KEPT = 20        # reasons kept in the annotation
_REASON_TEXT = 200        # characters of each reason's text
_EARLIER_KEPT = 10        # earlier reboots kept inside the backoff
DEFAULT_MAX_REBOOTS = 2   # reboots inside the backoff after which the node needs a person, whatever the reason
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^(?:(\d+)([smhdw]))+$")
_PART = re.compile(r"(\d+)([smhdw])")


class MalformedRecord(NodefixError):
    """An annotation that is not what ``record`` writes: the reboot is held."""


def parse_duration(value, what="nodefix_reboot_backoff"):
    """Seconds of a duration: a whole number of seconds (``21600``, ``"21600"``) or units, Go's and
    systemd's way (``6h``, ``90m``, ``1h30m``, ``1d``, ``2w``, ``45s``); ``0`` turns the backoff off.
    NodefixError naming the problem for anything else (negative, fractional, ``6 hours``, a bool)."""
    if isinstance(value, bool):
        raise NodefixError("%s %r is not a duration (seconds, or e.g. 6h, 90m, 1h30m, 1d)" % (what, value))
    if isinstance(value, int):
        if value < 0:
            raise NodefixError("%s must not be negative (got %d)" % (what, value))
        return value
    text = str(value if value is not None else "").strip().lower()
    if re.match(r"^\d+$", text):
        return int(text)
    if text and _DURATION.match(text):
        return sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
    raise NodefixError("%s %r is not a duration (a whole number of seconds, or e.g. 6h, 90m, 1h30m, 1d; "
                       "0 turns the backoff off)" % (what, value))


def describe_seconds(seconds):
    """``6h``, ``1h30m``, ``45s``: a duration as people write it."""
    if seconds <= 0:
        return "0s"
    out, rest = [], int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append("%d%s" % (rest // size, unit))
            rest %= size
    return "".join(out)


def _utc(value):
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def _reasons(reasons):
    """[{id, reason}] of the reboot's reasons ({id, check, reason} dicts), bounded."""
    out = []
    for item in reasons or []:
        if not isinstance(item, dict) or not item.get("id"):
            raise NodefixError("a reboot reason must be a dict with an id (got %s)" % json.dumps(item, default=str)[:120])
        out.append({"id": str(item["id"]), "reason": str(item.get("reason") or item["id"])[:_REASON_TEXT]})
    return out


def _inside(reboots, now, backoff_seconds):
    """The reboots (each with an aware ``time``) still inside the backoff at ``now``."""
    now = _utc(now).astimezone(datetime.timezone.utc)
    return [r for r in reboots if (now - r["time"]).total_seconds() < backoff_seconds]


def record(now, run_id, reasons, boot_id=None, last=None, backoff_seconds=0):
    """The annotation's value (JSON text) for a reboot starting ``now`` for ``reasons``, from the boot
    ``boot_id`` (the Node's ``status.nodeInfo.bootID`` now; left out when the Node reports none).

    ``last``: the record read before (``read_record``, None when none): its reboots still inside
    ``backoff_seconds`` are kept under ``earlier`` - a reboot the Node's boot ID says never happened
    is not."""
    kept = _reasons(reasons)
    body = {"time": _utc(now).astimezone(datetime.timezone.utc).strftime(_TIME_FORMAT), "run": str(run_id or ""),
            "reasons": kept[:_REASONS_KEPT]}
    if boot_id:
        body["bootID"] = str(boot_id)
    if last and backoff_seconds > 0:
        earlier = [r for r in reboots_of(last) if not (boot_id and r["boot_id"] == boot_id)]
        earlier = sorted(_inside(earlier, now, backoff_seconds), key=lambda r: r["time"])[-_EARLIER_KEPT:]
        if earlier:
            body["earlier"] = [dict({"time": r["time"].strftime(_TIME_FORMAT), "run": r["run"], "ids": r["ids"]},
                                    **({"bootID": r["boot_id"]} if r["boot_id"] else {})) for r in earlier]
    if len(kept) > _REASONS_KEPT:
        body["truncated"] = True
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def read_record(text):
    """{time (aware datetime), run, reasons: [{id, reason}]} of the annotation; MalformedRecord otherwise."""
    try:
        body = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedRecord("not JSON (%s)" % str(exc)[:120])
    if not isinstance(body, dict):
        raise MalformedRecord("not a JSON object")
    try:
        when = datetime.datetime.strptime(str(body.get("time")), _TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        raise MalformedRecord("its time %s is not a UTC time like 2026-11-27T14:00:00Z"
                              % json.dumps(body.get("time"), default=str)[:60])
    reasons = body.get("reasons")
    if not isinstance(reasons, list) or not reasons or not all(
            isinstance(r, dict) and isinstance(r.get("id"), str) and r["id"] for r in reasons):
        raise MalformedRecord("its reasons are not a list of {id, reason}")
    boot_id = body.get("bootID")
    if boot_id is not None and not (isinstance(boot_id, str) and boot_id):
        raise MalformedRecord("its bootID %s is not a boot ID" % json.dumps(boot_id, default=str)[:60])
    return {"time": when, "run": str(body.get("run") or ""), "boot_id": boot_id,
            "reasons": [{"id": r["id"], "reason": str(r.get("reason") or r["id"])} for r in reasons],
            "earlier": _read_earlier(body.get("earlier"))}


def _read_earlier(items):
    """[{time, run, ids, boot_id}] of a record's ``earlier`` ([] when absent); MalformedRecord otherwise."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise MalformedRecord("its earlier reboots are not a list")
    out = []
    for item in items:
        try:
            when = datetime.datetime.strptime(str(item.get("time")), _TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
        except (AttributeError, ValueError):
            raise MalformedRecord("an earlier reboot's time %s is not a UTC time"
                                  % json.dumps(item, default=str)[:80])
        ids = item.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise MalformedRecord("an earlier reboot's ids are not a list of finding ids")
        boot = item.get("bootID")
        out.append({"time": when, "run": str(item.get("run") or ""), "ids": ids,
                    "boot_id": boot if isinstance(boot, str) and boot else None})
    return out


def reboots_of(last):
    """Every reboot a record read holds, the last one first: [{time, run, ids, boot_id}]."""
    return ([{"time": last["time"], "run": last["run"], "ids": [r["id"] for r in last["reasons"]],
              "boot_id": last["boot_id"]}] + list(last.get("earlier") or []))


def _held(text, last=None, open_again=None):
    return {"held": True, "held_by": [text], "last": last, "open_again": open_again or [], "not_rebooted": ""}


def decide(annotations, reasons, now, backoff_seconds, node="the node", read_error=None, boot_id=None,
           max_reboots=DEFAULT_MAX_REBOOTS):
    """May this node be rebooted for ``reasons`` now, as far as the backoff goes?

    ``annotations``: the Node's ``metadata.annotations`` (None or {} when it has none); ``read_error``:
    why the Node could not be read (then it is held); ``boot_id``: the Node's ``status.nodeInfo.bootID``
    now (None when it reports none). {held, held_by: [text], last: the record read (time as text) or
    None, open_again: [ids], not_rebooted: the text saying the recorded reboot did not happen, or ""}.
    ``max_reboots``: reboots inside the backoff after which the node is held whatever the reason (0: no bound)."""
    free = {"held": False, "held_by": [], "last": None, "open_again": [], "not_rebooted": ""}
    if backoff_seconds <= 0:
        return free
    fix = ("check the node, then remove the annotation (kubectl annotate node %s %s-) or wait the backoff out"
           % (node, ANNOTATION))
    if read_error:
        return _held("the reboot backoff could not read %s's %s annotation (%s): held, as if rebooted just now; "
                     "a reboot is retried at the next run" % (node, ANNOTATION, read_error))
    text = (annotations or {}).get(ANNOTATION)
    if text is None:
        return free
    try:
        last = read_record(text)
    except MalformedRecord as exc:
        return _held("the %s annotation on %s cannot be read (%s): held, as if rebooted just now - needs a person: %s"
                     % (ANNOTATION, node, exc.msg, fix))
    shown = dict(last, time=last["time"].strftime(_TIME_FORMAT))
    shown["earlier"] = [dict(r, time=r["time"].strftime(_TIME_FORMAT)) for r in last["earlier"]]
    not_rebooted = ""
    if boot_id and last["boot_id"] == boot_id:
        # the kubelet still reports the boot the record was written in: that reboot never took the node down
        not_rebooted = (
            "the reboot recorded at %s (run %s) did not happen - %s still reports the boot it was recorded in "
            "(bootID %s) - so the reboot backoff does not count it" % (shown["time"], last["run"] or "?", node, boot_id))
    now = _utc(now).astimezone(datetime.timezone.utc)
    counted = _inside([r for r in reboots_of(last) if not (boot_id and r["boot_id"] == boot_id)], now,
                      backoff_seconds)
    free = dict(free, last=shown, not_rebooted=not_rebooted)
    if not counted:
        return free
    now_ids = [r["id"] for r in _reasons(reasons)]
    if max_reboots and len(counted) >= max_reboots:
        times = ", ".join(sorted(r["time"].strftime(_TIME_FORMAT) for r in counted))
        return dict(_held("rebooted %d times within the reboot backoff of %s (at %s), whatever the reason: needs a "
                          "person (at most %d reboot(s) of a node within the backoff; %s)"
                          % (len(counted), describe_seconds(backoff_seconds), times, max_reboots, fix), last=shown,
                          open_again=[i for i in now_ids if any(i in r["ids"] for r in counted)]),
                    not_rebooted=not_rebooted)
    # a reason open again after ANY reboot inside the backoff (the last one's words where it has them)
    words = dict((r["id"], r["reason"]) for r in last["reasons"])
    again, newest = [], None
    for reboot in counted:
        for ident in reboot["ids"]:
            if ident in now_ids and ident not in again:
                again.append(ident)
                newest = reboot["time"] if newest is None else max(newest, reboot["time"])
    if not again:
        return free
    age = (now - newest).total_seconds()
    until = max(newest, now) + datetime.timedelta(seconds=backoff_seconds - max(age, 0))
    return _held("rebooted at %s%s for %s, still open: needs a person (the reboot backoff of %s holds another "
                 "reboot for it until %s; %s)"
                 % (newest.strftime(_TIME_FORMAT), " (later than this controller's clock: counted as just now)"
                    if age < 0 else "", "; ".join(words.get(i, i) for i in again), describe_seconds(backoff_seconds),
                    until.strftime(_TIME_FORMAT), fix),
                 last=shown, open_again=again)
