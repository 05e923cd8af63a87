# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit and plot curve.py's results: milliseconds per stopped unit against loaded units, one line per systemd version.

    python3 -m venv .cache/bench-venv && .cache/bench-venv/bin/pip install -r benchmarks/requirements.txt
    .cache/bench-venv/bin/python benchmarks/mount_units/plot.py benchmarks/mount_units/curve.json \\
        --png benchmarks/mount_units/curve.png

The fit is the cost model of ``kubelet_mount_units`` (``estimate_seconds``): a
stop costs A + B*L + C*L^2 ms while L units are loaded (systemd's per-stop work
grows with the units loaded, and faster than linearly at 10,000), so stopping k
of N loaded units costs k times the average of that over L from N down to N-k:
k * (A + B*(N - k/2) + C*(N^2 - N*k + k^2/3)) ms. Each batch point is one such
average; A, B, C are a least-squares fit through the points of one version. The
fitted coefficients, the table of the README and the whole-stop prediction of
the fit against the measured whole stop are printed.
"""

import argparse
import json
import os
import re
import sys


def features(loaded, stopped):
    """[1, x1, x2]: the average over a batch of A + B*L + C*L^2 as L goes from ``loaded`` down by ``stopped``."""
    n, k = float(loaded), float(stopped)
    return [1.0, n - k / 2.0, n * n - n * k + k * k / 3.0]


def solve3(m, v):
    """Solve the 3x3 system m x = v (Gaussian elimination with partial pivoting)."""
    a = [row[:] + [v[i]] for i, row in enumerate(m)]
    for c in range(3):
        p = max(range(c, 3), key=lambda r: abs(a[r][c]))
        a[c], a[p] = a[p], a[c]
        for r in range(c + 1, 3):
            f = a[r][c] / a[c][c]
            for j in range(c, 4):
                a[r][j] -= f * a[c][j]
    x = [0.0, 0.0, 0.0]
    for r in (2, 1, 0):
        x[r] = (a[r][3] - sum(a[r][j] * x[j] for j in range(r + 1, 3))) / a[r][r]
    return x


def fit(points):
    """Least-squares (A, B, C) of ms_per_unit = average of A + B*L + C*L^2 over each batch.

    A negative C (a curve bending down within the measured range) would make the
    extrapolation to systemd's 131,072 units go to zero: then the straight line
    (C = 0) is fitted instead.
    """
    rows = [features(p["loaded"], p["stopped"]) for p in points]
    ys = [p["ms_per_unit"] for p in points]
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    v = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(3)]
    a, b, c = solve3(m, v)
    if c >= 0:
        return a, b, c
    xs = [r[1] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b, 0.0


def systemd_version(text):
    m = re.search(r"systemd (\d+)", text or "")
    return int(m.group(1)) if m else None


def method_of(run):
    """How the run's batches were stopped (runs before curve.py --method: systemctl stop)."""
    return run.get("method", "systemctl")


def whole(coef, loaded, k):
    f = features(loaded, k)
    return k * sum(c * x for c, x in zip(coef, f)) / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("json")
    ap.add_argument("--png", help="write the plot here (needs matplotlib)")
    args = ap.parse_args()
    with open(args.json) as fh:
        runs = json.load(fh)["runs"]
    print("| systemd | stop method | image | N | order | whole stop (s) | ms/unit at ~1k / 5k / 10k loaded | fit A, B, C | "
          "fit's whole stop (s) | check-mode estimate then (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fits = {}
    for r in runs:
        pts = r["points"]
        if not pts:      # an accuracy run alone (curve.py --no-curve)
            continue
        coef = fit(pts)
        v = systemd_version(r["systemd"])
        if r["order"] == "forward" and len(pts) >= 5:
            fits[(method_of(r), v)] = coef

        def at(n, pts=pts):
            near = min(pts, key=lambda p: abs(p["loaded"] - n))
            return "%.1f" % near["ms_per_unit"] if abs(near["loaded"] - n) <= 1000 else "-"
        loaded0 = pts[0]["loaded"]
        k = sum(p["stopped"] for p in pts)
        print("| %s | %s | %s | %d | %s | %.1f | %s / %s / %s | %.4g, %.4g, %.4g | %.1f | %.1f |" % (
            v, method_of(r), r["image"].rsplit("/", 1)[-1], r["n"], r["order"], r["stop_seconds"], at(1000), at(5000), at(10000),
            coef[0], coef[1], coef[2], whole(coef, loaded0, k), r["estimate"]["estimate_seconds"]))
    accs = [r for r in runs if r.get("accuracy")]
    if accs:
        print("\n| systemd | stop method | N | check-mode estimate (s) | module cleanup measured (s) | error |")
        print("|---|---|---|---|---|---|")
        for r in accs:
            acc = r["accuracy"]
            print("| %s | %s | %d | %.1f | %.1f | %+.0f %% |" % (
                systemd_version(r["systemd"]), method_of(r), acc["n"], acc["estimate_seconds"],
                acc["module_wall_seconds"], 100 * acc["error"]))
    for method in sorted(set(m for m, _v in fits)):
        print("\nfitted (A ms, B ms per loaded unit, C ms per loaded unit squared), %s, by systemd version: %s"
              % (method, json.dumps(dict((v, ["%.4g" % c for c in coef]) for (m, v), coef in sorted(fits.items())
                                         if m == method))))
    if args.png:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from plotting import pyplot, save  # pylint: disable=import-outside-toplevel
        fig, ax = pyplot().subplots(figsize=(8, 4.8), dpi=110)
        for r in sorted(runs, key=lambda r: (method_of(r), systemd_version(r["systemd"]) or 0, r["order"])):
            pts = sorted(r["points"], key=lambda p: p["loaded"])
            if not pts:
                continue
            label = "systemd %s (%s, %s order, %s, %s)" % (systemd_version(r["systemd"]), r["image"].rsplit("-", 1)[-1],
                                                           r["order"], method_of(r), r.get("date", "?"))
            ax.plot([p["loaded"] for p in pts], [p["ms_per_unit"] for p in pts], marker="o", ms=3, label=label,
                    linestyle=":" if method_of(r) == "transaction" else "-" if r["order"] == "forward" else "--")
        ax.set_xlabel("units loaded in systemd when the batch started")
        ax.set_ylabel("ms per stopped unit (batches of %d)" % runs[0]["batch"])
        ax.set_title("Stopping leaked kubelet scopes: systemctl stop vs one transaction a batch")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
