# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""One HTTP request through the official Python client's ``ApiClient``, whichever generator built the release.

The client's request contract changed inside the range ``requirements.txt`` admits:

- python-legacy (kubernetes 24.2.0, the floor, and the releases up to 33.1.0 at least): ``ApiClient.call_api(resource_path, method, path_params,
  query_params, header_params, body, ..., auth_settings, _return_http_data_only, _preload_content,
  _request_timeout)``; an answer outside 2xx raises ``ApiException`` (``status``, ``reason``, ``body``,
  ``headers``) from ``rest.RESTClientObject.request``.
- openapi-generator's ``python`` generator (kubernetes 37.0.3, the newest release the range admits): the typed methods'
  own two steps, ``ApiClient.param_serialize(method, resource_path, path_params, query_params, header_params,
  body, post_params, files, auth_settings)`` then ``ApiClient.call_api(method, url, header_params, body,
  post_params, _request_timeout)``, which answers a ``RESTResponse`` for every status (the typed methods raise
  in ``response_deserialize``). The old keywords are a ``TypeError`` there.

Which one a client has is detected once (``param_serialize`` exists) when the sender is made; both end in
the same answer: (status, headers, body bytes). A status of 0 is the client's own failure before an answer
(its ``ApiException(status=0)`` for a TLS error). Everything else (refused, DNS, a timeout) is raised as the
client raises it; the caller (``_k8s.client``) names it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

AUTH = ["BearerToken"]


def sender(api_client, error):
    """A function (method, path, query, headers, body, timeout, opened=None) -> (status, headers, body) for
    ``api_client``; ``error``: the client's ``ApiException`` class; ``opened``: called with urllib3's response once
    its headers are read, before its body (the caller's bound on the whole request shuts it down from another
    thread). Its name says which contract: ``serialized`` or ``legacy``."""
    if hasattr(api_client, "param_serialize"):
        def serialized(method, path, query, headers, body, timeout, opened=None):
            params = api_client.param_serialize(method, path, query_params=query or None, header_params=headers,
                                                body=body, auth_settings=AUTH)
            resp = api_client.call_api(*params, _request_timeout=timeout)
            if opened is not None:
                opened(resp.response)
            try:
                data = resp.read()
            finally:
                resp.response.release_conn()
            return resp.status, resp.headers, data
        return serialized

    def legacy(method, path, query, headers, body, timeout, opened=None):
        try:
            resp = api_client.call_api(path, method, query_params=query or [], header_params=headers, body=body,
                                       auth_settings=AUTH, _preload_content=False, _return_http_data_only=True,
                                       _request_timeout=timeout)
        except error as exc:
            return exc.status or 0, exc.headers or {}, exc.body if exc.body is not None else (exc.reason or "")
        if opened is not None:
            opened(resp)
        try:
            return resp.status, resp.headers, resp.data
        finally:
            resp.release_conn()
    return legacy
