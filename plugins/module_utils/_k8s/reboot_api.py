# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The requests of the reboot gate and the control-plane guard (the reboot lock's Leases, the blocking pods, the
Nodes, etcd's pods, ``/readyz/etcd``) through the collection's one client (``_k8s.client``). The decisions over
what they answer are ``_reboot.gate``'s and ``_reboot.control_plane``'s."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import cluster_nodes


class KubeApi(object):
    """The few API calls the gate makes, through the collection's one API client (``_k8s.client``), answering
    plain dicts. ``create_lease``/``replace_lease`` return False on 409 (someone else won the slot); other API
    errors raise NodefixError."""

    # Every call's timeout in seconds (connect and read): a hung API server fails the call, naming it, never
    # holds the run (the gate then holds the reboot: nothing is drained)
    TIMEOUT = 30

    def __init__(self, kubeconfig, context=None):
        self.kube = kube.Kube(kubeconfig, context, self.TIMEOUT)

    def _get(self, what, path, query=None):
        """The object at ``path``; None for a 404."""
        return self.kube.request(what, "GET", path, query, missing_ok=True)

    def _write(self, what, method, path, body):
        """True when written, False on a 409 Conflict (another holder won); KubeError otherwise."""
        try:
            self.kube.request(what, method, path, body=body)
            return True
        except kube.KubeError as exc:
            if exc.status == 409:
                return False
            raise

    @staticmethod
    def _leases(namespace, name=None):
        return "/apis/coordination.k8s.io/v1/namespaces/%s/leases%s" % (
            kube.name(namespace), "/" + kube.name(name) if name else "")

    def list_pods(self, node, selector):
        query = [("fieldSelector", "spec.nodeName=%s" % node)] + ([("labelSelector", selector)] if selector else [])
        return self.kube.items("listing the pods of %s selected by %r" % (node, selector), "/api/v1/pods", query)

    def get_lease(self, namespace, name):
        return self._get("reading Lease %s/%s" % (namespace, name), self._leases(namespace, name))

    def create_lease(self, namespace, body):
        return self._write("creating Lease %s/%s" % (namespace, body["metadata"]["name"]), "POST",
                           self._leases(namespace), body)

    def replace_lease(self, namespace, name, body):
        return self._write("taking over Lease %s/%s" % (namespace, name), "PUT", self._leases(namespace, name), body)

    def delete_lease(self, namespace, name, resource_version):
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        try:
            self.kube.request("releasing Lease %s/%s" % (namespace, name), "DELETE", self._leases(namespace, name),
                              body=body)
        except kube.KubeError as exc:
            if exc.status != 404:
                raise

    # The control-plane guard's reads (_reboot.control_plane), with the same timeout
    def get_node(self, name):
        """The Node as the API server has it, None when it does not know it."""
        return self._get("reading Node %s" % name, "/api/v1/nodes/%s" % kube.name(name))

    def list_nodes(self, selector=None):
        """Every Node (those the label ``selector`` picks), paged."""
        query = [("limit", cluster_nodes.PAGE)] + ([("labelSelector", selector)] if selector else [])
        return self.kube.items("listing the Nodes%s" % (" selected by %r" % selector if selector else ""),
                               "/api/v1/nodes", query)

    def list_namespaced_pods(self, namespace, selector):
        return self.kube.items("listing the pods in %s selected by %r" % (namespace, selector),
                               "/api/v1/namespaces/%s/pods" % kube.name(namespace), [("labelSelector", selector)])

    def readyz(self, check):
        """(HTTP status, body) of the API server's ``GET /readyz/<check>`` (e.g. ``etcd``), one request (its
        500 is the answer, not a failure to retry); (None, why) when it did not answer."""
        try:
            return self.kube.call("reading /readyz/%s" % check, "GET", "/readyz/%s" % check, retry=(429,))
        except kube.KubeError as exc:
            return None, "no answer: %s" % exc.why
