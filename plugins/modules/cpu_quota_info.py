#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cpu_quota_info
short_description: Find CPU quotas that break containers (runc + systemd CPUQuota EINVAL)
version_added: "1.1.0"
description:
  - >-
    Read-only. Walks the cpu cgroup hierarchy (cgroup v1 C(cpu.cfs_quota_us) and C(cpu.cfs_period_us), v2
    C(cpu.max)) and reports every cgroup whose quota exceeds its nearest limited ancestor's, comparing
    quota/period so that different periods are normalised. On cgroup v1 the kernel refuses such a write with
    C(EINVAL) (the container never starts, C(failed to write 295300 to cpu.cfs_quota_us: invalid argument)); on
    v2 it silently caps the child.
  - Names the pods and containers involved from the cgroup paths (systemd and cgroupfs drivers; containerd,
    cri-o and docker).
  - Reports CPU limits under the systemd cgroup driver that are not whole percents of a CPU (systemd stores
    CPUQuota in whole percents and truncates the pod slice's quota, e.g. 2953m to 295%).
  - Reports runc older than v1.0.0-rc5 (opencontainers/runc PR #1651, which rounds up to 10 ms).
  - Returns findings with stable ids (C(cpu_quota.child_exceeds_parent), C(cpu_quota.not_whole_percent),
    C(runc.cpu_quota_rounding_bug); see docs/findings.md).
  - C(runc.cpu_quota_rounding_bug) belongs to the containerd detector (it reads runc for both); this module adds it
    to its own result, M(nodefix.k8s.node_audit) reports it once, from its C(containerd) check.
notes:
  - Called C(nodefix.k8s.cpu_quota_check) in 1.0.0 (the read-only modules now follow the C(_info) convention); that
    name still works, through a redirect with a deprecation warning, until 2.0.0.
author:
  - nodefix.k8s developers (@nodefix)
options:
  check_runc:
    description: Run C(runc --version) and report a runc without the rounding fix.
    type: bool
    default: true
  runc_binary:
    description: The runc binary (a name searched on the PATH and the sbin/bin directories, or an absolute path).
    type: str
    default: runc
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.read_only
  - nodefix.k8s.root
attributes:
  platform:
    details: Linux only.
seealso:
  - module: nodefix.k8s.kernel_info
  - name: Red Hat bug 1509467
    description: The original report (2953m limit, 295300 under a 295000 pod slice).
    link: https://bugzilla.redhat.com/show_bug.cgi?id=1509467
  - name: opencontainers/runc PR 1651
    description: Round the systemd CPU quota up to 10 ms (v1.0.0-rc5).
    link: https://github.com/opencontainers/runc/pull/1651
"""

EXAMPLES = r"""
- name: Find CPU quota violations
  nodefix.k8s.cpu_quota_info:
  register: quota

- name: Show the pods whose containers cannot start
  ansible.builtin.debug:
    msg: "{{ quota.violations | map(attribute='pod_uid') | unique | list }}"
"""

RETURN = r"""
cgroup_layout:
  description: V(v1), V(v2) or V(hybrid).
  returned: always
  type: str
  sample: hybrid
cpu_hierarchy:
  description: The directory walked (null when there is no cpu controller).
  returned: always
  type: str
  sample: /sys/fs/cgroup/cpu
limited_cgroups:
  description: Cgroups with a CPU quota.
  returned: always
  type: int
  sample: 42
violations:
  description: Cgroups whose quota exceeds their nearest limited ancestor's.
  returned: always
  type: list
  elements: dict
  sample:
    - path: /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poddb841b6d_ca29_11e7_9644_02306c0cdc4b.slice/docker-b686057013a3.scope
      quota: 295300
      period: 100000
      cpus: 2.953
      parent: /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poddb841b6d_ca29_11e7_9644_02306c0cdc4b.slice
      parent_quota: 295000
      parent_period: 100000
      parent_cpus: 2.95
      pod_uid: db841b6d-ca29-11e7-9644-02306c0cdc4b
      parent_pod_uid: db841b6d-ca29-11e7-9644-02306c0cdc4b
      container_id: b686057013a3
      runtime: docker
      driver: systemd
not_whole_percent:
  description: Limits under the systemd driver in kubepods that are not whole percents of a CPU.
  returned: always
  type: list
  elements: dict
  sample:
    - path: /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poddb841b6d_ca29_11e7_9644_02306c0cdc4b.slice/docker-b686057013a3.scope
      quota: 295300
      period: 100000
      percent: 295.3
      systemd_truncates_to: 295000
      pod_uid: db841b6d-ca29-11e7-9644-02306c0cdc4b
      container_id: b686057013a3
      runtime: docker
      driver: systemd
runc:
  description: runc's path, version and whether it predates the fix (nulls when not found or not checked).
  returned: always
  type: dict
  sample: {binary: /usr/sbin/runc, version: 1.1.5, cpu_quota_rounding_bug: false}
findings:
  description: Findings (id, severity, title, subject, evidence, remedy, fix).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._cpu_quota import detect as cpu_quota_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options


def build_module():
    return redacting(AnsibleModule)(
        argument_spec=core_options.module_spec(cpu_quota_detect),
        supports_check_mode=True,
    )


@redacted_main
def main():
    module = build_module()
    result = core_options.run_check(module, cpu_quota_detect)
    # the containerd detector owns runc.cpu_quota_rounding_bug (node_audit reports it once, from there)
    result["findings"].extend(containerd_detect.runc_findings(result["runc"],
                                                              systemd_driver_limits=len(result["not_whole_percent"]) > 0))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
