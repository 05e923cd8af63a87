# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The storm breaker: stop a rollout before its first node when too much of the fleet is
unavailable already or would be disrupted by it.

A problem on 40 % of a fleet is rarely 40 independent node faults (a bad image, a config rollout,
a kernel regression); draining or rebooting that share of the fleet node by node can take the
cluster's capacity down with it - and the nodes that are down already count against that capacity
too. Before the rolling play touches a node, remediate audits every target (read-only) and counts:

- the nodes its plan disrupts (``_audit.remediation.plan``'s ``disruptive``: drain, reboot, an
  undrained restart), and the targets it could not audit (their plan is unknown: possibly disruptive);
- the nodes that are unavailable now: with a kubeconfig, every Node the API server lists (or those
  ``nodefix_storm_node_selector`` picks: the targets' node pool) that is NotReady, Ready Unknown,
  without a Ready condition or cordoned by anyone (_k8s.cluster_nodes); a target the controller
  cannot reach; a target the listing does not have. Without a kubeconfig only the targets are counted
  (the result says so) - an unreachable target is unavailable.

It holds when those nodes (each once) are more than ``nodefix_storm_percent`` of the fleet (every
Node listed and every target; at least ``fleet_size``) and at least ``nodefix_storm_min_nodes``,
and the rollout would disrupt a node at all - unless ``nodefix_storm_override``. The arithmetic of
Cluster API's MachineHealthCheck ``maxUnhealthy`` (internal/controllers/machinehealthcheck: remediation
is allowed while the unhealthy - or missing - machines the selector picks are at most the percentage of
them, rounded down) and, seen from the other side, medik8s Node Healthcheck's ``minHealthy``
(controllers/nodehealthcheck_controller.go: remediation is skipped while the healthy nodes its selector
picks are fewer than the percentage, rounded up): both count the nodes already unhealthy, not only
the ones about to be worked on. A Node list that fails (refused, timeout, 4xx/5xx) is "could not
count": a rollout that would disrupt a node holds (fail closed), with the reason.

In slices (AWX job slicing) each slice records its nodes and its view of the cluster in
``<dir>/<slice>/storm.json`` - the directory ``fleet_gate`` shares - and judges the fleet from every
slice's record of the same rollout. A slice cannot see the slices that have not recorded yet: the
hosts of ``fleet_size`` no record has are counted as possibly disruptive (early, never late), and
the storm_gate module waits a while for the other slices' records before it judges so. A slice also
judges its own nodes alone. Before each batch a slice re-reads the records, so a storm another slice
sees later stops it too.

A finding on more than the threshold's share of the fleet is called out as fleet-wide.
Pure functions over plain data; the storm_gate module reads and writes the files and the Nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s.cluster_nodes import CORDONED_BY_NODEFIX
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.fleet_gate import SLICE_NAME, belongs

RECORD = "storm.json"
ACTIONS = ("drain", "reboot", "restart")
UNREACHABLE = "unreachable from the controller"
NOT_LISTED = "not among the API server's Nodes"
# a whole number, as Ansible passes it (an int, its text from -e key=value, or a float such as 20.0)
WHOLE = re.compile(r"^ *[0-9]+([.]0*)? *$")
# hosts named in a message before "and N more"
NAMED = 10


class StormInputError(NodefixError, ValueError):
    """A node entry, a record or an option of the wrong shape: the storm cannot be judged."""


def check_percent(value):
    """``nodefix_storm_percent`` as a whole number from 0 to 100 (100 turns the breaker off); StormInputError
    naming the variable for anything else (101, 150, 1e3, 100.5, -1, true, "20%")."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or \
            (isinstance(value, float) and not value.is_integer()) or \
            (isinstance(value, str) and not WHOLE.match(value)):
        raise StormInputError("nodefix_storm_percent must be a whole number from 0 to 100 (100 turns the storm breaker "
                              "off), got %r" % (value,))
    number = int(float(value))
    if not 0 <= number <= 100:
        raise StormInputError("nodefix_storm_percent must be a whole number from 0 to 100 (100 turns the storm breaker "
                              "off), got %r" % (value,))
    return number


def check_node(host, entry, where="node"):
    """Refuse an entry that is not {disruptive: [actions], findings: [ids]} (with optional ``node``: its Node
    name, ``unreachable`` or ``unaudited``: why it was not audited), naming the host."""
    if not isinstance(entry, dict):
        raise StormInputError("%s %s: must be a mapping with disruptive and findings" % (where, host))
    acts, ids = entry.get("disruptive"), entry.get("findings")
    if not isinstance(acts, list) or any(a not in ACTIONS for a in acts):
        raise StormInputError("%s %s: disruptive must be a list of %s, got %r" % (where, host, ", ".join(ACTIONS), acts))
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise StormInputError("%s %s: findings must be a list of finding ids, got %r" % (where, host, ids))
    for key in ("node", "unreachable", "unaudited"):
        if key in entry and entry[key] is not None and (not isinstance(entry[key], str) or not entry[key].strip()):
            raise StormInputError("%s %s: %s must be a non-empty string, got %r" % (where, host, key, entry[key]))


def check_cluster(where, cluster):
    """Refuse a ``cluster`` view that is not {selector, error, nodes: {name: [reasons]}}."""
    if not isinstance(cluster, dict) or not isinstance(cluster.get("nodes"), dict):
        raise StormInputError("%s: cluster must be a mapping with nodes (name: reasons)" % where)
    if cluster.get("error") is not None and not isinstance(cluster["error"], str):
        raise StormInputError("%s: cluster.error must be text or null" % where)
    for name, why in cluster["nodes"].items():
        if not isinstance(why, list) or not all(isinstance(w, str) and w for w in why):
            raise StormInputError("%s: cluster node %s: reasons must be a list of text, got %r" % (where, name, why))


def record(slice_name, nodes, updated, rollout=None, cluster=None):
    """This slice's record: {slice, rollout, updated, nodes: {host: entry}, cluster?: its view of the Nodes}."""
    if rollout is not None and (not isinstance(rollout, str) or not rollout.strip()):
        raise StormInputError("rollout must be a non-empty id shared by every slice of the rollout, got %r" % (rollout,))
    if not SLICE_NAME.match(slice_name or ""):
        raise StormInputError("slice must be a plain name (letters, digits, '_', '.', '-'), got %r" % (slice_name,))
    if not isinstance(nodes, dict):
        raise StormInputError("nodes must be a mapping of host to its plan, got %s" % type(nodes).__name__)
    own = {}
    for host in sorted(nodes):
        check_node(host, nodes[host])
        entry = {"disruptive": sorted(set(nodes[host]["disruptive"])), "findings": sorted(set(nodes[host]["findings"]))}
        for key in ("node", "unreachable", "unaudited"):
            if nodes[host].get(key):
                entry[key] = nodes[host][key]
        own[host] = entry
    out = {"slice": slice_name, "updated": updated, "nodes": own}
    if rollout is not None:
        out["rollout"] = rollout
    if cluster is not None:
        check_cluster("slice %s" % slice_name, cluster)
        out["cluster"] = cluster
    return out


def _share(count, size):
    return round(100.0 * count / size, 2) if size else 0.0


def _fleet(records):
    """({host: entry}, [cluster views]) over the records, refusing a host in two slices or a record that is not one."""
    nodes, owner, views = {}, {}, []
    for name in sorted(records):
        rec = records[name]
        if not isinstance(rec, dict) or not isinstance(rec.get("nodes"), dict):
            raise StormInputError("slice %s: the storm record must be a JSON object with nodes" % name)
        for host, entry in rec["nodes"].items():
            check_node(host, entry, where="slice %s: node" % name)
            if host in owner and owner[host] != name:
                raise StormInputError("host %s is in two slices (%s and %s)" % (host, owner[host], name))
            owner[host], nodes[host] = name, entry
        if rec.get("cluster") is not None:
            check_cluster("slice %s" % name, rec["cluster"])
            views.append(rec["cluster"])
    return nodes, views


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


def count(nodes, views, fleet_size=None, sliced=False):
    """What the breaker counts, over the targets recorded (``nodes``) and the views of the cluster (``views``).

    {size, unavailable: {node: [reasons]}, disruptive: [hosts], unknown: [hosts], unseen, affected, listed,
    blind, errors, selectors}: ``affected`` - the nodes unavailable, to be disrupted or of unknown plan (each
    once), plus the ``unseen`` hosts of ``fleet_size`` no slice has recorded (sliced runs only); ``blind`` -
    the Nodes were to be listed and no listing succeeded.
    """
    name = dict((h, e.get("node") or h) for h, e in nodes.items())
    listed, errors = {}, []
    for v in views:
        if v.get("error"):
            errors.append(v["error"])
            continue
        for node, why in v["nodes"].items():
            listed.setdefault(node, set()).update(why)
    read = any(not v.get("error") for v in views)
    unavailable = dict((n, set(w)) for n, w in listed.items() if w)
    # a target an earlier, dead nodefix run left cordoned (and nothing else) is given back by this run before it
    # cordons anything (the rollout's cordon step): not unavailable to it - counted, it would hold the very run
    # that returns it, for good
    for host in nodes:
        if unavailable.get(name[host]) == {CORDONED_BY_NODEFIX}:
            del unavailable[name[host]]
    for host, entry in nodes.items():
        if entry.get("unreachable"):
            unavailable.setdefault(name[host], set()).add(UNREACHABLE)
        if read and name[host] not in listed:
            unavailable.setdefault(name[host], set()).add(NOT_LISTED)
    hit = sorted(h for h, e in nodes.items() if e["disruptive"])
    unknown = sorted(h for h, e in nodes.items() if e.get("unaudited") and not e.get("unreachable"))
    size = max(len(set(listed) | set(name.values())), fleet_size or 0)
    unseen = max(0, (fleet_size or 0) - len(nodes)) if sliced else 0
    down = set(unavailable) | set(name[h] for h in hit + unknown)
    return {"size": size, "unavailable": dict((n, sorted(w)) for n, w in sorted(unavailable.items())),
            "disruptive": hit, "unknown": unknown, "unseen": unseen, "affected": min(size, len(down) + unseen),
            "listed": len(listed) if read else None, "blind": bool(views) and not read, "errors": errors,
            "selectors": sorted(set(v.get("selector") or "" for v in views))}


def _names(items, sep=", "):
    items = list(items)
    shown = sep.join(items[:NAMED])
    return shown + (" and %d more" % (len(items) - NAMED) if len(items) > NAMED else "")


def counted(seen, sliced, fleet_size):
    """One sentence: what the breaker counted (the cluster's Nodes, or only the targets), and what it could not."""
    if seen["blind"]:
        what = ("could not count the cluster's Nodes (%s): counted only the %d target(s) recorded"
                % ("; ".join(sorted(set(seen["errors"]))), seen["size"]))
    elif seen["listed"] is not None:
        pool = [s for s in seen["selectors"] if s]
        what = "counted the %d Node(s) the API server lists%s and every target" % (
            seen["listed"], " selected by %s" % " / ".join(pool) if pool else "")
    else:
        what = ("counted only the targets it could reach (no nodefix_kubeconfig: the cluster's other Nodes and their "
                "health are not known), an unreachable target as unavailable")
    if sliced and not fleet_size:
        what += "; nodefix_fleet_size is not set: the hosts of slices that have not recorded yet could not be counted"
    return what


def _seen_text(seen, actions, hit, size, share):
    """"N of M node(s) (P%) ..." - what makes up the count."""
    plain = not (seen["unavailable"] or seen["unknown"] or seen["unseen"])
    parts = []
    if seen["unavailable"]:
        parts.append("%d unavailable (%s)" % (len(seen["unavailable"]), _names(
            ("%s: %s" % (n, ", ".join(w)) for n, w in seen["unavailable"].items()), "; ")))
    if hit:
        parts.append("%d need a drain, reboot or restart (%s)" % (
            len(hit), ", ".join("%s %d" % (a, len(actions[a])) for a in ACTIONS if actions[a])))
    if seen["unknown"]:
        parts.append("%d could not be audited, counted as possibly disrupted (%s)" % (
            len(seen["unknown"]), _names(seen["unknown"])))
    if seen["unseen"]:
        parts.append("%d host(s) of nodefix_fleet_size (%d) in no slice's record yet, counted as possibly disrupted "
                     "(early, never late)" % (seen["unseen"], size))
    if plain:
        return "%d of %d node(s) (%s%%) need a drain, reboot or restart (%s)" % (
            len(hit), size, _fmt(share), ", ".join("%s %d" % (a, len(actions[a])) for a in ACTIONS if actions[a]))
    return "%d of %d node(s) (%s%%) are unavailable or would be disrupted: %s" % (
        seen["affected"], size, _fmt(share), "; ".join(parts))


def _check_options(percent, override, min_nodes):
    percent = check_percent(percent)
    if not isinstance(override, bool):
        raise StormInputError("nodefix_storm_override must be true or false, got %r" % (override,))
    if isinstance(min_nodes, bool) or not isinstance(min_nodes, int) or min_nodes < 1:
        raise StormInputError("nodefix_storm_min_nodes must be a whole number of at least 1, got %r" % (min_nodes,))
    return percent


def verdict(records, percent, override=False, fleet_size=None, rollout=None, own_slice=None, min_nodes=2):
    """The storm over every slice's record (``records``: {slice: record}; unsliced: one record).

    {stop, over, overridden, msg, counted, size, affected, disruptive, unavailable, unknown, unseen, share,
    slice_share, actions, fleet_wide, slices, ignored}. ``over``: the rollout would disrupt a node (or cannot
    tell: unknown plans, unseen hosts) and the fleet's affected share (or ``own_slice``'s alone) is above
    ``percent`` with at least ``min_nodes`` nodes affected (one node of a run limited to it is a repair, not a
    storm) - or the Nodes could not be counted; ``stop``: over and not ``override``. ``fleet_size``: the hosts
    the whole rollout covers; unset, the hosts recorded so far (and the Nodes listed).
    """
    percent = _check_options(percent, override, min_nodes)
    mine, ignored = belongs(records, rollout)
    nodes, views = _fleet(mine)
    if fleet_size is not None and (isinstance(fleet_size, bool) or not isinstance(fleet_size, int)
                                   or fleet_size < len(nodes)):
        raise StormInputError("fleet_size %r is not a whole number at least the %d hosts recorded" % (fleet_size, len(nodes)))
    sliced = own_slice is not None
    seen = count(nodes, views, fleet_size, sliced)
    size, hit = seen["size"], seen["disruptive"]
    share = _share(seen["affected"], size)
    own = (mine.get(own_slice) or {}).get("nodes") or {}
    own_hit = [h for h, e in own.items() if e["disruptive"] or e.get("unreachable") or e.get("unaudited")]
    slice_share = _share(len(own_hit), len(own)) if sliced else None
    # a rollout that disrupts no node cannot make a storm, whatever is down already
    may_disrupt = bool(hit or seen["unknown"])
    over = may_disrupt and (seen["blind"] or (
        (share > percent or (slice_share is not None and slice_share > percent)) and seen["affected"] >= min_nodes))
    actions = dict((a, sorted(h for h in hit if a in nodes[h]["disruptive"])) for a in ACTIONS)
    wide = _fleet_wide(nodes, size, percent, min_nodes)
    what = counted(seen, sliced, fleet_size)
    msg = None
    if over:
        msg = _message(seen, actions, share, slice_share, own_hit, own, percent, override, wide, what)
    return {
        "stop": over and not override, "over": over, "overridden": over and override, "msg": msg, "counted": what,
        "percent": percent, "min_nodes": min_nodes, "size": size, "affected": seen["affected"], "disruptive": hit,
        "unavailable": seen["unavailable"], "unknown": seen["unknown"], "unseen": seen["unseen"],
        "share": share, "slice_share": slice_share, "actions": actions, "fleet_wide": wide,
        "slices": [{"slice": n, "nodes": len(mine[n]["nodes"]), "updated": mine[n].get("updated")} for n in sorted(mine)],
        "ignored": ignored,
    }


def recount(view, nodes, percent, override=False, min_nodes=2):
    """The storm counted again right before a node's cordon (the rollout machine's ``storm`` step; issue 62's review:
    as MachineHealthCheck and NodeHealthCheck count on every reconcile): ``view`` the cluster's Nodes as listed now
    (``_k8s.cluster_nodes.view``), ``nodes`` {host: entry} the nodes in flight - this node and the other nodes of its
    batch, their plans from the storm breaker's audit. ``count``'s and ``verdict``'s rule over them: {stop, over,
    overridden, msg, share, affected, size}; ``msg`` says what was counted (None within the threshold)."""
    percent = _check_options(percent, override, min_nodes)
    check_cluster("the Nodes listed now", view)
    for host in sorted(nodes):
        check_node(host, nodes[host])
    seen = count(nodes, [view])
    size, hit = seen["size"], seen["disruptive"]
    share = _share(seen["affected"], size)
    over = bool(hit or seen["unknown"]) and share > percent and seen["affected"] >= min_nodes
    actions = dict((a, sorted(h for h in hit if a in nodes[h]["disruptive"])) for a in ACTIONS)
    msg = None
    if over:
        msg = "%s, over nodefix_storm_percent (%d%%)%s" % (
            _seen_text(seen, actions, hit, size, share), percent,
            " - proceeding: nodefix_storm_override is set" if override else "")
    return {"stop": over and not override, "over": over, "overridden": over and override, "msg": msg,
            "share": share, "affected": seen["affected"], "size": size}


def _message(seen, actions, share, slice_share, own_hit, own, percent, override, wide, what):
    size, hit = seen["size"], seen["disruptive"]
    if seen["blind"]:
        text = ("the unavailable nodes could not be counted - %s - and the rollout would disrupt %d node(s) (%s)"
                % (what, len(hit) + len(seen["unknown"]), _names(hit + seen["unknown"])))
    elif share > percent or slice_share is None:
        text = _seen_text(seen, actions, hit, size, share) + ", over nodefix_storm_percent (%d%%)" % percent
    else:
        text = ("%d of this slice's %d node(s) (%s%%; %d of %d in the fleet so far) need a drain, reboot or restart "
                "or are unavailable, over nodefix_storm_percent (%d%%)"
                % (len(own_hit), len(own), _fmt(slice_share), seen["affected"], size, percent))
        text += " (%s)" % ", ".join("%s %d" % (a, len(actions[a])) for a in ACTIONS if actions[a])
    cause = ("; fleet-wide: %s" % ", ".join("%s on %d (%s%%)" % (w["id"], w["nodes"], _fmt(w["share"])) for w in wide)
             if wide else "")
    if seen["listed"] is None and not seen["blind"]:
        cause += "; %s" % what.split(", an unreachable")[0]   # no kubeconfig: say what was not counted
    if override:
        return "storm breaker: %s%s - proceeding: nodefix_storm_override is set" % (text, cause)
    return ("storm breaker: %s%s: the rollout stops before touching a node. A problem on this share of the fleet is "
            "rarely independent node faults: find the common cause, or set nodefix_storm_override=true to proceed"
            % (text, cause))


def wait_for_slices(judge, wait, clock, sleep, poll=2.0):
    """Judge (``judge()`` reads every record and returns the verdict) until no host of the fleet is unseen, or
    the verdict holds for another reason than the unseen hosts, or ``wait`` seconds have passed: the other slices
    of a rollout started at the same time record within the storm audit's time, and the first slice to judge would
    otherwise count all of theirs as possibly disrupted. Returns the last verdict."""
    deadline = clock() + max(0, wait)
    while True:
        out = judge()
        if not (out["over"] and out["unseen"]) or clock() >= deadline:
            return out
        sleep(min(poll, max(0.0, deadline - clock())))


def merge(slices):
    """The storm section of a merged report from the slices' (name, report model) - each slice's storm
    verdict as its report kept it (model.check_storm) - or None when no slice had one. The rollout stopped when
    any slice stopped; the counts are the largest any slice saw (every slice judges every record it could read,
    so the last to judge saw the most); a fleet-wide finding keeps the most nodes a slice saw it on."""
    kept = [(_slice_name(name), m["storm"]) for name, m in slices
            if isinstance(m, dict) and isinstance(m.get("storm"), dict)]
    if not kept:
        return None
    for name, storm in kept:
        for key in ("stop", "over", "overridden", "percent", "size", "share", "disruptive", "fleet_wide"):
            if key not in storm:
                raise StormInputError("slice %s: its report's storm section has no %s" % (name, key))
    wide = {}
    for _name, storm in kept:
        for w in storm["fleet_wide"]:
            if w["id"] not in wide or w["nodes"] > wide[w["id"]]["nodes"]:
                wide[w["id"]] = dict(w)
    stopped = [(n, s) for n, s in kept if s["stop"]]
    said = stopped or [(n, s) for n, s in kept if s["over"]]
    msgs, seen = [], set()
    for name, storm in said:
        if storm.get("msg") and storm["msg"] not in seen:
            seen.add(storm["msg"])
            msgs.append("slice %s: %s" % (name, storm["msg"]))
    return {
        "stop": bool(stopped), "over": any(s["over"] for _n, s in kept),
        "overridden": any(s["overridden"] for _n, s in kept) and not stopped,
        "msg": "; ".join(msgs) or None, "percent": min(s["percent"] for _n, s in kept),
        "size": max(s["size"] for _n, s in kept), "share": max(s["share"] for _n, s in kept),
        "disruptive": max(s["disruptive"] for _n, s in kept),
        "fleet_wide": sorted(wide.values(), key=lambda w: (-w["nodes"], w["id"])),
        "slices": [{"slice": n, "stop": s["stop"], "over": s["over"]} for n, s in kept],
    }


def _slice_name(name):
    """A slice's name from its report's path (<dir>/slices/<slice>/<kind>/report.json), or the name as given."""
    parts = str(name).split("/")
    for i in range(len(parts) - 2, 0, -1):
        if parts[i - 1] == "slices":
            return parts[i]
    return name


def _fmt(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")
