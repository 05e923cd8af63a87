# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what one node-problem-detector plugin invocation costs on a node, per condition.

node-problem-detector runs the plugin once per condition per tick (six conditions, every
``npd_invoke_interval``) on every node, forever. For each condition this runs the plugin
the way NPD does - its own process, ``--config``/``--condition``, against this machine's
real /proc and /sys - ``--runs`` times with a warm byte-code cache, and reads each
process's CPU time (user + system) and peak memory (``wait4``'s rusage), side by side:

  bare     ``python3 -c pass``: the interpreter alone (the floor)
  before   the plugin of ``--before`` (a git revision; default ``2a437e6``, before the
           plugin imported only its own detectors), its module_utils taken from git
  now      the plugin of the working tree

The conditions that read the kubelet's files (KubeletConfigRisk, GVisorMemoryLimitIgnored) run
a second time against a node tree that has a kubelet (``--layout``: lab/kubelet-double's kubeadm
layout - unit, drop-in, flags file, config.yaml - over this machine's /proc and /sys): this
machine has no kubelet, and a node's cost is the one with its files to read.

It prints the median CPU ms and peak RSS per condition, the cost per node per hour at
``--interval`` (300 s, the role's default), and writes JSON with ``--json``.

    python benchmarks/npd/run.py --runs 20 --json benchmarks/npd/results.json
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONDITIONS = ["GVisorMemoryLimitIgnored", "KubeletMountUnitsLeaking", "PIDsRisk", "KubeletConfigRisk",
              "ContainerRuntimeRisk", "KernelRisk"]
# a condition's 1.0 name: a --before tree from before the rename answers only to that one
OLD_NAMES = {"PIDsRisk": "PIDPressureRisk"}
KUBELET_CONDITIONS = ["KubeletConfigRisk", "GVisorMemoryLimitIgnored"]
# the plugin's entry: module_utils/_npd/plugin.py since the package split, module_utils/_npd.py before it
ENTRY = ("import sys; sys.path.insert(0, %r); "
         "from ansible_collections.nodefix.k8s.plugins.module_utils import _npd; "
         "cli = _npd.cli if hasattr(_npd, 'cli') else __import__(_npd.__name__ + '.plugin', fromlist=['cli']).cli; "
         "sys.exit(cli())")


def tree(rev, dest):
    """A directory holding ansible_collections/nodefix/k8s/plugins/module_utils of ``rev`` (None: the work tree)."""
    target = os.path.join(dest, "ansible_collections", "nodefix", "k8s", "plugins", "module_utils")
    os.makedirs(target)
    if rev is None:
        source = os.path.join(REPO, "plugins", "module_utils")
        for name in os.listdir(source):
            if name.endswith(".py"):
                shutil.copy(os.path.join(source, name), target)
            elif name.startswith("_") and os.path.isdir(os.path.join(source, name)) and name != "__pycache__":
                shutil.copytree(os.path.join(source, name), os.path.join(target, name),
                                ignore=shutil.ignore_patterns("__pycache__"))
    else:
        archive = subprocess.run(["git", "-C", REPO, "archive", rev, "plugins/module_utils"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", os.path.join(dest, "ansible_collections", "nodefix", "k8s"),
                        "--strip-components=0"], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", dest], check=True)  # warm cache, as the role does
    return dest


def condition_in(path, condition):
    """The name the plugin of tree ``path`` knows ``condition`` by (its 1.0 name in a tree from before the rename)."""
    if condition not in OLD_NAMES:
        return condition
    for folder, _dirs, files in os.walk(path):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as fh:
                    if '"%s"' % condition in fh.read():
                        return condition
    return OLD_NAMES[condition]


def measure(argv):
    """(cpu seconds, peak RSS KiB, exit code) of one process."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def series(argv, runs):
    out = [measure(argv) for _run in range(runs)]
    return {"cpu_ms": round(1000 * statistics.median(c for c, _m, _r in out), 1),
            "rss_mib": round(statistics.median(m for _c, m, _r in out) / 1024.0, 1),
            "exit": sorted(set(r for _c, _m, r in out))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--before", default="2a437e6")
    parser.add_argument("--interval", type=int, default=300)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json")
    parser.add_argument("--layout", default="kubeadm", help="lab/kubelet-double/layouts/<name> for the kubelet node tree")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="nodefix-npd-bench-")
    try:
        cfg = os.path.join(work, "npd.json")
        with open(cfg, "w") as fh:
            json.dump({}, fh)
        node = os.path.join(work, "node")
        shutil.copytree(os.path.join(REPO, "lab", "kubelet-double", "layouts", args.layout), node, symlinks=True)
        for name in ("proc", "sys"):
            os.symlink("/" + name, os.path.join(node, name))
        node_cfg = os.path.join(work, "npd-node.json")
        with open(node_cfg, "w") as fh:
            json.dump({"root": node}, fh)
        trees = {"before": tree(args.before, os.path.join(work, "before")), "now": tree(None, os.path.join(work, "now"))}
        version = subprocess.run([args.python, "--version"], capture_output=True, text=True, check=True).stdout.strip()
        result = {"python": version,
                  "runs": args.runs, "before": args.before, "bare": series([args.python, "-c", "pass"], args.runs),
                  "conditions": {}}
        runs = [(c, c, cfg) for c in CONDITIONS] + [
            ("%s (%s node)" % (c, args.layout), c, node_cfg) for c in KUBELET_CONDITIONS]
        for label, condition, config in runs:
            row = {}
            for name, path in sorted(trees.items()):
                row[name] = series([args.python, "-c", ENTRY % path, "--config", config, "--condition",
                                    condition_in(path, condition)], args.runs)
            result["conditions"][label] = row
        ticks = 3600.0 / args.interval
        for name in ("before", "now"):
            # a node's tick: the six conditions, the kubelet readers' as they cost with a kubelet's files
            per_tick = sum(result["conditions"].get("%s (%s node)" % (c, args.layout), result["conditions"][c])[name]["cpu_ms"]
                           for c in CONDITIONS)
            result["%s_cpu_s_per_node_hour" % name] = round(per_tick * ticks / 1000.0, 2)
        print("interpreter alone: %.1f ms CPU, %.1f MiB" % (result["bare"]["cpu_ms"], result["bare"]["rss_mib"]))
        print("%-40s %18s %18s" % ("condition", "before (ms, MiB)", "now (ms, MiB)"))
        for condition, row in result["conditions"].items():
            before, now = row["before"], row["now"]
            cells = (condition, before["cpu_ms"], before["rss_mib"], now["cpu_ms"], now["rss_mib"])
            print("%-40s %10.1f %6.1f  %10.1f %6.1f" % cells)
        print("per node per hour at %ds: before %.2f s CPU, now %.2f s CPU" % (
            args.interval, result["before_cpu_s_per_node_hour"], result["now_cpu_s_per_node_hour"]))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(result, fh, indent=2, sort_keys=True)
                fh.write("\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
