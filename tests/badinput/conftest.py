# SPDX-License-Identifier: GPL-3.0-or-later
"""The bad-input layer: hostile-but-realistic input against every module.

Each case gives a module a fake node tree (``root``/``path`` under
``tmp_path``) and one bad input, then asserts either

- a clear failure whose message names the problem, and a tree that is
  byte-identical afterwards (content, mode, owner, symlink targets: see
  ``snapshot``), or
- the correct write, checked on the tree itself.

Modules run in-process through the unit layer's ``run_module`` (their real
``main()``, ``fail_json``/``exit_json`` intercepted): any other exception
escaping a module is a traceback and fails the case.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
_link = os.path.join(COLLECTIONS, "ansible_collections", "nodefix", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(ROOT, _link)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

from ansible_collections.nodefix.k8s.tests.unit import conftest as unit  # noqa: E402

# the unit layer's fixtures, shared: run_module runs a module's main() in process
run_module = unit.run_module
make_tree = unit.make_tree
# what "nothing changed" compares (content, mode, owner, symlink targets)
snapshot = unit.snapshot


def refused(run, module, args, base, words, **kw):
    """Run ``module``; it must fail with every one of ``words`` in its message and change nothing under ``base``."""
    before = snapshot(base)
    result, failed, _table = run(module, args, **kw)
    assert failed, "expected a clear failure, got %r" % (result,)
    msg = result["msg"]
    assert "Traceback" not in msg and "exception" not in result, result
    for word in words:
        assert word in msg, "%r not in message %r" % (word, msg)
    assert snapshot(base) == before, "the tree changed on a failed run"
    return result


def read(path):
    with open(path, "rb") as fh:
        return fh.read().decode("utf-8")
