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

from ansible_collections.nodefix.k8s.plugins.module_utils import _containerd
from ansible_collections.nodefix.k8s.plugins.module_utils import _cpu_quota
from ansible_collections.nodefix.k8s.plugins.module_utils import _detect
from ansible_collections.nodefix.k8s.plugins.module_utils import _gvisor
from ansible_collections.nodefix.k8s.plugins.module_utils import _kernel
from ansible_collections.nodefix.k8s.plugins.module_utils import _kubelet
from ansible_collections.nodefix.k8s.plugins.module_utils import _mount_units
from ansible_collections.nodefix.k8s.plugins.module_utils import _process
from ansible_collections.nodefix.k8s.plugins.module_utils import _reboot

# name -> module_utils file whose check() runs it; order is report order.
DETECTORS = (
    ("containerd", _containerd),
    ("gvisor", _gvisor),
    ("kubelet", _kubelet),
    ("mount_units", _mount_units),
    ("pids", _process),
    ("kernel", _kernel),
    ("cpu_quota", _cpu_quota),
    ("reboot", _reboot),
)
CHECK_NAMES = tuple(name for name, _dummy in DETECTORS)

FINDINGS = _detect.FINDINGS  # audit.check_failed


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
    """Run the selected detectors (every one by default) in report order: ``_detect.run_detectors``."""
    selected = list(checks or CHECK_NAMES)
    return _detect.run_detectors(runner, [(name, mod) for name, mod in DETECTORS if name in selected],
                                 root=root, options=options)
