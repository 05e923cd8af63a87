# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The slices' shared records: ``<dir>/<slice>/<name>.json``, one per slice, read by every slice
(``fleet_gate``'s ``rollout.json``, ``storm_gate``'s ``storm.json``). A record that cannot be
read, or is not a regular file, is an error naming it: the fleet's state is then unknown."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.fleet_gate import SLICE_NAME


class RecordError(NodefixError, ValueError):
    """A slice record that cannot be read or is not JSON."""


def read_record(path):
    """The decoded record at ``path``: a regular file only (``core_paths.read_utf8`` without following a
    link, without blocking on a FIFO); RecordError naming it otherwise."""
    try:
        text = core_paths.read_utf8(path, what="slice record", follow=False)
    except core_paths.FileSafetyError as exc:
        raise RecordError(exc.msg)
    if text is None:
        raise RecordError("slice record %s cannot be read: it is gone" % path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RecordError("slice record %s is not JSON (%s)" % (path, str(exc)[:200] or type(exc).__name__))


def read_records(directory, filename):
    """{slice: record} of every slice directory under ``directory`` holding ``filename`` (absent: none)."""
    records = {}
    if not os.path.isdir(directory):
        return records
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name, filename)
        if not SLICE_NAME.match(name) or not os.path.lexists(path):
            continue
        records[name] = read_record(path)
    return records


def write_record(directory, slice_name, filename, data):
    """Write ``data`` to <directory>/<slice_name>/<filename> atomically (a temp file renamed over it)."""
    target_dir = os.path.join(directory, slice_name)
    if not os.path.isdir(target_dir):
        os.makedirs(target_dir)
    fd, tmp = tempfile.mkstemp(prefix="." + filename + ".", dir=target_dir)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(redact(data), fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(target_dir, filename))
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
