# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""A mirror's credentials as options, never in its URL.

``split_userinfo`` takes a URL's user information off (split at the LAST '@' of the authority, as Go's net/url
and Python's urllib do, RFC 3986 3.2.1); ``request_headers`` turns the options (a user name and a password, or a
password file; extra headers) into the headers of every request - Basic authentication (RFC 7617) sent with the
first request, as a mirror that answers 404 rather than 401 to an anonymous client needs. A URL that still
carries user information works (its user and password are used when the options set none) and the caller warns,
naming the options; the URL shown anywhere is the one without it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import re

from ansible.module_utils.six.moves.urllib.parse import unquote

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import url_userinfo


# scheme://authority: the authority runs to the first '/', '?' or '#' (RFC 3986 3.2, as Go's url.Parse reads it)
_AUTHORITY = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)$", re.DOTALL)
# the host after the user information: a name or an [IPv6 address], an optional numeric port
_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._~%\-]+)?\]|[A-Za-z0-9._~%!$&'()*+,;=\-]*)(?::[0-9]*)?$")


def split_userinfo(url, option="the URL"):
    """(url without user information, user name or None, password or None). The authority is read as Go's
    url.Parse reads it (to the first '/', '?' or '#'; the user information to its LAST '@'); a URL whose host
    part is then not a host - a password with a raw '/', '?' or '#' (``https://u:pa/ss@host``) - is refused:
    NodefixError naming ``option``, never quoting the URL (its password is in it). So is a URL the redactor
    (_core.redact, which hides every URL's user information in any output) reads other user information in than
    Go does: ``https://u:123/x@h`` is host ``u``, port 123 and the path ``/x@h`` to Go, and the password ``123/x``
    to the redactor (a password of digits and a raw '/') - ambiguous, so refused: its '@' in the path must be
    percent-encoded (``%40``), or the credentials set in their options."""
    match = _AUTHORITY.match(url or "")
    if match is None:
        return url, None, None
    userinfo, at, host = match.group("authority").rpartition("@")
    if not _HOST.match(host):
        raise NodefixError("%s is not a valid URL (its host[:port] is not one: a password with a raw '/', '?' "
                           "or '#' must be percent-encoded, or set in the credential options instead)" % option)
    if url_userinfo(url) != (userinfo if at else ""):
        raise NodefixError("%s is ambiguous: an '@' after its host:port is followed by a host, so it reads as a "
                           "password with a raw '/', '?' or '#' as well as a path - percent-encode the '@' of the "
                           "path (%%40), or set the credentials in the credential options" % option)
    if not at:
        return url, None, None
    user, colon, password = userinfo.partition(":")
    return (match.group("scheme") + "://" + host + match.group("rest"), unquote(user),
            unquote(password) if colon else None)


def read_password_file(path):
    """The password in ``path`` (its one line; a trailing newline dropped, as kubelet and client-go trim token
    files). NodefixError when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except (IOError, OSError) as exc:
        raise NodefixError("cannot read the password file %s: %s" % (path, exc.strerror or exc))
    return data.decode("utf-8", "replace").rstrip("\r\n")


def request_headers(username=None, password=None, headers=None):
    """The headers every request to the mirror carries: ``headers`` and, with a user name or a password,
    ``Authorization: Basic`` (unless ``headers`` sets Authorization itself). NodefixError naming the header -
    never its value - for a value that is not one line (Python's HTTP client would refuse it quoting the value)."""
    out = dict((str(k), str(v)) for k, v in (headers or {}).items())
    for name, value in out.items():
        if "\n" in value or "\r" in value:
            raise NodefixError("mirror header %s needs a one-line value (it holds a line break: a trailing newline "
                               "from a file or a block scalar?)" % name)
    if (username or password) and not any(k.lower() == "authorization" for k in out):
        token = base64.b64encode(("%s:%s" % (username or "", password or "")).encode("utf-8")).decode("ascii")
        out["Authorization"] = "Basic " + token
    return out
