#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's connection (lab/connection_plugins/nodefix_podman.py): what a task costs the
controller through podman (`podman mount` + `podman exec` each task, as containers.podman.podman
with pipelining) against the fast path (the container's podman facts cached, `runc exec`), side
by side, the same containers and playbook, alternating.

    . scripts/env.sh && python benchmarks/lab_connection/run.py --nodes 3 --tasks 20 --runs 3 \\
        [--json benchmarks/lab_connection/results.json]

The nodes: unprivileged containers of the lab's Debian 12 image running `sleep infinity`. The
playbook: TASKS `ansible.builtin.command: true` tasks, one `ansible.builtin.copy` (a file
transfer) and one `ansible.builtin.stat` a node. CPU is the whole process tree's - ansible-playbook,
its workers, every podman, conmon and runc (benchmarks/measure.py: a child subreaper, so conmon,
which daemonizes, is counted). It checks its own result: every task ok on every node, and the
copied file's content read back through podman.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEASURE = os.path.join(ROOT, "benchmarks", "measure.py")
sys.path.insert(0, os.path.dirname(MEASURE))
from measure import lab_lock, write_json  # noqa: E402  pylint: disable=wrong-import-position
IMAGE = "localhost/nodefix-debian12"
PREFIX = "nodefix-labconn-"


def playbook(path, tasks):
    commands = [{"name": "Command %d" % i, "ansible.builtin.command": "true", "changed_when": False} for i in range(tasks)]
    copy = {"content": "{{ inventory_hostname }}\n", "dest": "/root/nodefix-labconn", "mode": "0644"}
    plays = [{"name": "Lab connection benchmark", "hosts": "all", "gather_facts": False,
              "tasks": commands + [{"name": "Copy", "ansible.builtin.copy": copy},
                                   {"name": "Stat", "ansible.builtin.stat": {"path": "/root/nodefix-labconn"}}]}]
    with open(path, "w") as fh:
        json.dump(plays, fh)


def run(names, book, fast, tmp):
    inv = ",".join(names) + ","
    env = dict(os.environ, NODEFIX_PODMAN_FAST="1" if fast else "0", ANSIBLE_PIPELINING="1", ANSIBLE_NOCOLOR="1",
               NODEFIX_PODMAN_CACHE=os.path.join(tmp, "cache"), ANSIBLE_FORKS=str(len(names)))
    out = os.path.join(tmp, "measure.json")
    subprocess.run([sys.executable, MEASURE, out, "--", "ansible-playbook", "-i", inv, "-c", "nodefix_podman",
                    "-e", "ansible_python_interpreter=/usr/bin/python3", "-e", "ansible_remote_tmp=/root/.ansible/tmp",
                    book], env=env, check=True)
    with open(out) as fh:
        m = json.load(fh)
    with open(out + ".log") as fh:
        log = fh.read()
    ok = log.count("unreachable=0    failed=0")
    if m["rc"] != 0 or ok != len(names):
        raise SystemExit("the playbook failed (rc %s, %d of %d nodes ok):\n%s" % (m["rc"], ok, len(names), log[-3000:]))
    for name in names:
        got = subprocess.run(["podman", "exec", name, "cat", "/root/nodefix-labconn"], capture_output=True, text=True,
                             check=True).stdout
        if got != name + "\n":
            raise SystemExit("%s: the copied file holds %r" % (name, got))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    _lock = lab_lock()  # held until the run ends
    names = ["%s%d" % (PREFIX, i) for i in range(args.nodes)]
    subprocess.run(["podman", "rm", "-f", "-t", "0"] + names, capture_output=True, check=False)
    runs = {"podman": [], "fast": []}
    with tempfile.TemporaryDirectory() as tmp:
        book = os.path.join(tmp, "playbook.json")
        playbook(book, args.tasks)
        try:
            for name in names:
                subprocess.run(["podman", "run", "-d", "--name", name, IMAGE, "sleep", "infinity"], capture_output=True,
                               check=True)
            for _run in range(args.runs):
                for mode in ("podman", "fast"):
                    runs[mode].append(run(names, book, mode == "fast", tmp))
        finally:
            subprocess.run(["podman", "rm", "-f", "-t", "0"] + names, capture_output=True, check=False)
    per_task = (args.tasks + 2) * args.nodes
    result = {"nodes": args.nodes, "tasks": args.tasks + 2, "runs": args.runs}
    for mode, ms in runs.items():
        cpu, wall = statistics.median(m["cpu"] for m in ms), statistics.median(m["wall"] for m in ms)
        result[mode] = {"cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
                        "cpu_per_task_and_node": round(cpu / per_task, 4), "all_cpu": [round(m["cpu"], 2) for m in ms],
                        "all_wall": [round(m["wall"], 2) for m in ms]}
        print("%-6s median of %d: CPU %6.2f s (%.3f s a task and node)  wall %6.2f s" % (
            mode, args.runs, cpu, cpu / per_task, wall))
    result["cpu_ratio"] = round(result["podman"]["cpu_seconds"] / result["fast"]["cpu_seconds"], 2)
    print("through podman / fast path: %.2fx the CPU" % result["cpu_ratio"])
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
