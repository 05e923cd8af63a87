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
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAB = "/var/lib/nodefix-bench"
PODS = "/var/lib/kubelet/pods"


def sh(argv, check=True, capture=True, timeout=None, data=None):
    proc = subprocess.run(argv, stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None,
                          timeout=timeout, check=False, input=data)
    if check and proc.returncode != 0:
        raise SystemExit("command failed (%s): %s\n%s\n%s" % (proc.returncode, " ".join(argv[:8]),
                                                              (proc.stdout or b"")[-2000:].decode(errors="replace"),
                                                              (proc.stderr or b"")[-2000:].decode(errors="replace")))
    return proc


def pexec(name, *argv, **kw):
    return sh(["podman", "exec", name] + list(argv), **kw)


def put(name, src, dest, mode="0644"):
    """The file SRC as DEST in the container, with MODE: one `podman exec` (the set-up is not timed)."""
    with open(src, "rb") as fh:
        data = fh.read()
    sh(["podman", "exec", "-i", name, "sh", "-c", 'cat > "$1" && chmod "$2" "$1"', "sh", dest, mode], data=data)


def put_tree(name, files):
    """FILES ({path in the container: (bytes, mode), or None for a directory}) in one `podman exec` of tar
    (parents made as needed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for dest, entry in sorted(files.items()):
            info = tarfile.TarInfo(dest.lstrip("/"))
            if entry is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            info.size, info.mode = len(entry[0]), entry[1]
            tar.addfile(info, io.BytesIO(entry[0]))
    sh(["podman", "exec", "-i", name, "tar", "-x", "-C", "/", "-f", "-"], data=buf.getvalue())


def read(path):
    with open(path, "rb") as fh:
        return fh.read()


def start_container(name, image):
    sh(["podman", "rm", "-f", name], check=False)
    sh(["podman", "run", "-d", "--name", name, "--privileged", "--systemd=always", "--pids-limit=-1", image,
        "/sbin/init"])
    # --wait: one exec blocks until the boot is over (systemd >= 240); the loop for a bus not up yet
    end = time.time() + 60
    while time.time() < end:
        try:
            out = pexec(name, "systemctl", "is-system-running", "--wait", check=False, timeout=60).stdout.decode().strip()
        except subprocess.TimeoutExpired:
            break
        if out in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise SystemExit("container did not boot")


def install(name, before=None):
    """The harness's files, and the CLI of this tree at /opt/nodefix (of the --before tree at /opt/nodefix-before):
    one tar through one `podman exec`."""
    files = cli_files(ROOT, "/opt/nodefix")
    if before:
        files.update(cli_files(before, "/opt/nodefix-before"))
    rawstop = ("import subprocess, sys, time\nnames = open(sys.argv[1]).read().split()\n"
               "t = time.time()\nrc = subprocess.call(['systemctl', 'stop'] + names)\n"
               "print('%.3f %d' % (time.time() - t, rc))\n")
    crictl = b"#!/usr/bin/python3\n" + read(os.path.join(ROOT, "lab", "crictl-double", "crictl"))
    files.update({LAB + "/spawn.py": (read(os.path.join(ROOT, "lab", "break", "mount_units_spawn.py")), 0o755),
                  "/usr/local/bin/crictl": (crictl, 0o755),
                  LAB + "/per_unit_cleaner.sh": (read(os.path.join(HERE, "per_unit_cleaner.sh")), 0o755),
                  LAB + "/rawstop.py": (rawstop.encode(), 0o755),
                  LAB + "/stop_helper.py": (read(os.path.join(HERE, "stop_helper.py")), 0o755), "/etc/crictl-double": None})
    put_tree(name, files)


def cli_files(tree, dest):
    """The files the CLI of collection tree TREE imports, as the role's timer ships them (meta/node_files.yml),
    under DEST on the node, with DEST/nodefix-mount-units running it: {path: (bytes, mode)}."""
    mu = dest + "/ansible_collections/nodefix/k8s/plugins/module_utils/"
    with open(os.path.join(tree, "meta", "node_files.yml")) as fh:
        files = yaml.safe_load(fh)["mount_units_cli"]["module_utils"]
    out = dict((mu + f, (read(os.path.join(tree, "plugins", "module_utils", f)), 0o644)) for f in files)
    out[dest + "/nodefix-mount-units"] = (("import sys\nsys.path.insert(0, %r)\n"
                                           "from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.cleanup "
                                           "import cli\nsys.exit(cli())\n" % dest).encode(), 0o755)
    return out


def before_tree(rev, work):
    """The collection at git revision REV as WORK/ansible_collections/nodefix/k8s (an ANSIBLE_COLLECTIONS_PATH
    entry): the modules and module_utils of that commit, the rest (meta, galaxy.yml) with them."""
    dest = os.path.join(work, "ansible_collections", "nodefix", "k8s")
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "plugins", "meta", "galaxy.yml"], check=True,
                             stdout=subprocess.PIPE).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def settle(name):
    """Wait until systemd (PID 1 of the container) is idle again: {"settled": seconds waited, ...}
    (stop_helper.py settle, one `podman exec`)."""
    return json.loads(pexec(name, "python3", LAB + "/stop_helper.py", "settle", timeout=900).stdout)


def pid1_cpu(name):
    """CPU seconds systemd (PID 1 of the container) has used so far (one `podman exec`)."""
    out = pexec(name, "sh", "-c", "getconf CLK_TCK; cat /proc/1/stat").stdout.decode()
    ticks, stat = out.split("\n", 1)
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(int(ticks.strip() or 100))


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
    spec = {"scopes": scopes, "mounts": [], "parallel": parallel, "timeout": 3600}
    put_tree(name, {LAB + "/spec.json": (json.dumps(spec).encode(), 0o644),
                    "/etc/crictl-double/state.json": (json.dumps(state).encode(), 0o644)})
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


def module_call(name, args, check=False, connection="containers.podman.podman", collections=None, module=None):
    """kubelet_mount_units on the container through ansible: (result, wall seconds). CONNECTION: the podman
    connection (containers.podman.podman: four `podman exec` calls a module; the lab's nodefix_podman: one,
    pipelined); COLLECTIONS: a directory holding ansible_collections/nodefix/k8s to run instead of this tree's."""
    argv = ["ansible", "all", "-i", "%s," % name, "-c", connection, "-m", module or "nodefix.k8s.kubelet_mount_units",
            "-e", "ansible_python_interpreter=/usr/bin/python3", "-o"] + (["-a", json.dumps(args)] if args else []) + \
        (["--check"] if check else [])
    env = dict(os.environ)
    if collections:
        rest = [p for p in env.get("ANSIBLE_COLLECTIONS_PATH", "").split(":") if p and "site-packages" in p]
        env["ANSIBLE_COLLECTIONS_PATH"] = ":".join([collections] + rest)
    t = time.time()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=7200, check=False, env=env)
    secs = time.time() - t
    text = proc.stdout.decode()
    if proc.returncode != 0 or "=>" not in text:
        raise SystemExit("module failed: %s %s" % (text[-3000:], proc.stderr.decode()[-2000:]))
    return json.loads(text.split("=>", 1)[1]), secs


def run_floor(name, connection):
    """`ansible -m ping` through the same connection: what any module run costs (Ansible's start, the
    connection, the smallest AnsiballZ payload), the part of the module's time no module can cut."""
    _res, secs = module_call(name, None, connection=connection, module="ansible.builtin.ping")
    return {"seconds": round(secs, 2), "connection": connection}


def run_module(name, batch, connection="containers.podman.podman", collections=None):
    res, secs = module_call(name, {"state": "absent", "batch_size": batch, "list_limit": 3}, connection=connection,
                            collections=collections)
    return {"seconds": round(secs, 2), "stopped": res.get("stopped"), "stop_calls": res.get("stop_calls"),
            "kept_live": res.get("kept_live"), "timings": res.get("timings"), "connection": connection}


def run_cli(name, batch, dest="/opt/nodefix"):
    cfg = {"state": "absent", "batch_size": batch, "list_limit": 3}
    with tempfile.NamedTemporaryFile("w", delete=False) as fh:
        json.dump(cfg, fh)
    put(name, fh.name, LAB + "/cfg.json")
    os.unlink(fh.name)
    t = time.time()
    out = pexec(name, "python3", "-s", "-E", dest + "/nodefix-mount-units", "--config", LAB + "/cfg.json",
                timeout=3600).stdout.decode()
    secs = time.time() - t
    res = json.loads(out)
    return {"seconds": round(secs, 2), "stopped": res["stopped"], "stop_calls": res["stop_calls"],
            "kept_live": res["kept_live"], "timings": res["timings"]}


def plan_methods(methods, connections):
    """The run's methods in order: module methods once per connection (the first connection's keep their
    bare names: module, module_before; the others' are suffixed, e.g. module:nodefix_podman); with
    ``floor`` among the methods, each connection's floor (ansible -m ping) before its first module method."""
    out = []
    for method in methods:
        if method.startswith("module"):
            for i, conn in enumerate(connections):
                floor = "floor" if i == 0 else "floor:" + conn
                if "floor" in methods and floor not in out:
                    out.append(floor)
                out.append(method if i == 0 else "%s:%s" % (method, conn))
        elif method != "floor":
            out.append(method)
    return out


def run_method(key, args, expect, before):
    """One method on the current fresh leak (floor needs none); the dead units must be gone afterwards."""
    method, _sep, conn = key.partition(":")
    conn = conn or args.connections.split(",")[0]
    if method == "floor":
        return run_floor(args.name, conn)
    if method == "per_unit":
        return run_per_unit(args.name, expect, args.n, args.per_unit_limit)
    if method == "raw":
        return run_raw(args.name, expect)
    if method in ("module", "module_before"):
        r = run_module(args.name, args.batch_size, conn, before if method == "module_before" else None)
    elif method in ("cli", "cli_before"):
        r = run_cli(args.name, args.batch_size, "/opt/nodefix-before" if method == "cli_before" else "/opt/nodefix")
    else:
        raise SystemExit("unknown method %s" % method)
    verify(args.name, expect)
    return r


def median_of(runs):
    """One method's runs summed up: the median seconds (and of its timings), every run kept."""
    med = dict(runs[len(runs) // 2] if len(runs) % 2 else runs[0])
    med["seconds"] = round(statistics.median(r["seconds"] for r in runs), 2)
    if runs[0].get("timings"):
        med["timings"] = dict((k, round(statistics.median(r["timings"].get(k, 0.0) for r in runs), 3))
                              for k in runs[0]["timings"])
    for k in ("systemd_cpu_seconds", "leak_seconds", "settle_seconds", "seconds_settled"):
        if k in runs[0]:
            med[k] = round(statistics.median(r[k] for r in runs), 2)
    if len(runs) > 1:
        med["runs"] = [r["seconds"] for r in runs]
    return med


def split_of(m, key):
    """Where a module method's wall time goes: Ansible's floor (ping, same connection), the module's own
    steps (its timings), and the rest (this module's AnsiballZ payload over ping's, its interpreter start and
    imports, the systemd version query, the result's way back)."""
    conn = key.partition(":")[2]
    floor = m.get("floor" + (":" + conn if conn else ""))
    t = m[key].get("timings") or {}
    if not floor or not t:
        return None
    steps = dict((k, t[k]) for k in ("list_s", "pods_s", "stop_s", "verify_s") if k in t)
    stop_only = steps.get("stop_s", 0.0) - steps.get("verify_s", 0.0)
    out = {"wall": m[key]["seconds"], "ansible_floor": floor["seconds"], "list_s": steps.get("list_s"),
           "pods_s": steps.get("pods_s"), "stop_only_s": round(stop_only, 3), "verify_s": steps.get("verify_s"),
           "rest_s": round(m[key]["seconds"] - floor["seconds"] - sum(v for k, v in steps.items() if k != "verify_s"),
                           2)}
    if "raw" in m:
        out["over_raw_s"] = round(m[key]["seconds"] - m["raw"]["seconds"], 2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--n", type=int, default=10000, help="leaked units of dead pods (default 10000)")
    ap.add_argument("--live", type=int, default=40, help="units of live pods that must survive (default 40)")
    ap.add_argument("--image", default="localhost/nodefix-debian12")
    ap.add_argument("--name", default="nodefix-bench-mount-units")
    ap.add_argument("--methods", default="raw,module,cli,per_unit",
                    help="raw, module, cli, per_unit; module_before and cli_before with --before; floor "
                    "(ansible -m ping per connection)")
    ap.add_argument("--before", help="a git revision: module_before/cli_before run that commit's collection")
    ap.add_argument("--connections", default="containers.podman.podman",
                    help="the module methods run once per connection (comma-separated; also nodefix_podman)")
    ap.add_argument("--reps", type=int, default=1, help="rounds of every method (interleaved); medians reported")
    ap.add_argument("--per-unit-limit", type=int, default=0, help="run the per-unit cleaner on this many units and "
                    "extrapolate to N (0: all)")
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=6, help="systemd-run processes in flight while leaking")
    ap.add_argument("--keep", action="store_true", help="leave the container running")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not shutil.which("podman"):
        raise SystemExit("podman is required")
    methods = plan_methods(args.methods.split(","), args.connections.split(","))
    if any(m.partition(":")[0].endswith("_before") for m in methods) and not args.before:
        raise SystemExit("module_before/cli_before need --before <git revision>")
    results = {"n": args.n, "live": args.live, "image": args.image, "batch_size": args.batch_size, "reps": args.reps,
               "connections": args.connections.split(","), "methods": {}}
    if args.before:
        results["before"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", args.before], check=True,
                                           stdout=subprocess.PIPE).stdout.decode().strip()
    results["now"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False,
                                    stdout=subprocess.PIPE).stdout.decode().strip()
    work = tempfile.mkdtemp(prefix="nodefix-mu-bench-")
    runs = dict((m, []) for m in methods)
    start_container(args.name, args.image)
    try:
        before = before_tree(args.before, work) if args.before else None
        install(args.name, before)
        before = os.path.join(work) if before else None   # the ANSIBLE_COLLECTIONS_PATH entry
        results["systemd"] = pexec(args.name, "systemctl", "--version").stdout.decode().splitlines()[0]
        rnd = 0
        for rep in range(args.reps):
            for method in methods:
                expect, created = None, None
                if not method.startswith("floor"):
                    rnd += 1
                    expect, created = leak(args.name, args.n, args.live, rnd, args.parallel)
                    print("[%s #%d] leaked %d dead + %d live scopes in %.1f s" % (
                        method, rep + 1, len(expect["dead"]), len(expect["live"]), created), flush=True)
                settle(args.name)   # the leak's own work is not the method's
                cpu0 = pid1_cpu(args.name)
                r = run_method(method, args, expect, before)
                # what systemd still did after the method returned (a transaction leaves part of the
                # units' cleanup to after its stop jobs): waited for, and counted apart
                r["settle_seconds"] = settle(args.name)["settled"]
                r["seconds_settled"] = round(r["seconds"] + r["settle_seconds"], 2)
                r["systemd_cpu_seconds"] = round(pid1_cpu(args.name) - cpu0, 2)
                if created is not None:
                    r["leak_seconds"] = round(created, 1)
                runs[method].append(r)
                print("[%s #%d] %s" % (method, rep + 1, json.dumps(r)), flush=True)
            summarize(args, results, runs, final=rep + 1 == args.reps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep:
            sh(["podman", "rm", "-f", "-t", "5", args.name], check=False)
    return 0


def summarize(args, results, runs, final):
    """The medians so far; printed and written (--json) after every round, so a long run cut short keeps
    its finished rounds (``rounds`` says how many)."""
    m = results["methods"] = dict((k, median_of(v)) for k, v in runs.items() if v)
    results["rounds"] = min(len(v) for v in runs.values())
    results["ratios"] = ratios_of(m)
    results["split"] = dict((k, split_of(m, k)) for k in m if k.startswith("module") and split_of(m, k))
    if final:
        report(args, results)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


def ratios_of(m):
    ratios = {}
    if "per_unit" in m and "module" in m:
        ratios["per_unit_over_module"] = round(m["per_unit"]["seconds"] / m["module"]["seconds"], 1)
    if "per_unit" in m and "cli" in m:
        ratios["per_unit_over_cli"] = round(m["per_unit"]["seconds"] / m["cli"]["seconds"], 1)
    if "raw" in m:
        for k in m:
            if k.startswith(("module", "cli", "floor")):
                ratios["%s_over_raw" % k] = round(m[k]["seconds"] / m["raw"]["seconds"], 2)
            if k.startswith(("module", "cli")) and m[k].get("seconds_settled") and m["raw"].get("seconds_settled"):
                ratios["%s_over_raw_settled" % k] = round(m[k]["seconds_settled"] / m["raw"]["seconds_settled"], 2)
    return ratios


def report(args, results):
    m = results["methods"]
    print("\nN=%d dead scopes (+%d live), %s, median of %d round(s)"
          % (args.n, args.live, results.get("systemd"), args.reps))
    for k in m:
        note = " (extrapolated from %d units: %.1f s measured)" % (m[k]["units"], m[k]["seconds_measured"]) \
            if m[k].get("sampled") else ""
        every = " %s" % m[k]["runs"] if m[k].get("runs") else ""
        print("  %-38s %9.2f s  (+%.2f s until systemd idle; systemd's own CPU: %.1f s)%s%s"
              % (k, m[k]["seconds"], m[k].get("settle_seconds", 0.0), m[k]["systemd_cpu_seconds"], every, note))
    for k, v in results["ratios"].items():
        print("  %-38s %s" % (k, v))
    for k, v in results["split"].items():
        print("  split %-32s %s" % (k, json.dumps(v)))


if __name__ == "__main__":
    sys.exit(main())
