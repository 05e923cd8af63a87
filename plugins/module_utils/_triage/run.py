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

import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact as core_redact
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import expected as triage_expected
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import observe as triage_observe


def triage(client, conf, source, nodes=None, kubeconfig=None, context=None, at=None):
    """The fleet's classes (``classify.classify``'s answer, ``summary.requests`` and ``summary.prometheus`` added).
    ``at``: the evaluation time (Unix seconds), now by default - every query is asked at this one instant.
    Raises NodefixError (NoAnswer, BadAnswer among them) when anything could not be asked: never an empty
    answer. The unknown budget is the caller's to check (``classify.check_unknown_budget``)."""
    at = round(time.time() if at is None else float(at), 3)
    expected = triage_expected.expected_nodes(source, client, at, nodes=nodes, kubeconfig=kubeconfig, context=context)
    observed, orphans, warnings = triage_observe.observe(client, conf, expected, at)
    result = triage_classify.classify(conf, expected, observed, orphans, at, warnings)
    result["summary"].update(requests=client.requests, prometheus=client.where, expected_nodes=source,
                             max_audit_age=conf["max_audit_age"], required_checks=conf["required_checks"])
    return redacted(result, client.secret_values())


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
