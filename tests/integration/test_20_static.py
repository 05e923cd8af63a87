# SPDX-License-Identifier: GPL-3.0-or-later
"""Layers: ansible-test sanity (no docker) and ansible-lint (production profile)."""

import glob
import os

from conftest import ROOT, assert_ok, run_logged


def test_no_sanity_ignore_files():
    # Nothing is ignored, so there is no ignore file: an empty one only draws galaxy-importer's
    # warning ("Ignore files skip ansible-test sanity tests"), a non-empty one hides a failure.
    files = glob.glob(os.path.join(ROOT, "tests/sanity/ignore-*.txt"))
    assert not files, "sanity ignore files must not exist: %s" % files


def test_ansible_test_sanity():
    rc, out = run_logged("sanity", ["bash", "scripts/sanity.sh"], timeout=3600)
    assert_ok("sanity", rc, out)
    # a test ansible-test skips for a missing tool (it says so and passes) is not a test that ran
    # (scripts/setup.sh installs shellcheck; ansible-test sanity checks every *.sh with it)
    assert "Required program" not in out and "Skipping sanity test" not in out, \
        [line for line in out.splitlines() if "Required program" in line or "Skipping" in line]
    assert 'Running sanity test "shellcheck"' in out


def test_ansible_lint_production():
    rc, out = run_logged("ansible-lint", ["ansible-lint", "--offline", "--profile", "production"])
    assert_ok("ansible-lint", rc, out)
