# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Kernel and cgroup health detector: dying memcgs, OOM hangs, PSI.

- the kernel release, distro suffixes included, against the upstream fixes
  (4.6 OOM reaper, 4.16 memory.stat with many dying memcgs, 4.20 PSI,
  5.2 recursive memcg statistics);
- the cgroup layout (v1, v2, hybrid);
- dying memory cgroups (v1: ``/proc/cgroups`` memory ``num_cgroups`` minus
  the directories of the memory hierarchy; v2: ``cgroup.stat``
  ``nr_dying_descendants``);
- the time one read of the root ``memory.stat`` takes (what cAdvisor pays);
- whether PSI (``/proc/pressure``) is available.

The remedy is a kernel upgrade. ``echo 3 > /proc/sys/vm/drop_caches`` is
not one: it can stall a node for minutes (it reclaims every cache at once) and the dying
cgroups come back with the next cron jobs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

DEFAULTS = {
    "dying_memcgs_threshold": 1000,
    # a healthy node reads the root memory.stat in ~10 ms; a node with ~100k dying
    # memcgs took 1.2 s in a reported incident
    "memory_stat_slow_ms": 200,
}

_UPGRADE = ("Upgrade the kernel (distribution kernel >= 5.4 LTS; 5.15, 6.1 or newer preferred). "
            "Dropping caches (echo 3 > /proc/sys/vm/drop_caches) is NOT a remedy: it can hang the node "
            "and does not stop new dying cgroups.")

# (version, finding id, what the version fixed): upstream commits, see docs/kernel.md.
FIXES = (
    ((4, 6), "kernel.no_oom_reaper", "OOM reaper: an OOM victim that cannot exit no longer hangs the node"),
    ((4, 16), "kernel.memcg_stat_unfixed",
     "memory.stat no longer walks every dying memcg (a983b5ebee57): kubelet/cAdvisor CPU"),
    ((4, 20), "kernel.no_psi", "pressure stall information (/proc/pressure): systemd-oomd, kubelet PSI"),
    ((5, 2), "kernel.memcg_stats_not_recursive", "recursive memcg statistics: memory.stat reads in constant time"),
)

# Distribution kernels that carry a fix before the upstream version:
# family -> {finding id: note}. RHEL 8 (4.18) backports PSI but disables it
# by default (CONFIG_PSI_DEFAULT_DISABLED, boot with psi=1).
BACKPORTS = {
    "rhel8": {"kernel.no_psi": "backported to RHEL 8 4.18, disabled by default: boot with psi=1"},
}

FINDINGS = {
    "kernel.no_oom_reaper": {
        "severity": "high",
        "title": "Kernel older than 4.6 has no OOM reaper: a node under memory pressure can hang",
        "remedy": _UPGRADE + " Meanwhile set kubelet evictionHard and systemReserved, or run earlyoom.",
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.memcg_stat_unfixed": {
        "severity": "medium",
        "title": "Kernel older than 4.16: memory.stat reads slow down with every dying memory cgroup",
        "remedy": _UPGRADE,
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.no_psi": {
        "severity": "medium",
        "title": "Pressure stall information (/proc/pressure) is not available",
        "remedy": ("Kernels >= 4.20 built with CONFIG_PSI_DEFAULT_DISABLED (RHEL 8 backport, some cloud kernels) "
                   "need psi=1 on the kernel command line; older kernels need an upgrade. Without PSI neither "
                   "systemd-oomd nor the kubelet's PSI metrics work; use earlyoom and kubelet evictionHard."),
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.memcg_stats_not_recursive": {
        "severity": "low",
        "title": "Kernel older than 5.2: memory.stat is computed by walking the cgroup tree on every read",
        "remedy": _UPGRADE,
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.dying_memcgs": {
        "severity": "medium",
        "title": "Many dying (zombie) memory cgroups pin memory and slow memory.stat",
        "remedy": ("A drained reboot frees them (nodefix.k8s.remediate with nodefix_reboot_dying_memcgs). "
                   "Reduce cgroup churn (frequent CronJobs create and delete pods) and " + _UPGRADE[0].lower()
                   + _UPGRADE[1:]),
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.slow_memory_stat": {
        "severity": "high",
        "title": "Reading the root memory.stat is slow (kubelet/cAdvisor burn CPU on it)",
        "remedy": _UPGRADE,
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.below_minimum": {
        "severity": "medium",
        "title": "The running kernel is older than the fleet's minimum release",
        "remedy": ("Install a kernel at or above the minimum from the node's package sources and boot it once: "
                   "the kernel role with kernel_upgrade_enabled (nodefix.k8s.remediate: nodefix_kernel_upgrade)."),
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
    "kernel.unknown_release": {
        "severity": "info",
        "title": "The kernel release could not be parsed",
        "remedy": "Check the release string; the version checks were skipped.",
        "role": "nodefix.k8s.kernel",
        "tag": "kernel",
    },
}

_RELEASE_RE = lazy_compile(r"^(\d+)\.(\d+)(?:\.(\d+))?([A-Za-z0-9._+~-]*)$")
# Ubuntu: 5.15.0-91-generic, 4.4.0-1069-aws, 6.8.0-1015-aws, 5.4.0-1103-azure
_UBUNTU_RE = lazy_compile(r"^-(\d+)-(generic|lowlatency|aws|azure|gcp|gke|gkeop|oracle|kvm|ibm|raspi|nvidia|"
                          r"oem|virtual|generic-pae|generic-lpae|hwe)(?:-[\w.]+)?$")
# Debian: 6.1.0-27-amd64, 5.10.0-28-cloud-amd64, 6.12.12-rt-arm64; older 4.19.0-6-amd64
# (backports: 6.1.0-0.deb11.17-amd64)
_DEBIAN_RE = lazy_compile(r"^-(\d+(?:\.deb\d+\.\d+)?)-((?:cloud-|rt-)?(?:amd64|arm64|armmp|armmp-lpae|686|686-pae|ppc64el|s390x|"
                          r"mips64el|riscv64|i386|marvell|rpi))$")
_EL_RE = lazy_compile(r"^-([\d.]+)\.el(\d+)(?:_(\d+))?(uek)?(?:\.(\w+))?$")
_AMZN_RE = lazy_compile(r"^-([\d.]+)\.amzn(\d+)(?:\.(\w+))?$")
_FEDORA_RE = lazy_compile(r"^-([\d.]+)\.fc(\d+)(?:\.(\w+))?$")


def parse_release(release):
    """Parse ``uname -r``.

    Returns a dict: ``release`` (as given), ``version`` (``"5.15.0"``),
    ``version_tuple`` ((5, 15, 0)), ``distro`` (``ubuntu``, ``debian``,
    ``rhel``, ``amazon``, ``fedora`` or None), ``distro_release`` (e.g.
    ``el8``, ``amzn2``), ``abi`` (distribution build number as a string) and
    ``flavour`` (``generic``, ``aws``, ``amd64``, ``x86_64`` ...), or None
    when the string is not a kernel release.
    """
    text = (release or "").strip()
    m = _RELEASE_RE.match(text)
    if not m:
        return None
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    suffix = m.group(4)
    info = {
        "release": text,
        "version": "%d.%d.%d" % (major, minor, patch),
        "version_tuple": (major, minor, patch),
        "distro": None,
        "distro_release": None,
        "abi": None,
        "flavour": None,
    }
    um = _UBUNTU_RE.match(suffix)
    dm = _DEBIAN_RE.match(suffix)
    em = _EL_RE.match(suffix)
    am = _AMZN_RE.match(suffix)
    fm = _FEDORA_RE.match(suffix)
    if um:
        info.update(distro="ubuntu", abi=um.group(1), flavour=um.group(2))
    elif dm:
        info.update(distro="debian", abi=dm.group(1), flavour=dm.group(2))
    elif em:
        info.update(distro="oracle-uek" if em.group(4) else "rhel", abi=em.group(1),
                    distro_release="el%s" % em.group(2), flavour=em.group(5))
    elif am:
        info.update(distro="amazon", abi=am.group(1), distro_release="amzn%s" % am.group(2), flavour=am.group(3))
    elif fm:
        info.update(distro="fedora", abi=fm.group(1), distro_release="fc%s" % fm.group(2), flavour=fm.group(3))
    elif "+deb" in suffix:
        info["distro"] = "debian"
    return info


def _backports(info):
    if info and info["distro"] == "rhel" and info["distro_release"] == "el8":
        return BACKPORTS["rhel8"]
    return {}


def missing_fixes(info):
    """Fixes (from FIXES) the parsed release lacks: list of (id, needed version, note).

    Backports known for the distribution are left out (they are returned by
    ``_backports`` and reported in the facts instead).
    """
    out = []
    if not info:
        return out
    backported = _backports(info)
    for version, fid, note in FIXES:
        if info["version_tuple"][:2] < version and fid not in backported:
            out.append((fid, "%d.%d" % version, note))
    return out


def psi_state(root):
    """``available``, ``disabled`` (files present, reads fail: psi=0 or CONFIG_PSI_DEFAULT_DISABLED)
    or ``missing`` (no /proc/pressure)."""
    path = root_path(root, "/proc/pressure/memory")
    try:
        with open(path, "rb") as fh:
            fh.read()
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "missing"
        return "disabled"
    return "available"


def _count_dirs(top):
    """The directories ``os.walk(top)`` visits (``top`` included; symlinks not followed, an unreadable one not
    counted), counted without building its lists: a node's memory hierarchy holds a directory per cgroup,
    each with dozens of files."""
    count, stack = 0, [top]
    while stack:
        path = stack.pop()
        subdirs = []
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if is_dir:
                        try:
                            link = entry.is_symlink()
                        except OSError:
                            link = False
                        if not link:
                            subdirs.append(entry.path)
        except OSError:
            continue
        count += 1
        stack.extend(subdirs)
    return count


def dying_memcgs(root, mode):
    """Dying memory cgroups: dict ``count``, ``method`` and the numbers behind it.

    v1/hybrid (memory lives on a v1 hierarchy): ``/proc/cgroups`` memory
    ``num_cgroups`` (the kernel's count, dying ones included) minus the
    directories under the memory hierarchy (root included). v2:
    ``nr_dying_descendants`` of the root ``cgroup.stat``.
    """
    if mode == "v2":
        text = read_text(os.path.join(root_path(root, core_cgroup.CGROUP_BASE), "cgroup.stat"))
        for line in (text or "").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "nr_dying_descendants":
                return {"count": int(parts[1]), "method": "cgroup.stat"}
        return {"count": None, "method": "cgroup.stat"}
    num = None
    for line in (read_text(root_path(root, "/proc/cgroups")) or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "memory":
            num = int(parts[2])
    hier = core_cgroup.controller_dir(root, mode, "memory")
    dirs = _count_dirs(hier) if hier is not None else None
    count = num - dirs if num is not None and dirs is not None else None
    return {"count": max(count, 0) if count is not None else None, "method": "/proc/cgroups",
            "num_cgroups": num, "directories": dirs}


_STAT_CANDIDATES = ("", "kubepods.slice", "kubepods", "system.slice")


def time_memory_stat(root, mode, clock=time.time):
    """Seconds one read of the root ``memory.stat`` takes, and the node path read.

    cgroup v2 has no root ``memory.stat`` before Linux 6.x: then the largest
    subtree's (``kubepods.slice``, ``kubepods``, ``system.slice``) is read.
    """
    hier = core_cgroup.controller_dir(root, mode, "memory")
    if hier is None:
        return None, None
    base = root_path(root, "/")
    for sub in _STAT_CANDIDATES:
        path = os.path.join(hier, sub, "memory.stat") if sub else os.path.join(hier, "memory.stat")
        if os.path.exists(path):
            start = clock()
            read_text(path)
            return clock() - start, "/" + os.path.relpath(path, base)
    return None, None


# The detector's options (an Ansible argument spec): kernel_info's
# argument_spec and node_audit's options.kernel, checked by _core.options.
OPTIONS = {
    "release": {"type": "str"},
    "min_release": {"type": "str"},
    "dying_memcgs_threshold": {"type": "int", "default": DEFAULTS["dying_memcgs_threshold"]},
    "memory_stat_slow_ms": {"type": "int", "default": DEFAULTS["memory_stat_slow_ms"]},
}


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    errors = ["%s must not be negative (got %d)" % (name, p[name])
              for name in ("dying_memcgs_threshold", "memory_stat_slow_ms") if p.get(name) is not None and p[name] < 0]
    if p.get("release") is not None and parse_release(p["release"]) is None:
        errors.append("release %r is not a kernel release (expected e.g. 5.15.0-91-generic)" % p["release"])
    if p.get("min_release") is not None and not _MIN_RE.match(p["min_release"]):
        errors.append("min_release %r is not a kernel version (expected e.g. 6.12 or 6.1.0)" % p["min_release"])
    return errors


_MIN_RE = lazy_compile(r"^\d+\.\d+(?:\.\d+)?$")


def below_minimum(info, min_release):
    """True when the parsed release ``info`` is older than ``min_release`` (``"6.12"``, ``"6.1.90"``)."""
    if info is None or not min_release:
        return False
    want = tuple(int(n) for n in min_release.split("."))
    return info["version_tuple"][:len(want)] < want


def release_findings(info, running, psi):
    """Findings of the release judged (``info``); ``psi`` is the live state, used only
    when the release judged is the ``running`` one (another kernel's PSI is judged
    from its version and the known backports alone)."""
    findings = []
    if info is None:
        return findings
    backported = _backports(info)
    for fid, needed, note in missing_fixes(info):
        if fid == "kernel.no_psi" and running and psi == "available":
            continue  # a distribution backport we do not know about
        findings.append(finding_from(FINDINGS, fid, subject=info["release"],
                                     evidence={"release": info["release"], "version": info["version"],
                                               "distro": info["distro"], "fixed_in": needed, "fix": note}))
    if running and psi != "available" and not any(f["id"] == "kernel.no_psi" for f in findings):
        findings.append(finding_from(FINDINGS, "kernel.no_psi", subject=info["release"],
                                     evidence={"release": info["release"], "psi": psi,
                                               "backport": backported.get("kernel.no_psi"),
                                               "fix": "boot with psi=1"}))
    # Another kernel (release=): its command line is unknown, and a backport that is
    # disabled by default (RHEL 8's PSI) is off unless that boot says psi=1.
    if not running and "kernel.no_psi" in backported and not any(f["id"] == "kernel.no_psi" for f in findings):
        findings.append(finding_from(FINDINGS, "kernel.no_psi", subject=info["release"],
                                     evidence={"release": info["release"], "psi": "unknown (not the running kernel)",
                                               "backport": backported["kernel.no_psi"], "fix": "boot with psi=1"}))
    return findings


def read_running_release(root="/"):
    """The running kernel's release (``/proc/sys/kernel/osrelease``, what ``uname -r`` prints); None unreadable."""
    return (read_text(root_path(root, "/proc/sys/kernel/osrelease")) or "").strip() or None


def check(runner, root="/", release=None, min_release=None, **opts):
    """Kernel release, cgroup layout, dying memcgs, memory.stat time, PSI.

    ``release`` judges that kernel instead of the running one
    (``/proc/sys/kernel/osrelease``), e.g. the one a node will boot into: its
    fixes and PSI come from its version and known backports; the live
    measurements (dying memcgs, memory.stat, ``/proc/pressure``) stay the
    running kernel's. ``clock`` (a callable returning seconds) is for tests.
    """
    o = dict(DEFAULTS)
    o.update(dict((k, v) for k, v in opts.items() if v is not None and k != "clock"))
    clock = opts.get("clock") or time.time
    running_release = read_running_release(root)
    if release is None:
        release = running_release
    running = release == running_release
    info = parse_release(release)
    mode = core_cgroup.layout(root)
    findings = []
    if info is None:
        findings.append(finding_from(FINDINGS, "kernel.unknown_release", subject=release,
                                     evidence={"release": release}))
    psi = psi_state(root)
    backported = _backports(info)
    findings.extend(release_findings(info, running, psi))
    if below_minimum(info, min_release):
        findings.append(finding_from(FINDINGS, "kernel.below_minimum", subject=info["release"],
                                     evidence={"release": info["release"], "version": info["version"],
                                               "min_release": min_release}))

    dying = dying_memcgs(root, mode)
    elapsed, stat_path = time_memory_stat(root, mode, clock=clock)
    elapsed_ms = round(elapsed * 1000.0, 1) if elapsed is not None else None
    slow = elapsed_ms is not None and elapsed_ms >= o["memory_stat_slow_ms"]
    if dying["count"] is not None and dying["count"] >= o["dying_memcgs_threshold"]:
        unfixed = info is not None and info["version_tuple"][:2] < (4, 16)
        findings.append(finding_from(
            FINDINGS, "kernel.dying_memcgs", subject="memory cgroups",
            severity="high" if slow or unfixed else None,
            evidence=dict(dying, threshold=o["dying_memcgs_threshold"], release=release,
                          memory_stat_ms=elapsed_ms)))
    if slow:
        findings.append(finding_from(
            FINDINGS, "kernel.slow_memory_stat", subject=stat_path,
            evidence={"path": stat_path, "milliseconds": elapsed_ms, "threshold_ms": o["memory_stat_slow_ms"],
                      "dying_memcgs": dying["count"], "release": release}))
    return {
        "release": release,
        "running_release": running_release,
        "judged_running_kernel": running,
        "min_release": min_release,
        "kernel": info,
        "cgroup_layout": mode,
        "psi": psi,
        "backports": sorted(backported.values()),
        "dying_memcgs": dying,
        "memory_stat_ms": elapsed_ms,
        "memory_stat_path": stat_path,
        "findings": findings,
    }
