# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""This controller's memory of the other runs' rollout records it saw (``_rollout.record.live``'s ``observed_for``):
a lease judged as client-go's leader election judges one - from when THIS observer last saw the record change, on its
own monotonic clock (``observedTime``; k8s.io/client-go/tools/leaderelection/leaderelection.go), never by comparing
the holder's wall clock with this one's.

One small JSON file a node (``{"boot", "fingerprint", "seen"}``: this boot's id, the record's ``record.fingerprint``,
``time.monotonic()`` when it was first seen unchanged) in a directory of the caller's, written atomically (0600 in a
0700 directory). The monotonic clock is this machine's since its boot: an entry of another boot (or another machine
sharing the directory) is no observation. What cannot be read or written is no observation either, nor is a file that is not to be trusted
(not this user's, writable by its group or others, a symbolic link, a ``seen`` that is not a positive number): the
record is then judged as seen for the first time (``record.live``: live for a full lease from now)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import stat
import tempfile


def _private(st):
    """Whether a file or directory (its stat) is this user's alone to write."""
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _seen(value, now):
    """Whether ``value`` is a monotonic time this controller could have written: a number (not a bool), above 0, not
    in its future."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= now


class Observations(object):
    """``observe(record)`` -> seconds this controller has seen ``record`` unchanged on node ``node``, None the first
    time (then remembered). ``directory``: where the files are; ``boot``: this boot's id; ``monotonic()``: seconds."""

    def __init__(self, directory, node, boot, monotonic, fingerprint):
        self.path = os.path.join(directory, re.sub(r"[^A-Za-z0-9._-]", "_", node) + ".json")
        self.directory, self.boot, self.monotonic, self.fingerprint = directory, boot, monotonic, fingerprint

    def _read(self):
        return read_private(self.directory, self.path)

    def _write(self, entry):
        write_private(self.directory, self.path, entry)

    def __call__(self, record):
        now, mark = self.monotonic(), self.fingerprint(record)
        seen = self._read()
        if self.boot and seen and seen.get("boot") == self.boot and seen.get("fingerprint") == mark \
                and _seen(seen.get("seen"), now):
            return now - seen["seen"]
        self._write({"boot": self.boot, "fingerprint": mark, "seen": now})
        return None


def read_private(directory, path):
    """The JSON mapping in ``path``, None when there is none or it is not to be trusted: the directory or the file not
    this user's (``os.geteuid()``) or writable by its group or others (someone else could plant an old ``seen``), the
    file a symbolic link (``O_NOFOLLOW``), or not a JSON mapping."""
    try:
        if not _private(os.lstat(directory)):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd) as handle:
            if not _private(os.fstat(handle.fileno())):
                return None
            seen = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return seen if isinstance(seen, dict) else None


def write_private(directory, path, entry):
    """``entry`` as JSON in ``path``, atomically (0600 in a 0700 directory); what cannot be written is not remembered
    (the next sight is a first sight again: the stricter rule)."""
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        handle, temp = tempfile.mkstemp(prefix=".observed-", dir=directory)
        with os.fdopen(handle, "w") as out:
            json.dump(entry, out)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except (IOError, OSError):
        return


class LockObservations(object):
    """What this controller saw of the lock slots' Leases (``_reboot.gate.LeaseLock``'s ``observed``: {lock id:
    {slot: {key, mono, boot}}}, ``mono`` on this controller's monotonic clock of boot ``boot``), kept in
    ``directory``/@locks.json between the machine's steps, halves, nodes and runs (``load(boot)`` -> the mapping without
    the sights of another boot, {} when there is none or it is not to be trusted; ``save(mapping)``). A slot whose
    holder stopped renewing it is taken over only once this controller has seen it unchanged for its TTL: observations
    begun from scratch at every step or run would never get there; a step of the wall clock ages none of them."""

    NAME = "@locks.json"        # ("@": never a node's file, whose name keeps only [A-Za-z0-9._-])

    def __init__(self, directory):
        self.directory, self.path = directory, os.path.join(directory, self.NAME)

    def load(self, boot):
        seen = read_private(self.directory, self.path) or {}
        return dict((k, dict((slot, sight) for slot, sight in v.items()
                             if isinstance(sight, dict) and sight.get("boot") == boot))
                    for k, v in seen.items() if isinstance(v, dict))

    def save(self, seen):
        write_private(self.directory, self.path, seen)
