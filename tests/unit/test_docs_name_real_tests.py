# SPDX-License-Identifier: GPL-3.0-or-later
"""Every test file the docs name as the proof of a claim exists: a test moved or deleted takes its docs row with it
(docs/safety.md named a deleted test file as the proof of the one-read cordon after the rollout was wired)."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_PATH = re.compile(r"\btests/[A-Za-z0-9_/]+\.py\b")


def named_test_files():
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for page in pages:
        with open(page) as fh:
            for path in set(TEST_PATH.findall(fh.read())):
                yield os.path.relpath(page, ROOT), path


def test_every_test_file_the_docs_name_exists():
    missing = sorted((page, path) for page, path in named_test_files() if not os.path.exists(os.path.join(ROOT, path)))
    assert missing == [], missing


def test_the_docs_name_test_files_at_all():
    # the pattern still finds what the pages name (a pattern that finds nothing would pass the test above)
    assert len(list(named_test_files())) > 50
