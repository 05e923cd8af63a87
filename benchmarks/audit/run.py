#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the audit as one node_audit call per node vs. the same checks
as separate shell tasks, on the lab fleet (3 containers).

Usage (from the repository root, after scripts/setup.sh):
    . scripts/env.sh && python benchmarks/audit/run.py [--runs 3] [--keep] [--targets GROUP_OR_HOST]
Brings the lab up (lab/up.yml) unless --no-up, times each playbook --runs
times, prints the medians and the ratio, then takes the lab down unless --keep.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INV = ["-i", os.path.join(ROOT, "lab/inventory/lab.yml")]


def play(path, quiet=True, extra=(), env=None):
    argv = ["ansible-playbook"] + INV + [path] + list(extra)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=quiet, check=False, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write((proc.stdout or b"").decode()[-3000:])
        raise SystemExit("%s failed (rc=%s)" % (path, proc.returncode))
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-up", action="store_true", help="the lab is already up")
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    parser.add_argument("--targets", default="nodefix_lab_containers",
                        help="inventory group or host pattern (default: the three container nodes)")
    args = parser.parse_args()
    if not args.no_up:
        # nodes as real nodes run modules: without the test run's compiled-code cache
        # (lab/zip_code_cache.py), which lab/up.yml mounts only when NODEFIX_ZIPCODE_DIR is set
        play(os.path.join(ROOT, "lab/up.yml"), env=dict((k, v) for k, v in os.environ.items()
                                                        if k != "NODEFIX_ZIPCODE_DIR"))
    try:
        sides = {
            "node_audit (1 task)": os.path.join(ROOT, "benchmarks/audit/node_audit.yml"),
            "shell tasks (26 tasks)": os.path.join(ROOT, "benchmarks/audit/shell_checks.yml"),
        }
        times = dict((name, []) for name in sides)
        for _run in range(args.runs):
            for name, path in sides.items():
                # the three container nodes (podman connection), as first
                # measured; the cgroup v2 VM node runs emulated and is left out
                times[name].append(play(path, extra=["-e", "nodefix_targets=" + args.targets]))
        medians = dict((name, statistics.median(values)) for name, values in times.items())
        print("audit of %s, median of %d runs" % (args.targets, args.runs))
        for name, value in medians.items():
            print("  %-24s %6.2f s   runs: %s" % (name, value, " ".join("%.2f" % v for v in times[name])))
        a, b = medians["node_audit (1 task)"], medians["shell tasks (26 tasks)"]
        print("  ratio shell/node_audit: %.1fx" % (b / a))
    finally:
        if not args.keep:
            play(os.path.join(ROOT, "lab/down.yml"))


if __name__ == "__main__":
    main()
