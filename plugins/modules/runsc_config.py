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
version_added: "0.1.0"
description:
  - Ensures entries in the gVisor shim configuration that containerd's runsc runtime names with C(ConfigPath)
    (usually C(/etc/containerd/runsc.toml)).
  - The C([runsc_config]) table is a C(map[string]string) for the shim; each entry becomes C(--key=value) on
    runsc's command line. Values are always written as quoted TOML strings (V(true) becomes C("true")) because an
    unquoted C(true) makes the shim fail to decode the file for every pod.
  - Top-level keys (C(log_path), C(log_level), C(binary_name), C(root), C(shim_cgroup), C(io_uid), C(io_gid) and
    others) are set with O(settings).
  - Edits with tomlkit, so every other key, comment and blank line stays as it was. Atomic write with an optional
    backup; nothing is written when the existing file is malformed or already holds unquoted values in
    C([runsc_config]).
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
      - Booleans and numbers are converted to strings (V(true) -> C("true")).
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
  mode:
    description: Mode of a newly created file (an existing file keeps its owner and mode).
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
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._common import atomic_write, file_diff, read_text

TOMLKIT_IMP_ERR = None
try:
    import tomlkit
    HAS_TOMLKIT = True
except ImportError:
    HAS_TOMLKIT = False
    TOMLKIT_IMP_ERR = traceback.format_exc()

INT_SETTINGS = ("io_uid", "io_gid")
STR_SETTINGS = ("log_path", "log_level", "binary_name", "root", "shim_cgroup")


def as_string(value):
    """The quoted-string form the shim's map[string]string needs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def plain(value):
    """A tomlkit item as a plain Python value (tomlkit < 0.11 has no unwrap())."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if hasattr(value, "value") and not isinstance(value, dict):
        return value.value
    return value


def _indent_of(table):
    """Indentation of the existing entries of a table (0 when none)."""
    for _key, item in table.value.body:
        trivia = getattr(item, "trivia", None)
        if _key is not None and trivia is not None:
            return len(trivia.indent.replace("\t", "    "))
    return 0


def fmt(value):
    if value is None:
        return "(absent)"
    if isinstance(value, str):
        return '"%s"' % value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_settings(module, settings):
    for key, value in settings.items():
        if key in INT_SETTINGS:
            if isinstance(value, bool) or not isinstance(value, int):
                try:
                    settings[key] = int(str(value))
                except ValueError:
                    module.fail_json(msg="settings.%s must be an integer, got %r" % (key, value))
        elif key in STR_SETTINGS and not isinstance(value, str):
            module.fail_json(msg="settings.%s must be a string, got %r" % (key, value))
        elif key == "runsc_config":
            module.fail_json(msg="settings cannot hold runsc_config: use the runsc_config option")
        elif isinstance(value, (dict, list)):
            module.fail_json(msg="settings.%s must be a scalar, got %r" % (key, value))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/containerd/runsc.toml"),
            runsc_config=dict(type="dict", default={}),
            runsc_config_absent=dict(type="list", elements="str", default=[]),
            settings=dict(type="dict", default={}),
            settings_absent=dict(type="list", elements="str", default=[]),
            create=dict(type="bool", default=True),
            backup=dict(type="bool", default=False),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    if not HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit (Debian: python3-tomlkit)"), exception=TOMLKIT_IMP_ERR)
    p = module.params
    path = p["path"]
    wanted = dict((str(k), as_string(v)) for k, v in p["runsc_config"].items())
    both = set(wanted) & set(p["runsc_config_absent"])
    if both:
        module.fail_json(msg="keys both wanted and absent in runsc_config: %s" % ", ".join(sorted(both)))
    settings = dict(p["settings"])
    check_settings(module, settings)
    both = set(settings) & set(p["settings_absent"])
    if both:
        module.fail_json(msg="keys both wanted and absent in settings: %s" % ", ".join(sorted(both)))
    mode = p["mode"]
    if isinstance(mode, str):
        try:
            mode = int(mode, 8)
        except ValueError:
            module.fail_json(msg="mode must be an octal string such as '0644', got %r" % p["mode"])

    if os.path.isdir(path):
        module.fail_json(msg="%s is a directory" % path)
    before = read_text(path)
    if before is None:
        if os.path.exists(path):
            module.fail_json(msg="%s exists but cannot be read" % path)
        if not p["create"]:
            module.fail_json(msg="%s does not exist and create=false" % path)
        if not os.path.isdir(os.path.dirname(path) or "."):
            module.fail_json(msg="directory %s does not exist" % os.path.dirname(path))
        before_text = ""
    else:
        before_text = before
    try:
        doc = tomlkit.parse(before_text)
    except Exception as exc:
        module.fail_json(msg="%s is not valid TOML, nothing changed: %s" % (path, exc))

    table = doc.get("runsc_config")
    if table is not None and not isinstance(table, dict):
        module.fail_json(msg="%s: runsc_config is not a table, nothing changed" % path)
    if table is not None:
        unquoted = sorted(k for k, v in table.items() if not isinstance(plain(v), str))
        if unquoted:
            module.fail_json(
                msg=("%s: [runsc_config] holds values that are not quoted strings (%s); containerd-shim-runsc-v1 "
                     "decodes this table as map[string]string and fails on them. Quote them (e.g. "
                     "systemd-cgroup = \"true\") and run again; nothing changed."
                     % (path, ", ".join("%s = %s" % (k, fmt(plain(table[k]))) for k in unquoted))),
                path=path,
            )

    changes = []
    for key, value in sorted(settings.items()):
        current = plain(doc.get(key))
        if isinstance(current, dict):
            module.fail_json(msg="%s: top-level key %s is a table, nothing changed" % (path, key))
        if current != value or type(current) is not type(value):
            changes.append("%s: %s -> %s" % (key, fmt(current), fmt(value)))
            # tomlkit places a new top-level key above the first table
            doc[key] = value
    for key in p["settings_absent"]:
        if key in doc and not isinstance(plain(doc.get(key)), dict):
            changes.append("%s: %s -> (absent)" % (key, fmt(plain(doc.get(key)))))
            del doc[key]

    for key, value in sorted(wanted.items()):
        current = plain(table.get(key)) if table is not None else None
        if current != value:
            changes.append("runsc_config.%s: %s -> %s" % (key, fmt(current), fmt(value)))
            if table is None:
                table = tomlkit.table()
                doc.add("runsc_config", table)
                table = doc["runsc_config"]
            if key in table:
                table[key] = value
            else:
                table.add(key, value)
                indent = _indent_of(table)
                if indent:
                    table[key].indent(indent)
    for key in p["runsc_config_absent"]:
        if table is not None and key in table:
            changes.append("runsc_config.%s: %s -> (absent)" % (key, fmt(plain(table.get(key)))))
            del table[key]

    after_text = tomlkit.dumps(doc)
    if before is None:
        # a new file is always written, even without entries: containerd's ConfigPath must exist
        changes.append("%s: created" % path)
        if not after_text.strip():
            after_text = "# containerd-shim-runsc-v1 configuration (nodefix.k8s.runsc_config)\n"
    if changes and not after_text.endswith("\n"):
        after_text += "\n"
    # the result must read back with quoted strings only
    check = tomlkit.parse(after_text)
    final_table = plain(check.get("runsc_config")) or {}
    final_settings = dict((k, plain(v)) for k, v in check.items() if not isinstance(plain(v), dict))

    changed = bool(changes)
    result = dict(changed=changed, path=path, runsc_config=final_table, settings=final_settings, changes=changes)
    if module._diff:
        result["diff"] = file_diff(path, before, after_text)
    if changed and not module.check_mode:
        try:
            backup_file = atomic_write(module, path, after_text, backup=p["backup"], mode=mode)
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot write %s: %s" % (path, exc))
        if backup_file:
            result["backup_file"] = backup_file
    module.exit_json(**result)


if __name__ == "__main__":
    main()
