# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Waivers: a decision not to act on a finding, for some hosts, until a date.

One implementation for the fleet report (``_report``) and the node-problem-detector plugin
(``_npd``), which imports this small file alone (it runs on every node every few minutes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

WAIVER_KEYS = ("id", "reason", "hosts", "subject", "expires")


class WaiverError(NodefixError, ValueError):
    pass


def check_waivers(waivers, today=None):
    """Validate waivers; return (active, expired).

    A waiver is ``{"id": <finding id or glob>, "reason": <text>, "hosts":
    [<host globs>], "subject": <glob>, "expires": "YYYY-MM-DD"}``; ``id`` and
    ``reason`` are required. A waiver past its ``expires`` date no longer
    applies (its findings count again) and is returned in ``expired``.
    Raises WaiverError on bad input.
    """
    if not waivers:
        return [], []
    import datetime  # pylint: disable=import-outside-toplevel  # only with waivers: the npd plugin runs every tick
    today = today or datetime.date.today()
    active, expired = [], []
    for i, w in enumerate(waivers or []):
        if not isinstance(w, dict):
            raise WaiverError("waivers[%d] must be a dict, got %s" % (i, type(w).__name__))
        unknown = sorted(set(w) - set(WAIVER_KEYS))
        if unknown:
            raise WaiverError("waivers[%d] has unknown key(s) %s (known: %s)" % (i, ", ".join(unknown), ", ".join(WAIVER_KEYS)))
        for key in ("id", "reason"):
            if not isinstance(w.get(key), str) or not w[key].strip():
                raise WaiverError("waivers[%d] needs a non-empty %s" % (i, key))
        hosts = w.get("hosts") or ["*"]
        if isinstance(hosts, str):
            hosts = [hosts]
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise WaiverError("waivers[%d].hosts must be a list of host names or globs" % i)
        norm = {"id": w["id"].strip(), "reason": w["reason"].strip(), "hosts": hosts,
                "subject": w.get("subject") or "*", "expires": None}
        if w.get("expires"):
            try:
                until = datetime.datetime.strptime(str(w["expires"]), "%Y-%m-%d").date()
            except ValueError:
                raise WaiverError("waivers[%d].expires must be a date YYYY-MM-DD, got %r" % (i, w["expires"]))
            norm["expires"] = until.isoformat()
            if until < today:
                expired.append(norm)
                continue
        active.append(norm)
    return active, expired


def waiver_for(waivers, host, finding):
    """The first active waiver (from ``check_waivers``) that matches ``finding`` on ``host``, else None."""
    if not waivers:
        return None
    import fnmatch  # pylint: disable=import-outside-toplevel  # only with waivers: the npd plugin's every tick
    for w in waivers:
        if (any(fnmatch.fnmatchcase(host, h) for h in w["hosts"])
                and fnmatch.fnmatchcase(finding.get("id") or "", w["id"])
                and fnmatch.fnmatchcase(str(finding.get("subject") or ""), w["subject"])):
            return w
    return None
