# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""A command run the way ``subprocess.Popen(...).communicate(timeout=...)`` runs it, without ``subprocess``.

The node-problem-detector plugin starts a fresh Python for every rule; importing ``subprocess`` (with
``threading``, ``locale``, ``selectors``, ``signal`` and ``contextlib``) was a tenth of the first rule's CPU,
more than the few commands it runs. ``run`` starts the command with ``os.posix_spawn`` (Python 3.8+) as
``SubprocessRunner`` asked ``Popen`` to: stdin from ``/dev/null``, stdout and stderr on pipes read until both
close, every other descriptor closed (``close_fds``), ``SIGPIPE`` and ``SIGXFSZ`` back to their defaults
(Python ignores them; ``restore_signals``), in a new session when there is a deadline, and at the deadline the
session's process group killed (``os.killpg``) and the pipes read to their end. The exit code is Popen's
``returncode`` (minus the signal's number for a command a signal ended); a command that cannot be started
raises the same ``OSError`` Popen raises.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import select
import time

try:
    import _signal as _signals   # the C module: what ``signal`` wraps in enums, for three numbers
except ImportError:  # pragma: no cover - an interpreter without it
    import signal as _signals


def available(argv, data=None):
    """True when ``run`` can start ``argv``: an absolute path, no input to write, and ``os.posix_spawn``."""
    return data is None and hasattr(os, "posix_spawn") and bool(argv) and str(argv[0]).startswith("/")


def _inherited(keep):
    """The descriptors above 2 a command would inherit (all but ``keep``): Popen's ``close_fds`` closes them."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    fds = []
    for name in names:
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                if os.get_inheritable(fd):
                    fds.append(fd)
            except OSError:   # the listing's own descriptor, closed by now
                pass
    return fds


def _exit_code(status):
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _drain(pid, fds, deadline):
    """Read ``fds`` ({fd: [chunks]}) until every one is closed; at ``deadline`` kill the process group of ``pid``
    (once) and go on reading to the end. True when it was killed."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    left, killed = len(fds), False
    while left:
        wait = None
        if deadline is not None and not killed:
            wait = deadline - time.monotonic()
            if wait <= 0:
                try:
                    os.killpg(pid, _signals.SIGKILL)   # the command and whatever it started
                except OSError:   # the group ended at this very moment
                    pass
                killed = True
                continue
        for fd, _event in poller.poll(None if wait is None else int(wait * 1000) + 1):
            chunk = os.read(fd, 65536)
            if chunk:
                fds[fd].append(chunk)
            else:
                poller.unregister(fd)
                left -= 1
    return killed


def run(argv, env, timeout=None):
    """Run ``argv`` (``available(argv)``); (exit code, stdout bytes, stderr bytes, killed at the deadline)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        try:
            actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                       (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
            actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited((out_w, err_w))]
            pid = os.posix_spawn(argv[0], list(argv), env, file_actions=actions, setsid=timeout is not None,
                                 setsigdef=(_signals.SIGPIPE, _signals.SIGXFSZ))
        finally:
            os.close(out_w)
            os.close(err_w)
        chunks = {out_r: [], err_r: []}
        killed = _drain(pid, chunks, None if timeout is None else time.monotonic() + timeout)
    finally:
        os.close(out_r)
        os.close(err_r)
    _pid, status = os.waitpid(pid, 0)
    return _exit_code(status), b"".join(chunks[out_r]), b"".join(chunks[err_r]), killed
