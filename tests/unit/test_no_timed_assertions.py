# SPDX-License-Identifier: GPL-3.0-or-later
"""No test asserts a speed: the static rule that keeps duration assertions out of ``tests/``.

A test that bounds how long something took from above fails on a loaded machine although nothing is
wrong (a 2-core CI machine with another job beside it is an ordinary CI machine). Estimates, budgets and
costs are checked for their shape and direction in tests, and for their figures in ``benchmarks/``.

The rule, read from each test file's syntax tree: an ``assert`` may not put an upper bound on a
duration - ``took < 4.5``, ``time.monotonic() - t0 < 5``, ``result["stop_s"] <= bound``,
``0.5 * spent <= estimate_seconds <= 2.0 * spent`` (a band is an upper bound too). A duration is a call
to ``time.time``/``monotonic``/``perf_counter``, a name assigned from one, or a name, attribute or key
spelled like one (``*_s``, ``seconds``, ``secs``, ``took``, ``elapsed``, ``duration``, ``wall``).
Lower bounds (``>= 0``, ``>= budget``: "not before its limit") and bounds by 0 hold under any load and
are allowed. A line that compares recorded figures, not a clock of this run, says so with
``# not-timed: <reason>``.
"""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOCKS = {"time", "monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns", "time_ns"}
# datetime's clocks, and the seconds of a difference of them
DATETIME_CLOCKS = {"now", "utcnow", "total_seconds"}
DURATION = re.compile(r"(?:^|_)(?:s|secs?|seconds|ms|msecs?|millis|milliseconds|took|elapsed|duration|wall)$",
                      re.IGNORECASE)
# a configured limit, not a clock of this run (``timeout_ms``, ``cfg['timeout']``): never a duration itself;
# but what a measured figure is held under when it is one (``ms < NPD_TIMEOUT_MS``, ``r[1] < TIMEOUT``)
LIMIT = re.compile(r"timeout|limit|budget|deadline|interval", re.IGNORECASE)
TIME_LIMIT = re.compile(r"timeout|deadline", re.IGNORECASE)
MARK = "# not-timed:"


def _is_clock(node):
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if isinstance(func, ast.Attribute) and name in DATETIME_CLOCKS:
        return True
    return name in CLOCKS and (not isinstance(func, ast.Attribute) or isinstance(func.value, ast.Name)
                               and func.value.id == "time")


def _children(node):
    """The nodes under ``node`` that can carry a value (a called function's own name is not one:
    ``estimate_seconds(n, k)`` is a model's figure, not a clock)."""
    for field, value in ast.iter_fields(node):
        if isinstance(node, ast.Call) and field == "func":
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                yield child


def _word(node):
    """The name an expression's node is spelled with: a variable, an attribute, a key."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _timed(node, clocked):
    """Whether the expression carries a duration."""
    if _is_clock(node):
        return True
    word = _word(node)
    if word is not None and LIMIT.search(word):
        return False
    if isinstance(node, ast.Name) and node.id in clocked:
        return True
    if word is not None and DURATION.search(word):
        return True  # a key too: result["stop_s"]
    return any(_timed(child, clocked) for child in _children(node))


def _limited(node, words=LIMIT):
    """Whether the expression names a limit (a variable or attribute, not a key): with TIME_LIMIT, a time
    limit a measured figure would be held under (``TIMEOUT_MS``)."""
    return any(_word(n) is not None and not isinstance(n, ast.Constant) and words.search(_word(n))
               for n in ast.walk(node))


def _measured(node):
    """A figure that is not itself a configured limit nor a constant: what a run measured."""
    return not isinstance(node, ast.Constant) and not _limited(node) and not _sized(node)


def _sized(node):
    """A count or a size, not a time: anything of ``len(...)``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" for n in ast.walk(node))


def _zero(node):
    return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value == 0


def upper_bounds(tree):
    """(line, text) of every assert that bounds a duration from above."""
    clocked = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(_is_clock(n) for n in ast.walk(node.value)):
            clocked.update(t.id for t in node.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [cmp.left] + cmp.comparators
            for i, op in enumerate(cmp.ops):
                left, right = operands[i], operands[i + 1]
                if isinstance(op, (ast.Lt, ast.LtE)):
                    small, big = left, right
                elif isinstance(op, (ast.Gt, ast.GtE)):
                    small, big = right, left
                else:
                    continue
                if _timed(small, clocked) and not _zero(big):
                    found.append(node.lineno)
                elif _limited(big, TIME_LIMIT) and _measured(small) and not _zero(big):
                    found.append(node.lineno)   # held under a timeout: r[1] < NPD_TIMEOUT_MS
    return sorted(set(found))


def offenders(paths):
    out = []
    for path in paths:
        with open(path) as fh:
            text = fh.read()
        lines = text.splitlines()
        for line in upper_bounds(ast.parse(text, path)):
            if MARK not in lines[line - 1]:
                out.append("%s:%d: %s" % (os.path.relpath(path, ROOT), line, lines[line - 1].strip()))
    return out


def the_test_files():
    paths = []
    for base, _dirs, files in os.walk(os.path.join(ROOT, "tests")):
        paths.extend(os.path.join(base, f) for f in files if f.endswith(".py"))
    return sorted(paths)


def test_no_test_asserts_a_speed():
    assert offenders(the_test_files()) == []


def test_the_rule_catches_the_timed_assertions_it_is_for(tmp_path):
    """The rule itself can fail: each shape of timed assertion it exists for is caught, and the shapes
    that hold under any load (lower bounds, bounds by 0, configured limits, marked recorded figures) pass."""
    caught = {
        "took": "took = time.monotonic() - start\nassert took < 4.5\n",
        "inline": "import time\nt0 = time.monotonic()\nassert time.monotonic() - t0 < 5\n",
        "key": "assert first['timings']['stop_s'] <= bound\n",
        "band": "assert 0.5 * spent <= run['estimate']['estimate_seconds'] <= 2.0 * spent\n",
        "reversed": "assert 10 > r['seconds']\n",
        "chain": "assert 0 <= r['seconds'] < 5\n",
        "attr": "assert result.elapsed < limit\n",
        "datetime": "assert (datetime.now() - start).total_seconds() < 5\n",
        "ms": "assert ms < 5000\n",
        "under_a_timeout": "assert all(r[1] < NPD_TIMEOUT_MS for r in runs.values())\n",
        "timeout_over": "assert PLUGIN_TIMEOUT > run['took_ms']\n",
        "under_a_deadline": "assert r['spent'] < DEADLINE\n",
    }
    allowed = {
        "lower": "assert first['timings']['stop_s'] >= BUDGET\nassert slow['seconds'] >= 1\n",
        "zero": "assert node['seconds'] > 0\nassert 0 < r['seconds']\n",
        "config": "assert seconds(r['timeout']) <= seconds(cfg['timeout'])\nassert 0 < timeout_ms <= 3000\n",
        "marked": "assert abs(acc['estimate_seconds'] - acc['wall']) <= 0.3  # not-timed: recorded benchmark runs\n",
        "counts": "assert len(hosts) <= 3\nassert sum(len(a) for a in argv) <= argv_budget()\n",
        "limits": "assert timeout_ms <= 5000 * BUDGET_SHARE\nassert lines <= LIMIT\n",
        "model": "assert detect.estimate_seconds(131072, 131072) > 13 * detect.estimate_seconds(10000, 10000)\n",
    }
    paths = {}
    for name, src in list(caught.items()) + list(allowed.items()):
        paths[name] = tmp_path / ("%s.py" % name)
        paths[name].write_text(src)
    for name in caught:
        assert offenders([str(paths[name])]), name
    for name in allowed:
        assert offenders([str(paths[name])]) == [], name
