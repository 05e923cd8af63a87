# SPDX-License-Identifier: GPL-3.0-or-later
"""report.md's tables hold hostile node text (review finding L8 of issue 61): a '|', backticks, a newline, raw HTML in
a finding id (a code span), a waiver's reason, a host name, a title, a changed setting. report.md is parsed back by a
real CommonMark + GFM-tables parser (markdown-it-py, the Python port of markdown-it): every row of every table has
as many cells as its header, and the hostile text is in its own cell, as text."""

import re

import pytest
from markdown_it import MarkdownIt

from ansible_collections.nodefix.k8s.plugins.module_utils._report import markdown as md
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document, model

HOSTILE = "a|b `c|d` ``|`` <b>e</b>\n| f | g |\\|"
FID = "kubelet.api_qps_low|x`y`<i>"


def tables(text):
    """[(header cells, [row cells])] of every table markdown-it finds in ``text`` (each cell its inline text)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    found, row, cell = [], None, None
    for tok in tokens:
        if tok.type == "table_open":
            found.append([])
        elif tok.type == "tr_open":
            row = []
            found[-1].append(row)
        elif tok.type in ("th_open", "td_open"):
            cell = []
            row.append(cell)
        elif tok.type == "inline" and cell is not None:
            cell.append("".join(c.content for c in tok.children or []))
        elif tok.type in ("th_close", "td_close"):
            cell = None
    return [([" ".join(c) for c in t[0]], [[" ".join(c) for c in r] for r in t[1:]]) for t in found]


def hostile_model():
    finding = {"id": FID, "severity": "medium", "check": "kubelet", "title": HOSTILE, "subject": HOSTILE,
               "remedy": HOSTILE, "fix": {"role": "nodefix.k8s.kubelet", "tag": "kube|let"}}
    results = {"n|1<b>": {"findings": [finding, dict(finding, id="pids.zombie|leaker")], "checks": {"kubelet": {}}}}
    m = model.build_model(results, before=results, remediation={"n|1<b>": {"status": "failed", "msg": HOSTILE}},
                          waivers=[{"id": "pids.*", "reason": HOSTILE}])
    m["nodes"][0]["changes"] = [{"what": HOSTILE, "before": HOSTILE, "after": "x|y"}]   # the change rows' table
    return m


def test_every_table_of_report_md_keeps_its_columns_with_hostile_text():
    text = document.to_markdown(hostile_model())
    found = tables(text)
    headers = [t[0][0] for t in found]
    assert headers == ["id", "id", "setting"], headers          # Findings, Waived, the node's changes: all parsed
    for header, rows in found:
        assert rows and all(len(r) == len(header) for r in rows), (header, rows)
    findings, waived, changes = found
    assert findings[1][0][0] == FID.replace("\n", " ") and findings[1][0][4] == md._one_line(HOSTILE)
    assert waived[1][0][0] == "pids.zombie|leaker" and waived[1][0][1] == md._one_line(HOSTILE)
    assert changes[1][0] == [md._one_line(HOSTILE), md._one_line(HOSTILE), "x|y", ""]


def test_a_code_span_with_a_pipe_is_text_that_a_table_and_a_paragraph_both_read_back():
    for value in ("a|b", "`|`", "x||y", "plain"):
        cell = "| h |\n|---|\n| %s |\n" % md.code(value)
        assert tables(cell)[0][1] == [[value]], (value, md.code(value))
        para = MarkdownIt("commonmark").render(md.code(value))
        assert "|" not in value or "\\|" not in para, para


@pytest.mark.parametrize("value", ["   # heading", "  > quote", "___", "***", "- - -", "    indented code", "1) item",
                                   "\t# tab", "=== setext", "+ list"])
def test_a_line_of_node_text_is_one_paragraph_of_the_same_text(value):
    """Review of issue 61 (2026-12-07): up to three leading blanks still opened a heading, ``___`` a thematic break,
    four blanks an indented code block. Parsed by markdown-it (CommonMark): one paragraph, the text as it was."""
    tokens = MarkdownIt("commonmark").parse("Nodes:\n\n" + md.line(value) + "\n")
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"] * 2, (value, md.line(value))
    assert tokens[4].children[0].content == value.lstrip(" \t")


@pytest.mark.parametrize("value", ["see www.evil.example/login", "https://evil.example/x?a=1", "ftp://evil.example/",
                                   "mail bob@evil.example now"])
def test_a_url_in_node_text_is_no_autolink(value):
    """GFM's autolink extension links ``www.``, a scheme's URL and an e-mail address with no markup: node text names
    none (an escaped ':', '.' or '@' keeps the text as it reads)."""
    out = md.text(value)
    assert not re.search(r"(?i)\b(?:https?|ftp)://|\bwww\.|\w@\w", out), out
    html = MarkdownIt("commonmark").render(out)
    assert value.replace("&", "&amp;") in html, html
