#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: containerd_info
short_description: Report containerd and runc versions, config schema, runtimes and socket health
version_added: 1.0.0
description:
  - Read-only. Parses C(containerd --version) of upstream builds (C(v1.7.0-rc.1)), distribution builds
    (Debian C(1.6.20~ds1)) and 2.x builds (C(github.com/containerd/containerd/v2 2.1.9+unknown)), and flags
    pre-releases (alpha, beta, rc).
  - Finds the config file the running containerd uses (its C(--config) flag, else C(/etc/containerd/config.toml)),
    its schema version (1 - 4), the CRI runtimes registered with their types and options, and runc's C(SystemdCgroup).
  - Reports the runc version (the binary named by runc's C(BinaryName) option, else C(runc)) and whether it predates
    v1.0.0-rc5, the first release that rounds systemd CPU quotas (opencontainers/runc PR 1651).
  - Checks that containerd answers on its socket (C(ctr version) reports a server version).
  - Returns findings with stable ids (see C(docs/findings.md)); the same detector runs inside M(nodefix.k8s.node_audit).
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - tomlkit (Debian/Ubuntu C(python3-tomlkit)) on the managed node to read the config
options:
  minimum_version:
    description: Versions of containerd below this are reported as C(containerd.version_below_minimum). Empty disables the check.
    type: str
    default: 1.6.0
  config_path:
    description: Config file to read instead of the one the running containerd uses.
    type: path
  containerd_binary:
    description: containerd binary (name looked up on PATH and sbin directories, or an absolute path).
    type: str
    default: containerd
  ctr_binary:
    description: ctr binary used for the socket check.
    type: str
    default: ctr
  runc_binary:
    description: runc binary; by default runc's C(BinaryName) from the config, else C(runc).
    type: str
  check_socket:
    description: Run C(ctr --address <socket> version) to check the daemon answers.
    type: bool
    default: true
  timeout:
    description: ctr's C(--timeout) for the socket check (a Go duration).
    type: str
    default: 5s
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.read_only
  - nodefix.k8s.root
attributes:
  platform:
    details: Linux nodes.
seealso:
  - module: nodefix.k8s.containerd_config
"""

EXAMPLES = r"""
- name: Inspect containerd
  nodefix.k8s.containerd_info:
    minimum_version: 1.7.0
  register: ctrd

- name: Fail on a release candidate
  ansible.builtin.assert:
    that: not ctrd.prerelease
    fail_msg: "containerd {{ ctrd.version }} is a pre-release"
"""

RETURN = r"""
installed:
  description: Whether a containerd binary was found.
  returned: always
  type: bool
binary:
  description: Path of the containerd binary.
  returned: always
  type: str
  sample: /usr/bin/containerd
version:
  description: Normalised containerd version (C(X.Y.Z) or C(X.Y.Z-<pre-release>)).
  returned: always
  type: str
  sample: 1.7.0-rc.1
version_info:
  description: Parsed C(containerd --version) (base, major, minor, patch, prerelease, distro_suffix, build, package, revision, line).
  returned: always
  type: dict
prerelease:
  description: Whether containerd is an alpha, beta or release candidate.
  returned: always
  type: bool
minimum_version:
  description: The minimum the version was compared against.
  returned: always
  type: str
config_path:
  description: Config file in use.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
config_source:
  description: Where O(config_path) came from (V(cmdline), V(default) or V(option)).
  returned: always
  type: str
config_exists:
  description: Whether the config file exists (containerd uses built-in defaults without it).
  returned: always
  type: bool
edit_library:
  description:
    - Whether tomlkit, the library the config modules edit TOML with, is on the node. Reading needs it only on
      Python before 3.11 (tomllib), so a role installs the package only on a node this says lacks it.
  returned: always
  type: bool
  sample: true
config_error:
  description: Why the config could not be read (bad TOML, unknown schema version, unreadable).
  returned: always
  type: str
schema_version:
  description: Config schema (1 - 4); for a missing file the schema the binary writes.
  returned: always
  type: int
  sample: 2
runtimes:
  description: CRI runtimes registered in the config.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "runc", "runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": true}, "settings": {},
            "table": 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc'}]
runc_systemd_cgroup:
  description: runc's C(SystemdCgroup) (null when not set, which means false).
  returned: always
  type: bool
runc:
  description: runc binary, version, parsed version and whether it has the CPU-quota rounding bug (older than v1.0.0-rc5).
  returned: always
  type: dict
  sample: {"binary": "/usr/sbin/runc", "version": "1.1.5", "cpu_quota_rounding_bug": false}
socket:
  description: containerd's gRPC address, whether C(ctr version) got a server answer, the server version (raw and as C(X.Y.Z)), and the error.
  returned: always
  type: dict
  sample: {"address": "/run/containerd/containerd.sock", "reachable": true, "server_version": "1.6.20~ds1", "server_base": "1.6.20", "error": null}
daemon:
  description: The running containerd process (pid, argv, start time as epoch seconds), null when none runs.
  returned: always
  type: dict
  sample: {"pid": 812, "argv": ["/usr/bin/containerd"], "started": 1795244277.52}
findings:
  description: Findings (ids C(containerd.prerelease), C(containerd.version_below_minimum), C(containerd.socket_unreachable),
    C(containerd.config_invalid), C(runc.cpu_quota_rounding_bug)).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options


def argument_spec():
    return core_options.module_spec(containerd_detect)


def build_module():
    return redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)


@redacted_main
def main():
    module = build_module()
    facts = core_options.run_check(module, containerd_detect)
    module.exit_json(changed=False, edit_library=containerd_cfg.HAS_TOMLKIT, **facts)


if __name__ == "__main__":
    main()
