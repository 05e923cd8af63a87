#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""The redactor's fast path, side by side with the redactor without it and with the one of a base commit, in one run.

    . scripts/env.sh && python benchmarks/redact/run.py --n 10000 --repeat 5 --base main \\
        --json benchmarks/redact/results.json
    PYTHONPATH=<a matplotlib> python benchmarks/redact/run.py --replot benchmarks/redact/results.json \\
        --png benchmarks/redact/cpu.png

The fleet triage (issue 63) redacts every node's name and address and every label of its answer
(``_core.redact.redact_text``); at 10,000 nodes that was a quarter of the triage's CPU. Measured here, as the
process's CPU time (``time.process_time``, the median of ``--repeat`` rounds, each set read once a round):

- ``new``: ``redact_text`` as the collection runs it - the fast path (``_core.secret_shapes.benign``) first;
- ``new_slow``: the same redactor without the fast path (``_core.redact._slow``, every rule read);
- ``base``: ``redact_text`` of ``--base`` (a commit; its ``_core`` redactor files taken with ``git show`` into a
  temporary package), skipped with ``--base ''`` or where git cannot give them.

The sets: ``node_names`` (N names as clusters name nodes: node-00001, ip-10-0-3-17.ec2.internal,
worker-a-7.example.com, vault-token-0), ``addresses`` (N IPv4 and some IPv6), ``label_values`` (N values of the
triage's labels and a node's: instance node-00001:9100, zones, architectures, finding ids, 'true'), ``test_corpus``
(every text of the unit tests' redaction tables, secrets and the data beside them; read with ``ast``). Every run checks that the fast
path changes nothing: ``new`` and ``new_slow`` give the same text for every string of every set (exit 1 if not).
Numbers, not assertions: the README compares them.
"""

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact  # noqa: E402

CORE = "plugins/module_utils/_core"
# every module of the base commit's _core package is copied: the redactor's helpers move between files
# (secret_kept.py, secret_yaml.py were split out later), so no list of names here can go stale


def node_names(n):
    out = []
    for i in range(n):
        kind = i % 4
        out.append(("node-%05d" % i, "ip-10-%d-%d-%d.ec2.internal" % (i // 65536 % 256, i // 256 % 256, i % 256),
                    "worker-%s-%d.example.com" % ("abcdefgh"[i % 8], i), "vault-token-%d" % i)[kind])
    return out


def addresses(n):
    return ["10.%d.%d.%d" % (i // 65536 % 256, i // 256 % 256, i % 256) if i % 10 else "fd00::%x" % i
            for i in range(n)]


def label_values(n):
    fixed = ["amd64", "arm64", "linux", "true", "us-east-1a", "eu-west-3c", "kernel_pid_max_low", "warning",
             "critical", "containerd://1.7.13", "v1.28.3", "gvisor_runsc_missing", "Ready", "node-role.kubernetes.io"]
    return ["node-%05d:9100" % i if i % 3 == 0 else fixed[i % len(fixed)] for i in range(n)]


TABLES = ("test_redact_chains.py", "test_redact_prose.py", "test_redact_shapes.py", "test_redact_classes.py")


def _texts(value):
    """The texts of a table: its strings, a row's first item (text, secrets, kept), a mapping's rows."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return _texts(value[0])
    if isinstance(value, dict):
        value = list(value.values())
    return [t for item in value for t in _texts(item)] if isinstance(value, list) else []


def test_corpus():
    """Every text of the unit tests' redaction tables (their module-level HIDDEN, KEPT and CATALOGUE literals, read
    with ast: no test module, nor pytest, is imported)."""
    texts = []
    for name in TABLES:
        with open(os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", name)) as fh:
            tree = ast.parse(fh.read())
        names = {}      # the module's constants a table builds on (RSA = "...", "key: %s" % RSA)
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            try:    # expressions of literals and earlier constants only: no builtins, nothing imported
                value = eval(compile(ast.Expression(node.value), name, "eval"),  # pylint: disable=eval-used
                             {"__builtins__": {}}, dict(names))
            except Exception:  # pylint: disable=broad-except
                continue
            names[node.targets[0].id] = value
            if node.targets[0].id in ("HIDDEN", "KEPT", "CATALOGUE"):
                texts += _texts(value)
    return texts


def base_redactor(base, tmp):
    """``redact_text`` of the commit ``base`` (its whole _core package, renamed), or None."""
    pkg = os.path.join(tmp, "_redact_base")
    os.makedirs(pkg)
    try:
        names = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", "%s:%s" % (base, CORE)], check=True,
                               capture_output=True, text=True).stdout.split()
        texts = dict((name, subprocess.run(["git", "-C", ROOT, "show", "%s:%s/%s" % (base, CORE, name)], check=True,
                                           capture_output=True, text=True).stdout)
                     for name in names if name.endswith(".py"))
    except (OSError, subprocess.CalledProcessError) as exc:
        print("base %s: %s not read (%s): its column skipped" % (base, CORE, exc), file=sys.stderr)
        return None
    if "redact.py" not in texts:
        print("base %s: no %s/redact.py: its column skipped" % (base, CORE), file=sys.stderr)
        return None
    texts.setdefault("__init__.py", "")
    for name, text in texts.items():
        with open(os.path.join(pkg, name), "w") as fh:
            fh.write(text.replace("ansible_collections.nodefix.k8s.plugins.module_utils._core", "_redact_base"))
    sys.path.insert(0, tmp)
    import _redact_base.redact  # noqa: E402 pylint: disable=import-error,import-outside-toplevel
    return _redact_base.redact.redact_text


def cpu(fn, texts):
    start = time.process_time()
    for text in texts:
        fn(text)
    return time.process_time() - start


def plot(results, png):
    """A bar a variant for each set: the median CPU seconds (the README's table)."""
    sys.path.insert(0, os.path.dirname(HERE))
    from plotting import pyplot, save  # pylint: disable=import-outside-toplevel,import-error
    plt = pyplot()
    names = list(results["sets"])
    cols = [v for v in ("base", "new_slow", "new") if v in results["sets"][names[0]]["cpu_s"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(cols)
    for i, col in enumerate(cols):
        ax.bar([x + i * width for x in range(len(names))],
               [results["sets"][n]["cpu_s"][col]["median"] for n in names], width, label=col)
    ax.set_xticks([x + width * (len(cols) - 1) / 2 for x in range(len(names))])
    ax.set_xticklabels(["%s (%d)" % (n, results["sets"][n]["strings"]) for n in names])
    ax.set_ylabel("CPU s to redact the set once")
    ax.set_title("redact_text: the base commit, without the fast path, with it")
    ax.legend()
    save(fig, png)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--n", type=int, default=10000, help="node names, addresses and label values each")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--base", default="main", help="a commit whose redactor is measured beside ('' skips it)")
    parser.add_argument("--json")
    parser.add_argument("--png", help="a bar chart of the medians (needs matplotlib)")
    parser.add_argument("--replot", help="plot a results file already written, measure nothing")
    args = parser.parse_args()
    if args.replot:
        with open(args.replot) as fh:
            plot(json.load(fh), args.png)
        return 0
    sets = {"node_names": node_names(args.n), "addresses": addresses(args.n), "label_values": label_values(args.n),
            "test_corpus": test_corpus()}
    tmp = tempfile.mkdtemp(prefix="nodefix-bench-redact-")
    try:
        variants = {"new": redact.redact_text, "new_slow": lambda t: redact._slow(t, False)}  # pylint: disable=W0212
        base = base_redactor(args.base, tmp) if args.base else None
        if base is not None:
            variants["base"] = base
        # the fast path changes nothing: the same text with and without it, every string of every set
        differ = [t for texts in sets.values() for t in texts if redact.redact_text(t) != redact._slow(t, False)]  # pylint: disable=W0212
        results = {"n": args.n, "repeat": args.repeat, "base": args.base if base is not None else None,
                   "python": sys.version.split()[0], "sets": {}}
        for name, texts in sets.items():
            fast = sum(1 for t in texts if redact.secret_shapes.benign(t))
            row = {"strings": len(texts), "fast_path": fast, "cpu_s": {}}
            for variant, fn in variants.items():
                fn(texts[0])    # compiled before it is timed (lazy patterns)
                runs = [cpu(fn, texts) for _i in range(args.repeat)]
                row["cpu_s"][variant] = {"median": round(statistics.median(runs), 4),
                                         "min": round(min(runs), 4), "max": round(max(runs), 4)}
            if base is not None:
                row["changed_vs_base"] = sum(1 for t in texts if base(t) != redact.redact_text(t))
            results["sets"][name] = row
        results["fast_path_differs"] = len(differ)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cols = [v for v in ("base", "new_slow", "new") if v in variants]
    print("| set | strings | fast path | " + " | ".join("%s CPU s" % c for c in cols) + " |")
    print("|---|---:|---:|" + "---:|" * len(cols))
    for name, row in results["sets"].items():
        print("| %s | %d | %d | %s |" % (name, row["strings"], row["fast_path"], " | ".join(
            "%.4f" % row["cpu_s"][c]["median"] for c in cols)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
            fh.write("\n")
    if args.png:
        plot(results, args.png)
    if differ:
        print("the fast path changed %d strings: %r" % (len(differ), differ[:5]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
