# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""CPU quota detector: runc + systemd CPUQuota EINVAL (opencontainers/runc#1651).

With the systemd cgroup driver systemd stored a pod slice's CPU quota as a
whole percent, truncating: a 2953m limit became 295000 us on the pod slice
while runc wrote 295300 to the container's ``cpu.cfs_quota_us``, which the
kernel refuses (a child's quota may not exceed its nearest limited
ancestor's, compared per period) with EINVAL: the container never starts.
runc v1.0.0-rc5 (PR #1651) rounds up to 10 ms; the bug came back in 2025
where kubelet's cgroups library and runc round differently
(opencontainers/runc#4982).

This file walks the cpu hierarchy (v1 ``cpu.cfs_quota_us`` and
``cpu.cfs_period_us``, v2 ``cpu.max``) and reports

- every cgroup whose quota exceeds its nearest limited ancestor's
  (normalising periods): on v1 such writes fail with EINVAL, on v2 the
  kernel silently caps the child to the ancestor;
- CPU limits in kubepods under the systemd driver that are not whole
  percents of a CPU (the ones systemd truncates);
- runc older than v1.0.0-rc5 (runc is read by ``_containerd.node.runc_state``, the
  finding made by ``_containerd.detect.runc_findings``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import node as containerd_node
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path

FINDINGS = {
    "cpu_quota.child_exceeds_parent": {
        "severity": "high",
        "title": "A cgroup's CPU quota exceeds its parent's (the kernel refuses it with EINVAL on cgroup v1)",
        "remedy": ("Use CPU limits that are whole percents (e.g. 2950m or 3 instead of 2953m, 60m instead of 51m), "
                   "upgrade runc to >= v1.0.0-rc5 and keep kubelet and runc on releases that round the same way "
                   "(opencontainers/runc#4982); delete the pod so its sandbox and pod slice are recreated."),
        "role": "nodefix.k8s.kernel",
        "tag": "cpu_quota",
    },
    "cpu_quota.not_whole_percent": {
        "severity": "medium",
        "title": "A CPU limit under the systemd cgroup driver is not a whole percent of a CPU",
        "remedy": ("systemd stores CPUQuota in whole percents: the pod slice may get less than the container asks "
                   "for and the container then fails with 'failed to write ... cpu.cfs_quota_us: invalid argument'. "
                   "Round the limit to a multiple of 10m; keep runc >= v1.0.0-rc5."),
        "role": "nodefix.k8s.kernel",
        "tag": "cpu_quota",
    },
}

# severity of cpu_quota.child_exceeds_parent by layout: v1 refuses the write
# (container never starts), v2 caps the child silently (kernel/sched/core.c
# tg_cfs_schedulable_down).
_EXCEEDS_SEVERITY = {"v1": "high", "hybrid": "high", "v2": "medium"}


def exceeds(child, parent):
    """True when quota/period ``child`` is larger than ``parent`` (both (quota, period))."""
    return child[0] * parent[1] > parent[0] * child[1]


def whole_percent(quota, period):
    """True when ``quota`` is a whole percent of one CPU for ``period``.

    systemd keeps CPUQuotaPerSecUSec = quota * 1s / period and (before the
    fix) truncated it to multiples of 10 ms per second, i.e. whole percents.
    """
    return (quota * 100) % period == 0


def systemd_truncated(quota, period):
    """The quota systemd would write for the pod slice when truncating to whole percents."""
    return (quota * 100 // period) * period // 100


def walk(root, mode):
    """Every cgroup of the cpu hierarchy with a quota.

    Yields dicts ``path``, ``quota``, ``period`` and ``ancestor`` (the
    nearest limited ancestor as (path, quota, period) or None), top-down,
    in sorted order.
    """
    hier = core_cgroup.controller_dir(root, mode, "cpu")
    if hier is None or not os.path.isdir(hier):
        return
    nearest = {}
    for dirpath, dirnames, _files in os.walk(hier):
        dirnames.sort()
        path = "/" if dirpath == hier else "/" + os.path.relpath(dirpath, hier)
        above = nearest.get(os.path.dirname(dirpath)) if dirpath != hier else None
        qp = core_cgroup.cpu_quota(root, mode, path)
        own = (path, qp[0], qp[1]) if qp is not None and qp[0] is not None else None
        nearest[dirpath] = own or above
        if own is not None:
            yield {"path": path, "quota": own[1], "period": own[2], "ancestor": above}


def _names(path):
    info = core_cgroup.describe_path(path)
    return {"pod_uid": info["pod_uid"], "container_id": info["container_id"], "runtime": info["runtime"],
            "driver": info["driver"]}


# The detector's options (an Ansible argument spec): cpu_quota_info's
# argument_spec and node_audit's options.cpu_quota, checked by _core.options.
OPTIONS = {
    "check_runc": {"type": "bool", "default": True},
    "runc_binary": {"type": "str", "default": "runc"},
}


def check(runner, root="/", check_runc=True, runc_binary="runc", **_opts):
    """Quota violations, not-whole-percent limits under systemd, runc version."""
    mode = core_cgroup.layout(root)
    findings = []
    violations = []
    not_whole = []
    limited = 0
    for cg in walk(root, mode):
        limited += 1
        names = _names(cg["path"])
        anc = cg["ancestor"]
        if anc is not None and exceeds((cg["quota"], cg["period"]), (anc[1], anc[2])):
            item = {"path": cg["path"], "quota": cg["quota"], "period": cg["period"],
                    "parent": anc[0], "parent_quota": anc[1], "parent_period": anc[2],
                    "cpus": round(float(cg["quota"]) / cg["period"], 4),
                    "parent_cpus": round(float(anc[1]) / anc[2], 4)}
            item.update(names)
            parent_names = _names(anc[0])
            item["parent_pod_uid"] = parent_names["pod_uid"]
            violations.append(item)
            findings.append(finding_from(
                FINDINGS, "cpu_quota.child_exceeds_parent", subject=cg["path"],
                severity=_EXCEEDS_SEVERITY.get(mode),
                evidence=dict(item, layout=mode,
                              effect="write refused (EINVAL)" if mode != "v2" else "child capped to the parent's quota")))
        if names["driver"] == "systemd" and not whole_percent(cg["quota"], cg["period"]):
            item = {"path": cg["path"], "quota": cg["quota"], "period": cg["period"],
                    "percent": round(100.0 * cg["quota"] / cg["period"], 3),
                    "systemd_truncates_to": systemd_truncated(cg["quota"], cg["period"])}
            item.update(names)
            not_whole.append(item)
            findings.append(finding_from(FINDINGS, "cpu_quota.not_whole_percent", subject=cg["path"],
                                         evidence=item))

    # runc is read by the containerd detector's reader; the finding
    # runc.cpu_quota_rounding_bug is the containerd detector's (one owner):
    # cpu_quota_info adds it for its own callers, node_audit gets it once.
    runc = {"binary": None, "version": None, "cpu_quota_rounding_bug": None}
    if check_runc:
        state = containerd_node.runc_state(runner, root, runc_binary)
        runc = dict((k, state[k]) for k in runc)
    hier = core_cgroup.controller_dir(root, mode, "cpu")
    return {
        "cgroup_layout": mode,
        "cpu_hierarchy": "/" + os.path.relpath(hier, root_path(root, "/")) if hier else None,
        "limited_cgroups": limited,
        "violations": violations,
        "not_whole_percent": not_whole,
        "runc": runc,
        "findings": findings,
    }
