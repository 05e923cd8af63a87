# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""systemd's unit names, its ``list-units``/``show`` outputs, mountinfo, the
kubelet pod paths inside them, and argv chunking below ARG_MAX: the parsers of
``_mount_units`` (which re-exports them). Like it, nothing from Ansible: the
mount_units role ships both files to the node for its timer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import posixpath
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import mountinfo_entries
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.cgroup import is_pod_uid
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

DEFAULT_KUBELET_ROOT_DIR = "/var/lib/kubelet"


def systemd_escape_path(path):
    """``systemd-escape --path``: the unit name stem of a mount point."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "-"
    raw = "/".join(parts).encode("utf-8", "surrogateescape")
    out = []
    for i, byte in enumerate(bytearray(raw)):
        ch = chr(byte)
        if ch == "/":
            out.append("-")
        elif (ch.isalnum() and byte < 128) or ch in ":_" or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.append("\\x%02x" % byte)
    return "".join(out)


_HEX_ESCAPE_RE = lazy_compile(rb"\\x([0-9a-fA-F]{2})")


def unit_name_to_path(name):
    """Mount point of a mount unit name (``systemd-escape --unescape --path``)."""
    stem = name.rsplit(".", 1)[0] if "." in name else name
    if stem in ("", "-"):
        return "/"
    raw = stem.replace("-", "/").encode("utf-8", "surrogateescape")
    raw = _HEX_ESCAPE_RE.sub(lambda m: bytes(bytearray([int(m.group(1), 16)])), raw)
    return "/" + raw.decode("utf-8", "surrogateescape").strip("/")


def parse_systemd_version(text):
    """``systemd 252 (252.39-1~deb12u2)`` -> 252 (None when unparsable)."""
    m = re.search(r"^systemd (\d+)", text or "", re.M)
    return int(m.group(1)) if m else None


def parse_list_units(text):
    """Rows of ``systemctl list-units --all --plain --no-legend --full``."""
    units = []
    for line in (text or "").splitlines():
        parts = line.split(None, 4)
        if parts and parts[0] in (u"\u25cf", "*", u"\u00d7"):
            parts = line.split(None, 5)[1:]
        if len(parts) < 4:
            continue
        units.append({
            "unit": parts[0],
            "load": parts[1],
            "active": parts[2],
            "sub": parts[3],
            "description": parts[4].strip() if len(parts) > 4 else "",
        })
    return units


def parse_show(text):
    """Blocks of ``systemctl show -p ... u1 u2 ...`` keyed by ``Id``."""
    result = {}
    block = {}
    for line in (text or "").splitlines() + [""]:
        if not line.strip():
            if block.get("Id"):
                result[block["Id"]] = block
            block = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            block[key] = value
    return result


def parse_mountinfo(text):
    """Mount points of ``/proc/self/mountinfo`` (octal escapes decoded)."""
    return [point for point, _fstype, _source in mountinfo_entries(text)]


def pods_dirs_for(root, kubelet_root_dir):
    """The pods directory as kubelet names it and, if different, as the kernel resolves it."""
    base = posixpath.normpath("/" + (kubelet_root_dir or DEFAULT_KUBELET_ROOT_DIR).strip("/"))
    dirs = [posixpath.join(base, "pods")]
    real = os.path.realpath(root_path(root, dirs[0]))
    if root and root != "/":
        prefix = os.path.realpath(root)
        if real.startswith(prefix.rstrip("/") + "/"):
            real = "/" + real[len(prefix):].lstrip("/")
        else:
            real = dirs[0]
    if real != dirs[0]:
        dirs.append(real)
    return dirs


def split_pod_path(path, pods_dirs):
    """Split a kubelet path into ``(uid, rest, reason)``.

    ``uid`` is the lower-case pod UID that follows ``pods/`` and ``rest`` what
    follows it (``volume-subpaths/cfg/app/0``); without a UID, ``reason`` says
    why (``outside`` when the path is not under a pods directory at all).
    Paths with ``.`` or ``..`` components are never attributed: kubelet does
    not write them and they could point anywhere.
    """
    if not path or not path.startswith("/"):
        return None, None, "not an absolute path"
    parts = path.split("/")
    if any(p in (".", "..") for p in parts):
        return None, None, "path has . or .. components"
    norm = "/" + "/".join(p for p in parts if p)
    for pods in pods_dirs:
        prefix = pods.rstrip("/") + "/"
        if norm.startswith(prefix):
            segment, _sep, rest = norm[len(prefix):].partition("/")
            uid = segment.lower()
            if is_pod_uid(uid):
                return uid, rest, None
            return None, None, "%r after %s is not a pod UID" % (segment, prefix)
    return None, None, "outside"


def pod_of_path(path, pods_dirs):
    """``(uid, reason)`` of a kubelet path (see ``split_pod_path``)."""
    uid, _rest, reason = split_pod_path(path, pods_dirs)
    return uid, reason


def chunks(names, max_count=None, max_bytes=None, weight=None):
    """Split ``names`` into argv-sized batches (count and byte budget; ``weight(name)``: its bytes, when not
    one argv string of its own)."""
    if max_bytes is None:
        max_bytes = argv_budget()
    batch, size = [], 0
    for name in names:
        # string, NUL, argv pointer
        cost = weight(name) if weight else len(name.encode("utf-8", "surrogateescape")) + 1 + 8
        if batch and ((max_count and len(batch) >= max_count) or size + cost > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(name)
        size += cost
    if batch:
        yield batch


def argv_budget():
    """Bytes of argv one command may use: a quarter of ARG_MAX (the environment shares it), <= 1 MiB."""
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (AttributeError, ValueError, OSError):
        arg_max = 131072
    if not arg_max or arg_max < 0:
        arg_max = 131072
    return max(16384, min(arg_max // 4, 1 << 20))
