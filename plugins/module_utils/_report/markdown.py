# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
r"""Node text in report.md as text, never as Markdown (CommonMark 0.31, https://spec.commonmark.org/0.31.2/):

- ``text``: one line (CR and LF become a space, so no node text starts a line of its own: no heading, table,
  list or fence), and every character that could open raw HTML, a link, an image, emphasis, a code span or a table
  cell backslash-escaped (CommonMark 2.4: any ASCII punctuation may be escaped): ``\ ` * [ ] < |``;
- ``line``: ``text`` that begins a line of its own (the list of clean nodes): its leading blanks dropped (up to three
  still open a heading or a list, four an indented code block: CommonMark 4.2, 4.4, 5.2) and its first character
  escaped when it could open a block (``#``, ``>``, ``-``, ``+``, ``=``, ``~``, ``_``, ``*``, ``1.``);
- in both, a URL or ``www.`` host loses what would make it a link by itself (GFM 0.29 6.9's autolinks: ``www.``,
  ``http://``, ``https://``, ``ftp://``, an e-mail address): its ``:`` or ``.`` or ``@`` escaped, the text the same;
- ``code``: one line in a code span whose backtick string is longer than any run inside it (CommonMark 6.1); a
  value holding a ``|`` is ``text`` instead: a table (GFM 0.29 4.10) splits its row at a ``|`` even inside a code
  span, where only ``\|`` keeps it - and outside a table a code span shows that backslash, escaped text does not
  (a finding or waiver id in the Findings and Waived tables and in a node's lines alike);
- ``fence``: a code fence longer than any backtick run in the lines it holds (CommonMark 4.5).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# what can open raw HTML, a link or image, emphasis, a code span or a table cell anywhere in a line ('_' only
# emphasises at a word's edge and '>' only at a line's start: both left readable)
_ACTIVE = re.compile(r"([\\`*\[\]<|])")
# what makes a line a heading, a block quote, a list item, a thematic break or a setext underline
_LINE_START = re.compile(r"^(?:([-+=>#~_*])|(\d+)([.)]))")
# what GFM's autolink extension makes a link with no markup: a scheme's ':', 'www.' and an e-mail address's '@'
_AUTOLINK = re.compile(r"(?i)\b(?:(https?|ftp)(:)(?=//)|(www)(\.)|(?<=[\w.+-])(@)(?=[\w-]+\.))")


def _one_line(value):
    return re.sub(r"[\r\n\x0b\x0c\u2028\u2029]+", " ", "" if value is None else str(value))


def _unlinked(value):
    return _AUTOLINK.sub(lambda m: "".join((g if g not in (":", ".", "@") else "\\" + g) for g in m.groups() if g),
                         value)


def text(value):
    return _unlinked(_ACTIVE.sub(r"\\\1", _one_line(value)))


def line(value):
    return _LINE_START.sub(lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3),
                           text(value).lstrip(" \t"))


def code(value):
    value = _one_line(value)
    if "|" in value:
        return text(value)
    ticks = "`" * (max([len(r) for r in re.findall(r"`+", value)] or [0]) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return ticks + pad + value + pad + ticks


def fence(lines):
    return "`" * max(3, max([len(r) for ln in lines for r in re.findall(r"`+", ln)] or [0]) + 1)
