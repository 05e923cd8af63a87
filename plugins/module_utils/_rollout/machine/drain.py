# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The drain, as ``kubectl drain`` does it (k8s.io/kubectl/pkg/drain): every pod a drain evicts (not a DaemonSet's,
not a mirror pod, not finished: ``_rollout.cordon.drainable``) is evicted through the Eviction API with its UID as a
precondition; a 429 (a PodDisruptionBudget that allows no disruption now) is asked again after its
``retryAfterSeconds`` or ``Retry-After`` header (5 s when it names none, kubectl's wait) until ``drain_timeout``; a
404 is a pod already gone; any other answer is the API server's error and ends the drain with it (its status, reason
and message, never reported as a timeout), as kubectl drain returns it; then the pods are waited for until they are
gone or the timeout. The verdict is ``_rollout.cordon.drain_outcome``'s
(the pods before and after, the error): kubernetes.core.k8s_drain's own wait and 429 handling are not needed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible.module_utils.six.moves import http_client

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_cordon

PDB_WAIT = 5       # seconds before a refused eviction is asked again when the answer names none (kubectl drain)
POLL = 1           # seconds between two looks at the pods left


def _left(deadline, clock):
    return (deadline - clock()).total_seconds()


def _evict_all(ctx, pods, deadline):
    """"" when every eviction was accepted or its pod is gone; else the error: a budget's refusal until the deadline
    (the other pods are evicted meanwhile, as kubectl drain evicts them side by side), or another answer."""
    pending = [pods[key] for key in sorted(pods)]
    while pending:
        refused, wait = [], None
        for pod in pending:
            meta = pod["metadata"]
            status, after, said = ctx.api.evict(meta["namespace"], meta["name"], meta.get("uid"),
                                                max(0, _left(deadline, ctx.clock)))
            if 200 <= status <= 299 or status in (404, 409):    # evicted, gone, or replaced (its UID changed)
                continue
            if status != 429:
                # the API server's error (a 500, a 403, a 503 whose Retry-After ended past the drain timeout)
                return "eviction of pod %s/%s: the API server answered %s%s" % (
                    meta["namespace"], meta["name"], " ".join(s for s in (
                        "%s" % status, http_client.responses.get(status, "")) if s), ": %s" % said if said else "")
            refused.append((pod, said))
            this = max(PDB_WAIT if after is None else after, 1)
            wait = this if wait is None else min(wait, this)
        if not refused:
            return ""
        if _left(deadline, ctx.clock) < wait:
            return "; ".join("eviction of pod %s/%s refused by its disruption budget until the drain timeout: %s" % (
                p["metadata"]["namespace"], p["metadata"]["name"], said or "Cannot evict pod as it would violate "
                "the pod's disruption budget") for p, said in refused)
        ctx.sleep(wait)
        pending = [p for p, _said in refused]
    return ""


def run(ctx):
    """{done, evicted, blocked, msg} of draining ``ctx.node`` (cordoned already) within ``drain_timeout``."""
    timeout = ctx.options["drain_timeout"]
    deadline = ctx.clock() + datetime.timedelta(seconds=timeout)
    before = [node_cordon.pod_summary(p) for p in ctx.api.list_pods(ctx.node)]
    error = _evict_all(ctx, cordon.drainable(before), deadline)
    after = [node_cordon.pod_summary(p) for p in ctx.api.list_pods(ctx.node)]
    while not error and cordon.drainable(after) and _left(deadline, ctx.clock) > 0:
        ctx.sleep(POLL)
        after = [node_cordon.pod_summary(p) for p in ctx.api.list_pods(ctx.node)]
    return cordon.drain_outcome(before, after, error, timeout)
