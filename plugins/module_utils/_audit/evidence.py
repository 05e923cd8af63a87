# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Evidence kept before a disruptive action: what a drain, a restart or a reboot would destroy.

A reboot (or a containerd/kubelet restart) wipes the state that explains a failure; auto-repair
tools are criticised for exactly that. Before remediate disrupts a node it reads, read-only:

- the journal of the kubelet and containerd units since boot, and the kernel's (``journalctl``;
  ``dmesg`` when the journal has no kernel messages),
- the failed units (``systemctl list-units --state=failed``),
- the files the fixes will change (``files_to_keep``: containerd's config, runsc's shim config,
  the kubelet's unit files, environment files, config file and drop-ins, from the before-audit),
- the node's findings (from the before-audit).

Each source is bounded (the newest ``source_bytes`` of a journal - its tail - and the first of a
file), the whole bundle too (``total_bytes``: sources past it are left out and named), and each
command has a deadline. A source that is missing or cannot be read is named in ``missing`` with the
reason: the bundle never fails because a source is absent.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import SubprocessRunner

SOURCE_BYTES = 512 * 1024
TOTAL_BYTES = 4 * 1024 * 1024
COMMAND_SECONDS = 20
JOURNAL_LINES = 20000
UNITS = ("kubelet", "containerd")


def files_to_keep(audit, roles):
    """The node files the fixes of ``roles`` will change, read from the before-audit's facts."""
    checks = (audit or {}).get("checks") or {}
    roles = set(str(r).rsplit(".", maxsplit=1)[-1] for r in roles or [])
    paths = []
    if roles & {"containerd", "gvisor"}:
        paths.append((checks.get("containerd") or {}).get("config_path"))
    if "gvisor" in roles:
        paths.append(((checks.get("gvisor") or {}).get("shim_config") or {}).get("path"))
    if "kubelet" in roles:
        kube = (checks.get("kubelet") or {}).get("kubelet") or {}
        paths += list(kube.get("unit_files") or []) + list(kube.get("env_files") or [])
        paths += [kube.get("config_path")] + list(kube.get("dropins") or [])
    return sorted(set(p for p in paths if isinstance(p, str) and p.startswith("/")))


def _tail(text, limit):
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text, False
    return data[-limit:].decode("utf-8", "replace").split("\n", 1)[-1], True


def _command(name, argv, runner_for, limit):
    """One command's output as a source, or (None, why)."""
    runner = runner_for()
    binary = runner.bin(argv[0])
    if binary is None:
        return None, "%s is not installed" % argv[0]
    rc, out, err = runner.run([binary] + argv[1:], check=False)
    if rc == SubprocessRunner.TIMED_OUT:
        return None, "%s did not answer in time" % argv[0]
    if rc != 0 or not out.strip():
        return None, "%s: rc %s%s" % (" ".join(argv), rc, (", " + err.strip().splitlines()[-1][:200]) if err.strip()
                                      else ", no output")
    text, cut = _tail(out, limit)
    return {"argv": argv, "text": text, "truncated": cut, "bytes": len(text.encode("utf-8", "replace"))}, None


def commands(units=UNITS, lines=JOURNAL_LINES):
    """(name, argv) of the bundle's commands, in order; the kernel's log has a fallback."""
    out = [("journal-%s" % u, ["journalctl", "-b", "-u", u, "-o", "short-iso", "--no-pager", "-n", str(lines)])
           for u in units]
    out.append(("kernel", ["journalctl", "-k", "-b", "-o", "short-iso", "--no-pager", "-n", str(lines)]))
    out.append(("failed-units", ["systemctl", "list-units", "--state=failed", "--no-pager", "--plain", "--no-legend"]))
    return out


def collect(root="/", files=(), findings=None, units=UNITS, source_bytes=SOURCE_BYTES, total_bytes=TOTAL_BYTES,
            seconds=COMMAND_SECONDS, runner_for=None, now=None):
    """The bundle: {collected, sources, files, findings, missing, bytes, truncated}. Commands run only on the
    node itself (``root`` ``/``): a node tree mounted elsewhere has no journal of its own."""
    runner_for = runner_for or (lambda: SubprocessRunner(deadline=time.monotonic() + seconds))
    stamp = datetime.datetime.fromtimestamp(now if now is not None else time.time(), datetime.timezone.utc)
    bundle = {"collected": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "sources": {}, "files": {}, "missing": [],
              "findings": list(findings or []), "bytes": 0, "truncated": False}

    def room(size, name):
        if bundle["bytes"] + size > total_bytes:
            bundle["missing"].append({"source": name, "why": "left out: the bundle's %d bytes would pass its bound %d"
                                      % (bundle["bytes"] + size, total_bytes)})
            bundle["truncated"] = True
            return False
        bundle["bytes"] += size
        return True

    if root == "/":
        for name, argv in commands(units):
            source, why = _command(name, argv, runner_for, source_bytes)
            if source is None and name == "kernel":
                source, why = _command(name, ["dmesg", "--ctime"], runner_for, source_bytes)
            if source is None:
                bundle["missing"].append({"source": name, "why": why})
            elif room(source["bytes"], name):
                bundle["sources"][name] = source
    else:
        bundle["missing"].append({"source": "commands", "why": "the node tree at %s is not the running node" % root})
    for path in files:
        try:
            text = core_paths.read_utf8(core_paths.root_path(root, path), max_bytes=source_bytes, what="file")
        except core_paths.FileSafetyError as exc:
            bundle["missing"].append({"source": path, "why": exc.msg})
            continue
        if text is None:
            bundle["missing"].append({"source": path, "why": "absent"})
        elif room(len(text.encode("utf-8", "surrogateescape")), path):
            bundle["files"][path] = text
    return bundle
