# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""The redactor's YAML reader (``_core.redact`` reads every text through it): the value of every secret's key in YAML
(or an INI/``key: value`` file) hidden whole - to the end of its line (a comment kept), a quoted scalar in its quotes,
a block scalar's lines, a plain or quoted scalar continued on deeper lines, a sequence of scalars under the key -
and what every reader of the redactor shares: the words that are a switch, never a secret (``SWITCH_WORDS``), and a
value's quotes (``unquoted``). The mark is the caller's (``_core.redact.MARK``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_shapes
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import secret_name

# a value that is a switch (--password-stdin=true, password: false), never a secret
SWITCH_WORDS = ("true", "false", "yes", "no", "on", "off")
# YAML: a line 'key: value' (in a sequence too); the key's column is its indentation
_LINE = lazy_compile(r"""^(?P<lead>[ \t]*(?:-[ \t]+)*)(?P<q>["']?)(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q)"""
                     r"""[ \t]*:(?P<rest>[ \t].*|)$""")
# a block scalar's header (| or >, indentation and chomping indicators, a comment)
YAML_BLOCK = lazy_compile(r"^[|>](?:[1-9][+-]?|[+-][1-9]?)?(?:[ \t]+#.*)?$")
# a value complete on its line: quoted (YAML's '' escape too), a flow collection, an alias, anchor or tag alone
_ONE_LINE = lazy_compile(r"""^(?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|\[[^\[\]]*\]|\{[^{}]*\}|[*&!]\S*)"""
                         r"""(?:[ \t]+#.*)?$""")


def unquoted(val):
    """(opening, inside, closing) of a quoted value, ('', val, '') of a bare one."""
    for quote in ('"""', "'''", '\\"', '"', "'"):
        if len(val) >= 2 * len(quote) and val.startswith(quote) and val.endswith(quote):
            return quote, val[len(quote):-len(quote)], quote
    return "", val, ""


def _indent(line):
    return len(line) - len(line.lstrip(" \t"))


def _secret(lines, i, match, mark):
    """Lines ``i``.. of a YAML text whose line ``i`` is ``match`` (a secret's key): its value hidden - to the end of
    the line (a comment kept) and on every deeper line that continues it (a block scalar's lines, a plain or quoted
    scalar continued, a sequence of scalars under it). The index of the next line to read."""
    col, bare = len(match.group("lead")), not match.group("rest").strip()
    end = i + 1     # (a sequence under a key without a value may start at the key's own column: Go's YAML writes so)
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > col or (
            bare and _indent(lines[end]) == col and re.match(r"-(?:[ \t]|$)", lines[end][col:]))):
        end += 1
    while end > i + 1 and not lines[end - 1].strip():
        end -= 1
    rest = match.group("rest")
    value = rest.strip()
    head = lines[i][:len(lines[i]) - len(rest)] + rest[:len(rest) - len(rest.lstrip(" \t"))]
    one_line = _ONE_LINE.match(value)
    if (value.lower() in SWITCH_WORDS or value.startswith(mark) or (one_line and value[0] not in "\"'")
            or secret_shapes.not_a_secret(match.group("key"), value.split(" #", 1)[0].strip())
            or secret_shapes.key_path(match.group("key"), value.split(" #", 1)[0].strip())):
        return i + 1  # a switch, already hidden, or a flow collection _KEY_VALUE reads (an alias, a tag)
    if one_line:  # a quoted scalar (YAML's '' inside): the mark in its quotes, a comment kept
        if unquoted(one_line.group("quoted"))[1].lower() not in SWITCH_WORDS + ("",) and mark not in value:
            lines[i] = head + value[0] + mark + value[0] + value[len(one_line.group("quoted")):]
        return i + 1
    deeper = [j for j in range(i + 1, end) if lines[j].strip()]
    if not value or value.startswith("#"):
        # a sequence of scalars under the key (its direct children only: a nested mapping's keys speak for
        # themselves); a scalar that starts on the next line ('PASSWORD:\n  X') is hidden whole
        if not deeper or _LINE.match(lines[deeper[0]]) or lines[deeper[0]].strip().startswith("#"):
            return i + 1
        if not re.match(r"[ \t]*-(?:[ \t]|$)", lines[deeper[0]]):
            for j in deeper:
                if not lines[j].strip().startswith(mark):
                    lines[j] = lines[j][:_indent(lines[j])] + mark
            return end
        child = _indent(lines[deeper[0]])
        if all(_indent(lines[j]) == child for j in deeper) and secret_shapes.not_a_secret(
                match.group("key"), [lines[j].strip()[1:].strip() for j in deeper]):
            return end      # every item data: caCertHashes' sha256:<hex> (_core.secret_kept)
        for j in deeper:
            item = re.match(r"^([ \t]*-[ \t]+)(.*)$", lines[j])
            if _indent(lines[j]) == child and item and not _LINE.match(lines[j]):
                if not item.group(2).startswith(mark):
                    lines[j] = item.group(1) + mark
            elif _indent(lines[j]) > child and not lines[j].strip().startswith(mark) and not _LINE.match(
                    lines[j]):
                lines[j] = lines[j][:_indent(lines[j])] + mark
        return end
    if YAML_BLOCK.match(value):
        lines[i] = head + value
    else:
        comment = re.search(r"(?<![ \t])[ \t]+#.*$", value) if value[0] not in "\"'" else None
        lines[i] = head + mark + (comment.group(0) if comment else "")
    for j in deeper:
        lines[j] = lines[j][:_indent(lines[j])] + mark
    return end


def values(text, mark):
    """``text`` with the value of every secret's key in YAML (or an INI/``key: value`` file) hidden whole."""
    if ":" not in text:
        return text
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _LINE.match(lines[i])
        i = _secret(lines, i, match, mark) if match and secret_name(match.group("key")) else i + 1
    return "\n".join(lines)
