# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Leaked kubelet mount units: find the orphans and stop them (kubernetes#57345, kops#5916).

kubelet 1.8 - 1.22 ran its mounts through ``systemd-run --description=Kubernetes
transient mount for <target> --scope -- mount ...`` (mount-utils ``AddSystemdScope``).
On systemd < 237 (kubernetes#57345, systemd PR #7811) and in kops#5916 the units
leaked: scopes that stay ``loaded active running`` and ``.mount`` units that stay
``loaded inactive dead``; at MANAGER_MAX_NAMES (131072) units every new mount fails
with "Argument list too long".

What this file does, with a CONSTANT number of ``systemctl`` calls however many
units exist (a per-unit cleaner script spawns ``systemctl status``, ``cat``
and ``docker ps`` for every unit):

1. ``systemctl --version`` and ONE ``systemctl list-units --all --plain
   --no-legend --full``; kubelet transient scopes are recognised by their
   description and their systemd-run name (``run-r<32 hex>``, ``run-u<N>``,
   ``run-<PID>``), mount units by their mount point under ``<root dir>/pods``
   (description, or the unescaped unit name: ``var-lib-kubelet-pods-<uid with
   \x2d>-volume\x2dsubpaths-...mount``). ``systemctl show`` (batched, argv
   chunked below ARG_MAX) is only asked about the few units whose list line does
   not settle their path (hashed long names): measured at ~4.5 ms per unit on
   systemd 252, it would cost more than stopping them.
2. each unit is attributed to the pod UID that follows ``pods/`` in its path
   (a UUID, or the 32 hex digits of a static pod); anything else is
   *unattributable* and never stopped.
3. the live pods come from the container runtime (``crictl pods -o json`` plus
   ``crictl ps -a -o json``, or the docker label ``io.kubernetes.pod.uid``), or
   from a list given by the caller; a failing or unparsable runtime answer ends
   the run before anything is stopped.
4. second guard, independent of the runtime: one read of
   ``/proc/self/mountinfo`` (a pod whose volumes are still mounted under
   ``pods/<uid>/volumes/`` is still set up by kubelet, e.g. a pod whose sandbox is
   not created yet), the pod cgroups of running processes (``/proc/<pid>/cgroup``),
   and the pod's directory: one that changed in the last ``STARTING_GRACE`` seconds
   belongs to a pod kubelet may still be starting (mounting a slow volume, before
   any sandbox, mount or process shows it).
5. orphans (no live pod, no guard) are stopped in batches (``systemctl stop``),
   failed ones reset (``systemctl reset-failed <names>``, never a global reset),
   and, optionally, one ``daemon-reload`` drops dead mount units on systemd < 237.

Where each step lives (the package imports nothing from Ansible, only the collection's ``_core``
readers, so the role ``nodefix.k8s.mount_units`` ships these very files to nodes - ``meta/node_files.yml`` -
and runs them from a systemd timer, ``_mount_units.cleanup.cli``: one implementation for the module and
the timer):

- ``_mount_units.systemd``: unit names, the parsers of systemd's outputs and of mountinfo, pod paths;
- ``_mount_units.units``: which units are kubelet's, whose pod they belong to, and each unit's decision
  (steps 1 and 2, ``classify``);
- ``_mount_units.pods``: the live pods from the runtime and the second guard (steps 3 and 4);
- ``_mount_units.survey``: the whole read in order (``survey``) and its options;
- ``_mount_units.cost`` and ``_mount_units.summary``: what the stop would cost, and the facts;
- ``_mount_units.cleanup`` (with ``_mount_units.transaction``): the stop itself (step 5) and the timer's CLI;
- this file: the detector for ``node_audit`` (its findings and options). It only reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.cost import reboot_faster
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.errors import MountUnitsError
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.pods import pod_dirs
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.summary import (
    empty_record,
    summarize,
    SYSTEMD_FIX_VERSION,
    SYSTEMD_UNIT_LIMIT,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.survey import normalize_options, survey, SURVEY_OPTIONS

FINDINGS = {
    "mount_units.leaked_scopes": {
        "severity": "medium",
        "title": "Leaked kubelet transient mount scopes (run-*.scope) of pods that no longer exist",
        "remedy": "Stop the orphaned scopes with nodefix.k8s.kubelet_mount_units (state=absent) or the role "
                  "nodefix.k8s.mount_units; schedule it until systemd is upgraded.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.dead_mount_units": {
        "severity": "medium",
        "title": "Mount units under the kubelet pods directory left behind by pods that no longer exist",
        "remedy": "Stop them (and daemon-reload for units stuck 'inactive dead') with nodefix.k8s.kubelet_mount_units "
                  "or the role nodefix.k8s.mount_units.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.systemd_without_fix": {
        "severity": "medium",
        "title": "systemd older than 237 leaks the mount units of kubelet (kubernetes#57345, systemd PR #7811)",
        "remedy": "Upgrade systemd to 237 or later; until then schedule the cleanup (role nodefix.k8s.mount_units "
                  "with mount_units_schedule_enabled=true).",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.near_unit_limit": {
        "severity": "high",
        "title": "systemd holds so many units that new kubelet mounts will soon fail (limit 131072)",
        "remedy": "Stop the leaked units now (nodefix.k8s.mount_units); at the limit every transient unit fails with "
                  "'Argument list too long'.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.cleanup_slow": {
        "severity": "medium",
        "title": "Stopping the leaked units through systemd is estimated to take longer than a drained reboot",
        "remedy": "Drain and reboot the node (every transient unit is gone after a boot): remediate does it with "
                  "nodefix_mount_units_reboot and nodefix_kubeconfig (the mount_units role's reboot path, only on a "
                  "node it drained); or run the cleanup with a budget (mount_units_max_seconds) and let the timer "
                  "finish; the evidence has the estimate.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units_reboot",
    },
    "mount_units.runtime_unavailable": {
        "severity": "low",
        "title": "kubelet mount units exist but the container runtime could not be asked which pods live",
        "remedy": "Make crictl (or docker) work on the node, or give the live pods, so that orphans can be told from "
                  "live pods' units; nothing is stopped without that.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
}


# --------------------------------------------------------------------------
# node_audit detector


# The detector's options (node_audit's options.mount_units): the survey's (SURVEY_OPTIONS, which
# kubelet_mount_units' argument_spec shares) plus near_limit_ratio and reboot_over_seconds. Both are
# checked by Ansible's validator (_core.options).
OPTIONS = dict(SURVEY_OPTIONS, near_limit_ratio={"type": "float", "default": 0.5},
               # report mount_units.cleanup_slow when the estimated cleanup is longer (0: never)
               reboot_over_seconds={"type": "float", "default": 3600})


def option_errors(p):
    """What the spec cannot say about the detector's options (typed ``p``)."""
    errors = []
    ratio = p.get("near_limit_ratio")
    if ratio is not None and not 0 < ratio <= 1:
        errors.append("near_limit_ratio must be above 0 and at most 1 (a share of systemd's %d units), got %s"
                      % (SYSTEMD_UNIT_LIMIT, ratio))
    if (p.get("reboot_over_seconds") or 0) < 0:
        errors.append("reboot_over_seconds must be 0 (never) or more, got %s" % p.get("reboot_over_seconds"))
    try:
        normalize_options(dict((k, v) for k, v in p.items() if k in SURVEY_OPTIONS))
    except MountUnitsError as exc:
        errors.append(exc.msg)
    return errors


def check(runner, root="/", **opts):
    """Detector for node_audit: facts and findings; never changes anything.

    Options: OPTIONS (the survey's plus ``near_limit_ratio``: report
    ``mount_units.near_unit_limit`` from this share of the 131072 units).
    """
    o = dict(opts)
    near = float(o.pop("near_limit_ratio", None) or 0.5)
    reboot_over = o.pop("reboot_over_seconds", None)
    reboot_over = 3600 if reboot_over is None else float(reboot_over)
    facts = {"mount_units": None, "findings": []}
    findings = facts["findings"]
    if runner.bin(o.get("systemctl_path") or "systemctl") is None:
        # no systemd on the node: no transient units to leak (nothing to check, not a failure)
        facts["mount_units"] = {"error": "systemctl not found: not a systemd node, no transient mount units"}
        return facts
    # a survey that cannot run (systemctl list-units failing) raises: the audit reports the
    # detector as failed (audit.check_failed), never as a node without leaked units
    plan = survey(runner, root=root, runtime_errors="record", **o)
    result = summarize(plan, empty_record(), check_mode=True)
    facts["mount_units"] = result
    if plan["runtime"]["error"]:
        findings.append(finding_from(FINDINGS, "mount_units.runtime_unavailable", subject=plan["runtime"]["source"],
                                     evidence={"error": plan["runtime"]["error"], "kubelet_units": result["total"]}))
    scopes = [u for u in plan["units"] if u["status"] == "orphaned" and u["kind"] == "scope"]
    mounts = [u for u in plan["units"] if u["status"] == "orphaned" and u["kind"] == "mount"]
    if scopes:
        findings.append(finding_from(FINDINGS, "mount_units.leaked_scopes", evidence={
            "count": len(scopes), "pods": len(set(u["pod_uid"] for u in scopes)),
            "sample": [u["unit"] for u in scopes[:5]]}))
    if mounts:
        findings.append(finding_from(FINDINGS, "mount_units.dead_mount_units", evidence={
            "count": len(mounts), "inactive_dead": sum(1 for u in mounts if u["action"] == "reload"),
            "sample": [u["unit"] for u in mounts[:5]]}))
    version = result["systemd"]["version"]
    if version is not None and version < SYSTEMD_FIX_VERSION and (result["total"] or pod_dirs(root, plan["pods_dirs"])):
        findings.append(finding_from(FINDINGS, "mount_units.systemd_without_fix", subject="systemd %s" % version,
                                     evidence={"version": version, "fixed_in": SYSTEMD_FIX_VERSION,
                                               "kubelet_units": result["total"]}))
    if reboot_faster(result["estimate_seconds"], reboot_over):
        findings.append(finding_from(FINDINGS, "mount_units.cleanup_slow", evidence={
            "estimate_seconds": result["estimate_seconds"], "reboot_over_seconds": reboot_over,
            "to_stop": result["to_stop"], "units_loaded": result["systemd"]["units_total"],
            "estimate_basis": result["estimate_basis"]}))
    total = result["systemd"]["units_total"]
    if total >= int(SYSTEMD_UNIT_LIMIT * near):
        findings.append(finding_from(FINDINGS, "mount_units.near_unit_limit",
                                     severity="critical" if total >= int(SYSTEMD_UNIT_LIMIT * 0.9) else None,
                                     evidence={"units": total, "limit": SYSTEMD_UNIT_LIMIT,
                                               "kubelet_units": result["total"]}))
    return facts
