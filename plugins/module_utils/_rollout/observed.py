# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""This controller's memory of the other runs' rollout records it saw (``_rollout.record.live``'s ``observed_for``):
a lease judged as client-go's leader election judges one - from when THIS observer last saw the record change, on its
own monotonic clock (``observedTime``; k8s.io/client-go/tools/leaderelection/leaderelection.go), never by comparing
the holder's wall clock with this one's.

One small JSON file a node (``{"boot", "fingerprint", "seen"}``: this boot's id, the record's ``record.fingerprint``,
``time.monotonic()`` when it was first seen unchanged) in a directory of the caller's, written atomically (0600 in a
0700 directory). The monotonic clock is this machine's since its boot: an entry of another boot (or another machine
sharing the directory) is no observation. What cannot be read or written is no observation either: the record is
then judged as seen for the first time (``record.live``: the wall clock with ``record.MAX_SKEW`` allowed)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import tempfile


class Observations(object):
    """``observe(record)`` -> seconds this controller has seen ``record`` unchanged on node ``node``, None the first
    time (then remembered). ``directory``: where the files are; ``boot``: this boot's id; ``monotonic()``: seconds."""

    def __init__(self, directory, node, boot, monotonic, fingerprint):
        self.path = os.path.join(directory, re.sub(r"[^A-Za-z0-9._-]", "_", node) + ".json")
        self.directory, self.boot, self.monotonic, self.fingerprint = directory, boot, monotonic, fingerprint

    def _read(self):
        try:
            with open(self.path) as handle:
                seen = json.load(handle)
        except (IOError, OSError, ValueError):
            return None
        return seen if isinstance(seen, dict) else None

    def _write(self, entry):
        try:
            if not os.path.isdir(self.directory):
                os.makedirs(self.directory, 0o700)
            handle, temp = tempfile.mkstemp(prefix=".observed-", dir=self.directory)
            with os.fdopen(handle, "w") as out:
                json.dump(entry, out)
            os.chmod(temp, 0o600)
            os.replace(temp, self.path)
        except (IOError, OSError):
            return      # not remembered: the next sight is a first sight again (the stricter wall-clock rule's)

    def __call__(self, record):
        now, mark = self.monotonic(), self.fingerprint(record)
        seen = self._read()
        if self.boot and seen and seen.get("boot") == self.boot and seen.get("fingerprint") == mark \
                and isinstance(seen.get("seen"), (int, float)) and 0 <= seen["seen"] <= now:
            return now - seen["seen"]
        self._write({"boot": self.boot, "fingerprint": mark, "seen": now})
        return None
