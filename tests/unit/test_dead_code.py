# SPDX-License-Identifier: GPL-3.0-or-later
"""Dead code stays removed: vulture (PyPI, requirements/dev.txt) over the collection and the
project's own code finds no function, class, variable or import nothing uses, except the names in
the reviewed allow-list (tests/unit/vulture_allowlist.py, each with why)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALLOW = os.path.join(ROOT, "tests", "unit", "vulture_allowlist.py")
# a module's documentation strings are read by ansible-doc, not by code
DOC_NAMES = "DOCUMENTATION,EXAMPLES,RETURN,READ_ONLY,WRITES"


def vulture(*paths):
    argv = [sys.executable, "-m", "vulture", "--min-confidence", "60", "--ignore-names", DOC_NAMES] + list(paths)
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_no_dead_code():
    rc, out = vulture("plugins", "lab", "benchmarks", "scripts", "tests/unit/vulture_allowlist.py")
    assert rc == 0, "unused code (remove it, or add it to tests/unit/vulture_allowlist.py with why):\n" + out


def test_the_check_can_fail(tmp_path):
    # the same command on a file with a function nothing calls must report it
    (tmp_path / "mod.py").write_text("def used():\n    return 1\n\n\ndef never_called():\n    return 2\n\n\nused()\n")
    rc, out = vulture(str(tmp_path / "mod.py"))
    assert rc != 0 and "never_called" in out and "used'" not in out, out
