#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pod_eviction
short_description: Evict exactly one pod through the Kubernetes Eviction API
version_added: "1.0.0"
description:
  - Evicts the one pod named by O(namespace) and O(name) with a C(policy/v1) Eviction
    (C(POST /api/v1/namespaces/<namespace>/pods/<name>/eviction)), so PodDisruptionBudgets are honoured. Nothing
    else is touched - no other pod with the same labels, and the node is not cordoned.
  - With O(uid), the eviction carries a UID precondition, so a replacement that reuses the name (a StatefulSet
    pod) is never evicted by mistake; a pod whose UID differs is reported as already replaced.
  - Any 2xx answer to the eviction is an accepted eviction, whatever its body. A 409 is told apart by reading the
    pod again - no such pod (V(gone)) or another UID (V(replaced)); the same UID still there is a conflict of the
    eviction itself (a PodDisruptionBudget's, after the API server's own retries) and fails the module.
  - An eviction refused with 429 (a PodDisruptionBudget that allows no disruption now) is retried every
    O(wait_sleep) seconds until O(wait_timeout), then the module fails naming the pod and the budget's message.
  - Runs where the kubeconfig is (usually the controller, with C(delegate_to)); needs the C(kubernetes) Python
    client, as the kubernetes.core collection does.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the official Kubernetes Python client) >= 24.2.0
options:
  name:
    description: Name of the pod.
    type: str
    required: true
  namespace:
    description: Namespace of the pod.
    type: str
    required: true
  uid:
    description: UID the pod must have; the eviction is refused by the API server when the pod was replaced.
    type: str
  grace_period_seconds:
    description: Termination grace period for the evicted pod (default, the pod's own); at least V(0).
    type: int
  wait_timeout:
    description: Seconds to keep retrying an eviction a PodDisruptionBudget refuses (V(0), try once).
    type: int
    default: 120
  wait_sleep:
    description: Seconds between two attempts; at least V(1).
    type: int
    default: 5
  request_timeout:
    description:
      - Seconds each API request may take (connect and read). An API server that cannot be reached or does not
        answer in time fails the module naming the pod and the error (never a wait without end).
    type: int
    default: 30
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.node_api.default_kubeconfig
attributes:
  check_mode:
    support: full
    details: Reads the pod and reports whether it would be evicted; sends no eviction.
  diff_mode:
    support: none
    details: An eviction has no before/after text.
  platform:
    details: Any host with the Kubernetes Python client and access to the API server.
seealso:
  - name: API-initiated eviction
    description: The Eviction API, PodDisruptionBudgets and the 429 answer.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
  - module: kubernetes.core.k8s_drain
"""

EXAMPLES = r"""
- name: Evict the pod whose gVisor sandbox must be recreated
  nodefix.k8s.pod_eviction:
    kubeconfig: ~/.kube/config
    namespace: shop
    name: cart-7d4b9-abcde
    uid: 0d6a5c38-5a4b-4a39-9d1e-2f0c8e6b7a11
    wait_timeout: 300
  delegate_to: localhost
"""

RETURN = r"""
result:
  description: V(evicted), V(would evict) (check mode), V(gone) (no such pod any more) or V(replaced) (a pod with
    that name but another UID).
  returned: always
  type: str
  sample: evicted
pod:
  description: The pod as read before the eviction.
  returned: when the pod existed
  type: dict
  sample: {"namespace": "shop", "name": "cart-7d4b9-abcde", "uid": "0d6a5c38-5a4b-4a39-9d1e-2f0c8e6b7a11",
           "node": "node-a"}
attempts:
  description: Eviction requests sent (more than one when a PodDisruptionBudget refused the first ones).
  returned: always
  type: int
  sample: 1
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import evictions


def _read(module, api, ns, name):
    try:
        return api.request("reading pod %s/%s" % (ns, name), "GET", evictions.pod_path(ns, name), missing_ok=True)
    except kube.KubeError as exc:
        if not exc.status:
            module.fail_json(msg="cannot read pod %s/%s: %s" % (ns, name, kube.unanswered(api, exc)))
        module.fail_json(msg="cannot read pod %s/%s: %s %s" % (ns, name, exc.status, exc.detail()), status=exc.status)


def _evict(module, api, ns, name, uid):
    """The eviction and its wait on a PodDisruptionBudget (_k8s.evictions, pod_recreate's too); a failure fails
    the module with the pod, the attempts and the API server's answer."""
    p = module.params
    try:
        return evictions.evict(api, ns, name, uid, p["grace_period_seconds"], p["wait_timeout"], p["wait_sleep"])
    except evictions.EvictionError as exc:
        module.fail_json(**exc.fail_kwargs())


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            kube.argument_spec(request_timeout=30),
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            uid=dict(type="str"),
            grace_period_seconds=dict(type="int"),
            wait_timeout=dict(type="int", default=120),
            wait_sleep=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    if not kube.available():
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    ns, name, uid = p["namespace"], p["name"], p["uid"]
    for key in ("name", "namespace"):
        if not kube.object_name(p[key]):
            module.fail_json(msg="%s %r is not a Kubernetes object name" % (key, p[key]))
    if p["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout must not be negative")
    if p["wait_sleep"] < 1:
        module.fail_json(msg="wait_sleep must be at least 1 s")
    if p["grace_period_seconds"] is not None and p["grace_period_seconds"] < 0:
        module.fail_json(msg="grace_period_seconds must not be negative")
    if p["request_timeout"] <= 0:
        module.fail_json(msg="request_timeout must be more than 0 seconds")
    # the collection's one API client (_k8s.client), every request bounded by O(request_timeout)
    api = kube.module_client(module, where="cannot load the kubeconfig %s: " % (p["kubeconfig"] or "(default)"))
    pod = _read(module, api, ns, name)
    if pod is None:
        module.exit_json(changed=False, result="gone", attempts=0)
    meta = evictions.as_dict(pod.get("metadata"))
    info = {"namespace": ns, "name": name, "uid": meta.get("uid") if isinstance(meta.get("uid"), str) else None,
            "node": evictions.as_dict(pod.get("spec")).get("nodeName")}
    if uid and info["uid"] != uid:
        module.exit_json(changed=False, result="replaced", pod=info, attempts=0)
    if module.check_mode:
        module.exit_json(changed=True, result="would evict", pod=info, attempts=0)
    result, attempts = _evict(module, api, ns, name, uid or info["uid"])
    module.exit_json(changed=result == "evicted", result=result, pod=info, attempts=attempts)


if __name__ == "__main__":
    main()
