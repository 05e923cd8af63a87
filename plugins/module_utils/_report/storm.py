# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The storm breaker: stop a rollout before its first node when too much of the fleet needs a
disruptive action at once.

A problem on 40 % of a fleet is rarely 40 independent node faults (a bad image, a config rollout,
a kernel regression); draining or rebooting that share of the fleet node by node can take the
cluster's capacity down with it. EKS stops node auto-repair when more than 20 % of a node group is
unhealthy; medik8s' Node Healthcheck stops remediating below ``minHealthy``. Before the rolling play
touches a node, remediate audits every target (read-only) and counts the nodes whose plan
(``_audit.remediation.plan``'s ``disruptive``: drain, reboot, an undrained restart) disrupts them.
Above ``nodefix_storm_percent`` of the fleet the rollout stops, unless ``nodefix_storm_override``.

In slices (AWX job slicing) each slice records its nodes in ``<dir>/<slice>/storm.json`` - the
directory ``fleet_gate`` shares - and judges the fleet from every slice's record of the same
rollout. A slice cannot see the slices that have not recorded yet, so it also judges its own
nodes alone: the stop comes early rather than late. Before each batch a slice re-reads the
records, so a storm another slice sees later stops it too.

A finding on more than the threshold's share of the fleet is called out as fleet-wide.
Pure functions over plain data; the storm_gate module reads and writes the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._report.fleet_gate import SLICE_NAME, belongs

RECORD = "storm.json"
ACTIONS = ("drain", "reboot", "restart")


class StormInputError(NodefixError, ValueError):
    """A node entry, a record or an option of the wrong shape: the storm cannot be judged."""


def check_node(host, entry, where="node"):
    """Refuse an entry that is not {disruptive: [actions], findings: [ids]}, naming the host."""
    if not isinstance(entry, dict):
        raise StormInputError("%s %s: must be a mapping with disruptive and findings" % (where, host))
    acts, ids = entry.get("disruptive"), entry.get("findings")
    if not isinstance(acts, list) or any(a not in ACTIONS for a in acts):
        raise StormInputError("%s %s: disruptive must be a list of %s, got %r" % (where, host, ", ".join(ACTIONS), acts))
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise StormInputError("%s %s: findings must be a list of finding ids, got %r" % (where, host, ids))


def record(slice_name, nodes, updated, rollout=None):
    """This slice's record: {slice, rollout, updated, nodes: {host: {disruptive, findings}}}."""
    if rollout is not None and (not isinstance(rollout, str) or not rollout.strip()):
        raise StormInputError("rollout must be a non-empty id shared by every slice of the rollout, got %r" % (rollout,))
    if not SLICE_NAME.match(slice_name or ""):
        raise StormInputError("slice must be a plain name (letters, digits, '_', '.', '-'), got %r" % (slice_name,))
    if not isinstance(nodes, dict):
        raise StormInputError("nodes must be a mapping of host to its plan, got %s" % type(nodes).__name__)
    own = {}
    for host in sorted(nodes):
        check_node(host, nodes[host])
        own[host] = {"disruptive": sorted(set(nodes[host]["disruptive"])), "findings": sorted(set(nodes[host]["findings"]))}
    out = {"slice": slice_name, "updated": updated, "nodes": own}
    if rollout is not None:
        out["rollout"] = rollout
    return out


def _share(count, size):
    return round(100.0 * count / size, 2) if size else 0.0


def _fleet(records):
    """{host: entry} over the records, refusing a host in two slices or a record that is not one."""
    nodes, owner = {}, {}
    for name in sorted(records):
        rec = records[name]
        if not isinstance(rec, dict) or not isinstance(rec.get("nodes"), dict):
            raise StormInputError("slice %s: the storm record must be a JSON object with nodes" % name)
        for host, entry in rec["nodes"].items():
            check_node(host, entry, where="slice %s: node" % name)
            if host in owner and owner[host] != name:
                raise StormInputError("host %s is in two slices (%s and %s)" % (host, owner[host], name))
            owner[host], nodes[host] = name, entry
    return nodes


def _fleet_wide(nodes, size, percent, min_nodes):
    """The finding ids on more than ``percent`` of the fleet and at least ``min_nodes`` nodes (one node's
    finding is not fleet-wide), most widespread first."""
    hosts = {}
    for host, entry in nodes.items():
        for fid in entry["findings"]:
            hosts.setdefault(fid, []).append(host)
    wide = [{"id": fid, "nodes": len(hs), "share": _share(len(hs), size), "hosts": sorted(hs)}
            for fid, hs in hosts.items() if _share(len(hs), size) > percent and len(hs) >= min_nodes]
    return sorted(wide, key=lambda w: (-w["nodes"], w["id"]))


def verdict(records, percent, override=False, fleet_size=None, rollout=None, own_slice=None, min_nodes=2):
    """The storm over every slice's record (``records``: {slice: record}; unsliced: one record).

    {stop, over, overridden, msg, size, disruptive, share, slice_share, actions, fleet_wide, slices, ignored}.
    ``over``: the fleet's share (or ``own_slice``'s alone) is above ``percent`` and at least ``min_nodes``
    nodes need the action (one node of a run limited to it is a repair, not a storm); ``stop``: over and
    not ``override``. ``fleet_size``: the hosts the whole rollout covers; unset, the hosts recorded so far.
    """
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
        raise StormInputError("nodefix_storm_percent must be a whole number from 0 to 100, got %r" % (percent,))
    if not isinstance(override, bool):
        raise StormInputError("nodefix_storm_override must be true or false, got %r" % (override,))
    if isinstance(min_nodes, bool) or not isinstance(min_nodes, int) or min_nodes < 1:
        raise StormInputError("nodefix_storm_min_nodes must be a whole number of at least 1, got %r" % (min_nodes,))
    mine, ignored = belongs(records, rollout)
    nodes = _fleet(mine)
    if fleet_size is None:
        size = len(nodes)
    elif isinstance(fleet_size, bool) or not isinstance(fleet_size, int) or fleet_size < len(nodes):
        raise StormInputError("fleet_size %r is not a whole number at least the %d hosts recorded" % (fleet_size, len(nodes)))
    else:
        size = fleet_size
    hit = sorted(h for h, e in nodes.items() if e["disruptive"])
    share = _share(len(hit), size)
    own = (mine.get(own_slice) or {}).get("nodes") or {}
    own_hit = [h for h, e in own.items() if e["disruptive"]]
    slice_share = _share(len(own_hit), len(own)) if own_slice is not None else None
    over = (share > percent or (slice_share is not None and slice_share > percent)) and len(hit) >= min_nodes
    actions = dict((a, sorted(h for h in hit if a in nodes[h]["disruptive"])) for a in ACTIONS)
    wide = _fleet_wide(nodes, size, percent, min_nodes)
    msg = None
    if over:
        seen = ("%d of %d node(s) (%s%%) need a drain, reboot or restart" % (len(hit), size, _fmt(share))
                if share > percent or slice_share is None else
                "%d of this slice's %d node(s) (%s%%; %d of %d in the fleet so far) need a drain, reboot or restart"
                % (len(own_hit), len(own), _fmt(slice_share), len(hit), size))
        seen += " (%s)" % ", ".join("%s %d" % (a, len(actions[a])) for a in ACTIONS if actions[a])
        cause = ("; fleet-wide: %s" % ", ".join("%s on %d (%s%%)" % (w["id"], w["nodes"], _fmt(w["share"])) for w in wide)
                 if wide else "")
        if override:
            msg = ("storm breaker: %s, over nodefix_storm_percent (%d%%)%s - proceeding: nodefix_storm_override is set"
                   % (seen, percent, cause))
        else:
            msg = ("storm breaker: %s, over nodefix_storm_percent (%d%%)%s: the rollout stops before touching a node. "
                   "A problem on this share of the fleet is rarely independent node faults: find the common cause, or "
                   "set nodefix_storm_override=true to proceed" % (seen, percent, cause))
    return {
        "stop": over and not override, "over": over, "overridden": over and override, "msg": msg,
        "percent": percent, "min_nodes": min_nodes, "size": size, "disruptive": hit, "share": share, "slice_share": slice_share,
        "actions": actions, "fleet_wide": wide,
        "slices": [{"slice": n, "nodes": len(mine[n]["nodes"]), "updated": mine[n].get("updated")} for n in sorted(mine)],
        "ignored": ignored,
    }


def _fmt(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")
