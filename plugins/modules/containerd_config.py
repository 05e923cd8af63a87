#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: containerd_config
short_description: Ensure runtime entries and runc's SystemdCgroup in containerd's config.toml
version_added: 1.0.0
description:
  - Registers container runtimes (for example gVisor's C(runsc) with C(ConfigPath)) and sets runc's
    C(SystemdCgroup) in containerd's C(config.toml), for every config schema containerd has used -
    version 1 (no C(version) key, C(plugins.cri)), 2 (containerd 1.3 - 1.7, C(plugins."io.containerd.grpc.v1.cri")),
    3 (containerd 2.0 - 2.2) and 4 (2.3 and later; both C(plugins."io.containerd.cri.v1.runtime")).
  - The schema is detected from the file and never mixed; a file whose C(version) is not 1 - 4 is refused.
  - Edits with the style-preserving TOML library tomlkit, so comments, quoting (containerd 2.x writes
    literal C('strings')), indentation and every untouched line stay as they were; keys that already have
    the wanted value are not rewritten, so the diff holds only the lines the change needs.
  - Optionally validates the result with the node's own containerd (C(containerd --config <candidate> config dump))
    and checks that the dump really contains the wanted entries before the file is replaced.
  - Writes atomically (temporary file in the same directory, then rename) with an optional backup; backups are
    pruned to the newest O(keep_backups). A symlinked config is edited through the link (the link stays, its
    target changes); a dangling link, a non-UTF-8 file or a file over 1 MiB is refused.
  - The edited text is parsed again before it is written and must equal the old document plus the wanted keys;
    a layout the editor cannot change safely (dotted keys or inline tables around the runtimes table) is refused
    with the keys it would have changed.
  - On any error (malformed TOML, unknown schema, bad runtime names or values, unreadable file, failed
    validation) the file is left untouched.
  - "Does not restart containerd; notify the containerd role's handler C(nodefix.k8s : restart containerd)."
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - tomlkit (Debian/Ubuntu C(python3-tomlkit)) on the managed node
options:
  path:
    description: containerd's config file.
    type: path
    default: /etc/containerd/config.toml
  keep_backups:
    description: Backups of the file kept after a write (older ones are deleted); V(0) keeps none.
    type: int
    default: 3
  runtimes:
    description:
      - Runtimes to ensure in the CRI plugin's C(runtimes) table, keyed by runtime name.
      - Names are letters, digits, C(.), C(_) and C(-) (at most 63). Values are strings (no newline), integers,
        booleans or lists of strings; C(IoUid)/C(IoGid) options are within 0..4294967295. Anything else is refused.
      - Each value is a dict with C(runtime_type) and an optional C(options) dict (the runtime's C(.options)
        table, for example C(TypeUrl) and C(ConfigPath) for runsc, or C(SystemdCgroup) for runc); other keys
        (for example C(pod_annotations)) are set on the runtime table itself.
      - Keys that are not named are kept as they are.
    type: dict
  runc_systemd_cgroup:
    description:
      - Value for runc's C(SystemdCgroup) option. Creates the runc runtime (C(io.containerd.runc.v2)) when the
        file has none. V(null) leaves it alone.
    type: bool
  schema_version:
    description:
      - The config schema the file must have. Required to create a missing or empty file unless
        O(containerd_binary) can tell (containerd 1.x writes 2, 2.0 - 2.2 write 3, 2.3+ writes 4).
      - When the file exists with a different schema the module fails instead of mixing schemas.
    type: int
    choices: [1, 2, 3, 4]
  validate:
    description:
      - Run O(containerd_binary) C(--config <candidate> config dump) on the candidate file before replacing
        the original, and check the dump shows the requested runtimes and C(SystemdCgroup).
      - The candidate is written next to O(path) (relative C(imports) keep working); in check mode it is
        written to Ansible's temporary directory instead.
    type: bool
    default: true
  containerd_binary:
    description: containerd binary used for validation and schema detection (a name looked up on PATH and the sbin directories, or an absolute path).
    type: str
    default: containerd
  backup:
    description: Keep a timestamped copy of the original file next to it when it changes.
    type: bool
    default: true
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Reports the change (and validates it) without writing the file.
  diff_mode:
    details: Before/after of the file.
  platform:
    details: Linux nodes running containerd.
seealso:
  - module: nodefix.k8s.containerd_info
  - module: nodefix.k8s.runsc_config
"""

EXAMPLES = r"""
- name: Register gVisor with its shim config and use the systemd cgroup driver for runc
  nodefix.k8s.containerd_config:
    runtimes:
      runsc:
        runtime_type: io.containerd.runsc.v1
        options:
          TypeUrl: io.containerd.runsc.v1.options
          ConfigPath: /etc/containerd/runsc.toml
    runc_systemd_cgroup: true
  notify: "nodefix.k8s : restart containerd"

- name: Only set SystemdCgroup, without validation (containerd not installed yet)
  nodefix.k8s.containerd_config:
    path: /etc/containerd/config.toml
    runc_systemd_cgroup: true
    schema_version: 2
    validate: false
"""

RETURN = r"""
path:
  description: The config file.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
schema_version:
  description: Config schema of the file (1 - 4).
  returned: always
  type: int
  sample: 2
changes:
  description: TOML tables or keys that were (or in check mode would be) changed.
  returned: always
  type: list
  elements: str
  sample: ['plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc']
validated:
  description: Whether the candidate was loaded by containerd's C(config dump) (false when validation was off or nothing changed).
  returned: always
  type: bool
validation_warnings:
  description: containerd's stderr from C(config dump) (deprecation notices, ignored keys).
  returned: when validated
  type: str
backup_file:
  description: Backup of the original file.
  returned: when changed and O(backup=true) and the file existed
  type: str
  sample: /etc/containerd/config.toml.12345.2026-01-01@00:00:00~
real_path:
  description: The file really read and written when O(path) is a symlink.
  returned: when O(path) is a symlink
  type: str
  sample: /srv/config/containerd.toml
runtimes:
  description: Runtimes registered in the resulting file.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "runsc", "runtime_type": "io.containerd.runsc.v1",
            "options": {"TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"},
            "settings": {}, "table": 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc'}]
runc_systemd_cgroup:
  description: runc's C(SystemdCgroup) in the resulting file (null when not set).
  returned: always
  type: bool
diff:
  description: Before/after of the file.
  returned: when diff mode is on and the file changes
  type: dict
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import file_diff
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import version as containerd_version
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import edit as containerd_edit


def argument_spec():
    return dict(
        path=dict(type="path", default=containerd_cfg.DEFAULT_CONFIG),
        runtimes=dict(type="dict"),
        runc_systemd_cgroup=dict(type="bool"),
        schema_version=dict(type="int", choices=list(containerd_cfg.KNOWN_SCHEMAS)),
        validate=dict(type="bool", default=True),
        containerd_binary=dict(type="str", default="containerd"),
        backup=dict(type="bool", default=True),
        keep_backups=dict(type="int", default=core_fileio.DEFAULT_KEEP_BACKUPS),
    )


def build_module():
    return redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)


def validate_candidate(module, runner, binary, path, content, runtimes, systemd_cgroup):
    """Load ``content`` with the node's containerd; fail the module on error."""
    directory = module.tmpdir if module.check_mode else (os.path.dirname(path) or ".")
    fd, tmp = tempfile.mkstemp(prefix=".%s.nodefix-validate." % os.path.basename(path), suffix=".toml", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content.encode("utf-8"))
        rc, out, err = runner.run([binary, "--config", tmp, "config", "dump"], check=False)
    finally:
        os.unlink(tmp)
    if rc != 0:
        module.fail_json(msg="%s rejects the edited config (file left unchanged): %s" % (binary, (err or out).strip()),
                         rc=rc, stdout=out, stderr=err, path=path)
    try:
        problems = containerd_edit.dump_has(out, runtimes, systemd_cgroup)
    except containerd_cfg.ContainerdConfigError as exc:
        module.fail_json(msg="cannot read %s config dump output: %s" % (binary, exc), stdout=out, stderr=err)
    if problems:
        module.fail_json(msg="%s loads the edited config but does not apply it (file left unchanged): %s" % (binary, "; ".join(problems)),
                         problems=problems, stdout=out, stderr=err, path=path)
    return err


@redacted_main
def main():
    module = build_module()
    if not containerd_cfg.HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit (Debian: python3-tomlkit)"), exception=str(containerd_cfg.TOMLKIT_IMPORT_ERROR))
    params = module.params
    path = params["path"]
    runtimes = params["runtimes"] or {}
    systemd_cgroup = params["runc_systemd_cgroup"]
    runner = Runner(module)

    result = dict(changed=False, path=path, changes=[], validated=False)
    try:
        containerd_edit.check_runtime_specs(runtimes)
        if params["keep_backups"] < 0:
            raise containerd_cfg.ContainerdConfigError("keep_backups must be 0 or more, got %d" % params["keep_backups"])
        real = core_paths.resolve_target("/", path, what="containerd config")
        before = core_paths.read_utf8(real, what="containerd config")
        if before is not None:
            containerd_cfg.parse_config(before, path)
    except NodefixError as exc:
        module.fail_json(msg=str(exc), **result)
    if real != path:
        result["real_path"] = real

    binary = None
    if params["validate"] or ((before is None or not before.strip()) and params["schema_version"] is None):
        binary = runner.bin(params["containerd_binary"])
        if binary is None and params["validate"]:
            module.fail_json(msg="containerd binary %r not found; install containerd or set validate=false" % params["containerd_binary"], **result)

    schema = params["schema_version"]
    if (before is None or not before.strip()) and schema is None and binary:
        try:
            rc, out, err = runner.run([binary, "--version"])
        except NodefixError as exc:
            module.fail_json(**dict(result, **exc.fail_kwargs()))
        info = containerd_version.parse_containerd_version(out)
        if info is None:
            module.fail_json(msg="cannot parse `%s --version` output: %r" % (binary, out), **result)
        schema = containerd_cfg.schema_for_containerd(info["version"])

    try:
        after, schema, changes = containerd_edit.edit_config(before, runtimes, systemd_cgroup, schema=schema, path=path)
        new_doc = containerd_cfg.parse_config(after, path)
    except containerd_cfg.ContainerdConfigError as exc:
        module.fail_json(msg=str(exc), **result)

    result.update(
        schema_version=schema,
        changes=changes,
        runtimes=containerd_cfg.list_runtimes(new_doc, schema),
        runc_systemd_cgroup=containerd_cfg.runc_systemd_cgroup(new_doc, schema),
    )
    if after == (before or "") and before is not None:
        module.exit_json(**result)

    if not os.path.isdir(os.path.dirname(real) or "."):
        module.fail_json(msg="directory of %s does not exist" % path, **result)
    if params["validate"]:
        result["validation_warnings"] = validate_candidate(module, runner, binary, real, after, runtimes, systemd_cgroup)
        result["validated"] = True
    result["changed"] = True
    if module._diff:
        result["diff"] = file_diff(path, before, after)
    if not module.check_mode:
        try:
            backups = core_fileio.write_files(module, [(real, after)], backup=params["backup"],
                                              keep_backups=params["keep_backups"], mode=0o644)
        except core_paths.FileSafetyError as exc:
            module.fail_json(msg=str(exc), **result)
        if backups.get(real):
            result["backup_file"] = backups[real]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
