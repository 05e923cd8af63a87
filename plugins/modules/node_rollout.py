#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_rollout
short_description: Claim a node for this run's rollout, or release it - the rollout's state record on the Node
version_added: 1.3.0
deprecated:
  removed_in: 2.0.0
  why: >-
    The rollout is one state machine now, the action nodefix.k8s.rollout, which writes and renews the same record
    (version 2) at each of its steps; this module writes version 1 and renews it at no step of its own.
  alternative: Use M(nodefix.k8s.rollout) (phases begin, recheck and end), as playbooks/remediate.yml does.
description:
  - The state of one node's rollout lives in one versioned record on the Node, the annotation C(nodefix.k8s/rollout) (JSON
    C(version), C(run), C(phase), C(started), C(moved), C(renewed), C(leaseSeconds), C(holder) - the controller's host,
    the C(ansible-playbook) process and the boot - and C(cordonedBefore) once the cordon read it). docs/safety.md
    documents it.
  - O(state=claim), before anything is decided for the node - reads the Node. No record, or this run's own - the
    record is written (RV(action) V(claim)). A record of a run that is dead - renewed more than twice its C(leaseSeconds)
    before this controller's clock (this module remembers no earlier sight, so every sight is a first, live for a full
    lease), or its process on this same controller is gone - is taken over, said in RV(msg) (V(take_over)). A record
    of a live run, or one that cannot be read - the node is refused (V(refuse)), RV(msg) naming the run that holds it;
    nothing is written.
  - Every write is conditional - the PATCH carries the resourceVersion of the read it was decided from, and the API
    server refuses it (409 Conflict) when the Node changed in between; the module then reads and decides again (at most
    3 times). Of two runs that claim a node at the same moment, one wins; the other is refused, naming it.
  - O(state=release), when the node's rollout is over - removes the record when it is this run's.
  - The steps that move the rollout renew the lease in the same PATCH as their own write (the cordon,
    M(nodefix.k8s.node_cordon); the reboot's record, M(nodefix.k8s.reboot_backoff)).
  - Every request has O(request_timeout); a Node that cannot be read or written fails the module, naming it.
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
    details: Reads the Node and decides; writes nothing.
  diff_mode:
    support: none
  platform:
    details: Runs on the controller (C(delegate_to=localhost)) - the holder is the C(ansible-playbook) process it runs under.
options:
  state:
    description: V(claim) the node for this run, or V(release) this run's record.
    type: str
    choices: [claim, release]
    default: claim
  run_id:
    description: This run's id.
    type: str
    required: true
  lease:
    description:
      - Seconds a claim holds without renewal. Longer than the longest step between two renewals (the drain's timeout,
        the fixes, the reboot and its verification); a run dead on another controller blocks the node this long.
    type: int
    default: 1800
  request_timeout:
    description: Seconds for each request's connection and read.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Claim the node for this run
  nodefix.k8s.node_rollout:
    kubeconfig: /etc/nodefix/kubeconfig
    node: worker-1
    run_id: "{{ nodefix_run_id }}"
  delegate_to: localhost
  register: claim

- name: Release it when its rollout is over
  nodefix.k8s.node_rollout:
    state: release
    kubeconfig: /etc/nodefix/kubeconfig
    node: worker-1
    run_id: "{{ nodefix_run_id }}"
  delegate_to: localhost
"""

RETURN = r"""
action:
  description: V(claim), V(take_over), V(refuse) (O(state=claim)); V(release) or V(none) (O(state=release)).
  returned: always
  type: str
  sample: refuse
msg:
  description: Why the node was refused, or whose dead run's record was taken over; empty otherwise.
  returned: always
  type: str
  sample: "refused: nodefix run 4711 (awx-job-4711, process 42) holds this node (phase drain since 2026-12-06T07:00:00Z; ...)"
record:
  description: The record written (in check mode, that would be written); null when none.
  returned: always
  type: dict
previous:
  description: The record read before (null when none, or when it could not be read).
  returned: always
  type: dict
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record as rollout


def notes_of(node, name):
    if node is None:
        raise NodefixError("node %s not found in the API server (set nodefix_node_name)" % name)
    notes = (node.get("metadata") or {}).get("annotations") or {}
    if not isinstance(notes, dict):
        raise NodefixError("reading Node %s: its annotations are not a mapping" % name)
    return notes


# a claim PATCH refused as stale (409) is decided again from a fresh read this often, then refused
CLAIM_ATTEMPTS = 3


def _version(node, name):
    """The Node's resourceVersion (the claim's precondition); a Node without one is not well-formed: refused."""
    version = ((node or {}).get("metadata") or {}).get("resourceVersion")
    if not isinstance(version, str) or not version:
        raise NodefixError("reading Node %s: the API server's answer has no metadata.resourceVersion - a claim "
                           "must be a conditional write; nothing was written" % name)
    return version


def _stale(exc):
    return isinstance(exc, kube.KubeError) and exc.status == 409


def claim(api, name, run_id, lease, now, here, check_mode, pid_alive=rollout.pid_alive):
    """Read the Node, decide, write the claim as a conditional PATCH (the read's resourceVersion: review finding
    M1 - two runs that read the Node at once both wrote their claim and both went on). A PATCH the API server
    refuses as stale (409: another write came between) is decided again from a fresh read: the other run's
    claim is then refused, naming it. The claim is read back from the answer all the same."""
    for _attempt in range(CLAIM_ATTEMPTS):
        node = api.get_node(name)
        out = rollout.decide(notes_of(node, name), run_id, now, here, lease, pid_alive)
        out["changed"] = out["action"] in ("claim", "take_over")
        if not out["changed"] or check_mode:
            return out
        body = {"metadata": {"annotations": {rollout.ANNOTATION: rollout.text(out["record"])}}}
        try:
            answer = api.patch_node(name, body, resource_version=_version(node, name))
        except NodefixError as exc:
            if _stale(exc):
                continue
            raise
        written = notes_of(answer, name).get(rollout.ANNOTATION)
        if written != rollout.text(out["record"]):
            other = rollout.decide({rollout.ANNOTATION: written}, run_id, now, here, lease, pid_alive)
            return dict(other, action="refuse", changed=True, msg=other["msg"] or "refused: another run claimed "
                        "the node in the same moment")
        return out
    return {"action": "refuse", "record": None, "previous": None, "changed": False, "msg": (
        "refused: the Node changed under every one of %d conditional claims (409 Conflict each time) - another "
        "writer is busy with it; nothing was written" % CLAIM_ATTEMPTS)}


def release(api, name, run_id, here, check_mode):
    """Remove this run's record (a conditional PATCH: a stale read is read again; a record that is no longer
    this run's stays)."""
    for _attempt in range(CLAIM_ATTEMPTS):
        node = api.get_node(name)
        notes = notes_of(node, name)
        if not rollout.release(notes, run_id, here):
            return {"action": "none", "record": None, "previous": None, "msg": "", "changed": False}
        if not check_mode:
            try:
                api.patch_node(name, {"metadata": {"annotations": {rollout.ANNOTATION: None}}},
                               resource_version=_version(node, name))
            except NodefixError as exc:
                if _stale(exc):
                    continue
                raise
        return {"action": "release", "record": None, "previous": rollout.read(notes), "msg": "", "changed": True}
    raise NodefixError("releasing Node %s: the Node changed under every one of %d conditional writes (409 Conflict); "
                       "the record stays until its lease runs out" % (name, CLAIM_ATTEMPTS))


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=dict(
        kube.argument_spec(required=True, node=True, request_timeout=30),
        state=dict(type="str", choices=["claim", "release"], default="claim"),
        run_id=dict(type="str", required=True),
        lease=dict(type="int", default=rollout.DEFAULT_LEASE),
    ), supports_check_mode=True)
    p = module.params
    if not p["node"].strip() or not p["run_id"].strip() or p["lease"] < 60:
        module.fail_json(msg="bad input: node and run_id must not be empty and lease must be at least 60 seconds; "
                             "nothing read or written")
    here = rollout.controller()
    now = datetime.datetime.now(datetime.timezone.utc)
    api = kube.module_client(module, node_api.NodeApi)
    try:
        if p["state"] == "claim":
            out = claim(api, p["node"], p["run_id"], p["lease"], now, here, module.check_mode)
        else:
            out = release(api, p["node"], p["run_id"], here, module.check_mode)
    except NodefixError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**out)


if __name__ == "__main__":
    main()
