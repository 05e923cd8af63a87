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
  (``--reboot-days``, ``--start-time``, ``--end-time``, ``--time-zone``). An
  end before the start wraps past midnight; the day is the day of "now" in
  that zone, as kured's time window has it;
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

from ansible_collections.nodefix.k8s.plugins.module_utils._common import NodefixError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME_RE = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$")
MANAGED_BY = "nodefix.k8s"


def _utc(value):
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def zone(name):
    """A tzinfo for an IANA name (``Europe/Berlin``) or ``UTC``; NodefixError when unknown."""
    if name in (None, "", "UTC", "utc", "Etc/UTC"):
        return datetime.timezone.utc
    try:
        import zoneinfo  # Python >= 3.9, on the controller
    except ImportError:  # pragma: no cover - the controller runs Python >= 3.10
        raise NodefixError("time zone %r needs Python >= 3.9 (zoneinfo) on the controller; use UTC" % name)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise NodefixError("time zone %r is not an IANA time zone (e.g. Europe/Berlin, UTC): %s" % (name, exc))


def _clock(text, what):
    m = _TIME_RE.match(str(text or "").strip())
    if not m:
        raise NodefixError("%s %r is not a time of day (HH:MM or HH:MM:SS, 24-hour)" % (what, text))
    return datetime.time(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


class Window(object):
    """A weekly reboot window (days, start, end, time zone)."""

    def __init__(self, days=None, start="00:00", end="23:59:59", time_zone="UTC"):
        days = list(days if days is not None else DAYS)
        if not days:
            raise NodefixError("window days is empty: no day would ever allow a reboot (omit it for every day)")
        self.days = []
        for day in days:
            key = str(day).strip().lower()[:3]
            if key not in DAYS or not str(day).strip().lower().startswith(key):
                raise NodefixError("window day %r is not a day of the week (mon, tue, ... sun)" % (day,))
            if key not in self.days:
                self.days.append(key)
        self.start = _clock(start, "window start")
        self.end = _clock(end, "window end")
        if self.start == self.end:
            raise NodefixError("window start and end are both %s: an empty window" % start)
        self.time_zone = time_zone or "UTC"
        self.tz = zone(self.time_zone)

    def contains(self, now):
        """Whether ``now`` (an aware or UTC datetime) is inside the window."""
        local = _utc(now).astimezone(self.tz)
        if DAYS[local.weekday()] not in self.days:
            return False
        t = local.time().replace(microsecond=0)
        if self.start < self.end:
            return self.start <= t <= self.end
        return t >= self.start or t <= self.end  # wraps past midnight

    def describe(self):
        days = ",".join(d for d in DAYS if d in self.days)
        return "%s %s-%s %s" % (days if len(self.days) < 7 else "every day", self.start.strftime("%H:%M:%S"),
                                self.end.strftime("%H:%M:%S"), self.time_zone)


def alert_filter(pattern):
    """The compiled alert filter regexp (None when unset); NodefixError when it does not compile."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise NodefixError("alert_filter_regexp %r is not a regular expression: %s" % (pattern, exc))


def blocking_alerts(body, filter_re=None, firing_only=True):
    """Names of the alerts in a Prometheus ``/api/v1/alerts`` answer that hold a reboot, sorted."""
    if not isinstance(body, dict) or body.get("status") != "success" or not isinstance(body.get("data"), dict):
        raise NodefixError("Prometheus answered /api/v1/alerts without a success status: %s"
                           % json.dumps(body)[:300])
    names = set()
    for alert in body["data"].get("alerts") or []:
        labels = alert.get("labels") or {}
        name = labels.get("alertname") or "?"
        if firing_only and alert.get("state") != "firing":
            continue
        if filter_re is not None and filter_re.search(name):
            continue
        names.add(name)
    return sorted(names)


def fetch_alerts(open_url, url, timeout):
    """``GET <url>/api/v1/alerts`` through ``open_url`` (Ansible's); the decoded JSON."""
    target = url.rstrip("/") + "/api/v1/alerts"
    try:
        resp = open_url(target, method="GET", timeout=timeout, headers={"Accept": "application/json"})
        return json.loads(resp.read().decode("utf-8"))
    except ValueError as exc:
        raise NodefixError("Prometheus at %s answered something that is not JSON: %s" % (target, exc))
    # URLError, HTTPError, socket errors: whatever it is, the server did not answer
    except Exception as exc:  # pylint: disable=broad-except
        raise NodefixError("Prometheus at %s did not answer: %s (nothing was drained or rebooted; fix "
                           "prometheus_url or leave it unset)" % (target, exc))


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
    """At most ``slots`` holders at once, one Lease per slot (see the file's docstring)."""

    def __init__(self, api, namespace, name, slots, holder, ttl=0, now=None):
        if slots < 1:
            raise NodefixError("max_concurrent must be at least 1 (got %d)" % slots)
        self.api = api
        self.namespace = namespace
        self.name = name
        self.slots = slots
        self.holder = holder
        self.ttl = ttl
        self.now = now or (lambda: datetime.datetime.now(datetime.timezone.utc))

    def slot_names(self):
        return ["%s-%d" % (self.name, i) for i in range(self.slots)]

    @staticmethod
    def _time(text):
        try:
            return _utc(datetime.datetime.strptime(str(text).replace("Z", "+00:00")[:19], "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None

    def expired(self, lease):
        spec = lease.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        renewed = self._time(spec.get("renewTime") or spec.get("acquireTime"))
        if not duration or renewed is None:
            return False
        return self.now() > renewed + datetime.timedelta(seconds=int(duration))

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

    def release(self, dry_run=False):
        """The slot released (deleted with a resourceVersion precondition), or None when none was held."""
        for slot in self.slot_names():
            lease = self.api.get_lease(self.namespace, slot)
            if not lease or (lease.get("spec") or {}).get("holderIdentity") != self.holder:
                continue
            if not dry_run:
                self.api.delete_lease(self.namespace, slot, (lease.get("metadata") or {}).get("resourceVersion"))
            return slot
        return None


class KubeApi(object):
    """The few API calls the gate makes, through the official Python client (a kubernetes.core
    requirement already), answering plain dicts. ``create_lease``/``replace_lease`` return False
    on 409 (someone else won the slot); other API errors raise NodefixError."""

    def __init__(self, kubeconfig, context=None):
        try:
            from kubernetes import client, config  # pylint: disable=import-outside-toplevel
            from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
        except ImportError as exc:
            raise NodefixError("the Python kubernetes client is needed on the controller for the reboot lock and "
                               "blocking pods (pip install kubernetes, as kubernetes.core needs): %s" % exc)
        try:
            self.client = config.new_client_from_config(config_file=kubeconfig, context=context)
        # the client raises many kinds (config, YAML, file errors)
        except Exception as exc:  # pylint: disable=broad-except
            raise NodefixError("kubeconfig %s could not be loaded: %s" % (kubeconfig, exc))
        self.core = client.CoreV1Api(self.client)
        self.coord = client.CoordinationV1Api(self.client)
        self.error = ApiException

    def _dict(self, obj):
        return self.client.sanitize_for_serialization(obj)

    def _fail(self, what, exc):
        body = (getattr(exc, "body", "") or str(exc))[:300]
        raise NodefixError("%s: the API server answered %s %s" % (what, getattr(exc, "status", "?"), body))

    def list_pods(self, node, selector):
        try:
            pods = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % node,
                                                         label_selector=selector)
        except self.error as exc:
            self._fail("listing the pods of %s selected by %r" % (node, selector), exc)
        return [self._dict(p) for p in pods.items]

    def get_lease(self, namespace, name):
        try:
            return self._dict(self.coord.read_namespaced_lease(name, namespace))
        except self.error as exc:
            if exc.status == 404:
                return None
            self._fail("reading Lease %s/%s" % (namespace, name), exc)

    def create_lease(self, namespace, body):
        try:
            self.coord.create_namespaced_lease(namespace, body)
            return True
        except self.error as exc:
            if exc.status == 409:
                return False
            self._fail("creating Lease %s/%s" % (namespace, body["metadata"]["name"]), exc)

    def replace_lease(self, namespace, name, body):
        try:
            self.coord.replace_namespaced_lease(name, namespace, body)
            return True
        except self.error as exc:
            if exc.status == 409:
                return False
            self._fail("taking over Lease %s/%s" % (namespace, name), exc)

    def delete_lease(self, namespace, name, resource_version):
        from kubernetes import client  # pylint: disable=import-outside-toplevel
        opts = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=resource_version))
        try:
            self.coord.delete_namespaced_lease(name, namespace, body=opts)
        except self.error as exc:
            if exc.status != 404:
                self._fail("releasing Lease %s/%s" % (namespace, name), exc)
