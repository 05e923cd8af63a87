# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that show text the way a module's result is shown (``_core.redact``): for the roles' and playbooks'
own messages (a mirror URL in an assert's message, a check-mode debug line)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.mirror_auth import split_userinfo
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact


def redact_filter(value):
    """``value`` (text, or a structure of them) with every secret replaced (``_core.redact.redact``)."""
    return redact(value)


def url_without_userinfo(url):
    """``url`` without its user information (split at the last '@', ``_core.mirror_auth.split_userinfo``)."""
    return split_userinfo(str(url))[0]


class FilterModule(object):
    def filters(self):
        return {"redact": redact_filter, "url_without_userinfo": url_without_userinfo}
