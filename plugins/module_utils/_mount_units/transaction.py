# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Stopping many units in ONE systemd transaction (``stop_method=transaction``).

``systemctl stop A B C ...`` asks systemd for one stop job per unit, one transaction each; after
each, systemd recomputes the cgroup masks of the slice from all its members, so N leaked scopes in one
slice cost O(N^2) (benchmarks/mount_units/README.md). A transient oneshot service started with
``Conflicts=`` and ``After=`` on the N names makes systemd build ONE transaction holding the N stop
jobs (a start job's conflicts become stop jobs of the same transaction, systemd.unit(5)
``Conflicts=``), and ``After=`` makes its start wait for every stop (a stop is always ordered before a
start, whichever way the ordering points, systemd.unit(5) ``Before=, After=``), so ``systemd-run``
returns once they are all done. Part of systemd's work for the units that left (the slice's masks)
comes after that; a next stop right away pays for it. Measured (benchmarks/mount_units/README.md, each
batch timed until systemd was idle again): 10,000 leaked scopes on systemd 252 stopped in 94 s against
151 s with ``systemctl stop`` (1.1 against 1.8 ms a unit at 1,000 loaded units, 19.7 against 28.6 at
10,000); the cost per unit still grows with the units loaded.

Only names of the shape kubelet's scopes and mounts take, without a backslash, go into a transaction:
``systemd-run -p`` splits a dependency list like a shell word list (``extract_first_word`` with
``EXTRACT_UNQUOTE``), so ``a\\x2db.scope`` would name ``ax2db.scope`` - another unit - and the way a
given systemd-run unquotes is not something to bet a node on. Mount units under the pods directory
always hold ``\\x2d`` (a pod UID's dashes): they are stopped with ``systemctl stop``; the leaked
``run-*.scope`` units, the bulk of a leak, have none.

The transient service has no default dependencies (nothing else is started or waited for: not
``sysinit.target``, not ``basic.target`` on a node still booting) but conflicts with
``shutdown.target``: ``systemd-run`` uses job mode ``fail``, so on a node shutting down, or when a
listed unit has a queued job, systemd refuses the whole transaction and stops nothing. Stops pulled in
by ``Conflicts=`` are not manual requests: a unit with ``RefuseManualStop=`` would be stopped, where
``systemctl stop`` refuses (kubelet's transient units never set it). A stop that fails or times out
leaves ``systemd-run``'s answer 0: the re-read after the stops is what tells.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# kubelet's transient scopes and mounts, no backslash, no template: the only names put in a transaction
UNIT_NAME = lazy_compile(r"\A[A-Za-z0-9:_.-]{1,248}\.(?:scope|mount)\Z")
# bytes of one "-p Conflicts=..." argument: under the kernel's limit for ONE argv string
# (MAX_ARG_STRLEN, 32 pages = 131072 bytes)
PROPERTY_MAX_BYTES = 120000
UNIT_PREFIX = "nodefix-mount-units-stop-"
# --collect (236) and dependencies of transient units
MIN_SYSTEMD = 236
# what systemd-run prints when systemd (or systemd-run itself) refused the request: nothing was queued
# (not "Failed to start transient service unit:" alone: systemd-run puts it before a bus timeout too)
REFUSED = ("is destructive", "Unknown assignment", "unrecognized option", "Unknown property",
           "Cannot set property", "Invalid unit name", "already exists")


def weight(name):
    """Bytes ``name`` takes in one property argument (with the space after it)."""
    return len(name.encode("utf-8", "surrogateescape")) + 1


def eligible(name):
    """Whether ``name`` may go into a transaction (see the module's docstring)."""
    return bool(UNIT_NAME.match(name))


def refused(stderr):
    """Whether a failed ``systemd-run`` says its request was refused (rather than, say, killed or timed out
    while the stops may be running)."""
    return any(marker in (stderr or "") for marker in REFUSED)


def tools(runner, systemctl, systemd_version):
    """``(systemd-run, true)`` next to ``systemctl`` (or on PATH), or None when either is missing or systemd
    is older than MIN_SYSTEMD (or its version unknown)."""
    if systemd_version is None or systemd_version < MIN_SYSTEMD:
        return None
    here = [os.path.dirname(systemctl)] if systemctl else []
    run = runner.bin("systemd-run", opt_dirs=here)
    true = runner.bin("true", opt_dirs=["/usr/bin", "/bin"])
    return (run, true) if run and true else None


def argv(found, names, tag):
    """One ``systemd-run`` stopping ``names`` in one transaction; ``tag`` makes the transient unit's name unique."""
    run, true = found
    bad = [n for n in names if not eligible(n)]
    if bad:
        raise ValueError("not a name for a transaction: %r" % bad[0])
    words = " ".join(names)
    return [run, "--unit=%s%s.service" % (UNIT_PREFIX, tag), "--quiet", "--no-ask-password", "--collect",
            "--service-type=oneshot", "--description=nodefix.k8s: stop %d leaked kubelet mount units" % len(names),
            "--property=DefaultDependencies=no", "--property=Conflicts=shutdown.target " + words,
            "--property=After=" + words, true]
