#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: control_plane_gate
short_description: Hold control-plane nodes, or disrupt one at a time while etcd is healthy
version_added: 1.2.0
description:
  - Decided on the controller before a node is drained, restarted or rebooted. A control-plane node - labelled
    C(node-role.kubernetes.io/control-plane) or the legacy C(node-role.kubernetes.io/master), or O(hint) - is held
    (RV(allowed) false, RV(held_by) says why) unless O(allow) is true.
  - With O(allow), it may be disrupted only when every etcd member is healthy and no other control-plane node is being
    disrupted. etcd as kubeadm runs it (static pods labelled C(component=etcd) in C(kube-system), one per control-plane
    node) - every control-plane node has its member, every member is Running and Ready, and the API server's
    C(GET /readyz/etcd) answers C(ok). etcd outside the cluster (no such pod) - O(etcd_health_command) exits 0; without
    it the control plane is held.
  - A node without a control-plane label that runs an etcd member (a C(component=etcd) pod in C(kube-system) bound to it,
    as kubeadm and RKE2 run them) or carries RKE2's C(node-role.kubernetes.io/etcd) label is guarded the same way
    (RV(etcd_member) says why) - membership, not role labels.
  - Quorum - with O(allow), a member goes down only when the members left keep a majority of all members (three members
    or more, all healthy); a single control plane or a two-member cluster is held unless O(accept_quorum_loss). It
    counts etcd members, not etcd pods - a node that should run a member (a control-plane node, an RKE2 etcd node) and
    shows no C(component=etcd) pod is a member that is down; with etcd outside the cluster the members are the
    endpoints the O(etcd_health_command)'s output names (C(etcdctl endpoint health --cluster) - simple, C(-w json) or
    C(-w table)), the node's own the one at its name or address. A member down already holds the node whatever
    O(accept_quorum_loss) says.
  - One control-plane node at a time fleet-wide - a C(coordination.k8s.io/v1) Lease C(<lock_name>-0) in
    O(lock_namespace) with the node as its C(holderIdentity), taken as the reboot lock's slots are
    (M(nodefix.k8s.reboot_gate)). O(state=release) gives it back only once the node's own etcd member is Ready again
    (waiting up to O(wait) seconds); otherwise the slot is kept and RV(lock) C(kept) says why - the Lease says it too
    (annotation C(nodefix.k8s/kept)), and a kept slot is never taken over when its TTL runs out (only this node's
    next release, or a person deleting the Lease, gives it back).
  - Runs on the controller (C(delegate_to=localhost)), normally through the nodefix.k8s.reboot role's
    C(control_plane) and C(control_plane_release) entry points.
author:
  - nodefix.k8s developers (@nodefix)
options:
  state:
    description:
      - V(acquire) decides whether the node may be disrupted now and, for an allowed control-plane node, takes the
        control plane's slot (a slot this node already holds is kept). V(release) gives this node's slot back once its
        etcd member is Ready.
    type: str
    choices: [acquire, release]
    default: acquire
  node:
    description: The node's name in the API server (the slot's holder).
    type: str
    required: true
  kubeconfig:
    description: The kubeconfig for the API server.
    type: path
    required: true
  context:
    description: The kubeconfig context (default, the current one).
    type: str
  allow:
    description: Opt in - a control-plane node may be disrupted (one at a time, etcd healthy). V(false), it is held.
    type: bool
    default: false
  hint:
    description:
      - The caller knows the node is a control-plane node whatever its labels say (its inventory group, kubeadm's
        static pod manifests on it).
    type: bool
    default: false
  accept_quorum_loss:
    description:
      - Let an etcd member go down although the members left lose quorum (a single control plane, a two-member cluster) -
        the caller accepts the outage of the API server. V(false), such a node is held.
    type: bool
    default: false
  etcd_health_command:
    description:
      - For etcd outside the cluster - a command run on the controller (argv list, e.g.
        V([etcdctl, endpoint, health, --cluster])); exit 0 means every member is healthy. The endpoints its output
        names (C(<endpoint> is healthy)/C(is unhealthy) lines, C(-w json), C(-w table)) are the members the quorum rule
        counts; an output that names none is judged by the exit code alone. Unset, a control-plane node with external
        etcd is held.
    type: list
    elements: str
    default: []
  reason:
    description: Why the node is disrupted; kept on the Lease (annotation C(nodefix.k8s/reason)).
    type: str
    default: ""
  lock_namespace:
    description: The namespace of the control plane's Lease.
    type: str
    default: kube-system
  lock_name:
    description: The control plane's lock; its Lease is C(<lock_name>-0).
    type: str
    default: nodefix-control-plane
  lock_ttl:
    description: Written on the Lease as C(leaseDurationSeconds) and judged as M(nodefix.k8s.reboot_gate) judges it (0, never).
    type: int
    default: 0
  wait:
    description: With O(state=release), seconds to wait for the node's own etcd member to be Ready again.
    type: int
    default: 300
  poll:
    description: Seconds between two looks while waiting.
    type: int
    default: 5
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.etcd
attributes:
  check_mode:
    support: full
    details: Decides and says whether a slot would be taken or given back; writes no Lease.
  diff_mode:
    support: none
  platform:
    details: Runs on the controller; needs the Python kubernetes client.
requirements:
  - kubernetes (Python client)
seealso:
  - module: nodefix.k8s.reboot_gate
  - name: kubeadm - static pod labels
    description: kubeadm runs etcd on each control-plane node as the static pod C(etcd-<node>) in C(kube-system),
      labelled C(component=etcd) and C(tier=control-plane) (ComponentPod).
    link: https://github.com/kubernetes/kubernetes/blob/master/cmd/kubeadm/app/util/staticpod/utils.go
  - name: kubeadm - well-known paths and labels
    description: C(/etc/kubernetes/manifests/etcd.yaml) and C(kube-apiserver.yaml); the node-role labels.
    link: https://kubernetes.io/docs/reference/setup-tools/kubeadm/implementation-details/
  - name: medik8s Node Healthcheck - control-plane nodes
    description: Remediates one control-plane node at a time and asks first whether etcd can take the disruption
      (medik8s common's IsEtcdDisruptionAllowed).
    link: https://github.com/medik8s/node-healthcheck-operator/blob/main/controllers/nodehealthcheck_controller.go
  - name: Cluster API - KubeadmControlPlane remediation
    description: Remediation must preserve etcd quorum - a machine is remediated only when removing its etcd member
      leaves the others healthy (canSafelyRemoveEtcdMember), one at a time.
    link: https://github.com/kubernetes-sigs/cluster-api/blob/main/controlplane/kubeadm/internal/controllers/remediation.go
  - name: Kubernetes API health endpoints
    description: C(GET /readyz/etcd) - the API server's own check of its etcd.
    link: https://kubernetes.io/docs/reference/using-api/health-checks/
"""

EXAMPLES = r"""
- name: May this node be drained and rebooted now (a control-plane node only when opted in, one at a time)
  nodefix.k8s.control_plane_gate:
    node: cp-1
    kubeconfig: /etc/nodefix/kubeconfig
    allow: true
    reason: kernel 6.12.95+deb12-amd64 installed
  delegate_to: localhost
  register: cp_gate

- name: Give the control plane's slot back once cp-1's etcd member is Ready again
  nodefix.k8s.control_plane_gate:
    state: release
    node: cp-1
    kubeconfig: /etc/nodefix/kubeconfig
    wait: 600
  delegate_to: localhost
"""

RETURN = r"""
control_plane:
  description: Whether the node is a control-plane node (its labels, O(hint), or an etcd member).
  returned: always
  type: bool
  sample: true
etcd_member:
  description: Why a node without a control-plane label is guarded as an etcd member (empty when it is not one).
  returned: state is acquire
  type: str
  sample: it runs the etcd member etcd-etcd-1
allowed:
  description: Whether the node may be disrupted now (for a control-plane node, the slot is held).
  returned: state is acquire
  type: bool
  sample: false
held_by:
  description: Why the node is held, one line each (empty when allowed).
  returned: always
  type: list
  elements: str
  sample: ["control plane: etcd is not healthy: etcd member etcd-cp-2 on cp-2 is not Ready (phase Running)"]
etcd:
  description:
    - What etcd looked like (null when not asked) - C(mode) (V(static) or V(external)), C(members) (C(name), C(node),
      C(ready), C(phase); every member the quorum counts - a node that should run one and shows no pod with C(name)
      null and C(phase) V(Missing); with external etcd, each endpoint the health command named, C(phase)
      V(healthy)/V(unhealthy), C(node) null when no Node has its address), C(readyz) (the answer of C(/readyz/etcd)),
      C(problems), C(quorum) (C(problem) - why the members left would lose quorum, empty when they keep it;
      C(accepted) - O(accept_quorum_loss) let it go on).
  returned: always
  type: dict
  sample: {"mode": "static", "members": [{"name": "etcd-cp-1", "node": "cp-1", "ready": true, "phase": "Running"}],
           "readyz": "200 ok", "problems": []}
lock:
  description:
    - The control plane's lock - C(slot) this node holds (null when none), C(holders), C(released) (the slot given back,
      for V(release)), C(kept) (why the slot is kept, for V(release)), C(polls) (looks at the etcd member).
  returned: always
  type: dict
  sample: {"slot": "nodefix-control-plane-0", "holders": [], "released": null, "kept": null, "polls": 0}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import reboot_api
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import control_plane
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib


def argument_spec():
    return dict(
        kube.argument_spec(required=True, node=True),
        state=dict(type="str", choices=["acquire", "release"], default="acquire"),
        allow=dict(type="bool", default=False),
        hint=dict(type="bool", default=False),
        accept_quorum_loss=dict(type="bool", default=False),
        etcd_health_command=dict(type="list", elements="str", default=[]),
        etcd_health_environment=dict(type="dict", default={}, no_log=True),
        reason=dict(type="str", default=""),
        lock_namespace=dict(type="str", default="kube-system"),
        lock_name=dict(type="str", default="nodefix-control-plane"),
        lock_ttl=dict(type="int", default=0),
        wait=dict(type="int", default=300),
        poll=dict(type="int", default=5),
    )


class DryLock(object):
    """The lock in check mode: says what would be taken or given back, writes nothing."""

    def __init__(self, lock):
        self.lock = lock
        self.holder = lock.holder

    def holders(self):
        return self.lock.holders()

    def acquire(self, reason=""):
        return self.lock.acquire(reason, dry_run=True)

    def release(self, dry_run=True, slot=None):
        return self.lock.release(dry_run=True, slot=slot)

    def keep(self, slot, why, dry_run=True):
        return self.lock.keep(slot, why, dry_run=True)


def release(p, api, lock, run_command, clock=time.time, sleep=time.sleep):
    """Give the slot back once the node's own etcd member is Ready, waiting up to ``wait`` seconds."""
    out = {"slot": None, "holders": [], "released": None, "kept": None, "polls": 0}
    held = [h for h in lock.holders() if h["holder"] == p["node"]]
    if not held:
        return out
    out["slot"] = held[0]["slot"]
    deadline = clock() + p["wait"]
    while True:
        out["polls"] += 1
        back, why = control_plane.own_member_back(api, p["node"], p["etcd_health_command"], run_command)
        if back:
            out["released"] = lock.release(slot=out["slot"])
            return out
        if clock() >= deadline:
            out["kept"] = ("%s keeps %s: %s after %d s - no other control-plane node is disrupted until it is; give "
                           "the slot back by hand once etcd is healthy (kubectl -n %s delete lease %s)"
                           % (p["node"], out["slot"], why, p["wait"], p["lock_namespace"], out["slot"]))
            # kept on purpose: marked on the Lease (nodefix.k8s/kept), never taken over when its TTL runs out
            if not lock.keep(out["slot"], out["kept"]):
                out["kept"] += " (its Lease could not be marked %s: it changed meanwhile)" % reboot_gate_lib.KEPT
            return out
        sleep(min(p["poll"], max(deadline - clock(), 0)) or p["poll"])


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params

    run_command = control_plane.health_command_runner(module, p["etcd_health_environment"])
    for warning in control_plane.health_command_warnings(p["etcd_health_command"]):
        module.warn(warning)
    try:
        if p["wait"] < 0 or p["poll"] < 1 or p["lock_ttl"] < 0:
            raise NodefixError("wait and lock_ttl must not be negative and poll must be at least 1 second")
        api = reboot_api.KubeApi(p["kubeconfig"], p["context"])
        lock = reboot_gate_lib.LeaseLock(api, p["lock_namespace"], p["lock_name"], 1, p["node"], p["lock_ttl"])
        if module.check_mode:
            lock = DryLock(lock)
        if p["state"] == "release":
            out = release(p, api, lock, run_command)
            module.exit_json(changed=out["released"] is not None and not module.check_mode, control_plane=True,
                             held_by=[], etcd=None, lock=out)
        before = [h["slot"] for h in lock.holders() if h["holder"] == p["node"]]
        result = control_plane.guard(api.get_node(p["node"]), p["allow"], api, lock, p["reason"],
                                     p["etcd_health_command"], run_command, p["hint"],
                                     p["accept_quorum_loss"])
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    changed = bool(result["lock"]["slot"]) and not before and not module.check_mode
    result["lock"].update(released=None, kept=None, polls=0)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
