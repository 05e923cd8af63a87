# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The node's findings for node_exporter's textfile collector, from node-problem-detector's tick.

The run of a tick that reads the node (``_npd/plugin.py``'s ``cached_run``, or ``--tick`` from the npd role's
timer where node-problem-detector is not deployed) also writes the plugin config's ``textfile``
(``nodefix.prom`` in node_exporter's ``--collector.textfile.directory``,
https://github.com/prometheus/node_exporter#textfile-collector) - the series of ``_report/prometheus.py``'s
``tick_textfile``: every finding of the checks looked at, which checks looked and which could not, the collection's
version and the heartbeat. One look at the node serves node-problem-detector and Prometheus.

- A tick may look at only some checks (a slow node leaves the other conditions to their own rules): the looks are
  kept per check in ``<cache_dir>/looks`` (the plugin's own directory, this boot's, written like the tick file), so
  the textfile always holds the last look at every check; its heartbeat is the time of the OLDEST look it holds -
  a check that stopped being looked at makes the whole file stale, never silently old.
- A check the plugin could not look at (``audit.check_failed``, a finding that says the detector could not see
  everything, a node it cannot see) is ``nodefix_audit_check_failed{check} 1``; a check never looked at has no series.
- The textfile is written atomically: a temporary file in the same directory whose name does not end in ``.prom``
  (the collector never reads it), mode 0644 (node_exporter's user reads it), never through a link, renamed over it.
- Nothing here changes a verdict: a textfile that cannot be written leaves the old one to go stale (the heartbeat
  and node_exporter's ``node_textfile_mtime_seconds`` show it), and the rule answers as before.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick

LOOKS = "looks"
MAGIC = "nodefix-npd-looks 1"
# the looks file's bound (a node with thousands of findings is still far below it)
MAX_LOOKS_BYTES = 4 * 1024 * 1024
# what of a finding the textfile needs (the reboot reasons are nodefix_reboot_pending's)
KEPT = ("id", "severity", "check", "subject", "title")


def _finding(f):
    kept = dict((k, f.get(k)) for k in KEPT if f.get(k) is not None)
    reasons = (f.get("evidence") or {}).get("reasons") if isinstance(f.get("evidence"), dict) else None
    if reasons:
        kept["evidence"] = {"reasons": [str(r) for r in reasons]}
    return kept


def looks_of(checks, findings, blind_ids):
    """{check: {failed, findings}} of one condition's run: ``findings`` the detectors' (run_detectors), ``blind_ids``
    the ids that say a detector could not see everything (failed, like audit.check_failed)."""
    looks = {}
    for check in checks:
        mine = [f for f in findings if f.get("check") == check]
        failed = any(f.get("id") == "audit.check_failed" or f.get("id") in blind_ids for f in mine)
        looks[check] = {"failed": 1 if failed else 0, "findings": [_finding(f) for f in mine]}
    return looks


def blind(checks):
    """The looks of checks on a node the plugin cannot see: each could not look."""
    return dict((check, {"failed": 1, "findings": []}) for check in checks)


def load(directory):
    """{check: look} of this boot from ``<directory>/looks`` when it is whole and the plugin's own; {} otherwise."""
    try:
        fd = os.open(os.path.join(directory, LOOKS), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_LOOKS_BYTES:
                return {}
            data = os.read(fd, MAX_LOOKS_BYTES + 1)
        finally:
            os.close(fd)
        lines = data.decode("ascii").split("\n")
        if len(lines) != 5 or lines[:2] != [MAGIC, "boot %s" % npd_tick.boot_id()] or lines[3:] != ["end", ""]:
            return {}
        looks = json.loads(lines[2])
        for look in looks.values():
            if look["failed"] not in (0, 1) or not isinstance(look["at"], (int, float)) \
                    or not all(isinstance(f, dict) and isinstance(f.get("id"), str) for f in look["findings"]):
                return {}
        return looks
    except Exception:  # pylint: disable=broad-except  # absent, cut or garbled: only this run's looks are written
        return {}


def write_textfile(path, text):
    """``text`` into ``path`` atomically, mode 0644; True when written."""
    return npd_tick.write_bytes(path, text.encode("utf-8"), 0o644)


def publish(directory, path, version, looks, at):
    """Merge ``looks`` (this run's, begun at Unix time ``at``) into the kept ones and write them, then the textfile
    ``path``. True when the textfile was written; never raises (the rule's verdict does not depend on it)."""
    try:
        # imported here: a plugin without a textfile loads no report code
        from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import tick_textfile  # pylint: disable=import-outside-toplevel
        kept = load(directory)
        for check, look in looks.items():
            kept[check] = dict(look, at=at)
        npd_tick.write_lines(os.path.join(directory, LOOKS),
                             [MAGIC, "boot %s" % npd_tick.boot_id(), json.dumps(kept, sort_keys=True)])
        if not kept:
            return False
        heartbeat = min(look["at"] for look in kept.values())
        return write_textfile(path, tick_textfile(kept, heartbeat, version))
    except Exception:  # pylint: disable=broad-except
        return False
