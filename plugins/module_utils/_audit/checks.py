# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Run every detector of the collection in one module invocation.

The detectors are the ``check()`` functions of the per-problem module_utils
(the same code the per-problem modules run); this file only selects them,
isolates their failures and merges their findings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._cpu_quota import detect as cpu_quota_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._audit import detect as audit_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._audit import names as audit_names
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import detect as gvisor_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import detect as kernel_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import detect as kubelet_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import detect as mount_units_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import detect as reboot_detect

# name -> module_utils file whose check() runs it; order is report order.
DETECTORS = (
    ("containerd", containerd_detect),
    ("gvisor", gvisor_detect),
    ("kubelet", kubelet_detect),
    ("mount_units", mount_units_detect),
    ("pids", pids_detect),
    ("kernel", kernel_detect),
    ("cpu_quota", cpu_quota_detect),
    ("reboot", reboot_detect),
)
CHECK_NAMES = audit_names.CHECK_NAMES  # the names alone, for callers that need no detector (the triage)

FINDINGS = audit_detect.FINDINGS  # audit.check_failed


def registries():
    """Every finding registry of the collection: {id: entry}."""
    merged = dict(FINDINGS)
    for _name, mod in DETECTORS:
        merged.update(getattr(mod, "FINDINGS", {}))
    return merged


def detector(name):
    """The module_utils file of detector ``name``."""
    return dict(DETECTORS)[name]


def run_checks(runner, root="/", checks=None, options=None):
    """Run the selected detectors (every one by default) in report order: ``audit_detect.run_detectors``."""
    selected = list(checks or CHECK_NAMES)
    return audit_detect.run_detectors(runner, [(name, mod) for name, mod in DETECTORS if name in selected],
                                      root=root, options=options)
