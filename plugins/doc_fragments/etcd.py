# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the etcd health command's credentials go (control_plane_gate, reboot_gate)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  etcd_health_environment:
    description:
      - Environment variables for O(etcd_health_command) - where its credentials go rather than on its command line
        (etcdctl reads V(ETCDCTL_USER), V(ETCDCTL_PASSWORD), any flag as C(ETCDCTL_<FLAG>)). Their values never appear
        in any output. A command line that carries a credential still runs as given, with a warning naming this
        option, and is shown redacted.
    type: dict
    default: {}
"""
