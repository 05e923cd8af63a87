# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``root`` option of the modules that read node files (``_core.paths.root_path``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  root:
    description:
      - Root of the node's filesystem. Every node file the module reads (under C(/proc), C(/sys/fs/cgroup),
        configuration files, kubelet's directories) is read below it.
      - Leave the default on nodes; unit tests point it at a fake tree.
    type: path
    default: /
"""
