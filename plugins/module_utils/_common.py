# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Shared plumbing for nodefix.k8s modules.

- ``Runner``: argv-list commands with a C locale and ``get_bin_path``; a failing
  required command raises ``CommandError`` (rc, stdout, stderr), which the
  module turns into ``fail_json`` and ``node_audit`` into ``audit.check_failed``.
- ``NodefixError``: the one typed error of the collection's module_utils.
- ``make_finding``: the one shape every detector returns.
- Writing node files: see ``_fileio.py`` (symlinks followed, all-or-nothing, pruned backups).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import signal
import subprocess
import time

from ansible_collections.nodefix.k8s.plugins.module_utils import _fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._errors import CommandError, NodefixError

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"}

SEVERITIES = ("critical", "high", "medium", "low", "info")

# Directories searched in addition to PATH for node binaries (sbin is often
# missing from PATH when Ansible connects as a non-login user).
NODE_BIN_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/opt/bin"]


class Runner(object):
    """Run node commands the same way in every module of the collection."""

    def __init__(self, module):
        self.module = module
        # read-only command results shared by the detectors of one run (see _containerd.runc_state)
        self.memo = {}

    def bin(self, name, required=False, opt_dirs=None):
        """Absolute path of ``name`` (or an absolute path given as-is)."""
        if os.path.isabs(name):
            if os.path.isfile(name) and os.access(name, os.X_OK):
                return name
            if required:
                raise NodefixError("Required binary %s is missing, not a file or not executable" % name)
            return None
        dirs = list(opt_dirs or []) + NODE_BIN_DIRS
        path = self.module.get_bin_path(name, required=False, opt_dirs=dirs)
        if path is None and required:
            raise NodefixError("Required binary %s was not found in PATH or %s" % (name, ", ".join(dirs)))
        return path

    def run(self, argv, check=True, data=None, msg=None):
        """Run ``argv`` (a list) with a C locale; return (rc, stdout, stderr)."""
        self.module.run_command_environ_update = dict(C_LOCALE)
        rc, out, err = self.module.run_command(argv, data=data, check_rc=False)
        if check and rc != 0:
            raise CommandError(msg or "Command failed: %s" % " ".join(argv), cmd=argv, rc=rc, stdout=out, stderr=err)
        return rc, out, err


class SubprocessRunner(object):
    """The ``Runner`` interface (``bin``, ``run``) without Ansible, for the node-side entry points
    (the mount-units timer, the node-problem-detector plugin)."""

    error = CommandError
    # what a command killed at the deadline returns (coreutils' timeout(1) says 124 too)
    TIMED_OUT = 124

    def __init__(self, deadline=None):
        """``deadline``: a ``time.monotonic()`` instant; a command still running then is killed (its
        process group) and answers rc TIMED_OUT - a caller under another program's timeout (the
        node-problem-detector plugin) reports a hung command instead of being killed itself."""
        self.memo = {}
        self.deadline = deadline

    def bin(self, name, required=False, opt_dirs=None):
        if os.path.isabs(name):
            found = name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        else:
            path = os.pathsep.join([os.environ.get("PATH", "")] + list(opt_dirs or []) + NODE_BIN_DIRS)
            found = shutil.which(name, path=path)
        if found is None and required:
            raise self.error("Required binary %s was not found (PATH, %s)" % (name, ", ".join(NODE_BIN_DIRS)))
        return found

    def run(self, argv, check=True, data=None, msg=None):
        env = dict(os.environ, **C_LOCALE)
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and left <= 0:
            rc, out, err = self.TIMED_OUT, "", "not run: no time left before the deadline"
        else:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    start_new_session=left is not None)
            try:
                out, err = proc.communicate(data.encode("utf-8") if data is not None else None, timeout=left)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the command and whatever it started
                out, err = proc.communicate()
                rc = self.TIMED_OUT
                err = err + ("\n%s: killed after %.1f s (no answer before the deadline)"
                             % (os.path.basename(argv[0]), left)).encode("utf-8")
            out = out.decode("utf-8", "surrogateescape")
            err = err.decode("utf-8", "surrogateescape")
        if check and rc != 0:
            raise self.error(msg or "Command failed: %s" % " ".join(argv), cmd=argv, rc=rc, stdout=out, stderr=err)
        return rc, out, err


def make_finding(fid, severity, title, evidence=None, remedy=None, fix_role=None, fix_tag=None, subject=None):
    """Return one finding in the collection's shape.

    ``fid`` is a stable dotted identifier documented in docs/findings.md,
    ``subject`` optionally names the object the finding is about (a sandbox
    id, a unit, a cgroup) so that one id can be reported several times.
    """
    if severity not in SEVERITIES:
        raise ValueError("unknown severity %r" % (severity,))
    return {
        "id": fid,
        "severity": severity,
        "title": title,
        "subject": subject,
        "evidence": evidence or {},
        "remedy": remedy,
        "fix": {"role": fix_role, "tag": fix_tag},
    }


def finding_from(registry, fid, evidence=None, subject=None, title=None, severity=None):
    """Build a finding from a registry entry ``registry[fid]``.

    A registry maps finding ids to dicts with ``severity``, ``title``,
    ``remedy``, ``role`` and ``tag``; each detector module_utils file keeps
    its own registry (``FINDINGS``) so that docs/findings.md can be checked
    against the code.
    """
    entry = registry[fid]
    return make_finding(
        fid,
        severity or entry["severity"],
        title or entry["title"],
        evidence=evidence,
        remedy=entry.get("remedy"),
        fix_role=entry.get("role"),
        fix_tag=entry.get("tag"),
        subject=subject,
    )


def at_or_above(threshold):
    """The severities at ``threshold`` or worse; () for ``never``/``none``/None.

    The one severity ladder of the collection: node_audit's and
    audit_report's ``fail_on``, the JUnit report and the
    ``nodefix.k8s.findings_at_or_above`` filter (roles) all use it.
    """
    if threshold in (None, "never", "none"):
        return ()
    if threshold not in SEVERITIES:
        raise ValueError("severity %r is not one of %s (or never)" % (threshold, ", ".join(SEVERITIES)))
    return SEVERITIES[:SEVERITIES.index(threshold) + 1]


def findings_at_or_above(findings, threshold, ignore=()):
    """The findings at ``threshold`` or worse, leaving out the ids in ``ignore``."""
    levels = at_or_above(threshold)
    return [f for f in findings if f.get("severity") in levels and f.get("id") not in ignore]


def worst_severity(findings):
    """The most severe level among ``findings`` (None when there are none)."""
    levels = [f["severity"] for f in findings]
    for level in SEVERITIES:
        if level in levels:
            return level
    return None


def read_text(path, default=None):
    """File contents as text, or ``default`` when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "surrogateescape")
    except (IOError, OSError):
        return default


def root_path(root, path, follow_last=True):
    """Where the node's absolute ``path`` is on this machine, for reading: ``path``
    itself on a node (``root`` ``/``); under another root (a node tree mounted at
    ``/host``, a test tree) resolved the way the node sees it, symlinks with
    absolute targets and ``..`` kept inside ``root`` (``_fileio.in_root``, the one
    resolver). ``follow_last=False`` leaves a symlink in the last component as it
    is (to lstat it: a dangling link still exists). A symlink loop gives the plain
    join, which the read then fails on."""
    if not root or root == "/":
        return path
    try:
        return _fileio.in_root(root, path, follow_last=follow_last)
    except _fileio.FileSafetyError:
        return os.path.join(root, path.lstrip("/"))


def file_diff(path, before, after):
    """The ``diff`` return value for one file (Ansible's before/after form)."""
    return {
        "before": before if before is not None else "",
        "after": after,
        "before_header": "%s (before)" % path,
        "after_header": "%s (after)" % path,
    }


# What no report format can carry as is: C0 controls but tab and newline (invalid in XML 1.0,
# terminal escapes in Markdown and text), DEL, lone surrogates (not encodable as UTF-8) and the
# XML non-characters. A pod controls its process name, so a finding's subject can hold any of them.
_UNPRINTABLE = re.compile(u"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
MAX_DEPTH = 32


def _escape_char(match):
    code = ord(match.group())
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def printable(value, depth=0):
    """``value`` with every string made safe for every format (unprintable characters written as
    ``\\xNN``/``\\uNNNN``) and nesting cut at MAX_DEPTH levels (deeper values become a string saying
    so): JSON, XML, HTML, Markdown and the Prometheus text stay valid whatever a node reported."""
    if isinstance(value, str):
        return _UNPRINTABLE.sub(_escape_char, value)
    if depth >= MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        return "(nested more than %d levels deep: left out)" % MAX_DEPTH
    if isinstance(value, dict):
        return dict((printable(k, depth + 1) if isinstance(k, str) else k, printable(v, depth + 1))
                    for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [printable(v, depth + 1) for v in value]
    return value


_MOUNTINFO_OCTAL = re.compile(r"\\([0-7]{3})")


def mountinfo_entries(text):
    """[(mount point, fs type, source)] of a ``/proc/self/mountinfo`` text, octal escapes decoded
    (proc(5): fields separated by single spaces, the mount point fifth; fs type and source after the
    `` - `` separator, None when a line has none). The one parser of that file."""
    entries = []
    for line in (text or "").splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        _left, sep, right = line.partition(" - ")
        tail = right.split(" ") if sep else []
        entries.append(tuple(_MOUNTINFO_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), f) if f is not None else None
                             for f in (fields[4], tail[0] if tail else None, tail[1] if len(tail) > 1 else None)))
    return entries
