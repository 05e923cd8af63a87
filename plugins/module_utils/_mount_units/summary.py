# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""The result of a survey and what a cleanup did: the module's, the timer's and the detector's facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.cost import estimate_basis, estimate_seconds

# systemd PR #7811 (v237) stops the dead .mount units from piling up.
SYSTEMD_FIX_VERSION = 237
# systemd's MANAGER_MAX_NAMES: beyond it every transient unit fails.
SYSTEMD_UNIT_LIMIT = 131072


def _cap(items, limit):
    items = list(items)
    return items if not limit or limit <= 0 else items[:limit]


def empty_record():
    return {"stop_calls": 0, "transactions": 0, "fallbacks": 0, "stopped": [], "reset": [], "reset_after_stop": [],
            "daemon_reload": False, "errors": [], "still_active": [], "verified": True, "left": []}


def summarize(plan, record, check_mode=False):
    """The module's (and the timer's) result from a survey and what was done."""
    o = plan["options"]
    limit = o["list_limit"]
    units = plan["units"]
    by_status = {}
    for unit in units:
        by_status.setdefault(unit["status"], []).append(unit)
    orphaned = by_status.get("orphaned", [])
    to_stop = [u["unit"] for u in orphaned if u["action"] == "stop"]
    to_reset = [u["unit"] for u in orphaned if u["action"] == "reset"] if o["reset_failed"] else []
    dead_mounts = [u["unit"] for u in orphaned if u["action"] == "reload"]
    kept = by_status.get("live", []) + by_status.get("guarded", [])
    version = plan["systemd_version"]
    if check_mode:
        changed = bool(to_stop or to_reset or (dead_mounts and o["daemon_reload"]))
    else:
        changed = bool(record["stopped"] or record["reset"] or record["reset_after_stop"] or record["daemon_reload"])
    return {
        "changed": changed,
        "systemd": {
            "version": version,
            "has_fix": None if version is None else version >= SYSTEMD_FIX_VERSION,
            "fixed_in": SYSTEMD_FIX_VERSION,
            "units_total": plan["units_total"],
            "unit_limit": SYSTEMD_UNIT_LIMIT,
        },
        "pods_dirs": plan["pods_dirs"],
        "runtime": plan["runtime"],
        "total": len(units),
        "scopes": sum(1 for u in units if u["kind"] == "scope"),
        "mounts": sum(1 for u in units if u["kind"] == "mount"),
        "orphaned": len(orphaned),
        "orphaned_scopes": sum(1 for u in orphaned if u["kind"] == "scope"),
        "to_stop": len(to_stop),
        "stopped": len(record["stopped"]),
        "reset_failed": len(record["reset"]) + len(record["reset_after_stop"]),
        "dead_mount_units": len(dead_mounts),
        "daemon_reload": record["daemon_reload"],
        "kept_live": len(kept),
        "kept_by_runtime": len(by_status.get("live", [])),
        "kept_by_guard": len(by_status.get("guarded", [])),
        "unverified": len(by_status.get("unverified", [])),
        "unattributable": len(by_status.get("unattributable", [])),
        "still_active": len(record["still_active"]),
        "left": len(record.get("left") or []),
        "left_units": _cap(sorted(record.get("left") or []), limit),
        "estimate_seconds": estimate_seconds(plan["units_total"], len(to_stop), version, plan["stop_method"]),
        "estimate_left_seconds": estimate_seconds(plan["units_total"] - len(record["stopped"]),
                                                  len(record.get("left") or []), version, plan["stop_method"]),
        "estimate_basis": estimate_basis(version, plan["stop_method"]),
        "stop_calls": record["stop_calls"],
        "stop_method": plan["stop_method"],
        "transactions": record["transactions"],
        "fallbacks": record["fallbacks"],
        "show_calls": plan["show_calls"],
        "to_stop_units": _cap(sorted(to_stop), limit),
        "stopped_units": _cap(sorted(record["stopped"]), limit),
        "dead_mount_unit_names": _cap(sorted(dead_mounts), limit),
        "kept_units": _cap([{"unit": u["unit"], "pod_uid": u["pod_uid"], "reason": u["reason"]} for u in kept], limit),
        "unattributable_units": _cap([{"unit": u["unit"], "path": u["path"], "reason": u["reason"]}
                                      for u in by_status.get("unattributable", [])], limit),
        "still_active_units": _cap(record["still_active"], limit),
        "orphaned_pod_uids": _cap(sorted(set(u["pod_uid"] for u in orphaned)), limit),
        "errors": record["errors"],
        "timings": dict(plan["timings"], stop_s=record.get("stop_s", 0.0), verify_s=record.get("verify_s", 0.0)),
    }
