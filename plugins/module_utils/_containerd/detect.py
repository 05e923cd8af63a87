# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""containerd and runc detector (``containerd_info``, ``node_audit``): its findings, options and ``check``.

The readers it calls: ``_containerd.version`` (containerd's, runc's and ctr's version outputs),
``_containerd.config`` (config.toml: ``read_runtimes``), ``_containerd.node`` (the daemon's process and
config path; runc: ``runc_state``). ``runc_findings`` is the one maker of ``runc.cpu_quota_rounding_bug``
(the cpu_quota detector's module calls it too).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.config import read_runtimes, schema_for_containerd
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.node import daemon_process, find_config_path, runc_state
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.version import (
    parse_containerd_version,
    parse_ctr_version,
    parse_semver,
    RUNC_QUOTA_FIX,
    semver_lt,
)

DEFAULT_MINIMUM_VERSION = "1.6.0"

FINDINGS = {
    "containerd.prerelease": {
        "severity": "high",
        "title": "containerd is a pre-release build (alpha, beta or release candidate)",
        "remedy": "Upgrade containerd to a final release and restart it safely (drain first).",
        "role": "nodefix.k8s.containerd",
        "tag": "containerd_upgrade",
    },
    "containerd.version_below_minimum": {
        "severity": "medium",
        "title": "containerd is older than the configured minimum version",
        "remedy": "Upgrade containerd (package pin or release archive) and restart it safely.",
        "role": "nodefix.k8s.containerd",
        "tag": "containerd_upgrade",
    },
    "containerd.socket_unreachable": {
        "severity": "critical",
        "title": "containerd's socket does not answer (ctr version failed)",
        "remedy": "Check `systemctl status containerd` and its journal; restart it through the containerd role.",
        "role": "nodefix.k8s.containerd",
        "tag": "containerd_restart",
    },
    "containerd.config_invalid": {
        "severity": "high",
        "title": "containerd's config.toml cannot be parsed or has an unknown schema version",
        "remedy": "Fix the file (containerd --config <file> config dump must succeed) before restarting containerd; "
                  "no role rewrites a config it cannot parse.",
        "role": None,
        "tag": None,
    },
    "runc.cpu_quota_rounding_bug": {
        "severity": "high",
        "title": "runc is older than v1.0.0-rc5: CPU limits that are not whole percents fail with EINVAL under the systemd cgroup driver",
        "remedy": "Upgrade runc to v1.0.0-rc5 or later (opencontainers/runc PR #1651).",
        "role": "nodefix.k8s.containerd",
        "tag": "containerd_upgrade",
    },
}


def runc_findings(state, **evidence):
    """``runc.cpu_quota_rounding_bug`` for a ``runc_state``: the only place that finding is made."""
    if not state["cpu_quota_rounding_bug"]:
        return []
    found = {"version": state["version"], "fixed_in": RUNC_QUOTA_FIX}
    found.update(evidence)
    return [finding_from(FINDINGS, "runc.cpu_quota_rounding_bug", subject=state["binary"], evidence=found)]


# The detector's options (an Ansible argument spec): containerd_info's
# argument_spec and node_audit's options.containerd, checked by _core.options.
OPTIONS = {
    "minimum_version": {"type": "str", "default": DEFAULT_MINIMUM_VERSION},
    "config_path": {"type": "path"},
    "containerd_binary": {"type": "str", "default": "containerd"},
    "ctr_binary": {"type": "str", "default": "ctr"},
    "runc_binary": {"type": "str"},
    "check_socket": {"type": "bool", "default": True},
    "timeout": {"type": "str", "default": "5s"},
}


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    if p.get("minimum_version") and parse_semver(p["minimum_version"]) is None:
        return ["minimum_version %r is not a version (X.Y[.Z][-rc.N])" % p["minimum_version"]]
    return []


def _socket_state(runner, root, ctr_binary, address, timeout):
    """Whether containerd answers on ``address`` (``ctr version``): address, reachable, server version, error."""
    sock = {"address": address, "reachable": None, "server_version": None, "server_base": None, "error": None}
    ctr = runner.bin(ctr_binary)
    if not ctr:
        sock["error"] = "ctr not found"
    elif not os.path.exists(root_path(root, address)):
        sock["reachable"] = False
        sock["error"] = "socket %s does not exist" % address
    else:
        rc, out, err = runner.run([ctr, "--address", address, "--timeout", timeout, "version"], check=False)
        parsed = parse_ctr_version(out)
        sock["reachable"] = rc == 0 and parsed["server"] is not None
        sock["server_version"] = parsed["server"]
        server = parse_semver(parsed["server"] or "")
        sock["server_base"] = server["base"] if server else None
        if not sock["reachable"]:
            sock["error"] = (err or out).strip() or "ctr version rc=%s" % rc
    return sock


# One straight read of containerd, its config, runc and the socket, in the order the facts depend on
# each other.
def check(runner, root="/", minimum_version=DEFAULT_MINIMUM_VERSION, containerd_binary="containerd",
          ctr_binary="ctr", runc_binary=None, config_path=None, check_socket=True, timeout="5s",
          **_opts):
    """containerd/runc detector used by containerd_info and node_audit.

    Returns facts (``installed``, ``version``, ``config_path``, ``schema_version``,
    ``runtimes``, ``runc_systemd_cgroup``, ``runc``, ``socket``, ``daemon``) and ``findings``.
    """
    findings = []
    facts = {
        "installed": False,
        "binary": None,
        "version": None,
        "version_info": None,
        "prerelease": False,
        "minimum_version": minimum_version,
        "config_path": None,
        "config_source": None,
        "config_exists": False,
        "config_error": None,
        "schema_version": None,
        "runtimes": [],
        "runc_systemd_cgroup": None,
        "runc": {"binary": None, "version": None, "version_info": None, "cpu_quota_rounding_bug": None},
        "socket": {"address": None, "reachable": None, "server_version": None, "server_base": None, "error": None},
        "daemon": daemon_process(root),
    }
    binary = runner.bin(containerd_binary)
    if binary:
        facts["installed"] = True
        facts["binary"] = binary
        rc, out, err = runner.run([binary, "--version"], check=False)
        info = parse_containerd_version(out) if rc == 0 else None
        if info is not None:
            facts["version"] = info["version"]
            facts["version_info"] = info
            facts["prerelease"] = info["is_prerelease"]
            if info["is_prerelease"]:
                findings.append(finding_from(FINDINGS, "containerd.prerelease", subject=binary, evidence={
                    "version": info["version"], "output": info["line"]}))
            if minimum_version and semver_lt(info["version"], minimum_version):
                findings.append(finding_from(FINDINGS, "containerd.version_below_minimum", subject=binary, evidence={
                    "version": info["version"], "minimum": minimum_version}))

    path, source = (config_path, "option") if config_path else find_config_path(root, daemon=facts["daemon"])
    facts["config_path"], facts["config_source"] = path, source
    ctd = read_runtimes(root, path)
    facts["config_exists"] = ctd["exists"]
    facts["config_error"] = ctd["error"]
    facts["runtimes"] = ctd["runtimes"]
    facts["runc_systemd_cgroup"] = ctd["runc_systemd_cgroup"]
    # no file: the schema this containerd writes by default
    facts["schema_version"] = ctd["schema_version"] if ctd["exists"] else (
        schema_for_containerd(facts["version"]) if facts["version"] else None)
    if ctd["error"]:
        findings.append(finding_from(FINDINGS, "containerd.config_invalid", subject=path,
                                     evidence={"error": ctd["error"]}))

    # runc: the BinaryName of runc's options when set, else runc on PATH
    facts["runc"] = runc_state(runner, root, runc_binary, facts["runtimes"])
    findings.extend(runc_findings(facts["runc"]))

    facts["socket"]["address"] = ctd["grpc_address"]
    if check_socket and facts["installed"]:
        facts["socket"] = _socket_state(runner, root, ctr_binary, ctd["grpc_address"], timeout)
        if facts["socket"]["reachable"] is False:
            findings.append(finding_from(FINDINGS, "containerd.socket_unreachable", subject=ctd["grpc_address"],
                                         evidence={"error": facts["socket"]["error"]}))
    facts["findings"] = findings
    return facts
