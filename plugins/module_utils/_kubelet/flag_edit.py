# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Removing or rewriting kubelet flags in unit files and EnvironmentFiles (the fixer side of
``_kubelet.flags``, whose words carry the span of raw text each came from).

An edit removes exactly the characters of the flag (and of its value word, even on the next line)
and never touches another flag. The caller re-reads the edited text with the discovery parser
(``_kubelet.node.discover``) and refuses the change when the result is not what was asked, so a
layout this editor does not understand can never be reported as fixed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.flags import env_flag_words, find_flags, unit_flag_words

_SAFE_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/<=@+%-]*$")


class FlagEditError(NodefixError):
    """The edit cannot be made safely; nothing is written."""


def _remove_span(text, a, b):
    """Remove raw [a, b) and the blanks after it (else before it); keep continuations."""
    end = b
    while end < len(text) and text[end] in " \t":
        end += 1
    start = a
    if end == b:
        while start > 0 and text[start - 1] in " \t":
            start -= 1
    return text[:start] + text[end:]


def _tidy_continuations(text, touched):
    """Tidy the physical lines an edit touched (``touched``: their indices); every
    other line keeps its bytes, so that removing a whole continuation line leaves
    its neighbours as they were (the closing `` "`` line of a kubespray
    ``kubelet.env`` included)."""
    lines = [[line, idx in touched] for idx, line in enumerate(text.split("\n"))]

    def continued(entry):
        return entry[0].rstrip().endswith("\\") and not entry[0].lstrip().startswith(("#", ";"))

    # a touched line left with only blanks and a backslash, inside a continued value: drop it whole
    out = []
    for entry in lines:
        if entry[1] and entry[0].strip() == "\\" and out and continued(out[-1]):
            continue
        out.append(entry)
    # a touched first line left with only the opening quote and a backslash
    # (KUBELET_ARGS="\ after its first flag was removed): pull the next line up
    joined = []
    for entry in out:
        if joined and joined[-1][1] and re.match(r"""^[ \t]*[A-Za-z_][A-Za-z0-9_]*=["']?[ \t]*\\[ \t]*$""", joined[-1][0]):
            joined[-1] = [re.sub(r"[ \t]*\\[ \t]*$", "", joined[-1][0]) + entry[0].lstrip(" \t"), True]
            continue
        joined.append(entry)
    out = joined
    # a touched last line left with only the closing quote (its last flag was
    # removed): close the value on the line before
    closed = []
    for entry in out:
        if entry[1] and entry[0].strip() in ('"', "'") and closed and continued(closed[-1]):
            closed[-1] = [re.sub(r"[ \t]*\\[ \t]*$", "", closed[-1][0]) + entry[0].strip(), True]
            continue
        closed.append(entry)
    out = closed
    # a touched last line left empty after a continued line: end the logical line there
    for idx in range(len(out) - 1):
        if out[idx + 1][1] and continued(out[idx]) and out[idx + 1][0].strip() == "":
            out[idx][0] = re.sub(r"[ \t]*\\[ \t]*$", "", out[idx][0])
    return "\n".join(entry[0] for entry in out)


def format_safe(value, in_unit):
    """The text of a rewritten value, refusing characters that would need quoting."""
    if not _SAFE_VALUE_RE.match(value):
        raise FlagEditError("value %r needs quoting; refusing to rewrite the flag (use stale_flags=remove)" % value)
    return value.replace("%", "%%") if in_unit else value


def edit_text(text, is_unit, names, bool_flags, rewrite=None):
    """Remove every ``--name`` in ``names`` (or rewrite it to ``--name=<rewrite[name]>``).

    Returns (new_text, edits). ``rewrite``: {flag name: formatted value}.
    """
    groups = unit_flag_words(text) if is_unit else env_flag_words(text)
    occurrences = find_flags(groups, set(names), bool_flags)
    edits = []
    ops = []
    for occ in occurrences:
        old = " ".join(text[a:b] for a, b in occ["spans"])
        if rewrite and occ["name"] in rewrite:
            new = "--%s=%s" % (occ["name"], format_safe(rewrite[occ["name"]], is_unit))
            if len(occ["spans"]) == 1 and text[occ["spans"][0][0]:occ["spans"][0][1]] == new:
                continue
            ops.append(("replace", occ["spans"][0], new))
            for span in occ["spans"][1:]:
                ops.append(("remove", span, None))
            edits.append({"flag": "--" + occ["name"], "action": "rewrite", "old": old, "new": new})
        else:
            for span in occ["spans"]:
                ops.append(("remove", span, None))
            edits.append({"flag": "--" + occ["name"], "action": "remove", "old": old})
    # the physical lines the edits touch (an edit never removes a newline: indices stay)
    touched = set(text.count("\n", 0, a) for _op, (a, _b), _new in ops)
    for op, (a, b), new in sorted(ops, key=lambda o: o[1][0], reverse=True):
        if op == "replace":
            text = text[:a] + new + text[b:]
        else:
            text = _remove_span(text, a, b)
    if edits:
        text = _tidy_continuations(text, touched)
    return text, edits
