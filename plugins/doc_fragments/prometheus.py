# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How the collection's one Prometheus client (module_utils/_prometheus) reaches a server: auth, TLS, headers.
DOCUMENTATION for modules; PLUGIN for the inventory plugin (the same options, also from the environment,
which is how an AWX credential type injects them)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  prometheus_token_file:
    description:
      - A file holding a bearer token sent as C(Authorization) to the Prometheus server (a Kubernetes service
        account token, an OAuth proxy's token). Read on every run, so a rotated token is picked up. Excludes
        O(prometheus_username).
    type: path
  prometheus_username:
    description: The user of HTTP basic auth for the Prometheus server (rather than in O(prometheus_url)).
    type: str
  prometheus_password:
    description: The password of HTTP basic auth; never in any output.
    type: str
  prometheus_ca_path:
    description: A PEM CA bundle that verifies the Prometheus server's certificate (the system's trust store otherwise).
    type: path
  prometheus_headers:
    description:
      - Extra HTTP headers for every request (a multi-tenant querier's V(X-Scope-OrgID)). C(Authorization),
        C(Accept) and C(Content-Type) are the client's own. Their values never appear in any output.
    type: dict
    default: {}
  prometheus_validate_certs:
    description: Verify the server's TLS certificate. V(false) only for a lab.
    type: bool
    default: true
"""

    PLUGIN = r"""
options:
  prometheus_token_file:
    description:
      - A file holding a bearer token sent as C(Authorization) to the Prometheus server (a Kubernetes service
        account token, an OAuth proxy's token). Read on every run, so a rotated token is picked up. Excludes
        O(prometheus_username).
    type: path
    env:
      - name: NODEFIX_PROMETHEUS_TOKEN_FILE
  prometheus_username:
    description: The user of HTTP basic auth for the Prometheus server (rather than in O(prometheus_url)).
    type: str
    env:
      - name: NODEFIX_PROMETHEUS_USERNAME
  prometheus_password:
    description: The password of HTTP basic auth; never in any output.
    type: str
    env:
      - name: NODEFIX_PROMETHEUS_PASSWORD
  prometheus_ca_path:
    description: A PEM CA bundle that verifies the Prometheus server's certificate (the system's trust store otherwise).
    type: path
    env:
      - name: NODEFIX_PROMETHEUS_CA_PATH
  prometheus_headers:
    description:
      - Extra HTTP headers for every request (a multi-tenant querier's V(X-Scope-OrgID)). C(Authorization),
        C(Accept) and C(Content-Type) are the client's own. Their values never appear in any output.
    type: dict
    default: {}
  prometheus_validate_certs:
    description: Verify the server's TLS certificate. V(false) only for a lab.
    type: bool
    default: true
  prometheus_timeout:
    description: Seconds to wait for each answer of the Prometheus server.
    type: int
    default: 30
"""
