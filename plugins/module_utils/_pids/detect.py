# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""PID space and zombie detector (kernel.pid_max, kernel.threads-max, zombie leakers).

One pass over ``/proc``: a single read of ``/proc/<pid>/stat`` per process
gives its state (field 3), parent (field 4), thread count (field 20) and
start time (field 22, clock ticks after boot). Only the parents of zombies
are read further (``cmdline``, ``cgroup``, ``status``), so the cost stays
linear in the number of processes with a small constant: no subprocess and
no per-thread reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.cgroup import describe_path, parse_proc_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import int_or_none

# PID_MAX_LIMIT on 64-bit kernels (include/linux/threads.h: 4 * 1024 * 1024);
# 32-bit kernels cannot go past PID_MAX_DEFAULT (32768).
PID_MAX_LIMIT_64 = 4194304
PID_MAX_LIMIT_32 = 32768

DEFAULTS = {
    # percent of the effective task limit (min of pid_max and threads-max)
    "usage_percent": 80,
    # recommended kernel.pid_max; None: the architecture's limit
    "pid_max_min": None,
    # kernel.threads-max below this is reported (110 pods x ~1000 tasks)
    "threads_max_min": 131072,
    # zombies one parent must hold, and how old the oldest must be, to be a leaker
    "zombie_threshold": 10,
    "zombie_min_age": 60,
    # parents listed in the facts (the largest first)
    "max_parents": 50,
}

# The zombie advice, written once: the finding's remedy, and per parent
# (``zombie_advice``) in the facts and the finding's evidence, which the
# roles print as they are.
_ZOMBIE_ADVICE = ("Make the parent reap its children: run an init as the container's PID 1 "
                  "(tini, dumb-init, `docker run --init`), or set `shareProcessNamespace: true` in the "
                  "pod so the pause container (PID 1) reaps orphans; fix or upgrade the parent "
                  "(e.g. supercronic >= 0.2.33). Restarting the parent releases its zombies at once.")
_ZOMBIE_ADVICE_INIT = ("It is PID 1 of its container: run an init as the entrypoint (tini, dumb-init, "
                       "`docker run --init`) or set `shareProcessNamespace: true` so the pause container reaps.")
_ZOMBIE_ADVICE_OTHER = ("It is not an init and never waits for its children: start it under tini, or set "
                        "`shareProcessNamespace: true` in the pod so the pause container (PID 1) reaps orphans; "
                        "fix or upgrade it (e.g. supercronic >= 0.2.33).")


def zombie_advice(ns_pid):
    """What to do about one zombie parent, by whether it is PID 1 of its PID namespace."""
    return "%s Restarting it releases its zombies at once." % (
        _ZOMBIE_ADVICE_INIT if ns_pid == 1 else _ZOMBIE_ADVICE_OTHER)


FINDINGS = {
    "pids.usage_high": {
        "severity": "high",
        "title": "Tasks use most of the node's PID space (kernel.pid_max / kernel.threads-max)",
        "remedy": ("Find what creates the tasks (zombie leakers, thread leaks); raise kernel.pid_max to "
                   "4194304 (role nodefix.k8s.pids) and set kubelet podPidsLimit so one pod cannot "
                   "exhaust the node. New processes fail with 'pthread_create failed: No space left on device' "
                   "once the limit is reached."),
        "role": "nodefix.k8s.pids",
        "tag": "pids",
    },
    "pids.pid_max_low": {
        "severity": "medium",
        "title": "kernel.pid_max is below the recommended value",
        "remedy": ("Raise kernel.pid_max persistently (role nodefix.k8s.pids writes a /etc/sysctl.d/ "
                   "file; 4194304 on 64-bit kernels, systemd >= 243 ships the same in 50-pid-max.conf)."),
        "role": "nodefix.k8s.pids",
        "tag": "pids",
    },
    "pids.pid_max_persisted_low": {
        "severity": "medium",
        "title": "The kernel.pid_max the next boot applies (sysctl.d) is below the recommended value",
        "remedy": ("A sysctl.d file persists a low kernel.pid_max: the node falls back to it at the next boot "
                   "whatever the live value is now. The role nodefix.k8s.pids writes the recommended value "
                   "to its own file; a file sorting after it that sets a lower value must be removed by hand "
                   "(the evidence lists every file that sets the key, in the order they apply)."),
        "role": "nodefix.k8s.pids",
        "tag": "pids",
    },
    "pids.threads_max_low": {
        "severity": "medium",
        "title": "kernel.threads-max caps the number of tasks below the recommended value",
        "remedy": ("kernel.threads-max is sized from RAM at boot; raise it with the pids role "
                   "(pids_threads_max) if the node really needs more tasks, and set podPidsLimit."),
        "role": "nodefix.k8s.pids",
        "tag": "pids",
    },
    "pids.zombie_leaker": {
        "severity": "high",
        "title": "A process leaks zombie children (it never reaps them)",
        "remedy": _ZOMBIE_ADVICE,
        "role": "nodefix.k8s.pids",
        "tag": "zombies",
    },
}


def _read_small(path):
    """Bytes of a small /proc file, or None (one os.open/os.read, no buffering)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_int(path):
    """The first integer of a /proc or /sys file (kernel.pid_max, threads-max); None when absent or not one."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _btime(proc):
    for line in (read_text(os.path.join(proc, "stat")) or "").splitlines():
        if line.startswith("btime "):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def _uptime(proc):
    text = read_text(os.path.join(proc, "uptime"))
    try:
        return float(text.split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def _kernel_threads(proc):
    """Tasks the kernel counts (4th field of /proc/loadavg: ``running/total``)."""
    text = read_text(os.path.join(proc, "loadavg"))
    try:
        return int(text.split()[3].split("/")[1])
    except (AttributeError, IndexError, ValueError):
        return None


def scan(proc):
    """One pass over the ``/proc`` directory ``proc``.

    Returns ``(processes, tasks, zombies)``: the number of processes, the
    number of tasks (sum of their threads) and a dict ``ppid -> [starttime,
    ...]`` of zombies.
    """
    processes = 0
    tasks = 0
    zombies = {}
    try:
        names = os.listdir(proc)
        # relative opens from a directory descriptor skip the path walk per file
        dir_fd = os.open(proc, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return processes, tasks, zombies
    flags = os.O_RDONLY
    try:
        for name in names:
            if not name.isdigit():
                continue
            try:
                fd = os.open(name + "/stat", flags, dir_fd=dir_fd)
            except OSError:
                continue  # the process exited between listdir and open
            try:
                data = os.read(fd, 4096)
            except OSError:
                continue
            finally:
                os.close(fd)
            rp = data.rfind(b")")
            # rest[k] is field k+3 of proc(5): state (3), ppid (4), num_threads (20);
            # rest[18] keeps fields 21- unsplit (starttime, 22, is needed for zombies only)
            rest = data[rp + 2:].split(b" ", 18)
            if rp < 0 or len(rest) < 19:
                continue
            try:
                threads = int(rest[17])
                zombie = (int(rest[1]), int(rest[18].split(b" ", 2)[1])) if rest[0] == b"Z" else None
            except (ValueError, IndexError):
                continue  # not a proc(5) stat line: nothing to count
            processes += 1
            tasks += threads
            if zombie:
                zombies.setdefault(zombie[0], []).append(zombie[1])
    finally:
        os.close(dir_fd)
    return processes, tasks, zombies


def _comm_ppid(data):
    """Command name (field 2) and parent (field 4) from a stat line."""
    lp, rp = data.find(b"("), data.rfind(b")")
    comm = data[lp + 1:rp].decode("utf-8", "replace") if 0 <= lp < rp else None
    try:
        return comm, int(data[rp + 2:].split(None, 2)[1])
    except (ValueError, IndexError):
        return comm, None


def _cmdline(proc, pid, comm):
    data = _read_small("%s/%d/cmdline" % (proc, pid)) or b""
    text = data.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    return text or "[%s]" % comm


def _ns_pid(proc, pid):
    """PID of ``pid`` inside its own PID namespace (last NSpid value)."""
    for line in (read_text("%s/%d/status" % (proc, pid)) or "").splitlines():
        if line.startswith("NSpid:"):
            values = line.split()[1:]
            try:
                return int(values[-1])
            except (IndexError, ValueError):
                return None
    return None


_CGROUP_KEYS = ("", "name=systemd", "pids", "memory", "cpu")


def _unit_of(path):
    for part in reversed([p for p in (path or "").split("/") if p]):
        if part.endswith((".service", ".scope")):
            return part
    return None


def owner(cgroup_text):
    """Cgroup path, systemd unit, pod and container of a process.

    Of the hierarchies listed (unified first, then name=systemd, pids,
    memory, cpu) the path that places the process in kubepods wins (hybrid
    nodes with the cgroupfs driver keep kubepods out of the unified tree),
    then one that names a systemd unit, then the first one.
    """
    cgroups = parse_proc_cgroup(cgroup_text)
    best, best_score = None, None
    for key in _CGROUP_KEYS:
        path = cgroups.get(key)
        if not path:
            continue
        desc = describe_path(path)
        score = (desc["in_kubepods"], _unit_of(path) is not None)
        if best_score is None or score > best_score:
            best, best_score = (path, desc), score
    path, info = best if best else (None, describe_path(None))
    return {
        "cgroup": path,
        "unit": _unit_of(path),
        "pod_uid": info["pod_uid"],
        "container_id": info["container_id"],
        "runtime": info["runtime"],
        "qos": info["qos"],
        "in_kubepods": info["in_kubepods"],
    }


# Where systemd-sysctl (and procps `sysctl --system`) read *.conf, highest
# priority first: a file name found in an earlier directory masks the same
# name in later ones; the surviving files apply in file-name order and a later
# assignment of a key wins. procps reads /etc/sysctl.conf last (Debian links
# it as /etc/sysctl.d/99-sysctl.conf, which is then read once).
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
SYSCTL_CONF = "/etc/sysctl.conf"


def sysctl_key(key):
    """Normalise a sysctl key (``kernel/pid_max`` or ``-kernel.pid_max``) to dotted form."""
    key = key.strip().lstrip("-").strip()
    slash, dot = key.find("/"), key.find(".")
    if slash != -1 and (dot == -1 or slash < dot):
        key = key.replace("/", "\0").replace(".", "/").replace("\0", ".")
    return key


def sysctl_files(root="/", extra=None):
    """The sysctl configuration files in the order they apply (paths as seen on the node).

    ``extra`` (a node path) is counted as if it existed, so a caller can ask
    which files would override a file it is about to write; like any other
    file it is masked by a same-named file in a directory of higher priority.
    """
    extra_dir, extra_name = os.path.split(extra) if extra else (None, None)
    chosen = {}
    for directory in SYSCTL_DIRS:
        try:
            names = os.listdir(root_path(root, directory))
        except OSError:
            names = []
        if directory == extra_dir:
            names = list(names) + [extra_name]
        for name in names:
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = directory + "/" + name
    if extra and extra_dir not in SYSCTL_DIRS and extra_name not in chosen:
        chosen[extra_name] = extra
    ordered = [chosen[name] for name in sorted(chosen)]
    seen = set(os.path.realpath(root_path(root, path)) for path in ordered)
    if os.path.realpath(root_path(root, SYSCTL_CONF)) not in seen:
        ordered.append(SYSCTL_CONF)
    return ordered


def persisted_sysctl(root, key, extra=None):
    """What the next boot sets ``key`` to, and every file that sets it.

    Returns ``{"value": <str or None>, "source": <path or None>,
    "assignments": [{"path", "value"}, ...]}`` (assignments in the order they
    apply; the last one wins). Unreadable files are skipped. With ``extra``
    (see sysctl_files), ``overridden_by`` lists the assignments in files that
    apply after it (all of them when it is masked).
    """
    key = sysctl_key(key)
    files = sysctl_files(root, extra)
    assignments = []
    for path in files:
        text = read_text(root_path(root, path))
        if text is None:
            continue
        for line in text.splitlines():
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            name, value = line.split("=", 1)
            if sysctl_key(name) == key:
                assignments.append({"path": path, "value": value.strip()})
    last = assignments[-1] if assignments else {}
    result = {"value": last.get("value"), "source": last.get("path"), "assignments": assignments}
    if extra:
        position = dict((path, i) for i, path in enumerate(files))
        mine = position.get(extra, -1)
        result["overridden_by"] = [a for a in assignments if a["path"] != extra and position[a["path"]] > mine]
    return result


def _default_pid_max_min():
    machine = os.uname()[4].lower()   # platform.machine() on POSIX, without importing platform (the npd plugin)
    if machine.endswith("64") or machine in ("s390x",):
        return PID_MAX_LIMIT_64
    return PID_MAX_LIMIT_32


# The detector's options (an Ansible argument spec): pids_info's
# argument_spec and node_audit's options.pids, checked by _core.options.
OPTIONS = {
    "usage_percent": {"type": "int", "default": DEFAULTS["usage_percent"]},
    "pid_max_min": {"type": "int"},
    "threads_max_min": {"type": "int", "default": DEFAULTS["threads_max_min"]},
    "sysctl_file": {"type": "path"},
    "zombie_threshold": {"type": "int", "default": DEFAULTS["zombie_threshold"]},
    "zombie_min_age": {"type": "int", "default": DEFAULTS["zombie_min_age"]},
    "max_parents": {"type": "int", "default": DEFAULTS["max_parents"]},
}


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    errors = []
    for name in ("usage_percent", "threads_max_min", "zombie_threshold", "zombie_min_age", "max_parents"):
        if p.get(name) is not None and p[name] < 0:
            errors.append("%s must not be negative (got %d)" % (name, p[name]))
    # the kernel accepts pid_max between 301 and PID_MAX_LIMIT (4194304 on 64-bit): kernel/pid.c
    if p.get("pid_max_min") is not None and not 301 <= p["pid_max_min"] <= 4194304:
        errors.append("pid_max_min must be between 301 and 4194304, the range the kernel accepts for "
                      "kernel.pid_max (got %d)" % p["pid_max_min"])
    if p.get("sysctl_file") and not (p["sysctl_file"].startswith("/") and p["sysctl_file"].endswith(".conf")):
        errors.append("sysctl_file must be an absolute path ending in .conf (got %s)" % p["sysctl_file"])
    return errors


def _limit_findings(o, counted, zombies, pid_max, persisted, threads_max, limit, limited_by, usage):
    """Task usage against the limits, and the limits themselves (live and as persisted for the next boot)."""
    findings = []
    if usage is not None and usage >= o["usage_percent"]:
        findings.append(finding_from(
            FINDINGS, "pids.usage_high", subject=limited_by,
            severity="critical" if usage >= 95 else None,
            evidence={"tasks": counted, "limit": limit, "limited_by": limited_by,
                      "usage_percent": usage, "threshold_percent": o["usage_percent"], "zombies": zombies}))
    pid_max_min = o["pid_max_min"] or _default_pid_max_min()
    if pid_max is not None and pid_max < pid_max_min:
        findings.append(finding_from(
            FINDINGS, "pids.pid_max_low", subject="kernel.pid_max",
            evidence={"pid_max": pid_max, "recommended": pid_max_min}))
    if persisted["value"] is not None and persisted["value"] < pid_max_min:
        findings.append(finding_from(
            FINDINGS, "pids.pid_max_persisted_low", subject=persisted["source"],
            evidence={"persisted": persisted["value"], "source": persisted["source"],
                      "assignments": persisted["assignments"], "live": pid_max, "recommended": pid_max_min}))
    if threads_max is not None and threads_max < o["threads_max_min"]:
        findings.append(finding_from(
            FINDINGS, "pids.threads_max_low", subject="kernel.threads-max",
            evidence={"threads_max": threads_max, "recommended": o["threads_max_min"], "pid_max": pid_max}))
    return findings


def _zombie_parents(zombies, clk_tck, uptime, btime, now):
    """One entry per parent of zombies (count, age of the oldest), most zombies first."""
    parents = []
    for ppid, starts in zombies.items():
        since_boot = min(starts) / float(clk_tck)
        if uptime is not None:
            age = uptime - since_boot
        elif btime is not None:
            age = now - (btime + since_boot)
        else:
            age = None
        started = btime + since_boot if btime is not None else None
        parents.append({"pid": ppid, "zombies": len(starts),
                        "oldest_age_seconds": int(age) if age is not None else None,
                        "oldest_started": (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
                                           if started is not None else None)})
    parents.sort(key=lambda p: (-p["zombies"], p["pid"]))
    return parents


def _judge_parent(proc, parent, o):
    """Who the parent is (command line, namespace pid, pod/unit) and whether it leaks; its finding or None."""
    pid = parent["pid"]
    data = _read_small("%s/%d/stat" % (proc, pid))
    parent["comm"], parent["ppid"] = _comm_ppid(data) if data else (None, None)
    parent["cmdline"] = _cmdline(proc, pid, parent["comm"]) if data else None
    parent["ns_pid"] = _ns_pid(proc, pid)
    parent.update(owner(read_text("%s/%d/cgroup" % (proc, pid))))
    parent["leaker"] = (parent["zombies"] >= o["zombie_threshold"]
                        and (parent["oldest_age_seconds"] is None or parent["oldest_age_seconds"] >= o["zombie_min_age"]))
    parent["advice"] = zombie_advice(parent["ns_pid"])
    if not parent["leaker"]:
        return None
    where = parent["pod_uid"] and "pod %s" % parent["pod_uid"] or parent["unit"] or parent["cgroup"]
    return finding_from(
        FINDINGS, "pids.zombie_leaker",
        subject="pid %d (%s)%s" % (pid, parent["comm"], " in %s" % where if where else ""),
        evidence={"pid": pid, "cmdline": parent["cmdline"], "zombies": parent["zombies"],
                  "oldest_age_seconds": parent["oldest_age_seconds"],
                  "pid1_of_namespace": parent["ns_pid"] == 1, "advice": parent["advice"],
                  "cgroup": parent["cgroup"], "unit": parent["unit"],
                  "pod_uid": parent["pod_uid"], "container_id": parent["container_id"],
                  "threshold": o["zombie_threshold"]})


def check(runner, root="/", **opts):
    """Task usage against kernel.pid_max/threads-max and zombie leakers: one pass over /proc.

    ``opts`` override DEFAULTS; ``clk_tck`` (clock ticks a second) and
    ``now`` (epoch seconds) can be given for tests.
    """
    o = dict(DEFAULTS)
    o.update(dict((k, v) for k, v in opts.items() if v is not None))
    proc = root_path(root, "/proc")
    pid_max = read_int(os.path.join(proc, "sys/kernel/pid_max"))
    persisted = persisted_sysctl(root, "kernel.pid_max", extra=o.get("sysctl_file"))
    persisted["value"] = int_or_none(persisted["value"])
    threads_max = read_int(os.path.join(proc, "sys/kernel/threads-max"))

    processes, tasks, zombies = scan(proc)
    kernel_tasks = _kernel_threads(proc)
    counted = max(tasks, kernel_tasks or 0)
    limits = [(v, n) for v, n in ((pid_max, "kernel.pid_max"), (threads_max, "kernel.threads-max")) if v]
    limit, limited_by = min(limits) if limits else (None, None)
    usage = round(100.0 * counted / limit, 2) if limit else None
    findings = _limit_findings(o, counted, sum(len(v) for v in zombies.values()), pid_max, persisted,
                               threads_max, limit, limited_by, usage)

    parents = _zombie_parents(zombies, o.get("clk_tck") or os.sysconf("SC_CLK_TCK"), _uptime(proc), _btime(proc),
                              o.get("now") or time.time())
    for parent in parents[:o["max_parents"]]:
        leak = _judge_parent(proc, parent, o)
        if leak:
            findings.append(leak)

    return {
        "processes": processes,
        "tasks": counted,
        "tasks_counted": tasks,
        "tasks_kernel": kernel_tasks,
        "pid_max": pid_max,
        "pid_max_persisted": persisted,
        "threads_max": threads_max,
        "limit": limit,
        "limited_by": limited_by,
        "usage_percent": usage,
        "zombies": sum(len(v) for v in zombies.values()),
        "zombie_parents": parents[:o["max_parents"]],
        "zombie_parents_total": len(parents),
        "findings": findings,
    }
