# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""May this node reboot now? kured's controls, decided on the controller.

kured (https://kured.dev/docs/configuration/) holds a reboot while any of
these says no, and so does the ``reboot_gate`` module:

- a reboot window: days of the week, a start and an end time, a time zone
  (``--reboot-days``, ``--start-time``, ``--end-time``, ``--time-zone``), in
  kured's spellings. An end before the start wraps past midnight; the day such a
  window is open on is, as in kured, the day of the current local time
  (``wrap="kured"``, the default) or the day it opened on (``wrap="opening_day"``);
  across daylight saving time it lasts the elapsed time its start and end say
  (``Window``);
- blocking pods: a label selector (``--blocking-pod-selector``); a node
  running a pod it selects is not rebooted now;
- blocking alerts: a Prometheus server (``--prometheus-url``) whose firing
  alerts hold every reboot, except those matching a filter regexp
  (``--alert-filter-regexp``); ``GET /api/v1/alerts`` of the Prometheus HTTP
  API (https://prometheus.io/docs/prometheus/latest/querying/api/#alerts);
- a lock: at most N nodes rebooting at once across the fleet (kured:
  ``--concurrency``, a lock annotation on its DaemonSet). Here N
  ``coordination.k8s.io/v1`` Leases ``<name>-0`` .. ``<name>-(N-1)``: a node
  holds one by being its ``holderIdentity``. Taking a slot is a create (the
  API server refuses a second one with 409 AlreadyExists) or, for a free or
  expired slot, an update carrying the ``resourceVersion`` read (409 Conflict
  when someone else wrote it in between): two controllers - parallel slices of
  one rollout - can never both hold one slot. A Lease without a
  ``leaseDurationSeconds`` never expires (kured's default ``--lock-ttl=0``): a
  node that did not come back keeps its slot until someone looks at it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # index: Python's weekday()
MANAGED_BY = "nodefix.k8s"
_SEEN_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# a slot kept on purpose (``_reboot.control_plane.reclaim``: its node went down and is not back, or its etcd member is
# not back): why, on the Lease - such a slot never expires by time, only its holder's own run or a person gives it back
KEPT = "nodefix.k8s/kept"

# kured's day spellings (pkg/timewindow/days.go): two letters, three letters, the full name, any
# case; or a number 0-6, Sunday first (Go's time.Weekday).
_DAY_NAMES = dict((spelling, index) for index, names in enumerate((
    ("mo", "mon", "monday"), ("tu", "tue", "tuesday"), ("we", "wed", "wednesday"), ("th", "thu", "thursday"),
    ("fr", "fri", "friday"), ("sa", "sat", "saturday"), ("su", "sun", "sunday"))) for spelling in names)
# kured's time spellings (pkg/timewindow/timewindow.go parseTime): 15:04, 15:04:05, 03:04pm, 15,
# 03pm, 3pm (Go's reference time); am/pm in any case here. Go reads an hour 0 on the 12-hour clock
# as 12 ("00:01am" is 00:01, kured's own tests spell it so).
_TIME_24 = re.compile(r"^([01]?\d|2[0-3])(?::([0-5]\d)(?::([0-5]\d))?)?$")
_TIME_12 = re.compile(r"^(0?\d|1[0-2])(?::([0-5]\d))?\s?([ap]m)$", re.IGNORECASE)


def _utc(value):
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def zone(name):
    """A tzinfo for an IANA name (``Europe/Berlin``) or ``UTC``; NodefixError for anything else."""
    if name in (None, "", "UTC", "utc", "Etc/UTC"):
        return datetime.timezone.utc
    try:
        import zoneinfo  # Python >= 3.9, on the controller
    except ImportError:  # pragma: no cover - the controller runs Python >= 3.10
        raise NodefixError("time zone %r needs Python >= 3.9 (zoneinfo) on the controller; use UTC" % name)
    try:
        return zoneinfo.ZoneInfo(str(name))
    # ZoneInfoNotFoundError, ValueError (a malformed key), IsADirectoryError ("Europe"), other
    # OSErrors and a corrupt TZif file: whatever it is, no time zone by that name
    except Exception as exc:  # pylint: disable=broad-except
        raise NodefixError("time zone %r is not an IANA time zone (e.g. Europe/Berlin, UTC): %s: %s"
                           % (name, type(exc).__name__, exc))


def parse_day(text):
    """Python's weekday (0 = Monday) of a kured day spelling; NodefixError for anything else."""
    key = str(text).strip().lower()
    if re.match(r"^0*[0-6]$", key):
        return (int(key) - 1) % 7  # kured's numbers count from Sunday
    if key not in _DAY_NAMES:
        raise NodefixError("window day %r is not a day of the week (kured's spellings: su mo tu we th fr sa, "
                           "sun ... sat, sunday ... saturday in any case, or 0-6 with 0 for Sunday)" % (text,))
    return _DAY_NAMES[key]


def parse_time(text, what):
    """A datetime.time of a kured time spelling (``15:04``, ``15:04:05``, ``15``, ``3pm``, ``03pm``,
    ``03:04pm``); NodefixError for anything else."""
    raw = str(text if text is not None else "").strip()
    m = _TIME_24.match(raw)
    if m:
        return datetime.time(int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0))
    m = _TIME_12.match(raw)
    if m:
        hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
        return datetime.time(hour, int(m.group(2) or 0))
    raise NodefixError("%s %r is not a time of day (kured's spellings: 15:04, 15:04:05, 15, 3pm, 03pm, 03:04pm)"
                       % (what, text))


class Window(object):
    """A weekly reboot window (days, start, end, time zone).

    What it means across daylight saving time: the window opens on each chosen day at the first
    instant the zone's wall clock shows the start time (when the clocks skip that time - spring
    forward - at the instant they jump past it) and stays open for the elapsed time between start
    and end on an ordinary day (end inclusive, to the second; an end before the start wraps past
    midnight). So 02:00-02:30 Europe/Berlin is open 30 minutes on the autumn day (not 62: the
    repeated hour does not reopen it) and 03:00-03:30 CEST on the spring day (02:00-02:30 does not
    exist then): never longer or shorter than its operator wrote. kured builds start and end on
    "now"'s day with Go's time.Date (pkg/timewindow/timewindow.go Contains), which picks one of the
    two instants of a repeated time without saying which.

    Which day a window that wraps past midnight is open on (``wrap``):

    - ``kured`` (the default): the day of the current local time, as kured's Contains decides it
      (it checks "now"'s weekday first, then moves the start a day back or the end a day on): at any
      instant the window is open when today is one of its days and the time of day is after the
      start or before the end. ``mon-fri 21:00-05:00`` is open Monday 00:00-05:00 and Friday
      21:00-24:00, not Saturday 00:00-05:00;
    - ``opening_day``: the day it opened on - each opening lasts through to its end, whatever the
      day after it is: ``mon-fri 21:00-05:00`` is open Saturday 00:00-05:00 (Friday's night) and not
      Monday 00:00-05:00 (Sunday's).

    A window that does not wrap is the same either way.
    """

    WRAPS = ("kured", "opening_day")

    def __init__(self, days=None, start="00:00", end="23:59:59", time_zone="UTC", wrap="kured"):
        if wrap not in self.WRAPS:
            raise NodefixError("window wrap %r is not one of %s" % (wrap, ", ".join(self.WRAPS)))
        self.wrap = wrap
        if days is None:
            days = list(DAYS)
        # kured's --reboot-days is a comma-separated flag: "mo,tu" as one item is two days
        spellings = [part for day in days for part in str(day).split(",") if part.strip()]
        if not spellings:
            raise NodefixError("window days is empty: no day would ever allow a reboot (omit it for every day)")
        indices = set(parse_day(day) for day in spellings)
        self.days = [DAYS[i] for i in sorted(indices)]
        self.start = parse_time(start, "window start")
        self.end = parse_time(end, "window end")
        if self.start == self.end:
            raise NodefixError("window start and end are both %s: an empty window" % self.start)
        self.time_zone = time_zone or "UTC"
        self.tz = zone(self.time_zone)
        span = (datetime.datetime.combine(datetime.date(2000, 1, 1), self.end)
                - datetime.datetime.combine(datetime.date(2000, 1, 1), self.start))
        self.duration = span if span > datetime.timedelta(0) else span + datetime.timedelta(days=1)

    def opening(self, day):
        """The UTC instant the window opens on local date ``day`` (PEP 495 fold=0: in a gap, the
        offset before the transition - the instant the clocks jump past the start)."""
        local = datetime.datetime.combine(day, self.start).replace(tzinfo=self.tz, fold=0)
        return local.astimezone(datetime.timezone.utc)

    def contains(self, now):
        """Whether ``now`` (an aware or UTC datetime) is inside the window."""
        now = _utc(now).astimezone(datetime.timezone.utc).replace(microsecond=0)
        today = now.astimezone(self.tz).date()
        for back in (0, 1):  # the window of today, or one opened yesterday that wraps past midnight
            day = today - datetime.timedelta(days=back)
            # the day that must be one of the window's: today's (kured) or the opening's
            if DAYS[(today if self.wrap == "kured" else day).weekday()] not in self.days:
                continue
            opens = self.opening(day)
            if opens <= now <= opens + self.duration:
                return True
        return False

    def describe(self):
        days = ",".join(self.days)
        wraps = self.end < self.start and len(self.days) < 7
        return "%s %s-%s %s%s" % (days if len(self.days) < 7 else "every day", self.start.strftime("%H:%M:%S"),
                                  self.end.strftime("%H:%M:%S"), self.time_zone,
                                  " (past midnight: the %s)" % ("day of the local time" if self.wrap == "kured"
                                                                else "day it opened on") if wraps else "")


def alert_filter(pattern):
    """The compiled alert filter regexp (None when unset); NodefixError when it does not compile."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise NodefixError("alert_filter_regexp %r is not a regular expression: %s" % (pattern, exc))


# The states GET /api/v1/alerts gives an alert (Prometheus' web/api/v1 Alert: "pending" or
# "firing"; "inactive" is a rule's state, accepted as not holding).
ALERT_STATES = ("firing", "pending", "inactive")


class MalformedAnswer(NodefixError):
    """An answer that is not what the API documents: it holds the reboot (never "no alerts")."""


def _alert_name(alert, index):
    """The alert's name, or MalformedAnswer naming what is wrong with it."""
    if not isinstance(alert, dict):
        raise MalformedAnswer("alert %d is %s, not an object" % (index, type(alert).__name__))
    labels = alert.get("labels")
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise MalformedAnswer("alert %d has no labels object of strings: %s" % (index, _short(labels, 120)))
    name = labels.get("alertname")
    if not name:
        raise MalformedAnswer("alert %d has no alertname label" % index)
    if alert.get("state") not in ALERT_STATES:
        raise MalformedAnswer("alert %s has state %s (expected one of %s)"
                              % (name, _short(alert.get("state"), 40), ", ".join(ALERT_STATES)))
    return name


def blocking_alerts(body, filter_re=None, firing_only=True):
    """Names of the alerts in a Prometheus ``/api/v1/alerts`` answer that hold a reboot, sorted.

    Only a well-formed, complete answer can say "none": ``status`` success, ``data.alerts`` a list
    of alerts each with string labels, an ``alertname`` and a known ``state``, and no ``warnings``
    (a Thanos or Cortex querier answers success with warnings when a rule source was unreachable:
    its list is partial). Anything else raises MalformedAnswer, which holds the reboot."""
    if not isinstance(body, dict) or body.get("status") != "success":
        raise MalformedAnswer("the answer has no success status: %s" % _short(body))
    if body.get("warnings"):
        raise MalformedAnswer("the answer is partial (warnings: %s)" % _short(body["warnings"]))
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("alerts"), list):
        raise MalformedAnswer("the answer has no list of alerts in data.alerts: %s" % _short(data))
    names = set()
    for index, alert in enumerate(data["alerts"]):
        name = _alert_name(alert, index)
        if alert["state"] == "inactive" or (firing_only and alert["state"] != "firing"):
            continue
        if filter_re is not None and filter_re.search(name):
            continue
        names.add(name)
    return sorted(names)


def _short(value, limit=200):
    """``value`` as JSON, redacted (``_core.redact``: Prometheus' warnings and a body quote what the server was given,
    a URL's credentials too) before it is cut short - a cut secret no longer looks like one - so a hostile or huge
    answer can neither flood the report nor carry a credential into it."""
    try:
        text = redact_text(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        text = repr(type(value))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fetch_alerts(client):
    """``GET /api/v1/alerts`` through the collection's Prometheus client (``_prometheus.client``): the
    decoded JSON. NoAnswer (a NodefixError) when the server does not answer; MalformedAnswer when what it
    says is not the API's envelope (not JSON, no success status)."""
    try:
        return client.get("/api/v1/alerts")
    except prometheus_client.NoAnswer as exc:
        raise NodefixError("%s (nothing was drained or rebooted; fix prometheus_url or its credentials, or leave it "
                           "unset)" % exc.msg, **exc.details)
    except prometheus_client.BadAnswer as exc:
        raise MalformedAnswer(exc.msg)


def pods_blocking(api, node, selectors):
    """``namespace/name (selector)`` of the node's pods that a blocking selector selects, sorted."""
    found = set()
    for selector in selectors or []:
        for pod in api.list_pods(node, selector):
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                continue
            meta = pod.get("metadata") or {}
            found.add("%s/%s (%s)" % (meta.get("namespace"), meta.get("name"), selector))
    return sorted(found)


class LeaseLock(object):
    """At most ``slots`` holders at once, one Lease per slot (see the file's docstring).

    Expiry is judged the way client-go's leader election judges it (tools/leaderelection:
    ``observedTime``, the time this process last saw the record change): a slot is expired when
    this controller has seen its Lease unchanged (same holder, resourceVersion, renewTime) for the
    Lease's ``leaseDurationSeconds`` on this controller's own clock. ``renewTime`` was written by
    another controller's clock and is never compared with this one's. ``observed`` carries what
    was seen before (``{slot: {key, seen}}``, kept by the caller across runs); a Lease first seen
    now is not expired now, whatever its ``renewTime`` says. ``mono()``: (seconds, boot id) of this
    controller's monotonic clock - given, ``observed`` keeps ``{key, mono, boot}`` and a sight from
    another boot (or a clock that went back) is a first sight again, so a step of the wall clock ages
    nothing; unset, ``seen`` on ``now``. A Lease marked ``KEPT`` never expires (``keep``)."""

    def __init__(self, api, namespace, name, slots, holder, ttl=0, now=None, observed=None, mono=None):
        if slots < 1:
            raise NodefixError("max_concurrent must be at least 1 (got %d)" % slots)
        self.api = api
        self.namespace = namespace
        self.name = name
        self.slots = slots
        self.holder = holder
        self.ttl = ttl
        self.now = now or (lambda: datetime.datetime.now(datetime.timezone.utc))
        self.observed = observed if observed is not None else {}
        self.mono = mono
        self.taken_over = None

    def slot_names(self):
        return ["%s-%d" % (self.name, i) for i in range(self.slots)]

    @staticmethod
    def _key(lease):
        spec = lease.get("spec") or {}
        return "%s|%s|%s" % (spec.get("holderIdentity"), (lease.get("metadata") or {}).get("resourceVersion"),
                             spec.get("renewTime"))

    def expired(self, lease):
        """Whether this controller has seen ``lease`` unchanged for its ``leaseDurationSeconds``."""
        spec = lease.get("spec") or {}
        try:
            duration = int(spec.get("leaseDurationSeconds") or 0)
        except (TypeError, ValueError):
            duration = 0
        if duration <= 0 or ((lease.get("metadata") or {}).get("annotations") or {}).get(KEPT):
            return False
        slot = (lease.get("metadata") or {}).get("name")
        key = self._key(lease)
        if self.mono is not None:
            return self._expired_mono(lease, slot, key, duration)
        now = self.now()
        since = self._seen_since(self.observed.get(slot), key)
        if since is None:  # first seen in this state now (or what was kept is unreadable)
            self.observed[slot] = {"key": key, "seen": now.strftime(_SEEN_FORMAT)}
            return False
        return now >= since + datetime.timedelta(seconds=duration) and self._holder_back(lease)

    def _expired_mono(self, lease, slot, key, duration):
        """``expired`` on the monotonic clock: seen in state ``key`` since ``mono`` of this same boot."""
        at, boot = self.mono()
        seen = self.observed.get(slot)
        since = seen.get("mono") if isinstance(seen, dict) and seen.get("key") == key and seen.get("boot") == boot \
            else None
        if isinstance(since, bool) or not isinstance(since, (int, float)) or since > at:
            self.observed[slot] = {"key": key, "mono": at, "boot": boot}
            return False
        return at - since >= duration and self._holder_back(lease)

    def keep(self, slot, why, dry_run=False):
        """Mark ``slot``, held by this holder, kept on purpose (``KEPT``: why): it never expires by time from now on -
        only this holder's own run (``release``) or a person (``kubectl delete lease``) gives it back. True when the
        Lease says so (written now, or already); False when it is not this holder's or the write lost a race."""
        lease = self.api.get_lease(self.namespace, slot)
        spec = (lease or {}).get("spec") or {}
        if not lease or spec.get("holderIdentity") != self.holder:
            return False
        meta = dict(lease.get("metadata") or {})
        notes = dict(meta.get("annotations") or {})
        why = (why or "kept")[:1000]
        if notes.get(KEPT) == why or dry_run:
            return True
        notes[KEPT] = why
        meta["annotations"] = notes
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}
        return bool(self.api.replace_lease(self.namespace, slot, body))

    def _holder_back(self, lease):
        """Whether the node holding an expired slot is back (Ready): a node that went down and is not back keeps
        its slot whatever the TTL says - another node must not reboot beside it (into the same bad kernel, say).
        A holder Node the cluster no longer has frees it; an answer that cannot be read keeps it (fail closed)."""
        holder = (lease.get("spec") or {}).get("holderIdentity")
        get_node = getattr(self.api, "get_node", None)
        if not holder or get_node is None:
            return True
        try:
            node = get_node(holder)
        except NodefixError:
            return False
        if node is None:
            return True
        ready = [c for c in ((node.get("status") or {}).get("conditions") or []) if isinstance(c, dict)
                 and c.get("type") == "Ready"]
        return bool(ready) and ready[0].get("status") == "True"

    @staticmethod
    def _seen_since(seen, key):
        """When this controller first saw the Lease in state ``key`` (None: not in that state, or unreadable)."""
        if not isinstance(seen, dict) or seen.get("key") != key:
            return None
        try:
            return _utc(datetime.datetime.strptime(seen["seen"], _SEEN_FORMAT))
        except (KeyError, TypeError, ValueError):
            return None

    def holders(self):
        """[{slot, holder, since, expired}] of the slots held now."""
        out = []
        for slot in self.slot_names():
            lease = self.api.get_lease(self.namespace, slot)
            spec = (lease or {}).get("spec") or {}
            if lease and spec.get("holderIdentity"):
                out.append({"slot": slot, "holder": spec["holderIdentity"], "since": spec.get("acquireTime"),
                            "expired": self.expired(lease)})
        return out

    def _body(self, slot, reason, resource_version=None):
        stamp = self.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        meta = {"name": slot, "namespace": self.namespace, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
                "annotations": {"nodefix.k8s/reason": (reason or "")[:1000]}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        spec = {"holderIdentity": self.holder, "acquireTime": stamp, "renewTime": stamp}
        if self.ttl:
            spec["leaseDurationSeconds"] = int(self.ttl)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def mine(self):
        """The slot this holder holds, or None."""
        for held in self.holders():
            if held["holder"] == self.holder:
                return held["slot"]
        return None

    def acquire(self, reason="", dry_run=False):
        """(slot or None, holders): take a free slot, or keep the one already held (a re-run)."""
        held = self.mine()
        if held:
            return held, self.holders()
        for slot in self.slot_names():
            lease = self.api.get_lease(self.namespace, slot)
            if lease is None:
                if dry_run:
                    return slot, self.holders()
                if self.api.create_lease(self.namespace, self._body(slot, reason)):
                    return slot, self.holders()
                continue
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") and not self.expired(lease):
                continue
            if dry_run:
                return slot, self.holders()
            rv = (lease.get("metadata") or {}).get("resourceVersion")
            if self.api.replace_lease(self.namespace, slot, self._body(slot, reason, rv)):
                return slot, self.holders()
        return None, self.holders()

    def release(self, dry_run=False, slot=None):
        """The slot released (deleted with a resourceVersion precondition), or None when none was held.
        ``slot`` is the one this holder took: when someone else holds it now (taken over as expired),
        nothing is deleted and ``taken_over`` says by whom."""
        for name in self.slot_names():
            lease = self.api.get_lease(self.namespace, name)
            holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
            if name == slot and lease and holder and holder != self.holder:
                self.taken_over = {"slot": name, "holder": holder,
                                   "since": (lease.get("spec") or {}).get("acquireTime")}
            if not lease or holder != self.holder:
                continue
            if not dry_run:
                self.api.delete_lease(self.namespace, name, (lease.get("metadata") or {}).get("resourceVersion"))
            return name
        return None
