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

Each source is bounded (the newest ``source_bytes`` of a journal - its tail, read streaming from
the pipe (``SubprocessRunner.run_tail``), so a journal of any size costs the bound, not its size -
and the first of a file), the whole bundle too (``total_bytes``: sources past it are left out and
named), and each command has a deadline. Each source's state is named in ``states`` (kept, empty -
journalctl's ``-- No entries --`` or ``No journal files were found`` -, unreadable, absent, left
out) with the reason, and a missing one in ``missing``: the bundle never fails because a source is
absent. When the journal has no kernel messages, the kernel's log is ``dmesg --ctime``.

Every text is redacted (``_core.redact``) before it enters the bundle: registry passwords, tokens,
proxy URLs' passwords and the like never leave the node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact
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


NO_ENTRIES = ("-- No entries --", "No journal files were found")


def _tail(text, limit):
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text, False
    return data[-limit:].decode("utf-8", "replace").split("\n", 1)[-1], True


def _last_line(err):
    err = err.strip()
    return err.splitlines()[-1][:200] if err else ""


def _command(argv, runner_for, limit):
    """One command's output, read streaming (its newest ``limit`` bytes): (source or None, state, why).
    state: ``kept``, ``empty`` (ran, nothing to keep: no output, journalctl's ``-- No entries --`` or
    ``No journal files were found``) or ``unreadable`` (not installed, no answer in time, failed)."""
    runner = runner_for()
    binary = runner.bin(argv[0])
    if binary is None:
        return None, "unreadable", "%s is not installed" % argv[0]
    rc, out, err, total = runner.run_tail([binary] + argv[1:], limit)
    if rc == SubprocessRunner.TIMED_OUT:
        return None, "unreadable", "%s did not answer in time" % argv[0]
    said = [m for m in NO_ENTRIES if m in out[-200:] or m in err]
    body = any(line.strip() and line.strip() not in NO_ENTRIES for line in out.splitlines())
    if said and not body:
        return None, "empty", "%s: %s" % (" ".join(argv), said[0])
    if rc != 0:
        return None, "unreadable", "%s: rc %s, %s" % (" ".join(argv), rc, _last_line(err) or "no output")
    if not body:
        return None, "empty", "%s: no output" % " ".join(argv)
    text, cut = _tail(out, limit)
    if total > len(out.encode("utf-8", "surrogateescape")) and not cut:
        text, cut = text.split("\n", 1)[-1], True   # the stream was cut: its first line is a part of one
    text = redact.redact_text(text)
    return {"argv": argv, "text": text, "truncated": cut,
            "bytes": len(text.encode("utf-8", "surrogateescape"))}, "kept", None


def commands(units=UNITS, lines=JOURNAL_LINES, since=None):
    """(name, argv) of the bundle's commands, in order; the kernel's log has a fallback (KERNEL_FALLBACK)."""
    window = ["--since", since] if since else ["-b"]
    common = ["-o", "short-iso", "--no-pager", "--lines", str(lines)]
    out = [("journal-%s" % u, ["journalctl"] + window + ["-u", u] + common) for u in units]
    out.append(("kernel", ["journalctl", "-k"] + window + common))
    out.append(("failed-units", ["systemctl", "list-units", "--state=failed", "--no-pager", "--plain", "--no-legend"]))
    return out


KERNEL_FALLBACK = ["dmesg", "--ctime"]


def _run_commands(bundle, room, units, since, runner_for, source_bytes):
    for name, argv in commands(units, since=since):
        source, state, why = _command(argv, runner_for, source_bytes)
        if source is None and name == "kernel":
            # the journal has no kernel messages (none kept, or not readable): the kernel's own ring buffer
            fallback, state2, why2 = _command(KERNEL_FALLBACK, runner_for, source_bytes)
            why = "%s; %s" % (why, "taken from %s" % " ".join(KERNEL_FALLBACK) if fallback else why2)
            source, state = fallback, state2 if fallback is None else "kept"
        if source is not None and not room(source["bytes"], name):
            source, state, why = None, "left out", bundle["missing"][-1]["why"]
        elif source is None:
            bundle["missing"].append({"source": name, "why": why})
        else:
            bundle["sources"][name] = source
        bundle["states"][name] = dict({"state": state}, **({"why": why} if why else {}))


def collect(root="/", files=(), findings=None, units=UNITS, source_bytes=SOURCE_BYTES, total_bytes=TOTAL_BYTES,
            seconds=COMMAND_SECONDS, runner_for=None, now=None, since=None):
    """The bundle: {collected, sources, files, findings, missing, states, bytes, truncated}, every text
    redacted (_core.redact). Commands run only on the node itself (``root`` ``/``): a node tree mounted
    elsewhere has no journal of its own. ``states`` names each source's state (kept, empty, unreadable,
    left out) and why."""
    runner_for = runner_for or (lambda: SubprocessRunner(deadline=time.monotonic() + seconds))
    stamp = datetime.datetime.fromtimestamp(now if now is not None else time.time(), datetime.timezone.utc)
    bundle = {"collected": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "sources": {}, "files": {}, "missing": [],
              "states": {}, "findings": redact.redact(list(findings or [])), "bytes": 0, "truncated": False}

    def room(size, name):
        if bundle["bytes"] + size > total_bytes:
            bundle["missing"].append({"source": name, "why": "left out: the bundle's %d bytes would pass its bound %d"
                                      % (bundle["bytes"] + size, total_bytes)})
            bundle["truncated"] = True
            return False
        bundle["bytes"] += size
        return True

    if root == "/":
        _run_commands(bundle, room, units, since, runner_for, source_bytes)
    else:
        why = "the node tree at %s is not the running node" % root
        bundle["missing"].append({"source": "commands", "why": why})
        bundle["states"]["commands"] = {"state": "unreadable", "why": why}
    for path in files:
        try:
            text = core_paths.read_utf8(core_paths.root_path(root, path), max_bytes=source_bytes, what="file")
        except core_paths.FileSafetyError as exc:
            text, why = None, exc.msg
        else:
            why = "absent"
        if text is None:
            bundle["missing"].append({"source": path, "why": why})
            bundle["states"][path] = {"state": "unreadable" if why != "absent" else "absent", "why": why}
            continue
        text = redact.redact_text(text)
        if room(len(text.encode("utf-8", "surrogateescape")), path):
            bundle["files"][path] = text
            bundle["states"][path] = {"state": "kept"}
        else:
            bundle["states"][path] = {"state": "left out", "why": bundle["missing"][-1]["why"]}
    return bundle
