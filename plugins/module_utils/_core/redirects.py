# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""The one redirect policy of the collection's HTTP requests that carry credentials (the Prometheus client, the
gVisor mirror's downloads): Ansible's ``open_url``/``fetch_url`` follow a redirect with every header the first
request had - ``Authorization`` and an ``X-Api-Key`` included - to whatever host the ``Location`` names. Here a
request is made with redirects off and each redirect is judged:

- to the same origin as the URL the operator gave (scheme, host, port - RFC 6454): followed with every header;
- to another origin: followed with none of the headers the request had but those that carry no credential by
  their definition (``Accept``, ``Accept-Encoding``, ``Accept-Language``, ``User-Agent``, ``Content-Type``,
  ``Cache-Control``): ``Authorization``, ``Cookie``, every header whose name is a secret's and every header an
  operator added (``X-Authorization``, ``Key``, ``X-Honeycomb-Team``, a tenant's ``X-Scope-OrgID``) stay with
  the origin they were given for - a name cannot tell a key from a tenant. Go's net/http client drops
  ``Authorization``, ``Www-Authenticate`` and ``Cookie`` on a redirect to a host that is not the first one's or its
  subdomain, curl since 7.83 ``Authorization`` and ``Cookie`` on a change of host, port or scheme
  (CVE-2022-27776); both forward custom headers, which is how a mirror's API key under a name of its own would
  leave. A redirect back to the first origin gets them again (as Go);
- from ``https`` to ``http``: refused (the request fails, saying so) - whether credentials go or not, the answer
  would come over a channel anyone on the path can read and alter, and the reboot gate and the installer decide on
  it. A ``Location`` that is not http(s) or that carries user information is refused too;
- at most ``MAX_REDIRECTS`` (10, Go's limit).

Messages name the redirect's target without its user information and query (a presigned URL's signature is a
query parameter)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.six.moves.urllib.parse import urljoin, urlsplit, urlunsplit

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

REDIRECT_CODES = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 10
_DEFAULT_PORTS = {"http": 80, "https": 443}
# the headers a redirect to another origin keeps: none of them carries a credential by its definition (RFC 9110)
_PLAIN_HEADERS = ("accept", "accept-encoding", "accept-language", "user-agent", "content-type", "cache-control")


def kept_elsewhere(name):
    """Whether a request header named ``name`` goes on with a redirect to another origin (``_PLAIN_HEADERS``)."""
    return str(name).strip().lower() in _PLAIN_HEADERS


def shown(url):
    """``url`` as a message names it: no user information, no query, no fragment."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _origin(url):
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise NodefixError("redirected to %s, whose port is not a number: refused" % shown(url))
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


def follow(first, current, location, headers):
    """(the URL, the headers) of the request a redirect from ``current`` to ``location`` asks for, ``first`` being
    the URL the operator gave and ``headers`` its request's headers; NodefixError saying why for a redirect that is
    refused."""
    target = urljoin(current, location.strip())
    parts = urlsplit(target)
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        raise NodefixError("redirected to a URL that is not http or https (%s): refused" % shown(target))
    if "@" in parts.netloc:
        raise NodefixError("redirected to a URL with user information (%s): refused" % shown(target))
    if urlsplit(current).scheme.lower() == "https" and parts.scheme.lower() == "http":
        raise NodefixError("redirected from https to http (%s): refused - an answer over http can be read and altered "
                           "on the way" % shown(target))
    if _origin(target) == _origin(first):
        return target, dict(headers or {})
    return target, dict((k, v) for k, v in (headers or {}).items() if kept_elsewhere(k))


def _too_many():
    return NodefixError("more than %d redirects: refused" % MAX_REDIRECTS)


def open_following(open_once, url, headers):
    """``open_once(url, headers)`` (an ``open_url`` with redirects off: a redirect raises its HTTPError, with the
    ``Location`` header) followed by this file's policy: the response of the last request."""
    current, sent = url, dict(headers or {})
    for _hop in range(MAX_REDIRECTS + 1):
        try:
            return open_once(current, sent)
        except Exception as exc:  # pylint: disable=broad-except  # only a redirect is handled here, the rest raised
            found = getattr(exc, "headers", None) if getattr(exc, "code", None) in REDIRECT_CODES else None
            location = found.get("Location") if found is not None else None
            if not location:
                raise
        current, sent = follow(url, current, location, headers)
    raise _too_many()


def fetch_following(fetch_once, url, headers):
    """``fetch_once(url, headers)`` -> (response or None, info) as Ansible's ``fetch_url`` answers with redirects
    off (a redirect: its status and ``location`` in ``info``), followed by this file's policy. A refused redirect
    answers (None, info) with the redirect's status and why in ``msg``."""
    current, sent = url, dict(headers or {})
    for _hop in range(MAX_REDIRECTS + 1):
        resp, info = fetch_once(current, sent)
        if info.get("status") not in REDIRECT_CODES or not info.get("location"):
            return resp, info
        try:
            current, sent = follow(url, current, info["location"], headers)
        except NodefixError as exc:
            return None, dict(info, msg=exc.msg)
    return None, dict(info, msg=_too_many().msg)
