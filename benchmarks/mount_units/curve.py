# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the cost of stopping leaked kubelet scopes against the number of loaded units, per systemd version.

Run from the repository with the lab lock held (it is podman-heavy):

    source scripts/env.sh
    flock "$NODEFIX_LAB_LOCK" python benchmarks/mount_units/curve.py \\
        --images debian11,debian12,debian13 --n 10000 --json benchmarks/mount_units/curve.json

For each lab image (Debian 11: systemd 247, 12: 252, 13: 257), in a fresh
container: N REAL leaked scopes of dead pods plus --live scopes of live pods are
created (lab/break/mount_units_spawn.py, as run.py does), the module is asked in
check mode what it would stop and how long it expects that to take
(``estimate_seconds``), then the dead scopes are stopped with raw batched
``systemctl stop`` calls of --batch units each, timed one by one: every batch
is a point of the curve "milliseconds per stopped unit" against "units loaded
when the batch started", from N down to --batch, in one run.

--order picks the stop order: ``forward`` (creation order), ``reverse`` (newest
first), ``shuffled``. --accuracy M (optional, per image) then creates M fresh
leaked scopes, takes the module's check-mode estimate and times the module's
real cleanup (``state=absent`` through ansible), for the estimate's error.
--budget S (optional) then creates --budget-n fresh leaked scopes and runs the
module with ``max_seconds=S``: it must return within S plus one batch (the
slowest batch of the curve) plus Ansible's start-up, stop no live pod's unit,
and leave the rest to a second run, which must finish the job - the run aborts
otherwise (a test, measured at scale).

After every step the dead units must be gone and every live unit active (the
run aborts otherwise). Results go to --json; plot.py draws them.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  pylint: disable=wrong-import-position

LAB = bench.LAB
# Ansible's own start-up and module transfer for one call (measured ~2 s; generous)
ANSIBLE_OVERHEAD_S = 10


def loaded_units(name):
    return len(bench.listed(name))


def stop_batch(name, names, method="systemctl"):
    """One raw ``systemctl stop`` of ``names`` (METHOD transaction: one systemd transaction, the module's
    argv): seconds inside the container (podman exec not counted) until systemd was idle again
    (stop_helper.py: a transaction returns before systemd is done with the units that left; batches
    measured apart would miss that part, the module's batches back to back pay it)."""
    with tempfile.NamedTemporaryFile("w", delete=False) as fh:
        fh.write("\n".join(names))
    bench.put(name, fh.name, LAB + "/batch.txt")
    os.unlink(fh.name)
    bench.settle(name)   # what came before (the leak, the listing) is not this batch's
    out = json.loads(bench.pexec(name, "python3", LAB + "/stop_helper.py", method, LAB + "/batch.txt",
                                 timeout=3600).stdout)
    if out["rc"] != 0:
        raise SystemExit("%s stop failed (rc %s)" % (method, out["rc"]))
    return out["settled"]


def curve(name, expect, batch, order, seed, method="systemctl"):
    dead = list(expect["dead"])
    if order == "reverse":
        dead.reverse()
    elif order == "shuffled":
        random.Random(seed).shuffle(dead)
    points = []
    for i in range(0, len(dead), batch):
        names = dead[i:i + batch]
        loaded = loaded_units(name)
        secs = stop_batch(name, names, method)
        points.append({"loaded": loaded, "stopped": len(names), "seconds": round(secs, 3),
                       "ms_per_unit": round(secs * 1000.0 / len(names), 3)})
        print("  loaded %6d  stop %5d  %7.2f s  %6.2f ms/unit" % (loaded, len(names), secs, points[-1]["ms_per_unit"]),
              flush=True)
    bench.verify(name, expect)
    return points


def one_image(image, args, rnd_base):
    name = "nodefix-bench-curve"
    bench.start_container(name, image)
    out = {"image": image}
    try:
        bench.install(name)
        out["systemd"] = bench.pexec(name, "systemctl", "--version").stdout.decode().splitlines()[0]
        out["units_at_boot"] = loaded_units(name)
        print("== %s: %s, %d units loaded at boot" % (image, out["systemd"], out["units_at_boot"]), flush=True)
        margs = {"state": "absent", "batch_size": args.batch, "list_limit": 1, "stop_method": args.method}
        if args.no_curve:
            return accuracy_only(name, out, args, rnd_base, margs)
        expect, created = bench.leak(name, args.n, args.live, rnd_base + 1, args.parallel)
        out["leak_seconds"] = round(created, 1)
        print("  leaked %d dead + %d live scopes in %.1f s" % (len(expect["dead"]), len(expect["live"]), created),
              flush=True)
        res, _secs = bench.module_call(name, margs, check=True)
        out["estimate"] = {"units_total": res["systemd"]["units_total"], "to_stop": res["to_stop"],
                           "estimate_seconds": res["estimate_seconds"], "basis": res["estimate_basis"]}
        t = time.time()
        out["points"] = curve(name, expect, args.batch, args.order, args.seed, args.method)
        out["stop_wall_seconds"] = round(time.time() - t, 1)
        out["stop_seconds"] = round(sum(p["seconds"] for p in out["points"]), 2)
        print("  whole stop %.1f s (check-mode estimate %.1f s)"
              % (out["stop_seconds"], out["estimate"]["estimate_seconds"]), flush=True)
        if args.accuracy:
            out["accuracy"] = accuracy_run(name, args, rnd_base + 2, margs)
        if args.budget:
            # one batch at the budget's load: the slowest batch measured for this image (this run or
            # earlier ones in --json), at the highest load
            earlier = [p for r in args.earlier_runs if r["image"] == image for p in r["points"]]
            out["budget"] = budget_run(name, args, rnd_base + 3, max(p["seconds"] for p in out["points"] + earlier))
    finally:
        bench.sh(["podman", "rm", "-f", "-t", "5", name], check=False)
    return out


def accuracy_run(name, args, rnd, margs):
    """--accuracy M: M fresh leaked scopes, the module's check-mode estimate against its real cleanup's wall time."""
    expect, created = bench.leak(name, args.accuracy, args.live, rnd, args.parallel)
    check, _secs = bench.module_call(name, margs, check=True)
    real, secs = bench.module_call(name, margs)
    bench.verify(name, expect)
    est = check["estimate_seconds"]
    out = {"n": args.accuracy, "leak_seconds": round(created, 1), "units_total": check["systemd"]["units_total"],
           "to_stop": check["to_stop"], "estimate_seconds": est, "basis": check["estimate_basis"],
           "stop_method": real.get("stop_method"), "stopped": real["stopped"], "module_wall_seconds": round(secs, 2),
           "stop_seconds": real["timings"]["stop_s"], "error": round((est - secs) / secs, 3)}
    print("  accuracy at %d: estimate %.1f s, measured %.1f s (module, wall), error %+.0f %%"
          % (args.accuracy, est, secs, 100 * out["error"]), flush=True)
    return out


def accuracy_only(name, out, args, rnd_base, margs):
    """--no-curve: the --accuracy run alone (after a curve measured earlier was fitted into the model)."""
    out["points"] = []
    out["accuracy"] = accuracy_run(name, args, rnd_base + 2, margs)
    return out


def budget_run(name, args, rnd, slowest_batch):
    """--budget: a cleanup of --budget-n units with max_seconds returns within the budget plus one batch,
    stops no live pod's unit, and a second run (no budget) finishes the job. Aborts the run when not."""
    expect, created = bench.leak(name, args.budget_n, args.live, rnd, args.parallel)
    args_ = {"state": "absent", "batch_size": args.batch, "list_limit": 1}
    first, secs1 = bench.module_call(name, dict(args_, max_seconds=args.budget))
    left_after_first = bench.verify(name, expect, partial=True)   # raises if a live unit was touched
    # the module checks the budget before each batch: at most the budget plus one batch (the slowest
    # batch of the curve above, at the highest load) plus Ansible's own start-up
    bound = args.budget + slowest_batch + ANSIBLE_OVERHEAD_S
    second, secs2 = bench.module_call(name, args_)
    bench.verify(name, expect)                                   # every dead unit gone, live ones active
    out = {"n": args.budget_n, "leak_seconds": round(created, 1), "max_seconds": args.budget,
           "first": {"wall_seconds": round(secs1, 2), "stop_seconds": first["timings"]["stop_s"],
                     "stopped": first["stopped"], "left": first["left"], "stop_calls": first["stop_calls"]},
           "second": {"wall_seconds": round(secs2, 2), "stopped": second["stopped"], "left": second["left"]},
           "bound_seconds": round(bound, 1), "live_kept": len(expect["live"])}
    print("  budget %s s at %d units: first run %.1f s (bound %.1f), stopped %d, left %d; second run %.1f s "
          "stopped %d, left %d" % (args.budget, args.budget_n, secs1, bound, first["stopped"], first["left"],
                                   secs2, second["stopped"], second["left"]), flush=True)
    problems = []
    if secs1 > bound:
        problems.append("the budgeted run took %.1f s > budget + one batch + %d s = %.1f s"
                        % (secs1, ANSIBLE_OVERHEAD_S, bound))
    if not first["left"] or first["left"] != left_after_first:
        problems.append("the budgeted run left %s units, %d are loaded" % (first["left"], left_after_first))
    if second["left"] or first["stopped"] + second["stopped"] != len(expect["dead"]):
        problems.append("the second run did not finish: stopped %s + %s of %d, left %s"
                        % (first["stopped"], second["stopped"], len(expect["dead"]), second["left"]))
    if problems:
        raise SystemExit("BUDGET CHECK FAILED: " + "; ".join(problems))
    out["passed"] = True
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--images", default="debian11,debian12,debian13",
                    help="lab images (localhost/nodefix-<name>), comma-separated")
    ap.add_argument("--n", type=int, default=10000, help="leaked units of dead pods (default 10000)")
    ap.add_argument("--live", type=int, default=40)
    ap.add_argument("--batch", type=int, default=1000, help="units per timed stop (one point of the curve)")
    ap.add_argument("--method", choices=("systemctl", "transaction"), default="systemctl",
                    help="how each batch is stopped: systemctl stop, or one systemd transaction (the module's "
                    "stop_method); the module runs with the same stop_method")
    ap.add_argument("--no-curve", action="store_true", help="only the --accuracy run (no curve)")
    ap.add_argument("--order", choices=("forward", "reverse", "shuffled"), default="forward")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--accuracy", type=int, default=0, help="then check the module's estimate on this many units")
    ap.add_argument("--budget", type=float, default=0, help="then check a max_seconds cleanup (seconds)")
    ap.add_argument("--budget-n", type=int, default=10000, help="units for --budget (default 10000)")
    ap.add_argument("--parallel", type=int, default=6)
    ap.add_argument("--json", help="write (or extend) the results here")
    args = ap.parse_args()
    if not shutil.which("podman"):
        raise SystemExit("podman is required")
    results = {"runs": []}
    if args.json and os.path.exists(args.json):
        with open(args.json) as fh:
            results = json.load(fh)
    args.earlier_runs = list(results["runs"])
    for i, image in enumerate(args.images.split(",")):
        img = image if "/" in image else "localhost/nodefix-" + image
        r = one_image(img, args, 10 * i)
        r.update({"n": args.n, "batch": args.batch, "order": args.order, "method": args.method, "live": args.live,
                  "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "kernel": os.uname().release})
        results["runs"].append(r)
        if args.json:   # after every image: a long run keeps what it measured
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
