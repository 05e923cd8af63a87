# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest plugin (pytest.ini: -p nodefix_layer_times): print the wall time of
each test layer at the end of the run, so a slow layer shows in CI logs.

A layer is tests/unit, tests/badinput, or one module of tests/integration
(collection build, sanity/lint, molecule, the lab, ...). The time is the sum
of setup, call and teardown of its tests (module fixtures such as the lab's
up/down included).
"""

import collections
import time

_TIMES = collections.OrderedDict()
_START = [None]


def layer_of(nodeid):
    """'tests/unit/...' -> 'unit'; 'tests/integration/test_40_lab.py::x' -> 'integration/test_40_lab'."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] == "integration":
        return "integration/" + parts[2].rsplit(".py", 1)[0]
    if len(parts) > 1 and parts[0] == "tests":
        return parts[1]
    return parts[0]


def pytest_sessionstart(session):
    _START[0] = time.time()


def pytest_runtest_logreport(report):
    key = layer_of(report.nodeid)
    _TIMES[key] = _TIMES.get(key, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _TIMES:
        return
    terminalreporter.section("time per test layer")
    for key, seconds in _TIMES.items():
        terminalreporter.write_line("%-36s %7.1f s  (%4.1f min)" % (key, seconds, seconds / 60.0))
    total = time.time() - _START[0]
    terminalreporter.write_line("%-36s %7.1f s  (%4.1f min)" % ("all layers (wall clock)", total, total / 60.0))
