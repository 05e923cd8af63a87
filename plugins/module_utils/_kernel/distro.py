# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""The node's package family from ``/etc/os-release`` (``ID``, ``ID_LIKE``): ``debian`` (apt) or ``el``
(dnf); what the kernel package planner and the reboot detector (which release order applies) ask.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
EL_IDS = ("rhel", "centos", "fedora", "rocky", "almalinux", "ol", "amzn")


def os_ids(root):
    os_release = read_text(root_path(root, "/etc/os-release")) or ""
    ids = dict(line.split("=", 1) for line in os_release.splitlines() if "=" in line)
    return ids.get("ID", "").strip('"'), ids.get("ID_LIKE", "").strip('"').split()


def family_of(distro, like):
    if distro in ("debian", "ubuntu") or "debian" in like or "ubuntu" in like:
        return "debian"
    if distro in EL_IDS or any(i in like for i in ("rhel", "fedora", "centos")):
        return "el"
    return None


def family(root):
    """``debian`` (apt), ``el`` (dnf) or None, from the node's ``/etc/os-release``."""
    return family_of(*os_ids(root))
