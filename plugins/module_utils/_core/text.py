# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""Text helpers: diffs of node files, strings made printable for every report
format, and /proc/self/mountinfo's escaped fields.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile


def file_diff(path, before, after):
    """The ``diff`` return value for one file (Ansible's before/after form), redacted (_core.redact:
    a registry password, a token in a unit's Environment= never reaches --diff; the file written keeps
    its real values - only this view of it is redacted)."""
    # imported here: its patterns cost the node-problem-detector plugin (which needs ``printable`` only) a
    # millisecond and a half of every run
    from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact_text  # pylint: disable=import-outside-toplevel
    return {
        "before": redact_text(before) if before is not None else "",
        "after": redact_text(after),
        "before_header": "%s (before)" % path,
        "after_header": "%s (after)" % path,
    }


def int_or_none(text):
    """``int(text)`` of a number read from the node (a flag's value, a sysctl, a file's line), None when it is not
    one (None, an empty or non-numeric text): the caller decides what an unreadable number means."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


# What no report format can carry as is: C0 controls but tab and newline (invalid in XML 1.0,
# terminal escapes in Markdown and text), DEL, lone surrogates (not encodable as UTF-8) and the
# XML non-characters. A pod controls its process name, so a finding's subject can hold any of them.
_UNPRINTABLE = lazy_compile(u"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
MAX_DEPTH = 32


def _escape_char(match):
    code = ord(match.group())
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def printable(value, depth=0):
    """``value`` with every string made safe for every format (unprintable characters written as
    ``\\xNN``/``\\uNNNN``) and nesting cut at MAX_DEPTH levels (deeper values become a string saying
    so): JSON, XML, HTML, Markdown and the Prometheus text stay valid whatever a node reported."""
    if isinstance(value, str):
        return _UNPRINTABLE.sub(_escape_char, value)
    if depth >= MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        return "(nested more than %d levels deep: left out)" % MAX_DEPTH
    if isinstance(value, dict):
        return dict((printable(k, depth + 1) if isinstance(k, str) else k, printable(v, depth + 1))
                    for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [printable(v, depth + 1) for v in value]
    return value


_MOUNTINFO_OCTAL = lazy_compile(r"\\([0-7]{3})")


def mountinfo_entries(text):
    """[(mount point, fs type, source)] of a ``/proc/self/mountinfo`` text, octal escapes decoded
    (proc(5): fields separated by single spaces, the mount point fifth; fs type and source after the
    `` - `` separator, None when a line has none). The one parser of that file."""
    entries = []
    for line in (text or "").splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        _left, sep, right = line.partition(" - ")
        tail = right.split(" ") if sep else []
        entries.append(tuple(_MOUNTINFO_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), f) if f is not None else None
                             for f in (fields[4], tail[0] if tail else None, tail[1] if len(tail) > 1 else None)))
    return entries


# A string YAML reads back as the same string when written plain (no quotes): a letter or '_' first, or a
# digit first with a letter or '%' in it (500Mi, 10%); never a word YAML 1.1 reads as a bool or null, a
# number (1e3, 0x1f, .inf), a time (1:30) or a date, nor a flow indicator (,[]{}) or ': '.
_YAML_PLAIN = lazy_compile(r"^(?:[A-Za-z_][A-Za-z0-9_./%+-]*|[0-9][A-Za-z0-9_./%+-]*[A-Za-z%][A-Za-z0-9_./%+-]*)$")
_YAML_WORDS = frozenset(["y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "infinity"])


def _yaml_scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    plain = _YAML_PLAIN.match(text) and text.lower() not in _YAML_WORDS and not re.match(r"^0[xXoObB]", text)
    if plain:
        try:
            float(text)
            plain = False
        except ValueError:
            pass
    return text if plain else json.dumps(text, ensure_ascii=False)


def yaml_flow(value, depth=0):
    """``value`` as one line of YAML flow style (``{memory.available: 500Mi, nodefs.available: 10%}``) that a YAML
    parser reads back as ``value``: how a report, a remedy or an Event shows a nested value - never as a
    Python repr (``{'memory.available': '500Mi'}``). Keys in sorted order; nesting past 32 levels is cut."""
    if depth >= 32 and isinstance(value, (dict, list, tuple)):
        return json.dumps("(nested more than 32 levels deep: left out)")
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (_yaml_scalar(k), yaml_flow(value[k], depth + 1))
                                  for k in sorted(value, key=str))
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(yaml_flow(v, depth + 1) for v in value)
    return _yaml_scalar(value)
