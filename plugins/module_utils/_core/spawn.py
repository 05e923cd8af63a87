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
(Python ignores them; ``restore_signals``), in a new session when there is a deadline, and at the deadline - while
it writes, or after it closed its output and runs on - the session's process group killed (``os.killpg``) and the
pipes read for at most ``GRACE`` seconds more (a descendant that left the group may hold them open for good).
An exception while it runs kills and reaps it. Where that cannot be done as Popen does it (standard descriptors
closed, SIGCHLD ignored) ``available`` says no and the runner uses Popen. The exit code is Popen's
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
    """True when ``run`` can start ``argv``: an absolute path, no input to write, ``os.posix_spawn``, this process's
    standard descriptors open (a pipe must not land on 0-2) and SIGCHLD not ignored (the exit code is waited for)."""
    if data is not None or not hasattr(os, "posix_spawn") or not argv or not str(argv[0]).startswith("/"):
        return False
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return _signals.getsignal(_signals.SIGCHLD) != _signals.SIG_IGN


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


# after the kill, how long the pipes are read for what the command wrote before it (a descendant that left the
# process group may hold them open for good)
GRACE = 2.0


def _kill(pid):
    try:
        os.killpg(pid, _signals.SIGKILL)   # the command and whatever it started
    except OSError:   # the group ended at this very moment
        pass


def _drain(pid, fds, deadline):
    """Read ``fds`` ({fd: [chunks]}) until every one is closed; at ``deadline`` kill the process group of ``pid``
    (once) and read on for at most GRACE seconds. True when it was killed."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    left, killed, stop = len(fds), False, None
    while left:
        wait = None
        now = time.monotonic()
        if deadline is not None and not killed and now >= deadline:
            _kill(pid)
            killed, stop = True, now + GRACE
        if killed:
            wait = stop - now
            if wait <= 0:
                break
        elif deadline is not None:
            wait = deadline - now
        for fd, _event in poller.poll(None if wait is None else int(wait * 1000) + 1):
            chunk = os.read(fd, 65536)
            if chunk:
                fds[fd].append(chunk)
            else:
                poller.unregister(fd)
                left -= 1
    return killed


def _reap(pid, deadline, killed):
    """The exit status of ``pid``: its output is closed, but it may still run (``exec >/dev/null; sleep``) - at the
    deadline its process group is killed as Popen's caller did. (status, killed)."""
    while deadline is not None and not killed:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.monotonic() >= deadline:
            _kill(pid)
            killed = True
            break
        time.sleep(0.01)
    return os.waitpid(pid, 0)[1], killed


def run(argv, env, timeout=None):
    """Run ``argv`` (``available(argv)``); (exit code, stdout bytes, stderr bytes, killed at the deadline)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = None
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
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks = {out_r: [], err_r: []}
        killed = _drain(pid, chunks, deadline)
        status, killed = _reap(pid, deadline, killed)
        pid = None
    finally:
        os.close(out_r)
        os.close(err_r)
        if pid is not None:   # an exception while it ran: never leave it running or unreaped
            if timeout is not None:
                _kill(pid)
            else:
                try:
                    os.kill(pid, _signals.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    return _exit_code(status), b"".join(chunks[out_r]), b"".join(chunks[err_r]), killed
