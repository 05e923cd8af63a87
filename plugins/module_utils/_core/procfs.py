# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""One file of every process in a ``/proc``, read through one descriptor of the directory.

The detectors that look for a process (containerd's daemon by its ``comm``, gVisor's sandboxes by their
``cmdline``) read one small file per process; a node has hundreds. Opened relative to a descriptor of
``/proc`` (``openat``), read with ``os.read``, each costs a third of ``open()``'s file object and path
walk - what the node-problem-detector plugin pays every tick (``_pids.detect.scan`` reads ``stat`` so).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def _read(name, dir_fd):
    """The whole file ``name`` (relative to ``dir_fd``) as text, or None when it cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


def pid_files(proc, name):
    """(pid, text) of ``<proc>/<pid>/<name>`` for every process, lowest pid first, as ``_core.paths.read_text``
    reads it (UTF-8, surrogateescape) - text None when the file cannot be read (the process exited between the
    listing and the read). Nothing when ``proc`` cannot be listed."""
    try:
        pids = sorted(int(p) for p in os.listdir(proc) if p.isdigit())
        dir_fd = os.open(proc, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        for pid in pids:
            yield pid, _read("%d/%s" % (pid, name), dir_fd)
    finally:
        os.close(dir_fd)
