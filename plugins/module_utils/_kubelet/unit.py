# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Reading the kubelet's systemd unit: ``systemctl cat`` output, unit files and drop-ins,
environment files, ``ExecStart`` words and flags (one job of the kubelet detector, see ``_kubelet``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flags as kubelet_flags
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import BOOL_FLAGS, UNIT, UNIT_DIRS

# ---------------------------------------------------------------------------
# systemd unit parsing
# ---------------------------------------------------------------------------


def split_systemctl_cat(text):
    """Split ``systemctl cat`` output into [(path, content)]."""
    files = []
    current, buf = None, []
    prev_blank = True
    for line in (text or "").splitlines():
        m = re.match(r"^# (/\S+\.(?:service|conf))\s*$", line)
        if m and prev_blank:
            if current is not None:
                files.append((current, "\n".join(buf).rstrip("\n") + "\n"))
            current, buf = m.group(1), []
            prev_blank = False
            continue
        buf.append(line)
        prev_blank = line.strip() == ""
    if current is not None:
        files.append((current, "\n".join(buf).rstrip("\n") + "\n"))
    return files


def unit_paths_from_tree(root, unit=UNIT):
    """The unit file and its drop-ins as systemd would pick them (no systemctl)."""
    main = None
    for d in UNIT_DIRS:
        p = os.path.join(d, unit)
        rp = root_path(root, p)
        if os.path.isfile(rp) or os.path.islink(root_path(root, p, follow_last=False)):
            if os.path.realpath(rp) == os.path.realpath(root_path(root, "/dev/null")):  # masked
                return []
            main = p
            break
    if main is None:
        return []
    dropins = {}
    for d in reversed(UNIT_DIRS):
        dd = os.path.join(d, unit + ".d")
        rdd = root_path(root, dd)
        if not os.path.isdir(rdd):
            continue
        for name in os.listdir(rdd):
            if name.endswith(".conf"):
                dropins[name] = os.path.join(dd, name)
    return [main] + [dropins[n] for n in sorted(dropins)]


def split_words(text, keep_quotes=False):
    """Split a systemd command line / Environment= value into words (quotes, backslashes)."""
    words = []
    cur = []
    in_word = False
    quote = None
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                quote = None
                if keep_quotes:
                    cur.append(c)
            elif c == "\\" and quote == '"' and i + 1 < n:
                i += 1
                cur.append(text[i])
            else:
                cur.append(c)
        elif c in "\"'":
            quote = c
            in_word = True
            if keep_quotes:
                cur.append(c)
        elif c == "\\" and i + 1 < n:
            i += 1
            cur.append(text[i])
            in_word = True
        elif c.isspace():
            if in_word:
                words.append("".join(cur))
                cur = []
                in_word = False
        else:
            cur.append(c)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(cur))
    return words


def parse_unit(text, path):
    """Entries of the [Service] section: list of (key, value, path) (the reader is _kubelet.flags.unit_entries)."""
    # "%%" is a literal "%" in unit files (systemd.unit(5) "Specifiers")
    return [(key, value.replace("%%", "%"), path)
            for section, key, value, _posmap in kubelet_flags.unit_entries(text) if section == "Service"]


def parse_env_file(text):
    """systemd EnvironmentFile= syntax -> list of (name, value) (the reader is _kubelet.flags.env_assignments)."""
    return [(name, value) for name, value, _posmap in kubelet_flags.env_assignments(text)]


def parse_exec_start(value):
    """ExecStart value -> argv words (with ``$VAR`` / ``${VAR}`` kept for expansion)."""
    value = value.strip()
    while value[:1] in ("-", "@", ":", "+", "!"):
        value = value[1:]
    return split_words(value, keep_quotes=True)


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def parse_flags(args):
    """pflag-like parsing of ``args`` (list of (word, origin)).

    Returns a list of dicts ``{name, value, origin, raw}`` for every flag in
    order; ``value`` is the string after ``=`` or the next word.
    """
    out = []
    i = 0
    while i < len(args):
        word, origin = args[i]
        if not word.startswith("-") or word in ("-", "--"):
            i += 1
            continue
        body = word.lstrip("-")
        if "=" in body:
            name, value = body.split("=", 1)
            raw = [word]
        elif body in BOOL_FLAGS:
            name, value, raw = body, "true", [word]
        elif i + 1 < len(args):
            name, value, raw = body, args[i + 1][0], [word, args[i + 1][0]]
            i += 1
        else:
            name, value, raw = body, "", [word]
        out.append({"name": name, "value": value, "origin": origin, "raw": raw})
        i += 1
    return out


def positional_words(args):
    """Words that are neither flags nor flag values (kubelet refuses to start with any)."""
    out = []
    i = 0
    while i < len(args):
        word = args[i][0]
        if not word.startswith("-") or word in ("-", "--"):
            out.append(word)
        elif "=" not in word and word.lstrip("-") not in BOOL_FLAGS:
            i += 1
        i += 1
    return out


def flag_value(kind, text):
    """Convert a flag value like kubelet's pflag types do; raise ValueError."""
    if kind == "int":
        return int(text.strip())
    if kind == "bool":
        t = text.strip().lower()
        if t in ("true", "1", "t"):
            return True
        if t in ("false", "0", "f"):
            return False
        raise ValueError("invalid boolean %r" % text)
    if kind == "list":
        return [p.strip() for p in text.split(",") if p.strip()]
    if kind in ("map<", "map="):
        sep = "<" if kind == "map<" else "="
        out = {}
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if sep not in part:
                raise ValueError("malformed pair %r" % part)
            k, v = part.split(sep, 1)
            out[k.strip()] = v.strip()
        return out
    return text


def format_flag_value(kind, value):
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("map<", "map="):
        sep = "<" if kind == "map<" else "="
        return ",".join("%s%s%s" % (k, sep, v) for k, v in value.items())
    if kind == "list":
        return ",".join(value)
    return str(value)
