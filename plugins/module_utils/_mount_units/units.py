# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Which systemd units are kubelet's transient mounts, whose pod each belongs to, and what each needs.

Pure functions over ``systemctl list-units``/``show`` rows (``_mount_units.systemd`` parses them): a
scope is kubelet's by its description and its systemd-run name, a mount unit by its mount point under
the pods directories; ``classify`` decides every unit from the live pods and the guards
(``_mount_units.pods``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.systemd import pod_of_path, unit_name_to_path

# kubelet's mount-utils: "Kubernetes transient mount for <target>"
SCOPE_DESCRIPTION_PREFIX = "Kubernetes transient mount for "
# systemd-run's names for a transient scope: run-r<32 hex> (systemd >= 236,
# random), run-u<N> (a counter, systemd 230 - 235), run-<PID> (older).
SCOPE_NAME_RE = lazy_compile(r"^run-(?:r[0-9a-f]{32}|u[0-9]+|[0-9]+)\.scope$")
ACTIVE_STATES_TO_STOP = ("active", "activating", "deactivating", "reloading", "refreshing")


def kubelet_units(listed, pods_dirs):
    """Select kubelet's transient scopes and the mount units under the pods dirs.

    Returns (units, needs_show): ``needs_show`` names mount units whose listed
    line does not settle their mount point (hashed long names).
    """
    units = []
    needs_show = []
    for row in listed:
        name = row["unit"]
        if name.endswith(".scope"):
            marker = SCOPE_DESCRIPTION_PREFIX.rstrip()
            if not row["description"].startswith(marker):
                continue
            unit = dict(row, kind="scope", path=row["description"][len(marker):].strip())
            units.append(unit)
        elif name.endswith(".mount"):
            name_path = unit_name_to_path(name)
            desc = row["description"]
            desc_path = desc if desc.startswith("/") else None
            _name_uid, name_why = pod_of_path(name_path, pods_dirs)
            _desc_uid, desc_why = pod_of_path(desc_path, pods_dirs) if desc_path else (None, "outside")
            if name_why == "outside" and desc_why == "outside":
                continue
            unit = dict(row, kind="mount", path=desc_path or name_path)
            if desc_path is None or posixpath.normpath(desc_path) != posixpath.normpath(name_path):
                # a hashed long name, or a description that is not the mount point
                needs_show.append(name)
                unit["path"] = None
            units.append(unit)
    return units, needs_show


def apply_show(units, shown):
    """Settle the mount points of units asked with ``systemctl show``."""
    kept = []
    for unit in units:
        if unit["kind"] == "mount" and unit["path"] is None:
            props = shown.get(unit["unit"])
            if props is None or props.get("LoadState") == "not-found":
                continue  # gone since it was listed
            where = props.get("Where") or ""
            unit["path"] = where if where.startswith("/") else None
            if props.get("ActiveState"):
                unit["active"] = props["ActiveState"]
                unit["sub"] = props.get("SubState", unit["sub"])
        kept.append(unit)
    return kept


def attribute(units, pods_dirs):
    """Set ``pod_uid`` (or ``reason``) on every unit."""
    for unit in units:
        uid, why = (None, "mount point unknown") if unit["path"] is None else pod_of_path(unit["path"], pods_dirs)
        if uid is None and why == "outside":
            why = "path %s is not under %s" % (unit["path"], " or ".join(pods_dirs))
        if unit["kind"] == "scope" and uid is not None and not SCOPE_NAME_RE.match(unit["unit"]):
            uid, why = None, "scope name is not one systemd-run gives (run-r<hex>, run-u<N>, run-<PID>)"
        unit["pod_uid"] = uid
        unit["reason"] = why
    return units


def classify(units, live, guards, runtime_known=True):
    """Decide every unit; a pure function (the property test drives it).

    ``live`` maps pod UIDs to where they were learnt (``crictl``, ``docker``,
    ``caller``), ``guards`` maps pod UIDs to the second guard's reasons. Sets
    ``status``: ``unattributable``, ``live``, ``guarded``, ``unverified`` (the
    runtime could not be asked: ``runtime_known=False``) or ``orphaned``, and
    for orphans ``action``: ``stop`` (still up), ``reset`` (failed), ``reload``
    (a mount unit stuck inactive) or None.
    """
    for unit in units:
        uid = unit.get("pod_uid")
        unit["action"] = None
        if uid is None:
            unit["status"] = "unattributable"
        elif uid in live:
            unit["status"] = "live"
            unit["reason"] = "pod known to %s" % live[uid]
        elif uid in guards:
            unit["status"] = "guarded"
            unit["reason"] = ", ".join(sorted(guards[uid]))
        elif not runtime_known:
            unit["status"] = "unverified"
            unit["reason"] = "the runtime could not be asked about pod %s" % uid
        else:
            unit["status"] = "orphaned"
            unit["reason"] = "no live pod %s" % uid
            if unit["active"] in ACTIVE_STATES_TO_STOP:
                unit["action"] = "stop"
            elif unit["active"] == "failed":
                unit["action"] = "reset"
            elif unit["kind"] == "mount" and unit["load"] == "loaded":
                unit["action"] = "reload"
    return units
