# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""What the node's binaries answer to ``--version``, kept between node-problem-detector's ticks.

The first rule of a tick reads the node for all six conditions (``_npd/tick.py``); among the commands the
detectors run, ``containerd``, ``runc``, ``runsc``, ``kubelet`` and ``systemctl --version`` give the same answer
every tick until the binary changes, and each start of a Go binary costs 5-20 ms of CPU (the kubelet's more). The
plugin's runner (``_npd.plugin.TickRunner``) asks this file first and runs the command only when it cannot prove
the answer it holds is the binary's own:

- an answer is kept for the file the path leads to (symlinks followed), by its device, inode, size, modification
  and change times (``st_ctime`` moves on any write, ``chmod``, ``touch -d`` or rename of the file): a binary
  replaced (a new inode), rewritten in place or retouched is run again - never trusted stale;
- only an ELF binary's answer is kept (a ``#!`` script may ask another program that changed since), and only where
  the file has the name asked for (a launcher such as ``/usr/bin/snap`` behind ``/snap/bin/kubelet`` answers for
  another file), only a
  complete answer (exit 0, before the deadline), and for at most ``MAX_AGE_CS`` (an hour) of this boot - whatever
  a binary's answer depends on besides its file (a shared library of the same package) is read again hourly;
- the file (``<cache_dir>/versions``) is written like the tick's result: atomically (a temporary file renamed
  over it, mode 0600) by the run that holds the tick's lock, in the directory the plugin owns (``TickCache.usable``);
  a file that is symlinked, someone else's, open to others' writes, of another format or boot, cut short or
  garbled is ignored whole: every binary is asked again.

Standard library only, and only what the interpreter has loaded at its start (``os``, ``stat``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick

NAME = "versions"
MAGIC = "nodefix-npd-versions 1"
# an answer older than this (centiseconds of uptime) is asked again: an hour, 12 ticks at the role's 300 s interval
MAX_AGE_CS = 3600 * 100
# entries the file keeps at most (the detectors ask five binaries); the oldest go first
MAX_ENTRIES = 32
ELF = b"\x7fELF"


def binary_key(path):
    """``dev:ino:size:mtime_ns:ctime_ns`` of the file ``path`` leads to, or None when its answer is not to be kept:
    not a regular ELF file (a script, a directory, a FIFO: opened without blocking), a launcher of another name
    (``/snap/bin/kubelet`` leads to ``/usr/bin/snap``, which does not change when the snap it starts does; a
    multi-call binary), or unreadable."""
    if os.path.basename(os.path.realpath(path)) != os.path.basename(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            head = os.read(fd, len(ELF)) if stat.S_ISREG(st.st_mode) else b""
        finally:
            os.close(fd)
    except OSError:
        return None
    if head != ELF:
        return None
    return "%d:%d:%d:%d:%d" % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def version_argv(argv):
    """True for ``[/absolute/binary, "--version"]``: the only commands whose answers are kept."""
    return len(argv) == 2 and argv[1] == "--version" and isinstance(argv[0], str) and argv[0].startswith("/")


def _hex(text):
    return text.encode("utf-8", "surrogateescape").hex() or "-"


def _unhex(word):
    return "" if word == "-" else bytes.fromhex(word).decode("utf-8", "surrogateescape")


class VersionCache(object):
    """The kept ``--version`` answers in ``directory`` (a directory ``TickCache.usable`` accepted)."""

    def __init__(self, directory):
        self.path = os.path.join(directory, NAME)
        self.entries = None     # {binary path: (key, at, rc, out, err)}, read at the first lookup
        self.changed = False

    def _load(self, now, boot):
        """The file's entries when it is whole, this boot's and the plugin's own; {} otherwise."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                    return {}
                data = b""
                while True:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    data += chunk
            finally:
                os.close(fd)
            lines = data.decode("ascii").split("\n")
            if lines[:2] != [MAGIC, "boot %s" % boot] or "end" not in lines:
                return {}
            entries = {}
            for line in lines[2:lines.index("end")]:
                tag, at, key, rc, path, out, err = line.split(" ")
                if tag != "e" or not 0 <= now - int(at) < MAX_AGE_CS:
                    continue
                entries[_unhex(path)] = (key, int(at), int(rc), _unhex(out), _unhex(err))
            return entries
        except Exception:  # pylint: disable=broad-except  # absent, cut or garbled: every binary is asked again
            return {}

    def lookup(self, argv):
        """(kept answer (rc, out, err) or None, the binary's key now or None). Ask the key before running the
        command: an answer is kept for the file that was there before it ran, never for one that replaced it."""
        if not version_argv(argv):
            return None, None
        key = binary_key(argv[0])
        if key is None:
            return None, None
        if self.entries is None:
            self.entries = self._load(npd_tick.uptime_cs(), npd_tick.boot_id())
        kept = self.entries.get(argv[0])
        if kept is not None and kept[0] == key:
            return kept[2:], key
        return None, key

    def keep(self, argv, key, answer):
        """Keep ``answer`` (rc, out, err) of ``argv`` for the binary whose key was ``key`` (only a complete one)."""
        rc, out, err = answer
        if key is None or rc != 0 or not version_argv(argv) or self.entries is None:
            return
        self.entries[argv[0]] = (key, npd_tick.uptime_cs(), rc, out, err)
        self.changed = True

    def save(self):
        """Write the entries atomically when an answer was added; False when it could not be written."""
        if not self.changed:
            return True
        newest = sorted(self.entries.items(), key=lambda item: -item[1][1])[:MAX_ENTRIES]
        lines = [MAGIC, "boot %s" % npd_tick.boot_id()]
        lines += ["e %d %s %d %s %s %s" % (at, key, rc, _hex(path), _hex(out), _hex(err))
                  for path, (key, at, rc, out, err) in sorted(newest)]
        if not npd_tick.write_lines(self.path, lines):
            return False
        self.changed = False
        return True
