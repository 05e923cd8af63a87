#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_mount_units
short_description: Find and stop the systemd units leaked by kubelet mounts of pods that no longer exist
version_added: "1.0.0"
description:
  - kubelet 1.8 to 1.22 ran its mounts through C(systemd-run --scope) with the description
    C(Kubernetes transient mount for <target>). On systemd older than 237 (kubernetes#57345, systemd PR 7811)
    and in kops#5916 these units leaked, scopes staying C(loaded active running) and C(.mount) units
    C(loaded inactive dead); at 131072 units every new mount fails with C(Argument list too long).
  - Lists the kubelet transient scopes (all three systemd-run naming schemes, C(run-r<32 hex>.scope),
    C(run-u<N>.scope) and C(run-<PID>.scope)) and the mount units under the kubelet pods directory
    (C(<kubelet_root_dir>/pods), systemd's path escaping included) with a constant number of C(systemctl)
    calls however many units exist, and attributes each to the pod UID that follows C(pods/) in its path.
  - Learns the live pods from the container runtime (C(crictl pods -o json) and C(crictl ps -a -o json), or the
    docker label C(io.kubernetes.pod.uid)) or from O(live_pod_uids), and, as a second guard that does not trust
    the runtime, from C(/proc/self/mountinfo) (a pod whose volumes are still mounted under
    C(pods/<uid>/volumes/)) and from the pod cgroups of running processes.
  - A unit of a live pod is never stopped; neither is a unit whose pod cannot be determined
    (RV(unattributable)). When the runtime cannot be asked, the module fails before it changes anything.
  - With O(state=absent) the orphans are stopped in batches (one systemd transaction or one C(systemctl stop) each,
    O(stop_method)), those that end failed are reset
    (C(systemctl reset-failed) with their names, never a global reset) and, with O(daemon_reload=true),
    one C(systemctl daemon-reload) drops mount units stuck C(inactive dead).
  - The same logic runs without Ansible from the systemd timer that the role R(nodefix.k8s.mount_units,ansible_collections.nodefix.k8s.mount_units_role)
    installs, and as a detector inside M(nodefix.k8s.node_audit).
author:
  - nodefix.k8s developers (@nodefix)
options:
  state:
    description:
      - V(absent) stops the orphaned units (check mode reports exactly which).
      - V(query) only reports.
    type: str
    choices: [absent, query]
    default: query
  kubelet_root_dir:
    description: kubelet's C(--root-dir); the pods directory is C(<kubelet_root_dir>/pods).
    type: path
    default: /var/lib/kubelet
  pod_source:
    description:
      - Where the live pods come from.
      - V(crictl) runs C(crictl pods -o json) and C(crictl ps -a -o json) (sandboxes in any state count as live).
      - V(docker) runs C(docker ps -a) and reads the label C(io.kubernetes.pod.uid) (or the C(k8s_) name).
      - V(list) trusts O(live_pod_uids) alone.
    type: str
    choices: [crictl, docker, list]
    default: crictl
  live_pod_uids:
    description: Pod UIDs to treat as live in addition to the runtime's (the only source with O(pod_source=list)).
    type: list
    elements: str
    default: []
  crictl_path:
    description: Path of C(crictl) (default, found on C(PATH) and the usual sbin/bin directories).
    type: path
  runtime_endpoint:
    description: C(--runtime-endpoint) for crictl (for example V(unix:///run/containerd/containerd.sock)).
    type: str
  docker_path:
    description: Path of C(docker).
    type: path
  batch_size:
    description: Units per stop call (one systemd transaction or one C(systemctl stop); argv is also kept under
      ARG_MAX).
    type: int
    default: 1000
  stop_method:
    description:
      - How each batch of orphans is stopped.
      - V(transaction) stops each batch of kubelet's transient scopes in ONE systemd transaction, through
        C(systemd-run), as a transient oneshot service with C(Conflicts=) and C(After=) on the batch's names, so
        systemd puts their stop jobs in one transaction and C(systemd-run) returns when every stop is done.
        C(systemctl stop) runs one transaction per unit. 10,000 leaked scopes took 38 % less time to stop than with
        C(systemctl stop) on systemd 252 and 17 % less on 257, each batch timed until systemd was idle again
        (C(benchmarks/mount_units) in the collection's repository).
      - Only names without a backslash go into a transaction (C(systemd-run -p) would read C(\x2d) as C(x2d), the
        name of another unit); mount units under the pods directory always hold C(\x2d) and are stopped with
        C(systemctl stop). Used on systemd 236 or later when C(systemd-run) and C(true) are found.
      - Stops pulled in by C(Conflicts=) are not manual requests, so a unit with C(RefuseManualStop=) would be
        stopped (kubelet's transient units never set it).
      - When C(systemd-run) fails, what of its batch is still up and every later batch are stopped with C(systemctl
        stop); the failure is in RV(errors), marked ignored when systemd refused the request as a whole (a unit with
        a queued job, a node shutting down).
      - V(systemctl) stops each batch with one C(systemctl stop) call.
      - Either way what is still up is re-read afterwards with one C(systemctl list-units).
    type: str
    choices: [transaction, systemctl]
    default: transaction
  max_seconds:
    description:
      - A time budget for the stops. Batches are stopped until the budget is spent (checked before each batch, so a
        run takes at most the budget plus one batch); what is left is returned in RV(left) and RV(left_units) and
        the task succeeds, so a rollout never waits hours on one node. The next run (or the role's timer) goes on.
      - Default no budget. RV(estimate_seconds) (check mode too) says how long the whole cleanup is expected to take.
    type: float
  reboot_over_seconds:
    description:
      - When RV(estimate_seconds) exceeds this many seconds, RV(reboot_recommended) is true - a drained reboot drops
        every transient unit at once, a cleanup through systemd costs time per unit that grows with the units loaded.
        The module never reboots; the C(nodefix.k8s.mount_units) role's reboot path does, when allowed.
      - V(0) (the default) never recommends a reboot.
    type: float
    default: 0
  daemon_reload:
    description: Run one C(systemctl daemon-reload) when orphaned mount units are stuck C(inactive dead)
      (the systemd < 237 leak).
    type: bool
    default: false
  reset_failed:
    description: Reset the orphaned units that are (or end) C(failed), by name.
    type: bool
    default: true
  process_guard:
    description: Treat a pod as live while any process runs in its pod cgroup (reads C(/proc/<pid>/cgroup)).
    type: bool
    default: true
  list_limit:
    description: Cap of every returned list of units (V(0) returns them all).
    type: int
    default: 100
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
  - nodefix.k8s.root
attributes:
  check_mode:
    details: Reports in RV(to_stop_units) exactly which units it would stop; stops nothing.
  diff_mode:
    details: The orphaned units to stop, before and after.
  platform:
    details: Linux nodes running systemd.
notes:
  - Units are listed before the runtime is asked, so a pod started in between is either known to the runtime or
    has no unit in the listing.
  - Only names the module itself listed are ever passed to C(systemctl); unrelated units are never touched.
seealso:
  - module: nodefix.k8s.node_audit
  - name: kubernetes#57345
    description: Mount units of kubelet leak on systemd < 237.
    link: https://github.com/kubernetes/kubernetes/issues/57345
  - name: kops#5916
    description: Transient mount scopes of kubelet pile up (~100K units).
    link: https://github.com/kubernetes/kops/issues/5916
"""

EXAMPLES = r"""
- name: Report the leaked kubelet mount units
  nodefix.k8s.kubelet_mount_units:
  register: leaked

- name: Stop the units of pods the runtime no longer knows
  nodefix.k8s.kubelet_mount_units:
    state: absent
    daemon_reload: true

- name: A docker node with kubelet's root dir moved
  nodefix.k8s.kubelet_mount_units:
    state: absent
    pod_source: docker
    kubelet_root_dir: /data/kubelet

- name: crictl on a non-default endpoint, larger batches
  nodefix.k8s.kubelet_mount_units:
    state: absent
    runtime_endpoint: unix:///run/crio/crio.sock
    batch_size: 5000

- name: Is a drained reboot faster than the cleanup (more than an hour)?
  nodefix.k8s.kubelet_mount_units:
    state: query
    reboot_over_seconds: 3600
  register: leaked
# leaked.reboot_recommended, leaked.estimate_seconds
"""

RETURN = r"""
state:
  description: The state asked for.
  returned: always
  type: str
  sample: absent
systemd:
  description: systemd's version, whether it has the fix (237), all units it holds and its limit.
  returned: always
  type: dict
  sample: {version: 232, has_fix: false, fixed_in: 237, units_total: 104233, unit_limit: 131072}
runtime:
  description: How the live pods were learnt.
  returned: always
  type: dict
  sample: {source: crictl, queried: true, pods: 14, sandboxes: 16, containers: 31, error: null}
pods_dirs:
  description: The pods directories units were matched against (as configured and as resolved).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/kubelet/pods]
total:
  description: kubelet units found (scopes and mount units).
  returned: always
  type: int
  sample: 20011
scopes:
  description: kubelet transient scopes among RV(total).
  returned: always
  type: int
  sample: 10008
mounts:
  description: Mount units under the pods directory among RV(total).
  returned: always
  type: int
  sample: 10003
orphaned:
  description: Units of pods that are not live.
  returned: always
  type: int
  sample: 20000
orphaned_scopes:
  description: The transient scopes among RV(orphaned) (leaked scopes of pods that are not live).
  returned: always
  type: int
  sample: 10000
to_stop:
  description: Orphaned units that are up and are (or, in check mode, would be) stopped.
  returned: always
  type: int
  sample: 20000
stopped:
  description: Units stopped by this run (0 in check mode and with O(state=query)).
  returned: always
  type: int
  sample: 20000
reset_failed:
  description: Orphaned units reset from C(failed).
  returned: always
  type: int
  sample: 0
dead_mount_units:
  description: Orphaned mount units stuck C(inactive dead) (dropped by O(daemon_reload)).
  returned: always
  type: int
  sample: 0
daemon_reload:
  description: Whether C(systemctl daemon-reload) ran.
  returned: always
  type: bool
  sample: false
kept_live:
  description: Units kept because their pod is live (RV(kept_by_runtime) + RV(kept_by_guard)).
  returned: always
  type: int
  sample: 11
kept_by_runtime:
  description: Units of pods known to the runtime or given in O(live_pod_uids).
  returned: always
  type: int
  sample: 8
kept_by_guard:
  description: Units of pods unknown to the runtime whose volumes are still mounted or whose processes run.
  returned: always
  type: int
  sample: 3
unverified:
  description: Units not judged because the runtime could not be asked (only from the node_audit detector).
  returned: always
  type: int
  sample: 0
unattributable:
  description: kubelet units whose pod cannot be determined; left alone.
  returned: always
  type: int
  sample: 2
still_active:
  description: Units still up after C(systemctl stop) (the module then fails).
  returned: always
  type: int
  sample: 0
left:
  description: Orphaned units not stopped because O(max_seconds) was spent (0 without a budget).
  returned: always
  type: int
  sample: 0
left_units:
  description: The units left by O(max_seconds) (capped at O(list_limit)).
  returned: always
  type: list
  elements: str
estimate_seconds:
  description:
    - Expected seconds to stop every orphan found, from the number of units systemd has loaded and the number to stop
      (a stop through systemd costs more the more units are loaded), on the cost curve measured for the node's
      systemd version or the nearest measured one (247, 252, 257); see RV(estimate_basis) and docs/mount_units.md.
  returned: always
  type: float
  sample: 204.6
estimate_left_seconds:
  description: Expected seconds to stop what RV(left) counts.
  returned: always
  type: float
  sample: 0.0
estimate_basis:
  description: The measured curve the estimate uses (its systemd version, and whether it is the nearest to the node's).
  returned: always
  type: str
reboot_recommended:
  description: RV(estimate_seconds) exceeds O(reboot_over_seconds) (never with O(reboot_over_seconds=0)).
  returned: always
  type: bool
  sample: false
stop_calls:
  description: Stop calls made (C(systemd-run) transactions and C(systemctl stop) calls).
  returned: always
  type: int
  sample: 20
stop_method:
  description:
    - How orphans are (or in check mode would be) stopped, V(transaction) or V(systemctl) (see O(stop_method));
      V(systemctl) when O(stop_method=transaction) but C(systemd-run) or C(true) was not found.
    - RV(estimate_seconds) follows it.
  returned: always
  type: str
  sample: transaction
transactions:
  description: Batches stopped in one systemd transaction.
  returned: always
  type: int
  sample: 10
fallbacks:
  description:
    - C(systemd-run) calls that failed (0 or 1 a run); after one, what of its batch is still up and every later batch
      are stopped with C(systemctl stop).
  returned: always
  type: int
  sample: 0
show_calls:
  description: C(systemctl show) calls made (only for mount units whose listed line does not give their mount point).
  returned: always
  type: int
  sample: 0
to_stop_units:
  description: The units to stop (capped at O(list_limit)); in check mode exactly what would be stopped.
  returned: always
  type: list
  elements: str
  sample: [run-r6f0c4c1e8d0b4a0f9c1d2e3f4a5b6c7d.scope]
stopped_units:
  description: The units stopped (capped at O(list_limit)).
  returned: always
  type: list
  elements: str
  sample: ["var-lib-kubelet-pods-0b5a\\x2d...-volume\\x2dsubpaths-cfg-app-0.mount"]
dead_mount_unit_names:
  description: Orphaned mount units stuck C(inactive dead) (capped).
  returned: always
  type: list
  elements: str
  sample: []
kept_units:
  description: Units kept with their pod and the reason (capped).
  returned: always
  type: list
  elements: dict
  sample: [{unit: run-u42.scope, pod_uid: 8f2c1a9e-3b7d-4c11-9a0e-1d2c3b4a5f60, reason: pod known to crictl}]
unattributable_units:
  description: Units left alone because their pod cannot be determined, with the path and the reason (capped).
  returned: always
  type: list
  elements: dict
  sample: [{unit: run-r0f....scope, path: /var/lib/kubelet/plugins/kubernetes.io/csi/pv/x/globalmount,
            reason: "path ... is not under /var/lib/kubelet/pods"}]
still_active_units:
  description: Units still up after the stop (capped).
  returned: always
  type: list
  elements: str
  sample: []
orphaned_pod_uids:
  description: Pod UIDs that orphaned units belong to (capped).
  returned: always
  type: list
  elements: str
  sample: [0b5a3c2d-1e4f-4a6b-8c7d-9e0f1a2b3c4d]
errors:
  description: Non-zero exits of systemctl calls (C(ignored) ones did not affect the result).
  returned: always
  type: list
  elements: dict
  sample: []
timings:
  description:
    - Seconds spent listing (C(list_s)), learning the pods and guards (C(pods_s)), and stopping (C(stop_s)).
    - C(stop_s) includes C(verify_s), the one C(systemctl list-units) after the stop that tells what is still up
      (0 when nothing was stopped).
  returned: always
  type: dict
  sample: {list_s: 0.31, pods_s: 0.12, stop_s: 41.7, verify_s: 0.3}
"""

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cost as mount_units_cost
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import errors as mount_units_errors
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import survey as mount_units_survey
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cleanup as mount_units_cleanup
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner


def build_module():
    return redacting(AnsibleModule)(
        # kubelet_root_dir ... list_limit: the survey options node_audit's options.mount_units shares
        argument_spec=dict(
            copy.deepcopy(mount_units_survey.SURVEY_OPTIONS),
            state=dict(type="str", default="query", choices=["absent", "query"]),
            batch_size=dict(type="int", default=1000),
            stop_method=dict(type="str", default="transaction", choices=["transaction", "systemctl"]),
            max_seconds=dict(type="float"),
            reboot_over_seconds=dict(type="float", default=0),
            daemon_reload=dict(type="bool", default=False),
            reset_failed=dict(type="bool", default=True),
            process_guard=dict(type="bool", default=True),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


@redacted_main
def main():
    module = build_module()
    p = module.params
    opts = dict((k, p[k]) for k in ("kubelet_root_dir", "pod_source", "live_pod_uids", "crictl_path",
                                    "runtime_endpoint", "docker_path", "batch_size", "daemon_reload",
                                    "reset_failed", "process_guard", "list_limit", "max_seconds", "stop_method"))
    if p["reboot_over_seconds"] < 0:
        module.fail_json(msg="reboot_over_seconds must be 0 (never) or more, got %s" % p["reboot_over_seconds"],
                         changed=False)
    try:
        result = mount_units_cleanup.run(Runner(module), root=p["root"], state=p["state"], check_mode=module.check_mode,
                                         **opts)
    except mount_units_errors.MountUnitsError as exc:
        module.fail_json(msg=exc.msg, changed=False, **exc.details)
    result["reboot_recommended"] = mount_units_cost.reboot_faster(result["estimate_seconds"], p["reboot_over_seconds"])
    if module._diff:
        to_stop = result["to_stop_units"] if p["state"] == "absent" else []
        result["diff"] = {
            "before": "".join("%s\n" % u for u in to_stop),
            "after": "".join("%s\n" % u for u in result["still_active_units"]),
            "before_header": "orphaned kubelet mount units (before)",
            "after_header": "orphaned kubelet mount units (after)",
        }
    failed = result.pop("failed")
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
