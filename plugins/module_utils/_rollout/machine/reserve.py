# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The storm breaker's reserve across controllers (review #3): the re-count right before a node's cordon (``storm``)
is taken as a RESERVE on one shared record - the ``coordination.k8s.io`` Lease ``<lock_namespace>/nodefix-storm``
(the reboot lock's kind, namespace and RBAC), its annotation ``nodefix.k8s/storm-reserves``: ``{node: {run, at}}``,
the nodes some run counted in flight and is about to disrupt. The count includes every reserve still live, and the
reserve is written with the Lease's resourceVersion as a precondition: two controllers that count at once cannot both
pass a count that allows only one - the second write is a 409, read again and counted again with the first's reserve.

A reserve is live while its node's rollout record (``nodefix.k8s/rollout``) names its run (a record that cannot be
read counts it: fail closed); once the run released its record, or a later run took the node over, it is stale -
dropped at the next write. A run gives its own node's reserve back at its ``release`` (``give_back``), whatever run
wrote it (a run killed between its reserve and its cordon leaves one: the next run of the node gives it back), and
the Lease is deleted when no reserve is left."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine.ledger import version_of

LEASE = "nodefix-storm"
ANNOTATION = "nodefix.k8s/storm-reserves"
ATTEMPTS = 5        # conditional writes met by another controller's (409) before the step gives up (fail closed)


class MalformedReserves(NodefixError):
    """A reserves annotation this run cannot read: the count fails closed."""


def parse(lease):
    """{node: {run, at}} of the Lease (None: none); MalformedReserves for one that is not."""
    meta = (lease or {}).get("metadata") or {}
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if annotations is not None and not isinstance(annotations, dict):
        raise MalformedReserves("the annotations of Lease %s are not a mapping" % LEASE)
    text = (annotations or {}).get(ANNOTATION)
    if text is None:
        return {}
    try:
        out = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedReserves("the %s annotation of Lease %s is not JSON (%s)"
                                % (ANNOTATION, LEASE, type(exc).__name__))
    if not isinstance(out, dict) or not all(isinstance(v, dict) and isinstance(v.get("run"), str) and v["run"]
                                            for v in out.values()):
        raise MalformedReserves("the %s annotation of Lease %s is not {node: {run, at}}" % (ANNOTATION, LEASE))
    return out


def _live(api, name, entry, listed):
    """Whether ``entry`` (a reserve for Node ``name``) still counts: its node's record names its run."""
    node = listed.get(name)
    if node is None:
        node = api.get_node(name)
        if node is None:
            return False            # the Node is gone
    try:
        rec = record.read(((node.get("metadata") or {}).get("annotations")) or {})
    except record.MalformedRecord:
        return True                 # cannot be read: counted (fail closed)
    return bool(rec) and rec["run"] == entry["run"]


def live(api, reserves, listed, skip):
    """The reserves that still count, but ``skip``'s (this node's: this run's own count includes it)."""
    return dict((n, e) for n, e in reserves.items() if n != skip and _live(api, n, e, listed))


def _version(lease):
    """The resourceVersion a write of ``lease`` is conditional on (None for a Lease still to create). A Lease the API
    gave without one is not well-formed: a write without the precondition could drop another controller's reserve,
    so the step fails closed."""
    if lease is None:
        return None
    version = version_of(lease)
    if not isinstance(version, str) or not version:
        raise MalformedReserves("Lease %s has no resourceVersion: its reserves are not written without one" % LEASE)
    return version


def _body(namespace, lease, reserves):
    meta = {"name": LEASE, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "nodefix.k8s"},
            "annotations": {ANNOTATION: json.dumps(reserves, sort_keys=True, separators=(",", ":"))}}
    version = _version(lease)
    if version:
        meta["resourceVersion"] = version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {}}


def take(ctx, count):
    """Reserve ``ctx.node``: ``count(live reserves)`` -> the re-count's verdict ({stop, ...}: ``storm.recount``'s),
    judged again after every 409. (verdict, reserved: whether the reserve was written). A verdict that stops writes
    nothing; ``ATTEMPTS`` conflicts in a row raise NodefixError (the caller fails closed)."""
    namespace = ctx.options["lock_namespace"]
    for _attempt in range(ATTEMPTS):
        lease = ctx.api.get_lease(namespace, LEASE)
        reserves = parse(lease)
        said = count(reserves)
        if said["stop"] or ctx.check_mode:
            return said, False
        mine = dict(said["live"], **{ctx.node: {"run": ctx.run_id, "at": ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ")}})
        body = _body(namespace, lease, mine)
        written = ctx.api.create_lease(namespace, body) if lease is None else \
            ctx.api.replace_lease(namespace, LEASE, body)
        if written:
            return said, True
    raise NodefixError("the storm breaker's reserve (Lease %s/%s) met another controller's write %d times in a row"
                       % (namespace, LEASE, ATTEMPTS))


def give_back(ctx):
    """This node's reserve removed when it is this run's or no longer live (one a run killed before its cordon left:
    its node's record no longer names that run); another run's live reserve - a run that took the node over while
    this one was away - stays. The Lease is deleted when no reserve is left; "" when nothing was given back, else
    what was done."""
    namespace = ctx.options["lock_namespace"]
    for _attempt in range(ATTEMPTS):
        lease = ctx.api.get_lease(namespace, LEASE)
        reserves = parse(lease)
        entry = reserves.get(ctx.node)
        if entry is None or (entry["run"] != ctx.run_id and _live(ctx.api, ctx.node, entry, {})):
            return ""
        run = reserves.pop(ctx.node)["run"]
        if not reserves:
            try:
                ctx.api.delete_lease(namespace, LEASE, _version(lease))
            except NodefixError as exc:
                if getattr(exc, "status", None) == 409:
                    continue
                raise
        elif not ctx.api.replace_lease(namespace, LEASE, _body(namespace, lease, reserves)):
            continue
        return "gave back the storm breaker's reserve of %s (run %s)" % (ctx.node, run)
    raise NodefixError("giving back the storm breaker's reserve met another controller's write %d times in a row"
                       % ATTEMPTS)
