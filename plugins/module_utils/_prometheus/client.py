# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""The collection's one Prometheus HTTP API client (the reboot gate's alerts, the triage's queries).

What a real endpoint in front of Prometheus needs (a Prometheus behind an authenticating proxy, Thanos,
Cortex, Mimir, Grafana Cloud): a bearer token read from a file on every client (a Kubernetes service
account token is rotated), basic auth, a CA bundle, extra headers (``X-Scope-OrgID``). Asked through
Ansible's ``open_url`` (a module and a controller plugin alike).

Rules every caller relies on:

- no credential in any error or result: messages name the URL without its user information, an HTTP
  error's body is cut short and redacted (``_core.redact``), never the request's headers;
- a URL that carries user information (``https://user:pass@host``) works as Go's client reads it - split at the
  LAST ``@`` of the authority, percent-decoded, ``https://:pass@host`` an empty user, ``https://token@host`` a
  user with an empty password, sent as basic auth (RFC 7617) with every request - unless the auth options set
  credentials (they win). It is requested and shown without it, and ``warnings`` names the options to use
  instead (``URL_WARNING``): the caller says it (``module.warn``, the inventory's display);
- a redirect is followed by the collection's one policy (``_core.redirects``): to another origin without the
  credentials (``Authorization``, every header given), never from https to http (refused: ``NoAnswer``);
- a server that does not answer (refused, DNS, TLS, timeout, an HTTP error) raises ``NoAnswer``:
  never an empty result;
- an answer that is not the API's envelope (not JSON, ``status`` not ``success``) raises
  ``BadAnswer``; ``warnings`` (a Thanos or Cortex querier's partial answer, or Prometheus' own) are
  returned with the data so the caller decides (the gate holds, the triage calls no node clean).
  Queries send ``partial_response=false`` (Thanos then fails instead of answering in part; Prometheus
  ignores the parameter);
- every request is counted (``requests``): the triage reports it and the benchmark reads it.

API: https://prometheus.io/docs/prometheus/latest/querying/api/
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.six.moves.urllib.parse import urlencode, urlsplit, urlunsplit

from ansible_collections.nodefix.k8s.plugins.module_utils._core import mirror_auth, redirects, secret_values
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact_text

# a header name as RFC 9110 5.1 allows it (token chars)
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# headers this client sets itself: a user's copy would fight the auth options
_OWN_HEADERS = ("authorization", "accept", "content-type")
# what a caller says when the URL carries credentials (the option names are the modules' and the plugin's; the
# roles' variables add their prefix: reboot_prometheus_username ...)
URL_WARNING = ("prometheus_url carries credentials (user information in the URL): set prometheus_username and "
               "prometheus_password, prometheus_token_file or prometheus_headers instead; they are used as basic auth "
               "meanwhile, and the URL is requested and shown without them")


class NoAnswer(NodefixError):
    """The server did not answer (refused, DNS, TLS, a timeout, an HTTP error status)."""


class BadAnswer(NodefixError):
    """The server answered, but not with the HTTP API's envelope (not JSON, no success status)."""


def safe_url(url):
    """``url`` without user information (``https://user:pw@host`` -> ``https://host``), query and fragment: what
    every message names. A URL whose user information cannot be told from its host (a raw '/' in a password) is
    not shown at all."""
    try:
        parts = urlsplit(mirror_auth.split_userinfo(url)[0])
    except (NodefixError, ValueError):
        return "<a URL that is not valid>"
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _short(text, limit=300, values=()):
    text = scrub(text, values)  # before it is cut: no cut-off prefix of a secret stays
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_headers(headers):
    """``headers`` as a dict of str -> str; NodefixError naming the header (never its value) otherwise."""
    out = {}
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise NodefixError("header name %r is not an HTTP header name" % (name,))
        if name.lower() in _OWN_HEADERS:
            raise NodefixError("header %s is set by the client itself (use the token file or basic auth options)"
                               % name)
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise NodefixError("header %s needs a one-line string value" % name)
        out[name] = value
    return out


class Client(object):
    """One Prometheus (or Thanos/Cortex/Mimir querier) at ``url``.

    ``open_url`` is Ansible's (``ansible.module_utils.urls.open_url``), passed in so tests and the
    benchmark count what goes over the wire."""

    def __init__(self, open_url, url, timeout=10, token_file=None, username=None, password=None, ca_path=None,
                 headers=None, validate_certs=True):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            # not shown: what is not a URL cannot be told apart from its user information (admin:pw@prom:9090)
            raise NodefixError("the Prometheus URL must be an http:// or https:// URL (it is not shown: it may carry "
                               "a credential)")
        if (password is not None) and not username:
            raise NodefixError("a Prometheus password needs a username")
        try:
            url, url_user, url_password = mirror_auth.split_userinfo(url, "prometheus_url")
        except ValueError:
            raise NodefixError("Prometheus URL %s cannot be parsed" % safe_url(url))
        self.warnings = []
        if url_user is not None:
            self.warnings.append(URL_WARNING)
            if not (username or password or token_file or any(k.lower() == "authorization" for k in headers or {})):
                username, password = url_user, url_password or ""
        if token_file and username:
            raise NodefixError("a Prometheus bearer token file and basic auth exclude each other: set one")
        if timeout is None or timeout <= 0:
            raise NodefixError("the Prometheus timeout must be above 0 seconds")
        self._open_url = open_url
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._username, self._password = username, password
        self._token_file = token_file
        self._ca_path = ca_path
        self._headers = check_headers(headers)
        self._validate_certs = validate_certs
        self._read_secrets = set()  # what _token read (a rotated token: every one read)
        self.requests = 0

    def secret_values(self):
        """The credential values this client sends (the password, the values of the headers whose names are a
        secret's - ``_core.secret_values``: never a tenant's ``X-Scope-OrgID`` - and every token read from the token
        file): what no text it raises - and no caller's output - may show (``scrub``)."""
        values = set(self._read_secrets) | secret_values.of_mapping(self._headers)
        if self._password:
            values.add(self._password)
        return set(v for v in values if v)

    def scrub(self, text):
        """``text`` with the client's own credential values removed (Ansible's ``remove_values``) after
        the shape-based redaction: an HTTP error's body that echoes the password says nothing of it."""
        return scrub(text, self.secret_values())

    @property
    def where(self):
        """The server as every message names it (no user information)."""
        return safe_url(self.url)

    def _token(self):
        try:
            with open(self._token_file, "rb") as handle:
                token = handle.read(65536).decode("ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise NodefixError("the Prometheus bearer token file %s cannot be read: %s"
                               % (self._token_file, type(exc).__name__))
        if not token or any(c.isspace() for c in token):
            raise NodefixError("the Prometheus bearer token file %s holds no single token" % self._token_file)
        self._read_secrets.add(token)
        return token

    def _request_headers(self):
        headers = dict(self._headers)
        headers["Accept"] = "application/json"
        if self._token_file:
            headers["Authorization"] = "Bearer " + self._token()
        elif self._username is not None:
            # basic auth with the first request (an empty user too: https://:pass@host, which open_url's own
            # url_username would drop)
            headers.update(mirror_auth.request_headers(self._username or "", self._password or "", {}) or {})
        return headers

    def get(self, path, params=None):
        """``GET <url><path>?<params>``: the decoded JSON envelope (``status`` success checked; ``warnings``
        kept for the caller). NoAnswer or BadAnswer otherwise."""
        target = self.url + path
        query = urlencode(sorted((params or {}).items()))
        where = safe_url(target)
        headers = self._request_headers()
        self.requests += 1
        try:
            # redirects judged by the collection's one policy (_core/redirects.py): no credential to another
            # origin, no https -> http
            resp = redirects.open_following(
                lambda url, sent: self._open_url(url, method="GET", timeout=self.timeout, headers=sent,
                                                 ca_path=self._ca_path, validate_certs=self._validate_certs,
                                                 use_netrc=False, follow_redirects="none"),
                target + ("?" + query if query else ""), headers)
            raw = resp.read()
        # URLError, HTTPError, socket errors, TLS: whatever it is, no answer. An HTTPError's body (Prometheus'
        # own error JSON for a bad query) is read, cut short and redacted.
        except Exception as exc:  # pylint: disable=broad-except
            raise NoAnswer(self.scrub("Prometheus at %s did not answer: %s"
                                      % (where, _error_text(exc, self.secret_values()))), url=where)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise BadAnswer(self.scrub("Prometheus at %s answered something that is not JSON: %s"
                                       % (where, _short(str(exc), values=self.secret_values()))), url=where)
        if not isinstance(body, dict) or body.get("status") != "success":
            raise BadAnswer(self.scrub("Prometheus at %s answered without a success status: %s"
                                       % (where, _short(json.dumps(body) if isinstance(body, (dict, list))
                                                        else repr(body), values=self.secret_values()))), url=where)
        return body

    def query(self, expr, at):
        """An instant query at ``at`` (Unix seconds, the one pinned evaluation time): (result list, warnings).
        The result must be a vector of samples; BadAnswer otherwise."""
        body = self.get("/api/v1/query", {"query": expr, "time": "%.3f" % at, "partial_response": "false"})
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise BadAnswer("Prometheus at %s answered %s without a vector result" % (self.where, _short(expr, 120)),
                            url=self.where)
        for sample in data["result"]:  # one pass, the cheapest checks first (10,000s of samples at a fleet's size)
            metric = sample.get("metric") if isinstance(sample, dict) else None
            value = sample.get("value") if isinstance(metric, dict) else None
            if not isinstance(value, list) or len(value) != 2:
                raise BadAnswer("Prometheus at %s answered a malformed sample for %s: %s"
                                % (self.where, _short(expr, 120), _short(json.dumps(sample), 160, self.secret_values())),
                                url=self.where)
            # label names and values are strings in the API (a number there is not Prometheus' answer)
            for k, v in metric.items():
                if not (isinstance(k, str) and isinstance(v, str)):
                    raise BadAnswer("Prometheus at %s answered a sample whose labels are not all strings for %s: %s"
                                    % (self.where, _short(expr, 120), _short(json.dumps(sample), 160, self.secret_values())),
                                    url=self.where)
        warnings = body.get("warnings") or []
        if not isinstance(warnings, list):
            warnings = [str(warnings)]
        return data["result"], [_short(str(w), 200, self.secret_values()) for w in warnings]


def argument_spec():
    """The client's auth options as a module's argument spec takes them (doc fragment nodefix.k8s.prometheus);
    ``prometheus_url`` and ``prometheus_timeout`` are each module's own (their descriptions and defaults differ)."""
    return dict(
        prometheus_token_file=dict(type="path"),
        prometheus_username=dict(type="str"),
        prometheus_password=dict(type="str", no_log=True),
        prometheus_ca_path=dict(type="path"),
        prometheus_headers=dict(type="dict", default={}, no_log=True),
        prometheus_validate_certs=dict(type="bool", default=True),
    )


def from_params(open_url, params):
    """The client for a module's (or a plugin's) ``prometheus_*`` options (``params``: name -> value)."""
    return Client(open_url, params["prometheus_url"], timeout=params["prometheus_timeout"],
                  token_file=params["prometheus_token_file"], username=params["prometheus_username"],
                  password=params["prometheus_password"], ca_path=params["prometheus_ca_path"],
                  headers=params["prometheus_headers"], validate_certs=params["prometheus_validate_certs"])


def _error_text(exc, values=()):
    """An error's class and message, with an HTTP error's body (cut short, redacted)."""
    text = "%s: %s" % (type(exc).__name__, exc)
    read = getattr(exc, "read", None)
    if callable(read):
        try:
            body = read(2048)
        except Exception:  # pylint: disable=broad-except  # a body that cannot be read adds nothing
            body = b""
        if body:
            text += " (%s)" % body.decode("utf-8", "replace")
    return _short(text, values=values)


def scrub(text, values):
    """``text`` redacted by shape (``_core.redact``) and without any of ``values`` (Ansible's ``remove_values``,
    as a module's ``no_log`` values are removed from its output)."""
    return remove_values(redact_text(text), set(values or ())) if values else redact_text(text)


def sample_value(sample):
    """A sample's value as a float; BadAnswer for anything else (``"NaN"`` is a float too)."""
    try:
        return float(sample["value"][1])
    except (TypeError, ValueError, IndexError, KeyError):
        raise BadAnswer("a sample's value %s is not a number" % _short(json.dumps(sample.get("value")), 80))
