# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""What stopping leaked units through systemd costs: the measured curves and the estimate.

``estimate_seconds`` is the one estimate of a cleanup (the survey's summary, the detector's
``mount_units.cleanup_slow``), ``reboot_faster`` the one place that decides a drained reboot beats it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# What a stop costs through systemd, measured by benchmarks/mount_units/curve.py on the lab nodes (one
# container per Debian release, 10,000 leaked scopes stopped in timed batches of 1,000; the table and
# the plot are in benchmarks/mount_units/README.md): systemd's work per stop grows with the units
# loaded, faster than linearly on 252/257, so a stop costs f(L) = A + B*L + C*L^2 ms while L units
# are loaded, and stopping k of N loaded units costs k times the average of f over L from N down to
# N-k: k * (A + B*(N - k/2) + C*(N^2 - N*k + k^2/3)) ms. A, B, C are plot.py's least-squares fit per
# systemd version; a node's version uses the nearest measured one (the older on a tie) and
# ``estimate_basis`` says which. The module adds ~10 % (its own listing, guards and batching);
# beyond 10,000 units the curve is extrapolated. Measured on a 2-core machine: a faster one stops
# faster, the shape stays.
STOP_COST_MS = {
    # systemd version: (A ms, B ms per loaded unit, C ms per loaded unit squared)
    247: (1.394, 0.0002885, 0.0),
    252: (2.808, -0.0005642, 2.289e-07),
    257: (2.834, 7.805e-05, 2.332e-07),
}
STOP_COST_SOURCE = {
    247: "Debian 11 lab: 10,000 scopes stopped in 28.8 s, 1.4 ms a unit at 1,152 loaded, 3.8 at 10,152",
    252: "Debian 12 lab: 10,000 scopes stopped in 79.4 s, 1.5 ms a unit at 1,182 loaded, 20.4 at 10,182",
    257: "Debian 13 lab: 10,000 scopes stopped in 114.7 s, 2.0 ms a unit at 1,192 loaded, 28.0 at 10,192",
}
# The same for stop_method=transaction (one systemd transaction a batch: curve.py --method transaction, the
# same lab and harness, each batch timed until systemd is idle again): a transaction returns sooner, but
# systemd recomputes the slice's masks for the units that left after it, so the cost per unit still grows
# with the units loaded - 38 % (252) and 17 % (257) below systemctl stop's measured the same day.
TRANSACTION_COST_MS = {
    247: (2.328, -0.0002673, 6.83e-08),
    252: (-0.4462, 0.001309, 8.649e-08),
    257: (-2.019, 0.003703, 1.492e-09),
}
TRANSACTION_COST_SOURCE = {
    247: "Debian 11 lab: 10,000 scopes stopped in 33.3 s in transactions of 1,000, 1.8 ms a unit at 1,152 loaded, 6.4 at 10,152",
    252: "Debian 12 lab: 10,000 scopes stopped in 93.8 s in transactions of 1,000, 1.1 ms a unit at 1,182 loaded, 19.7 at 10,182",
    257: "Debian 13 lab: 10,000 scopes stopped in 172.6 s in transactions of 1,000, 1.7 ms a unit at 1,192 loaded, 31.7 at 10,192",
}
DEFAULT_COST_VERSION = 252
MODULE_OVERHEAD = 1.10
# f(L) never below this (a stop is never free)
MIN_STOP_MS = 0.5


def _costs(method):
    """(the cost table, its sources) of a stop method."""
    if method == "transaction":
        return TRANSACTION_COST_MS, TRANSACTION_COST_SOURCE
    return STOP_COST_MS, STOP_COST_SOURCE


def cost_version(systemd_version, method="systemctl"):
    """The measured systemd version whose curve (of ``method``) estimates a node on ``systemd_version``."""
    table = _costs(method)[0]
    if systemd_version is None:
        return DEFAULT_COST_VERSION
    return min(sorted(table), key=lambda v: abs(v - int(systemd_version)))


def estimate_basis(systemd_version, method="systemctl"):
    v = cost_version(systemd_version, method)
    text = "systemd %d curve%s (%s)" % (v, ", one transaction a batch" if method == "transaction" else "",
                                        _costs(method)[1][v])
    if systemd_version is not None and int(systemd_version) != v:
        text += ", the nearest measured to this node's systemd %s" % systemd_version
    elif systemd_version is None:
        text += ", this node's systemd version unknown"
    return text


def estimate_seconds(units_loaded, to_stop, systemd_version=None, method="systemctl"):
    """Seconds to stop ``to_stop`` units while ``units_loaded`` units are loaded (the cost model above), with
    ``method`` (``stop_method``: its own curve)."""
    n, k = float(max(int(units_loaded or 0), int(to_stop or 0))), float(int(to_stop or 0))
    if k <= 0:
        return 0.0
    a, b, c = _costs(method)[0][cost_version(systemd_version, method)]
    per_unit_ms = max(MIN_STOP_MS, a + b * (n - k / 2.0) + c * (n * n - n * k + k * k / 3.0))
    return round(k * per_unit_ms / 1000.0 * MODULE_OVERHEAD, 2)


def reboot_faster(estimate, reboot_over_seconds):
    """Whether a drained reboot beats the cleanup: its estimate exceeds ``reboot_over_seconds`` (0: never).

    The one place this is decided, for the detector (``mount_units.cleanup_slow``),
    the module (``reboot_recommended``) and so the role's reboot path.
    """
    return bool(reboot_over_seconds) and reboot_over_seconds > 0 and estimate > reboot_over_seconds
