# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest plugin (pytest.ini: -p nodefix_watchdog): a test that hangs fails,
names itself and gives the rest of the run its time back.

A test that waits forever (a lock a leaked process still holds, a VM that never
answers, a subprocess without a timeout) would otherwise hold its worker until
CI's hard limit kills the whole run, with no summary line and no name: all the
log shows is the dots of the tests that ended. Each test (setup, call and
teardown, module fixtures included) gets a limit:

- NODEFIX_TEST_LIMIT seconds (default 2400: the longest test, the end-to-end
  lab's first one with the lab's set-up, takes ~1000 s on a slow bare host);
- never past NODEFIX_RUN_DEADLINE (seconds since the epoch; scripts/test.sh sets
  it 85 minutes after it starts, before CI's 90-minute limit): a test still
  running then fails, and a test not started by then fails at once without
  running, so the run still ends with its tables and pytest's summary line.

When the limit passes, SIGALRM (the process's own timer, in the main thread)
prints the test's name, where its Python code waits and the processes it
started that are still running, stops those (TERM, then KILL after
KILL_AFTER_SECONDS: a `flock LOCK molecule ...` must not leave molecule holding
the lock), and fails the test there; its teardown gets TEARDOWN_SECONDS more.
Processes started before the test (a session fixture's API double) are left.

Only the process that runs tests arms it (each xdist worker, or pytest itself
without xdist); the processes it starts inherit NODEFIX_WATCHDOG_PID and a
pytest nested in a test (molecule's testinfra verify) never arms its own.
"""

import os
import signal
import sys
import time
import traceback

import pytest

DEFAULT_LIMIT = 2400.0
TEARDOWN_SECONDS = 300.0
KILL_AFTER_SECONDS = 10.0
ARMED_ENV = "NODEFIX_WATCHDOG_PID"


class TestTimedOut(Exception):
    """Raised in the test's main thread when its limit passes."""

    __test__ = False


def _float_env(name, default):
    value = os.environ.get(name, "")
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise pytest.UsageError("%s=%r is not a number of seconds" % (name, value))


def _clock_ticks():
    return os.sysconf("SC_CLK_TCK")


_BTIME = []


def _boot_time():
    if not _BTIME:
        with open("/proc/stat") as stat:
            _BTIME.extend(float(line.split()[1]) for line in stat if line.startswith("btime "))
    return _BTIME[0] if _BTIME else 0.0


def _stat(pid):
    """(ppid, start time since the epoch, command) of PID, or None when it is gone (or a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            raw = handle.read()
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = handle.read().split(b"\0")
    except (IOError, OSError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    started = _boot_time() + float(fields[19]) / _clock_ticks()
    command = " ".join(part.decode("utf-8", "replace") for part in argv if part)[:200]
    return int(fields[1]), started, command


def descendants(root, since):
    """[(pid, command)] of ROOT's descendants started at SINCE or later (parents first)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            entry = _stat(int(name))
            if entry:
                table[int(name)] = entry
    children = {}
    for pid, (ppid, _started, _command) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, queue = [], [root]
    while queue:
        for pid in sorted(children.get(queue.pop(0), ())):
            queue.append(pid)
            if table[pid][1] >= since - 1:
                found.append((pid, table[pid][2]))
    return found


def stop_processes(processes):
    """TERM then (after KILL_AFTER_SECONDS) KILL each of PROCESSES still running."""
    for pid, _command in processes:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + KILL_AFTER_SECONDS
    alive = list(processes)
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [(pid, command) for pid, command in alive if _stat(pid) is not None]
    for pid, _command in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Watchdog(object):
    def __init__(self, limit, deadline):
        self.limit = limit
        self.deadline = deadline
        self.nodeid = None
        self.started = None
        self.fired = False

    def seconds_left(self, now):
        left = self.limit - (now - self.started)
        if self.deadline:
            left = min(left, self.deadline - now)
        return left

    def arm(self, seconds):
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))

    def disarm(self):
        signal.setitimer(signal.ITIMER_REAL, 0)

    def on_alarm(self, _signum, frame):
        now = time.time()
        why = ("the run's deadline (NODEFIX_RUN_DEADLINE) passed" if self.deadline and now >= self.deadline - 1
               else "its limit of %d s (NODEFIX_TEST_LIMIT) passed" % self.limit)
        # its teardown gets TEARDOWN_SECONDS more, but never more than a minute past the run's deadline
        grace = TEARDOWN_SECONDS if not self.deadline else max(1.0, min(TEARDOWN_SECONDS, self.deadline + 60 - now))
        if self.fired:
            self.arm(grace)
            msg = "%s: still running after its limit; stopped again" % self.nodeid
        else:
            self.fired = True
            self.arm(grace)
            msg = "%s: %s after %d s" % (self.nodeid, why, now - self.started)
        processes = descendants(os.getpid(), self.started)
        lines = ["", "=" * 20 + " nodefix watchdog " + "=" * 20, msg, "where its code waits:"]
        lines.extend("  " + line.rstrip() for line in traceback.format_stack(frame)[-8:])
        lines.append("processes it started that still run (stopped now): %d" % len(processes))
        lines.extend("  %d %s" % entry for entry in processes)
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        stop_processes(processes)
        raise TestTimedOut(msg + " (its processes: %s)" % (", ".join(c for _p, c in processes[:5]) or "none"))


_DOG = [None]


def pytest_configure(config):
    if os.environ.get(ARMED_ENV) or not hasattr(signal, "setitimer"):
        return
    limit = _float_env("NODEFIX_TEST_LIMIT", DEFAULT_LIMIT)
    deadline = _float_env("NODEFIX_RUN_DEADLINE", 0.0)
    if limit <= 0:
        limit = float("inf")   # no limit per test; the run's deadline still holds
    if limit == float("inf") and not deadline:
        return
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        _DOG[0] = Watchdog(limit, deadline)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    dog = _DOG[0]
    if dog is None:
        yield
        return
    os.environ[ARMED_ENV] = str(os.getpid())
    dog.nodeid, dog.started, dog.fired = item.nodeid, time.time(), False
    previous = signal.signal(signal.SIGALRM, dog.on_alarm)
    left = dog.seconds_left(dog.started)
    if left > 0:   # else pytest_runtest_setup fails it without running it
        dog.arm(left)
    try:
        yield
    finally:
        dog.disarm()
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    dog = _DOG[0]
    if dog is not None and dog.deadline and time.time() >= dog.deadline:
        pytest.fail("not run: the run's deadline (NODEFIX_RUN_DEADLINE) had passed", pytrace=False)
