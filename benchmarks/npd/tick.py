# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the node-problem-detector plugin's CPU per invocation in NPD's own pattern, each rule reading the node,
one look at the node per tick, and that look also writing node_exporter's textfile, side by side in one run.

node-problem-detector runs the six rules of the monitor config every ``invoke_interval``, one after another
at the role's ``npd_concurrency: 1`` (``pkg/custompluginmonitor/plugin/plugin.go``). This runs that pattern
for ``--ticks`` ticks (12) against two installs of the plugin laid out as the npd role lays them (its templates
rendered, the module_utils beside them, byte-compiled):

  today     the plugin of ``--before`` (a git revision; default ``b0375b7``, before the tick's shared result):
            each rule starts Python and runs its own condition's detectors
  tick      the plugin of ``--tick-before`` (default ``dfde8f1``, before the textfile): a shell entry that answers
            from the tick's shared result (module_utils/_npd/tick.py) when it is fresh; the first rule of a tick
            reads the node for all six
  hardened  the working tree's without a textfile: the hardened tick file (format 2: the config's copy instead
            of its modification time, one grammar for both readers, a NUL-proof bounded read by a bash entry)
  textfile  the working tree's with the tick also writing node_exporter's textfile (``textfile`` in the plugin
            config: module_utils/_npd/textfile.py)

Each tick runs the six rules in turn, each rule of every install one after the other (which goes first rotates
by tick): all see the same moment's load; each install has its own cache directory. The plugins are configured with NPD's ``--interval`` (300 s, the
role's default: the shared result is fresh for 150 s); rather than wait 300 s for the next tick, the run ages the
shared result by one interval between ticks (its tick start moved 300 s back: the file the next tick finds).
An invocation's CPU is its process tree's user + system time (``getrusage(RUSAGE_CHILDREN)`` before and
after), as node-problem-detector's host pays it. Both installs
read the same node - ``--layout``: lab/kubelet-double's kubeadm files over this machine's /proc and /sys
(a node has a kubelet; this machine has none), or ``--layout ''`` this machine as it is - and must give
the same answers (exit code and message): the run fails when they do not, when an exit code is not 0/1/2, or
when the textfile way wrote no textfile that lists every check.

    python benchmarks/npd/tick.py --json benchmarks/npd/tick.json
    python benchmarks/npd/tick.py --plot benchmarks/npd/tick.json      # (a Python with matplotlib)
"""

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
CONDITIONS = sorted(["GVisorMemoryLimitIgnored", "KubeletMountUnitsLeaking", "PIDsRisk", "KubeletConfigRisk",
                     "ContainerRuntimeRisk", "KernelRisk"])   # the monitor config's order (monitor_config sorts)
NAME = "nodefix-npd"
WAYS = ("today", "tick", "hardened", "textfile")


def git_show(rev, path):
    return subprocess.run(["git", "-C", REPO, "show", "%s:%s" % (rev, path)], check=True, capture_output=True,
                          text=True).stdout


def render(text, variables):
    """A role template rendered with the filters it uses (quote, to_json) and the role's variables."""
    import jinja2  # pylint: disable=import-outside-toplevel  # Ansible's
    env = jinja2.Environment(keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    env.filters["to_json"] = json.dumps
    return env.from_string(text).render(ansible_managed="benchmarks/npd/tick.py", **variables)


def install(rev, lib, python, cache_dir):
    """The npd role's layout of revision ``rev`` (None: the working tree) in ``lib``; the entry's path."""
    target = os.path.join(lib, "ansible_collections", "nodefix", "k8s")
    os.makedirs(target)
    if rev is None:
        shutil.copytree(os.path.join(REPO, "plugins", "module_utils"), os.path.join(target, "plugins", "module_utils"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        templates = {NAME: "nodefix-npd.j2", NAME + ".py": "nodefix-npd.py.j2"}

        def read(path):
            with open(os.path.join(REPO, path), encoding="utf-8") as fh:
                return fh.read()
    else:
        archive = subprocess.run(["git", "-C", REPO, "archive", rev, "plugins/module_utils"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
        listed = subprocess.run(["git", "-C", REPO, "ls-tree", "--name-only", rev, "roles/npd/templates/"], check=True,
                                capture_output=True, text=True).stdout.split()
        templates = {NAME: "nodefix-npd.j2", NAME + ".py": "nodefix-npd.py.j2"}
        if "roles/npd/templates/nodefix-npd.j2" not in listed:
            templates = {NAME: "nodefix-npd.py.j2"}   # before the shell entry: the Python entry is the rules' path

        def read(path):
            return git_show(rev, path)
    variables = {"npd_python": python, "npd_lib_dir": lib, "npd_plugin_name": NAME, "npd_cache_dir": cache_dir}
    for dest, src in templates.items():
        with open(os.path.join(lib, dest), "w", encoding="utf-8") as fh:
            fh.write(render(read("roles/npd/templates/" + src), variables))
        os.chmod(os.path.join(lib, dest), 0o755)
    subprocess.run([python, "-m", "compileall", "-q", lib], check=True)   # as the role does
    return os.path.join(lib, NAME)


def invoke(argv):
    """(cpu ms of the process tree, wall ms, exit code, stdout) of one rule's run."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False, timeout=60)
    wall, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return round(cpu * 1000, 2), round(wall * 1000, 1), proc.returncode, proc.stdout.strip()


def summary(runs, interval_s):
    cpu = [r["cpu_ms"] for r in runs]
    first = [r["cpu_ms"] for r in runs if r["position"] == 0]
    rest = [r["cpu_ms"] for r in runs if r["position"] > 0]
    per_tick = sum(cpu) / (len(cpu) / float(len(CONDITIONS)))
    return {"mean_cpu_ms_per_invocation": round(statistics.mean(cpu), 2),
            "median_cpu_ms_per_invocation": round(statistics.median(cpu), 2),
            "mean_cpu_ms_first_rule": round(statistics.mean(first), 2),
            "mean_cpu_ms_other_rules": round(statistics.mean(rest), 2),
            "cpu_ms_per_tick": round(per_tick, 1),
            "cpu_s_per_node_hour": round(per_tick * 3600.0 / interval_s / 1000.0, 2)}


def plot(result, png):
    from plotting import pyplot, save  # pylint: disable=import-outside-toplevel
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    colours = {"today": "tab:red", "tick": "tab:blue", "hardened": "tab:orange", "textfile": "tab:green"}
    for way, colour in colours.items():
        cpu = [r["cpu_ms"] for r in result["runs"][way]]
        ax1.plot(range(1, len(cpu) + 1), cpu, marker=".", linewidth=0.8, color=colour,
                 label="%s (mean %.1f ms)" % (way, result["summary"][way]["mean_cpu_ms_per_invocation"]))
    ax1.axhline(result["bare_cpu_ms"], color="grey", linestyle=":", label="python3 -c pass (%.1f ms)" % result["bare_cpu_ms"])
    ax1.set_xlabel("invocation (six rules a tick, one after another)")
    ax1.set_ylabel("CPU ms (user + system, process tree)")
    ax1.set_title("node-problem-detector's pattern, %d ticks (load average %.1f on %d cores)"
                  % (result["ticks"], result["load_average"][0], result["cpus"]))
    ax1.set_ylim(bottom=0)
    ax1.legend()
    means = [result["summary"][w]["mean_cpu_ms_per_invocation"] for w in WAYS]
    ax2.bar(list(WAYS), means, color=[colours[w] for w in WAYS])
    ax2.axhline(15, color="black", linestyle="--", label="target 15 ms")
    for x, value in enumerate(means):
        ax2.text(x, value, "%.1f" % value, ha="center", va="bottom")
    ax2.set_ylabel("mean CPU ms per invocation")
    ax2.legend()
    save(fig, png)


def age(path, seconds):
    """The shared result as the next tick finds it: its tick start moved ``seconds`` back (nothing else changed)."""
    if not os.path.exists(path):
        return
    with open(path, encoding="ascii") as fh:
        lines = fh.read().split("\n")
    lines = [("at %d" % max(0, int(line[3:]) - seconds * 100)) if line.startswith("at ") else line for line in lines]
    with open(path, "w", encoding="ascii") as fh:
        fh.write("\n".join(lines))


def run_ticks(args, entries, configs, result_files):
    runs = dict((way, []) for way in WAYS)
    for tick in range(args.ticks):
        for path in result_files:
            age(path, args.interval)
        order = WAYS[tick % len(WAYS):] + WAYS[:tick % len(WAYS)]
        for position, condition in enumerate(CONDITIONS):
            for way in order:
                cpu, wall, rc, out = invoke([entries[way], "--config", configs[way], "--condition", condition])
                runs[way].append({"tick": tick, "position": position, "condition": condition, "cpu_ms": cpu,
                                  "wall_ms": wall, "rc": rc, "message": out})
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--ticks", type=int, default=12)
    parser.add_argument("--interval", type=int, default=300, help="node-problem-detector's, in the plugin's config")
    parser.add_argument("--before", default="b0375b7")
    parser.add_argument("--tick-before", default="dfde8f1", help="the one-look-per-tick plugin before the textfile")
    parser.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
    parser.add_argument("--layout", default="kubeadm", help="lab/kubelet-double/layouts/<name> as the node's files; '' for /")
    parser.add_argument("--json")
    parser.add_argument("--png")
    parser.add_argument("--plot", metavar="JSON", help="only plot a result file (matplotlib: benchmarks/requirements.txt)")
    args = parser.parse_args()
    if args.plot:
        with open(args.plot, encoding="utf-8") as fh:
            plot(json.load(fh), args.png or os.path.splitext(args.plot)[0] + ".png")
        return
    work = tempfile.mkdtemp(prefix="nodefix-npd-tick-")
    try:
        root = "/"
        if args.layout:
            root = os.path.join(work, "node")
            shutil.copytree(os.path.join(REPO, "lab", "kubelet-double", "layouts", args.layout), root, symlinks=True)
            for name in ("proc", "sys"):
                os.symlink("/" + name, os.path.join(root, name))
        caches = dict((way, os.path.join(work, "run-" + way, "nodefix-npd")) for way in WAYS)
        for path in caches.values():
            os.makedirs(os.path.dirname(path))
        textfile = os.path.join(work, "node-exporter", "nodefix.prom")
        os.makedirs(os.path.dirname(textfile))
        entries = {"today": install(args.before, os.path.join(work, "today"), args.python, caches["today"]),
                   "tick": install(args.tick_before, os.path.join(work, "tick"), args.python, caches["tick"]),
                   "hardened": install(None, os.path.join(work, "hardened"), args.python, caches["hardened"]),
                   "textfile": install(None, os.path.join(work, "textfile"), args.python, caches["textfile"])}
        configs = {}
        for way, extra in (("today", {}), ("tick", {"interval": args.interval, "cache_dir": caches["tick"]}),
                           ("hardened", {"interval": args.interval, "cache_dir": caches["hardened"]}),
                           ("textfile", {"interval": args.interval, "cache_dir": caches["textfile"],
                                         "textfile": textfile, "version": "benchmark"})):
            configs[way] = os.path.join(work, way + ".json")
            with open(configs[way], "w", encoding="utf-8") as fh:
                json.dump(dict({"root": root, "timeout": 5}, **extra), fh)
        bare = [invoke([args.python, "-c", "pass"])[0] for _i in range(10)]
        runs = run_ticks(args, entries, configs, [os.path.join(caches[w], "tick") for w in WAYS[1:]])
        with open(os.path.join(caches["textfile"], "tick"), encoding="ascii") as fh:
            shared = sorted(line.split(" ")[1] for line in fh.read().splitlines() if line.startswith("v "))
        with open(textfile, encoding="utf-8") as fh:
            prom = fh.read()
        looked = sorted(line.split('"')[1] for line in prom.splitlines() if line.startswith("nodefix_audit_check_failed{"))
        codes = set(r["rc"] for way in runs for r in runs[way])
        differ = [(way, a["tick"], a["condition"], a["rc"], a["message"], b["rc"], b["message"])
                  for way in WAYS[1:] for a, b in zip(runs["today"], runs[way])
                  if (a["rc"], a["message"]) != (b["rc"], b["message"])]
        version = subprocess.run([args.python, "--version"], capture_output=True, text=True, check=True).stdout.strip()
        result = {"python": version, "before": args.before, "tick_before": args.tick_before, "ticks": args.ticks,
                  "interval_s": args.interval, "textfile_bytes": len(prom.encode("utf-8")), "textfile_checks": looked,
                  "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                  "layout": args.layout or "/", "bare_cpu_ms": round(statistics.median(bare), 2),
                  "summary": dict((way, summary(runs[way], args.interval)) for way in runs),
                  "answers_differ": differ, "shared_result_conditions": shared, "runs": runs}
        print("python3 -c pass: %.1f ms CPU" % result["bare_cpu_ms"])
        print("%-8s %12s %12s %12s %12s %14s" % ("way", "mean/invoc.", "median", "first rule", "other rules",
                                                 "s/node-hour"))
        for way in WAYS:
            s = result["summary"][way]
            cells = (way, s["mean_cpu_ms_per_invocation"], s["median_cpu_ms_per_invocation"], s["mean_cpu_ms_first_rule"],
                     s["mean_cpu_ms_other_rules"], s["cpu_s_per_node_hour"])
            print("%-8s %12.1f %12.1f %12.1f %12.1f %14.2f" % cells)
        if args.json:
            from measure import write_json  # pylint: disable=import-outside-toplevel
            write_json(args.json, result)
        if args.png:
            plot(result, args.png)
        if not codes <= {0, 1, 2} or differ:
            raise SystemExit("the ways answered differently or outside NPD's protocol: %s %s" % (sorted(codes), differ[:5]))
        if len(looked) != 8:
            raise SystemExit("the textfile lists %d checks, not 8: %s" % (len(looked), looked))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
