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
    C(FindingsStillOpen), C(RolledBack), C(RemediationFailed), C(NothingToFix); C(NotVerified) without an O(audit_after) or when a finding gone from it
    was not looked for - its detector could not run after the fixes, C(audit.check_failed))
    and C(Uncordoned) or C(LeftCordoned) (C(LeftCordonedUnverified) when the record's C(held) names why the node stays
    cordoned; C(GivenBack) first when its C(given_back) says this run gave back a node an earlier run left cordoned);
    and the annotation C(nodefix.k8s/last-remediation) on the Node - the last remediation's time, outcome, run id,
    fixed, still-open and not-verified ids as JSON (a finding whose detector could not run after the fixes is
    listed under C(notVerified), never under C(fixed), and C(verified) is C(false)).
  - The trail never fails the remediation it describes. An API error (no RBAC for events, the node unknown, a 422
    Invalid), an API server that refuses the connection, cannot be resolved, fails TLS or does not answer within
    O(request_timeout), and a controller without the C(kubernetes) Python library are each a warning, and
    RV(errors) says what was not written; the module itself never fails on them.
  - Each Event is made as the real API server validates it (pkg/apis/core/validation/events.go) - the note at most
    1024 bytes of UTF-8 (cut on a character boundary), reason, action and C(reportingInstance) at most 128 bytes,
    C(reportingController) the qualified name C(nodefix.k8s); C(metadata.generateName) is the node's name and
    C(.nodefix-), the name shortened so that the name generated from it stays within 253 characters (the full
    name is then in the note and in C(regarding)).
  - Bad input (facts of the wrong shape, an O(instance) or O(request_timeout) the API server or the module could
    never use) fails the module when it starts, with nothing written.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the Python client kubernetes.core uses)
options:
  namespace:
    description:
      - Where the Events go (C(default), as kubelet's node events).
      - A Node is cluster-scoped; the API server keeps an Event about it only in C(default) or C(kube-system)
        (C(ValidateEventCreate), pkg/apis/core/validation/events.go), so no other namespace is accepted.
    type: str
    default: default
    choices: [default, kube-system]
  run_id:
    description: The run's id, in every event's note and the annotation (AWX's job id under AWX).
    type: str
    required: true
  instance:
    description:
      - The events' C(reportingInstance) (this controller's host name when unset, cut to 128 bytes).
      - At most 128 bytes (the API server's C(ReportingInstanceLengthLimit)); a longer one is refused when the
        module starts, before anything is written.
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
  request_timeout:
    description:
      - Seconds each API request may take (connect and read); a server that does not answer is not asked again (a 429,
        a 5xx with C(Retry-After) or a read's 5xx is, at most twice, by the collection's one API client).
      - A server that does not answer in time ends the trail with a warning; the rest is named in RV(errors),
        never waited for again. The most the module can wait is about this once (an unreachable server) or
        once per event and the annotation (a server that stops answering midway).
      - More than 0 and at most 600.
    type: float
    default: 10
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.node_api
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
  sample: ["event Drained: 403 Forbidden",
           "the API server could not be reached or did not answer (MaxRetryError: ... Connection refused); 3 event(s) and the annotation not written"]
"""

import socket

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import events_api
from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail


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


def post(module, events, note):
    """Post the events and the annotation; (posted, annotated, errors). Every request has the timeout
    O(request_timeout) (the collection's one API client, _k8s.client; the posting is _k8s.events_api's)."""
    p = module.params
    try:
        api = kube.from_params(p)
    except NodefixError as exc:
        return 0, False, ["cannot load the kubeconfig %s: %s" % (p["kubeconfig"], exc)]
    instance = p["instance"] or trail.cut_bytes(socket.gethostname(), trail.INSTANCE_MAX, "")
    return events_api.post(api, p["node"], p["namespace"], instance, events, note)


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            kube.argument_spec(required=True, node=True, request_timeout=10.0),
            namespace=dict(type="str", default="default", choices=list(trail.NODE_EVENT_NAMESPACES)),
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
    p = module.params
    try:
        trail.check_options(p["namespace"], p["instance"])
        if not 0 < p["request_timeout"] <= 600:
            raise trail.TrailInputError("request_timeout must be more than 0 and at most 600 seconds, got %s"
                                        % p["request_timeout"])
        events, note = work_out(p)
    except NodefixError as err:
        module.fail_json(msg="bad input: %s; no event written" % err)
    shown = [dict(e, time=trail.iso(e["time"])) for e in events]
    if module.check_mode:
        module.exit_json(changed=bool(events or note), events=shown, annotation=note, posted=0, errors=[])
    if not kube.available():
        # the trail never fails the remediation it describes: a controller without the client is a warning
        errors = ["%s; no event written" % missing_required_lib("kubernetes")]
        module.warn("the remediation's trail on node %s is not written: %s" % (p["node"], errors[0]))
        module.exit_json(changed=False, events=shown, annotation={}, posted=0, errors=errors)
    posted, annotated, errors = post(module, events, note)
    for error in errors:
        module.warn("the remediation's trail on node %s is incomplete: %s" % (module.params["node"], error))
    module.exit_json(changed=bool(posted) or annotated, events=shown, annotation=note if annotated else {},
                     posted=posted, errors=errors)


if __name__ == "__main__":
    main()
