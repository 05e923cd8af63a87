# SPDX-License-Identifier: GPL-3.0-or-later
"""Layers: ansible-test sanity (no docker) and ansible-lint (production profile)."""

import glob
import os

from conftest import ROOT, assert_ok, run_logged


def test_sanity_ignore_files_are_empty():
    files = glob.glob(os.path.join(ROOT, "tests/sanity/ignore-*.txt"))
    assert files, "tests/sanity/ignore-2.19.txt is missing"
    for path in files:
        with open(path) as fh:
            assert fh.read().strip() == "", "%s must stay empty" % path


def test_ansible_test_sanity():
    rc, out = run_logged("sanity", ["bash", "scripts/sanity.sh"], timeout=3600)
    assert_ok("sanity", rc, out)


def test_ansible_lint_production():
    rc, out = run_logged("ansible-lint", ["ansible-lint", "--offline", "--profile", "production"])
    assert_ok("ansible-lint", rc, out)
