# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""The remedy the gvisor detector plans for what it found (``check()['plan']``): the runsc action, the shim
config to write, the containerd runtime entry to register, the pods to recreate. Decided here, once; the
gvisor role only sequences it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.node_config import DEFAULT_SHIM_CONFIG, RUNSC_RUNTIME_TYPE, RUNSC_TYPE_URL


def plan(facts, runtime_name="runsc", shim_config_path=DEFAULT_SHIM_CONFIG, systemd_cgroup="auto"):
    """The remedy for what ``check`` found, as concrete parameters: the contract between the
    detector and the gvisor role, which only sequences these steps and the safe restart.

    - ``runsc``: ``action`` (``none``, ``upgrade`` - below the minimum or an unknown
      version - or ``install`` - a runsc runtime or the role asks for it but there is no
      runsc), the version now and the minimum, the path to replace;
    - ``shim_config``: the file to write (the ``ConfigPath`` containerd already names,
      else ``shim_config_path``), whether ``systemd-cgroup = "true"`` goes in (exactly on
      a systemd-driver node, ``systemd_cgroup=auto``) and why, whether the runsc now
      installed supports it (else the upgrade must come first), whether the node is on
      cgroup v1 (the flag then does not help);
    - ``containerd``: the runtime entry to register (``runtime_type``, ``TypeUrl``,
      ``ConfigPath``), whether it differs from what is registered (then containerd needs
      a restart to read it);
    - ``recreate``: the pods and sandboxes to recreate (the fix changes new sandboxes only).
    """
    runsc = facts["runsc"]
    ctd = facts["containerd"]
    registered = [rt for rt in ctd["runsc_runtimes"] if rt["name"] == runtime_name]
    current = registered[0] if registered else None
    if not runsc["installed"]:
        action, reason = "install", "no runsc on this node"
    elif runsc["version"] is None:
        action, reason = "upgrade", "runsc --version is not understood: %s" % (runsc["version_output"] or "no output")
    elif not runsc["has_9580_fix"]:
        action, reason = "upgrade", "runsc %s is older than %s (google/gvisor#9580)" % (
            runsc["version"], facts["minimum_release"])
    else:
        action, reason = "none", "runsc %s has the google/gvisor#9580 fix" % runsc["version"]
    sd_driver = facts["cgroup_driver"] == "systemd"
    sd_wanted = systemd_cgroup == "auto" and sd_driver
    if systemd_cgroup == "never":
        sd_reason = "systemd_cgroup=never: never set (removed if present)"
    elif sd_driver:
        sd_reason = "the node uses the systemd cgroup driver (%s)" % facts["cgroup_driver_source"]
    else:
        sd_reason = ("the node uses the cgroupfs driver (%s): the flag would break every gVisor pod, so it is "
                     "removed" % facts["cgroup_driver_source"])
    config_path = (current or {}).get("config_path") or shim_config_path
    wanted = {"runtime_type": RUNSC_RUNTIME_TYPE, "options": {"TypeUrl": RUNSC_TYPE_URL, "ConfigPath": config_path}}
    register = not (current and current["runtime_type"] == RUNSC_RUNTIME_TYPE
                    and current["type_url"] == RUNSC_TYPE_URL and current["config_path"] == config_path)
    return {
        "planned_for": {"runtime_name": runtime_name, "shim_config_path": shim_config_path,
                        "systemd_cgroup": systemd_cgroup, "minimum_release": facts["minimum_release"],
                        "containerd_config": ctd["config_path"]},
        "active": facts["uses_gvisor"],
        "runsc": {"action": action, "reason": reason, "version": runsc["version"], "path": runsc["path"],
                  "minimum": facts["minimum_release"]},
        "shim_config": {
            "path": config_path,
            "systemd_cgroup": sd_wanted,
            "reason": sd_reason,
            "supported_now": bool(runsc["supports_systemd_cgroup"]),
            "needs_upgrade_first": bool(sd_wanted and not runsc["supports_systemd_cgroup"]),
            "cgroup_v1": bool(sd_wanted and facts["cgroup_layout"] != "v2"),
        },
        "containerd": {
            "config_path": ctd["config_path"],
            "present": ctd["exists"],
            "runtime": runtime_name,
            "entry": wanted,
            "register": register,
            "restart_needed": register,
        },
        "recreate": {"pods": facts["pods_to_recreate"], "sandboxes": facts["oversized_sandboxes"]},
    }
