#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_info
short_description: Check the kernel and cgroup health of a Kubernetes node (OOM reaper, memory.stat, PSI, dying memcgs)
version_added: "1.1.0"
description:
  - Read-only. Parses the kernel release, distribution suffixes included (Ubuntu V(5.15.0-91-generic),
    V(4.4.0-1069-aws), Debian V(6.1.0-27-amd64), RHEL V(4.18.0-513.el8.x86_64), Amazon Linux, Fedora), and
    compares it with the upstream fixes that matter on nodes; Linux 4.6 (OOM reaper), 4.16 (memory.stat no
    longer slowed by dying memory cgroups), 4.20 (pressure stall information), 5.2 (recursive memcg statistics).
    Known distribution backports are honoured (RHEL 8 carries PSI, disabled by default).
  - Detects the cgroup layout (v1, v2 or hybrid), counts dying memory cgroups (v1 C(/proc/cgroups) memory
    C(num_cgroups) minus the directories of the memory hierarchy; v2 C(nr_dying_descendants) of C(cgroup.stat)),
    times one read of the root C(memory.stat) (what kubelet's cAdvisor pays) and checks that PSI is readable.
  - Returns findings with stable ids (C(kernel.*), see docs/findings.md). The remedy is a kernel upgrade;
    dropping caches is not one. The same detector runs inside M(nodefix.k8s.node_audit).
author:
  - nodefix.k8s developers (@nodefix)
options:
  release:
    description:
      - Kernel release to judge instead of C(/proc/sys/kernel/osrelease) (for example the release a node
        will boot into).
      - The missing fixes, PSI included, are then judged from that release's version and the known distribution
        backports; the live C(/proc/pressure) of the running kernel is used only when the release judged is the
        running one. Dying memory cgroups and the C(memory.stat) time are always the running kernel's.
    type: str
  min_release:
    description:
      - The fleet's minimum kernel version (V(6.12), V(6.1.90)); a release judged older is reported as
        C(kernel.below_minimum). Unset, no minimum.
      - The kernel role installs a kernel at or above it when asked to (C(kernel_upgrade_enabled)).
    type: str
  dying_memcgs_threshold:
    description: Report C(kernel.dying_memcgs) from this many dying memory cgroups.
    type: int
    default: 1000
  memory_stat_slow_ms:
    description: Report C(kernel.slow_memory_stat) when one read of the root C(memory.stat) takes this many
      milliseconds or more (about 10 ms on a healthy node, 1.2 s on one with ~100k dying memcgs).
    type: int
    default: 200
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.read_only
  - nodefix.k8s.root
attributes:
  platform:
    details: Linux only.
notes:
  - Called C(nodefix.k8s.kernel_check) in 1.0.0 (the read-only modules now follow the C(_info) convention); that
    name still works, through a redirect with a deprecation warning, until 2.0.0.
  - Inside a container with its own cgroup namespace, C(/proc/cgroups) still counts the host's cgroups while
    C(/sys/fs/cgroup/memory) shows only the container's part, so dying memcgs are overcounted; run on the node.
seealso:
  - module: nodefix.k8s.pids_info
  - module: nodefix.k8s.cpu_quota_info
  - name: Linux commit a983b5ebee57 (memory.stat)
    description: "mm: memcontrol: fix excessive complexity in memory.stat reporting (4.16)."
    link: https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/commit/?id=a983b5ebee57
"""

EXAMPLES = r"""
- name: Check the node's kernel and cgroups
  nodefix.k8s.kernel_info:
  register: kernel

- name: Fail on a kernel without the OOM reaper
  ansible.builtin.assert:
    that: kernel.findings | selectattr('id', 'equalto', 'kernel.no_oom_reaper') | list | length == 0

- name: Judge the kernel a node will boot into
  nodefix.k8s.kernel_info:
    release: 6.1.0-27-amd64
"""

RETURN = r"""
release:
  description: The kernel release judged.
  returned: always
  type: str
  sample: 4.18.0-513.el8.x86_64
running_release:
  description: The running kernel's release (C(/proc/sys/kernel/osrelease)), null when unreadable.
  returned: always
  type: str
  sample: 6.1.0-27-amd64
judged_running_kernel:
  description: Whether the release judged is the running kernel (then PSI is judged from C(/proc/pressure)).
  returned: always
  type: bool
  sample: true
min_release:
  description: The minimum release judged against (O(min_release)), null when none was given.
  returned: always
  type: str
  sample: "6.12"
kernel:
  description: The parsed release (null when it is not a kernel release).
  returned: always
  type: dict
  sample:
    release: 4.18.0-513.el8.x86_64
    version: 4.18.0
    version_tuple: [4, 18, 0]
    distro: rhel
    distro_release: el8
    abi: "513"
    flavour: x86_64
cgroup_layout:
  description: V(v1), V(v2) or V(hybrid).
  returned: always
  type: str
  sample: hybrid
psi:
  description: V(available), V(disabled) (files present but unreadable, C(psi=0) or CONFIG_PSI_DEFAULT_DISABLED)
    or V(missing).
  returned: always
  type: str
  sample: available
backports:
  description: Known distribution backports that apply to this release.
  returned: always
  type: list
  elements: str
  sample: ["backported to RHEL 8 4.18, disabled by default: boot with psi=1"]
dying_memcgs:
  description: Dying memory cgroups and how they were counted.
  returned: always
  type: dict
  sample: {count: 39, method: /proc/cgroups, num_cgroups: 50, directories: 11}
memory_stat_ms:
  description: Milliseconds one read of RV(memory_stat_path) took (null when there is none).
  returned: always
  type: float
  sample: 0.3
memory_stat_path:
  description: The C(memory.stat) that was timed.
  returned: always
  type: str
  sample: /sys/fs/cgroup/memory/memory.stat
findings:
  description: Findings (id, severity, title, subject, evidence, remedy, fix).
  returned: always
  type: list
  elements: dict
  sample:
    - id: kernel.no_oom_reaper
      severity: high
      title: "Kernel older than 4.6 has no OOM reaper: a node under memory pressure can hang"
      subject: 4.4.0-1069-aws
      evidence: {release: 4.4.0-1069-aws, version: 4.4.0, distro: ubuntu, fixed_in: "4.6"}
      remedy: Upgrade the kernel ...
      fix: {role: nodefix.k8s.kernel, tag: kernel}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import detect as kernel_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options


def build_module():
    return redacting(AnsibleModule)(
        argument_spec=core_options.module_spec(kernel_detect),
        supports_check_mode=True,
    )


@redacted_main
def main():
    module = build_module()
    module.exit_json(changed=False, **core_options.run_check(module, kernel_detect))


if __name__ == "__main__":
    main()
