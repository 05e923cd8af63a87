# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""Which values of a mapping of headers or environment variables are credentials - the values removed as they are
(Ansible's ``remove_values``, wherever they appear) from a plugin's output.

Only a value whose name is a secret's (``_core.secret_names.secret_name``, and ``Authorization``: ``X-Api-Token``,
``ETCDCTL_PASSWORD``, ``ETCD_PASS``) is one, and the password of a ``user:password`` value under a user's name
(``ETCDCTL_USER=root:pw``, etcdctl's own form): a tenant (``X-Scope-OrgID: prod``), a user name
(``ETCDCTL_USER=root``) or ``ETCDCTL_API=3`` is data, and removing it as a substring would hide every node, step or
path that contains it (``prod-b``, the step ``root``, a duration ``3``); so is an API version under a name ending in
``API`` (``ETCDCTL_API=3``). The shape-based redaction still applies to
all of them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import secret_name


# headers that carry a credential whatever their scheme (RFC 9110 11.6.2, 11.7.2)
_AUTH_HEADERS = ("authorization", "proxy-authorization")


def _user_name(name):
    return re.split(r"[_\-.]", str(name).lower())[-1] in ("user", "username", "userinfo", "creds")


def _version(name, value):
    """An API version under a name ending in ``API`` (``ETCDCTL_API=3``: etcdctl's, not a key like
    ``X-JFrog-Art-Api``)."""
    return re.split(r"[_\-.]", str(name).lower())[-1] == "api" and re.match(r"^v?\d+(?:\.\d+)?$", value) is not None


def of_mapping(mapping):
    """The credential values of ``mapping`` (name -> value), a set of non-empty strings."""
    out = set()
    for name, value in (mapping or {}).items():
        if value is None or isinstance(value, bool):
            continue
        value = "%s" % value
        if (secret_name(name) or str(name).lower() in _AUTH_HEADERS) and not _version(name, value):
            out.add(value)
        elif _user_name(name) and ":" in value:
            out.add(value.split(":", 1)[1])
    return set(v for v in out if v)
