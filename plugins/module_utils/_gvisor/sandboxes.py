# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""The live gVisor sandboxes: one pass over ``/proc`` finds every ``runsc-sandbox`` (``runsc ... boot``)
process, its ``--total-memory``, its cgroup and that cgroup's effective memory limit (walking up the
tree), and whether it runs inside a pod's slice."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.procfs import pid_files
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import int_or_none


def _flag(argv, name):
    """Value of a Go flag (``--name=v``, ``-name=v``, ``--name v``) in argv."""
    for i, arg in enumerate(argv):
        for prefix in ("--", "-"):
            flag = prefix + name
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(flag + "="):
                return arg[len(flag) + 1:]
    return None


def sandbox_from_cmdline(argv):
    """Parse a runsc sandbox command line; None when it is not one.

    The sandbox is the process runsc re-executes as ``runsc-sandbox``
    (``runsc-sandbox --root=... boot ... --total-memory 25276510208 ... <id>``,
    measured in the lab); builds that do not rename keep ``runsc ... boot``.
    """
    if not argv:
        return None
    prog = os.path.basename(argv[0])
    if prog != "runsc-sandbox":
        if not prog.startswith("runsc") or prog in ("runsc-gofer",) or "boot" not in argv[1:]:
            return None
    if "boot" not in argv[1:]:
        return None
    cid = argv[-1] if not argv[-1].startswith("-") else None
    return {
        "container_id": cid,
        "total_memory": int_or_none(_flag(argv, "total-memory")),
        "total_host_memory": int_or_none(_flag(argv, "total-host-memory")),
        "runsc_root": _flag(argv, "root"),
        "bundle": _flag(argv, "bundle"),
        "systemd_cgroup": (_flag(argv, "systemd-cgroup") or "").lower() == "true" or "--systemd-cgroup" in argv,
    }


def _pod_of(path):
    """describe_path plus the literal ``slice:prefix:name`` form of misplaced sandboxes."""
    desc = core_cgroup.describe_path(path)
    parts = [p for p in (path or "").split("/") if p]
    literal = [p for p in parts if p.count(":") == 2]
    desc["literal_systemd_path"] = bool(literal)
    if literal:
        slice_name, prefix, name = literal[-1].split(":")
        inner = core_cgroup.describe_path("/" + slice_name)
        desc["pod_uid"] = desc["pod_uid"] or inner["pod_uid"]
        desc["qos"] = desc["qos"] or inner["qos"]
        if re.match(r"^[0-9a-f]{12,64}$", name):
            desc["container_id"] = name
        if prefix == "cri-containerd":
            desc["runtime"] = "containerd"
        # a literal path is never inside the pod's slice, whatever its name says
        desc["in_kubepods"] = False
    return desc


def scan_sandboxes(root="/", mode=None):
    """One pass over /proc: every runsc sandbox with its size and its cgroup's limit.

    Only ``cmdline`` is read for every process; ``cgroup`` only for sandboxes.
    """
    mode = mode or core_cgroup.layout(root)
    controller = "" if mode == "v2" else "memory"
    roots = core_cgroup.mount_roots(root)
    proc = root_path(root, "/proc")
    sandboxes = []
    seen = set()
    for pid, raw in pid_files(proc, "cmdline"):
        if not raw or "boot" not in raw:
            continue
        argv = [a for a in raw.split("\0") if a != ""]
        sb = sandbox_from_cmdline(argv)
        if sb is None:
            continue
        key = sb["container_id"] or pid
        if key in seen:
            continue
        seen.add(key)
        cgroups = core_cgroup.parse_proc_cgroup(read_text(os.path.join(proc, str(pid), "cgroup")))
        proc_path = core_cgroup.path_for(cgroups, mode, controller)
        if proc_path is None and mode != "v2":
            proc_path = cgroups.get("")
        cg_path = core_cgroup.local_path(roots, controller, proc_path)
        limit = core_cgroup.memory_limit(root, mode, cg_path)
        desc = _pod_of(proc_path)
        k8s = bool((sb["runsc_root"] or "").find("k8s.io") >= 0 or desc["runtime"] == "containerd"
                   or desc["pod_uid"] or desc["literal_systemd_path"])
        total = sb["total_memory"]
        oversized = bool(total is not None and limit["limit"] is not None and total > limit["limit"])
        sb.update({
            "pid": pid,
            "cgroup": proc_path,
            "cgroup_local": cg_path,
            "cgroup_found": limit["exists"],
            "memory_limit": limit["limit"],
            "limited_by": limit["limited_by"],
            "leaf_limit": limit["leaf_limit"],
            "pod_uid": desc["pod_uid"],
            "qos": desc["qos"],
            "pod_container_id": desc["container_id"],
            "in_kubepods": desc["in_kubepods"],
            "kubernetes": k8s,
            "outside_pod_slice": bool(k8s and not desc["in_kubepods"]),
            "oversized": oversized,
            "excess_bytes": (total - limit["limit"]) if oversized else 0,
        })
        sandboxes.append(sb)
    return sandboxes
