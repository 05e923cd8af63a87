# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""cgroup helpers shared by the detectors (v1, v2 and hybrid layouts).

Every function takes ``root`` (``/`` on a node, a fake tree in unit tests).
Path formats (kubelet's cgroup naming, kubernetes pkg/kubelet/cm; containerd CRI):

- systemd driver: ``/kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope``
  (docker: ``docker-<id>.scope``, cri-o: ``crio-<id>.scope``)
- cgroupfs driver: ``/kubepods/burstable/pod<uid>/<id>``

A pod UID is an RFC 4122 UUID (pods from the API server) or, for a static
pod, 32 hex digits without dashes: the md5 kubelet computes from the manifest
(its mirror pod in the API has another UID; the cgroups, the pod directory and
the runtime's labels keep this one). Both forms appear in both driver layouts.

Inside a container without its own cgroup namespace (podman/libpod parents)
``/proc/<pid>/cgroup`` shows host paths while ``/sys/fs/cgroup`` is the
container's subtree: ``mount_roots`` and ``local_path`` translate.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

CGROUP_BASE = "/sys/fs/cgroup"

# cgroup v1 reports "no limit" as PAGE_COUNTER_MAX * PAGE_SIZE
# (9223372036854771712 on 4 KiB pages); anything this large is unlimited.
V1_UNLIMITED_FLOOR = 1 << 60

# A pod UID as it appears in a pod cgroup's name: a UUID with "-" (cgroupfs) or
# "_" (systemd uses "-" for slice nesting, so kubelet escapes the UUID's), or a
# static pod's 32 hex digits (no dashes, the same in both drivers).
_UID = (r"(?:[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}"
        r"|[0-9a-fA-F]{32})")
# A pod UID as kubelet and the runtimes write it (lower case): RFC 4122 UUID
# (API pods) or 32 hex digits (static pods: an md5).
POD_UID_RE = lazy_compile(r"^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$")
_SYSTEMD_POD_RE = lazy_compile(r"^kubepods(?:-(burstable|besteffort))?-pod(" + _UID + r")\.slice$")
_CGROUPFS_POD_RE = lazy_compile(r"^pod(" + _UID + r")$")
_SCOPE_RE = lazy_compile(r"^(cri-containerd|docker|crio|crio-conmon|containerd)-([0-9a-f]{12,64})\.scope$")
_BARE_ID_RE = lazy_compile(r"^[0-9a-f]{64}$")


def is_pod_uid(text):
    """Whether ``text`` is a pod UID: a dashed UUID or a static pod's 32 hex digits.

    Lower case only, as kubelet writes them (pod directories, runtime labels);
    callers lower-case input from elsewhere first.
    """
    return bool(text) and POD_UID_RE.match(text) is not None


def parse_proc_cgroup(text):
    """Parse ``/proc/<pid>/cgroup``.

    Returns a dict mapping each v1 controller (``memory``, ``cpu``,
    ``name=systemd`` ...) to its path, and ``""`` to the unified (v2) path.
    """
    result = {}
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hid, controllers, path = parts
        if controllers == "":
            result[""] = path
            continue
        for name in controllers.split(","):
            result[name] = path
    return result


def layout(root="/"):
    """``v2``, ``hybrid`` or ``v1`` for the node under ``root``."""
    base = root_path(root, CGROUP_BASE)
    if os.path.exists(os.path.join(base, "cgroup.controllers")):
        return "v2"
    if os.path.exists(os.path.join(base, "unified")):
        return "hybrid"
    return "v1"


def controller_dir(root, mode, controller):
    """Directory of the hierarchy that holds ``controller``.

    On v2 that is the unified root; on v1/hybrid the mount whose name lists
    the controller (``cpu,cpuacct`` holds ``cpu``).
    """
    base = root_path(root, CGROUP_BASE)
    if mode == "v2":
        return base
    direct = os.path.join(base, controller)
    if os.path.isdir(direct):
        return direct
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return None
    for name in names:
        if controller in name.split(","):
            path = os.path.join(base, name)
            if os.path.isdir(path):
                return path
    return None


def path_for(cgroups, mode, controller):
    """The cgroup path a process has for ``controller`` (from parse_proc_cgroup)."""
    if mode == "v2":
        return cgroups.get("")
    return cgroups.get(controller)


def describe_path(path):
    """What a cgroup path tells about Kubernetes ownership.

    Returns a dict: ``pod_uid`` (a UUID in dashed form, or a static pod's
    32 hex digits as they are), ``container_id``,
    ``runtime`` (``containerd``, ``docker``, ``crio`` or None), ``qos``
    (``guaranteed``/``burstable``/``besteffort``), ``driver``
    (``systemd``/``cgroupfs``) and ``in_kubepods`` (bool).
    """
    info = {
        "pod_uid": None,
        "container_id": None,
        "runtime": None,
        "qos": None,
        "driver": None,
        "in_kubepods": False,
    }
    if not path:
        return info
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        if part == "kubepods.slice" or part.startswith("kubepods-"):
            info["in_kubepods"] = True
            info["driver"] = "systemd"
        elif part == "kubepods":
            info["in_kubepods"] = True
            info["driver"] = "cgroupfs"
        m = _SYSTEMD_POD_RE.match(part)
        if m:
            info["pod_uid"] = m.group(2).replace("_", "-")
            info["qos"] = m.group(1) or "guaranteed"
            continue
        m = _CGROUPFS_POD_RE.match(part)
        if m and info["in_kubepods"]:
            info["pod_uid"] = m.group(1).replace("_", "-")
            prev = parts[i - 1] if i > 0 else ""
            info["qos"] = prev if prev in ("burstable", "besteffort") else "guaranteed"
            continue
        m = _SCOPE_RE.match(part)
        if m:
            kind = m.group(1)
            info["runtime"] = {"cri-containerd": "containerd", "containerd": "containerd",
                               "crio-conmon": "crio"}.get(kind, kind)
            info["container_id"] = m.group(2)
            continue
        if _BARE_ID_RE.match(part) and info["pod_uid"]:
            info["container_id"] = part
    return info


def mount_roots(root="/"):
    """{controller: mount root} of the cgroup mounts this process sees.

    Reads ``/proc/self/mountinfo`` below ``root``. Inside a container without a
    cgroup namespace (podman's ``/libpod_parent/libpod-<id>``) ``/proc/<pid>/cgroup``
    shows host paths while ``/sys/fs/cgroup/<c>`` is the container's own
    subtree, mounted from that host path (field 4 of mountinfo, the mount
    root). v1 mounts are keyed by each controller of the hierarchy
    (``cpu,cpuacct`` gives ``cpu`` and ``cpuacct``; named hierarchies
    ``name=systemd``), the v2 mount by ``""``; the first mount of a hierarchy wins.
    """
    text = read_text(root_path(root, "/proc/self/mountinfo")) or ""
    roots = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, mount_root = rfields[0], fields[3]
        if fstype == "cgroup2":
            roots.setdefault("", mount_root)
        elif fstype == "cgroup":
            for opt in rfields[2].split(","):
                if opt in ("rw", "ro") or opt.startswith("relatime") or "=" in opt and not opt.startswith("name="):
                    continue
                roots.setdefault(opt, mount_root)
    return roots


def local_path(roots, controller, path):
    """A ``/proc/<pid>/cgroup`` path made relative to the mount this process sees.

    ``roots`` comes from ``mount_roots``; ``controller`` is the v1 controller
    (``memory``) or ``""`` for v2. A path outside the mount root, or any path
    when the mount root is ``/`` (the normal case on a node), is returned as it is.
    """
    base = roots.get(controller)
    if not path or not base or base == "/":
        return path
    if path == base:
        return "/"
    if path.startswith(base.rstrip("/") + "/"):
        return path[len(base.rstrip("/")):]
    return path


def _read_int_file(path):
    text = read_text(path)
    if text is None:
        return None, False
    text = text.strip()
    if text == "max" or text == "":
        return None, True
    try:
        return int(text.split()[0]), True
    except ValueError:
        return None, False


def _ancestors(cg_path):
    """``/a/b/c`` -> [``/a/b/c``, ``/a/b``, ``/a``, ``/``]."""
    parts = [p for p in (cg_path or "/").split("/") if p]
    out = []
    for i in range(len(parts), -1, -1):
        out.append("/" + "/".join(parts[:i]))
    return out


def memory_limit(root, mode, cg_path):
    """Effective memory limit of cgroup ``cg_path`` walking up to the root.

    Returns a dict: ``limit`` (bytes or None for unlimited), ``limited_by``
    (the cgroup path that sets it), ``leaf_limit`` (limit of the cgroup
    itself, None when unlimited) and ``exists`` (whether the leaf was found).
    """
    hier = controller_dir(root, mode, "memory")
    fname = "memory.max" if mode == "v2" else "memory.limit_in_bytes"
    result = {"limit": None, "limited_by": None, "leaf_limit": None, "exists": False}
    if hier is None or cg_path is None:
        return result
    first = True
    for cg in _ancestors(cg_path):
        directory = os.path.join(hier, cg.lstrip("/")) if cg != "/" else hier
        value, found = _read_int_file(os.path.join(directory, fname))
        if first:
            result["exists"] = os.path.isdir(directory)
        if value is not None and mode != "v2" and value >= V1_UNLIMITED_FLOOR:
            value = None
        if first:
            result["leaf_limit"] = value
            first = False
        if value is not None and (result["limit"] is None or value < result["limit"]):
            result["limit"] = value
            result["limited_by"] = cg
    return result


def cpu_quota(root, mode, cg_path):
    """(quota_us, period_us) of one cgroup; quota None means unlimited.

    Returns None when the files are missing.
    """
    hier = controller_dir(root, mode, "cpu")
    if hier is None:
        return None
    directory = os.path.join(hier, cg_path.lstrip("/")) if cg_path not in (None, "/") else hier
    if mode == "v2":
        text = read_text(os.path.join(directory, "cpu.max"))
        if text is None:
            return None
        fields = text.split()
        if not fields:
            return None
        period = int(fields[1]) if len(fields) > 1 else 100000
        quota = None if fields[0] == "max" else int(fields[0])
        return quota, period
    quota, found_q = _read_int_file(os.path.join(directory, "cpu.cfs_quota_us"))
    period, _found_p = _read_int_file(os.path.join(directory, "cpu.cfs_period_us"))
    if not found_q:
        return None
    if quota is not None and quota < 0:
        quota = None
    return quota, period or 100000
