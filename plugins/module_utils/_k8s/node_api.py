# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The requests of a node's rollout on its Node (read, merge patch - conditional with a resourceVersion -, its
pods, the PodDisruptionBudgets, the drain preflight's SelfSubjectAccessReviews) through the collection's one client
(``_k8s.client``). The decisions over what
they answer are the rollout's (``_rollout.node_cordon``, ``_rollout.record``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube


class NodeApi(object):
    """The requests (and the dry run's budget list) through the collection's one API client (``_k8s.client``:
    ``timeout`` seconds for the connection and the read, its retry policy); answers are parsed there (a body
    that is not a JSON object is a failure, named). Any failure but a Node's 404 is a NodefixError naming the
    request."""

    def __init__(self, kubeconfig, context=None, timeout=30):
        self.kube = kube.Kube(kubeconfig, context, kube.whole_seconds(timeout))

    def get_node(self, name):
        """The Node, None when the API server does not know it."""
        return self.kube.request("reading Node %s" % name, "GET", "/api/v1/nodes/%s" % kube.name(name),
                                 missing_ok=True)

    def patch_node(self, name, body, resource_version=None):
        """A merge patch of the Node; with ``resource_version``, a conditional one: the version rides in the patch's
        ``metadata.resourceVersion`` and the API server refuses it (409 Conflict, a KubeError) when the Node changed
        since that read - optimistic concurrency, as controller-runtime's ``MergeFromWithOptimisticLock`` does
        (kubernetes/kubernetes#63104: a patch's resourceVersion is a precondition of its update)."""
        if resource_version is not None:
            body = dict(body, metadata=dict(body.get("metadata") or {}, resourceVersion=str(resource_version)))
        return self.kube.request("patching Node %s" % name, "PATCH", "/api/v1/nodes/%s" % kube.name(name),
                                 body=body, content_type="application/merge-patch+json")

    def list_pods(self, name):
        return self.kube.items("listing the pods of %s" % name, "/api/v1/pods",
                               [("fieldSelector", "spec.nodeName=%s" % name)])

    def list_budgets(self):
        """Every PodDisruptionBudget (policy/v1), for the dry run's plan."""
        return self.kube.items("listing the PodDisruptionBudgets", "/apis/policy/v1/poddisruptionbudgets")

    def access_review(self, what, attributes):
        """The API server's SelfSubjectAccessReview (authorization.k8s.io/v1) of ``attributes`` (its
        ``spec.resourceAttributes``; with a ``path``, its ``spec.nonResourceAttributes`` - verb and path): may this
        client's user do it - the drain preflight's question (``api_access``). The server answers in ``status`` and
        stores nothing; ``what`` names the request in a KubeError."""
        kind = "nonResourceAttributes" if "path" in attributes else "resourceAttributes"
        return self.kube.request(what, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                 body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                       "spec": {kind: attributes}})


class NodeAnnotations(object):
    """Read and patch a Node's annotations through the collection's one API client (``_k8s.client``: every
    call with ``timeout`` seconds for the connection and the read, its retry policy) - a hung API server is an
    error, never a wait."""

    def __init__(self, kubeconfig, context=None, timeout=10):
        self.kube = kube.Kube(kubeconfig, context, timeout)

    def read(self, node):
        """(the Node's annotations ({} when none), its ``status.nodeInfo.bootID`` or None); NodefixError
        naming what went wrong otherwise."""
        obj = self.kube.request("reading Node %s" % node, "GET", "/api/v1/nodes/%s" % kube.name(node))
        info = (obj.get("status") or {}).get("nodeInfo") or {}
        return dict((obj.get("metadata") or {}).get("annotations") or {}), info.get("bootID") or None

    def patch(self, node, annotations):
        self.kube.request("annotating Node %s" % node, "PATCH", "/api/v1/nodes/%s" % kube.name(node),
                          body={"metadata": {"annotations": annotations}},
                          content_type="application/strategic-merge-patch+json")
