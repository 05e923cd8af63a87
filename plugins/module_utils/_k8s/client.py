# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The collection's one Kubernetes API client: every API call of every module goes through ``Kube``.

- **Built once, one way**: the official Python client's ``Configuration`` loaded from a kubeconfig and
  context (``config.load_kube_config``), or in-cluster (``config.load_incluster_config``) when no kubeconfig
  is given or found and the pod's service account is there, as kubernetes.core's modules do.
- **A token file trimmed as client-go trims it**: client-go reads a kubeconfig ``tokenFile`` (and the
  service account's token) with ``strings.TrimSpace``; the Python client sends the file as it is, so a token
  file ending in a newline makes every request fail with ``Invalid header value b'Bearer <token>\\n'`` - the
  token quoted in the error. The token is trimmed after every load and every refresh of it.
- **One timeout, a whole request's**: every request - connection, headers and body - ends within ``timeout``
  seconds, or is a KubeError "timed out: no whole answer within N s". The library alone cannot bound it: its
  ``_request_timeout`` is urllib3's timeout of ONE socket operation (rest.py of 24.2.0 and 37.0.3 alike: a
  2-tuple is ``urllib3.Timeout(connect, read)``, an int is ``urllib3.Timeout(total=t)``, whose read timeout is
  ``t`` less the connection's time and still applies to each read - urllib3's ``Timeout.read_timeout`` -; a
  float is no timeout at all in 24.2.0; a ``urllib3.Timeout`` object is no timeout in either), so a server
  that dribbles its answer a byte at a time keeps a read going without end. The library still gets ``(t, t)``
  (the connection and each read bounded: a silent server is found at once); the request runs in a worker thread
  (a daemon) that the caller waits for at most ``t`` seconds - past it the answer's socket is shut down where
  urllib3 can (``HTTPResponse.shutdown``, urllib3 2.3 and later) and the worker is left to end. No urllib3 retry
  of a refused or timed-out connection (a hung server costs one timeout, not four).
- **Lists end**: ``items`` follows ``continue`` for at most ``PAGES`` pages and ``ITEMS`` items, and a
  continue token repeated is an error - never a list asked without end.
- **One retry policy** (client-go's: a 429, or a 5xx that carries ``Retry-After``, is retried for any
  method - the server did not act -, and a read's 5xx too): at most ``ATTEMPTS`` requests, waiting what
  ``Retry-After`` says (delay-seconds or an HTTP-date, RFC 9110 section 10.2.3) or else ``BACKOFF`` doubled.
  The waits are bounded by the remaining timeout (the caller's ``budget`` of seconds, or the client's
  ``timeout`` from the call's start): a ``Retry-After`` that ends past it is never cut short - the request is
  not sent again before the server asked, the answer is returned (``KubeError`` names the ``Retry-After``). A
  caller whose 429 is its own decision (an eviction a PodDisruptionBudget refuses: the rollout's drain waits on
  its own terms) or whose 5xx is the answer (``/readyz/etcd``) says so with ``retry``.
- **Errors are ``KubeError`` (a ``NodefixError``)**, naming the request: the status, the Status message and
  causes of an answer, or "no answer" and why. A message never quotes a request header: the bearer token,
  a basic-auth pair and any ``Authorization`` value are replaced by ``<redacted>`` in every text taken from
  the client (its exceptions quote the header they could not send).

Answers are JSON objects parsed here (no model classes: their validation differs from release to release);
the request itself goes through the contract of the installed release (``_k8s.transport``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import re
import threading
import time
from email.utils import parsedate_to_datetime

from ansible.module_utils.six.moves import http_client
from ansible.module_utils.six.moves.urllib.parse import quote

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import transport

ATTEMPTS = 3
BACKOFF = 0.5
RETRY_ALWAYS = (429,)
RETRY_SERVER = (500, 502, 503, 504)
# a list's bounds (``Kube.items``): pages asked and items kept, each past it a KubeError naming it
PAGES = 1000
ITEMS = 100000
# what ``name`` refuses: urllib3 collapses dot segments (RFC 3986 section 5.2.4), so ``nodes/..`` is a request of
# another object, and an empty segment is the collection
NOT_NAMES = ("", ".", "..")
# the secret part of a scheme-prefixed credential as the client's errors quote it (b'Bearer abc\n', Basic ...)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s'\",;]+")
_IN_CLUSTER = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class KubeError(NodefixError):
    """An API request failed: ``status`` (None: no answer - refused, DNS, TLS, a timeout), ``reason``, ``said``
    (the Status object's message), ``causes`` (its ``details.causes`` messages), ``body`` (the answer's text,
    cut) and ``why`` (no answer: the error's type and text)."""

    def __init__(self, what, status=None, reason="", said="", causes=(), body="", why=""):
        self.what, self.status, self.reason, self.said, self.body, self.why = what, status, reason, said, body, why
        self.causes = list(causes)
        if status and 200 <= status <= 299:   # an answer that is not well-formed: ``why`` says how
            msg = "%s: %s" % (what, why)
        elif status:
            msg = "%s: the API server answered %s %s" % (what, status, body[:300])
        else:
            msg = "%s: no answer from the API server: %s" % (what, why)
        super(KubeError, self).__init__(msg.rstrip())

    def detail(self):
        """The Status message and its causes, or the reason (what a person acts on)."""
        return "; ".join([self.said or self.reason] + self.causes)

    def phrase(self):
        """The status and its HTTP reason phrase (``403 Forbidden``); "" without an answer."""
        return ("%s %s" % (self.status, http_client.responses.get(self.status, ""))).strip() if self.status else ""


def unanswered(api, exc):
    """What a request without an answer says: the client's timeout and why (``exc.why``, scrubbed)."""
    return "the API server could not be reached or did not answer within %d s (%s)" % (api.timeout[0], exc.why)


def said(api, exc):
    """A failed request's (KubeError's) reason for a person: no answer (``unanswered``), an answer that is not
    well-formed (why), or the status and the Status message (else the answer's text, cut)."""
    if not exc.status:
        return unanswered(api, exc)
    if 200 <= exc.status <= 299:
        return "%s" % exc.why
    return ("%s %s" % (exc.status, exc.detail() or exc.body[:300])).strip()


class KubeConfigError(NodefixError):
    """No client: the library is missing, or the kubeconfig (or the in-cluster account) could not be loaded."""


def whole_seconds(timeout):
    """``timeout`` when it is a whole number of seconds, at least 1; NodefixError otherwise."""
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise NodefixError("the API timeout must be a whole number of seconds, at least 1, got %r" % (timeout,))
    return timeout


def available():
    """Whether the official Python client can be imported (a module's missing_required_lib check)."""
    try:
        _modules()
    except KubeConfigError:
        return False
    return True


def _modules():
    try:
        from kubernetes import client, config  # pylint: disable=import-outside-toplevel
        from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise KubeConfigError("the Python kubernetes client is not installed on the controller (pip install "
                              "kubernetes, as kubernetes.core needs): %s" % exc)
    return client, config, ApiException


def _in_cluster(kubeconfig):
    """No kubeconfig named or found, and a pod's service account: in-cluster (kubernetes.core's rule)."""
    if kubeconfig:
        return False
    default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
    return not os.path.exists(default) and bool(os.environ.get("KUBERNETES_SERVICE_HOST")) \
        and os.path.exists(_IN_CLUSTER)


class Kube(object):
    """An API client of ``kubeconfig`` (its ``context``; in-cluster without one, see above), every request
    bounded by ``timeout`` seconds. KubeConfigError when it cannot be built."""

    def __init__(self, kubeconfig=None, context=None, timeout=30):
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise NodefixError("the API timeout must be a number of seconds above 0, got %r" % (timeout,))
        client, config, self.error = _modules()
        conf = client.Configuration()
        self.secrets = []
        try:
            if _in_cluster(kubeconfig):
                config.load_incluster_config(client_configuration=conf)
            else:
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=conf)
        # the client raises many kinds (ConfigException, IOError, YAML errors, an exec plugin's)
        except Exception as exc:  # pylint: disable=broad-except
            raise KubeConfigError("kubeconfig %s could not be loaded: %s" % (
                kubeconfig or "(default)", self.scrub("%s" % exc)))
        conf.retries = False
        self._trimmed(conf)
        self.conf = conf
        # the library's (connection, each read); ``total``: the whole request's bound (``_bounded``)
        self.timeout = (timeout, timeout)
        self.total = timeout
        self.api_client = client.ApiClient(conf)
        self.send = transport.sender(self.api_client, self.error)

    def _trimmed(self, conf):
        """Every credential the client puts in a request's ``authorization`` header, trimmed: its loaders set the
        token again (untrimmed, re-reading a token file) through ``refresh_api_key_hook`` before requests and
        replace that hook as they do, so the trim wraps the one method every release reads the header through
        (``Configuration.get_api_key_with_prefix``); each value is remembered for ``scrub``."""
        read = conf.get_api_key_with_prefix

        def trimmed(*args, **kwargs):
            value = read(*args, **kwargs)
            if isinstance(value, str):
                scheme, _sep, token = value.strip().partition(" ")
                value = "%s %s" % (scheme, token.strip()) if token.strip() else scheme
                self.secrets.append(token.strip() or scheme)
            return value
        conf.get_api_key_with_prefix = trimmed
        self.secrets.extend(v for v in list(conf.api_key.values()) + [getattr(conf, "password", None)]
                            if isinstance(v, str))

    def scrub(self, text):
        """``text`` without any credential of this client and any ``Bearer``/``Basic`` value."""
        for secret in sorted(set(s for s in self.secrets if s and len(s) > 2), key=len, reverse=True):
            text = text.replace(secret, "<redacted>")
        return _SCHEME.sub(lambda m: m.group(1) + m.group(2) + "<redacted>", text)

    def _once(self, what, method, path, query, body, content_type):
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        try:
            status, answer_headers, data = self._bounded(what, method, path, query, headers, body)
        except KubeError:
            raise
        # urllib3's and socket's errors (refused, DNS, TLS, a timeout), the client's own before an answer
        except Exception as exc:  # pylint: disable=broad-except
            text = "%s" % (getattr(exc, "reason", None) or exc)
            raise KubeError(what, why="%s: %s" % (type(exc).__name__, self.scrub(text)[:300] or "-"))
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace")
        if not status:
            raise KubeError(what, why=self.scrub("%s" % (data or "the client failed before an answer"))[:300])
        return status, answer_headers or {}, data or ""

    def _bounded(self, what, method, path, query, headers, body):
        """``send`` in a worker thread waited for at most ``total`` seconds: a KubeError (no answer) past it, the
        answer's socket shut down when the library already has the response (``opened``: before its body is read;
        urllib3 2.3+ ``HTTPResponse.shutdown``) - else the daemon worker ends with its own read or the process."""
        box = {}

        def opened(response):
            box["response"] = response
            if box.get("late"):
                _shut(response)

        def work():
            try:
                box["answer"] = self.send(method, path, query, headers, body, self.timeout, opened)
            # handed to the caller as it is (``_once`` names it)
            except Exception as exc:  # pylint: disable=broad-except
                box["error"] = exc

        worker = threading.Thread(target=work, name="nodefix-kube-request")
        worker.daemon = True
        worker.start()
        worker.join(self.total)
        if worker.is_alive():
            box["late"] = True
            _shut(box.get("response"))
            raise KubeError(what, why="timed out: no whole answer within %s s (the request's bound: the connection, "
                                      "the headers and the body)" % self.total)
        if "error" in box:
            raise box["error"]
        return box["answer"]

    def exchange(self, what, method, path, query=None, body=None, content_type=None, retry=True, budget=None):
        """(status, headers, text) of the request's last answer, 2xx or not, after the retry policy; KubeError when
        there was no answer. ``retry``: True (the policy), False (one request), or the statuses to retry;
        ``budget``: the seconds its waits may take (default: the client's timeout), a ``Retry-After`` past it not
        waited for."""
        statuses = (RETRY_ALWAYS + RETRY_SERVER) if retry is True else tuple(retry or ())
        deadline = time.monotonic() + (self.timeout[0] if budget is None else max(0, budget))
        for attempt in range(ATTEMPTS):
            status, headers, text = self._once(what, method, path, query, body, content_type)
            after = retry_after(headers)
            again = status in statuses and (status in RETRY_ALWAYS or after is not None or method == "GET")
            wait = after if after is not None else BACKOFF * 2 ** attempt
            if not again or attempt == ATTEMPTS - 1 or wait > deadline - time.monotonic():
                return status, headers, text
            time.sleep(wait)
        return status, headers, text  # not reached: the last attempt returned

    def call(self, what, method, path, query=None, body=None, content_type=None, retry=True, budget=None):
        """(status, text) of ``exchange``."""
        status, _headers, text = self.exchange(what, method, path, query, body, content_type, retry, budget)
        return status, text

    def request(self, what, method, path, query=None, body=None, content_type=None, missing_ok=False, retry=True):
        """The answer (a JSON object) of a request; None for a 404 with ``missing_ok``. KubeError otherwise:
        an answer outside 2xx, no answer, or an answer that is not a JSON object."""
        status, headers, text = self.exchange(what, method, path, query, body, content_type, retry)
        if status == 404 and missing_ok:
            return None
        if not 200 <= status <= 299:
            raise _answered(what, status, self.scrub(text), retry_after(headers))
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise KubeError(what, status, why="the API server's answer is not a JSON object (%.80r)" % self.scrub(text))
        return data

    def items(self, what, path, query=None):
        """A list's ``items``, every page of it (``limit``/``continue``); KubeError when there is no list, when the
        API server repeats a continue token (a list that would never end), or past ``PAGES`` (1,000) pages or
        ``ITEMS`` (100,000) items - the bound named: never a wait, or a memory, without end."""
        out, token, seen = [], None, set()
        for _page in range(PAGES):
            page = self.request(what, "GET", path, list(query or []) + ([("continue", token)] if token else []))
            if not isinstance(page.get("items"), list):
                raise KubeError(what, 200, why="the API server's answer has no list of items")
            out.extend(page["items"])
            if len(out) > ITEMS:
                raise KubeError(what, 200, why="the list has more than %d items (the client's bound on one list)" % ITEMS)
            meta = page.get("metadata") if isinstance(page.get("metadata"), dict) else {}
            token = meta.get("continue")
            if not token:
                return out
            if not isinstance(token, str):
                raise KubeError(what, 200, why="the API server's continue token is not a string (%.40r)" % (token,))
            if token in seen:
                raise KubeError(what, 200, why="the API server repeated its continue token after %d page(s) (a list "
                                               "that would never end)" % (_page + 1))
            seen.add(token)
        raise KubeError(what, 200, why="the list goes on past %d pages (the client's bound on one list)" % PAGES)


def retry_after(headers, now=None):
    """``Retry-After`` in seconds from now: delay-seconds, or an HTTP-date (``now``: the wall clock's time, default
    ``time.time()``; a date past is 0); None when absent or neither."""
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    value = str(value).strip()
    if value.isascii() and value.isdigit():     # ('²'.isdigit() is true, and int() refuses it)
        return int(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:     # an HTTP-date is GMT (RFC 9110 section 5.6.7)
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0, int(round(when.timestamp() - (time.time() if now is None else now))))


def _answered(what, status, text, after=None):
    """KubeError of an answer outside 2xx, with the Status object's message and causes when it is one (and the
    last ``Retry-After`` of a 429 or 5xx: the attempts ran out, or it ends past the remaining timeout)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    said, causes, reason = "", [], ""
    if isinstance(body, dict):
        said = "%s" % (body.get("message") or "")
        reason = "%s" % (body.get("reason") or "")
        details = body.get("details") if isinstance(body.get("details"), dict) else {}
        causes = ["%s" % c.get("message") for c in details.get("causes") or [] if isinstance(c, dict) and c.get("message")]
    if after is not None and status in RETRY_ALWAYS + RETRY_SERVER:
        causes.append("the API server asked to be asked again after %d s (Retry-After)" % after)
    return KubeError(what, status=status, reason=reason, said=said[:500], causes=causes, body=text[:2000])


def _shut(response):
    """Stop the reads of a response another thread is reading (urllib3 2.3+); nothing without one."""
    shutdown = getattr(response, "shutdown", None)
    if callable(shutdown):
        try:
            shutdown()
        # a response already closed or a socket gone: nothing left to stop
        except Exception:  # pylint: disable=broad-except
            pass


def object_name(value):
    """Whether ``value`` can be an object's name in an API path: a non-empty string, not ``.`` or ``..`` (a path
    segment a URL resolves away: ``NOT_NAMES``), no ``/`` (Kubernetes' path segment name rule)."""
    return isinstance(value, str) and value not in NOT_NAMES and "/" not in value


class KubeNameError(NodefixError):
    """A value that cannot be one segment of an API path (``name``)."""


def name(value):
    """``value`` as one path segment (a Node's, a pod's, a namespace's or a ConfigMap's name); KubeNameError for
    "", "." and ".." (and a value that is not a string): urllib3 collapses dot segments, so ``nodes/..`` would ask
    another object (the Namespace of a ConfigMap's path, the NodeList of a Node's) - no object has such a name."""
    if not isinstance(value, str) or value in NOT_NAMES:
        raise KubeNameError("%r cannot be the name of a Kubernetes object in an API path (not '', '.' or '..'): "
                            "nothing asked" % (value,))
    return quote(value, safe="")


def argument_spec(required=False, node=False, request_timeout=None):
    """The options every module whose API calls go through ``Kube`` takes, as its argument spec takes them (each
    module adds its own): ``kubeconfig`` - a path, ``required`` by the modules of one Node, otherwise the client's
    default or in-cluster - and ``context``; with ``node``, the Node's name (required); with ``request_timeout``
    (its default: an int, or a float where fractions of a second are allowed), each request's seconds - the option
    ``from_params`` and ``module_client`` read. Their text is the module's, or the doc fragment
    nodefix.k8s.node_api's (``kubeconfig`` required, ``context``, ``node``; ``node_api.default_kubeconfig``:
    ``kubeconfig`` optional, ``context``)."""
    spec = dict(kubeconfig=dict(type="path", required=True) if required else dict(type="path"),
                context=dict(type="str"))
    if node:
        spec["node"] = dict(type="str", required=True)
    if request_timeout is not None:
        spec["request_timeout"] = dict(type="float" if isinstance(request_timeout, float) else "int",
                                       default=request_timeout)
    return spec


def from_params(params, make=None):
    """``make`` (default ``Kube``; or an API object over it such as ``node_api.NodeApi``) of a module's
    ``kubeconfig``, ``context`` and ``request_timeout`` (``argument_spec``); KubeConfigError (a NodefixError) as
    ``make`` raises."""
    return (make or Kube)(params["kubeconfig"], params["context"], params["request_timeout"])


def module_client(module, make=None, where="", **extra):
    """``from_params`` of ``module``'s parameters; a client that cannot be built fails the module: ``where`` (what
    the module was about to do, ending in ": ") and the client's reason (``kubeconfig <path> could not be loaded:
    ...``, its credentials scrubbed), ``extra`` added to the result."""
    try:
        return from_params(module.params, make)
    except NodefixError as exc:
        module.fail_json(msg="%s%s" % (where, exc), **extra)
        raise   # (fail_json exits)
