# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""The node's record of the kernels it booted once (``/var/lib/nodefix-k8s/kernel-boot.json``):
which booted and were kept, which failed (and the kernel the node came back on), which boot is
pending. Written by ``kernel_boot`` (``_kernel.boot``); read here for it and for the reboot detector,
which does not ask again for a kernel that failed to boot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

RECORD = "/var/lib/nodefix-k8s/kernel-boot.json"


def read_record(root):
    """The record of boots tried ({"booted": {release: {...}}, "failed": {...}, "pending": {...}})."""
    text = read_text(root_path(root, RECORD))
    data = {}
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            raise NodefixError("%s is not JSON: fix or remove it (it records which kernels failed to boot)" % RECORD)
    if not isinstance(data, dict):
        raise NodefixError("%s is not a JSON object" % RECORD)
    for key in ("booted", "failed"):
        data.setdefault(key, {})
    data.setdefault("pending", None)
    return data
