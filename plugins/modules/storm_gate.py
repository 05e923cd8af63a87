#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: storm_gate
short_description: The storm breaker - stop a rollout before its first node when too much of the fleet needs a disruptive action
version_added: 1.1.0
description:
  - Run once on the controller after every target node was audited (read-only) and before the rolling play touches
    one. Counts the nodes whose remediation plan disrupts their workloads (the C(disruptive) of
    P(nodefix.k8s.remediation_plan#filter) - a drain, a reboot, or containerd or the kubelet restarted without a
    drain) and says to stop (RV(stop)) when they are more than O(percent) of the fleet and at least O(min_nodes),
    unless O(override).
  - A problem on that share of a fleet is rarely independent node faults (a bad image, a config rollout, a kernel
    regression), and draining or rebooting it node by node takes capacity down with it. EKS stops node auto-repair
    above 20 % unhealthy nodes (nodefix.k8s's default); medik8s' Node Healthcheck stops below C(minHealthy).
  - The finding ids on more than O(percent) of the fleet are returned as RV(fleet_wide), for the report.
  - With O(dir), O(slice) and O(rollout) (a sliced run, as M(nodefix.k8s.fleet_gate)), the slice writes its nodes to
    C(<dir>/<slice>/storm.json) and judges the fleet from every slice's record of the same rollout, and its own
    nodes alone as well (a slice cannot see the slices that have not recorded yet, so the stop comes early, never
    late). With O(nodes) empty and O(record=false) it only re-reads the records - remediate does so before each
    batch of a sliced run, so a storm another slice sees later stops this one too.
  - A record that cannot be read, or is not a regular file, or an entry of the wrong shape fails the module naming it
    (the fleet's state is unknown); records of other rollouts are ignored and named in RV(ignored).
author:
  - nodefix.k8s developers (@nodefix)
options:
  nodes:
    description:
      - This run's (or slice's) nodes, each with C(disruptive) (a list of V(drain), V(reboot), V(restart); empty when
        its plan disrupts nothing) and C(findings) (its finding ids). A node that could not be audited is left out.
    type: dict
    default: {}
  percent:
    description: The share of the fleet, in percent (0-100), that may need a disruptive action before the rollout stops.
    type: int
    default: 20
  min_nodes:
    description:
      - The fewest nodes needing a disruptive action that make a storm (the share alone would stop a run limited to
        one broken node, 100 %).
    type: int
    default: 2
  override:
    description: Proceed over the threshold (RV(stop) stays false; RV(msg) says the breaker was overridden).
    type: bool
    default: false
  fleet_size:
    description: The number of hosts the whole rollout covers (the inventory before slicing).
    type: int
  dir:
    description: The shared directory holding one sub-directory per slice (a sliced run). Unset, nothing is written.
    type: path
  slice:
    description: This slice's name (a plain name - letters, digits, C(_), C(.), C(-)).
    type: str
  rollout:
    description: The id every slice of this rollout shares (as M(nodefix.k8s.fleet_gate)'s). Required with O(dir).
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
  - module: nodefix.k8s.fleet_gate
  - name: EKS node auto repair
    description: Auto repair stops when more than 20 % of a node group's nodes are unhealthy.
    link: https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
"""

EXAMPLES = r"""
- name: What each node's plan would disrupt
  ansible.builtin.set_fact:
    storm_entry:
      disruptive: "{{ (audit | nodefix.k8s.remediation_plan(drainable=true)).disruptive }}"
      findings: "{{ audit.summary.ids }}"

- name: Stop before the first node when over a fifth of the fleet needs a drain or a reboot
  nodefix.k8s.storm_gate:
    nodes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'storm_entry'))) }}"
    percent: 20
  run_once: true
  delegate_to: localhost
  register: storm

- name: End the play on a storm
  ansible.builtin.meta: end_play
  when: storm.stop
"""

RETURN = r"""
stop:
  description: Whether the rollout stops (over the threshold and not overridden).
  returned: always
  type: bool
  sample: true
over:
  description: Whether the share is over O(percent) (also when overridden).
  returned: always
  type: bool
  sample: true
overridden:
  description: Over the threshold and O(override) set.
  returned: always
  type: bool
  sample: false
msg:
  description: What the breaker saw and what it does (null when the share is within the threshold).
  returned: always
  type: str
  sample: "storm breaker: 3 of 10 node(s) (30%) need a drain, reboot or restart, over nodefix_storm_percent (20%); ..."
percent:
  description: The threshold applied.
  returned: always
  type: int
  sample: 20
min_nodes:
  description: The fewest disruptive nodes that make a storm.
  returned: always
  type: int
  sample: 2
size:
  description: The fleet size the share was computed over.
  returned: always
  type: int
  sample: 10
disruptive:
  description: The nodes whose plan disrupts them.
  returned: always
  type: list
  elements: str
  sample: ["node-1", "node-4", "node-7"]
share:
  description: Their share of the fleet in percent.
  returned: always
  type: float
  sample: 30.0
slice_share:
  description: Their share of this slice's own nodes (null when not sliced).
  returned: always
  type: float
  sample: 50.0
actions:
  description: The nodes per action (C(drain), C(reboot), C(restart)).
  returned: always
  type: dict
  sample: {"drain": ["node-1", "node-4", "node-7"], "reboot": ["node-4"], "restart": []}
fleet_wide:
  description: The finding ids on more than O(percent) of the fleet, most widespread first.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: The finding id.
      type: str
    nodes:
      description: How many nodes have it.
      type: int
    share:
      description: Their share of the fleet in percent.
      type: float
    hosts:
      description: The nodes.
      type: list
      elements: str
  sample: [{"id": "kernel.below_minimum", "nodes": 3, "share": 30.0, "hosts": ["node-1", "node-4", "node-7"]}]
slices:
  description: Each slice's record counted (name, number of nodes, when it was written).
  returned: always
  type: list
  elements: dict
  sample: [{"slice": "101", "nodes": 10, "updated": "2026-11-26T10:00:00Z"}]
ignored:
  description: The records of other rollouts found and not counted (slice and the rollout id they carry).
  returned: always
  type: list
  elements: dict
  sample: [{"slice": "87", "rollout": "4410"}]
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._report.records import read_records, write_record
from ansible_collections.nodefix.k8s.plugins.module_utils._report.storm import RECORD, record, verdict


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="dict", default={}),
            percent=dict(type="int", default=20),
            min_nodes=dict(type="int", default=2),
            override=dict(type="bool", default=False),
            fleet_size=dict(type="int"),
            dir=dict(type="path"),
            slice=dict(type="str"),
            rollout=dict(type="str"),
            record=dict(type="bool", default=True),
        ),
        required_together=[["dir", "slice", "rollout"]],
        supports_check_mode=True,
    )
    p = module.params
    sliced = p["dir"] is not None
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    changed = False
    try:
        own = record(p["slice"] if sliced else "run", p["nodes"], now, p["rollout"])
        records = read_records(p["dir"], RECORD) if sliced else {}
        stored = records.get(own["slice"])
        if p["record"] or stored is None:
            changed = sliced and p["record"] and not (isinstance(stored, dict) and stored.get("nodes") == own["nodes"]
                                                      and stored.get("rollout") == own.get("rollout"))
            records[own["slice"]] = own
        result = verdict(records, p["percent"], p["override"], p["fleet_size"], p["rollout"],
                         own_slice=own["slice"] if sliced else None, min_nodes=p["min_nodes"])
    except NodefixError as err:
        module.fail_json(msg="bad input: %s; the storm cannot be judged, nothing was written" % err)
    if changed and not module.check_mode:
        try:
            write_record(p["dir"], own["slice"], RECORD, own)
        except OSError as exc:
            module.fail_json(msg="cannot write the slice's storm record under %s: %s" % (p["dir"], exc))
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
