# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/nodefix_watchdog.py: a hanging test fails by name, the processes it
started stop (a leaked `flock` child must not keep the lock), the ones started
before it stay, and after the run's deadline the rest fail without running.
Each case runs a real pytest in a subprocess on a throw-away test file."""

import os
import subprocess
import sys
import time

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HANGS = '''
import fcntl, os, subprocess, time

def test_holds_a_lock_forever(tmp_path):
    lock = os.environ["LOCK"]
    # a child that holds the lock (flock(1) passes its fd on, as `flock LOCK molecule test` does)
    subprocess.Popen(["flock", lock, "sleep", "600"])
    time.sleep(0.5)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)   # waits forever: the child holds it

def test_after_it_runs():
    assert True
'''

SLOW = '''
import time

def test_one():
    time.sleep(0.5)

def test_two():
    time.sleep(float(__import__("os").environ.get("SLEEP", "0.5")))

def test_three():
    assert True
'''


def run_pytest(tmp_path, source, env_extra, *args):
    test = tmp_path / "test_inner.py"
    test.write_text(source)
    env = dict(os.environ)
    env.pop("NODEFIX_WATCHDOG_PID", None)     # the outer run armed its own; this one is a new run
    env.pop("PYTEST_XDIST_WORKER", None)
    env.update(env_extra)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "nodefix_watchdog", "-q",
            "-o", "addopts=", "-o", "pythonpath=%s" % TESTS, "--rootdir", str(tmp_path), str(test)] + list(args)
    return subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)


def sleepers(lock):
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "flock %s sleep 600" % lock in line or
            ("sleep 600" in line and lock in line)]


def test_a_test_that_hangs_fails_by_name_and_its_lock_holder_is_stopped(tmp_path):
    lock = str(tmp_path / "lab.lock")
    result = run_pytest(tmp_path, HANGS, {"LOCK": lock, "NODEFIX_TEST_LIMIT": "3"})   # a hang: its 120 s timeout
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "test_inner.py::test_holds_a_lock_forever: its limit of 3 s (NODEFIX_TEST_LIMIT) passed" in out, out
    assert "fcntl.flock(handle, fcntl.LOCK_EX)" in out, out       # where it waited
    assert "flock %s sleep 600" % lock in out, out               # what it had started
    assert sleepers(lock) == []                                  # stopped: nothing holds the lock
    with open(lock, "a") as handle:
        import fcntl
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)       # free


def test_a_process_started_before_the_test_is_left_running(tmp_path):
    from nodefix_watchdog import descendants
    before = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(1.2)
        since = time.time()
        after = subprocess.Popen(["sleep", "60"])
        try:
            pids = [pid for pid, _command in descendants(os.getpid(), since)]
            assert after.pid in pids
            assert before.pid not in pids
        finally:
            after.kill()
            after.wait()
    finally:
        before.kill()
        before.wait()


@pytest.mark.parametrize("limit", ["600", "0"])   # 0: no limit per test, the deadline still holds
def test_after_the_runs_deadline_the_test_running_fails_and_the_rest_fail_unrun(tmp_path, limit):
    deadline = time.time() + 8
    result = run_pytest(tmp_path, SLOW, {"NODEFIX_RUN_DEADLINE": "%.3f" % deadline, "NODEFIX_TEST_LIMIT": limit,
                                         "SLEEP": "120"},
                        "-rfE")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "the run's deadline (NODEFIX_RUN_DEADLINE) passed" in out, out          # test_two, cut short
    assert "not run: the run's deadline (NODEFIX_RUN_DEADLINE) had passed" in out, out   # test_three
    assert "1 failed, 1 passed, 1 error" in out, out


def test_under_xdist_each_worker_arms_it(tmp_path):
    result = run_pytest(tmp_path, HANGS, {"LOCK": str(tmp_path / "x.lock"), "NODEFIX_TEST_LIMIT": "3"}, "-n", "1")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 failed, 1 passed" in out, out


def test_a_pytest_started_by_an_armed_test_does_not_arm_its_own(tmp_path):
    env = {"NODEFIX_WATCHDOG_PID": "1", "NODEFIX_TEST_LIMIT": "1", "SLEEP": "2"}
    result = run_pytest(tmp_path, SLOW, env)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "3 passed" in out, out


def test_a_limit_that_is_not_a_number_is_refused_by_name(tmp_path):
    result = run_pytest(tmp_path, SLOW, {"NODEFIX_TEST_LIMIT": "ten"})
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    assert "NODEFIX_TEST_LIMIT='ten' is not a number of seconds" in out, out
