# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""One fleet report from the reports of sliced runs.

A fleet too large for one controller is audited (or remediated) in slices: AWX job
slicing (``job_slice_count``) or ansible-runner on several hosts, each over a part of
the inventory. Each slice writes its own report (``report.json``: the report model);
merge_models joins them into the model one run over the whole fleet would have made
(the same node entries, finding ids and totals, assembled by the same code), plus the
list of the slices it was made from. A host the fleet expects that no slice reported
is a node with status ``missing``: it fails any policy but ``never``, like a node that
could not be audited, and is never counted as healthy. A host a slice reported that the
fleet does not expect (not in the inventory the slices split) is a node with status
``unexpected`` - its findings are not taken as the fleet's, and it fails the policy the
same way. The expected hosts must be given: without them neither could be told.
The slices' storm breaker verdicts are kept (_rollout.storm.merge): a rollout any slice stopped
is a stopped rollout in the merged report, with the findings on more than the threshold's share.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import ReportInputError, assemble, missing_node
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.storm import merge as merge_storm

STATUSES = ("ok", "unreachable", "error", "missing", "not run", "unexpected")
MISSING = "in no slice's report: its slice failed before writing it, or never ran"
UNEXPECTED = ("reported by slice %s but not one of the hosts this fleet run expects (the inventory the slices "
              "split): a stale or foreign report, or a slice run against another inventory - not counted")


def _check_node(where, node):
    if not isinstance(node, dict):
        raise ReportInputError("%s must be a node entry (a dict), got %s" % (where, type(node).__name__))
    host = node.get("host")
    if not isinstance(host, str) or not host:
        raise ReportInputError("%s has no host (a non-empty string)" % where)
    where = "%s (%s)" % (where, host)
    if node.get("status") not in STATUSES:
        raise ReportInputError("%s has unknown status %r (known: %s)" % (where, node.get("status"), ", ".join(STATUSES)))
    for key in ("findings", "waived", "ids", "waived_ids"):
        if not isinstance(node.get(key), list):
            raise ReportInputError("%s.%s must be a list" % (where, key))
    for idx, f in enumerate(node["findings"] + node["waived"]):
        if not isinstance(f, dict) or not isinstance(f.get("id"), str) or f.get("severity") not in SEVERITIES:
            raise ReportInputError("%s: finding %d has no id or an unknown severity" % (where, idx))
    counts = node.get("counts")
    if not isinstance(counts, dict) or any(not isinstance(counts.get(s), int) for s in SEVERITIES):
        raise ReportInputError("%s.counts must give a number per severity (%s)" % (where, ", ".join(SEVERITIES)))


def check_slice(name, model):
    """Refuse what is not a slice's report model, naming the slice and what is wrong."""
    if not isinstance(model, dict):
        raise ReportInputError("slice %s: the report must be a JSON object, got %s" % (name, type(model).__name__))
    if "slices" in model:
        raise ReportInputError("slice %s is itself a merged report; merge the slices' own reports" % name)
    nodes = model.get("nodes")
    if not isinstance(nodes, list):
        raise ReportInputError("slice %s: no nodes list (not a nodefix.k8s report.json)" % name)
    for idx, node in enumerate(nodes):
        _check_node("slice %s: nodes[%d]" % (name, idx), node)
    if not isinstance(model.get("waivers_expired", []), list):
        raise ReportInputError("slice %s: waivers_expired must be a list" % name)


def merge_models(slices, expected_hosts=None, title=None, generated=None):
    """The fleet model from ``slices``, a list of (name, report model) in the order given.

    ``expected_hosts``: every host of the fleet (the inventory pattern the slices split);
    those in no slice become ``missing`` nodes. A host in two slices is refused: the
    slices did not split the inventory, and either report could be the stale one.
    """
    if isinstance(expected_hosts, (str, bytes)) or not expected_hosts or \
            not all(isinstance(h, str) and h for h in expected_hosts):
        raise ReportInputError("expected_hosts must list every host of the fleet (the inventory the slices split), got "
                               "%r: without it a slice that never wrote its report would go unnoticed" % (expected_hosts,))
    expected = set(expected_hosts)
    owner = {}
    nodes = []
    expired = []
    for name, model in slices:
        check_slice(name, model)
        for node in model["nodes"]:
            host = node["host"]
            if host in owner:
                raise ReportInputError("host %s is in two slices (%s and %s): the slices must split the "
                                       "inventory, each host in one" % (host, owner[host], name))
            owner[host] = name
            if host in expected:
                nodes.append(node)
            else:
                stray = missing_node(host, UNEXPECTED % name)
                stray["status"] = "unexpected"
                nodes.append(stray)
        for waiver in model.get("waivers_expired") or []:
            if waiver not in expired:
                expired.append(waiver)
    missing = sorted(expected - set(owner))
    nodes.extend(missing_node(host, MISSING) for host in missing)
    nodes.sort(key=lambda n: n["host"])
    if title is None:
        title = slices[0][1].get("title") if slices else "nodefix.k8s fleet audit"
    model = assemble(nodes, title, generated, expired)
    model["slices"] = [{"name": name, "generated": m.get("generated"), "nodes": len(m["nodes"])}
                       for name, m in slices]
    # the storm breaker's verdicts of a sliced remediation: stopped when any slice stopped, with the fleet-wide
    # findings (a stopped slice's nodes were never audited by the rolling play: its findings are only here)
    storm = merge_storm(slices)
    if storm is not None:
        model["storm"] = redact(storm)
    model["slices"] = redact(model["slices"])
    return model
