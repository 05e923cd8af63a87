# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Every request of one node's rollout state machine (``_rollout.machine``) on one object: the Node's read and
conditional merge patch and its pods (``_k8s.node_api``'s), the lock's Leases, the Nodes and etcd's pods
(``_k8s.reboot_api``'s), and the drain's evictions - all through the collection's one client (``_k8s.client``).

An eviction's answer is the drain's to judge, not the retry policy's: ``evict`` sends one request (5xx with
``Retry-After`` retried by the client within the drain's time left; a 429 returned) and answers ``(status,
retry_after, message)`` - a 429 is a PodDisruptionBudget that allows no disruption now (the Eviction API's
``TooManyRequests``, its ``details.retryAfterSeconds`` or the ``Retry-After`` header saying when to ask again), a 404
a pod already gone, a 409 a pod replaced (the UID precondition), any other status the API server's error (the drain
fails with it, never as a timeout). https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import evictions
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import reboot_api


class RolloutApi(node_api.NodeApi, reboot_api.KubeApi):
    """The machine's API object over ONE client (``NodeApi``'s, built from the kubeconfig; ``KubeApi``'s requests
    read ``self.kube``): get_node, patch_node (conditional), list_budgets; the lock's Leases (a 409 is a slot
    another holder won), list_nodes, list_namespaced_pods, readyz; ``list_pods`` with an optional label
    selector; ``evict``."""

    def list_pods(self, name, selector=None):
        """The pods on Node ``name`` (those ``selector`` selects, when given)."""
        return reboot_api.KubeApi.list_pods(self, name, selector)

    def evict(self, namespace, name, uid=None, budget=None):
        """(status, retry_after seconds or None, message) of one eviction of pod ``namespace/name`` (with ``uid``,
        a UID precondition; the body is ``_k8s.evictions.eviction``'s, as the modules send it): the Status's
        ``details.retryAfterSeconds``, else the ``Retry-After`` header (seconds or an HTTP-date); the message
        scrubbed of this client's credentials. ``budget``: the seconds the client's retry of a 5xx with
        ``Retry-After`` may wait (the drain's time left). KubeError when the API server did not answer (whether it
        was evicted is unknown)."""
        status, headers, text = self.kube.exchange("eviction of pod %s/%s" % (namespace, name), "POST",
                                                   evictions.pod_path(namespace, name, "/eviction"),
                                                   body=evictions.eviction(namespace, name, uid),
                                                   retry=kube.RETRY_SERVER, budget=budget)
        after, said = eviction_answer(text)
        return status, after if after is not None else kube.retry_after(headers), self.kube.scrub(said)


def eviction_answer(text):
    """(retry_after, message) of an eviction's answer: its Status's ``details.retryAfterSeconds`` (None when it has
    none) and ``message``."""
    try:
        body = json.loads(text or "")
    except ValueError:
        return None, (text or "")[:300]
    if not isinstance(body, dict):
        return None, ""
    details = body.get("details") if isinstance(body.get("details"), dict) else {}
    after = details.get("retryAfterSeconds")
    after = after if isinstance(after, int) and not isinstance(after, bool) and after >= 0 else None
    return after, "%s" % (body.get("message") or "")[:300]
