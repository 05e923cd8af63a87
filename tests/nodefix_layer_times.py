# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest plugin (pytest.ini: -p nodefix_layer_times): print where the time of
a run went, at the end of the run, so a slow layer or step shows in CI logs.

Two tables:
- time per test layer: tests/unit, tests/badinput, or one module of
  tests/integration (collection build, sanity/lint, molecule, the lab, ...);
  the sum of setup, call and teardown of its tests (module fixtures such as
  the lab's up/down included), and the session's wall clock.
- time per step: scripts/setup.sh's steps (apt, venvs, each image build, read
  from the file NODEFIX_SETUP_TIMES names; scripts/test.sh sets it), every
  subprocess the integration layers ran through conftest.run_logged that took
  STEP_MIN_SECONDS or more (each molecule scenario with its create, prepare,
  converge, idempotence, verify, ... steps; each lab phase), and every boot of
  a lab VM (lab/vm/vm.sh writes .cache/lab-vm/boots.tsv); under each run of a
  minute or more, its three slowest tasks and the host that finished last
  (tests/callback_plugins/nodefix_task_times.py).
"""

import collections
import json
import os
import time

_TIMES = collections.OrderedDict()
_START = [None]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = os.path.join(ROOT, ".cache", "test-logs", "steps.jsonl")
BOOTS = os.path.join(ROOT, ".cache", "lab-vm", "boots.tsv")
STEP_MIN_SECONDS = 5.0
SLOWEST_FOR_SECONDS = 60.0


def layer_of(nodeid):
    """'tests/unit/...' -> 'unit'; 'tests/integration/test_40_lab.py::x' -> 'integration/test_40_lab'."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] == "integration":
        return "integration/" + parts[2].rsplit(".py", 1)[0]
    if len(parts) > 1 and parts[0] == "tests":
        return parts[1]
    return parts[0]


def pytest_sessionstart():
    _START[0] = time.time()
    # scripts/test.sh starts the table (removes the file) before pytest: pytest runs
    # nested in the suite (molecule's testinfra verify reads pytest.ini too) must not


def pytest_runtest_logreport(report):
    key = layer_of(report.nodeid)
    _TIMES[key] = _TIMES.get(key, 0.0) + report.duration


def _line(label, seconds):
    return "%-72s %7.1f s  (%4.1f min)" % (label, seconds, seconds / 60.0)


def setup_steps(path):
    """[(label, seconds)] from scripts/setup.sh's "setup/NAME<TAB>seconds" lines."""
    rows = []
    if path and os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                label, _sep, seconds = line.rstrip("\n").partition("\t")
                if seconds.isdigit():
                    rows.append((label, float(seconds)))
    return rows


def run_steps(path, min_seconds=STEP_MIN_SECONDS):
    """[(label, seconds)]: each logged run of min_seconds or more, then its steps indented."""
    rows = []
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                entry = json.loads(line)
                if entry["seconds"] < min_seconds:
                    continue
                rows.append((entry["name"], entry["seconds"]))
                rows.extend(("  " + label, seconds) for label, seconds in entry["steps"])
                if entry["seconds"] >= SLOWEST_FOR_SECONDS:
                    rows.extend(("    slow task: %s [%s]" % (task[:60], host), seconds)
                                for task, seconds, host in entry.get("slowest_tasks", [])[:3])
    return rows


def vm_boots(path, since):
    """[(label, seconds)] for each VM boot lab/vm/vm.sh recorded since `since`."""
    rows = []
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                fields = line.rstrip("\n").split("\t")
                if len(fields) == 4 and fields[0].isdigit() and int(fields[0]) >= since:
                    rows.append(("VM %s boot to SSH (%s)" % (fields[1], fields[2]), float(fields[3])))
    return rows


def pytest_terminal_summary(terminalreporter):
    if not _TIMES:
        return
    terminalreporter.section("time per test layer")
    for key, seconds in _TIMES.items():
        terminalreporter.write_line(_line(key, seconds))
    total = time.time() - _START[0]
    terminalreporter.write_line(_line("all layers (wall clock)", total))
    rows = setup_steps(os.environ.get("NODEFIX_SETUP_TIMES")) + run_steps(STEPS) + vm_boots(BOOTS, int(_START[0]))
    if rows:
        terminalreporter.section("time per step (runs of %d s or more)" % STEP_MIN_SECONDS)
        for label, seconds in rows:
            terminalreporter.write_line(_line(label, seconds))
