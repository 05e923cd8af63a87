#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: reboot_backoff
short_description: Hold a reboot of a node rebooted lately for a reason that is still open
version_added: 1.2.0
description:
  - The reboot backoff of the collection's reboot path. A reboot that did not cure its reason would otherwise get the
    node drained and rebooted again by every scheduled run; this module remembers each reboot on the Node and holds
    the next one for the same reason within O(backoff).
  - O(state=record), just before the node goes down - writes the annotation C(nodefix.k8s/last-reboot) on the Node,
    JSON with C(time) (UTC, to the second), C(run), C(reasons) (each C(id) and C(reason)) and C(bootID) (the Node's
    C(status.nodeInfo.bootID) when the record is written - the boot the kubelet reports). A record that cannot be
    written (or a Node that cannot be read for its boot) fails the module - the reboot is then not done, since the
    next run could not hold it.
  - O(state=check), before the reboot is gated - reads the annotation. Held (RV(held)) when the node was rebooted
    within O(backoff) for a reason whose id is in O(reasons) again - C(rebooted at T for R, still open - needs a person).
    Not held without an annotation, after the backoff, for other reasons only, or with O(backoff=0).
  - Not held either when the Node still reports the boot the record was written in (its C(bootID) unchanged) - that
    reboot never happened (the run was killed between the record and the reboot, or the reboot command never took the
    node down); RV(not_rebooted) says so. A record without C(bootID) (written before this field) counts as a reboot.
  - Fails closed - an annotation that cannot be read (not JSON, no time, no reasons) or a Node that cannot be read
    (refused, DNS, TLS, a timeout, a 4xx or 5xx answer) holds the reboot, RV(held_by) saying why; the module does not
    fail. Every API call has O(timeout).
  - Every reboot inside O(backoff) is kept in the record (C(earlier), each C(time), C(run), C(ids), C(bootID)), not only
    the last - a reason open again after any of them is held, and a node rebooted O(max_reboots) times inside the
    backoff is held whatever the reason (C(rebooted N times within the reboot backoff ... needs a person)).
  - O(state=record) also moves this run's rollout record (C(nodefix.k8s/rollout), M(nodefix.k8s.node_rollout)) to the
    reboot, its lease renewed, in the same PATCH.
  - A person who has looked at the node lets the next run reboot it by removing the annotation
    (C(kubectl annotate node NODE nodefix.k8s/last-reboot-)), or waits the backoff out.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the Python client kubernetes.core uses)
options:
  state:
    description: C(check) reads the annotation and decides; C(record) writes it.
    type: str
    choices: [check, record]
    default: check
  reasons:
    description:
      - The reboot's reasons, each C({id, check, reason}) as the reboot role's C(reboot_why) (C(id) the finding id).
    type: list
    elements: dict
    required: true
  backoff:
    description:
      - How long after a reboot another one for the same reason is held - a whole number of seconds (V(21600)) or
        units (V(6h), V(90m), V(1h30m), V(1d), V(2w), V(45s)). V(0) turns the backoff off (O(state=check) holds
        nothing, O(state=record) writes nothing).
      - Longer than a node's reboot and verification (so a run that lost its node mid-reboot does not reboot it
        again), shorter than the schedule's period times a few runs - the default holds a node for a quarter of a day.
    type: str
    default: 6h
  run_id:
    description: The run's id, kept in the record (O(state=record)).
    type: str
    default: ""
  max_reboots:
    description:
      - Reboots of a node inside O(backoff) after which the next one is held whatever its reason (O(state=check));
        V(0) sets no bound.
    type: int
    default: 2
  timeout:
    description: Seconds each API call may take (connect and read) before it is a failure.
    type: int
    default: 10
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.node_api
attributes:
  check_mode:
    support: full
    details: O(state=check) reads only; O(state=record) works out the record and writes nothing.
  diff_mode:
    support: none
  platform:
    details: Runs on the controller, against the cluster's API server.
seealso:
  - module: nodefix.k8s.reboot_gate
  - name: kured's reboot sentinel
    description: kured reboots while the sentinel exists, with no backoff; this one bounds the retries.
    link: https://kured.dev/docs/configuration/
"""

EXAMPLES = r"""
- name: Was this node rebooted lately for a reason still open?
  nodefix.k8s.reboot_backoff:
    kubeconfig: /etc/nodefix/kubeconfig
    node: "{{ inventory_hostname }}"
    reasons: "{{ reboot_why }}"
    backoff: 6h
  delegate_to: localhost
  register: backoff

- name: Remember the reboot on the Node before it goes down
  nodefix.k8s.reboot_backoff:
    state: record
    kubeconfig: /etc/nodefix/kubeconfig
    node: "{{ inventory_hostname }}"
    reasons: [{id: reboot.required, check: reboot, reason: /var/run/reboot-required exists}]
    run_id: "{{ awx_job_id | default('manual-1') }}"
  delegate_to: localhost
"""

RETURN = r"""
held:
  description: The reboot is held by the backoff (O(state=check)).
  returned: always
  type: bool
  sample: true
held_by:
  description: Why it is held (empty when it is not).
  returned: always
  type: list
  elements: str
  sample: ["rebooted at 2026-11-27T03:00:00Z for /var/run/reboot-required exists, still open: needs a person (...)"]
last:
  description: The last reboot's record as read (O(state=check); null without a readable one).
  returned: always
  type: dict
  contains:
    time:
      description: When the node went down for it (UTC).
      type: str
    run:
      description: The run that rebooted it.
      type: str
    reasons:
      description: What it was rebooted for, each C({id, reason}).
      type: list
      elements: dict
    earlier:
      description: The reboots before it the record keeps (inside the backoff when written), each C({time, run, ids, boot_id}).
      type: list
      elements: dict
    boot_id:
      description: The Node's C(bootID) when the record was written (null for a record without it).
      type: str
  sample: {"time": "2026-11-27T03:00:00Z", "run": "4711", "reasons": [{"id": "reboot.required", "reason": "..."}]}
not_rebooted:
  description:
    - Why the last record does not count - the Node still reports the boot it was written in, so the recorded reboot
      did not happen (O(state=check)); empty otherwise.
  returned: always
  type: str
  sample: "the reboot recorded at 2026-11-27T03:00:00Z (run 4711) did not happen - node-a still reports the boot ..."
open_again:
  description: The ids of the last reboot's reasons that are open again (O(state=check)).
  returned: always
  type: list
  elements: str
  sample: ["reboot.required"]
backoff_seconds:
  description: O(backoff) in seconds.
  returned: always
  type: int
  sample: 21600
annotation:
  description: The annotation written (in check mode, that would be written) (O(state=record)); empty otherwise.
  returned: always
  type: dict
  sample: {"nodefix.k8s/last-reboot": "{\"reasons\":[{\"id\":\"reboot.required\",\"reason\":\"...\"}],\"run\":\"4711\",\"time\":\"2026-11-27T03:00:00Z\"}"}
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff as reboot_backoff
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record as rollout_record


def argument_spec():
    return dict(
        kube.argument_spec(required=True, node=True),
        state=dict(type="str", choices=["check", "record"], default="check"),
        reasons=dict(type="list", elements="dict", required=True),
        backoff=dict(type="str", default=reboot_backoff.DEFAULT_BACKOFF),
        run_id=dict(type="str", default=""),
        timeout=dict(type="int", default=10),
        max_reboots=dict(type="int", default=reboot_backoff.DEFAULT_MAX_REBOOTS),
    )


def check(p, now):
    """The decision; a Node that cannot be read (or a client that cannot start) holds the reboot."""
    seconds = reboot_backoff.parse_duration(p["backoff"], "reboot backoff (nodefix_reboot_backoff)")
    annotations, boot_id, error = None, None, None
    if seconds > 0:
        try:
            annotations, boot_id = node_api.NodeAnnotations(p["kubeconfig"], p["context"],
                                                            p["timeout"]).read(p["node"])
        except NodefixError as exc:
            error = exc.msg
    result = reboot_backoff.decide(annotations, p["reasons"], now, seconds, node=p["node"], read_error=error,
                                   boot_id=boot_id, max_reboots=p["max_reboots"])
    return dict(result, backoff_seconds=seconds, annotation={}, changed=False)


def record(p, now, check_mode):
    """The record written (or, in check mode, that would be); NodefixError when it cannot be."""
    seconds = reboot_backoff.parse_duration(p["backoff"], "reboot backoff (nodefix_reboot_backoff)")
    result = {"held": False, "held_by": [], "last": None, "open_again": [], "not_rebooted": "",
              "backoff_seconds": seconds, "annotation": {}, "changed": False}
    if seconds == 0:
        return result
    nodes = node_api.NodeAnnotations(p["kubeconfig"], p["context"], p["timeout"])
    # the boot the node is in now, in the record: a reboot that never happens does not count (decide)
    annotations, boot_id = nodes.read(p["node"])
    # the reboots before it still inside the backoff are kept (a record that cannot be read keeps none: the
    # check before held the reboot on it, so only a person's edit can bring it here)
    try:
        last = reboot_backoff.read_record(annotations[reboot_backoff.ANNOTATION]) \
            if reboot_backoff.ANNOTATION in annotations else None
    except reboot_backoff.MalformedRecord:
        last = None
    note = {reboot_backoff.ANNOTATION: reboot_backoff.record(now, p["run_id"], p["reasons"], boot_id, last, seconds)}
    # this run's rollout record (nodefix.k8s/rollout) moves to the reboot, its lease renewed, in the same PATCH; the
    # rollout machine's record (version 2) stays in its phase `fix` (the reboot is one of the fixes), lease renewed
    try:
        rollout = rollout_record.read(annotations)
    except rollout_record.MalformedRecord:
        rollout = None
    if rollout and p["run_id"] and rollout["run"] == p["run_id"]:
        phase = "reboot" if rollout.get("version") == rollout_record.VERSION else rollout["phase"]
        note[rollout_record.ANNOTATION] = rollout_record.text(rollout_record.moved(rollout, phase, now))
    if not check_mode:
        nodes.patch(p["node"], note)
    return dict(result, annotation=note, changed=True)


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        if p["timeout"] < 1:
            raise NodefixError("timeout must be at least 1 second (got %d)" % p["timeout"])
        if p["max_reboots"] < 0:
            raise NodefixError("max_reboots must not be negative (got %d)" % p["max_reboots"])
        if p["state"] == "check":
            module.exit_json(**check(p, now))
        module.exit_json(**record(p, now, module.check_mode))
    except NodefixError as exc:
        what = ("the reboot is not done: it could not be recorded for the reboot backoff"
                if p["state"] == "record" else "nothing was drained or rebooted")
        module.fail_json(msg="%s (%s)" % (exc.msg, what))


if __name__ == "__main__":
    main()
