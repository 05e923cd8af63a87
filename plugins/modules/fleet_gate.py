#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_gate
short_description: Decide before each batch of a rolling run whether to stop (the batch's and the fleet's failure limit)
version_added: 1.1.0
description:
  - Run before each batch of a rolling play. It says to stop (RV(stop)) when more than O(max_fail_percentage) of
    the last batch (O(previous_batch)) failed - Ansible's C(max_fail_percentage) rule, which as a play keyword aborts
    the whole run, later plays (the report) included - or more than O(max_fail_percentage) of the fleet so far.
  - Ansible's keyword is per play, and with AWX job slicing (C(job_slice_count)) or ansible-runner on several hosts
    a play is one slice, which only sees its own failures. With O(dir) and O(slice), the fleet is every slice;
    each slice records its hosts and the ones that have failed so far in C(<dir>/<slice>/rollout.json) (a shared
    directory every slice and the merge step see; nodefix.k8s uses C(<nodefix_report_dir>/slices)). The module
    writes this slice's record, reads every slice's record and returns whether the share of failed hosts in the
    fleet is above O(max_fail_percentage) (RV(stop)).
  - The fleet's size is O(fleet_size) when given, otherwise the hosts of the slices that have recorded so far (a
    slice that has not started yet does not count, so the share is over-estimated; the stop comes early, never late).
  - The record is written atomically and only when this slice's hosts or failed hosts changed. A record of another
    slice that cannot be read or is not a record fails the module naming the file (the fleet's state is unknown) -
    one that is not a regular file (a FIFO, a link, a device) included; nothing blocks on it.
  - Every record carries O(rollout), the id every slice of one rollout is given. A record of another rollout (a stale
    one in a reused directory, another rollout's) is ignored - never counted in the fleet's share - and named in
    RV(ignored).
  - Normally run once per batch on the controller (C(run_once), C(delegate_to=localhost)), before the batch's
    first change, by nodefix.k8s.remediate when C(nodefix_slice) is set.
author:
  - nodefix.k8s developers (@nodefix)
options:
  dir:
    description:
      - The shared directory holding one sub-directory per slice (a sliced run). Unset, the fleet is this play's hosts
        and nothing is written.
    type: path
  slice:
    description: This slice's name (a plain name - letters, digits, C(_), C(.), C(-); in AWX C(awx_job_id)).
    type: str
  previous_batch:
    description: The hosts of this play's last batch (empty before the first batch).
    type: list
    elements: str
    default: []
  hosts:
    description: Every host of this slice (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  failed:
    description:
      - The hosts of this slice that have failed so far (C(ansible_play_hosts_all) minus C(ansible_play_hosts)).
    type: list
    elements: str
    default: []
  max_fail_percentage:
    description: The share of failed hosts in the fleet, in percent, above which every slice stops (0-100).
    type: int
    required: true
  fleet_size:
    description: The number of hosts the whole sliced run covers (the inventory before slicing).
    type: int
  rollout:
    description:
      - The rollout's id, the same for every slice of one rollout and different for every rollout (nodefix.k8s.remediate
        passes C(nodefix_rollout), in AWX by default C(awx_workflow_job_id), the id of the sliced job's workflow).
        Required with O(dir).
    type: str
  record:
    description: Write this slice's record (V(false) only reads and judges).
    type: bool
    default: true
extends_documentation_fragment:
  - nodefix.k8s.attributes
attributes:
  check_mode:
    support: full
    details: Reads and judges; writes no record.
  diff_mode:
    support: none
  platform:
    details: Runs where the slices' shared directory is, normally the controller.
seealso:
  - module: nodefix.k8s.audit_report
"""

EXAMPLES = r"""
- name: Stop this slice when the fleet is over the limit
  nodefix.k8s.fleet_gate:
    dir: /shared/nodefix/slices
    slice: "{{ awx_job_id }}"
    rollout: "{{ awx_workflow_job_id }}"
    hosts: "{{ ansible_play_hosts_all }}"
    failed: "{{ ansible_play_hosts_all | difference(ansible_play_hosts) }}"
    max_fail_percentage: 10
    fleet_size: 2000
  run_once: true
  delegate_to: localhost
  register: gate

- name: End this batch (and so the slice) when the fleet is over the limit
  ansible.builtin.meta: end_play
  when: gate.stop
"""

RETURN = r"""
stop:
  description: Whether the failed share of the last batch or of the fleet is above O(max_fail_percentage).
  returned: always
  type: bool
  sample: true
msg:
  description: Why the rollout stops (null when it does not).
  returned: always
  type: str
  sample: "the fleet is over nodefix_max_fail_percentage (10%): 3 of 20 node(s) failed across the slices (a, b, c): ..."
size:
  description: The fleet size the share was computed over.
  returned: always
  type: int
  sample: 20
nodes_failed:
  description: The number of failed hosts in the fleet (not C(failed), which Ansible reads as the task's own state).
  returned: always
  type: int
  sample: 3
failed_hosts:
  description: The failed hosts of every slice.
  returned: always
  type: list
  elements: str
  sample: ["node-1", "node-7", "node-12"]
share:
  description: The failed share of the fleet in percent.
  returned: always
  type: float
  sample: 15.0
slices:
  description: Each slice's record (name, number of hosts, number failed, when it was last updated).
  returned: always
  type: list
  elements: dict
  sample: [{"slice": "101", "hosts": 10, "failed": 1, "updated": "2026-11-25T10:00:00Z"}]
ignored:
  description: The records of other rollouts that were found and not counted (slice and the rollout id they carry).
  returned: always
  type: list
  elements: dict
  sample: [{"slice": "87", "rollout": "4410"}]
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.fleet_gate import (
    RECORD,
    batch_verdict,
    record,
    verdict,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.records import read_records, write_record


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            dir=dict(type="path"),
            slice=dict(type="str"),
            previous_batch=dict(type="list", elements="str", default=[]),
            hosts=dict(type="list", elements="str", required=True),
            failed=dict(type="list", elements="str", default=[]),
            max_fail_percentage=dict(type="int", required=True),
            fleet_size=dict(type="int"),
            record=dict(type="bool", default=True),
            rollout=dict(type="str"),
        ),
        required_together=[["dir", "slice", "rollout"]],
        supports_check_mode=True,
    )
    p = module.params
    sliced = p["dir"] is not None
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        own = record(p["slice"] if sliced else "play", p["hosts"], p["failed"], now, p["rollout"])
        records = read_records(p["dir"], RECORD) if sliced else {}
        stored = records.get(own["slice"])
        changed = sliced and p["record"] and not (isinstance(stored, dict) and stored.get("hosts") == own["hosts"]
                                                  and stored.get("failed") == own["failed"]
                                                  and stored.get("rollout") == own.get("rollout"))
        if p["record"] or stored is None:
            records[own["slice"]] = own
        result = verdict(records, p["max_fail_percentage"], p["fleet_size"], p["rollout"])
        stop, msg = batch_verdict(p["previous_batch"], own["failed"], p["max_fail_percentage"])
        if stop:  # the nearer cause first: this slice's own last batch
            result.update(stop=True, msg=msg)
    except NodefixError as err:
        module.fail_json(msg="bad input: %s; the fleet's state is unknown, nothing was written" % err)
    if changed and not module.check_mode:
        try:
            write_record(p["dir"], own["slice"], RECORD, own)
        except OSError as exc:
            module.fail_json(msg="cannot write the slice record under %s: %s" % (p["dir"], exc))
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
