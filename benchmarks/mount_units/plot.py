# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit and plot curve.py's results: milliseconds per stopped unit against loaded units, one line per systemd version.

    python3 -m venv .cache/bench-venv && .cache/bench-venv/bin/pip install -r benchmarks/requirements.txt
    .cache/bench-venv/bin/python benchmarks/mount_units/plot.py benchmarks/mount_units/curve.json \\
        --png benchmarks/mount_units/curve.png

The fit is the cost model of ``kubelet_mount_units`` (``estimate_seconds``):
stopping k units while L are loaded costs k * (A + B * (L - k/2)) ms, i.e. each
batch point gives ms_per_unit = A + B * x with x = loaded - stopped/2; A and B
come from a least-squares line through the points of one systemd version. The
fitted coefficients, the table of the README and the whole-stop prediction of
the fit against the measured whole stop are printed.
"""

import argparse
import json
import re
import sys


def fit(points):
    """Least-squares (A, B) of ms_per_unit = A + B * (loaded - stopped/2)."""
    xs = [p["loaded"] - p["stopped"] / 2.0 for p in points]
    ys = [p["ms_per_unit"] for p in points]
    n = float(len(xs))
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def systemd_version(text):
    m = re.search(r"systemd (\d+)", text or "")
    return int(m.group(1)) if m else None


def whole(a, b, loaded, k):
    return k * (a + b * (loaded - k / 2.0)) / 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("json")
    ap.add_argument("--png", help="write the plot here (needs matplotlib)")
    args = ap.parse_args()
    with open(args.json) as fh:
        runs = json.load(fh)["runs"]
    print("| systemd | image | N | order | whole stop (s) | ms/unit at 1k / 5k / 10k loaded | fit A ms | fit B ms/unit | "
          "fit's whole stop (s) | check-mode estimate (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fits = {}
    for r in runs:
        pts = r["points"]
        a, b = fit(pts)
        v = systemd_version(r["systemd"])
        if r["order"] == "forward":
            fits[v] = (a, b)

        def at(n, pts=pts):
            near = min(pts, key=lambda p: abs(p["loaded"] - n))
            return "%.1f" % near["ms_per_unit"] if abs(near["loaded"] - n) <= 1000 else "-"
        loaded0 = pts[0]["loaded"]
        k = sum(p["stopped"] for p in pts)
        print("| %s | %s | %d | %s | %.1f | %s / %s / %s | %.3f | %.6f | %.1f | %.1f |" % (
            v, r["image"].rsplit("/", 1)[-1], r["n"], r["order"], r["stop_seconds"], at(1000), at(5000), at(10000),
            a, b, whole(a, b, loaded0, k), r["estimate"]["estimate_seconds"]))
    accs = [r for r in runs if r.get("accuracy")]
    if accs:
        print("\n| systemd | N | check-mode estimate (s) | module cleanup measured (s) | error |")
        print("|---|---|---|---|---|")
        for r in accs:
            acc = r["accuracy"]
            print("| %s | %d | %.1f | %.1f | %+.0f %% |" % (systemd_version(r["systemd"]), acc["n"],
                                                            acc["estimate_seconds"], acc["module_wall_seconds"],
                                                            100 * acc["error"]))
    print("\nfitted (A ms, B ms per loaded unit) by systemd version: %s"
          % json.dumps(dict((v, [round(a, 3), round(b, 6)]) for v, (a, b) in sorted(fits.items()))))
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
        fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
        for r in runs:
            pts = sorted(r["points"], key=lambda p: p["loaded"])
            label = "systemd %s (%s, %s order)" % (systemd_version(r["systemd"]), r["image"].rsplit("-", 1)[-1], r["order"])
            ax.plot([p["loaded"] for p in pts], [p["ms_per_unit"] for p in pts], marker="o", ms=3, label=label,
                    linestyle="-" if r["order"] == "forward" else "--")
        ax.set_xlabel("units loaded in systemd when the batch started")
        ax.set_ylabel("ms per stopped unit (batches of %d)" % runs[0]["batch"])
        ax.set_title("Stopping leaked kubelet scopes: cost per unit grows with loaded units")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.png)
        print("wrote %s" % args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
