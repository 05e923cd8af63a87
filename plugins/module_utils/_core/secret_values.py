# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""Which values of a mapping of headers or environment variables are credentials - the values removed as they are
(Ansible's ``remove_values``, wherever they appear: a message, a node's name, a host's key) from a plugin's output.

A value is one when its name says so: a secret's name (``_core.secret_names.secret_name``: ``X-Api-Key``,
``ETCDCTL_PASSWORD``, ``ETCD_PASS``, ``X-Registry-Creds``), ``Authorization``/``Proxy-Authorization``, or a header
or variable name with a credential's word in it (``CREDENTIAL_WORD``: ``X-Authorization``, ``Key``, ``X-Passcode``,
``X-Hub-Signature-256``, ``X-Session``); and the password of a ``user:password`` value under a user's name
(``ETCDCTL_USER=root:pw``, etcdctl's own form). Every other value is data - a tenant (``X-Scope-OrgID: prod``,
``X-Tenant: team-a``), a user name (``ETCDCTL_USER=root``), ``ETCDCTL_API=3``: removed as a substring it would hide
every node, step, path or host key that contains it (``prod-b``, ``team-a-worker-1``, the step ``root``, a duration
``3``). A key under a name that says nothing of one (``X-Honeycomb-Team``) is therefore shown wherever it appears
(docs/safety.md says to name such headers so, or to pass the key through a token file). The shape-based redaction
still applies to all of them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import secret_name


# headers that carry a credential whatever their scheme (RFC 9110 11.6.2, 11.7.2)
_AUTH_HEADERS = ("authorization", "proxy-authorization")
# a credential's word anywhere in a header's or variable's name (X-Authorization, Key, X-Passcode, X-Hub-Signature)
CREDENTIAL_WORD = re.compile(r"(?i)auth|key|token|pass|secret|cred|sign|session|cookie")


def _user_name(name):
    return re.split(r"[_\-.]", str(name).lower())[-1] in ("user", "username", "userinfo", "creds")


def _version(name, value):
    """An API version under a name ending in ``API`` (``ETCDCTL_API=3``: etcdctl's, not a key like
    ``X-JFrog-Art-Api``): at most two digits, a minor of at most three (``3``, ``v1``, ``v2.1``) - a longer number
    under such a name (``X-Api: 884422991``) is a key."""
    return re.split(r"[_\-.]", str(name).lower())[-1] == "api" and re.match(r"^v?\d{1,2}(?:\.\d{1,3})?$", value) is not None


def credential_name(name):
    """Whether a header's or variable's value is a credential by its name (see the module's docstring)."""
    return (secret_name(name) or str(name).strip().lower() in _AUTH_HEADERS
            or CREDENTIAL_WORD.search(str(name)) is not None)


def of_mapping(mapping):
    """The credential values of ``mapping`` (name -> value), a set of non-empty strings."""
    out = set()
    for name, value in (mapping or {}).items():
        if value is None or isinstance(value, bool):
            continue
        value = "%s" % value
        if _version(name, value):
            continue
        if _user_name(name) and ":" in value:
            out.add(value.split(":", 1)[1])     # the user name is data, its password is not
        elif secret_name(name) if _user_name(name) else credential_name(name):
            out.add(value)                      # under a user's name only a secret's (X-Registry-Creds) is one
    return set(v for v in out if v)
