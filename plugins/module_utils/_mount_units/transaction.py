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
returns once they are all done. Measured at 1,000 leaked scopes: 2.6 -> 0.7 s on systemd 252.

``systemd-run -p`` splits a dependency list like a shell word list (``extract_first_word`` with
``EXTRACT_UNQUOTE``): a backslash escapes the next character, so ``a\\x2db.scope`` would name
``ax2db.scope`` - another unit. Every backslash is doubled, and a name with any character a unit
name cannot hold is never put in a transaction (those are stopped with ``systemctl stop``). A doubled
backslash read verbatim by a systemd that does not unquote names a unit systemd never makes
(``\\`` is escaped ``\\x5c`` in unit names): nothing is stopped then, and the re-read after the stop
sends those units to ``systemctl stop``.

``systemd-run`` uses job mode ``fail``: a unit with a queued start job makes systemd refuse the whole
transaction (nothing stopped); the caller then stops that batch with ``systemctl stop`` (mode
``replace``, as before).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# the characters of a valid unit name (systemd's unit_name_is_valid: VALID_CHARS plus "@" and ".")
UNIT_NAME = lazy_compile(r"\A[A-Za-z0-9:_.@\\-]{1,255}\Z")
# bytes of one "-p Conflicts=..." argument: under the kernel's limit for ONE argv string
# (MAX_ARG_STRLEN, 32 pages = 131072 bytes)
PROPERTY_MAX_BYTES = 120000
UNIT_PREFIX = "nodefix-mount-units-stop-"


def quoted(name):
    """``name`` as ``systemd-run -p Conflicts=`` must be given it to read ``name`` back."""
    return name.replace("\\", "\\\\")


def weight(name):
    """Bytes ``name`` takes in one property argument (quoted, and the space after it)."""
    return len(quoted(name).encode("utf-8", "surrogateescape")) + 1


def eligible(name):
    return bool(UNIT_NAME.match(name))


def tools(runner, systemctl):
    """``(systemd-run, true)`` next to ``systemctl`` (or on PATH), or None when either is missing."""
    here = [os.path.dirname(systemctl)] if systemctl else []
    run = runner.bin("systemd-run", opt_dirs=here)
    true = runner.bin("true", opt_dirs=["/usr/bin", "/bin"])
    return (run, true) if run and true else None


def argv(found, names, tag):
    """One ``systemd-run`` stopping ``names`` in one transaction; ``tag`` makes the transient unit's name unique."""
    run, true = found
    words = " ".join(quoted(n) for n in names)
    return [run, "--unit=%s%s.service" % (UNIT_PREFIX, tag), "--quiet", "--no-ask-password", "--collect",
            "--service-type=oneshot", "--description=nodefix.k8s: stop %d leaked kubelet mount units" % len(names),
            "--property=Conflicts=" + words, "--property=After=" + words, true]
