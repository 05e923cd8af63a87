# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""What the node's configuration says about runsc: containerd's runsc runtimes (read by the containerd
reader, ``_containerd.config.read_runtimes``), the node's cgroup driver (the kubelet's, read by
``_kubelet.node.cgroup_driver``, else runc's ``SystemdCgroup``), and the shim config (``runsc.toml``:
``[runsc_config]`` is a ``map[string]string``, an unquoted value breaks the shim). Read only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import UNIT as KUBELET_UNIT
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path

RUNSC_RUNTIME_TYPE = "io.containerd.runsc.v1"
RUNSC_TYPE_URL = "io.containerd.runsc.v1.options"
DEFAULT_CONTAINERD_CONFIG = "/etc/containerd/config.toml"
DEFAULT_SHIM_CONFIG = "/etc/containerd/runsc.toml"
SHIM_NAME = "containerd-shim-runsc-v1"


def load_toml(text):
    """Parse TOML text into plain dicts (containerd's reader: tomlkit, else tomllib); ValueError on bad TOML."""
    try:
        return containerd_cfg.parse_plain(text)
    except containerd_cfg.ContainerdConfigError as exc:
        raise ValueError(str(exc))


def read_containerd(root, config_path):
    """What containerd's config says about runsc and runc's cgroup driver.

    Read by containerd's one config reader (``_containerd.config.read_runtimes``):
    schemas 1 to 4, tomlkit or tomllib; this only picks the runsc runtimes.
    """
    ctd = containerd_cfg.read_runtimes(root, config_path)
    info = dict((k, ctd[k]) for k in ("config_path", "exists", "error", "schema_version", "runc_systemd_cgroup"))
    info["runsc_runtimes"] = []
    for rt in ctd["runtimes"]:
        if rt["runtime_type"] == RUNSC_RUNTIME_TYPE or rt["name"] == "runsc":
            info["runsc_runtimes"].append({
                "name": rt["name"],
                "runtime_type": rt["runtime_type"],
                "type_url": rt["options"].get("TypeUrl"),
                "config_path": rt["options"].get("ConfigPath"),
            })
    return info


def node_cgroup_driver(runner, root, ctd, kubelet_unit=KUBELET_UNIT):
    """(driver, source, kubelet facts): the kubelet's effective cgroupDriver (flags >
    drop-ins > --config file, read by the kubelet detector's reader), else
    containerd's runc ``SystemdCgroup``, else the kubelet's default cgroupfs."""
    kube = kubelet_node.cgroup_driver(runner, root, kubelet_unit)
    if kube["driver"]:
        where = kube["flag"] or kube["path"] or "-"
        return kube["driver"], "kubelet %s %s" % (kube["source"], where), kube
    if ctd["runc_systemd_cgroup"]:
        return "systemd", "%s (runc SystemdCgroup = true)" % ctd["config_path"], kube
    if ctd["runc_systemd_cgroup"] is False:
        return "cgroupfs", "%s (runc SystemdCgroup = false)" % ctd["config_path"], kube
    return "cgroupfs", "default (no kubelet cgroupDriver, no runc SystemdCgroup)", kube


def read_shim_config(root, path):
    """Read and check the shim config: quoted strings in [runsc_config]."""
    info = {"path": path, "exists": False, "valid": None, "error": None, "runsc_config": {},
            "systemd_cgroup": None, "settings": {}}
    text = read_text(root_path(root, path))
    if text is None:
        return info
    info["exists"] = True
    try:
        data = load_toml(text)
    except ValueError as exc:
        info["valid"] = False
        info["error"] = "cannot parse %s: %s" % (path, exc)
        return info
    table = data.get("runsc_config", {})
    if not isinstance(table, dict):
        info["valid"] = False
        info["error"] = "%s: runsc_config must be a table" % path
        return info
    bad = sorted(k for k, v in table.items() if not isinstance(v, str))
    if bad:
        info["valid"] = False
        info["error"] = ("%s: [runsc_config] values must be quoted strings (map[string]string); not a string: %s"
                         % (path, ", ".join("%s = %s" % (k, _toml_repr(table[k])) for k in bad)))
    else:
        info["valid"] = True
    info["runsc_config"] = dict((k, v if isinstance(v, str) else _toml_repr(v)) for k, v in table.items())
    info["settings"] = dict((k, v) for k, v in data.items() if not isinstance(v, dict))
    value = table.get("systemd-cgroup")
    if value is not None:
        info["systemd_cgroup"] = (value if isinstance(value, str) else _toml_repr(value)).lower() == "true"
    return info


def _toml_repr(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
