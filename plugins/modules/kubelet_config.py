#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_config
short_description: Ensure KubeletConfiguration fields where the kubelet really reads them, without stale flags winning
version_added: 1.0.0
description:
  - Discovers how the node's kubelet is configured from its systemd unit (C(systemctl cat kubelet)) - C(ExecStart),
    C(Environment=), C(EnvironmentFile=) (including the optional C(-) prefix) and unit drop-ins - and so finds the
    kubeadm layout (C(/var/lib/kubelet/config.yaml), C(kubeadm-flags.env), C(/etc/default/kubelet) or
    C(/etc/sysconfig/kubelet)), the kubespray layout (C(/etc/kubernetes/kubelet-config.yaml),
    C(/etc/kubernetes/kubelet.env)), C(--config-dir) drop-in directories and flags-only kubelets.
  - Reports every managed field's effective value and where it comes from. Precedence, lowest to highest - version
    default, C(--config) file, C(--config-dir) C(*.conf) drop-ins in lexical order, command-line flags.
  - Ensures the requested fields in the right place - a drop-in owned by this collection when the kubelet runs with
    C(--config-dir), otherwise the C(--config) file edited in place (comments, key order and untouched keys kept).
  - Removes (or rewrites) deprecated flags such as C(--kube-api-qps) that would override the requested values, in
    every environment file and unit file of the kubelet unit, and reports each one.
  - By default never lowers a rate limit below the requested value, the kubelet version's default (50/100 for the
    API and event limits since 1.27) or the value currently in effect.
  - Refuses, before anything is written, input and combinations kubelet rejects - unknown field names, non-numeric or
    negative values, C(maxParallelImagePulls) greater than 1 while C(serializeImagePulls) stays true,
    C(maxParallelImagePulls) on a kubelet older than 1.27, unreadable or malformed YAML.
  - Flags are found the way systemd and the shell read them - line continuations (a commented line inside one
    is skipped, as systemd skips it), quotes, backslash escapes,
    C($VAR) expansion of C(Environment=) and C(EnvironmentFile=) values - and an edit removes exactly the words of
    the flag (and of its value, even on the next line), never part of another flag's value.
  - Before writing, the planned texts are parsed again by the same reader that discovered the kubelet; after
    writing, the files are read back and RV(effective) is computed from them. A change whose read-back does not hold
    the requested values is refused before the write or undone after it.
  - Files are written through symlinks (the link stays, its target changes), all-or-nothing, keeping mode and
    owner; backups are pruned to the newest O(keep_backups). A path from the node's files that resolves outside
    O(root), a dangling symlink, a non-UTF-8 file or one over 1 MiB is refused with a message naming it.
  - Does not restart kubelet. Use the RV(restart_required) return value, or the C(nodefix.k8s.kubelet) role's
    safe-restart handler, which restores RV(backups) when the restarted kubelet is not healthy.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - ruamel.yaml on the managed node to edit YAML (Debian/Ubuntu package C(python3-ruamel.yaml)).
options:
  settings:
    description:
      - KubeletConfiguration fields to ensure, by their config-file names.
      - Supported - V(kubeAPIQPS), V(kubeAPIBurst), V(eventRecordQPS), V(eventBurst), V(registryPullQPS),
        V(registryBurst), V(serializeImagePulls), V(maxParallelImagePulls), V(podPidsLimit), V(maxPods),
        V(evictionHard), V(evictionSoft), V(systemReserved), V(kubeReserved).
      - Maps (V(evictionHard), V(systemReserved) ...) are merged into the map in effect; when V(evictionHard) was not
        set anywhere the kubelet defaults are kept for the other signals (a partial map disables them otherwise).
      - Quantities are read the way Kubernetes reads them (C(resource.Quantity) - C(500Mi), C(1.5G), C(100m), C(12e6))
        and bounded as it bounds them (2^63-1 at most - C(1e999) is refused). Reservations the node cannot hold are
        refused before anything is written, by the kubelet's own rule (C(validateNodeAllocatable) in
        C(pkg/kubelet/cm/node_container_manager_linux.go)) - for every resource V(systemReserved) plus V(kubeReserved)
        plus the hard eviction reservation (V(evictionHard) C(memory.available) for memory, C(nodefs.available) for
        ephemeral storage; the kubelet's defaults when V(evictionHard) is not set) must stay below the node's
        capacity, read from the node (MemTotal, the online CPUs, the smaller of C(kernel.pid_max) and
        C(kernel.threads-max), the filesystem of C(/var/lib/kubelet)), or the kubelet's allocatable would be zero or
        negative.
      - Empty (the default) only reports the configuration.
    type: dict
    default: {}
  profile:
    description:
      - The settings the C(nodefix.k8s.kubelet) role applies by default, as this module understands them on the
        node's kubelet version - so the version decisions are made here, once, and not in the role.
      - The rate limits are floors - a higher kubelet version default (50/100 for the API and event limits since 1.27)
        or a higher value in effect is kept, which is what a floor means, so it is not warned about (RV(raised) lists
        it with C(source=profile)).
      - Parallel image pulls - on kubelet 1.27 and later C(serializeImagePulls=false) and
        C(maxParallelImagePulls); on an older or unknown kubelet pulls stay serial unless O(profile.unbounded_parallel_pulls),
        and RV(profile.notes) says so.
      - O(settings) win over the profile field by field. Omitted (the default), no profile.
    type: dict
    suboptions:
      api_qps:
        description:
          - Floor for C(kubeAPIQPS).
          - Omitted, the collection's floor (docs/findings.md, "The kubelet rate-limit floor").
        type: int
      api_burst:
        description:
          - Floor for C(kubeAPIBurst).
          - Omitted, the collection's floor (docs/findings.md, "The kubelet rate-limit floor").
        type: int
      event_qps:
        description:
          - Floor for C(eventRecordQPS) (a current 0 means unlimited and is kept).
          - Omitted, the collection's floor (docs/findings.md, "The kubelet rate-limit floor").
        type: int
      event_burst:
        description:
          - Floor for C(eventBurst).
          - Omitted, the collection's floor (docs/findings.md, "The kubelet rate-limit floor").
        type: int
      registry_qps:
        description:
          - Floor for C(registryPullQPS) (a current 0 means unlimited and is kept).
          - Omitted, the collection's floor (docs/findings.md, "The kubelet rate-limit floor").
        type: int
      registry_burst:
        description:
          - Floor for C(registryBurst).
          - Omitted, the collection's floor (docs/findings.md, "The kubelet rate-limit floor").
        type: int
      parallel_image_pulls:
        description: Pull images in parallel (bounded by O(profile.max_parallel_image_pulls) on kubelet 1.27+).
        type: bool
        default: true
      max_parallel_image_pulls:
        description: C(maxParallelImagePulls) on kubelet 1.27 and later.
        type: int
        default: 5
      unbounded_parallel_pulls:
        description: On a kubelet older than 1.27 (or of unknown version), pull in parallel without a bound.
        type: bool
        default: false
  allow_lower:
    description:
      - Write the requested rate limits even when they are lower than the kubelet version's default or the value
        currently in effect.
    type: bool
    default: false
  stale_flags:
    description:
      - What to do with deprecated command-line flags that set a requested field.
      - V(remove) deletes them from the env files and unit files they appear in.
      - V(rewrite) keeps them but sets them to the ensured value.
    type: str
    choices: [remove, rewrite]
    default: remove
  use_config_dir:
    description:
      - When the kubelet runs with C(--config-dir), write a drop-in there instead of editing the C(--config) file
        (the drop-in survives C(kubeadm upgrade), which rewrites C(/var/lib/kubelet/config.yaml)).
    type: bool
    default: true
  dropin_name:
    description: File name of the collection's drop-in in the C(--config-dir) directory (must end in C(.conf)).
    type: str
    default: 99-nodefix-k8s.conf
  unit:
    description: The kubelet's systemd unit.
    type: str
    default: kubelet.service
  kubelet_version:
    description:
      - The kubelet version (for example V(1.29.3)); by default read from C(kubelet --version) of the unit's binary.
    type: str
  backup:
    description: Keep a timestamped copy of every file before changing it.
    type: bool
    default: true
  keep_backups:
    description: Backups kept per file after a write (older ones are deleted); V(0) keeps none.
    type: int
    default: 3
  root:
    description:
      - Root of the node's file system. Anything other than V(/) reads the unit files from that tree instead of
        asking systemctl (used by tests).
    type: path
    default: /
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Reports what would change, writes nothing.
  diff_mode:
    details: Before and after text of every file that changes.
  platform:
    details: Linux nodes with systemd.
notes:
  - kOps nodes regenerate their kubelet files at boot (nodeup); the module reports them in RV(kops) and still edits
    them when asked - change the cluster spec instead.
  - Real kubelet decodes v1beta1 files leniently and ignores unknown field names; this module rejects them in its
    input and reports them in existing files.
seealso:
  - name: Kubelet configuration file
    description: Set kubelet parameters via a configuration file.
    link: https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/
  - name: Kubelet configuration directory merging
    description: How drop-ins in C(--config-dir) merge.
    link: https://kubernetes.io/docs/reference/node/kubelet-config-directory-merging/
"""

EXAMPLES = r"""
- name: Report how kubelet is configured
  nodefix.k8s.kubelet_config:
  register: kubelet

- name: Raise the API and event limits, pull images in parallel, drop stale flags
  nodefix.k8s.kubelet_config:
    settings:
      kubeAPIQPS: 30        # raised to 50 on a 1.27+ kubelet
      kubeAPIBurst: 40      # raised to 100 on a 1.27+ kubelet
      eventRecordQPS: 30
      eventBurst: 40
      serializeImagePulls: false
      maxParallelImagePulls: 5
  register: kubelet_change
  notify: "nodefix.k8s : restart kubelet"

- name: The kubelet role's profile, decided for this kubelet's version (floors, bounded parallel pulls on 1.27+)
  nodefix.k8s.kubelet_config:
    profile:
      max_parallel_image_pulls: 10
  register: kubelet_profile

- name: Guard rails against node OOM hangs and PID exhaustion
  nodefix.k8s.kubelet_config:
    settings:
      evictionHard:
        memory.available: 500Mi
      systemReserved:
        memory: 512Mi
      podPidsLimit: 4096
"""

RETURN = r"""
edit_library:
  description:
    - Whether ruamel.yaml, the library the module edits YAML with, is on the node. Reading needs no library,
      so a read-only run tells a role whether the node needs the package before the first edit.
  returned: always
  type: bool
  sample: true
layout:
  description: How the kubelet is deployed - V(kubeadm), V(kubespray), V(kops), V(config-file) or V(flags-only).
  returned: always
  type: str
  sample: kubeadm
kops:
  description: Evidence that kOps' nodeup manages this node (empty list when not).
  returned: always
  type: list
  elements: str
version:
  description: The kubelet version used for defaults and checks.
  returned: always
  type: str
  sample: 1.29.3
unit_files:
  description: The unit file and its drop-ins, in the order systemd reads them.
  returned: always
  type: list
  elements: str
env_files:
  description: The C(EnvironmentFile=) entries of the unit.
  returned: always
  type: list
  elements: str
argv:
  description: The kubelet command line after environment expansion.
  returned: always
  type: list
  elements: str
config_path:
  description: The C(--config) file, if any.
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
config_dir:
  description: The C(--config-dir) directory, if any.
  returned: always
  type: str
dropins:
  description: Drop-in files of C(--config-dir) in merge order.
  returned: always
  type: list
  elements: str
effective:
  description:
    - Every managed field after the change with its value and source, read back from the files as written (in check
      mode, read from the texts that would be written).
    - C(source) is one of V(default), V(config), V(drop-in), V(flag); C(path), C(flag) and C(variable) say where.
  returned: always
  type: dict
  sample: {"kubeAPIQPS": {"value": 50, "source": "config", "path": "/var/lib/kubelet/config.yaml"}}
before:
  description: The same as RV(effective), before the change.
  returned: always
  type: dict
deprecated_flags:
  description: Deprecated flags found on the kubelet command line (before the change).
  returned: always
  type: list
  elements: dict
  sample: [{"flag": "--kube-api-qps", "field": "kubeAPIQPS", "value": 5, "path": "/etc/default/kubelet", "variable": "KUBELET_EXTRA_ARGS"}]
flag_edits:
  description: Every flag removed or rewritten, with the file it was in.
  returned: always
  type: list
  elements: dict
target:
  description: The value ensured for each requested field.
  returned: always
  type: dict
  sample: {"kubeAPIQPS": 50, "serializeImagePulls": false}
target_path:
  description: The file the fields were written to.
  returned: when settings were given
  type: str
raised:
  description:
    - Values that were raised to the version default or the value in effect, with C(source) - V(settings) (an
      explicit request, warned about) or V(profile) (a floor of O(profile), kept quiet).
  returned: always
  type: list
  elements: dict
  sample: [{"field": "kubeAPIQPS", "requested": 30, "written": 50, "reason": "version default", "source": "settings"}]
profile:
  description: What O(profile) means on this kubelet.
  returned: when O(profile) is given
  type: dict
  contains:
    settings:
      description: The KubeletConfiguration fields of the profile for this kubelet version (before O(settings) win).
      type: dict
      sample: {"kubeAPIQPS": 30, "kubeAPIBurst": 40, "serializeImagePulls": false, "maxParallelImagePulls": 5}
    floors:
      description: The fields applied as floors (the profile's rate limits not overridden by O(settings)).
      type: list
      elements: str
    notes:
      description: What the profile could not do on this kubelet, in words (parallel pulls before 1.27).
      type: list
      elements: str
      sample:
        - "kubelet 1.26.15 cannot bound parallel image pulls (maxParallelImagePulls needs 1.27): image pulls stay
          serial; set unbounded_parallel_pulls to pull in parallel without a bound"
files:
  description: Files changed (or that would change), with C(created) and C(unit) (a systemd unit file) flags.
  returned: always
  type: list
  elements: dict
backups:
  description: Backup copies made, as C(path)/C(backup) pairs, for a rollback.
  returned: always
  type: list
  elements: dict
created:
  description: Files created by this run (a rollback deletes them).
  returned: always
  type: list
  elements: str
daemon_reload_required:
  description: A systemd unit file changed; run C(systemctl daemon-reload) before restarting kubelet.
  returned: always
  type: bool
restart_required:
  description: Something kubelet reads at start changed; restart kubelet to apply it.
  returned: always
  type: bool
findings:
  description:
    - Problems found in the configuration before the change (see docs/kubelet.md for the ids).
    - With O(settings), also C(kubelet.fix_not_durable) when a wanted setting lives in a file the node's cluster
      tool rewrites (RV(durability)).
  returned: always
  type: list
  elements: dict
durability:
  description:
    - Whether each setting of O(settings) survives the next run of the tool that manages the node's kubelet files,
      and where to make it durable when it does not. C(kubeadm upgrade node) rewrites C(/var/lib/kubelet/config.yaml)
      from the C(kube-system/kubelet-config) ConfigMap and C(kubeadm-flags.env) from the kubeadm configuration; the
      next kubespray run re-templates C(/etc/kubernetes/kubelet-config.yaml) and C(kubelet.env) from inventory
      variables (named per setting); kOps' nodeup rewrites everything from C(spec.kubelet). A drop-in in
      C(--config-dir) survives all three.
  returned: when O(settings) is given and the plan could be made
  type: dict
  contains:
    manager:
      description: V(kubeadm), V(kubespray), V(kops), or null when no known tool manages the files.
      type: str
    durable:
      description: Every setting and flag removal survives.
      type: bool
    settings:
      description: Per wanted setting - C(field), C(value), C(path) it comes from, C(durable), C(durable_in).
      type: list
      elements: dict
    flags:
      description: Per stale flag removed or rewritten - the edit, C(durable), C(durable_in).
      type: list
      elements: dict
  sample: {"manager": "kubespray", "durable": false, "flags": [],
           "settings": [{"field": "kubeAPIQPS", "value": 50, "path": "/etc/kubernetes/kubelet-config.yaml",
                         "durable": false,
                         "durable_in": "the kubespray inventory variable kubelet_config_extra_args: {kubeAPIQPS: 50}"}]}
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import file_diff
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import detect as kubelet_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import plan as kubelet_plan
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import durable as kubelet_durable
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml as kubelet_config_yaml
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema


def build_module():
    return redacting(AnsibleModule)(
        # unit and kubelet_version are the kubelet detector's options (node_audit's options.kubelet)
        argument_spec=core_options.module_spec(
            kubelet_detect,
            settings=dict(type="dict", default={}),
            profile=dict(type="dict", options=kubelet_schema.PROFILE_OPTIONS),
            allow_lower=dict(type="bool", default=False),
            stale_flags=dict(type="str", default="remove", choices=["remove", "rewrite"]),
            use_config_dir=dict(type="bool", default=True),
            dropin_name=dict(type="str", default=kubelet_schema.DEFAULT_DROPIN_NAME),
            backup=dict(type="bool", default=True),
            keep_backups=dict(type="int", default=core_fileio.DEFAULT_KEEP_BACKUPS),
        ),
        supports_check_mode=True,
    )


def _write_all(module, files, root, backup, keep_backups):
    """Write every planned file all-or-nothing (through symlinks); return (backups, created)."""
    changes = []
    try:
        for f in files:
            real = core_paths.resolve_target(root, core_paths.node_path(root, f["path"]), what="kubelet file")
            if f["created"] and not os.path.isdir(os.path.dirname(real)):
                raise kubelet_schema.KubeletError("drop-in directory %s does not exist" % os.path.dirname(f["path"]))
            changes.append((real, f["after"]))
        written = core_fileio.write_files(module, changes, backup=backup, keep_backups=keep_backups)
    except NodefixError as exc:
        module.fail_json(msg="writing the kubelet configuration failed: %s" % exc.msg)
    backups = []
    for f, (real, _text) in zip(files, changes):
        bfile = written.get(real)
        if bfile:
            backups.append({"path": f["path"], "backup": bfile if root in ("/", "", None) else "/" + os.path.relpath(bfile, root)})
    return backups, [f["path"] for f in files if f["created"]], changes


def _undo(module, files, changes):
    """Put back what _write_all wrote (the re-read after the write disagreed)."""
    restore = [(real, f["before"]) for f, (real, _t) in zip(files, changes) if not f["created"]]
    core_fileio.write_files(module, restore, backup=False)
    for f, (real, _t) in zip(files, changes):
        if f["created"] and os.path.exists(real):
            os.unlink(real)


def _check_params(module):
    """What the argument spec cannot say; fails before anything is read."""
    p = module.params
    errors = core_options.value_errors(kubelet_detect, p)
    if p["keep_backups"] < 0:
        errors.append("keep_backups must be 0 or more, got %d" % p["keep_backups"])
    if not p["dropin_name"].endswith(".conf") or "/" in p["dropin_name"] or p["dropin_name"].startswith("."):
        errors.append("dropin_name must be a file name ending in .conf (kubelet only reads *.conf drop-ins)")
    if errors:
        module.fail_json(msg="; ".join(errors))


def _inspect(module, runner):
    """(node, layers, facts, settings, profile): the node read, and the settings asked for (with the profile's)."""
    p = module.params
    profile = None
    try:
        settings = kubelet_schema.validate_settings(p["settings"])
        node, layers, facts = kubelet_detect.inspect(runner, p["root"], unit=p["unit"], kubelet_version=p["kubelet_version"],
                                                     roundtrip=bool(settings) or p["profile"] is not None)
        if p["profile"] is not None:
            # the profile as this kubelet version understands it; explicit settings win over it
            wanted, floors, notes = kubelet_schema.profile_settings(p["profile"], node.version, node.version_text)
            profile = {"settings": wanted, "floors": [f for f in floors if f not in settings], "notes": notes}
            settings = kubelet_schema.validate_settings(dict(wanted, **settings))
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    if settings and kubelet_config_yaml.ruamel() is None:
        module.fail_json(msg=missing_required_lib("ruamel.yaml (Debian/Ubuntu: python3-ruamel.yaml)"),
                         exception=str(kubelet_config_yaml.ruamel_error()))
    if not facts.get("present"):
        module.fail_json(msg="no systemd unit %s found on this node" % p["unit"])
    return node, layers, facts, settings, profile


def _read_result(facts, profile):
    """The result of a read: what the node has, nothing planned yet."""
    result = dict(
        changed=False, layout=facts["layout"], kops=facts["kops"], version=facts["version"],
        unit_files=facts["unit_files"], env_files=facts["env_files"], argv=facts["argv"],
        config_path=facts["config_path"], config_dir=facts["config_dir"], dropins=facts["dropins"],
        before=facts["effective"], effective=facts["effective"], deprecated_flags=facts["deprecated_flags"],
        flag_edits=[], target={}, raised=[], files=[], backups=[], created=[], daemon_reload_required=False,
        restart_required=False, findings=facts["findings"], edit_library=kubelet_config_yaml.ruamel() is not None,
    )
    if profile is not None:
        result["profile"] = profile
    return result


def _write_and_reread(module, node, planned, result, before):
    """Write the planned files, read them back; undo and fail when the files do not give the targets."""
    p = module.params
    files = planned["files"]
    backups, created, changes = _write_all(module, files, p["root"], p["backup"], p["keep_backups"])
    result["backups"] = backups
    result["created"] = created
    # the after-state reported is read back from the files as written
    try:
        config, sources = kubelet_plan.reread(node, p["root"])
        missing = kubelet_plan.missing_targets(config, planned["targets"])
    except kubelet_schema.KubeletError as exc:
        config, missing = None, ["(unreadable: %s)" % exc.msg]
    if missing:
        _undo(module, files, changes)
        module.fail_json(msg="the files as written do not give %s; the change was undone" % ", ".join(missing),
                         before=before)
    result["effective"] = kubelet_node.report(config, sources)


@redacted_main
def main():
    """Validate, inspect, plan, diff, write, re-read (undo on a mismatch)."""
    module = build_module()
    p = module.params
    _check_params(module)
    node, layers, facts, settings, profile = _inspect(module, Runner(module))
    result = _read_result(facts, profile)
    if facts["kops"]:
        module.warn("kOps manages this node (%s): nodeup regenerates the kubelet files; change the cluster spec instead"
                    % ", ".join(facts["kops"]))
    if not settings:
        module.exit_json(**result)

    try:
        planned = kubelet_plan.plan(node, layers, settings, allow_lower=p["allow_lower"], stale_mode=p["stale_flags"],
                                    dropin_name=p["dropin_name"], use_config_dir=p["use_config_dir"], root=p["root"],
                                    floors=profile["floors"] if profile else (), capacity=kubelet_node.node_capacity(p["root"]))
    except kubelet_schema.KubeletError as exc:
        module.fail_json(msg=exc.msg, **dict(exc.details, before=facts["effective"]))

    files = planned["files"]
    result.update(
        effective=planned["after"],
        target=planned["targets"],
        target_path=planned["target_path"],
        raised=planned["raised"],
        flag_edits=planned["flag_edits"],
        files=[{"path": f["path"], "created": f["created"], "unit": f["unit"]} for f in files],
        changed=bool(files),
        daemon_reload_required=any(f["unit"] for f in files),
        restart_required=bool(files),
    )
    # will the fix survive the tool that manages the node (kubeadm, kubespray, kOps)?
    result["durability"] = kubelet_durable.durability(facts["layout"], planned["targets"], planned["after"], planned["flag_edits"])
    result["findings"] = facts["findings"] + kubelet_durable.findings(result["durability"])
    for r in [r for r in planned["raised"] if r["source"] == "settings"] if files else []:
        module.warn("%s: requested %s, ensured %s (%s); set allow_lower to force the lower value"
                    % (r["field"], r["requested"], r["written"], r["reason"]))
    if module._diff:
        result["diff"] = [file_diff(f["path"], f["before"], f["after"]) for f in files]
    if files and not module.check_mode:
        _write_and_reread(module, node, planned, result, facts["effective"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
