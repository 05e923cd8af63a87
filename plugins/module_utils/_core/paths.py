# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""Where a node's file is, and reading it safely (writes: ``_core/fileio.py``).

- ``in_root`` / ``root_path``: a node path resolved under another root (a node
  tree mounted at ``/host``, a test tree) the way the node sees it.
- ``resolve_target``: a path is followed through symlinks to the file that
  is really read and written; a dangling link, a directory, or a result
  outside the node root (a path taken from the node's own files, like
  ``--config=/../outside.yaml``) is a ``FileSafetyError``.
- ``read_utf8``: bytes -> text, refusing non-UTF-8 content and files above
  ``MAX_CONFIG_BYTES`` with a message naming the file (and the offending
  byte offset), before anything is computed or written.
- ``read_text``: a file's text, or a default when it does not exist.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError


# A kubelet or containerd config is a few KiB; 1 MiB leaves room for large
# comment blocks and stays fast to parse. Above it the file is refused.
MAX_CONFIG_BYTES = 1024 * 1024


class FileSafetyError(NodefixError):
    """A file cannot be read or written safely; the message names file and problem."""

    def __init__(self, msg, path=None):
        super(FileSafetyError, self).__init__(msg, **({"path": path} if path is not None else {}))
        self.path = path


def _real_root(root):
    return os.path.realpath(root or "/")


# Linux gives up after 40 symlinks in one lookup (ELOOP); so does in_root.
MAX_SYMLINKS = 40


def in_root(root, path, follow_last=True):
    """Where the node's ``path`` really is on this machine: ``path`` resolved
    the way the node sees it when its ``/`` is ``root`` (chroot semantics).

    Every symlink on the way is followed inside ``root``: an absolute target
    (``/etc/kubernetes/kc.yaml``) starts again at ``root``, and ``..`` never
    climbs above it; so a node tree mounted at ``/host`` (the
    node-problem-detector DaemonSet) or a test tree reads the node's own files,
    never the same path on the machine running the code. ``follow_last=False``
    leaves the last component as it is (a writer follows that link itself, to
    refuse a dangling one). With ``root`` ``/`` (a node auditing itself) the
    path is returned as given: the kernel resolves it the same way.
    """
    if not root or root == "/":
        return path
    base = _real_root(root)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved = []
    links = 0
    # the walk's states at each symlink: one seen again is a loop, which would go on to MAX_SYMLINKS (the same
    # error, found without following it 40 times: a tree whose /proc links to /proc reads every /proc path so)
    seen = set()
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        here = os.path.join(base, *(resolved + [part]))
        if (parts or follow_last) and os.path.islink(here):
            links += 1
            state = (tuple(resolved), part, tuple(parts))
            if links > MAX_SYMLINKS or state in seen:
                raise FileSafetyError("%s: more than %d symlinks on the way (a symlink loop?)" % (path, MAX_SYMLINKS),
                                      path)
            seen.add(state)
            target = os.readlink(here)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        resolved.append(part)
    return os.path.join(base, *resolved) if resolved else base


def inside(root, real):
    """True when the resolved path ``real`` lies under the node root."""
    base = _real_root(root)
    if base == "/":
        return True
    return real == base or real.startswith(base.rstrip("/") + "/")


def _below_root(root, path):
    """``path`` (a path under ``root`` on this machine) as a node path, or None when it is not under it."""
    for base in (os.path.abspath(root), _real_root(root)):
        base = base.rstrip("/")
        if path == base:
            return "/"
        if path.startswith(base + "/"):
            return path[len(base):]
    return None


def node_path(root, path):
    """Where node path ``path`` (absolute, from the node's own files) is under ``root``.

    The directories on the way are resolved the way the node sees them
    (``in_root``: symlinks, absolute or not, and ``..`` stay inside ``root``;
    ``/../outside/x`` is ``/outside/x`` on a real node and can never climb
    above ``root`` in a test tree); the last component is left as it is, for
    ``resolve_target`` to follow.
    """
    if not isinstance(path, str) or not path:
        raise FileSafetyError("empty or invalid path %r" % (path,), path)
    if "\0" in path or "\n" in path:
        raise FileSafetyError("path %r contains a NUL or newline character" % (path,), path)
    if not path.startswith("/"):
        raise FileSafetyError("path %r is not absolute" % (path,), path)
    if not root or root == "/":
        return path
    return in_root(root, path, follow_last=False)


def resolve_target(root, path, must_exist=False, what="file"):
    """The real file behind ``path`` (a node path joined under ``root`` already).

    Follows symlinks (chains included; under a ``root`` other than ``/`` the
    way the node sees them, see ``in_root``). Refuses a dangling link, a link
    loop, a directory, a result outside ``root``, and (``must_exist``) a
    missing file. Returns the resolved path (which may not exist yet).
    """
    below = _below_root(root, path) if root and root != "/" else None
    if below is not None:
        real = in_root(root, below)
    else:
        real = os.path.realpath(path)
    if os.path.islink(path) and not os.path.exists(real):
        raise FileSafetyError("%s %s is a symlink to %s, which does not exist (dangling symlink); "
                              "nothing was read or written" % (what, path, os.readlink(path)), path)
    if not inside(root, real):
        raise FileSafetyError("%s %s resolves to %s, outside the node root %s; refusing to read or write it"
                              % (what, path, real, root), path)
    if os.path.isdir(real):
        raise FileSafetyError("%s %s is a directory, not a file" % (what, path), path)
    if os.path.lexists(real) and not os.path.isfile(real):
        raise FileSafetyError("%s %s is not a regular file" % (what, path), path)
    if must_exist and not os.path.exists(real):
        raise FileSafetyError("%s %s does not exist" % (what, path), path)
    return real


def file_kind(mode):
    """What a ``st_mode`` that is not a regular file is, in words."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


def read_utf8(path, max_bytes=MAX_CONFIG_BYTES, what="file", follow=True):
    """Text of ``path`` (None when absent); non-UTF-8 or oversized is a FileSafetyError, and so is a
    path that is not a regular file (opened without blocking: a FIFO planted there would hang the
    reader) and, with ``follow`` false, a symbolic link."""
    flags = os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        with open(path, "rb", opener=lambda name, open_flags: os.open(name, open_flags | flags)) as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise FileSafetyError("%s %s is not a regular file (it is %s)" % (what, path, file_kind(mode)), path)
            raw = fh.read(max_bytes + 1)
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        if exc.errno == errno.EISDIR:
            raise FileSafetyError("%s %s is not a regular file (it is a directory)" % (what, path), path)
        if exc.errno == errno.ELOOP and not follow:
            raise FileSafetyError("%s %s is not a regular file (it is a symbolic link)" % (what, path), path)
        raise FileSafetyError("cannot read %s %s: %s" % (what, path, exc.strerror or exc), path)
    if len(raw) > max_bytes:
        raise FileSafetyError("%s %s is larger than %d bytes; refusing to parse or rewrite it (a config this big is "
                              "not one this collection manages)" % (what, path, max_bytes), path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise FileSafetyError("%s %s is not UTF-8 text (byte 0x%02x at offset %d, line %d); nothing was changed"
                              % (what, path, raw[exc.start], exc.start, line), path)


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
    absolute targets and ``..`` kept inside ``root`` (``in_root``, the one
    resolver). ``follow_last=False`` leaves a symlink in the last component as it
    is (to lstat it: a dangling link still exists). A symlink loop gives the plain
    join, which the read then fails on."""
    if not root or root == "/":
        return path
    try:
        return in_root(root, path, follow_last=follow_last)
    except FileSafetyError:
        return os.path.join(root, path.lstrip("/"))
