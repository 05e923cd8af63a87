# SPDX-License-Identifier: GPL-3.0-or-later
"""The README is for users (issue 60): short, one current figure each for the demo and the test command,
every link resolving; the developers' pages (test layers, the test command's time log) stay out of the
users' docsite that scripts/docsite.sh builds."""

import glob
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
# "The demo took 12.5 min (cecd21c)": the figure, then the commit it was measured on
FIGURE = re.compile(r"\b(?P<what>demo|test command) took (?P<min>\d+(?:\.\d+)?) min \((?P<sha>[0-9a-f]{7,12})\)")
ANY_FIGURE = re.compile(r"\b\d+(?:\.\d+)? min\b[^|\n]{0,40}\([0-9a-f]{7,12}\b")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def first_screen(text):
    return text.split("\n## ", 1)[0]


def figures(text):
    return [m.groupdict() for m in FIGURE.finditer(first_screen(text))]


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", read(path), re.M)}


def broken_links(path):
    bad = []
    for target in LINK.findall(read(path)):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, dummy, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(dest):
            bad.append(target)
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append(target)
    return bad


def developer_pages():
    m = re.search(r"^developer_pages=\(([^)]*)\)", read(os.path.join(ROOT, "scripts", "docsite.sh")), re.M)
    return set(m.group(1).split())


def test_the_readme_is_short_and_its_lines_wrapped():
    lines = read(README).split("\n")
    assert len(lines) <= 400
    assert [n for n, line in enumerate(lines, 1) if len(line) > 400] == []


def test_one_figure_each_for_the_demo_and_the_test_command_on_the_first_screen():
    text = read(README)
    found = figures(text)
    assert sorted(f["what"] for f in found) == ["demo", "test command"], found
    # one line each, and no other figure anywhere in the README to disagree with them
    assert len(ANY_FIGURE.findall(text)) == 2, ANY_FIGURE.findall(text)
    for f in found:
        rc = subprocess.call(["git", "-C", ROOT, "cat-file", "-e", f["sha"] + "^{commit}"], stderr=subprocess.DEVNULL)
        assert rc == 0, "the %s figure names %s, not a commit of this repository" % (f["what"], f["sha"])


def test_the_figure_check_sees_a_second_figure():
    planted = "x\n\nThe demo took 12.5 min (cecd21c).\nThe test command took 39.6 min (9311d63).\n\n## A\n"
    assert len(figures(planted)) == 2
    assert len(ANY_FIGURE.findall(planted + "Latest: 41.7 min (d7e3f70)\n")) == 3
    assert figures(planted.replace("(cecd21c)", "(to be measured)")) == [figures(planted)[1]]


def test_the_commands_stay_on_the_first_screen():
    screen = first_screen(read(README))
    for command in ("bash scripts/demo.sh", "bash scripts/test.sh"):
        assert re.search(r"^%s\b" % re.escape(command), screen, re.M), command


def test_every_link_of_the_readme_and_the_docs_resolves():
    pages = [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    bad = {os.path.relpath(p, ROOT): broken_links(p) for p in pages}
    assert {p: b for p, b in bad.items() if b} == {}


def test_the_link_check_sees_a_broken_link_and_anchor(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# The lab's connection\n")
    page.write_text("# Top\n[a](other.md#the-labs-connection) [b](#top) [c](missing.md) [d](other.md#nope)\n")
    assert broken_links(str(page)) == ["missing.md", "other.md#nope"]


def test_the_developers_pages_stay_out_of_the_users_docsite():
    dev = developer_pages()
    assert {"DEVELOPING", "testing", "test-times"} <= dev
    pages = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))}
    assert dev <= pages, "developer_pages names a page docs/ does not have: %s" % sorted(dev - pages)
    # a user guide linking to a page the docsite leaves out would be a broken link there (Sphinx -W fails)
    for guide in sorted(pages - dev):
        targets = LINK.findall(read(os.path.join(ROOT, "docs", guide + ".md")))
        linked = {t.partition("#")[0][:-3] for t in targets if not re.match(r"[a-z]+:", t) and ".md" in t}
        assert not linked & dev, "%s links to a developers' page: %s" % (guide, sorted(linked & dev))


def test_developing_points_at_the_developers_pages():
    text = read(os.path.join(ROOT, "docs", "DEVELOPING.md"))
    for page in ("testing.md", "test-times.md"):
        assert "](%s" % page in text, page
