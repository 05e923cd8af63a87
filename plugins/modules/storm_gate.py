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
    one. Counts the nodes that are unavailable already and the nodes the rollout would disrupt, each once, and says to
    stop (RV(stop)) when they are more than O(percent) of the fleet and at least O(min_nodes), unless O(override).
  - Disrupted - the nodes whose remediation plan disrupts their workloads (the C(disruptive) of
    P(nodefix.k8s.remediation_plan#filter) - a drain, a reboot, or containerd or the kubelet restarted without a
    drain), and the targets that could not be audited (their plan is unknown, C(unaudited)).
  - Unavailable - with O(kubeconfig), every Node the API server lists (or those O(node_selector) picks, the targets'
    node pool) whose C(Ready) condition is C(False), C(Unknown) or missing, or that is cordoned (C(spec.unschedulable),
    whoever set it); a target the controller cannot reach (C(unreachable)); a target the listing does not have.
    Without O(kubeconfig) only the targets are counted and RV(counted) says so.
  - The fleet is every Node listed and every target (at least O(fleet_size)). The rule is Cluster API
    MachineHealthCheck's C(maxUnhealthy) (remediation only while the unhealthy machines its selector picks are at most
    that share of them) and medik8s Node Healthcheck's C(minHealthy) seen from the other side - the nodes already down
    count, not only the ones about to be worked on. A rollout that disrupts no node never stops here.
  - The Nodes are listed with a deadline of O(api_timeout) seconds a request (a server that does not answer is not
    asked again; a 429 or a 5xx is, at most twice, after C(Retry-After) or 0.5 s then 1 s); a listing that fails
    (no C(kubernetes) library, refused, DNS, TLS, timeout, 4xx/5xx) is "could not count" - a rollout that would
    disrupt a node then stops (fail closed), and RV(msg) and RV(counted) say why.
  - A problem on that share of a fleet is rarely independent node faults (a bad image, a config rollout, a kernel
    regression), and draining or rebooting it node by node takes capacity down with it. EKS stops node auto-repair
    above 20 % unhealthy nodes (nodefix.k8s's default).
  - The finding ids on more than O(percent) of the fleet are returned as RV(fleet_wide), for the report.
  - With O(dir), O(slice) and O(rollout) (a sliced run, as M(nodefix.k8s.fleet_gate)), the slice writes its nodes and
    its view of the Nodes to C(<dir>/<slice>/storm.json) and judges the fleet from every slice's record of the same
    rollout, and its own nodes alone as well. The hosts of O(fleet_size) that no record has yet (slices that have not
    recorded) are counted as possibly disrupted - the stop comes early, never late - and the slice waits up to
    O(wait) seconds for them before it judges so. With O(nodes) empty and O(record=false) it only re-reads the records
    (no wait, no Node listing) - remediate does so before each batch of a sliced run, so a storm another slice sees
    later stops this one too.
  - O(percent) outside 0-100 or not a whole number, a record that cannot be read, or is not a regular file, or an
    entry of the wrong shape fails the module naming it, before anything is written (the fleet's state is unknown);
    records of other rollouts are ignored and named in RV(ignored).
author:
  - nodefix.k8s developers (@nodefix)
options:
  nodes:
    description:
      - This run's (or slice's) nodes, each with C(disruptive) (a list of V(drain), V(reboot), V(restart); empty when
        its plan disrupts nothing) and C(findings) (its finding ids), and optionally C(node) (its Node name, when not
        the host name), C(unreachable) (why the controller could not reach it - counted unavailable) or C(unaudited)
        (why it could not be audited - its plan is unknown, counted as possibly disrupted).
    type: dict
    default: {}
  percent:
    description:
      - The share of the fleet, in percent, that may be unavailable or disrupted before the rollout stops.
      - A whole number from 0 to 100 (an integer, its text, or a float such as V(20.0)); V(101), V(1e3), V(100.5),
        V(-1) or V(true) fail the module naming C(nodefix_storm_percent). V(100) never stops (remediate then skips the
        breaker and its audit).
    type: raw
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
  kubeconfig:
    description:
      - The kubeconfig of the cluster's API server. Set, every Node (those O(node_selector) picks) is read and the
        unavailable ones are counted; unset, only the targets are (RV(counted) says so).
    type: path
  context:
    description: The kubeconfig context (default, the current one).
    type: str
  node_selector:
    description:
      - A label selector (the API server's syntax, e.g. V(eks.amazonaws.com/nodegroup=workers)) that picks the targets'
        node pool; the share is then of that pool, as a MachineHealthCheck's or a NodeHealthCheck's C(selector) picks
        the nodes their limit is a share of. Unset, the whole cluster. A target the listing does not have counts as
        unavailable - the pool must hold the targets.
    type: str
  api_timeout:
    description: Seconds each request of the Node listing may take (connect and read); no answer in time is not retried.
    type: int
    default: 30
  wait:
    description:
      - In a sliced run, seconds to wait for the other slices' records while hosts of O(fleet_size) are in none and
        they alone would stop the rollout (re-read every 2 seconds). V(0) judges at once. Not in check mode (no
        record is written there).
    type: int
    default: 0
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
  - name: Cluster API MachineHealthCheck maxUnhealthy
    description: Remediation short-circuits when more machines of the selected pool are unhealthy than maxUnhealthy.
    link: https://cluster-api.sigs.k8s.io/tasks/automated-machine-management/healthchecking
  - name: medik8s Node Healthcheck minHealthy
    description: Remediation is skipped while fewer nodes of the selector are healthy than minHealthy.
    link: https://github.com/medik8s/node-healthcheck-operator/blob/main/docs/configuration.md
"""

EXAMPLES = r"""
- name: What each node's plan would disrupt
  ansible.builtin.set_fact:
    storm_entry:
      disruptive: "{{ (audit | nodefix.k8s.remediation_plan(drainable=true)).disruptive }}"
      findings: "{{ audit.summary.ids }}"

- name: Stop before the first node when over a fifth of the worker pool is down or would be drained or rebooted
  nodefix.k8s.storm_gate:
    nodes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'storm_entry'))) }}"
    percent: 20
    kubeconfig: /etc/nodefix/kubeconfig
    node_selector: node-role.kubernetes.io/worker
    api_timeout: 30
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
  sample: "storm breaker: 4 of 5 node(s) (80%) are unavailable or would be disrupted: 3 unavailable (node-c: NotReady, ...)"
counted:
  description: What was counted - the Nodes the API server listed, or only the targets (no O(kubeconfig)), or that the
    Nodes could not be counted and why.
  returned: always
  type: str
  sample: "counted the 6 Node(s) the API server lists and every target"
affected:
  description: The nodes unavailable, to be disrupted or of unknown plan (each once), plus the unseen hosts of a sliced run.
  returned: always
  type: int
  sample: 4
unavailable:
  description: The unavailable nodes (by Node name) and why (C(NotReady), C(Ready Unknown), C(no Ready condition),
    C(cordoned), C(unreachable from the controller), C(not among the API server's Nodes)).
  returned: always
  type: dict
  sample: {"node-c": ["NotReady", "unreachable from the controller"], "node-f": ["cordoned"]}
unknown:
  description: The targets that could not be audited (their plan unknown, counted as possibly disrupted).
  returned: always
  type: list
  elements: str
  sample: []
unseen:
  description: In a sliced run, the hosts of O(fleet_size) no slice has recorded yet (counted as possibly disrupted).
  returned: always
  type: int
  sample: 0
percent:
  description: The threshold applied (a whole number).
  returned: always
  type: int
  sample: 20
min_nodes:
  description: The fewest disruptive nodes that make a storm.
  returned: always
  type: int
  sample: 2
size:
  description: The fleet size the share was computed over (every Node listed and every target, at least O(fleet_size)).
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
  description: The share of the fleet in percent that is unavailable or would be disrupted (RV(affected) of RV(size)).
  returned: always
  type: float
  sample: 30.0
slice_share:
  description: The share of this slice's own nodes that would be disrupted or are unreachable or unaudited (null when not
    sliced).
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
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import cluster_nodes
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.records import read_records, write_record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.storm import (
    RECORD, check_percent, record, verdict, wait_for_slices)


def cluster_view(p):
    """This run's view of the Nodes (None without a kubeconfig); a listing that fails is a view with its error."""
    if not p["kubeconfig"]:
        return None
    try:
        return cluster_nodes.view(cluster_nodes.list_nodes(p["kubeconfig"], p["node_selector"], p["api_timeout"],
                                                           p["context"]), p["node_selector"])
    except NodefixError as err:
        return cluster_nodes.failed_view(p["node_selector"], err)


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            kube.argument_spec(),
            nodes=dict(type="dict", default={}),
            percent=dict(type="raw", default=20),
            min_nodes=dict(type="int", default=2),
            override=dict(type="bool", default=False),
            fleet_size=dict(type="int"),
            dir=dict(type="path"),
            slice=dict(type="str"),
            rollout=dict(type="str"),
            record=dict(type="bool", default=True),
            node_selector=dict(type="str"),
            api_timeout=dict(type="int", default=30),
            wait=dict(type="int", default=0),
        ),
        required_together=[["dir", "slice", "rollout"]],
        supports_check_mode=True,
    )
    p = module.params
    sliced = p["dir"] is not None
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    changed = False
    try:
        percent = check_percent(p["percent"])
        if p["api_timeout"] < 1 or p["wait"] < 0:
            raise NodefixError("api_timeout must be at least 1 second and wait at least 0, got %d and %d"
                               % (p["api_timeout"], p["wait"]))
        cluster = cluster_view(p) if (p["record"] or not sliced) else None
        own = record(p["slice"] if sliced else "run", p["nodes"], now, p["rollout"], cluster)
        records = read_records(p["dir"], RECORD) if sliced else {}
        stored = records.get(own["slice"])
        if p["record"] or stored is None:
            changed = sliced and p["record"] and not (isinstance(stored, dict) and stored.get("nodes") == own["nodes"]
                                                      and stored.get("rollout") == own.get("rollout")
                                                      and stored.get("cluster") == own.get("cluster"))

        def judge():
            now_records = read_records(p["dir"], RECORD) if sliced else {}
            if p["record"] or own["slice"] not in now_records:
                now_records[own["slice"]] = own
            return verdict(now_records, percent, p["override"], p["fleet_size"], p["rollout"],
                           own_slice=own["slice"] if sliced else None, min_nodes=p["min_nodes"])

        result = judge()   # every record well-formed before this slice's is written
        if changed and not module.check_mode:
            try:
                write_record(p["dir"], own["slice"], RECORD, own)
            except OSError as exc:
                module.fail_json(msg="cannot write the slice's storm record under %s: %s" % (p["dir"], exc))
        if sliced and p["record"] and not module.check_mode and p["wait"]:
            result = wait_for_slices(judge, p["wait"], time.monotonic, time.sleep)
    except NodefixError as err:
        module.fail_json(msg="bad input: %s; the storm cannot be judged, nothing was written" % err)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
