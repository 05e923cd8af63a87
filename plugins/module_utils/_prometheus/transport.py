# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""Ansible's ``open_url`` with one TLS context for all of a client's requests.

``open_url`` builds a new ``ssl.SSLContext`` for every request (``make_context``: the system's CA store
loaded, on ``http://`` URLs too) - a fifth of a CPU second for the triage's six requests, more than its
whole classification of 10,000 nodes (benchmarks/triage/). ``OpenUrl`` builds that same context once per
(CA bundle, validation) pair with Ansible's own ``make_context`` and hands it to Ansible's ``Request``, with
``open_url``'s other defaults: certificates are checked exactly as ``open_url`` checks them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.urls import Request, make_context


class OpenUrl(object):
    """A callable with ``open_url``'s keyword arguments (those the Prometheus client passes) that reuses one
    TLS context per (``ca_path``, ``validate_certs``)."""

    def __init__(self):
        self._contexts = {}
        self.contexts_made = 0

    def context(self, ca_path, validate_certs):
        key = (ca_path, bool(validate_certs))
        if key not in self._contexts:
            # what Request.open builds itself when given no context (ansible.module_utils.urls)
            self._contexts[key] = make_context(cafile=ca_path, validate_certs=validate_certs)
            self.contexts_made += 1
        return self._contexts[key]

    def __call__(self, url, method="GET", timeout=10, headers=None, url_username=None, url_password=None,
                 force_basic_auth=False, ca_path=None, validate_certs=True, use_netrc=True,
                 follow_redirects="urllib2"):
        return Request().open(method, url, headers=headers, use_proxy=True, timeout=timeout,
                              validate_certs=validate_certs, url_username=url_username, url_password=url_password,
                              force_basic_auth=force_basic_auth, follow_redirects=follow_redirects, ca_path=ca_path,
                              decompress=True, use_netrc=use_netrc, context=self.context(ca_path, validate_certs))
