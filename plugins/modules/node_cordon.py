#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_cordon
short_description: Read a Node once - give back an earlier run's cordon, then read its pods and cordon it with the record
version_added: 1.3.0
description:
  - One module run on the controller (C(delegate_to=localhost)) for what nodefix.k8s.remediate decides from a Node
    before a drain, from ONE read of it.
  - Reads the Node. Decides, as the C(nodefix.k8s.cordon_reclaim) filter does, what to do with an earlier run's
    cordon - a node cordoned with a C(nodefix.k8s/cordoned-by) record of a run that never gave it back (killed, timed
    out), and not C(nodefix.k8s/held), is uncordoned and the record removed in one PATCH; a schedulable node with a
    stale record has the record removed; an operator's cordon (no record), a held node and a record that cannot be
    read stay as they are. A failed give-back PATCH is a warning (RV(reclaim.error)); the node then stays as it was.
  - A node an earlier run left held (cordoned with C(nodefix.k8s/held)) is RV(reclaim.held) - with O(cordon) its pods are
    not read and nothing is written - the caller leaves it untouched and reports it held until a person clears the hold.
  - With O(cordon) (a node to drain) - whether the node was cordoned before this run (RV(cordoned_before), read after
    the give-back), the pods on it (RV(pods), only the fields the drain's verdict C(nodefix.k8s.drain_outcome) reads)
    and, unless it was cordoned before, the cordon - C(spec.unschedulable) and the record C(nodefix.k8s/cordoned-by)
    (C({"run", "time"})) in one PATCH, so a run killed after it leaves a record the next run reads.
  - Every PATCH is conditional on the read it was decided from (C(metadata.resourceVersion)) - a cordon or record
    another writer made in between is never overwritten - a 409 Conflict reads the Node again and decides again,
    once; a Node without a resourceVersion is never written (the give-back is then RV(reclaim.error), the cordon a
    failure).
  - Every request has O(request_timeout) for the connection and the read and goes through the collection's one API
    client (no second connection attempt; a 429, a 5xx with C(Retry-After) or a read's 5xx is asked again at most
    twice, after C(Retry-After) - seconds or an HTTP date; one that ends past O(request_timeout) is not asked again -,
    or 0.5 s then 1 s). An answer that is not
    well-formed (not JSON, not the Node asked for, annotations that are not a mapping) fails the module with
    nothing written from it. A failure after the node's state was read returns RV(cordoned_before) with it, so the
    caller gives back a node it may have cordoned.
  - Check mode reads and writes nothing.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the Python client kubernetes.core uses)
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.node_api
attributes:
  check_mode:
    support: full
    details: Reads the Node and its pods, and with O(cordon) the PodDisruptionBudgets (RV(budgets)); no PATCH is sent.
  diff_mode:
    support: none
  platform:
    details: Runs on the controller; needs the Python kubernetes client.
options:
  run_id:
    description: This run's id - written in the record of the cordon; a record with another id is an earlier run's.
    type: str
    required: true
  cordon:
    description: The node is to be drained - read its pods and cordon it (unless it was cordoned before).
    type: bool
    default: false
  request_timeout:
    description: Seconds for each request's connection and read (nodefix.k8s's C(nodefix_api_timeout)).
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Read the node once - who cordoned it, its schedulability, its pods - and cordon it
  nodefix.k8s.node_cordon:
    kubeconfig: /etc/nodefix/kubeconfig
    node: worker-1
    run_id: "{{ _nodefix_run_id }}"
    cordon: true
  delegate_to: localhost
  register: cordon

- name: Remember whether the node was cordoned before this run
  ansible.builtin.set_fact:
    _nodefix_cordoned_before: "{{ cordon.cordoned_before }}"
"""

RETURN = r"""
found:
  description: The API server knows the Node (V(false) only without O(cordon); with it, an unknown node fails).
  returned: success
  type: bool
  sample: true
reclaim:
  description: What was done with an earlier run's cordon.
  returned: always
  type: dict
  contains:
    action:
      description: V(give_back), V(clear) (a stale record on a schedulable node), V(keep) or V(none).
      type: str
      sample: give_back
    msg:
      description: What it was and what was done (empty with V(none)).
      type: str
      sample: "cordoned by nodefix run 4711 at 2026-01-01T00:00:00Z, which never gave it back (killed or stopped): given back"
    by:
      description: The record C(nodefix.k8s/cordoned-by) that was read (C(run), C(time)), or null.
      type: dict
    held:
      description: The node is held for a person by an earlier run (cordoned with C(nodefix.k8s/held)); RV(reclaim.msg) says why and how to clear the hold.
      type: bool
      sample: false
    error:
      description: Why the give-back's PATCH failed (the node then stays as it was), empty otherwise.
      type: str
      sample: ""
cordoned_before:
  description:
    - The node was cordoned before this run touched it (after a give-back). Returned on a failure too once known.
  returned: with O(cordon), when the Node was read
  type: bool
  sample: false
cordoned:
  description: This run cordoned it now (the PATCH with the record).
  returned: with O(cordon)
  type: bool
  sample: true
pods:
  description:
    - The pods on the node before the drain, each with only C(metadata) (namespace, name, uid, deletionTimestamp,
      ownerReferences kind and name, the mirror pod annotation) and C(status.phase) - what
      C(nodefix.k8s.drain_outcome) reads; nothing of their specs.
  returned: with O(cordon), on success, unless the node is held
  type: list
  elements: dict
  sample: [{"metadata": {"namespace": "default", "name": "web-1", "uid": "1",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web"}]}, "status": {"phase": "Running"}}]
budgets:
  description:
    - Check mode only, for a dry run's plan - the PodDisruptionBudgets (one list of C(policy/v1) in all namespaces)
      that would refuse evictions of the pods a drain evicts (not a DaemonSet's, not a mirror pod) now, by the
      Eviction API's rules - pods it deletes without a budget check (Succeeded, Failed, Pending, being deleted) do
      not count, a not-Ready pod goes free under C(unhealthyPodEvictionPolicy=AlwaysAllow) or a healthy budget -
      each with the disruptions it allows (C(status.disruptionsAllowed); 0 while the disruption controller has not
      judged its last change), the pods it selects here, how many of their evictions it would refuse, and the pods
      that more than one budget selects (the Eviction API refuses those). Budgets that would refuse nothing are left
      out.
  returned: with O(cordon) in check mode, when the budgets could be read
  type: list
  elements: dict
  sample: [{"namespace": "shop", "name": "db", "allowed": 0, "pods": ["shop/db-0"], "refused": 1, "several": []}]
budgets_error:
  description: Check mode only - why the PodDisruptionBudgets could not be read (RBAC, the API server); the plan says so.
  returned: with O(cordon) in check mode, when the budgets could not be read
  type: str
  sample: "could not read the PodDisruptionBudgets: listing the PodDisruptionBudgets: the API server answered 403 ..."
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_cordon


def argument_spec():
    return dict(
        kube.argument_spec(required=True, node=True, request_timeout=30),
        run_id=dict(type="str", required=True),
        cordon=dict(type="bool", default=False),
    )


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    if not p["node"].strip() or not p["run_id"].strip():
        module.fail_json(msg="bad input: node and run_id must not be empty; nothing read or written")
    api = kube.module_client(module, node_api.NodeApi, reclaim={})
    try:
        out = node_cordon.run(api, p["node"], p["run_id"], p["cordon"], module.check_mode)
    except node_cordon.CordonError as exc:
        extra = {} if exc.cordoned_before is None else {"cordoned_before": exc.cordoned_before}
        module.fail_json(msg=str(exc), reclaim=exc.reclaim or {}, **extra)
    except NodefixError as exc:
        module.fail_json(msg=str(exc), reclaim={})
    if out["reclaim"]["error"]:
        module.warn("node %s: %s" % (p["node"], out["reclaim"]["error"]))
    module.exit_json(**out)


if __name__ == "__main__":
    main()
