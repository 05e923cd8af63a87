# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Reading kubelet flags in unit files and EnvironmentFiles, the way systemd and the shell read them.

A unit file's ``ExecStart=`` and ``Environment=`` values are split into words after line
continuations (``\\`` + newline) are joined (comment lines inside a continuation skipped, as systemd
skips them: ``unit_entries``, the one reader of unit-file lines), quotes and backslash escapes are
honoured (systemd.syntax(7), systemd.service(5) "Command lines"), and an EnvironmentFile's
assignments are read with its own quoting rules (systemd.exec(5) ``EnvironmentFile=``); the words of
a variable's value are what ``$VAR`` expands to. Every word keeps the span of raw text it came from,
so ``_kubelet.flag_edit`` removes exactly the characters of a flag (and of its value word, even on
the next line) and never touches another flag: ``--node-labels=note=--kube-api-qps=7`` is one word.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def _words(text, posmap, unit_specifiers=False):
    """Split ``text`` into shell-like words; each word -> (value, raw_start, raw_end).

    ``posmap[i]`` is the raw offset of ``text[i]``; a word's raw span covers
    its quotes. A backslash + newline (an EnvironmentFile's escaped newline) is
    dropped; unit-file values come joined by ``unit_entries`` and hold no newline.
    """
    return [(value, start, end) for value, start, end, _charmap in _mapped_words(text, posmap, unit_specifiers)]


def _mapped_words(text, posmap, unit_specifiers=False):
    """``_words`` plus each word's character map: (value, raw_start, raw_end, [raw offset of value[i]])."""
    words = []
    cur, charmap = [], []
    start = None
    quote = None
    i, n = 0, len(text)

    def close(end):
        words.append(("".join(cur), posmap[start], posmap[end - 1] + 1, charmap))

    while i < n:
        c = text[i]
        if unit_specifiers and c == "%" and i + 1 < n and text[i + 1] == "%":
            if start is None:
                start = i
            cur.append("%")
            charmap.append(posmap[i])
            i += 2
            continue
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < n:
                i += 1
                if text[i] != "\n":
                    cur.append(text[i])
                    charmap.append(posmap[i])
            else:
                cur.append(c)
                charmap.append(posmap[i])
        elif c in "\"'":
            quote = c
            if start is None:
                start = i
        elif c == "\\" and i + 1 < n:
            if start is None:
                start = i
            i += 1
            if text[i] != "\n":
                cur.append(text[i])
                charmap.append(posmap[i])
        elif c.isspace():
            if start is not None:
                close(i)
                cur, charmap, start = [], [], None
        else:
            if start is None:
                start = i
            cur.append(c)
            charmap.append(posmap[i])
        i += 1
    if start is not None:
        close(n)
    return words


def _unit_lines(text):
    """Logical lines of a unit file as systemd reads them (systemd.syntax(7)): [(chars, posmap)].

    A line ending in a backslash goes on on the next line, the backslash read as a space.
    Comment lines (first non-blank ``#`` or ``;``) are skipped wherever they are - inside
    such a continuation too, which then goes on after them ("the comment block is
    ignored"); a comment's own trailing backslash continues nothing. A blank line ends
    a continuation. ``posmap[i]`` is the raw offset of ``chars[i]``.
    """
    out = []
    chars, posmap = [], []
    offset = 0
    for line in (text or "").split("\n"):
        start, offset = offset, offset + len(line) + 1
        if line.endswith("\r"):
            line = line[:-1]
        if line.lstrip().startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            chars.extend(line[:-1] + " ")
            posmap.extend(range(start, start + len(line)))
            continue
        chars.extend(line)
        posmap.extend(range(start, start + len(line)))
        out.append(("".join(chars), posmap))
        chars, posmap = [], []
    if chars:
        out.append(("".join(chars), posmap))
    return out


def unit_entries(text):
    """Every ``Key=value`` of a unit file as systemd reads it: [(section, key, value, posmap)].

    The one reader of unit-file syntax in the collection (discovery and the flag
    editor both use it). ``value`` is stripped and keeps ``%%`` (unit specifiers are
    the caller's business); ``posmap[i]`` is the raw offset of ``value[i]``.
    """
    out = []
    section = None
    for chars, posmap in _unit_lines(text):
        stripped = chars.strip()
        if not stripped:
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if "=" not in stripped:
            continue
        eq = chars.index("=")
        a, b = eq + 1, len(chars.rstrip())
        while a < b and chars[a].isspace():
            a += 1
        out.append((section, chars[:eq].strip(), chars[a:b], posmap[a:b]))
    return out


def unit_flag_words(text):
    """Flag-level words of a unit file's ``ExecStart=`` and ``Environment=`` lines.

    Returns a list of groups; each group is a list of (word, raw_start, raw_end)
    that systemd hands to the process in order (one ExecStart command line, or
    the value of one Environment= variable).
    """
    groups = []
    for section, key, value, posmap in unit_entries(text):
        if section != "Service" or key not in ("Environment", "ExecStart"):
            continue
        words = _mapped_words(value, posmap, unit_specifiers=True)
        if key == "ExecStart":
            groups.append([(word, ws, we) for word, ws, we, _charmap in words])
            continue
        for word, _ws, _we, charmap in words:
            if "=" not in word:
                continue
            at = word.index("=") + 1
            groups.append(_words(word[at:], charmap[at:]))
    return groups


def env_assignments(text):
    """Assignments of an EnvironmentFile (systemd.exec(5) syntax): [(name, value, posmap)].

    ``posmap[i]`` is the raw offset of ``value[i]``. Quotes, backslash escapes
    and ``\\`` + newline continuations are honoured; trailing blanks of an
    unquoted value are dropped. The one reader of this syntax in the collection.
    """
    out = []
    i, n = 0, len(text or "")
    name_re = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] in "#;":
            while i < n and text[i] != "\n":
                i += 1
            continue
        m = name_re.match(text, i)
        k = m.end() if m else i
        while k < n and text[k] in " \t":
            k += 1
        if not m or k >= n or text[k] != "=":
            while i < n and text[i] != "\n":
                i += 1
            continue
        i = k + 1
        while i < n and text[i] in " \t":
            i += 1
        value, posmap, i, quote = _env_value(text, i)
        if quote is None:
            while value and value[-1] in " \t\r":
                value.pop()
                posmap.pop()
        out.append((m.group(0), "".join(value), posmap))
    return out


def _env_value(text, i):
    """Characters (and their raw offsets) of one assignment's value from offset ``i``.

    A backslash escapes the next character outside single quotes (a backslash +
    newline continues the value); an unquoted newline ends it.
    """
    n = len(text)
    value, posmap = [], []
    quote = None
    while i < n:
        c = text[i]
        if c == "\\" and quote != "'" and i + 1 < n:
            i += 1
            if text[i] != "\n":
                value.append(text[i])
                posmap.append(i)
        elif c == quote:
            quote = None
        elif quote is None and c in "\"'":
            quote = c
        elif quote is None and c == "\n":
            break
        else:
            value.append(c)
            posmap.append(i)
        i += 1
    return value, posmap, i, quote


def env_flag_words(text):
    """Flag-level words of every assignment of an EnvironmentFile."""
    return [_words(value, posmap) for _name, value, posmap in env_assignments(text)]


def find_flags(groups, names, bool_flags):
    """Occurrences of ``--name`` among the words: [{name, spans, value}] (spans: raw ranges to remove)."""
    found = []
    for words in groups:
        k = 0
        while k < len(words):
            word, ws, we = words[k]
            if not word.startswith("-") or word in ("-", "--"):
                k += 1
                continue
            body = word.lstrip("-")
            name = body.split("=", 1)[0]
            if name in names:
                if "=" in body:
                    found.append({"name": name, "spans": [(ws, we)], "value": body.split("=", 1)[1]})
                elif name in bool_flags or k + 1 >= len(words):
                    found.append({"name": name, "spans": [(ws, we)], "value": "true" if name in bool_flags else ""})
                else:
                    nxt = words[k + 1]
                    found.append({"name": name, "spans": [(ws, we), (nxt[1], nxt[2])], "value": nxt[0]})
                    k += 1
            elif "=" not in body and name not in bool_flags and k + 1 < len(words):
                k += 1  # a value-taking flag: its next word is its value, never a flag
            k += 1
    return found
