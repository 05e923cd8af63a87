# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""How the collection runs node commands.

- ``Runner``: argv-list commands through an AnsibleModule (``get_bin_path``, a C
  locale); a failing required command raises ``CommandError`` (rc, stdout, stderr),
  which the module turns into ``fail_json`` and ``node_audit`` into
  ``audit.check_failed``.
- ``SubprocessRunner``: the same interface without Ansible (the NPD plugin, the
  mount-units timer), with a deadline that kills a command and what it started
  (``_core.spawn`` on Python 3.8+, ``subprocess`` otherwise and for a command's input);
  ``run_tail`` reads a command's output streaming and keeps only its newest bytes
  (a journal of any size costs the bound, not its size).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core import spawn
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import CommandError, NodefixError


C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"}

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


def _which(name, path):
    """shutil.which(name, path=path) on POSIX, without importing shutil (and its compression modules): the
    node-problem-detector plugin starts this module every tick."""
    for folder in path.split(os.pathsep):
        candidate = os.path.join(folder, name)
        if os.path.exists(candidate) and os.access(candidate, os.F_OK | os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


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
            found = _which(name, path)
        if found is None and required:
            raise self.error("Required binary %s was not found (PATH, %s)" % (name, ", ".join(NODE_BIN_DIRS)))
        return found

    def run(self, argv, check=True, data=None, msg=None):
        env = dict(os.environ, **C_LOCALE)
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and left <= 0:
            rc, out, err = self.TIMED_OUT, "", "not run: no time left before the deadline"
        else:
            # _core.spawn where it can (no subprocess import: the node-problem-detector plugin), else Popen; the same
            # command, descriptors, session and answer either way
            try:
                rc, out, err, killed = (spawn.run(argv, env, left) if spawn.available(argv, data)
                                        else self._popen(argv, env, data, left))
            except NotImplementedError:   # a C library without POSIX_SPAWN_SETSID (glibc < 2.26): nothing started
                rc, out, err, killed = self._popen(argv, env, data, left)
            if killed:
                rc = self.TIMED_OUT
                err = err + ("\n%s: killed after %.1f s (no answer before the deadline)"
                             % (os.path.basename(argv[0]), left)).encode("utf-8")
            out = out.decode("utf-8", "surrogateescape")
            err = err.decode("utf-8", "surrogateescape")
        if check and rc != 0:
            raise self.error(msg or "Command failed: %s" % " ".join(argv), cmd=argv, rc=rc, stdout=out, stderr=err)
        return rc, out, err

    @staticmethod
    def _popen(argv, env, data, left):
        """(rc, stdout bytes, stderr bytes, killed at the deadline) of ``argv`` through subprocess.Popen."""
        import signal  # pylint: disable=import-outside-toplevel
        import subprocess  # pylint: disable=import-outside-toplevel
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                start_new_session=left is not None)
        try:
            out, err = proc.communicate(data.encode("utf-8") if data is not None else None, timeout=left)
            return proc.returncode, out, err, False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and whatever it started
            try:
                out, err = proc.communicate(timeout=spawn.GRACE)
            except subprocess.TimeoutExpired:   # a descendant that left the group holds the pipes open
                proc.stdout.close()
                proc.stderr.close()
                proc.wait()
                out, err = b"", b""
            return proc.returncode, out, err, True

    CHUNK = 64 * 1024
    STDERR_BYTES = 16 * 1024

    def run_tail(self, argv, limit):
        """Run ``argv`` and keep the newest ``limit`` bytes of its stdout, read from the pipe as it comes
        (memory: the bound plus one chunk, whatever the output's size) and the first STDERR_BYTES of its
        stderr. Returns (rc, tail, err, total bytes read); rc TIMED_OUT when the deadline passed."""
        import selectors  # pylint: disable=import-outside-toplevel
        import signal  # pylint: disable=import-outside-toplevel
        import subprocess  # pylint: disable=import-outside-toplevel
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and left <= 0:
            return self.TIMED_OUT, "", "not run: no time left before the deadline", 0
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(os.environ, **C_LOCALE), start_new_session=True)
        out, err, total, timed_out = bytearray(), bytearray(), 0, False
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, out)
            sel.register(proc.stderr, selectors.EVENT_READ, err)
            while sel.get_map():
                wait = None if self.deadline is None else self.deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    timed_out = True
                    break
                for key, _mask in sel.select(wait):
                    data = os.read(key.fd, self.CHUNK)
                    if not data:
                        sel.unregister(key.fileobj)
                    elif key.data is out:
                        total += len(data)
                        out += data
                        if len(out) > limit:
                            del out[:len(out) - limit]
                    elif len(err) < self.STDERR_BYTES:
                        err += data[:self.STDERR_BYTES - len(err)]
        if timed_out:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and whatever it started
        proc.stdout.close()
        proc.stderr.close()
        try:
            rc = proc.wait(None if self.deadline is None else max(self.deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:  # its output closed, the command still running
            os.killpg(proc.pid, signal.SIGKILL)
            rc, timed_out = proc.wait(), True
        if timed_out:
            rc = self.TIMED_OUT
            err += ("\n%s: killed (no answer before the deadline)" % os.path.basename(argv[0])).encode("utf-8")
        return rc, out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape"), total
