#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollout
short_description: Roll out one node - claim, gates, evidence, cordon and drain before its fixes; verify and give back after
version_added: 1.3.0
description:
  - One node's rollout as a state machine, run on the controller (an action plugin, as ansible-core's C(reboot) runs
    its sequence in one task). Every Kubernetes API call is made in-process through the collection's one API client;
    the node-side work - M(nodefix.k8s.node_evidence) before the disruption and M(nodefix.k8s.node_audit) after the
    fixes - runs on the node through the task's connection and C(become), one module run each.
  - O(phase=begin), before the fix roles - C(plan) (a refusal the play decided, O(refused)),
    C(claim) (the C(nodefix.k8s/rollout) record on the Node; a node a live run holds is refused, a node an earlier run
    held with C(nodefix.k8s/held) stays untouched), C(root), C(kernel_boot) (a kernel upgrade a dead run left between
    its one-time boot and the confirmation, C(kernelPending), is disarmed and reported), C(control_plane) (etcd membership, health and quorum;
    O(control_plane)), C(backoff), C(reboot_gate) (window, blocking pods, alerts, the reboot lock's slot, waiting
    O(lock_wait)), C(reclaim_slots), C(start_event), C(evidence), C(storm) (the storm breaker counted again right
    before the cordon - the Nodes listed now, one request, and the nodes other runs reserved; O(storm_percent) - then this
    node's reserve on the Lease C(nodefix-storm) in O(lock_namespace), conditional on its resourceVersion), C(cordon), C(drain) (evictions, a
    PodDisruptionBudget's 429 asked again after its C(retryAfterSeconds) or C(Retry-After); any other error answer
    fails the drain as that answer, never as a timeout), C(require_drain), C(fix). RV(outcome) is C(null) when the play must run
    the fix roles and then O(phase=end); any other value means the rollout is over - given back, released, its end
    Event posted.
  - O(phase=end), after the fix roles - C(verify) (the audit again), C(kernel_boot) (a one-time boot this run armed
    and the kernel role did not confirm, disarmed), C(hold_decision), C(give_back) (uncordon, or hold
    the node cordoned with C(nodefix.k8s/held) when not verified; never a node cordoned before the run),
    C(release_slots), C(end_event) (the Events and the C(nodefix.k8s/last-remediation) annotation), C(release).
  - O(phase=recheck), right before the reboot - the window, the blocking pods, the alerts and, for a node holding the
    control plane's slot, etcd's health and quorum judged again; held, the reboot is dropped from RV(fix_roles). The
    run's claim is renewed to cover the reboot (O(lease)); a run whose claim another run took over fails (RV(outcome)
    C(failed)), its reboot dropped.
  - Each step is printed as one line when it ends and is in RV(steps) and RV(lines) (name, outcome, seconds, detail).
    The outcome is one of C(ok), C(nothing_to_fix), C(held), C(refused), C(drain_failed), C(not_verified),
    C(failed), C(unreachable), C(stopped); the task's C(failed) follows from it, never from a message's text.
  - Bad options (unknown, of the wrong type, out of range, a phase's required option missing, a window or Prometheus
    option that cannot work) fail the task naming the option before anything is read or written.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the Python client) on the controller
options:
  phase:
    description: Which half of the rollout to run.
    type: str
    required: true
    choices: [begin, end, recheck]
  kubeconfig:
    description:
      - The cluster's kubeconfig (C(nodefix_kubeconfig)); its credentials are never in the result.
      - Unset, there is no API server - as C(nodefix.k8s.remediate) without C(nodefix_kubeconfig), the node is not
        claimed, gated, cordoned, drained, given back or told by an Event, and its reboot is dropped (only a drained
        node is rebooted); the steps are C(plan), C(root), C(evidence), C(require_drain), C(fix), then
        C(verify), C(kernel_boot) and C(hold_decision).
    type: path
  context:
    description: The kubeconfig context (its current one when unset).
    type: str
  api_timeout:
    description: Whole seconds each API request may take (C(nodefix_api_timeout)); 1 to 600.
    type: int
    default: 30
  node:
    description: The Node object's name (C(nodefix_node_name)); the task's inventory host name when unset.
    type: str
  run_id:
    description: The run's id, in the rollout record, the Events and the hold.
    type: str
    required: true
  audit_before:
    description: M(nodefix.k8s.node_audit)'s result before the fixes. Required for O(phase=begin) and O(phase=end).
    type: dict
  plan:
    description:
      - The node's plan (P(nodefix.k8s.remediation_plan#filter)'s result - C(fix_roles), C(reboot_reasons), C(disruptive),
        C(evidence), C(skip); a kernel upgrade's reason added to C(reboot_reasons)). Required for O(phase=begin).
    type: dict
  refused:
    description: Why the play refuses the node before its rollout (a kernel upgrade that cannot be planned); set, the
      rollout stops at step C(plan) as C(refused) and nothing is touched.
    type: str
    default: ""
  started:
    description: When the node's remediation started (Unix time; O(phase=begin), now when unset).
    type: float
  evidence_path:
    description: Where O(phase=begin) writes the evidence bundle (a 0600 file, written atomically, in a 0700
      directory); unset, no evidence is kept.
    type: path
  observed_dir:
    description:
      - A directory on the controller where O(phase=begin) remembers, one small file a node, another run's record it
        saw and when, on this controller's monotonic clock; such a record is judged dead once this controller has seen
        it unchanged for its C(leaseSeconds) (client-go's leader election, C(observedTime)) - the holder's wall clock is
        never compared with this one's. A record seen for the first time is live for a full C(leaseSeconds) from that
        sight - unless renewed more than twice its C(leaseSeconds) before this controller's clock (a crashed run's,
        taken over) - and one renewed more than 30 seconds in this controller's future is not well-formed (the
        node is refused).
      - Unset, every sight is a first one. remediate sets it under the report directory (C(observed/)).
    type: path
  audit_args:
    description: M(nodefix.k8s.node_audit)'s arguments for the audit after the fixes (C(checks), C(options), C(textfile)).
    type: dict
    default: {}
  state:
    description: RV(state) as O(phase=begin) answered it. Required for O(phase=end) and O(phase=recheck).
    type: dict
  remediation:
    description:
      - What the fix roles did (O(phase=end), required) - C(status) (C(ok), C(failed), C(unreachable)), C(roles), C(msg),
        C(kernel_kept) (whether a new kernel was kept; C(null) without a kernel upgrade), C(kernel_confirmed) (the
        kernel role's confirmation of the upgrade's boot ran - otherwise a one-time boot this run armed is disarmed
        here, C(kernel_boot)), C(actions), C(not_durable), C(reboot), C(step).
    type: dict
  kernel_release:
    description:
      - For O(phase=recheck) right before a kernel upgrade's install, which arms the new kernel's one-time boot - that
        kernel's release. When the reboot goes, the record on the Node gets C(kernelPending) in the same write as the
        renewal, before anything is armed; O(phase=end) removes it once the boot was confirmed or disarmed, and a run
        that finds one left by a dead run disarms it (C(nodefix.k8s.kernel_boot) C(state=disarm), GRUB's default back
        on the running kernel) and ends C(held), never clean.
    type: str
  lease:
    description:
      - Seconds the rollout record is live without this run (C(nodefix_rollout_lease)), over the worst case of the step
        it guards - every write of the record renews it for this margin plus that step's longest wait (the reboot
        lock's O(lock_wait), the drain's O(drain_timeout), the reboot's, O(etcd_wait)).
      - O(phase=recheck) renews it for this plus the reboot's worst case, 2 x O(reboot_timeout) + 4 x
        O(reboot_settle_timeout); a run whose record another run took over meanwhile fails there and writes nothing
        more.
    type: int
    default: 1800
  fix_timeout:
    description:
      - Seconds the fix roles may take at worst before a reboot (C(nodefix_fix_timeout)). The record's lease as the
        fix roles start (phase C(fix)) is this plus O(lease), so a long in-place fix (the mount-unit cleanup, a package
        install) is never taken for a dead run's by a second controller. Each reboot renews the claim again right
        before it (O(phase=recheck)), and O(phase=end)'s first write reads it (a claim taken over fails closed).
    type: int
    default: 3600
  reboot_timeout:
    description: Seconds the reboot role waits for the node to come back (C(reboot_timeout)); with
      O(reboot_settle_timeout), what the claim renewed right before the reboot must cover.
    type: int
    default: 900
  reboot_settle_timeout:
    description: Seconds of each of the reboot role's waits after the boot (C(reboot_settle_timeout)).
    type: int
    default: 300
  drain:
    description: Cordon and drain the node before restarting fixes (C(nodefix_drain)).
    type: bool
    default: true
  require_drain:
    description: Refuse restarting fixes on a node that was not drained (C(nodefix_require_drain)).
    type: bool
    default: false
  drain_timeout:
    description: Seconds the drain may take (C(nodefix_drain_timeout)).
    type: int
    default: 600
  control_plane:
    description: Remediate control-plane nodes and etcd members, one at a time while etcd is healthy
      (C(nodefix_control_plane)); otherwise they are held.
    type: bool
    default: false
  quorum_override:
    description: Accept losing etcd's quorum (a one- or two-member etcd; C(nodefix_control_plane_quorum_override)).
    type: bool
    default: false
  control_plane_hint:
    description: The inventory says this node is a control-plane node (it is in one of C(reboot_control_plane_groups)),
      whatever its labels; the control-plane guard then holds it as one.
    type: bool
    default: false
  etcd_health_command:
    description: The command (argv) that must exit 0 for an etcd outside the cluster to count healthy
      (C(nodefix_etcd_health_command)); run on the controller with a C locale.
    type: list
    elements: str
    default: []
  etcd_health_environment:
    description: Environment variables for O(etcd_health_command) (C(nodefix_etcd_health_environment)); secret.
    type: dict
    default: {}
  etcd_wait:
    description: Seconds the control plane's slot waits, after the reboot lock's slot is given back, for the node's
      own etcd member to be Ready again (C(reboot_etcd_wait)), looking every O(lock_poll) seconds; not Ready by
      then, the slot is kept and the record says why.
    type: int
    default: 300
  backoff:
    description: How long a reboot's reasons hold the next reboot (C(nodefix_reboot_backoff)) - a duration as
      M(nodefix.k8s.reboot_backoff) takes it (one parser) - a whole number of seconds or units (V(6h), V(90m),
      V(1h30m), V(1d), V(2w), V(45s)); V(0) turns the backoff off. Anything else fails the task naming it, before
      anything is read or written.
    type: str
    default: 6h
  max_reboots:
    description: Reboots of one node inside the backoff before it needs a person (C(nodefix_reboot_backoff_max_reboots)).
    type: int
    default: 2
  blocking_selectors:
    description: Label selectors of pods that hold a reboot (C(reboot_blocking_pod_selectors)).
    type: list
    elements: str
    default: []
  window_days:
    description: The reboot window's days (kured's spellings; empty - every day).
    type: list
    elements: str
    default: []
  window_start:
    description: The reboot window's start (C(HH:MM[:SS])).
    type: str
    default: "00:00"
  window_end:
    description: The reboot window's end (inclusive).
    type: str
    default: "23:59:59"
  window_wrap:
    description: Which day a window that wraps past midnight is open on (as M(nodefix.k8s.reboot_gate)).
    type: str
    default: kured
    choices: [kured, opening_day]
  time_zone:
    description: The reboot window's time zone.
    type: str
    default: UTC
  prometheus_url:
    description: Prometheus, whose firing alerts hold a reboot; unset, no alert is asked for.
    type: str
  prometheus_timeout:
    description: Seconds Prometheus may take to answer.
    type: int
    default: 10
  alert_filter_regexp:
    description: Alerts whose name matches are ignored.
    type: str
  alert_firing_only:
    description: Only firing alerts hold a reboot (not pending ones).
    type: bool
    default: true
  lock_namespace:
    description: The namespace of the lock Leases.
    type: str
    default: kube-system
  lock_name:
    description: The reboot lock's name (C(reboot_lock_name)).
    type: str
    default: nodefix-reboot
  lock_slots:
    description: Nodes rebooted at once fleet-wide (C(reboot_max_concurrent)); at least 1.
    type: int
    default: 1
  lock_ttl:
    description: Seconds after which a slot another holder left is taken over.
    type: int
    default: 7200
  lock_wait:
    description: Seconds to wait for a free slot of the reboot lock (C(reboot_lock_wait)); every O(lock_poll) the
      window, the blocking pods and the alerts are judged again and a wait ends, held, as soon as one says no.
    type: int
    default: 0
  lock_poll:
    description: Seconds between two looks at the reboot lock while waiting (C(reboot_lock_poll)); at least 1.
    type: int
    default: 5
  control_plane_lock_name:
    description: The control plane's lock (one slot fleet-wide).
    type: str
    default: nodefix-control-plane
  evidence:
    description: Keep the evidence a disruption would wipe (C(nodefix_evidence); with O(evidence_path)).
    type: bool
    default: true
  events:
    description:
      - Post the Events and the C(nodefix.k8s/last-remediation) annotation (C(nodefix_events)).
      - Only what the API server accepted is a change; an Event it did not accept is a warning of the task, never a
        change and never the rollout's outcome.
    type: bool
    default: true
  storm_percent:
    description:
      - The storm breaker's threshold (C(nodefix_storm_percent)), a whole number from 0 to 100. Right before this
        node's cordon (step C(storm)) the Nodes are listed again (one request; O(storm_node_selector)'s pool) and
        counted with this node and the nodes of O(storm_batch) - the rule of M(nodefix.k8s.storm_gate), the nodes
        NotReady, Ready Unknown, without a Ready condition or cordoned, plus the nodes in flight, each once, over
        O(storm_percent) of the Nodes and at least O(storm_min_nodes) stop this node as C(stopped), nothing cordoned.
        A listing that fails stops it too (fail closed). V(100) turns the re-count off; a node whose plan disrupts
        nothing is not counted.
    type: int
    default: 20
  storm_min_nodes:
    description: The fewest nodes unavailable or in flight that make a storm (C(nodefix_storm_min_nodes)); at least 1.
    type: int
    default: 2
  storm_override:
    description: Proceed over the threshold, saying so in the step (C(nodefix_storm_override)).
    type: bool
    default: false
  storm_node_selector:
    description: The label selector of the Nodes counted (C(nodefix_storm_node_selector)); empty, every Node.
    type: str
    default: ""
  storm_batch:
    description:
      - The other nodes of this node's batch, in flight beside it (the storm breaker's audit of each -
        C(node), C(disruptive), C(findings), as the C(nodes) entries of M(nodefix.k8s.storm_gate), with C(node)
        required).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.prometheus
attributes:
  check_mode:
    support: full
    details: The same steps; nothing is written (no record, slot, cordon, eviction, Event or evidence file), each
      write a C(would ...) step.
  diff_mode:
    support: none
  platform:
    platforms: posix
    details: Runs on the controller (an action plugin) against the cluster's API server; node-side modules run on the node.
notes:
  - The rollout record, the outcomes and the steps are described in the collection's C(docs/safety.md) and
    C(docs/rollout-machine.md).
seealso:
  - module: nodefix.k8s.node_audit
  - module: nodefix.k8s.node_events
  - module: nodefix.k8s.reboot_gate
"""

EXAMPLES = r"""
- name: Roll out this node (before the fixes)
  nodefix.k8s.rollout:
    phase: begin
    kubeconfig: "{{ nodefix_kubeconfig }}"
    run_id: "{{ hostvars.localhost._nodefix_run_id }}"
    audit_before: "{{ _nodefix_audit_before }}"
    plan: "{{ _nodefix_plan }}"
  register: _nodefix_rollout
  ignore_errors: true

- name: Roll out this node (after the fixes)
  nodefix.k8s.rollout:
    phase: end
    kubeconfig: "{{ nodefix_kubeconfig }}"
    run_id: "{{ hostvars.localhost._nodefix_run_id }}"
    audit_before: "{{ _nodefix_audit_before }}"
    state: "{{ _nodefix_rollout.state }}"
    remediation:
      status: ok
      roles: "{{ _nodefix_rollout.fix_roles }}"
  when: _nodefix_rollout.outcome is none
  ignore_errors: true
"""

RETURN = r"""
outcome:
  description: The rollout's outcome; C(null) after O(phase=begin) when the fix roles are to run, and after
    O(phase=recheck) - unless another run took the node over (C(failed)).
  returned: always
  type: str
  sample: ok
detail:
  description: Why, in one line (empty while the rollout goes on).
  returned: always
  type: str
  sample: fixed and verified
steps:
  description: Each step of the phase, in order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The step's name.
      type: str
      sample: drain
    outcome:
      description: C(done), C(skipped), C(would) (check mode) or an outcome.
      type: str
      sample: done
    seconds:
      description: How long it took.
      type: float
      sample: 12.5
    detail:
      description: What it did.
      type: str
      sample: evicted 3 pod(s)
lines:
  description: One line a step (as printed while the task ran).
  returned: always
  type: list
  elements: str
state:
  description: The machine's state (plain data; C(record) is what is on the Node); pass the latest one (O(phase=recheck)'s
    when it ran) to O(phase=end) unchanged.
  returned: always
  type: dict
fix_roles:
  description: The roles to run now (the reboot role dropped when its backoff or gate held it).
  returned: when O(phase) is C(begin) or C(recheck)
  type: list
  elements: str
  sample: [nodefix.k8s.containerd]
reboot_allowed:
  description: This node may reboot now, by any reboot path (the reboot role's pending reboot, the kernel upgrade's
    boot, the mount-unit cleanup's reboot) - there is a reason to reboot (O(plan) C(reboot_reasons), the kernel
    upgrade's among them), no gate held it (backoff, window, blocking pods, alerts, lock; judged again by
    O(phase=recheck)), this run drained the node and it holds a slot of the reboot lock.
  returned: when O(phase) is C(begin) or C(recheck)
  type: bool
reboot_reasons:
  description: The reboot's reasons (C(id), C(check), C(reason)) when RV(fix_roles) keeps the reboot role (the reboot
    role's C(reboot_reasons)); empty otherwise.
  returned: when O(phase) is C(begin) or C(recheck)
  type: list
  elements: dict
reboot_timeout_cover:
  description:
  - The longest reboot wait (a reboot path's C(reboot_timeout)) this run's claim, just renewed, covers -
    the reboot path's worst case (twice the timeout plus four times O(reboot_settle_timeout)) inside the lease
    less its margin (O(lease)) and the fixes' own cover (O(fix_timeout)); C(0) when the reboot is held or the
    claim covers none (the C(nodefix.k8s.mount_units) role holds any reboot at C(0); only an unset
    C(mount_units_reboot_cover) means no claim bounds it).
  - A reboot path whose own timeout is longer holds its reboot - the C(nodefix.k8s.mount_units) role's
    C(mount_units_reboot_cover) - since it would outlive the claim and another run could take the node over
    mid-reboot.
  returned: when O(phase) is C(recheck)
  type: int
  sample: 900
reboot_held:
  description: Why the reboot is held (empty when it is not).
  returned: when O(phase) is C(begin) or C(recheck)
  type: list
  elements: str
drained:
  description: This run cordoned and drained the node.
  returned: when O(phase=begin)
  type: bool
cordoned_before:
  description: The node was cordoned before this run (it stays cordoned); C(null) when not read.
  returned: when O(phase=begin)
  type: bool
evidence:
  description: The evidence kept (C(path), C(bytes), C(before), C(missing)) or why not (C(error)).
  returned: when O(phase=begin) kept evidence or tried to
  type: dict
audit_after:
  description: M(nodefix.k8s.node_audit)'s result after the fixes.
  returned: when O(phase=end) audited the node again
  type: dict
remediation:
  description:
    - The node's remediation record the report, the Events and the fail play read - C(status), C(outcome), C(roles),
      C(msg), and as they apply C(held), C(drain), C(given_back), C(refused), C(evidence), C(actions), C(not_durable),
      C(reboot), C(seconds), C(finished).
  returned: when RV(outcome) is set
  type: dict
msg:
  description: The outcome and why, or what the play runs next.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import interface


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=interface.argument_spec(), required_if=interface.REQUIRED_IF,
                                      supports_check_mode=True)
    module.fail_json(msg="nodefix.k8s.rollout runs on the controller as an action plugin; it was run as a module")


if __name__ == "__main__":
    main()
