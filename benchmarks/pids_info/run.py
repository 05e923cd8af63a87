#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: nodefix.k8s pids_info over a synthetic /proc.

Builds a fake node root (default 50,000 tasks: 45,000 single-threaded
processes, 500 processes with 11 threads, 1,000 zombies under two leaking
parents, one of them in a pod) in a temporary directory on tmpfs
(``/dev/shm`` when writable: like procfs, it lives in memory), then times
``pids_detect.check()`` over it, the way the module runs it. Prints the build
time, the best, median and worst wall-clock and CPU times over ``--repeat``
runs, and what was found. Not a test: no assertion on time; exit status 1
only when the result is wrong.

    python benchmarks/pids_info/run.py [--tasks 50000] [--repeat 5] [--dir /dev/shm] [--keep DIR]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect
# the same /proc/<pid>/stat lines the unit tests use
from ansible_collections.nodefix.k8s.tests.unit.plugins.module_utils.test_pids import stat_line  # noqa: E402

POD = "1d2c3b4a-0000-4000-8000-00000000beef"
CID = "c0ffee" * 10 + "abcd"
LEAKER_CGROUP = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
                 "cri-containerd-%s.scope\n" % (POD.replace("-", "_"), CID))


def write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def build(base, tasks):
    proc = os.path.join(base, "proc")
    os.makedirs(os.path.join(proc, "sys/kernel"))
    write(os.path.join(proc, "sys/kernel/pid_max"), "4194304\n")
    write(os.path.join(proc, "sys/kernel/threads-max"), "255782\n")
    write(os.path.join(proc, "stat"), "cpu  1 2 3 4\nbtime 1763700000\n")
    write(os.path.join(proc, "uptime"), "86400.00 170000.00\n")
    pid = 1
    made = 0

    def proc_dir(pid, comm, state, ppid, threads, start, cmdline=None, cgroup=None):
        d = os.path.join(proc, str(pid))
        os.mkdir(d)
        write(os.path.join(d, "stat"), stat_line(pid, comm, state, ppid, threads, start))
        if cmdline is not None:
            write(os.path.join(d, "cmdline"), cmdline)
            write(os.path.join(d, "cgroup"), cgroup or "0::/\n")
            write(os.path.join(d, "status"), "Name:\t%s\nNSpid:\t%d\t1\n" % (comm, pid))

    proc_dir(1, "systemd", "S", 0, 1, 1, "/sbin/init\0", "0::/init.scope\n")
    made += 1
    # two leaking parents: 800 zombies in a pod, 200 in a service
    proc_dir(2, "supercronic", "S", 1, 8, 500, "/usr/local/bin/supercronic\0-json\0/crontabs/cron\0", LEAKER_CGROUP)
    proc_dir(3, "leaker", "S", 1, 1, 600, "python3\0/usr/local/bin/leak\0", "0::/system.slice/leak.service\n")
    made += 9
    pid = 10
    for i in range(800):
        proc_dir(pid, "curl", "Z", 2, 1, 1000 + i)
        pid += 1
    for i in range(200):
        proc_dir(pid, "sh", "Z", 3, 1, 2000 + i)
        pid += 1
    made += 1000
    threaded = 500
    for i in range(threaded):
        proc_dir(pid, "java", "S", 1, 11, 3000)
        pid += 1
    made += threaded * 11
    while made < tasks:
        proc_dir(pid, "sleep", "S", 1, 1, 4000)
        pid += 1
        made += 1
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", help="build the tree in this directory and keep it")
    ap.add_argument("--dir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                    help="parent directory of the temporary tree (default /dev/shm when writable)")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="nodefix-proc-bench.", dir=args.dir)
    try:
        t0 = time.perf_counter()
        made = build(base, args.tasks)
        built = time.perf_counter() - t0
        times = []
        cpu = []
        result = None
        for _run in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            result = pids_detect.check(None, root=base, clk_tck=100)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        leakers = [(f["evidence"]["pid"], f["evidence"]["zombies"]) for f in result["findings"]
                   if f["id"] == "pids.zombie_leaker"]
        print("synthetic /proc: %d tasks in %d processes (built in %.1f s)" % (made, result["processes"], built))
        print("pids_info check over %s: wall best %.3f s, median %.3f s, worst %.3f s; cpu median %.3f s (%d runs)" % (
            base, min(times), statistics.median(times), max(times), statistics.median(cpu), len(times)))
        print("found: tasks=%d zombies=%d leakers=%s" % (result["tasks"], result["zombies"], leakers))
        ok = result["tasks"] == made and result["zombies"] == 1000 and sorted(leakers) == [(2, 800), (3, 200)]
        verdict = "under" if statistics.median(times) < 1.0 else "OVER"
        with open("/proc/loadavg") as fh:
            load = " ".join(fh.read().split()[:3])
        print("result %s; median %s one second (load average %s)" % ("correct" if ok else "WRONG", verdict, load))
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
