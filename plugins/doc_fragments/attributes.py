# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Module attributes shared by the nodefix.k8s modules.

A module lists ``nodefix.k8s.attributes`` (the descriptions and the platform)
and one of ``nodefix.k8s.attributes.read_only`` / ``nodefix.k8s.attributes.writes``
(or sets ``support`` itself), then adds only its own ``details`` under
``attributes:``; Ansible merges the keys, the module's win.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # What each attribute means (the wording of ansible.builtin.action_common_attributes);
    # every nodefix.k8s module runs on POSIX hosts.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode).
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

    # Detectors and info modules: change nothing, so check mode is the same run and there is no diff.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same way in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
"""

    # Modules that change the node: full check mode and a diff; the module says what each shows (details).
    WRITES = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""
