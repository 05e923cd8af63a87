# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""When a rolling remediation stops: Ansible's per-batch limit, and the fleet's across slices.

remediate checks before each batch (fleet_gate): it stops when more than
``nodefix_max_fail_percentage`` of the last batch failed (Ansible's ``max_fail_percentage``
rule, which as a play keyword would abort the whole run, the report play included) or of
the fleet so far. Ansible's keyword is per play, and a play is one slice: with AWX job
slicing or ansible-runner on several hosts each slice only sees its own failures, so each
slice records its hosts and the ones that failed so far in ``<dir>/<slice>/rollout.json``
(the shared directory the merge step reads) and judges the fleet from every slice's record.
Every record carries the rollout's id (the same for every slice of one rollout): a record of
another rollout - a stale one in a reused directory, a foreign one - is ignored and named,
never counted.

Pure functions over plain data; the fleet_gate module reads and writes the files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

RECORD = "rollout.json"
SLICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class GateInputError(NodefixError, ValueError):
    """A record or an option of the wrong shape."""


def check_record(name, record):
    """Refuse a slice's record that is not one, naming the slice."""
    if not isinstance(record, dict):
        raise GateInputError("slice %s: the record must be a JSON object" % name)
    for key in ("hosts", "failed"):
        value = record.get(key)
        if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
            raise GateInputError("slice %s: %s must be a list of host names" % (name, key))
    stray = sorted(set(record["failed"]) - set(record["hosts"]))
    if stray:
        raise GateInputError("slice %s: failed hosts %s are not among its hosts" % (name, ", ".join(stray)))


def record(slice_name, hosts, failed, updated, rollout=None):
    """This slice's record (what other slices read)."""
    if rollout is not None and (not isinstance(rollout, str) or not rollout.strip()):
        raise GateInputError("rollout must be a non-empty id shared by every slice of the rollout, got %r" % (rollout,))
    if not SLICE_NAME.match(slice_name or ""):
        raise GateInputError("slice must be a plain name (letters, digits, '_', '.', '-'), got %r" % slice_name)
    stray = sorted(set(failed) - set(hosts))
    if stray:
        raise GateInputError("failed hosts %s are not among the slice's hosts" % ", ".join(stray))
    own = {"slice": slice_name, "hosts": sorted(set(hosts)), "failed": sorted(set(failed)), "updated": updated}
    if rollout is not None:
        own["rollout"] = rollout
    return own


def batch_verdict(previous_batch, failed, max_fail_percentage):
    """Ansible's own rule, per batch: (stop, msg) - more than the limit of the last batch failed."""
    batch = sorted(set(previous_batch))
    if not batch:
        return False, None
    lost = sorted(set(failed) & set(batch))
    if 100.0 * len(lost) / len(batch) <= max_fail_percentage:
        return False, None
    return True, ("more than nodefix_max_fail_percentage (%d%%) of the last batch failed: %d of %d node(s) (%s): "
                  "the rollout stops before its next batch" % (max_fail_percentage, len(lost), len(batch), ", ".join(lost)))


def belongs(records, rollout):
    """(records of this rollout, [{slice, rollout}] of the others - ignored). Without a rollout id
    (an unsliced run) every record belongs."""
    mine, others = {}, []
    for name in sorted(records):
        rec = records[name]
        if not isinstance(rec, dict):
            raise GateInputError("slice %s: the record must be a JSON object" % name)
        if rollout is not None and rec.get("rollout") != rollout:
            others.append({"slice": name, "rollout": rec.get("rollout")})
            continue
        mine[name] = rec
    return mine, others


def verdict(records, max_fail_percentage, fleet_size=None, rollout=None):
    """The fleet over every slice's record: {size, nodes_failed, failed_hosts, share, stop, msg, slices, ignored}.

    ``records``: {slice: record}. ``fleet_size``: the number of hosts the fleet run covers;
    unset, the hosts of the slices that have recorded so far (a slice that has not started
    is not counted, so the share can only be over-estimated: the stop comes early, never late).
    The rule: stop when the failed share of the fleet is above ``max_fail_percentage``.
    """
    if not isinstance(max_fail_percentage, int) or not 0 <= max_fail_percentage <= 100:
        raise GateInputError("max_fail_percentage must be a whole number from 0 to 100, got %r" % (max_fail_percentage,))
    records, ignored = belongs(records, rollout)
    owner = {}
    failed = set()
    for name in sorted(records):
        check_record(name, records[name])
        for host in records[name]["hosts"]:
            if host in owner and owner[host] != name:
                raise GateInputError("host %s is in two slices (%s and %s)" % (host, owner[host], name))
            owner[host] = name
        failed.update(records[name]["failed"])
    recorded = len(owner)
    if fleet_size is None:
        size = recorded
    elif fleet_size < recorded:
        raise GateInputError("fleet_size %d is smaller than the %d hosts the slices recorded" % (fleet_size, recorded))
    else:
        size = fleet_size
    share = 100.0 * len(failed) / size if size else 0.0
    stop = share > max_fail_percentage
    msg = None
    if stop:
        msg = ("the fleet is over nodefix_max_fail_percentage (%d%%): %d of %d node(s) failed (%s): "
               "the rollout stops before its next batch" % (
                   max_fail_percentage, len(failed), size, ", ".join(sorted(failed))))
    return {
        "size": size,
        "nodes_failed": len(failed),
        "failed_hosts": sorted(failed),
        "share": round(share, 2),
        "stop": stop,
        "msg": msg,
        "slices": [{"slice": n, "hosts": len(records[n]["hosts"]), "failed": len(records[n]["failed"]),
                    "updated": records[n].get("updated")} for n in sorted(records)],
        "ignored": ignored,
    }
