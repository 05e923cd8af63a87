# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""Which values of a mapping of headers or environment variables are credentials - the values removed as they are
(Ansible's ``remove_values``, wherever they appear) from a plugin's output.

Every value is one - a header of a name of its own (``X-Authorization``, ``Key``, ``X-Honeycomb-Team``) may hold a
key, and a name cannot tell - except those a name says are data (``DATA_NAMES``: a tenant's ``X-Scope-OrgID``,
``Accept``, ``User-Agent``, etcdctl's ``ETCDCTL_ENDPOINTS``/``ETCDCTL_CACERT``/timeouts, ``PATH``), an API version
under a name ending in ``API`` (``ETCDCTL_API=3``) and the user name of a ``user:password`` value under a user's name
(``ETCDCTL_USER=root:pw``, etcdctl's own form: its password is one). Removing data as a substring would hide every
node, step or path that contains it (``prod-b``, the step ``root``, a duration ``3``); for the same reason a value
of fewer than ``MIN_LENGTH`` (4) characters under a name that is not a secret's is not one (``3``, ``on``): a
credential that short is no credential. A value under a secret's name (``secret_names.secret_name``,
``Authorization``) is one whatever its length. The shape-based redaction still applies to all of them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import secret_name


# headers that carry a credential whatever their scheme (RFC 9110 11.6.2, 11.7.2)
_AUTH_HEADERS = ("authorization", "proxy-authorization")
# names whose values are data (lower case): headers that carry no credential by their definition (RFC 9110) and the
# tenant headers of Prometheus-compatible servers (Cortex/Mimir/Loki X-Scope-OrgID, Thanos THANOS-TENANT, Grafana
# X-Grafana-Org-Id); etcdctl's settings that are endpoints, paths and times (etcdctl's ETCDCTL_<FLAG> environment);
# a process's own environment
DATA_NAMES = frozenset((
    "accept", "accept-encoding", "accept-language", "user-agent", "content-type", "cache-control",
    "x-scope-orgid", "thanos-tenant", "x-grafana-org-id", "x-request-id",
    "etcdctl_endpoints", "etcdctl_cacert", "etcdctl_cert", "etcdctl_dial_timeout", "etcdctl_command_timeout",
    "etcdctl_keepalive_time", "etcdctl_keepalive_timeout", "etcdctl_write_out", "etcdctl_insecure_transport",
    "etcdctl_insecure_skip_tls_verify", "etcdctl_discovery_srv", "etcdctl_debug",
    "path", "home", "lang", "lc_all", "tz", "kubeconfig", "no_proxy",
))
MIN_LENGTH = 4


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
        lower = str(name).strip().lower()
        if _user_name(name):
            if ":" in value:
                out.add(value.split(":", 1)[1])     # the user name is data, its password is not
        elif _version(name, value):
            continue
        elif secret_name(name) or lower in _AUTH_HEADERS:
            out.add(value)
        elif lower not in DATA_NAMES and len(value) >= MIN_LENGTH:
            out.add(value)
    return set(v for v in out if v)
