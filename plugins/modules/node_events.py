#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_events
short_description: Leave a remediation's trail on the Node object - Kubernetes Events and a summary annotation
version_added: 1.1.0
description:
  - Posts C(events.k8s.io/v1) Events about one node, in the style of kubelet's own (a CamelCase reason, a short note,
    C(Normal) or C(Warning)), reported by the controller C(nodefix.k8s) and carrying the run's id, so
    C(kubectl get events --field-selector involvedObject.name=NODE) and C(kubectl describe node) tell what a
    remediation did. Run on the controller (C(delegate_to=localhost)), as nodefix.k8s.remediate does twice per node.
  - O(phase=start), after the audit - one event summing the findings and the plan (C(FindingsDetected), or
    C(NoFindings)).
  - O(phase=end) - the steps in order (C(Drained) or C(DrainFailed), C(FixApplied) per role with what changed read from
    the audits around the fixes, C(Rebooted), C(KernelBooted) or C(RebootHeld)), the outcome (C(RemediationVerified),
    C(FindingsStillOpen), C(RolledBack), C(RemediationFailed), C(NothingToFix); C(NotVerified) without an O(audit_after))
    and C(Uncordoned) or C(LeftCordoned) (C(LeftCordonedUnverified) when the record's C(held) names why the node stays
    cordoned; C(GivenBack) first when its C(given_back) says this run gave back a node an earlier run left cordoned);
    and the annotation C(nodefix.k8s/last-remediation) on the Node - the last remediation's time, outcome, run id,
    fixed and still-open ids as JSON.
  - The trail never fails the remediation it describes. An API error (no RBAC for events, the node unknown) is a
    warning and RV(errors) says what was not written.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the Python client kubernetes.core uses)
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
  namespace:
    description: Where the Events go (C(default), as kubelet's node events).
    type: str
    default: default
  run_id:
    description: The run's id, in every event's note and the annotation (AWX's job id under AWX).
    type: str
    required: true
  instance:
    description: The events' C(reportingInstance) (this controller's host name when unset).
    type: str
  phase:
    description: Which part of the remediation the events describe.
    type: str
    choices: [start, end]
    required: true
  audit_before:
    description: M(nodefix.k8s.node_audit)'s result before the fixes.
    type: dict
    required: true
  audit_after:
    description: Its result after the fixes (O(phase=end); unset when the node was not audited again).
    type: dict
  plan:
    description: The node's plan (P(nodefix.k8s.remediation_plan#filter)'s result; O(phase=start)).
    type: dict
    default: {}
  remediation:
    description: The remediation's record (status, roles, msg, actions, held, given_back; O(phase=end)).
    type: dict
  started:
    description: When the remediation started (Unix time; O(phase=start)).
    type: float
  finished:
    description: When it ended (Unix time; O(phase=end)).
    type: float
  drained:
    description: Whether this run cordoned and drained the node.
    type: bool
    default: false
  drain_error:
    description: Why the drain failed (empty when it did not).
    type: str
    default: ""
  cordoned_before:
    description: Whether an operator had cordoned the node before the run (it stays cordoned).
    type: bool
    default: false
  annotate:
    description: Write the C(nodefix.k8s/last-remediation) annotation (O(phase=end)).
    type: bool
    default: true
extends_documentation_fragment:
  - nodefix.k8s.attributes
attributes:
  check_mode:
    support: full
    details: Works out the events and the annotation and posts nothing.
  diff_mode:
    support: none
  platform:
    details: Runs on the controller, against the cluster's API server.
seealso:
  - name: Event v1 events.k8s.io
    description: The Event API the module writes.
    link: https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/
  - module: nodefix.k8s.node_audit
"""

EXAMPLES = r"""
- name: Say on the Node what the remediation did
  nodefix.k8s.node_events:
    kubeconfig: /etc/nodefix/kubeconfig
    node: "{{ inventory_hostname }}"
    run_id: "{{ awx_job_id | default('manual-1') }}"
    phase: end
    audit_before: "{{ audit_before }}"
    audit_after: "{{ audit_after }}"
    remediation: {status: ok, roles: [nodefix.k8s.kubelet]}
    finished: "{{ now(utc=true).timestamp() }}"
    drained: true
  delegate_to: localhost
"""

RETURN = r"""
events:
  description: The events posted (in check mode, that would be posted), in order.
  returned: always
  type: list
  elements: dict
  contains:
    reason:
      description: The event's reason.
      type: str
    type:
      description: C(Normal) or C(Warning).
      type: str
    action:
      description: The step (C(Audit), C(Drain), C(Fix), C(Reboot), C(Verify), C(Uncordon)).
      type: str
    note:
      description: What happened, with the run id (at most 1024 bytes).
      type: str
    time:
      description: The event's time (RFC 3339, microseconds).
      type: str
  sample: [{"reason": "RemediationVerified", "type": "Normal", "action": "Verify",
            "note": "run 4711: verified by a new audit: fixed kubelet.api_qps_low", "time": "2026-11-26T10:00:00.000001Z"}]
annotation:
  description: The annotation written (O(phase=end)), empty otherwise.
  returned: always
  type: dict
  sample: {"nodefix.k8s/last-remediation": "{\"fixed\":[\"kubelet.api_qps_low\"],\"outcome\":\"ok\",\"run\":\"4711\"}"}
posted:
  description: How many events the API server accepted.
  returned: always
  type: int
  sample: 4
errors:
  description: What could not be written, and why (each also a warning).
  returned: always
  type: list
  elements: str
  sample: ["event Drained: 403 Forbidden"]
"""

import socket
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail

K8S_IMP_ERR = None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
    HAS_K8S = True
except ImportError:
    HAS_K8S = False
    K8S_IMP_ERR = traceback.format_exc()


def work_out(p):
    """(events, annotation) of the module's parameters; NodefixError on facts of the wrong shape."""
    if p["phase"] == "start":
        if p["started"] is None:
            raise trail.TrailInputError("started is required with phase=start")
        return trail.ordered(trail.start_events(p["run_id"], p["audit_before"], p["plan"], p["started"])), {}
    if p["finished"] is None or p["remediation"] is None:
        raise trail.TrailInputError("finished and remediation are required with phase=end")
    events = trail.ordered(trail.end_events(p["run_id"], p["audit_before"], p["audit_after"], p["remediation"],
                                            p["finished"], p["drained"], p["drain_error"], p["cordoned_before"]))
    note = trail.annotation(p["run_id"], p["remediation"], p["audit_before"], p["audit_after"], p["finished"]) \
        if p["annotate"] else {}
    return events, note


def _why(exc):
    return "%s %s" % (getattr(exc, "status", ""), getattr(exc, "reason", "") or exc)


def post(module, events, note):
    """Post the events and the annotation; (posted, annotated, errors)."""
    p = module.params
    try:
        client = k8s_config.new_client_from_config(config_file=p["kubeconfig"], context=p["context"])
    except Exception as exc:  # the client raises ConfigException, IOError, yaml errors...
        return 0, False, ["cannot load the kubeconfig %s: %s" % (p["kubeconfig"], exc)]
    core, ev = k8s_client.CoreV1Api(client), k8s_client.EventsV1Api(client)
    try:
        uid = core.read_node(p["node"]).metadata.uid
    except ApiException as exc:
        return 0, False, ["node %s: %s; no event written" % (p["node"], _why(exc))]
    instance = p["instance"] or socket.gethostname()
    posted, annotated, errors = 0, False, []
    for e in events:
        body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"generateName": "%s.nodefix-" % p["node"], "namespace": p["namespace"]},
                "eventTime": trail.iso(e["time"]), "reportingController": trail.CONTROLLER,
                "reportingInstance": instance, "action": e["action"], "reason": e["reason"], "note": e["note"],
                "type": e["type"], "regarding": {"apiVersion": "v1", "kind": "Node", "name": p["node"], "uid": uid}}
        try:
            ev.create_namespaced_event(p["namespace"], body)
            posted += 1
        except ApiException as exc:
            errors.append("event %s: %s" % (e["reason"], _why(exc)))
    if note:
        try:
            core.patch_node(p["node"], {"metadata": {"annotations": note}})
            annotated = True
        except ApiException as exc:
            errors.append("annotation %s: %s" % (trail.ANNOTATION, _why(exc)))
    return posted, annotated, errors


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kubeconfig=dict(type="path", required=True),
            context=dict(type="str"),
            node=dict(type="str", required=True),
            namespace=dict(type="str", default="default"),
            run_id=dict(type="str", required=True),
            instance=dict(type="str"),
            phase=dict(type="str", choices=["start", "end"], required=True),
            audit_before=dict(type="dict", required=True),
            audit_after=dict(type="dict"),
            plan=dict(type="dict", default={}),
            remediation=dict(type="dict"),
            started=dict(type="float"),
            finished=dict(type="float"),
            drained=dict(type="bool", default=False),
            drain_error=dict(type="str", default=""),
            cordoned_before=dict(type="bool", default=False),
            annotate=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        events, note = work_out(module.params)
    except NodefixError as err:
        module.fail_json(msg="bad input: %s; no event written" % err)
    shown = [dict(e, time=trail.iso(e["time"])) for e in events]
    if module.check_mode:
        module.exit_json(changed=bool(events or note), events=shown, annotation=note, posted=0, errors=[])
    if not HAS_K8S:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMP_ERR)
    posted, annotated, errors = post(module, events, note)
    for error in errors:
        module.warn("the remediation's trail on node %s is incomplete: %s" % (module.params["node"], error))
    module.exit_json(changed=bool(posted) or annotated, events=shown, annotation=note if annotated else {},
                     posted=posted, errors=errors)


if __name__ == "__main__":
    main()
