# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: stopping N leaked kubelet scopes in a lab container.

Run from the repository with the lab lock held (it is podman-heavy):

    source scripts/env.sh
    flock "$NODEFIX_LAB_LOCK" python benchmarks/mount_units/run.py --n 10000

For each method a fresh set of N REAL leaked scopes of dead pods (systemd-run
--scope ... sleep infinity, described "Kubernetes transient mount for
/var/lib/kubelet/pods/<uid>/volume-subpaths/...", all three naming schemes)
plus --live scopes of live pods (registered in the crictl test double) is
created with lab/break/mount_units_spawn.py, then removed by:

  per_unit a per-unit cleaner script (per_unit_cleaner.sh: systemctl status +
           cat + crictl pods + systemctl stop per unit); --per-unit-limit K runs
           it on K units only and extrapolates linearly to N (said so in the
           output)
  raw      ONE batched `systemctl stop <the N dead names>` (the names given,
           no discovery, no safety checks): the lower bound
  module   nodefix.k8s.kubelet_mount_units state=absent through ansible
           (podman connection), the way a play runs it
  cli      the same code run on the node by the role's timer (python3, no Ansible)

After each method the dead units must be gone and every live unit active.
Wall-clock seconds and the ratios are printed (and written as JSON with --json).
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAB = "/var/lib/nodefix-bench"
PODS = "/var/lib/kubelet/pods"


def sh(argv, check=True, capture=True, timeout=None):
    proc = subprocess.run(argv, stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise SystemExit("command failed (%s): %s\n%s\n%s" % (proc.returncode, " ".join(argv[:8]),
                                                              (proc.stdout or b"")[-2000:].decode(errors="replace"),
                                                              (proc.stderr or b"")[-2000:].decode(errors="replace")))
    return proc


def pexec(name, *argv, **kw):
    return sh(["podman", "exec", name] + list(argv), **kw)


def put(name, src, dest, mode="0644"):
    sh(["podman", "cp", src, "%s:%s" % (name, dest)])
    pexec(name, "chmod", mode, dest)


def start_container(name, image):
    sh(["podman", "rm", "-f", name], check=False)
    sh(["podman", "run", "-d", "--name", name, "--privileged", "--systemd=always", "--pids-limit=-1", image,
        "/sbin/init"])
    for _attempt in range(120):
        out = pexec(name, "systemctl", "is-system-running", check=False).stdout.decode().strip()
        if out in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise SystemExit("container did not boot")


def install(name):
    pexec(name, "mkdir", "-p", LAB, "/etc/crictl-double",
          "/opt/nodefix/ansible_collections/nodefix/k8s/plugins/module_utils")
    put(name, os.path.join(ROOT, "lab", "break", "mount_units_spawn.py"), LAB + "/spawn.py", "0755")
    with open(os.path.join(ROOT, "lab", "crictl-double", "crictl")) as src, \
            tempfile.NamedTemporaryFile("w", delete=False) as fh:
        fh.write("#!/usr/bin/python3\n" + src.read())
    put(name, fh.name, "/usr/local/bin/crictl", "0755")
    os.unlink(fh.name)
    put(name, os.path.join(HERE, "per_unit_cleaner.sh"), LAB + "/per_unit_cleaner.sh", "0755")
    mu = "/opt/nodefix/ansible_collections/nodefix/k8s/plugins/module_utils/"
    # the files the CLI imports, as the role's timer ships them (meta/node_files.yml)
    with open(os.path.join(ROOT, "meta", "node_files.yml")) as fh:
        files = yaml.safe_load(fh)["mount_units_cli"]["module_utils"]
    pexec(name, "mkdir", "-p", *sorted(set(mu + os.path.dirname(f) for f in files)))   # the packages
    for f in files:
        put(name, os.path.join(ROOT, "plugins", "module_utils", f), mu + f)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write("import sys\nsys.path.insert(0, '/opt/nodefix')\n"
                 "from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.cleanup import cli\n"
                 "sys.exit(cli())\n")
    put(name, fh.name, "/opt/nodefix/nodefix-mount-units", "0755")
    os.unlink(fh.name)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write("import subprocess, sys, time\nnames = open(sys.argv[1]).read().split()\n"
                 "t = time.time()\nrc = subprocess.call(['systemctl', 'stop'] + names)\n"
                 "print('%.3f %d' % (time.time() - t, rc))\n")
    put(name, fh.name, LAB + "/rawstop.py", "0755")
    os.unlink(fh.name)


def pid1_cpu(name):
    """CPU seconds systemd (PID 1 of the container) has used so far."""
    fields = pexec(name, "cat", "/proc/1/stat").stdout.decode().rsplit(")", 1)[1].split()
    ticks = int(pexec(name, "getconf", "CLK_TCK").stdout.decode().strip() or 100)
    return (int(fields[11]) + int(fields[12])) / float(ticks)


def uid_for(i, salt):
    return str(uuid.UUID(hashlib.md5(("%s/%d" % (salt, i)).encode()).hexdigest()))


def leak(name, n, live, rnd, parallel):
    """Create n dead scopes and `live` live ones; register the live pods in the double."""
    scopes = []
    live_uids = [uid_for(i, "live") for i in range(max(1, live // 4))]
    for i in range(n):
        uid = uid_for(i // 2, "dead-%d" % rnd)     # two units per dead pod
        scheme = i % 3
        unit = ["run-r" + hashlib.md5(("%d/%d" % (rnd, i)).encode()).hexdigest(), "run-u%d" % (100000 * rnd + i),
                "run-%d" % (10000000 * rnd + i)][scheme]
        scopes.append({"unit": unit, "group": "dead", "description":
                       "Kubernetes transient mount for %s/%s/volume-subpaths/cfg/app/%d" % (PODS, uid, i % 2)})
    for i in range(live):
        uid = live_uids[i % len(live_uids)]
        scopes.append({"unit": "run-r" + hashlib.md5(("live/%d/%d" % (rnd, i)).encode()).hexdigest(), "group": "live",
                       "description": "Kubernetes transient mount for %s/%s/volume-subpaths/cfg/app/%d"
                       % (PODS, uid, i)})
    state = {"pods": [{"uid": u, "name": "live-%d" % i} for i, u in enumerate(live_uids)]}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "spec.json"), "w") as fh:
            json.dump({"scopes": scopes, "mounts": [], "parallel": parallel, "timeout": 3600}, fh)
        with open(os.path.join(tmp, "state.json"), "w") as fh:
            json.dump(state, fh)
        put(name, os.path.join(tmp, "spec.json"), LAB + "/spec.json")
        put(name, os.path.join(tmp, "state.json"), "/etc/crictl-double/state.json")
    t = time.time()
    pexec(name, "python3", LAB + "/spawn.py", LAB + "/spec.json", LAB + "/expect.json", timeout=7200)
    created = time.time() - t
    expect = json.loads(pexec(name, "cat", LAB + "/expect.json").stdout)
    return expect, created


def listed(name):
    out = pexec(name, "systemctl", "list-units", "--all", "--plain", "--no-legend", "--full").stdout.decode()
    return dict((line.split()[0], line.split()[2]) for line in out.splitlines() if line.strip())


def verify(name, expect, partial=False):
    now = listed(name)
    left = [u for u in expect["dead"] if u in now]
    live_bad = [u for u in expect["live"] if now.get(u) != "active"]
    if live_bad:
        raise SystemExit("LIVE UNITS TOUCHED: %s" % live_bad[:5])
    if left and not partial:
        raise SystemExit("%d dead units left, e.g. %s" % (len(left), left[:3]))
    return len(left)


def clear_dead(name, expect):
    """Remove what a sampled (partial) method left, with the raw stop (not timed)."""
    now = listed(name)
    left = [u for u in expect["dead"] if u in now]
    if left:
        with tempfile.NamedTemporaryFile("w", delete=False) as fh:
            fh.write("\n".join(left))
        put(name, fh.name, LAB + "/left.txt")
        os.unlink(fh.name)
        pexec(name, "python3", LAB + "/rawstop.py", LAB + "/left.txt", timeout=3600)


def run_per_unit(name, expect, n, limit):
    t = time.time()
    out = pexec(name, "bash", LAB + "/per_unit_cleaner.sh", str(limit or 0), timeout=7 * 3600).stdout.decode().strip()
    secs = time.time() - t
    left = verify(name, expect, partial=bool(limit))
    done = n - left
    result = {"seconds": round(secs, 2), "units": done, "output": out}
    if limit and done < n:
        result["sampled"] = True
        result["seconds_measured"] = result["seconds"]
        result["seconds"] = round(secs / max(done, 1) * n, 1)
    clear_dead(name, expect)
    return result


def run_raw(name, expect):
    with tempfile.NamedTemporaryFile("w", delete=False) as fh:
        fh.write("\n".join(expect["dead"]))
    put(name, fh.name, LAB + "/dead.txt")
    os.unlink(fh.name)
    t = time.time()
    out = pexec(name, "python3", LAB + "/rawstop.py", LAB + "/dead.txt", timeout=3600).stdout.decode().split()
    secs = time.time() - t
    verify(name, expect)
    return {"seconds": round(secs, 2), "inner_seconds": float(out[0]), "rc": int(out[1])}


def module_call(name, args, check=False):
    """kubelet_mount_units on the container through ansible (podman connection): (result, wall seconds)."""
    argv = ["ansible", "all", "-i", "%s," % name, "-c", "containers.podman.podman", "-m",
            "nodefix.k8s.kubelet_mount_units", "-a", json.dumps(args),
            "-e", "ansible_python_interpreter=/usr/bin/python3", "-o"] + (["--check"] if check else [])
    t = time.time()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=7200, check=False)
    secs = time.time() - t
    text = proc.stdout.decode()
    if proc.returncode != 0 or "=>" not in text:
        raise SystemExit("module failed: %s %s" % (text[-3000:], proc.stderr.decode()[-2000:]))
    return json.loads(text.split("=>", 1)[1]), secs


def run_module(name, batch):
    res, secs = module_call(name, {"state": "absent", "batch_size": batch, "list_limit": 3})
    return {"seconds": round(secs, 2), "stopped": res.get("stopped"), "stop_calls": res.get("stop_calls"),
            "kept_live": res.get("kept_live"), "timings": res.get("timings")}


def run_cli(name, batch):
    cfg = {"state": "absent", "batch_size": batch, "list_limit": 3}
    with tempfile.NamedTemporaryFile("w", delete=False) as fh:
        json.dump(cfg, fh)
    put(name, fh.name, LAB + "/cfg.json")
    os.unlink(fh.name)
    t = time.time()
    out = pexec(name, "python3", "-s", "-E", "/opt/nodefix/nodefix-mount-units", "--config", LAB + "/cfg.json",
                timeout=3600).stdout.decode()
    secs = time.time() - t
    res = json.loads(out)
    return {"seconds": round(secs, 2), "stopped": res["stopped"], "stop_calls": res["stop_calls"],
            "kept_live": res["kept_live"], "timings": res["timings"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--n", type=int, default=10000, help="leaked units of dead pods (default 10000)")
    ap.add_argument("--live", type=int, default=40, help="units of live pods that must survive (default 40)")
    ap.add_argument("--image", default="localhost/nodefix-debian12")
    ap.add_argument("--name", default="nodefix-bench-mount-units")
    ap.add_argument("--methods", default="raw,module,cli,per_unit")
    ap.add_argument("--per-unit-limit", type=int, default=0, help="run the per-unit cleaner on this many units and "
                    "extrapolate to N (0: all)")
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=6, help="systemd-run processes in flight while leaking")
    ap.add_argument("--keep", action="store_true", help="leave the container running")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not shutil.which("podman"):
        raise SystemExit("podman is required")
    results = {"n": args.n, "live": args.live, "image": args.image, "batch_size": args.batch_size, "methods": {}}
    start_container(args.name, args.image)
    try:
        install(args.name)
        results["systemd"] = pexec(args.name, "systemctl", "--version").stdout.decode().splitlines()[0]
        for rnd, method in enumerate(args.methods.split(","), 1):
            expect, created = leak(args.name, args.n, args.live, rnd, args.parallel)
            print("[%s] leaked %d dead + %d live scopes in %.1f s" % (method, len(expect["dead"]), len(expect["live"]), created),
                  flush=True)
            cpu0 = pid1_cpu(args.name)
            if method == "per_unit":
                r = run_per_unit(args.name, expect, args.n, args.per_unit_limit)
            elif method == "raw":
                r = run_raw(args.name, expect)
            elif method == "module":
                r = run_module(args.name, args.batch_size)
                verify(args.name, expect)
            elif method == "cli":
                r = run_cli(args.name, args.batch_size)
                verify(args.name, expect)
            else:
                raise SystemExit("unknown method %s" % method)
            r["systemd_cpu_seconds"] = round(pid1_cpu(args.name) - cpu0, 2)
            r["leak_seconds"] = round(created, 1)
            results["methods"][method] = r
            print("[%s] %s" % (method, json.dumps(r)), flush=True)
    finally:
        if not args.keep:
            sh(["podman", "rm", "-f", "-t", "5", args.name], check=False)
    m = results["methods"]
    ratios = {}
    if "per_unit" in m and "module" in m:
        ratios["per_unit_over_module"] = round(m["per_unit"]["seconds"] / m["module"]["seconds"], 1)
    if "per_unit" in m and "cli" in m:
        ratios["per_unit_over_cli"] = round(m["per_unit"]["seconds"] / m["cli"]["seconds"], 1)
    if "raw" in m and "module" in m:
        ratios["module_over_raw"] = round(m["module"]["seconds"] / m["raw"]["seconds"], 2)
    if "raw" in m and "cli" in m:
        ratios["cli_over_raw"] = round(m["cli"]["seconds"] / m["raw"]["seconds"], 2)
    results["ratios"] = ratios
    print("\nN=%d dead scopes (+%d live), %s" % (args.n, args.live, results.get("systemd")))
    for k in ("per_unit", "raw", "module", "cli"):
        if k in m:
            note = " (extrapolated from %d units: %.1f s measured)" % (m[k]["units"], m[k]["seconds_measured"]) \
                if m[k].get("sampled") else ""
            print("  %-7s %9.2f s  (systemd's own CPU: %.1f s)%s" % (k, m[k]["seconds"], m[k]["systemd_cpu_seconds"], note))
    for k, v in ratios.items():
        print("  %-17s %s" % (k, v))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
