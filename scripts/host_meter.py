#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the machine gave a run, so that runs on different hosts can be compared (docs/test-times.md).

    host_meter.py start FILE   record the machine's CPU counters (/proc/stat) and time a fixed
                               pure-Python loop (this host's single-core speed)
    host_meter.py end FILE     print the CPU-seconds the whole machine spent since ``start``:
                               busy (user, nice, system, irq, softirq), idle (idle, iowait), steal

A run's wall clock on a CPU-bound 2-core machine is its busy CPU-s over two, and both depend on the
host: the same commit took 39.8 and 51.1 min on two hosts. The reference loop says how fast this
host's cores are (lower is faster); steal says how much of the time the hypervisor gave elsewhere.
Standard library only: it runs before the set-up makes the venv.
"""

import json
import os
import sys
import time

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_counters():
    with open("/proc/stat") as fh:
        first = fh.readline().split()
    if first[0] != "cpu":
        raise SystemExit("host_meter: /proc/stat does not start with the cpu line")
    hz = os.sysconf("SC_CLK_TCK")
    return dict((name, int(value) / float(hz)) for name, value in zip(FIELDS, first[1:]))


def reference_loop():
    """CPU seconds of a fixed loop (ten million additions), the better of two."""
    best = None
    for _attempt in range(2):
        start = time.process_time()
        total = 0
        for i in range(10 ** 7):
            total += i
        took = time.process_time() - start
        best = took if best is None else min(best, took)
    return best


def main(argv):
    if len(argv) != 3 or argv[1] not in ("start", "end"):
        raise SystemExit("usage: host_meter.py start|end FILE")
    path = argv[2]
    if argv[1] == "start":
        record = {"cpu": cpu_counters(), "cores": os.cpu_count(), "loop": reference_loop()}
        with open(path, "w") as fh:
            json.dump(record, fh)
        print("host: %d cores, reference loop %.2f CPU-s (10^7 Python additions; lower is faster)"
              % (record["cores"], record["loop"]))
        return 0
    try:
        with open(path) as fh:
            record = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        print("host: no start record (%s): the machine's CPU over the run is not known" % exc)
        return 0
    now = cpu_counters()
    spent = dict((name, now[name] - record["cpu"][name]) for name in FIELDS)
    busy = spent["user"] + spent["nice"] + spent["system"] + spent["irq"] + spent["softirq"]
    print("host: the machine spent %.0f CPU-s busy (user %.0f, system %.0f), %.0f idle, %.0f stolen, on %d cores; "
          "reference loop %.2f CPU-s" % (busy, spent["user"] + spent["nice"], spent["system"],
                                         spent["idle"] + spent["iowait"], spent["steal"], record["cores"],
                                         record["loop"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
