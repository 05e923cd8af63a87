# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that show text the way a module's result is shown (``_core.redact``): for the roles' and playbooks'
own messages (a mirror URL in an assert's message, a check-mode debug line)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.mirror_auth import request_headers, split_userinfo
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact


def redact_filter(value):
    """``value`` (text, or a structure of them) with every secret replaced (``_core.redact.redact``)."""
    return redact(value)


def url_without_userinfo(url):
    """``url`` without its user information (split at the last '@', ``_core.mirror_auth.split_userinfo``)."""
    try:
        return split_userinfo(str(url), "the URL given to url_without_userinfo")[0]
    except NodefixError as exc:
        raise AnsibleFilterError(exc.msg)


def mirror_headers(base_url, username="", password="", headers=None):
    """The headers of every request to a mirror (``_core.mirror_auth.request_headers``, as runsc_install sends
    them): ``headers`` and Basic authentication from ``username``/``password``, or - when both are empty - from the
    URL's user information, split at its last '@' and percent-decoded (``p%40ss`` is ``p@ss``; ``https://:pass@host``
    an empty user, which ``ansible.builtin.uri``'s ``url_username`` would drop)."""
    try:
        url_user, url_password = split_userinfo(str(base_url), "the mirror URL given to mirror_headers")[1:]
        if not username and not password:
            username, password = url_user or "", url_password or ""
        return request_headers(username, password, headers or {})
    except NodefixError as exc:
        raise AnsibleFilterError(exc.msg)


class FilterModule(object):
    def filters(self):
        return {"redact": redact_filter, "url_without_userinfo": url_without_userinfo, "mirror_headers": mirror_headers}
