#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runsc_config
short_description: Manage the containerd-shim-runsc-v1 configuration file (runsc.toml)
version_added: "1.0.0"
description:
  - Ensures entries in the gVisor shim configuration that containerd's runsc runtime names with C(ConfigPath)
    (usually C(/etc/containerd/runsc.toml)).
  - The C([runsc_config]) table is a C(map[string]string) for the shim; each entry becomes C(--key=value) on
    runsc's command line. Values are always written as quoted TOML strings (V(true) becomes C("true")) because an
    unquoted C(true) makes the shim fail to decode the file for every pod.
  - Top-level keys (C(log_path), C(log_level), C(binary_name), C(root), C(shim_cgroup), C(io_uid), C(io_gid) and
    others) are set with O(settings).
  - Edits with tomlkit, so every other key, comment and blank line stays as it was. Atomic write with an optional
    backup (pruned to the newest O(keep_backups)); nothing is written when the existing file is malformed, is not
    UTF-8, is over 1 MiB, or already holds unquoted values in C([runsc_config]).
  - A symlinked file is edited through the link (the link stays, its target changes); a dangling link is refused.
  - Keys and values are checked against what the shim and runsc accept before anything is written;
    C([runsc_config]) keys are runsc flag names (letters, digits, C(-), C(_), C(.)), values scalars without
    newlines; C(io_uid)/C(io_gid) within 0..4294967295. The edited text is parsed again and must hold exactly the
    wanted change.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - tomlkit (Debian package C(python3-tomlkit)) on the managed node.
options:
  path:
    description: The shim configuration file.
    type: path
    default: /etc/containerd/runsc.toml
  runsc_config:
    description:
      - Entries to ensure in C([runsc_config]), for example C(systemd-cgroup) set to C("true").
      - Booleans and numbers are converted to strings (V(true) -> C("true")); V(null), lists and dicts are refused
        (use O(runsc_config_absent) to remove a key).
    type: dict
    default: {}
  runsc_config_absent:
    description: Keys to remove from C([runsc_config]).
    type: list
    elements: str
    default: []
  settings:
    description:
      - Top-level keys to ensure. C(io_uid) and C(io_gid) must be integers; the other keys known to the shim
        (C(log_path), C(log_level), C(binary_name), C(root), C(shim_cgroup)) must be strings.
    type: dict
    default: {}
  settings_absent:
    description: Top-level keys to remove.
    type: list
    elements: str
    default: []
  create:
    description: Create the file when it does not exist (otherwise fail).
    type: bool
    default: true
  backup:
    description: Keep a timestamped copy of the previous file next to it.
    type: bool
    default: false
  keep_backups:
    description: Backups of the file kept after a write (older ones are deleted); V(0) keeps none.
    type: int
    default: 3
  mode:
    description: Mode of a newly created file, an octal string like C("0640") (an existing file keeps its owner and mode).
    type: raw
    default: "0644"
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Reports the change without writing the file.
  diff_mode:
    details: Before/after text of the file.
  platform:
    details: Linux nodes running containerd-shim-runsc-v1.
seealso:
  - module: nodefix.k8s.runsc_info
  - module: nodefix.k8s.containerd_config
"""

EXAMPLES = r"""
- name: Tell runsc that the node uses the systemd cgroup driver
  nodefix.k8s.runsc_config:
    path: /etc/containerd/runsc.toml
    runsc_config:
      systemd-cgroup: "true"
    backup: true

- name: Never pass systemd-cgroup on a cgroupfs node, keep a debug log
  nodefix.k8s.runsc_config:
    runsc_config_absent: [systemd-cgroup]
    settings:
      log_level: debug
      log_path: /var/log/runsc/%ID%/shim.log
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/containerd/runsc.toml
runsc_config:
  description: The C([runsc_config]) table after the change.
  returned: always
  type: dict
  sample: {systemd-cgroup: "true"}
settings:
  description: The top-level keys after the change.
  returned: always
  type: dict
  sample: {log_level: debug}
changes:
  description: Human-readable list of what changed (or would change).
  returned: always
  type: list
  elements: str
  sample: ['runsc_config.systemd-cgroup: (absent) -> "true"']
real_path:
  description: The file really read and written when O(path) is a symlink.
  returned: when O(path) is a symlink
  type: str
  sample: /srv/gvisor/runsc.toml
backup_file:
  description: The backup, when one was made.
  returned: changed and O(backup=true)
  type: str
  sample: /etc/containerd/runsc.toml.12345.2026-11-21@07:00:00~
diff:
  description: Before and after text of the file (with C(--diff)).
  returned: diff mode
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import file_diff
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import runsc_toml as gvisor_runsc_toml


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            path=dict(type="path", default="/etc/containerd/runsc.toml"),
            runsc_config=dict(type="dict", default={}),
            runsc_config_absent=dict(type="list", elements="str", default=[]),
            settings=dict(type="dict", default={}),
            settings_absent=dict(type="list", elements="str", default=[]),
            create=dict(type="bool", default=True),
            backup=dict(type="bool", default=False),
            keep_backups=dict(type="int", default=core_fileio.DEFAULT_KEEP_BACKUPS),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    if not gvisor_runsc_toml.HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit (Debian: python3-tomlkit)"), exception=gvisor_runsc_toml.TOMLKIT_IMP_ERR)
    p = module.params
    path = p["path"]
    try:
        wanted, settings = gvisor_runsc_toml.check_inputs(p)
        mode = core_fileio.check_mode_value(p["mode"])
        if p["keep_backups"] < 0:
            raise gvisor_runsc_toml.RunscTomlError("keep_backups must be 0 or more, got %d" % p["keep_backups"])
        real = core_paths.resolve_target("/", path, what="runsc shim config")
        before = core_paths.read_utf8(real, what="runsc shim config")
        if before is None:
            if not p["create"]:
                raise gvisor_runsc_toml.RunscTomlError("%s does not exist and create=false" % path)
            if not os.path.isdir(os.path.dirname(real) or "."):
                raise gvisor_runsc_toml.RunscTomlError("directory %s does not exist" % os.path.dirname(real))
        after_text, changes, final_table, final_settings = gvisor_runsc_toml.edit(
            before, path, wanted, p["runsc_config_absent"], settings, p["settings_absent"])
    except NodefixError as exc:
        module.fail_json(msg=str(exc), path=path)

    changed = bool(changes)
    result = dict(changed=changed, path=path, runsc_config=final_table, settings=final_settings, changes=changes)
    if real != path:
        result["real_path"] = real
    if module._diff:
        result["diff"] = file_diff(path, before, after_text)
    if changed and not module.check_mode:
        try:
            backups = core_fileio.write_files(module, [(real, after_text)], backup=p["backup"],
                                              keep_backups=p["keep_backups"], mode=mode)
        except core_paths.FileSafetyError as exc:
            module.fail_json(msg=str(exc), **result)
        if backups.get(real):
            result["backup_file"] = backups[real]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
