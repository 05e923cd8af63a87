# SPDX-License-Identifier: GPL-3.0-or-later
"""Small files by job (issue 62): no file under ``plugins/module_utils`` is over 600 lines.

Every ``.py`` file at any depth is held to it, ``__init__.py`` included; nothing is excluded. A file
another change is splitting right now is marked in ``BEING_SPLIT`` as a strict xfail that names the
issue: strict, so the mark itself fails the moment the file is within the limit (then delete the entry),
and an entry naming a file that no longer exists fails too - the mark cannot outlive the split.
"""

import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT = 600
BEING_SPLIT = {}


def count_lines(path):
    """Lines as ``wc -l`` counts them, plus a last line without its newline."""
    with open(path, "rb") as fh:
        data = fh.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def module_utils_files():
    found = glob.glob(os.path.join(ROOT, "plugins", "module_utils", "**", "*.py"), recursive=True)
    return sorted(os.path.relpath(p, ROOT).replace(os.sep, "/") for p in found)


def _params():
    return [pytest.param(rel, marks=pytest.mark.xfail(strict=True, reason=BEING_SPLIT[rel])) if rel in BEING_SPLIT
            else rel for rel in module_utils_files()]


@pytest.mark.parametrize("rel", _params())
def test_no_module_utils_file_is_over_600_lines(rel):
    lines = count_lines(os.path.join(ROOT, rel))
    assert lines <= LIMIT, "%s has %d lines, over %d: split it by job inside its package (issue 62)" % (
        rel, lines, LIMIT)


def test_the_walk_sees_every_depth_and_every_marked_file():
    files = module_utils_files()
    # the packages' modules and their (empty) markers alike
    assert "plugins/module_utils/_core/runner.py" in files and "plugins/module_utils/_core/__init__.py" in files
    assert len(files) >= 50, len(files)
    stale = sorted(set(BEING_SPLIT) - set(files))
    assert stale == [], "BEING_SPLIT names files that do not exist (remove the entries): %s" % stale


def test_the_count_is_the_limit_exactly(tmp_path):
    at, over, unterminated = tmp_path / "at.py", tmp_path / "over.py", tmp_path / "tail.py"
    at.write_text("x = 1\n" * LIMIT)
    over.write_text("x = 1\n" * (LIMIT + 1))
    unterminated.write_text("x = 1\n" * LIMIT + "y = 2")
    assert count_lines(str(at)) == LIMIT
    assert count_lines(str(over)) == LIMIT + 1
    assert count_lines(str(unterminated)) == LIMIT + 1
