# SPDX-License-Identifier: GPL-3.0-or-later
"""audit_report at fleet size: time and memory of the report for N synthetic nodes, and its HTML.

    .cache/bench-venv/bin/python benchmarks/report/run.py --sizes 1000,2000,5000,10000 \\
        --json benchmarks/report/results.json --png benchmarks/report/scaling.png --html-dir /tmp/report-10k

Each size runs in a fresh Python process (the peak memory is that process's): it builds the
node_audit results of N nodes - each with a realistic ``checks`` payload (the facts node_audit
returns, ~6 KB a node) and a mix of real finding ids (2 % of the nodes with findings of every
severity, 0.5 % unreachable, some waived) - then the report model and every format, exactly
what the audit_report module does, and times each step (process CPU seconds) and the peak
resident memory. ``--broken 12`` also writes the case the HTML must make easy: 12 broken
nodes among the largest fleet, the rest clean (``--html-dir``: both pages, to open in a browser).
The script checks its own result (every node in the model, the totals equal to the planted
mix); it is a benchmark, not a timed test: the numbers are printed, never asserted.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# real finding ids of the collection, with their severities
MIX = [("gvisor.sandbox_oversized", "critical", "gvisor"), ("kubelet.api_qps_low", "medium", "kubelet"),
       ("pids.zombie_leaker", "medium", "pids"), ("mount_units.orphaned", "medium", "mount_units"),
       ("kernel.no_psi", "low", "kernel"), ("containerd.version_eol", "high", "containerd")]


def checks_payload(i):
    """About the size and shape of node_audit's facts for one node."""
    return {
        "kubelet": {"kubelet": {"effective": dict(
            ("field%02d" % k, {"value": k * i % 97, "source": "config", "path": "/var/lib/kubelet/config.yaml"})
            for k in range(30))}},
        "containerd": {"version": "1.7.24", "daemon": {"started": 1795403897.6 + i}, "runc": {"version": "1.1.12"}},
        "gvisor": {"runsc": {"version": "0.0~20240729.0"}, "sandboxes": [{"id": "%064x" % (i * 7 + s), "total_memory": 268435456}
                                                                         for s in range(3)]},
        "mount_units": {"mount_units": {"scopes": 40, "orphaned": 0, "orphaned_scopes": 0, "dead_mount_units": 0}},
        "pids": {"pid_max": 4194304, "zombies": 0, "threads": 2100 + i % 300},
        "kernel": {"release": "6.1.0-26-amd64", "dying_memcgs": i % 50, "psi": True},
    }


def finding(fid, severity, check, i):
    return {"id": fid, "severity": severity, "check": check, "subject": "subject-%d" % i,
            "title": "title of %s" % fid, "remedy": "the remedy of %s, a sentence or two long" % fid,
            "evidence": {"value": i, "limit": 268435456}, "fix": {"role": "nodefix.k8s.%s" % check, "tag": check}}


def synthetic(n, broken=None):
    """{host: node_audit result}, the expected totals."""
    results, with_findings, unreachable = {}, 0, 0
    for i in range(n):
        host = "node-%05d" % i
        if broken is None:
            bad = i % 50 == 7          # 2 %
            lost = i % 200 == 13       # 0.5 %
        else:
            bad, lost = i in broken, False
        if lost:
            results[host] = {"unreachable": True, "msg": "ssh: connect to host %s port 22: timed out" % host}
            unreachable += 1
            continue
        findings = []
        if bad:
            fid, sev, check = MIX[i % len(MIX)]
            findings = [finding(fid, sev, check, i), finding("kernel.no_psi", "low", "kernel", i)]
            with_findings += 1
        elif i % 10 == 3:
            findings = [finding("pids.zombie_leaker", "medium", "pids", i)]  # waived below
        results[host] = {"checks": checks_payload(i), "findings": findings, "summary": {"fix_roles": []}}
    return results, {"nodes": n, "nodes_with_findings": with_findings, "nodes_in_error": unreachable}


def one_size(n, broken, html_dir):
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.nodefix.k8s.plugins.module_utils._report import model as report_model
    from ansible_collections.nodefix.k8s.plugins.module_utils._report.html_page import RENDERERS
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = {}
    t0 = time.process_time()
    results, expected = synthetic(n, set(broken) if broken else None)
    t["inputs"] = time.process_time() - t0
    waivers = [{"id": "pids.zombie_leaker", "reason": "vendor image, OPS-1234"}]
    t0 = time.process_time()
    report_model.check_results(results)
    model = report_model.build_model(results, waivers=waivers, generated="bench")
    t["model"] = time.process_time() - t0
    sizes = {}
    for fmt, (name, render) in RENDERERS.items():
        t0 = time.process_time()
        text = render(model)
        t[fmt] = time.process_time() - t0
        sizes[fmt] = len(text.encode("utf-8"))
        if html_dir and fmt in ("html", "markdown"):
            os.makedirs(html_dir, exist_ok=True)
            with open(os.path.join(html_dir, ("broken-%s" % name) if broken else name), "w", encoding="utf-8") as fh:
                fh.write(text)
    got = dict((k, model["totals"][k]) for k in expected)
    if got != expected:
        raise SystemExit("model totals %s differ from the planted mix %s" % (got, expected))
    report = sum(v for k, v in t.items() if k != "inputs")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    module = run_module(results, waivers)
    return {"nodes": n, "broken": len(broken) if broken else None, "seconds": dict((k, round(v, 3)) for k, v in t.items()),
            "report_seconds": round(report, 3), "ms_per_node": round(1000 * report / n, 4),
            "peak_rss_mib": round(peak / 1024.0, 1), "rss_before_mib": round(rss0 / 1024.0, 1), "bytes": sizes,
            "module": module}


def run_module(results, waivers):
    """The audit_report module itself, as Ansible runs it: its arguments as JSON, every format written.

    Wall seconds and peak RSS of the module's process (Ansible's transfer of the arguments to the
    module is not in it; the fleet benchmark measures the report play as a whole)."""
    import tempfile  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as tmp:
        args = os.path.join(tmp, "args.json")
        with open(args, "w", encoding="utf-8") as fh:
            json.dump({"ANSIBLE_MODULE_ARGS": {"results": results, "dest": os.path.join(tmp, "out"), "waivers": waivers,
                                               "fail_on": "high"}}, fh)
        # the same interpreter: the project's venv, with ansible-core
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".cache", "collections"))
        t0 = time.time()
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "plugins", "modules", "audit_report.py"), args],
                              env=env, capture_output=True, text=True, check=False)
        wall = time.time() - t0
        out = json.loads(proc.stdout)
        if proc.returncode != 0 or out.get("failed"):
            raise SystemExit("audit_report failed: %s" % (out.get("msg") or proc.stderr[-2000:]))
        return {"wall_seconds": round(wall, 2), "args_mib": round(os.path.getsize(args) / 2.0 ** 20, 1),
                "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0, 1),
                "files": sorted(os.path.basename(f) for f in out["files"].values())}


def child_python():
    """The project's venv (ansible-core: the module runs as Ansible runs it); the plot needs only matplotlib."""
    venv = os.path.join(os.environ.get("NODEFIX_VENV") or os.path.join(ROOT, ".venv"), "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,2000,5000,10000")
    ap.add_argument("--broken", type=int, default=12, help="also the largest fleet with only this many broken nodes")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--png", help="write the plot here (needs matplotlib)")
    ap.add_argument("--html-dir", help="write the largest fleet's report.html/.md (and the broken case's) here")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--only-broken", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        broken = [int(x) for x in args.only_broken.split(",") if x]
        print(json.dumps(one_size(args.one, broken, args.html_dir)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = []
    cases = [(n, "") for n in sizes]
    if args.broken:
        step = max(sizes) // args.broken
        cases.append((max(sizes), ",".join(str(k * step + step // 2) for k in range(args.broken))))
    for n, broken in cases:
        argv = [child_python(), __file__, "--one", str(n), "--only-broken", broken]
        if args.html_dir and n == max(sizes):
            argv += ["--html-dir", args.html_dir]
        out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        r = runs[-1]
        print("%6d nodes%s: report %.2f s (model %.2f, html %.2f, markdown %.2f, json %.2f, junit %.2f, prometheus %.2f)"
              " = %.3f ms/node; peak RSS %.0f MiB; html %.2f MB | the module: %.1f s wall, %.0f MiB arguments, "
              "peak RSS %.0f MiB" % (
                  n, " (%d broken)" % r["broken"] if r["broken"] else "", r["report_seconds"], r["seconds"]["model"],
                  r["seconds"]["html"], r["seconds"]["markdown"], r["seconds"]["json"], r["seconds"]["junit"],
                  r["seconds"]["prometheus"], r["ms_per_node"], r["peak_rss_mib"], r["bytes"]["html"] / 1e6,
                  r["module"]["wall_seconds"], r["module"]["args_mib"], r["module"]["peak_rss_mib"]))
    plain = [r for r in runs if not r["broken"]]
    if len(plain) > 1:
        first, last = plain[0], plain[-1]
        print("linearity: %.3f ms/node at %d nodes, %.3f at %d (ratio %.2f; 1.0 = linear)" % (
            first["ms_per_node"], first["nodes"], last["ms_per_node"], last["nodes"],
            last["ms_per_node"] / first["ms_per_node"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"runs": runs, "python": sys.version.split()[0]}, fh, indent=2)
            fh.write("\n")
    if args.png and len(plain) > 1:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from plotting import pyplot, save  # pylint: disable=import-outside-toplevel
        fig, (ax1, ax2) = pyplot().subplots(1, 2, figsize=(10, 4))
        xs = [r["nodes"] for r in plain]
        ax1.plot(xs, [r["report_seconds"] for r in plain], "o-", label="report (model + 5 formats)")
        ax1.plot(xs, [r["seconds"]["html"] for r in plain], "s--", label="html")
        ax1.plot(xs, [r["seconds"]["model"] for r in plain], "^--", label="model")
        ax1.plot(xs, [r["module"]["wall_seconds"] for r in plain], "d-", label="the module (wall, args parsed)")
        ax1.set_xlabel("nodes")
        ax1.set_ylabel("CPU seconds")
        ax1.legend()
        ax1.grid(alpha=0.3)
        ax2.plot(xs, [r["peak_rss_mib"] for r in plain], "o-", color="tab:red", label="renderers' process")
        ax2.plot(xs, [r["module"]["peak_rss_mib"] for r in plain], "d-", color="tab:purple", label="the module")
        ax2.legend()
        ax2.set_xlabel("nodes")
        ax2.set_ylabel("peak RSS (MiB)")
        ax2.grid(alpha=0.3)
        fig.suptitle("audit_report at fleet size (2 % of nodes with findings, 0.5 % unreachable)")
        save(fig, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
