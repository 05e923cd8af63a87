# SPDX-License-Identifier: GPL-3.0-or-later
"""Measure a command's whole process tree: CPU, wall and peak RSS, daemons included.

    python benchmarks/measure.py OUT -- ARGV...

Runs ARGV as a child subreaper (PR_SET_CHILD_SUBREAPER): whatever the tree daemonizes (ssh's
ControlPersist masters, podman's conmon) is reparented here, ended when ARGV returns and reaped,
so its CPU is counted. Writes {rc, wall, cpu (user+sys of every process), maxrss_kib (the largest
process), daemons (how many were ended)} to OUT as JSON and ARGV's output to OUT.log.
Used by benchmarks/fleet/ssh.py and benchmarks/lab_connection/run.py, which also take their
result-file writer and the lab lock from here (as benchmarks/fleet/run.py does).
"""

import ctypes
import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import time


def lab_lock():
    """Hold the project's lab lock (one podman job at a time on the 2-core machine); the test suite's
    smoke runs pass the pod lock instead (NODEFIX_FLEET_LOCK: their few unprivileged containers touch
    nothing of the lab's). Returns the open lock file: the lock lasts as long as it stays open."""
    lock = open(os.environ.get("NODEFIX_FLEET_LOCK") or os.environ.get("NODEFIX_LAB_LOCK", "/tmp/nodefix-lab.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def write_json(path, data):
    """DATA as indented JSON with a final newline: the benchmarks' result files."""
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")


def orphans():
    """{pid: command line} of the processes reparented to this one ('' for an exited one)."""
    me, pids = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                stat = fh.read()
            if int(stat[stat.rindex(")") + 2:].split()[1]) != me:
                continue
            with open("/proc/%s/cmdline" % entry) as fh:
                pids[int(entry)] = fh.read()
        except OSError:
            continue
    return pids


def measure(out, argv):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:   # PR_SET_CHILD_SUBREAPER
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
    t0 = time.time()
    with open(out + ".log", "w") as log:
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.time() - t0
    left = orphans()
    for pid in left:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in left:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as fh:
        json.dump({"rc": rc, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss,
                   "daemons": len([p for p, cmd in left.items() if cmd])}, fh)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        raise SystemExit("usage: measure.py OUT -- ARGV...")
    measure(sys.argv[1], sys.argv[3:])
