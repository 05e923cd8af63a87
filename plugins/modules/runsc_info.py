#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runsc_info
short_description: Report gVisor (runsc) versions, shim config, cgroup driver and live sandbox sizes
version_added: "1.0.0"
description:
  - Read-only check of a node running gVisor under containerd for the two causes of gVisor pods that ignore
    their memory limit (google/gvisor#9580 and the systemd cgroup driver without C(systemd-cgroup)).
  - Finds C(runsc) and C(containerd-shim-runsc-v1) and parses C(runsc --version) in every real format
    (V(release-20231009.0), untagged V(release-20201216.0-72-gbf343394d498), Debian V(0.0~20221219.0)).
  - Reads containerd's C(config.toml) (schemas 1 to 4, with the reader of M(nodefix.k8s.containerd_info)), the
    shim config named by the runsc runtime's C(ConfigPath) and its C([runsc_config]) table, and the node's cgroup
    driver (the kubelet's effective C(cgroupDriver), as M(nodefix.k8s.kubelet_config) computes it, wins over
    containerd runc C(SystemdCgroup)).
  - Inspects every live sandbox in one pass over C(/proc), comparing its C(--total-memory) against the effective memory
    limit of its cgroup (walking up the tree; cgroup v1 C(memory.limit_in_bytes), v2 C(memory.max)), its pod,
    and whether its cgroup is inside a C(kubepods) slice.
  - Returns findings with stable ids (C(gvisor.*), see docs/findings.md). The same detector runs inside
    M(nodefix.k8s.node_audit).
author:
  - nodefix.k8s developers (@nodefix)
options:
  runsc_path:
    description:
      - The runsc binary to check. Default is the shim config's C(binary_name), else C(runsc) on the PATH and
        the usual sbin/bin directories.
      - When given, it must be an executable regular file; a missing, non-regular or non-executable file fails
        the task naming the problem (a freshly downloaded binary is usually mode 0644).
    type: path
  shim_path:
    description: The containerd shim to look for. Default C(containerd-shim-runsc-v1) on the PATH.
    type: path
  containerd_config:
    description: containerd's configuration file.
    type: path
    default: /etc/containerd/config.toml
  kubelet_unit:
    description:
      - The kubelet's systemd unit. The node's cgroup driver is the kubelet's effective C(cgroupDriver), read the way
        M(nodefix.k8s.kubelet_config) reads it (flags from the unit and its environment files > C(--config-dir)
        drop-ins > the C(--config) file), else containerd's runc C(SystemdCgroup), else C(cgroupfs).
    type: str
    default: kubelet.service
  minimum_release:
    description: Oldest runsc release accepted; the fix for google/gvisor#9580 is in V(20231106.0).
    type: str
    default: "20231106.0"
  inspect_sandboxes:
    description: Inspect live sandboxes in C(/proc).
    type: bool
    default: true
  runtime_name:
    description: The containerd runtime name the remedy registers runsc under (RV(plan.containerd)).
    type: str
    default: runsc
  shim_config_path:
    description: The shim config the remedy writes when containerd names none yet (RV(plan.shim_config)).
    type: path
    default: /etc/containerd/runsc.toml
  systemd_cgroup:
    description:
      - V(auto) plans C(systemd-cgroup = "true") exactly on a systemd-driver node (removed otherwise);
        V(never) plans it removed.
    type: str
    default: auto
    choices: [auto, never]
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.read_only
  - nodefix.k8s.root
attributes:
  platform:
    details: Linux nodes running gVisor (runsc), with or without containerd.
notes:
  - On cgroup v1 the fix for google/gvisor#9580 does not apply; only the live sandbox check proves a node
    (measured on 0.0~20221219.0 and 0.0~20240729.0).
seealso:
  - module: nodefix.k8s.runsc_config
  - module: nodefix.k8s.containerd_config
  - name: google/gvisor#9580
    description: Sandboxes sized to the whole host under cgroup v2.
    link: https://github.com/google/gvisor/issues/9580
"""

EXAMPLES = r"""
- name: Check gVisor on the node
  nodefix.k8s.runsc_info:
  register: gvisor

- name: Show sandboxes sized above their pod's limit
  ansible.builtin.debug:
    msg: "{{ gvisor.sandboxes | selectattr('oversized') | list }}"

- name: Check a freshly downloaded runsc before installing it
  nodefix.k8s.runsc_info:
    runsc_path: /tmp/runsc.new
    inspect_sandboxes: false
"""

RETURN = r"""
runsc:
  description: The runsc binary and its version.
  returned: always
  type: dict
  sample:
    path: /usr/bin/runsc
    installed: true
    version_output: "runsc version 0.0~20221219.0\nspec: 1.0.2-dev"
    version: "0.0~20221219.0"
    release: "20221219.0"
    untagged: false
    flavor: debian
    has_9580_fix: false
    supports_systemd_cgroup: true
shim:
  description: C(containerd-shim-runsc-v1) (C(path) null when missing).
  returned: always
  type: dict
  sample: {path: null, installed: false}
containerd:
  description: What containerd's config says about runsc and runc's cgroup driver.
  returned: always
  type: dict
  sample:
    config_path: /etc/containerd/config.toml
    exists: true
    error: null
    schema_version: 2
    runc_systemd_cgroup: true
    runsc_runtimes: [{name: runsc, runtime_type: io.containerd.runsc.v1, type_url: null, config_path: null}]
shim_config:
  description: The shim config named by C(ConfigPath) (null when there is none).
  returned: always
  type: dict
  sample:
    path: /etc/containerd/runsc.toml
    exists: true
    valid: true
    error: null
    systemd_cgroup: true
    runsc_config: {systemd-cgroup: "true"}
    settings: {log_level: debug}
cgroup_driver:
  description: The node's cgroup driver, C(systemd) or C(cgroupfs).
  returned: always
  type: str
  sample: systemd
cgroup_driver_source:
  description: Where the driver was read.
  returned: always
  type: str
  sample: "kubelet config /var/lib/kubelet/config.yaml"
kubelet_cgroup_driver:
  description: The kubelet's effective C(cgroupDriver) (null when the kubelet does not set it or has no unit).
  returned: always
  type: str
kubelet_error:
  description: Why the kubelet's configuration could not be read (null when it could or there is no kubelet).
  returned: always
  type: str
cgroup_layout:
  description: C(v1), C(hybrid) or C(v2).
  returned: always
  type: str
minimum_release:
  description: The minimum release checked against.
  returned: always
  type: str
uses_gvisor:
  description: Whether the node has runsc, a runsc runtime or live sandboxes.
  returned: always
  type: bool
sandboxes:
  description: Every live runsc sandbox.
  returned: always
  type: list
  elements: dict
  sample:
    - container_id: 7d2c0e8f3b1a9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5
      pid: 129
      total_memory: 25276510208
      total_host_memory: null
      runsc_root: /var/run/runsc
      bundle: /var/lib/nodefix-gvisor-lab/oversized
      systemd_cgroup: false
      cgroup: /kubepods/burstable/pod6a1f0c2e-0000-4000-8000-00000000a001/7d2c0e8f3b1a9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5
      cgroup_local: /kubepods/burstable/pod6a1f0c2e-0000-4000-8000-00000000a001/7d2c0e8f3b1a9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5
      cgroup_found: true
      memory_limit: 268435456
      limited_by: /kubepods/burstable/pod6a1f0c2e-0000-4000-8000-00000000a001
      leaf_limit: null
      pod_uid: 6a1f0c2e-0000-4000-8000-00000000a001
      qos: burstable
      pod_container_id: 7d2c0e8f3b1a9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5
      in_kubepods: true
      kubernetes: true
      outside_pod_slice: false
      oversized: true
      excess_bytes: 25008074752
tomlkit_available:
  description: Whether the Python library tomlkit (needed by M(nodefix.k8s.runsc_config)) is importable on the node.
  returned: always
  type: bool
oversized_sandboxes:
  description: Container ids of the sandboxes sized above their effective limit.
  returned: always
  type: list
  elements: str
pods_to_recreate:
  description: UIDs of the pods whose sandboxes are oversized or outside their pod slice.
  returned: always
  type: list
  elements: str
plan:
  description:
    - The remedy for what was found, as concrete parameters; the role R(nodefix.k8s.gvisor,ansible_collections.nodefix.k8s.gvisor_role) only sequences these
      steps and containerd's safe restart, it decides nothing again.
  returned: always
  type: dict
  contains:
    planned_for:
      description: The options the plan was made with (runtime_name, shim_config_path, systemd_cgroup,
        minimum_release, containerd_config); the role plans again when its variables differ.
      type: dict
    active:
      description: Whether gVisor is used on the node (runsc, a runsc runtime or a live sandbox).
      type: bool
    runsc:
      description: C(action) (V(none), V(upgrade), V(install)), C(reason), C(version), C(path) and C(minimum).
      type: dict
    shim_config:
      description: C(path) to write, C(systemd_cgroup) (set it or remove it), C(reason), C(supported_now),
        C(needs_upgrade_first) (the runsc installed is older than release-20220321.0) and C(cgroup_v1).
      type: dict
    containerd:
      description: C(config_path), C(present), the C(runtime) name, the C(entry) to register (C(runtime_type),
        C(options.TypeUrl), C(options.ConfigPath)), C(register) (it differs from what is registered) and
        C(restart_needed).
      type: dict
    recreate:
      description: C(pods) (UIDs) and C(sandboxes) (container ids) to recreate.
      type: dict
  sample:
    planned_for: {runtime_name: runsc, shim_config_path: /etc/containerd/runsc.toml, systemd_cgroup: auto,
                  minimum_release: "20231106.0", containerd_config: /etc/containerd/config.toml}
    active: true
    runsc: {action: upgrade, reason: "runsc 0.0~20221219.0 is older than 20231106.0 (google/gvisor#9580)",
            version: "0.0~20221219.0", path: /usr/bin/runsc, minimum: "20231106.0"}
    shim_config: {path: /etc/containerd/runsc.toml, systemd_cgroup: true, supported_now: true,
                  needs_upgrade_first: false, cgroup_v1: false,
                  reason: "the node uses the systemd cgroup driver (kubelet config /var/lib/kubelet/config.yaml)"}
    containerd: {config_path: /etc/containerd/config.toml, present: true, runtime: runsc, register: true,
                 restart_needed: true,
                 entry: {runtime_type: io.containerd.runsc.v1,
                         options: {TypeUrl: io.containerd.runsc.v1.options, ConfigPath: /etc/containerd/runsc.toml}}}
    recreate: {pods: [6a1f0c2e-0000-4000-8000-00000000a001], sandboxes: [7d2c0e8f3b1a]}
findings:
  description: Findings (id, severity, title, subject, evidence, remedy, fix).
  returned: always
  type: list
  elements: dict
  sample:
    - id: gvisor.sandbox_oversized
      severity: critical
      subject: 7d2c0e8f3b1a9c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5
      evidence: {total_memory: 25276510208, memory_limit: 268435456, limited_by: /kubepods/burstable/pod6a1f0c2e-0000-4000-8000-00000000a001}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import detect as gvisor_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options


def build_module():
    return redacting(AnsibleModule)(
        argument_spec=core_options.module_spec(gvisor_detect),
        supports_check_mode=True,
    )


@redacted_main
def main():
    module = build_module()
    module.exit_json(changed=False, **core_options.run_check(module, gvisor_detect))


if __name__ == "__main__":
    main()
