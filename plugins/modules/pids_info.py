#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pids_info
short_description: Report PID space usage and zombie-leaking processes from one pass over /proc
version_added: "1.1.0"
description:
  - Read-only. Reads C(/proc/<pid>/stat) once per process (no subprocess, no per-thread reads) and counts the
    node's tasks (threads) against C(kernel.pid_max) and C(kernel.threads-max); C(/proc/loadavg) gives the
    kernel's own count, the larger of the two is used.
  - Groups zombies by their parent and reports, for each parent, its pid, command line, zombie count, the age
    and start time of its oldest zombie (C(/proc/<pid>/stat) field 22 with C(btime) and the clock tick), its
    cgroup, systemd unit, and the Kubernetes pod and container it belongs to (containerd, cri-o and docker scope
    names and pod UIDs of the systemd and cgroupfs drivers).
  - Reads the sysctl configuration the next boot applies (C(/etc/sysctl.d), C(/run/sysctl.d),
    C(/usr/local/lib/sysctl.d), C(/usr/lib/sysctl.d), C(/lib/sysctl.d) in systemd-sysctl's order, then
    C(/etc/sysctl.conf)) and reports a persisted C(kernel.pid_max) below the recommended value even when the live
    value is fine.
  - Returns findings with stable ids (C(pids.usage_high), C(pids.pid_max_low), C(pids.pid_max_persisted_low),
    C(pids.threads_max_low), C(pids.zombie_leaker); see docs/findings.md). The same detector runs inside M(nodefix.k8s.node_audit).
  - Fast on large nodes; the repository's C(benchmarks/pids_info) measures a synthetic C(/proc) with 50,000
    tasks.
author:
  - nodefix.k8s developers (@nodefix)
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.read_only
  - nodefix.k8s.root
options:
  usage_percent:
    description: Report C(pids.usage_high) when tasks reach this percentage of the effective limit (the smaller of
      C(kernel.pid_max) and C(kernel.threads-max)); at 95% and more it is critical.
    type: int
    default: 80
  pid_max_min:
    description:
      - Report C(pids.pid_max_low) when C(kernel.pid_max) is below this, and C(pids.pid_max_persisted_low) when the
        value persisted in sysctl configuration is.
      - Default is the architecture's limit, V(4194304) on 64-bit kernels and V(32768) on 32-bit ones.
    type: int
  sysctl_file:
    description:
      - A sysctl.d file a fix writes (or is about to write) C(kernel.pid_max) to, for example the role
        C(nodefix.k8s.pids)'s C(/etc/sysctl.d/60-nodefix-pid-max.conf).
      - When set, RV(pid_max_persisted.overridden_by) lists the assignments in files that apply after it and so
        would override what it holds. The file does not have to exist.
    type: path
  threads_max_min:
    description: Report C(pids.threads_max_low) when C(kernel.threads-max) is below this.
    type: int
    default: 131072
  zombie_threshold:
    description: Zombies one parent must hold to be reported as a leaker.
    type: int
    default: 10
  zombie_min_age:
    description: Seconds the parent's oldest zombie must have existed (parents that reap late are not leakers).
    type: int
    default: 60
  max_parents:
    description: Zombie parents listed in RV(zombie_parents), the largest first.
    type: int
    default: 50
attributes:
  platform:
    details: Linux only (reads C(<root>/proc) and the sysctl configuration under O(root)).
notes:
  - Called C(nodefix.k8s.process_health) in 1.0.0 (the read-only modules now follow the C(_info) convention); that
    name still works, through a redirect with a deprecation warning, until 2.0.0.
  - C(kernel.pid_max) is not namespaced before Linux 6.14; this module only reads it. The role
    C(nodefix.k8s.pids) raises it persistently.
  - Inside a container C(/proc) lists only that PID namespace; C(/proc/loadavg) still counts the host's tasks.
seealso:
  - module: nodefix.k8s.kernel_info
  - name: proc(5)
    description: Fields of C(/proc/<pid>/stat).
    link: https://man7.org/linux/man-pages/man5/proc.5.html
"""

EXAMPLES = r"""
- name: Check PID usage and zombie leakers
  nodefix.k8s.pids_info:
  register: pids

- name: List the leaking parents and their pods
  ansible.builtin.debug:
    msg: "{{ pids.zombie_parents | selectattr('leaker') | map(attribute='cmdline') | list }}"

- name: Stricter thresholds on a cron-heavy node
  nodefix.k8s.pids_info:
    usage_percent: 50
    zombie_threshold: 5
    zombie_min_age: 30
"""

RETURN = r"""
processes:
  description: Processes seen in C(/proc).
  returned: always
  type: int
  sample: 412
tasks:
  description: Tasks (threads) on the node, the larger of RV(tasks_counted) and RV(tasks_kernel).
  returned: always
  type: int
  sample: 1520
tasks_counted:
  description: Sum of the thread counts (C(/proc/<pid>/stat) field 20) of the processes seen.
  returned: always
  type: int
  sample: 1520
tasks_kernel:
  description: The kernel's task count from C(/proc/loadavg) (null when unreadable).
  returned: always
  type: int
  sample: 1518
pid_max:
  description: C(kernel.pid_max).
  returned: always
  type: int
  sample: 32768
pid_max_persisted:
  description: The C(kernel.pid_max) the sysctl configuration sets at the next boot.
  returned: always
  type: dict
  contains:
    value:
      description: "The value that applies last (null when no file sets the key)."
      type: int
    source:
      description: "The file it comes from."
      type: str
    assignments:
      description: "Every assignment of the key, in the order they apply (the last wins); items have C(path) and C(value)."
      type: list
      elements: dict
    overridden_by:
      description: "Assignments in files applied after O(sysctl_file) (returned only when O(sysctl_file) is set)."
      type: list
      elements: dict
  sample:
    value: 32768
    source: /etc/sysctl.d/60-nodefix-pid-max.conf
    assignments:
      - {path: /usr/lib/sysctl.d/50-pid-max.conf, value: "4194304"}
      - {path: /etc/sysctl.d/60-nodefix-pid-max.conf, value: "32768"}
threads_max:
  description: C(kernel.threads-max).
  returned: always
  type: int
  sample: 255782
limit:
  description: The effective task limit, the smaller of RV(pid_max) and RV(threads_max).
  returned: always
  type: int
  sample: 32768
limited_by:
  description: Which sysctl sets RV(limit).
  returned: always
  type: str
  sample: kernel.pid_max
usage_percent:
  description: RV(tasks) as a percentage of RV(limit).
  returned: always
  type: float
  sample: 4.64
zombies:
  description: Zombie processes on the node.
  returned: always
  type: int
  sample: 19782
zombie_parents:
  description: Parents of zombies, the largest first (at most O(max_parents)).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: "Parent pid."
      type: int
    ppid:
      description: "The parent's own parent."
      type: int
    comm:
      description: "Its command name."
      type: str
    cmdline:
      description: "Its command line (arguments joined by spaces)."
      type: str
    ns_pid:
      description: "Its pid inside its own PID namespace (1 means it is a container's init)."
      type: int
    zombies:
      description: "Zombie children it holds."
      type: int
    oldest_age_seconds:
      description: "Age of its oldest zombie."
      type: int
    oldest_started:
      description: "Start time of its oldest zombie (UTC, ISO 8601)."
      type: str
    cgroup:
      description: "Its cgroup path (unified, or the v1 path that places it in kubepods)."
      type: str
    unit:
      description: "The systemd unit (C(.service) or C(.scope)) of that cgroup."
      type: str
    pod_uid:
      description: "Kubernetes pod UID from the cgroup path."
      type: str
    container_id:
      description: "Container id from the cgroup path."
      type: str
    runtime:
      description: "C(containerd), C(crio) or C(docker)."
      type: str
    qos:
      description: "Pod QoS class from the cgroup path."
      type: str
    in_kubepods:
      description: "Whether the cgroup is under kubepods."
      type: bool
    leaker:
      description: "Whether it passes O(zombie_threshold) and O(zombie_min_age)."
      type: bool
    advice:
      description: "What to do about this parent (an init as PID 1 of its container, or a parent that never waits)."
      type: str
  sample:
    - pid: 2841
      ppid: 2811
      comm: supercronic
      cmdline: /usr/local/bin/supercronic -json /crontabs/cron
      ns_pid: 1
      zombies: 19782
      oldest_age_seconds: 86400
      oldest_started: "2026-11-20T06:40:00Z"
      cgroup: /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1d2c3b4a_0000_4000_8000_00000000beef.slice/cri-containerd-0a1b2c3d4e5f.scope
      unit: cri-containerd-0a1b2c3d4e5f.scope
      pod_uid: 1d2c3b4a-0000-4000-8000-00000000beef
      container_id: 0a1b2c3d4e5f
      runtime: containerd
      qos: burstable
      in_kubepods: true
      leaker: true
      advice: "It is not an init and never waits for its children: start it under tini, ... Restarting it releases its zombies at once."
zombie_parents_total:
  description: Number of distinct zombie parents (RV(zombie_parents) may be cut at O(max_parents)).
  returned: always
  type: int
  sample: 1
findings:
  description: Findings (id, severity, title, subject, evidence, remedy, fix).
  returned: always
  type: list
  elements: dict
  sample:
    - id: pids.zombie_leaker
      severity: high
      title: A process leaks zombie children (it never reaps them)
      subject: pid 2841 (supercronic) in pod 1d2c3b4a-0000-4000-8000-00000000beef
      evidence: {pid: 2841, zombies: 19782, pid1_of_namespace: true}
      remedy: Make the parent reap its children ...
      fix: {role: nodefix.k8s.pids, tag: zombies}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options
from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect


def build_module():
    return redacting(AnsibleModule)(
        argument_spec=core_options.module_spec(pids_detect),
        supports_check_mode=True,
    )


@redacted_main
def main():
    module = build_module()
    result = core_options.run_check(module, pids_detect, precheck=lambda p: (
        None if os.path.isdir(os.path.join(p["root"], "proc")) else "%s has no proc directory" % p["root"]))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
