# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The collection's detectors by name, in report order, without importing them.

``checks.DETECTORS`` pairs each name with its module_utils (tests/unit/plugins/module_utils/test_audit_detect.py
holds the two in step); the triage's default ``required_checks`` needs only the names, and importing
every detector costs a controller-side inventory parse a tenth of a CPU second.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

CHECK_NAMES = ("containerd", "gvisor", "kubelet", "mount_units", "pids", "kernel", "cpu_quota", "reboot")
