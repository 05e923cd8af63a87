# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""gVisor (runsc) detector: sandboxes that ignore their pod's memory limit.

Sources:

- google/gvisor#9580, fixed by PR #9631, first in release-20231106.0: under
  cgroup v2 older runsc read ``memory.max``/``cpu.max`` of the leaf cgroup
  only, saw ``max`` and sized the sandbox to the whole host.
- ``systemd-cgroup`` exists from release-20220321.0 (PR #7287); runsc's
  systemd driver needs systemd >= 244 and cgroup v2 (g3doc/user_guide/systemd.md).
  Measured in this project's lab on a hybrid (v1) node: runsc 0.0~20221219.0
  given ``--systemd-cgroup`` and ``system.slice:prefix:id`` creates the literal
  cgroup ``/system.slice:prefix:id`` at the top of every v1 hierarchy.
- The shim (containerd-shim-runsc-v1) reads its config only from the
  ``ConfigPath`` option of containerd's runsc runtime; ``[runsc_config]`` is a
  ``map[string]string`` (an unquoted ``true`` breaks decoding) and each entry
  becomes ``--key=value`` on runsc's command line.
- Live sandboxes: the ``runsc-sandbox`` process (``runsc ... boot ... <id>``)
  carries ``--total-memory <bytes>``; compare with the effective memory limit of
  its cgroup found by walking up the tree. Measured in the lab: on cgroup v2
  (the VM node) a sandbox without a limit of its own in a 256 MiB pod slice
  starts with the VM's RAM under 0.0~20221219.0 (``--total-memory 2060419072``)
  and with 268435456 under 0.0~20240729.0 (``--total-memory=268435456``); on
  cgroup v1 both builds size such a sandbox to the host's RAM, so only the live
  check proves a node.

``check()`` reads the node once (one ``runsc --version``, one pass over
``/proc``) and never changes anything.

Where it lives: ``_gvisor.version`` (runsc's version), ``_gvisor.node_config`` (containerd's runsc
runtimes, the cgroup driver, the shim config), ``_gvisor.sandboxes`` (the live sandboxes),
``_gvisor.remedy`` (the plan); this file holds the findings, the options and ``check()``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import UNIT as KUBELET_UNIT, unit_name_errors
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.node_config import (
    DEFAULT_CONTAINERD_CONFIG,
    DEFAULT_SHIM_CONFIG,
    node_cgroup_driver,
    read_containerd,
    read_shim_config,
    SHIM_NAME,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.remedy import plan
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.sandboxes import scan_sandboxes
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.version import (
    FIXED_RELEASE,
    parse_release,
    release_ge,
    runsc_version,
    SYSTEMD_CGROUP_RELEASE,
)

FINDINGS = {
    "gvisor.runsc_outdated": {
        "severity": "high",
        "title": "runsc predates the fix for google/gvisor#9580 (cgroup v2 sandboxes sized to the whole host)",
        "remedy": ("Upgrade runsc to release-20231106.0 or later (role nodefix.k8s.gvisor, tag gvisor_upgrade), "
                   "then recreate the gVisor pods started before the upgrade."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.runsc_version_unknown": {
        "severity": "medium",
        "title": "The runsc version could not be determined",
        "remedy": "Run `runsc --version` by hand; install a tagged release so the #9580 fix can be verified.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.runsc_missing": {
        "severity": "high",
        "title": "containerd has a runsc runtime but no runsc binary was found",
        "remedy": "Install runsc (role nodefix.k8s.gvisor) or remove the runtime from containerd's config.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.shim_missing": {
        "severity": "medium",
        "title": "containerd has a runsc runtime but containerd-shim-runsc-v1 was not found",
        "remedy": "Install containerd-shim-runsc-v1 from the same gVisor release as runsc.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.no_config_path": {
        "severity": "high",
        "title": "containerd's runsc runtime has no ConfigPath: the shim never reads a runsc.toml",
        "remedy": ("Set the runtime's options TypeUrl/ConfigPath to the shim config (role nodefix.k8s.gvisor, "
                   "tag gvisor_containerd) and restart containerd."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_containerd",
    },
    "gvisor.config_missing": {
        "severity": "high",
        "title": "The shim config named by ConfigPath does not exist",
        "remedy": "Write the shim config (role nodefix.k8s.gvisor, tag gvisor_config).",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.config_invalid": {
        "severity": "high",
        "title": "The shim config cannot be decoded by containerd-shim-runsc-v1",
        "remedy": ("Fix the TOML; every [runsc_config] value must be a quoted string "
                   "(systemd-cgroup = \"true\"), an unquoted true makes the shim fail for every pod."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.systemd_cgroup_missing": {
        "severity": "high",
        "title": "The node uses the systemd cgroup driver but runsc is not told (systemd-cgroup)",
        "remedy": ("Set [runsc_config] systemd-cgroup = \"true\" in the shim config (role nodefix.k8s.gvisor, "
                   "tag gvisor_config); without it sandboxes land outside their pod slice."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.systemd_cgroup_on_cgroupfs": {
        "severity": "high",
        "title": "systemd-cgroup is set for runsc on a node using the cgroupfs driver",
        "remedy": "Remove systemd-cgroup from [runsc_config]: on a cgroupfs node it breaks every gVisor pod.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.systemd_cgroup_unsupported": {
        "severity": "high",
        "title": "systemd-cgroup is configured but this runsc is older than release-20220321.0",
        "remedy": "Upgrade runsc (role nodefix.k8s.gvisor, tag gvisor_upgrade): older runsc refuses the flag.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.systemd_cgroup_needs_v2": {
        "severity": "medium",
        "title": "systemd cgroup driver on a cgroup v1/hybrid node: runsc's systemd driver needs cgroup v2",
        "remedy": ("runsc supports the systemd driver on cgroup v2 (systemd >= 244) only; on v1 it creates a "
                   "literal '<slice>:<prefix>:<id>' cgroup outside the pod. Move the node to cgroup v2 or to the "
                   "cgroupfs driver; the live sandbox check shows which sandboxes are affected."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.sandbox_oversized": {
        "severity": "critical",
        "title": "A running gVisor sandbox is sized above its effective memory limit",
        "remedy": ("The sandbox was sized before the fix (or by an unfixed runsc): after fixing runsc and its "
                   "config, recreate the pod (role nodefix.k8s.gvisor, gvisor_evict_pods) so a new sandbox is "
                   "sized to the limit."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_verify",
    },
    "gvisor.sandbox_outside_pod_slice": {
        "severity": "high",
        "title": "A Kubernetes gVisor sandbox runs in a cgroup outside any kubepods slice",
        "remedy": ("No pod limit applies to it. Fix the cgroup driver settings (systemd-cgroup, cgroup v2), "
                   "then recreate the pod."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_verify",
    },
}


def _mib(value):
    return None if value is None else round(value / 1048576.0, 1)


# ---------------------------------------------------------------- detector

# The detector's options (an Ansible argument spec): runsc_info's
# argument_spec and node_audit's options.gvisor, checked by _core.options.
OPTIONS = {
    "runsc_path": {"type": "path"},
    "shim_path": {"type": "path"},
    "containerd_config": {"type": "path", "default": DEFAULT_CONTAINERD_CONFIG},
    "kubelet_unit": {"type": "str", "default": KUBELET_UNIT},
    "minimum_release": {"type": "str", "default": FIXED_RELEASE},
    "inspect_sandboxes": {"type": "bool", "default": True},
    # what the remedy is planned against (the gvisor role passes its own variables)
    "runtime_name": {"type": "str", "default": "runsc"},
    "shim_config_path": {"type": "path", "default": DEFAULT_SHIM_CONFIG},
    "systemd_cgroup": {"type": "str", "default": "auto", "choices": ["auto", "never"]},
}


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    errors = unit_name_errors(p.get("kubelet_unit"), "kubelet_unit")
    if p.get("minimum_release") and parse_release(p["minimum_release"]) is None:
        errors.append("minimum_release %r is not a runsc release (expected e.g. 20231106.0)" % p["minimum_release"])
    return errors


def explicit_runsc(path):
    """An explicitly given runsc must be an executable regular file: raise NodefixError otherwise.

    A binary fresh from a download is usually mode 0644, and checking it
    silently as "not installed" would hide exactly the mistake to fix.
    """
    if not os.path.lexists(path):
        raise NodefixError("runsc_path %s does not exist" % path, path=path)
    if not os.path.isfile(path):
        raise NodefixError("runsc_path %s is not a regular file" % path, path=path)
    if not os.access(path, os.X_OK):
        mode = os.stat(path).st_mode & 0o7777
        raise NodefixError("runsc_path %s is not executable (mode %04o); a freshly downloaded binary usually is "
                           "0644: chmod 0755 it before checking it" % (path, mode), path=path, mode="%04o" % mode)


def _read_runsc(runner, name, minimum):
    """The runsc ``name`` resolves to (PATH and the node's bin directories) and what its --version says."""
    path = runner.bin(name)
    parsed, raw = (runsc_version(runner, path) if path else (None, None))
    return {
        "path": path,
        "installed": path is not None,
        "version_output": raw,
        "version": parsed["version"] if parsed else None,
        "release": parsed["release"] if parsed else None,
        "untagged": parsed["untagged"] if parsed else None,
        "flavor": parsed["flavor"] if parsed else None,
        "has_9580_fix": release_ge(parsed, minimum) if parsed else None,
        "supports_systemd_cgroup": release_ge(parsed, SYSTEMD_CGROUP_RELEASE) if parsed else None,
    }


def _binary_findings(add, facts, runtime, runsc_name):
    runsc = facts["runsc"]
    if runsc["path"] and runsc["version"] is None:
        add("gvisor.runsc_version_unknown", subject=runsc["path"], path=runsc["path"], output=runsc["version_output"])
    elif runsc["version"] and not runsc["has_9580_fix"]:
        add("gvisor.runsc_outdated", subject=runsc["path"], path=runsc["path"], version=runsc["version"],
            release=runsc["release"], minimum=facts["minimum_release"])
    if runtime and not runsc["path"]:
        add("gvisor.runsc_missing", subject=runtime["name"], runtime=runtime["name"], searched=runsc_name)
    if runtime and not facts["shim"]["installed"]:
        add("gvisor.shim_missing", subject=runtime["name"], runtime=runtime["name"], binary=SHIM_NAME)


def _config_findings(add, facts, runtime):
    """The shim config and systemd-cgroup findings: each condition next to the facts it needs."""
    shim, ctd, runsc = facts["shim_config"], facts["containerd"], facts["runsc"]
    driver, source, mode = facts["cgroup_driver"], facts["cgroup_driver_source"], facts["cgroup_layout"]
    shim_cfg_path = runtime["config_path"] if runtime and runtime["config_path"] else None
    sd_wanted = driver == "systemd"
    if runtime:
        if not runtime["config_path"]:
            if sd_wanted:
                add("gvisor.no_config_path", subject=runtime["name"], runtime=runtime["name"],
                    containerd_config=ctd["config_path"], cgroup_driver=driver, driver_source=source)
        elif not shim["exists"]:
            add("gvisor.config_missing", subject=shim_cfg_path, path=shim_cfg_path, runtime=runtime["name"])
        elif not shim["valid"]:
            add("gvisor.config_invalid", subject=shim_cfg_path, path=shim_cfg_path, error=shim["error"])
    sd_set = bool(shim and shim["systemd_cgroup"])
    if runtime and sd_wanted and not sd_set and runtime["config_path"] and shim and shim["exists"] and shim["valid"]:
        add("gvisor.systemd_cgroup_missing", subject=shim_cfg_path, path=shim_cfg_path, cgroup_driver=driver,
            driver_source=source, runsc_config=shim["runsc_config"])
    if sd_set and not sd_wanted:
        add("gvisor.systemd_cgroup_on_cgroupfs", subject=shim_cfg_path, path=shim_cfg_path, cgroup_driver=driver,
            driver_source=source)
    if sd_set and runsc["version"] and not runsc["supports_systemd_cgroup"]:
        add("gvisor.systemd_cgroup_unsupported", subject=shim_cfg_path, path=shim_cfg_path,
            version=runsc["version"], needs=SYSTEMD_CGROUP_RELEASE)
    if facts["uses_gvisor"] and sd_wanted and mode != "v2":
        add("gvisor.systemd_cgroup_needs_v2", subject=driver, cgroup_layout=mode, cgroup_driver=driver,
            driver_source=source)


def _sandbox_findings(add, sandboxes):
    for sb in sandboxes:
        subject = sb["container_id"] or str(sb["pid"])
        if sb["oversized"]:
            add("gvisor.sandbox_oversized", subject=subject, container_id=sb["container_id"], pid=sb["pid"],
                total_memory=sb["total_memory"], total_memory_mib=_mib(sb["total_memory"]),
                total_host_memory=sb["total_host_memory"], memory_limit=sb["memory_limit"],
                memory_limit_mib=_mib(sb["memory_limit"]), limited_by=sb["limited_by"],
                excess_bytes=sb["excess_bytes"], cgroup=sb["cgroup"], pod_uid=sb["pod_uid"])
        if sb["outside_pod_slice"]:
            add("gvisor.sandbox_outside_pod_slice", subject=subject, container_id=sb["container_id"],
                pid=sb["pid"], cgroup=sb["cgroup"], pod_uid=sb["pod_uid"], total_memory=sb["total_memory"])


def check(runner, root="/", **opts):
    """Read-only gVisor check; returns facts plus ``findings``.

    Reads in dependency order (containerd -> driver -> shim config -> binaries -> sandboxes); the
    findings' conditions are in ``_binary_findings``, ``_config_findings`` and ``_sandbox_findings``,
    the remedy in ``plan()``. Options: see OPTIONS; ``cgroup_layout`` (tests). An explicit
    ``runsc_path`` that is missing or not executable raises NodefixError.
    """
    if opts.get("runsc_path"):
        explicit_runsc(opts["runsc_path"])
    minimum = opts.get("minimum_release") or FIXED_RELEASE
    findings = []
    facts = {"minimum_release": minimum}

    ctd = read_containerd(root, opts.get("containerd_config") or DEFAULT_CONTAINERD_CONFIG)
    facts["containerd"] = ctd
    runtime = ctd["runsc_runtimes"][0] if ctd["runsc_runtimes"] else None

    driver, source, kube = node_cgroup_driver(runner, root, ctd, opts.get("kubelet_unit") or KUBELET_UNIT)
    facts["kubelet_cgroup_driver"] = kube["driver"]
    facts["kubelet_error"] = kube["error"]
    facts["cgroup_driver"] = driver
    facts["cgroup_driver_source"] = source
    mode = opts.get("cgroup_layout") or core_cgroup.layout(root)
    facts["cgroup_layout"] = mode

    # Binaries: the shim config's binary_name wins over PATH for the runsc the shim runs.
    shim_cfg_path = runtime["config_path"] if runtime and runtime["config_path"] else None
    shim = read_shim_config(root, shim_cfg_path) if shim_cfg_path else None
    facts["shim_config"] = shim
    runsc_name = opts.get("runsc_path") or (shim or {}).get("settings", {}).get("binary_name") or "runsc"
    facts["runsc"] = _read_runsc(runner, runsc_name, minimum)
    shim_bin = runner.bin(opts.get("shim_path") or SHIM_NAME)
    facts["shim"] = {"path": shim_bin, "installed": shim_bin is not None}

    sandboxes = scan_sandboxes(root, mode) if opts.get("inspect_sandboxes", True) else []
    facts["sandboxes"] = sandboxes
    facts["uses_gvisor"] = bool(facts["runsc"]["path"] or runtime or sandboxes)

    def add(fid, subject=None, **evidence):
        findings.append(finding_from(FINDINGS, fid, evidence=evidence, subject=subject))

    _binary_findings(add, facts, runtime, runsc_name)
    _config_findings(add, facts, runtime)
    _sandbox_findings(add, sandboxes)

    bad = [sb for sb in sandboxes if sb["oversized"] or sb["outside_pod_slice"]]
    facts["oversized_sandboxes"] = [sb["container_id"] for sb in sandboxes if sb["oversized"]]
    pods = []
    for sb in bad:
        if sb["pod_uid"] and sb["pod_uid"] not in pods:
            pods.append(sb["pod_uid"])
    facts["pods_to_recreate"] = pods
    # whether the config modules (runsc_config, containerd_config) can run on this node - found, not
    # imported (importing it cost the node-problem-detector plugin ~14 ms a run)
    facts["tomlkit_available"] = containerd_cfg.HAS_TOMLKIT
    facts["plan"] = plan(facts, runtime_name=opts.get("runtime_name") or "runsc",
                         shim_config_path=opts.get("shim_config_path") or DEFAULT_SHIM_CONFIG,
                         systemd_cgroup=opts.get("systemd_cgroup") or "auto")
    facts["findings"] = findings
    return facts
