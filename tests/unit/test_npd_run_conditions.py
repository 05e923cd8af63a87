# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/npd/files/run_conditions.py: the npd role's verify step, run here the way the role runs it
(`python3 -c <text> PLUGIN CONFIG LIMIT CONDITION...`) against a stand-in plugin (a shell script
that answers per condition), since the real plugin needs a node."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "roles/npd/files/run_conditions.py")) as _fh:
    RUNNER = _fh.read()

PLUGIN = """#!/bin/sh
[ "$1" = --config ] && [ "$3" = --condition ] || { echo "bad argv: $*" >&2; exit 9; }
case "$4" in
  Ok) echo "no problem on $2"; exit 0 ;;
  Problem) echo "PIDsRisk: pid_max 32768 < 4194304"; exit 1 ;;
  Unknown) echo "cannot read /proc" ; echo "trace" >&2; exit 2 ;;
  Crash) echo "Traceback" >&2; exit 3 ;;
  Slow) sleep 30; exit 0 ;;
esac
"""


def run(plugin, *conditions, limit="5"):
    proc = subprocess.run([sys.executable, "-c", RUNNER, plugin, "/etc/nodefix/npd.yml", limit] + list(conditions),
                          capture_output=True, timeout=60, check=True)
    return json.loads(proc.stdout)


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "nodefix-npd"
    path.write_text(PLUGIN)
    path.chmod(0o755)
    return str(path)


def test_each_condition_runs_in_its_own_process_with_its_exit_code_and_message(plugin):
    out = run(plugin, "Ok", "Problem", "Unknown", "Crash")
    assert out["installed"] is True
    rows = dict((r["condition"], r) for r in out["results"])
    assert [r["condition"] for r in out["results"]] == ["Ok", "Problem", "Unknown", "Crash"]
    assert rows["Ok"]["rc"] == 0 and rows["Ok"]["message"] == "no problem on /etc/nodefix/npd.yml"
    assert rows["Problem"]["rc"] == 1 and rows["Problem"]["message"].startswith("PIDsRisk")
    assert rows["Unknown"]["rc"] == 2 and rows["Unknown"]["stderr"] == "trace"
    assert rows["Crash"]["rc"] == 3 and rows["Crash"]["message"] == "" and rows["Crash"]["stderr"] == "Traceback"
    assert all(isinstance(r["seconds"], (int, float)) and r["seconds"] >= 0 for r in out["results"])


def test_a_condition_past_the_limit_is_killed_and_reported_without_an_exit_code(plugin):
    out = run(plugin, "Slow", "Ok", limit="1")
    slow, ok = out["results"]
    # killed (rc null; left alone it would exit 0 after 30 s), and not before its limit
    assert slow["rc"] is None and slow["seconds"] >= 1
    assert ok["rc"] == 0


def test_no_plugin_is_reported_as_not_installed(tmp_path):
    out = run(str(tmp_path / "absent"), "Ok")
    assert out == {"installed": False, "results": []}


def test_the_first_condition_starts_a_new_tick_and_the_others_share_it(tmp_path):
    """The first run reads the node afresh (NODEFIX_NPD_FRESH: not a result an earlier tick shared, e.g. before a
    fix); the others run as node-problem-detector's rules of one tick do, answering from that run's result."""
    path = tmp_path / "nodefix-npd"
    path.write_text('#!/bin/sh\necho "fresh=${NODEFIX_NPD_FRESH:-unset}"\nexit 0\n')
    path.chmod(0o755)
    out = run(str(path), "A", "B", "C")
    assert [r["message"] for r in out["results"]] == ["fresh=1", "fresh=unset", "fresh=unset"]
