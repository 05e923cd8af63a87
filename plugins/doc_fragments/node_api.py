# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster options of the modules that call the API server through the collection's one client (their argument
spec: ``_k8s.client.argument_spec``). DOCUMENTATION: the cluster and Node options of the modules that read or write
one Node; DEFAULT_KUBECONFIG: the cluster options of the modules whose kubeconfig may be left to the client's
default."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description: The kubeconfig of the cluster (nodefix.k8s's C(nodefix_kubeconfig)).
    type: path
    required: true
  context:
    description: The kubeconfig context (its current one when unset).
    type: str
  node:
    description: The Node object's name.
    type: str
    required: true
"""

    DEFAULT_KUBECONFIG = r"""
options:
  kubeconfig:
    description: Path of a kubeconfig; without it the client's default (C(KUBECONFIG), C(~/.kube/config)) is used.
    type: path
  context:
    description: Context of the kubeconfig to use (default, its current context).
    type: str
"""
