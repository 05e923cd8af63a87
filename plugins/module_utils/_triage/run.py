# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""One triage of the fleet: the expected nodes, what Prometheus holds at one pinned instant, the classes.
Shared by the inventory plugin (``nodefix.k8s.triage``) and the module (``nodefix.k8s.triage_info``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import gc
import ipaddress
import math
import re
import socket
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact as core_redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import expected as triage_expected
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import observe as triage_observe


def server_time(client):
    """Prometheus' own clock (Unix seconds): ``time()`` asked without ``time=`` is evaluated at the server's now.
    BadAnswer for an answer that is not a finite scalar."""
    body = client.get("/api/v1/query", {"query": "time()", "partial_response": "false"})
    data = body.get("data")
    try:
        if not isinstance(data, dict) or data.get("resultType") != "scalar":
            raise ValueError
        value = float(data["result"][1])
        if math.isnan(value) or math.isinf(value):
            raise ValueError
    except (TypeError, ValueError, IndexError, KeyError):
        raise prometheus_client.BadAnswer("Prometheus at %s answered time() without a finite scalar: its clock cannot "
                                          "be read" % client.where, url=client.where)
    return value


def pinned_time(client, conf, now=time.time):
    """The evaluation time: Prometheus' clock (``server_time``), when the controller's clock agrees with it within
    ``max_clock_skew``; NodefixError naming both otherwise - the audits' ages are judged against Prometheus' clock
    (docs/triage.md)."""
    before = now()
    server = server_time(client)
    after = now()
    skew = (before + after) / 2.0 - server  # the server read its clock between the two
    if abs(skew) > conf["max_clock_skew"] + (after - before) / 2.0:
        raise NodefixError("the controller's clock is %.1f s %s Prometheus' (%s), above max_clock_skew %d s: fix the "
                           "clocks (NTP) - no audit's age can be judged across them" % (
                               abs(skew), "ahead of" if skew > 0 else "behind", client.where, conf["max_clock_skew"]))
    return server, round(skew, 3)


def triage(client, conf, source, nodes=None, kubeconfig=None, context=None, at=None, now=time.time,
           clean_records=True):
    """The fleet's classes (``classify.classify``'s answer, ``summary.requests`` and ``summary.prometheus`` added).
    ``clean_records`` False: the clean nodes are counted, their records left out (``classify.classify``) - what the
    lean inventory asks, which shows none of them.
    ``at``: the evaluation time (Unix seconds); by default Prometheus' own clock (``pinned_time``: the run refused
    when the controller's differs by more than ``max_clock_skew``) - every query is asked at this one instant.
    ``summary.controller_time`` is the controller's clock at the evaluation. Expected nodes whose name or internal IP
    is the controller itself are never targets (``refuse_loopback``: ``summary.not_hosts``).
    Raises NodefixError (NoAnswer, BadAnswer among them) when anything could not be asked: never an empty
    answer. The unknown budget is the caller's to check (``classify.check_unknown_budget``)."""
    skew = None
    if at is None:
        at, skew = pinned_time(client, conf, now)
    at = round(float(at), 3)
    controller = round(now(), 3)
    with no_cycle_collection():
        expected = triage_expected.expected_nodes(source, client, at, nodes=nodes, kubeconfig=kubeconfig,
                                                  context=context, conf=conf)
        observed, orphans, warnings = triage_observe.observe(client, conf, expected, at)
        result = triage_classify.classify(conf, expected, observed, orphans, at, warnings, clean_records=clean_records)
    result["summary"].update(requests=client.requests, prometheus=client.where, expected_nodes=source,
                             max_audit_age=conf["max_audit_age"], required_checks=conf["required_checks"],
                             controller_time=controller, clock_skew_s=skew)
    refuse_loopback(result, expected)
    return redacted(result, client.secret_values())


# names that are the controller itself (Ansible's own C.LOCALHOST and the usual /etc/hosts aliases - Debian's and
# RHEL's; *.localhost is RFC 6761's loopback domain)
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "localhost4", "localhost4.localdomain4", "localhost6",
                  "localhost6.localdomain6", "ip6-localhost", "ip6-loopback")
# what inet_aton (and so the resolver and ssh) could read as an IPv4 address: decimal, octal (a leading 0) and hex
# (0x) parts, one to four of them (127.1, 0x7f000001, 2130706433, 0177.0.0.1, 0) - nothing else is handed to it
_LEGACY_IPV4 = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}$")


def controller_names():
    """The controller's own host name and FQDN (``socket.gethostname``, ``socket.getfqdn``: the one look-up of the
    controller's own name, none of any node's), lowercase: SSH to either reaches the controller itself (Debian's
    /etc/hosts maps the host name to 127.0.1.1). An empty set when they cannot be told."""
    names = set()
    for ask in (socket.gethostname, socket.getfqdn):
        try:
            name = ask()
        except (OSError, UnicodeError):
            continue
        if isinstance(name, str) and name.strip().rstrip("."):
            names.add(name.strip().rstrip(".").lower())
    return frozenset(names)


def _address(text):
    """``text`` as an IP address the way the resolver reads it: ``ipaddress``'s forms, else inet_aton's legacy IPv4
    ones (``_LEGACY_IPV4``); None when it is no address."""
    try:
        return ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        pass
    if not _LEGACY_IPV4.match(text):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


def loopback(value, own=()):
    """Whether a node's name or address would connect to the controller itself: a loopback name (``localhost``,
    ``*.localhost``, ``localhost4``/``6`` and their ``.localdomain4``/``6``, ``ip6-localhost``), the controller's own
    host name or FQDN (``own``: ``controller_names``), a loopback address (127.0.0.0/8, ``::1``, also IPv4-mapped)
    or an unspecified one (``0.0.0.0``, ``::``: Linux connects those to the local host) - an IPv4 address also in
    the forms inet_aton reads (``127.1``, ``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``0``): the resolver and
    ssh connect those to it too."""
    if not isinstance(value, str):
        return False
    text = value.strip().strip("[]").rstrip(".").lower()
    if text in LOOPBACK_NAMES or text.endswith(".localhost") or text in own:
        return True
    address = _address(text)
    if address is None:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return any(a is not None and (a.is_loopback or a.is_unspecified) for a in (address, mapped))


def refuse_loopback(result, expected):
    """Expected nodes that are never hosts nor targets: a name or internal IP that is the controller itself
    (``loopback``, the controller's own names asked once: ``controller_names``) - a host so named, or with that
    ``ansible_host``, would run the next play on the controller (Ansible's implicit localhost, or SSH to the
    controller's own sshd). Each keeps its class; its record gets
    ``not_a_host`` (why), ``summary.not_hosts`` lists them all {name: why} (a clean one a lean triage does not list
    too) and ``summary.targets`` leaves them out. An orphan so named (Prometheus scraping the controller's own
    node_exporter) gets ``not_a_host`` too: the inventory never makes it a host. ``result`` is changed in place."""
    refused, own = {}, controller_names()
    for name, node in sorted(expected.items()):
        ip = (node or {}).get("internal_ip")
        by_name = loopback(name, own)
        if by_name or loopback(ip, own):
            refused[name] = ("its %s %s is the controller itself (a loopback address or name, or the controller's own "
                             "host name): reported, never a host or target - name the node by its own address" % (
                                 ("name", name) if by_name else ("internal IP", ip)))
    for name, record in result["orphans"].items():
        if loopback(name, own):
            record["not_a_host"] = ("its name %s is the controller itself (Prometheus scraping the controller's own "
                                    "node_exporter?): reported, never a host" % name)
    summary = result["summary"]
    summary["not_hosts"] = refused
    for name, why in refused.items():
        record = result["nodes"].get(name)
        if record is not None:
            record["not_a_host"] = why
            if record["state"] in ("findings", "unknown"):
                summary["targets"] -= 1


@contextlib.contextmanager
def no_cycle_collection():
    """Python's cyclic garbage collector paused while the answers are decoded and read: they are 10^5 small dicts and
    lists (a sample each) that make no reference cycle, and each collection of the oldest generation walks the
    caller's whole heap (Ansible's) for nothing - 0.1 CPU s of an inventory's triage at 10,000 nodes
    (benchmarks/triage/). Reference counting frees them as before; the collector's own setting is given back."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def redacted(value, secrets=(), _seen=None):
    """``value`` (a triage's answer: dicts, lists, strings, numbers) with every string redacted by shape and
    without ``secrets`` (``prometheus_client.scrub``): label values (a finding's subject) and Prometheus'
    warnings are the nodes' and the server's text, so no output or cache of the triage holds a credential
    they carry. Dict keys too: a node's name is a label value (kube-state-metrics' ``node``, an orphan's
    ``instance``), the node's and the server's text as any other - two that read the same once redacted are both
    kept, the later numbered (``_core.redact.unique_key``). The same string is redacted once."""
    seen = {} if _seen is None else _seen
    if isinstance(value, str):
        if value not in seen:
            seen[value] = prometheus_client.scrub(value, secrets)
        return seen[value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[core_redact.unique_key(out, redacted(k, secrets, seen) if isinstance(k, str) else k)] = redacted(
                v, secrets, seen)
        return out
    if isinstance(value, (list, tuple)):
        return [redacted(v, secrets, seen) for v in value]
    return value
