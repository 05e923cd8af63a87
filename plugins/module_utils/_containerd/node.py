# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""What runs on the node: the containerd daemon (its process, start time and the config it was started
with) and runc (``runc_state``, the one reader of runc: path, version, the CPU quota rounding bug)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.procfs import pid_files
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.config import DEFAULT_CONFIG
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.version import parse_runc_version, runc_has_quota_bug


def daemon_process(root="/"):
    """The running containerd: {pid, argv, started (epoch seconds)} or None.

    ``started`` comes from /proc/<pid>/stat (start time in clock ticks after
    boot) plus /proc/stat ``btime``; the role compares it with the ctime of
    containerd's files to tell whether the files on disk are the ones the
    daemon runs with.
    """
    proc = root_path(root, "/proc")
    for number, comm in pid_files(proc, "comm"):
        if (comm or "").strip() != "containerd":
            continue
        pid = str(number)
        argv = [a for a in (read_text(os.path.join(proc, pid, "cmdline"), "") or "").split("\0") if a]
        started = None
        stat = read_text(os.path.join(proc, pid, "stat"), "") or ""
        btime = None
        for line in (read_text(os.path.join(proc, "stat"), "") or "").splitlines():
            if line.startswith("btime "):
                btime = int(line.split()[1])
        fields = stat.rsplit(")", 1)[-1].split()
        if btime is not None and len(fields) > 19:
            try:
                ticks = os.sysconf("SC_CLK_TCK")
            except (ValueError, OSError, AttributeError):
                ticks = 100
            started = btime + int(fields[19]) / float(ticks)
        return {"pid": int(pid), "argv": argv, "started": started}
    return None


_SCAN = object()


def find_config_path(root="/", daemon=_SCAN):
    """Config file the running containerd uses (``--config``/``-c``), else the default. ``daemon``: what
    ``daemon_process`` already returned (each call reads every process's ``comm``)."""
    daemon = daemon_process(root) if daemon is _SCAN else daemon
    if daemon is None:
        return DEFAULT_CONFIG, "default"
    argv = daemon["argv"]
    for i, arg in enumerate(argv):
        if arg in ("--config", "-c") and i + 1 < len(argv):
            return argv[i + 1], "cmdline"
        if arg.startswith("--config="):
            return arg.split("=", 1)[1], "cmdline"
    return DEFAULT_CONFIG, "default"


def runc_state(runner, root="/", runc_binary=None, runtimes=()):
    """The one reader of runc: path, version and whether it has the CPU quota rounding bug.

    ``runc_binary`` wins; else the ``BinaryName`` of containerd's runc runtime
    (``runtimes`` as ``list_runtimes`` gives them); else ``runc`` on the PATH.
    Values are None when unknown.
    """
    state = {"binary": None, "version": None, "version_info": None, "cpu_quota_rounding_bug": None}
    name = runc_binary
    if not name:
        for rt in runtimes:
            if rt["name"] == "runc" and rt["options"].get("BinaryName"):
                name = rt["options"]["BinaryName"]
        name = name or "runc"
        if os.path.isabs(name):
            name = root_path(root, name)
    path = runner.bin(name) if runner is not None else None
    if not path:
        return state
    state["binary"] = path
    # One run per binary per audit: the containerd and cpu_quota detectors both
    # need it, and under node-problem-detector's 5 s timeout a Go binary's start
    # is not free. The runner's ``memo`` lives as long as the audit.
    memo = getattr(runner, "memo", None)
    key = ("runc --version", path)
    if memo is not None and key in memo:
        rc, out = memo[key]
    else:
        rc, out, _err = runner.run([path, "--version"], check=False)
        if memo is not None:
            memo[key] = (rc, out)
    info = parse_runc_version(out) if rc == 0 else None
    if info is not None:
        state["version"] = info["version"]
        state["version_info"] = info
        state["cpu_quota_rounding_bug"] = runc_has_quota_bug(info)
    return state
