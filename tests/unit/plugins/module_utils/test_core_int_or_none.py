# SPDX-License-Identifier: GPL-3.0-or-later
"""_core.text.int_or_none: the one "a number read from the node, or None" helper (review finding D3: _gvisor/sandboxes
and _pids/detect each had a copy). Its table, and no module_utils file defining a copy of it again: a function whose
whole body is ``try: return int(x)`` / ``except (TypeError, ValueError): return None``."""

import ast
import glob
import os

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import text as core_text
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import sandboxes
from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))


@pytest.mark.parametrize("text, number", [("4096", 4096), (" 12\n", 12), ("-3", -3), ("0x10", None), ("1.5", None),
                                          ("", None), (None, None), ("max", None), (7, 7)])
def test_int_or_none(text, number):
    assert core_text.int_or_none(text) == number


def test_the_callers_use_the_one_helper():
    assert sandboxes.int_or_none is pids_detect.int_or_none is core_text.int_or_none
    argv = ["runsc", "--total-memory=1048576", "--total-host-memory", "x", "boot", "id1"]
    assert sandboxes.sandbox_from_cmdline(argv)["total_memory"] == 1048576


def _is_copy(func):
    """Whether ``func`` is int_or_none again (any names): try: return int(<arg>) except (TypeError, ValueError):
    return None."""
    body = [n for n in func.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Try) or len(body[0].handlers) != 1:
        return False
    tried, handler = body[0].body, body[0].handlers[0]
    returns_int = (len(tried) == 1 and isinstance(tried[0], ast.Return) and isinstance(tried[0].value, ast.Call)
                   and getattr(tried[0].value.func, "id", None) == "int")
    caught = sorted(getattr(e, "id", "") for e in getattr(handler.type, "elts", [handler.type]))
    returns_none = (len(handler.body) == 1 and isinstance(handler.body[0], ast.Return)
                    and isinstance(handler.body[0].value, ast.Constant) and handler.body[0].value.value is None)
    return returns_int and caught == ["TypeError", "ValueError"] and returns_none


def test_no_other_copy_in_module_utils():
    copies = []
    for path in glob.glob(os.path.join(REPO, "plugins", "**", "*.py"), recursive=True):
        with open(path) as fh:
            tree = ast.parse(fh.read())
        copies += ["%s:%s" % (os.path.relpath(path, REPO), f.name) for f in ast.walk(tree)
                   if isinstance(f, ast.FunctionDef) and _is_copy(f)]
    assert copies == ["plugins/module_utils/_core/text.py:int_or_none"]
