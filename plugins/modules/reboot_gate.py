#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: reboot_gate
short_description: Decide on the controller whether a node may reboot now, and hold the fleet's reboot lock
version_added: 1.1.0
description:
  - kured's controls for a drained reboot, checked before anything is drained, in this order - the reboot window
    (O(window_days), O(window_start), O(window_end), O(time_zone)), pods a blocking label selector selects on the
    node (O(blocking_pod_selectors)), firing Prometheus alerts (O(prometheus_url), O(alert_filter_regexp)) and the
    fleet's lock (at most O(max_concurrent) nodes rebooting at once). Any of them saying no holds the reboot
    (RV(allowed) false, RV(held_by) says why); the lock is taken only when the others allow the reboot.
  - The lock is O(max_concurrent) C(coordination.k8s.io/v1) Leases C(<lock_name>-0) ... in O(lock_namespace) - a
    node holds one as its C(holderIdentity). Slots are taken with a create or a C(resourceVersion)-checked update,
    so two controllers (parallel slices of one rollout, AWX job slices) never hold one slot both. O(state=release)
    gives the slot back once the node is back and uncordoned.
  - Input that cannot work fails the module before any change, naming the problem - a window that cannot be parsed,
    an unknown time zone, a filter that is not a regexp, a Prometheus server that does not answer, a kubeconfig
    that cannot be loaded.
  - Runs on the controller (C(delegate_to=localhost)), normally through the nodefix.k8s.reboot role.
author:
  - nodefix.k8s developers (@nodefix)
options:
  state:
    description:
      - V(acquire) checks the controls and takes a slot of the lock when they allow the reboot (a slot this node
        already holds is kept - a re-run). V(check) checks the controls and whether a slot is free, takes nothing.
        V(release) gives this node's slot back (nothing else is checked). V(reclaim) gives back the slots O(reclaim)
        names that this node holds from an earlier run, when it is back (nothing else is checked).
    type: str
    choices: [acquire, check, release, reclaim]
    default: acquire
  node:
    description: The node's name in the API server (the lock's holder).
    type: str
    required: true
  kubeconfig:
    description:
      - The kubeconfig for the API server (lock and blocking pods). Unset, neither can be checked; then
        O(max_concurrent) and O(blocking_pod_selectors) must be unset or empty, or the module fails.
    type: path
  context:
    description: The kubeconfig context (default, the current one).
    type: str
  reason:
    description: Why the node reboots; kept on the Lease (annotation C(nodefix.k8s/reason)) for whoever looks.
    type: str
    default: ""
  window_days:
    description:
      - Days a reboot may start, in kured's C(--reboot-days) spellings - V(su) V(mo) ... V(sa), V(sun) ... V(sat),
        V(sunday) ... V(saturday) in any case, or V(0) ... V(6) with V(0) for Sunday; an item may hold several,
        comma-separated (V(mo,tu)). Anything else (V(sunset), V(fridayyyy)) fails the module. Default, every day.
    type: list
    elements: str
  window_start:
    description:
      - Start of the daily window in O(time_zone), in kured's C(--start-time) spellings - V(15:04), V(15:04:05),
        V(15), V(3pm), V(03pm), V(03:04pm).
      - Across daylight saving time the window opens at the first instant the wall clock shows this time (when the
        clocks skip it, at the instant they jump past it) and stays open for the elapsed time from O(window_start)
        to O(window_end) on an ordinary day - never longer or shorter (02:00-02:30 is open 30 minutes on the autumn
        day, 03:00-03:30 summer time on the spring day).
    type: str
    default: "00:00"
  window_end:
    description:
      - End of the daily window (inclusive, to the second), spelled as O(window_start); before O(window_start) the
        window wraps past midnight, and O(window_wrap) says which day such a window is open on.
    type: str
    default: "23:59:59"
  window_wrap:
    description:
      - Which day a window that wraps past midnight (O(window_end) before O(window_start)) is open on.
      - V(kured) (the default) - the day of the current local time, as kured decides it (its
        C(pkg/timewindow) C(Contains)) - V(mon) ... V(fri) V(21:00)-V(05:00) is open Monday 00:00-05:00 and Friday
        21:00-24:00, not Saturday 00:00-05:00. The reading of a user moving kured's flags over.
      - V(opening_day) - the day the window opened on, each opening lasting to its end - the same days are open
        Saturday 00:00-05:00 (Friday's night) and not Monday 00:00-05:00 (Sunday's).
      - A window that does not wrap, or one on every day, is the same either way.
    type: str
    choices: [kured, opening_day]
    default: kured
  time_zone:
    description:
      - The IANA time zone of the window (V(Europe/Berlin)); V(UTC) by default. A name that is not a time zone
        (V(Europe), V(Mars/Olympus)) fails the module.
    type: str
    default: UTC
  blocking_pod_selectors:
    description:
      - Label selectors (V(app=ceph-osd), V(team in (db,cache))); a node running a pod any of them selects
        (not Succeeded or Failed) is not rebooted now. Needs O(kubeconfig).
    type: list
    elements: str
    default: []
  prometheus_url:
    description:
      - A Prometheus server (V(http://prometheus.monitoring:9090)); while any of its alerts fires (other than those
        O(alert_filter_regexp) matches) no node reboots. It must answer, or the module fails.
      - Only a well-formed, complete answer can allow a reboot - C(status) success, C(data.alerts) a list of alerts
        each with string labels, an C(alertname) and a known C(state), and no C(warnings) (a Thanos or Cortex
        querier's partial answer). Any other answer (not JSON, C(alerts) null or not a list, an alert without a
        state) holds the reboot, RV(held_by) saying what was wrong.
      - Credentials go in O(prometheus_username) and O(prometheus_password) or O(prometheus_token_file). A URL that
        carries user information (V(https://user:pass@prometheus)) works - split at the last C(@), percent-decoded,
        sent as basic auth unless the credential options are set - but warns, naming the options, and is requested and
        shown without it.
    type: str
  alert_filter_regexp:
    description: Alerts whose name this regexp matches do not hold a reboot (kured's C(--alert-filter-regexp)).
    type: str
  alert_firing_only:
    description: Only firing alerts hold a reboot (V(false) - pending ones too).
    type: bool
    default: true
  prometheus_timeout:
    description: Seconds to wait for Prometheus.
    type: int
    default: 10
  max_concurrent:
    description:
      - The most nodes rebooting at once across the fleet (kured's C(--concurrency)). 0 turns the lock off (then
        only C(serial) limits the rollout, within one run). Needs O(kubeconfig) when above 0.
    type: int
    default: 1
  lock_namespace:
    description: The namespace of the lock's Leases.
    type: str
    default: kube-system
  lock_name:
    description: The lock's name; its Leases are C(<lock_name>-0) ... C(<lock_name>-<max_concurrent - 1>).
    type: str
    default: nodefix-reboot
  lock_ttl:
    description:
      - Seconds after which a slot whose holder never released it may be taken over (kured's C(--lock-ttl)); it is
        written on the Lease as C(leaseDurationSeconds). 0, never - a node that did not come back holds its slot
        until a person releases it.
      - Judged as Kubernetes' leader election judges a lease - on this controller's clock, never by comparing it with
        a C(renewTime) another controller's clock wrote. A slot is expired once this controller has seen its Lease
        unchanged (holder, C(resourceVersion), C(renewTime)) for its C(leaseDurationSeconds); what it saw is kept in
        O(lock_observations) between runs. A Lease first seen now is never expired now.
      - The nodefix.k8s.reboot role sets C(reboot_lock_ttl=7200) - more than a node's worst case from the gate to the
        release with the role's defaults (drain 600 s + reboot 900 s + power-cycle wait 900 s + settle 4 x 300 s =
        3600 s), doubled. A slot left by a run that died is given back sooner by the next run over that node
        (O(state=reclaim)). A slot kept on purpose - O(state=reclaim) found its node not back - is marked on its
        Lease (annotation C(nodefix.k8s/kept), the reason) and never expires - only that node's next run or a person
        (C(kubectl delete lease)) gives it back.
    type: int
    default: 0
  lock_observations:
    description:
      - A file on the controller where this module keeps when it first saw each held slot unchanged (only with
        O(lock_ttl) above 0; not written in check mode). A controller without it (a fresh AWX job container) sees
        every Lease as new - a takeover waits O(lock_ttl) from that run's first look (with O(lock_wait)).
      - One file serves every lock (a key per context, namespace and slot).
    type: path
    default: ~/.cache/nodefix-k8s/reboot-lock-observations.json
  lock_wait:
    description:
      - Seconds to wait for a free slot (polling every O(lock_poll) seconds); 0 answers at once.
      - Every poll reads every control again (window, blocking pods, alerts) before it looks at the lock; the wait
        ends, held, as soon as one of them says no. A slot taken just as the window closed is given back.
    type: int
    default: 0
  lock_poll:
    description: Seconds between two looks at the lock while waiting.
    type: int
    default: 5
  slot:
    description:
      - With O(state=release), the slot this node took (the RV(lock) C(slot) of its V(acquire)). When someone else
        holds it now (taken over as expired), nothing is released, RV(lock) C(taken_over_by) says by whom and a
        warning says that two nodes may have been down at once.
    type: str
  reclaim:
    description:
      - With O(state=reclaim), the locks whose slot this node holds from an earlier run are given back - V(reboot)
        (O(lock_name), with O(max_concurrent) slots) and V(control_plane) (O(control_plane_lock_name), one slot).
    type: list
    elements: str
    choices: [reboot, control_plane]
    default: [reboot]
  control_plane_lock_name:
    description: The control plane's lock (M(nodefix.k8s.control_plane_gate)'s O(nodefix.k8s.control_plane_gate#module:lock_name)).
    type: str
    default: nodefix-control-plane
  etcd_health_command:
    description:
      - For O(reclaim) V(control_plane) with etcd outside the cluster - the command that says etcd is healthy (exit 0),
        as M(nodefix.k8s.control_plane_gate) runs it. Unset, such a slot is kept.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.etcd
  - nodefix.k8s.prometheus
attributes:
  check_mode:
    support: full
    details: Checks the controls and says whether a slot would be taken or released; changes no Lease.
  diff_mode:
    support: none
  platform:
    details: Runs on the controller; needs the Python kubernetes client for the lock and blocking pods.
requirements:
  - kubernetes (Python client) for the lock and blocking pods
seealso:
  - name: kured configuration
    description: The controls this module follows (window, blocking pods, alerts, concurrency, lock TTL).
    link: https://kured.dev/docs/configuration/
  - name: Prometheus HTTP API - alerts
    description: The answer O(prometheus_url) is asked for (C(GET /api/v1/alerts)).
    link: https://prometheus.io/docs/prometheus/latest/querying/api/#alerts
"""

EXAMPLES = r"""
- name: May node-7 reboot now? Take a slot of the fleet's lock if so
  nodefix.k8s.reboot_gate:
    node: node-7
    kubeconfig: /etc/nodefix/kubeconfig
    reason: kernel 6.12.95+deb12-amd64 installed, 6.1.0-28-amd64 running
    window_days: [mon, tue, wed, thu]
    window_start: "22:00"
    window_end: "04:00"
    time_zone: Europe/Berlin
    blocking_pod_selectors: ["app=ceph-osd"]
    prometheus_url: http://prometheus.monitoring:9090
    alert_filter_regexp: ^(Watchdog|InfoInhibitor)$
    max_concurrent: 1
  delegate_to: localhost
  register: gate

- name: Give the slot back once the node is back and uncordoned
  nodefix.k8s.reboot_gate:
    state: release
    node: node-7
    kubeconfig: /etc/nodefix/kubeconfig
  delegate_to: localhost
"""

RETURN = r"""
allowed:
  description: Whether the node may reboot now (for V(acquire), a slot is held; for V(check), one is free).
  returned: state is acquire or check
  type: bool
  sample: false
held_by:
  description: What holds the reboot, one line each (empty when allowed).
  returned: always
  type: list
  elements: str
  sample: ["outside the reboot window (mon,tue 22:00:00-04:00:00 Europe/Berlin; now Wed 14:03 CET)"]
window:
  description: The window, as understood, and whether now is inside it.
  returned: always
  type: dict
  sample: {"describe": "every day 00:00:00-23:59:59 UTC", "open": true}
blocking_pods:
  description: The node's pods a blocking selector selects (C(namespace/name (selector))).
  returned: always
  type: list
  elements: str
  sample: ["rook-ceph/rook-ceph-osd-3-6d9f (app=ceph-osd)"]
alerts:
  description: Names of the alerts that hold the reboot.
  returned: always
  type: list
  elements: str
  sample: ["KubeNodeNotReady"]
lock:
  description:
    - The lock - C(slot) this node holds (null when none), C(holders) (every slot held now, with holder and since),
      C(max_concurrent), C(released) (the slot given back, for V(release)), C(taken_over_by) (for V(release) with
      O(slot) - C(slot), C(holder), C(since) of whoever took this node's slot over, else null).
    - For V(reclaim) - C(reclaimed) (C(slot), C(since) of each slot given back) and C(kept) (why each slot this node
      still holds is kept).
  returned: always
  type: dict
  sample: {"slot": "nodefix-reboot-0", "holders": [{"slot": "nodefix-reboot-0", "holder": "node-7",
           "since": "2026-11-25T12:00:00.000000Z", "expired": false}], "max_concurrent": 1, "released": null,
           "taken_over_by": null}
msg:
  description: For V(reclaim), what was given back or kept, in one line (empty when this node held nothing).
  returned: state is reclaim
  type: str
  sample: "released nodefix-reboot-0 that node-7 held since 2026-11-25T12:00:00.000000Z from an earlier run: no reboot
    of node-7 is pending or in progress and it is Ready"
"""

import datetime
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import reboot_api
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import control_plane as reboot_control_plane


def argument_spec():
    spec = prometheus_client.argument_spec()
    spec.update(kube.argument_spec(node=True))
    spec.update(
        state=dict(type="str", choices=["acquire", "check", "release", "reclaim"], default="acquire"),
        reason=dict(type="str", default=""),
        window_days=dict(type="list", elements="str"),
        window_start=dict(type="str", default="00:00"),
        window_end=dict(type="str", default="23:59:59"),
        window_wrap=dict(type="str", choices=["kured", "opening_day"], default="kured"),
        time_zone=dict(type="str", default="UTC"),
        blocking_pod_selectors=dict(type="list", elements="str", default=[]),
        prometheus_url=dict(type="str"),
        alert_filter_regexp=dict(type="str"),
        alert_firing_only=dict(type="bool", default=True),
        prometheus_timeout=dict(type="int", default=10),
        max_concurrent=dict(type="int", default=1),
        lock_namespace=dict(type="str", default="kube-system"),
        lock_name=dict(type="str", default="nodefix-reboot"),
        lock_ttl=dict(type="int", default=0),
        lock_wait=dict(type="int", default=0),
        lock_poll=dict(type="int", default=5),
        lock_observations=dict(type="path", default="~/.cache/nodefix-k8s/reboot-lock-observations.json"),
        slot=dict(type="str"),
        reclaim=dict(type="list", elements="str", choices=["reboot", "control_plane"], default=["reboot"]),
        control_plane_lock_name=dict(type="str", default="nodefix-control-plane"),
        etcd_health_command=dict(type="list", elements="str", default=[]),
        etcd_health_environment=dict(type="dict", default={}, no_log=True),
    )
    return spec


def validate(p):
    """Everything that can be checked without asking anyone: (window, alert filter); NodefixError otherwise."""
    window = reboot_gate_lib.Window(p["window_days"], p["window_start"], p["window_end"], p["time_zone"],
                                    wrap=p["window_wrap"])
    filter_re = reboot_gate_lib.alert_filter(p["alert_filter_regexp"])
    for name in ("max_concurrent", "lock_ttl", "lock_wait"):
        if p[name] < 0:
            raise NodefixError("%s must not be negative (got %d)" % (name, p[name]))
    if p["lock_poll"] < 1 or p["prometheus_timeout"] < 1:
        raise NodefixError("lock_poll and prometheus_timeout must be at least 1 second")
    if p["prometheus_url"]:
        prometheus(p)  # the URL, the auth options and the headers, before anything is asked
    needs_api = [name for name in ("max_concurrent", "blocking_pod_selectors") if p[name]]
    if needs_api and not p["kubeconfig"]:
        raise NodefixError("%s need(s) the API server: set kubeconfig (or set max_concurrent to 0 and leave "
                           "blocking_pod_selectors empty)" % " and ".join(needs_api))
    return window, filter_re


def prometheus(p):
    """The collection's Prometheus client for ``prometheus_url`` and its auth options (NodefixError for
    options that cannot work, naming no credential)."""
    return prometheus_client.from_params(open_url, p)


def empty_result(p, window, window_open):
    """The module's answer before any control or lock has said anything."""
    return {"held_by": [], "blocking_pods": [], "alerts": [],
            "window": {"describe": window.describe(), "open": window_open},
            "lock": {"slot": None, "holders": [], "max_concurrent": p["max_concurrent"], "released": None,
                     "taken_over_by": None}}


def controls(p, window, filter_re, api, now):
    """Every control but the lock, read now: the result with ``held_by`` filled."""
    result = empty_result(p, window, window.contains(now))
    if not result["window"]["open"]:
        local = now.astimezone(window.tz).strftime("%a %H:%M %Z")
        result["held_by"].append("outside the reboot window (%s; now %s)" % (window.describe(), local))
    if p["blocking_pod_selectors"]:
        result["blocking_pods"] = reboot_gate_lib.pods_blocking(api, p["node"], p["blocking_pod_selectors"])
        if result["blocking_pods"]:
            result["held_by"].append("blocking pod(s) on the node: %s" % ", ".join(result["blocking_pods"]))
    if p["prometheus_url"]:
        try:
            body = reboot_gate_lib.fetch_alerts(prometheus(p))
            result["alerts"] = reboot_gate_lib.blocking_alerts(body, filter_re, p["alert_firing_only"])
        except reboot_gate_lib.MalformedAnswer as exc:
            result["held_by"].append("Prometheus at %s gave no well-formed answer, so no alert can be ruled out: %s"
                                     % (prometheus_client.safe_url(p["prometheus_url"]), exc.msg))
        if result["alerts"]:
            result["held_by"].append("firing alert(s) at %s: %s" % (
                prometheus_client.safe_url(p["prometheus_url"]), ", ".join(result["alerts"])))
    return result


def decide(p, window, filter_re, api, dry_run, clock, sleep, observed=None, held_before=None):
    """The controls; the lock only while all the others allow the reboot. While waiting for a slot
    (``lock_wait``) every poll reads every control again: a wait ends, held, as soon as one of them
    says no (the window closed, an alert fires, a blocking pod starts). ``held_before``: the slot this
    node held before the run (a re-run keeps it), never given back here."""
    lock = None
    if p["max_concurrent"]:
        lock = reboot_gate_lib.LeaseLock(api, p["lock_namespace"], p["lock_name"], p["max_concurrent"], p["node"],
                                         p["lock_ttl"], now=clock, observed=observed)
    deadline = clock() + datetime.timedelta(seconds=p["lock_wait"])
    while True:
        result = controls(p, window, filter_re, api, clock())
        if result["held_by"] or lock is None:
            return result
        slot, holders = lock.acquire(p["reason"], dry_run=dry_run)
        result["lock"].update(slot=slot, holders=holders)
        if slot:
            now = clock()
            if not window.contains(now):  # it closed while the slot was being taken
                if not dry_run and held_before is None:
                    lock.release()
                result["lock"].update(slot=None, holders=lock.holders())
                result["window"]["open"] = False
                result["held_by"].append("the reboot window closed while a slot was taken (%s; now %s): given back"
                                         % (window.describe(), now.astimezone(window.tz).strftime("%a %H:%M %Z")))
            return result
        remaining = (deadline - clock()).total_seconds()
        if remaining <= 0:
            result["held_by"].append("the reboot lock is full (max_concurrent %d): %s" % (p["max_concurrent"], ", ".join(
                "%s held by %s since %s" % (h["slot"], h["holder"], h["since"]) for h in holders)))
            return result
        sleep(min(p["lock_poll"], remaining))


def _observation_key(p, slot):
    """Observations of every lock share one file: a key per API server context, namespace and slot."""
    return "%s/%s/%s" % (p["context"] or "", p["lock_namespace"], slot)


def load_observations(path):
    """What this controller saw of the lock's Leases before ({slot: {key, seen}}); {} when there is
    no file. A file that is not a JSON object of that shape is ignored (nothing seen: no slot can
    expire by it - the safe side)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError, RecursionError):
        return {}
    return dict((k, v) for k, v in data.items() if isinstance(v, dict)) if isinstance(data, dict) else {}


def save_observations(module, path, observed):
    """Keep what was seen for the next run (the collection's atomic writer; a failure is a warning:
    the next run sees the Leases as new, which only delays a takeover)."""
    try:
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        core_fileio.write_files(module, [(core_paths.resolve_target("/", path, what="lock observations"),
                                          json.dumps(observed, sort_keys=True) + "\n")], backup=False, mode=0o600)
    except (IOError, OSError, core_paths.FileSafetyError) as exc:
        module.warn("could not keep the lock's observations in %s: %s" % (path, getattr(exc, "msg", None) or exc))


def release(module, p, window, api):
    result = empty_result(p, window, None)
    if api is not None and p["max_concurrent"]:
        lock = reboot_gate_lib.LeaseLock(api, p["lock_namespace"], p["lock_name"], p["max_concurrent"], p["node"])
        result["lock"]["released"] = lock.release(dry_run=module.check_mode, slot=p["slot"])
        result["lock"]["holders"] = [] if module.check_mode else lock.holders()
        result["lock"]["taken_over_by"] = lock.taken_over
        if lock.taken_over:
            module.warn("%s was taken over by %s (at %s) as expired while %s held it: nothing released - two nodes "
                        "may have been down at once; check lock_ttl against how long a reboot takes"
                        % (lock.taken_over["slot"], lock.taken_over["holder"], lock.taken_over["since"], p["node"]))
    return result


def reclaim(module, p, api):
    """Give back the slots this node holds from an earlier run (the caller asks only when no reboot of
    it is pending or in progress in this run), when it is Ready; the control plane's only when its
    etcd member is Ready too."""
    result = {"held_by": [], "lock": {"slot": None, "holders": [], "max_concurrent": p["max_concurrent"],
                                      "released": None, "taken_over_by": None, "reclaimed": [], "kept": []}}
    locks = []
    if "reboot" in p["reclaim"] and p["max_concurrent"]:
        locks.append(reboot_gate_lib.LeaseLock(api, p["lock_namespace"], p["lock_name"], p["max_concurrent"], p["node"]))
    if "control_plane" in p["reclaim"]:
        locks.append(reboot_gate_lib.LeaseLock(api, p["lock_namespace"], p["control_plane_lock_name"], 1, p["node"]))
    node = None
    said = []
    for lock in locks:
        if not [h for h in lock.holders() if h["holder"] == p["node"]]:
            continue
        node = node or api.get_node(p["node"])
        member = None
        if lock.name == p["control_plane_lock_name"]:
            member = reboot_control_plane.own_member_back(
                api, p["node"], p["etcd_health_command"],
                reboot_control_plane.health_command_runner(module, p["etcd_health_environment"]))
        out = reboot_control_plane.reclaim(lock, node, member, dry_run=module.check_mode)
        if out["released"]:
            result["lock"]["reclaimed"].append({"slot": out["slot"], "since": out["since"]})
            said.append(reboot_control_plane.reclaimed_said(out, p["node"]))
        elif out["kept"]:
            result["lock"]["kept"].append(out["kept"])
            said.append(out["kept"])
    result["msg"] = "; ".join(said)
    return result


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    try:
        window, filter_re = validate(p)
        for warning in prometheus(p).warnings if p["prometheus_url"] else []:
            module.warn(warning)
        for warning in reboot_control_plane.health_command_warnings(p["etcd_health_command"]):
            module.warn(warning)
        api = reboot_api.KubeApi(p["kubeconfig"], p["context"]) if p["kubeconfig"] else None
        if p["state"] == "reclaim":
            if api is None:
                raise NodefixError("state=reclaim needs the API server: set kubeconfig")
            result = dict(reclaim(module, p, api), blocking_pods=[], alerts=[],
                          window={"describe": window.describe(), "open": None})
            module.exit_json(changed=bool(result["lock"]["reclaimed"]) and not module.check_mode, **result)
        if p["state"] == "release":
            result = release(module, p, window, api)
            module.exit_json(changed=result["lock"]["released"] is not None, **result)
        dry_run = module.check_mode or p["state"] == "check"
        before = None
        observed, path, everything = {}, None, {}
        if api is not None and p["max_concurrent"]:
            before = reboot_gate_lib.LeaseLock(api, p["lock_namespace"], p["lock_name"], p["max_concurrent"], p["node"]).mine()
            if p["lock_ttl"]:
                path = p["lock_observations"]
                everything = load_observations(path)
                prefix = _observation_key(p, "")
                observed = dict((k[len(prefix):], v) for k, v in everything.items() if k.startswith(prefix))
        result = decide(p, window, filter_re, api, dry_run,
                        clock=lambda: datetime.datetime.now(datetime.timezone.utc), sleep=time.sleep,
                        observed=observed, held_before=before)
        if path and not module.check_mode:
            everything.update((_observation_key(p, slot), seen) for slot, seen in observed.items())
            save_observations(module, path, everything)
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    result["allowed"] = not result["held_by"]
    changed = bool(result["allowed"] and p["state"] == "acquire" and p["max_concurrent"] and before is None)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
