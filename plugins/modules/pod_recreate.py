#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pod_recreate
short_description: Evict the pods of one node by UID, one at a time, waiting for each replacement
version_added: 1.3.0
description:
  - Has the pods whose UIDs are given in O(uids) recreated by their controllers - the gVisor role's opt-in eviction
    of the pods whose sandboxes are still oversized (C(gvisor_evict_pods)) - in one call, through the collection's one
    Kubernetes API client (one timeout, one retry policy, errors that never quote a credential).
  - Lists the pods of O(node) once (C(GET /api/v1/pods?fieldSelector=spec.nodeName=<node>), every page), then takes
    the UIDs one at a time, in the order given (a UID given twice is taken once). A UID no pod of the node has any
    more, a pod whose listing cannot be read, a mirror (static) pod (an owner of kind C(Node) - the kubelet recreates
    it from its manifest, an eviction does not recreate its sandbox), a DaemonSet's pod, and a pod no controller
    owns - no C(ownerReferences) entry with C(controller) set to C(true); an owner that is not its controller
    recreates nothing - (unless O(bare_pods)) are skipped with the reason.
  - Before evicting a pod that has a controller, lists the pods of its namespace and requires every other pod of
    the same controller (its C(ownerReferences) uid, or kind and name) to be Ready and not terminating; else that
    pod is skipped (C(another pod of <kind>/<name> is not Ready ...)) - this also covers an earlier run stopped
    while a replacement was not Ready yet. A pod whose controller's earlier pod in this run got no confirmed
    replacement is skipped too. A pod no longer among them (since the node's listing) is V(gone) or V(replaced)
    as a read of it says, or - orphaned or adopted by another owner - skipped.
  - The sibling check sees only the pods that exist. So for a pod whose controller is a ReplicaSet or a
    StatefulSet (C(apps)) or a ReplicationController (core C(v1)), the controller object is read too, right before
    each of its pods' eviction (C(GET /apis/apps/v1/namespaces/<ns>/replicasets/<name>), C(.../statefulsets/<name>),
    C(/api/v1/namespaces/<ns>/replicationcontrollers/<name>)), and the pod is evicted only when every replica it
    wants but this pod is Ready - its C(status.readyReplicas) (absent, 0), less the pod when it is Ready itself, at
    least its C(spec.replicas) (absent, 1 as the API server defaults it) less one - and its C(metadata.uid) is the
    pod's C(ownerReferences) uid. Whether the pod is Ready is read in that same listing of its namespace, not
    taken from the node's listing at the start of the run. A controller scaled to zero (C(spec.replicas) 0) holds
    the pod - nothing would recreate it. A ReplicaSet's C(ownerReferences) of C(extensions/v1beta1) or
    C(apps/v1beta2) is read at C(apps/v1) (the same object). A controller already short of a replica - one missing wholly (unschedulable, not
    created yet, just deleted) - holds the pod (V(skipped),
    C(its ReplicaSet web-5d9 has 1 of 2 replicas ready) and why).
  - A controller that cannot be read - a 404, a 403, no answer, an answer that is not that object's shape, another
    object of that name (another uid) - holds the pod with what could not be read; never evicted on an unread
    answer. A controller of another kind (a Job, a custom resource, a ReplicaSet kind of another API group) is not
    read - its pod keeps the sibling check alone - and that pod's result carries a C(note) that says so.
  - Any other pod is evicted exactly as M(nodefix.k8s.pod_eviction) evicts it (the same code) - a C(policy/v1)
    Eviction of that pod with its UID as precondition, so a replacement that reused the name is never evicted;
    PodDisruptionBudgets honoured, a 429 asked again every O(wait_sleep) seconds until O(wait_timeout). Any 2xx
    answer is an accepted eviction. A 409 is told apart by reading the pod - no such pod (V(gone)) or another UID
    (V(replaced)); the same UID still there is a conflict of the eviction itself (V(failed)). The node is not
    cordoned and no other pod is touched, not even one with the same labels on the same node.
  - After an eviction of a pod that has a controller, waits up to O(replacement_timeout) seconds for its
    replacement - a pod of the same controller whose UID was not there just before the eviction, not being
    deleted (no C(metadata.deletionTimestamp)), with the condition C(Ready=True); a sibling replica or a pod still
    terminating never counts - asked every O(wait_sleep) seconds.
  - Never fails for one pod. A failed eviction (a budget that still refuses, an API error) or a replacement not
    Ready in time is recorded for that pod and the next one goes on; an answer that cannot be read is that pod's
    result only (never evicted on it; after its eviction, V(evicted, replacement not confirmed) with the reason);
    when the pods cannot be listed (or the kubeconfig cannot be loaded) every UID is recorded as not attempted,
    with the reason.
  - 'Says per pod what happened in C(msg) too, one C(<pod>: <result> (<reason>\) [<note>]) a pod, joined by C(; ).'
  - Returns names, UIDs and results only, never a pod's spec (it holds environment values and secrets' names).
  - Runs where the kubeconfig is (usually the controller, with C(delegate_to)); needs the C(kubernetes) Python
    client, as the kubernetes.core collection does.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the official Kubernetes Python client) >= 24.2.0
options:
  node:
    description: The node's name in Kubernetes; only its pods are evicted.
    type: str
    required: true
  uids:
    description: UIDs of the pods to have recreated, taken one at a time in this order.
    type: list
    elements: str
    required: true
  bare_pods:
    description: Also evict pods no controller owns (no C(ownerReferences) entry with C(controller) set to C(true) -
      nothing recreates them).
    type: bool
    default: false
  grace_period_seconds:
    description: Termination grace period for each evicted pod (default, the pod's own); at least V(0).
    type: int
  wait_timeout:
    description: Seconds to keep retrying, for each pod, an eviction a PodDisruptionBudget refuses (V(0), try once).
    type: int
    default: 120
  wait_sleep:
    description: Seconds between two attempts of an eviction, and between two reads of a replacement; at least V(1).
    type: int
    default: 5
  replacement_timeout:
    description: Seconds to wait, for each evicted pod, for its replacement to be Ready (V(0), look once).
    type: int
    default: 300
  request_timeout:
    description:
      - Seconds each API request may take (connect and read). An API server that cannot be reached or does not
        answer in time is that pod's failure (or, for the listing, every pod's), named; never a wait without end.
    type: int
    default: 30
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.node_api.default_kubeconfig
attributes:
  check_mode:
    support: full
    details: Lists the node's pods (and, for a pod with a controller, its namespace's and reads its ReplicaSet,
      StatefulSet or ReplicationController - read-only requests) and reports, per UID, V(would evict) or why not;
      sends no eviction.
  diff_mode:
    support: none
    details: An eviction has no before/after text.
  platform:
    details: Any host with the Kubernetes Python client and access to the API server.
seealso:
  - name: API-initiated eviction
    description: The Eviction API, PodDisruptionBudgets and the 429 answer.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
  - name: ReplicaSet v1 (API reference)
    description: C(spec.replicas) (defaults to 1) and C(status.readyReplicas); StatefulSet and ReplicationController
      have the same two fields.
    link: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/replica-set-v1/
  - name: StatefulSet v1 (API reference)
    description: C(spec.replicas) and C(status.readyReplicas) of a StatefulSet.
    link: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/stateful-set-v1/
  - module: nodefix.k8s.pod_eviction
"""

EXAMPLES = r"""
- name: Have the pods of oversized gVisor sandboxes recreated, one at a time
  nodefix.k8s.pod_recreate:
    kubeconfig: ~/.kube/config
    node: node-a
    uids:
      - 0d6a5c38-5a4b-4a39-9d1e-2f0c8e6b7a11
      - 6a1f0c2e-5d1b-4c1e-9a7d-00000000a001
    wait_timeout: 300
    replacement_timeout: 300
  delegate_to: localhost
  register: recreated

- name: Say what happened to each pod
  ansible.builtin.debug:
    msg: "{{ recreated.results | map('to_json') | list }}"
"""

RETURN = r"""
results:
  description:
    - One entry a UID (a UID given twice, once), in the order of O(uids).
    - V(evicted, replacement Ready); V(evicted) (no replacement waited for - a pod without a controller);
      V(evicted, replacement not confirmed) (evicted; its replacement could not be read - with the reason);
      V(would evict) (check mode); V(gone) (no such pod by the time of the eviction); V(replaced) (the pod of that
      name has another UID); V(failed) (with the reason - the eviction's error, or V(replacement not Ready in
      time)); V(skipped) (with the reason, no C(pod) - among them its controller short of a Ready replica, or a
      controller that could not be read); V(not attempted) (the pods could not be listed; with the reason, no
      C(pod)).
  returned: always
  type: list
  elements: dict
  sample:
    - {"uid": "0d6a5c38-5a4b-4a39-9d1e-2f0c8e6b7a11", "pod": "shop/cart-7d4b9-abcde",
       "result": "evicted, replacement Ready"}
    - {"uid": "6a1f0c2e-5d1b-4c1e-9a7d-00000000a001", "result": "skipped",
       "reason": "DaemonSet pods are not evicted; delete it to have it recreated"}
    - {"uid": "9b2e7d4a-1c3f-4e5a-8b6d-00000000a002", "result": "skipped",
       "reason": "its ReplicaSet web-5d9 has 1 of 2 replicas ready: evicting this pod would take another one down"}
    - {"uid": "3c4d5e6f-7a8b-4c9d-8e0f-00000000a003", "pod": "batch/report-28f1k", "result": "evicted, replacement Ready",
       "note": "the desired replicas of its Job report were not read (they are for a ReplicaSet, StatefulSet or
                ReplicationController): only its other pods were checked"}
  contains:
    uid:
      description: The UID as given.
      returned: always
      type: str
    pod:
      description: The pod's C(namespace/name).
      returned: when a pod of the node has the UID and it was not skipped
      type: str
    result:
      description: What happened (above).
      returned: always
      type: str
    reason:
      description: Why it was skipped, not attempted or failed, or why its replacement is not confirmed.
      returned: for a pod skipped, not attempted, failed or whose replacement is not confirmed
      type: str
    note:
      description:
        - Its controller is of a kind whose desired replicas are not read (not a ReplicaSet, StatefulSet or
          ReplicationController); only the other pods of it were checked before the eviction.
      returned: for a pod with such a controller that got past the sibling check
      type: str
msg:
  description: 'Per pod what happened, C(<pod name or uid>: <result> (<reason>\) [<note>]), joined by C(; ).'
  returned: always
  type: str
  sample: "cart-7d4b9-abcde: evicted, replacement Ready; 6a1f0c2e-5d1b-4c1e-9a7d-00000000a001: skipped (DaemonSet
    pods are not evicted; delete it to have it recreated)"
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import evictions


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            kube.argument_spec(request_timeout=30),
            node=dict(type="str", required=True),
            uids=dict(type="list", elements="str", required=True),
            bare_pods=dict(type="bool", default=False),
            grace_period_seconds=dict(type="int"),
            wait_timeout=dict(type="int", default=120),
            wait_sleep=dict(type="int", default=5),
            replacement_timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    if not kube.available():
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    if not kube.object_name(p["node"]):
        module.fail_json(msg="node %r is not a Kubernetes object name" % p["node"])
    if any(not uid for uid in p["uids"]):
        module.fail_json(msg="uids holds an empty UID")
    if p["wait_timeout"] < 0 or p["replacement_timeout"] < 0:
        module.fail_json(msg="wait_timeout and replacement_timeout must not be negative")
    if p["wait_sleep"] < 1:
        module.fail_json(msg="wait_sleep must be at least 1 s")
    if p["grace_period_seconds"] is not None and p["grace_period_seconds"] < 0:
        module.fail_json(msg="grace_period_seconds must not be negative")
    if p["request_timeout"] <= 0:
        module.fail_json(msg="request_timeout must be more than 0 seconds")
    uids = []
    for uid in p["uids"]:   # each once, in order
        if uid not in uids:
            uids.append(uid)
    if not uids:
        module.exit_json(changed=False, results=[], msg="no pod to recreate")
    try:
        api = kube.from_params(p)
    except NodefixError as exc:    # (the kubeconfig's error: scrubbed of its credentials by the client)
        results = evictions.not_attempted(p["node"], uids, exc.msg)
        module.exit_json(changed=False, results=results, msg="; ".join(evictions.line(r) for r in results))
    changed, results = evictions.recreate(
        api, p["node"], uids, check_mode=module.check_mode, bare_pods=p["bare_pods"],
        grace=p["grace_period_seconds"], wait=p["wait_timeout"], sleep=p["wait_sleep"],
        ready_timeout=p["replacement_timeout"])
    module.exit_json(changed=changed, results=results, msg="; ".join(evictions.line(r) for r in results))


if __name__ == "__main__":
    main()
