# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The detectors as node-problem-detector custom plugins, without Ansible.

node-problem-detector (NPD, https://github.com/kubernetes/node-problem-detector)
runs a "custom plugin" per rule of a custom plugin monitor config
(``pkg/custompluginmonitor``) every ``invoke_interval`` and turns its exit
code into a NodeCondition: 0 OK (condition False), 1 NonOK (condition True,
the problem is there), 2 Unknown. The first ``max_output_length`` bytes of
stdout (80 by default) become the condition's message; the plugin is killed
after ``timeout`` (5 s by default, and a rule's timeout may not exceed the
global one).

One condition per group of findings, each backed by the detectors that own
those findings (``CONDITIONS``); a condition is True when one of its
detectors reports a finding at ``min_severity`` or worse that no ``ignore``
glob and no active waiver of the fleet (``waivers`` for ``host``, the same
rules and code as the fleet report) matches, Unknown when one of its
detectors could not run. The role
``nodefix.k8s.npd`` installs this file's ``cli`` as the plugin and writes the
monitor config that ``monitor_config`` returns.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json
import sys

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import CHECK_NAMES, run_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._common import (
    SEVERITIES,
    SubprocessRunner,
    findings_at_or_above,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._report import check_waivers, waiver_for

OK, NONOK, UNKNOWN = 0, 1, 2

# condition type -> the detectors whose findings raise it, and the reason shown while it is False
CONDITIONS = {
    "GVisorMemoryLimitIgnored": {"checks": ["gvisor"], "ok_reason": "GVisorSandboxesWithinLimits",
                                 "ok_message": "gVisor sandboxes are sized to their pod's memory limit"},
    "KubeletMountUnitsLeaking": {"checks": ["mount_units"], "ok_reason": "NoLeakedMountUnits",
                                 "ok_message": "no leaked kubelet mount units"},
    "PIDPressureRisk": {"checks": ["pids"], "ok_reason": "PIDHeadroomOK",
                        "ok_message": "PID limits and zombies within bounds"},
    "KubeletConfigRisk": {"checks": ["kubelet"], "ok_reason": "KubeletConfigOK",
                          "ok_message": "kubelet rate limits and image pulls as required"},
    "ContainerRuntimeRisk": {"checks": ["containerd", "cpu_quota"], "ok_reason": "ContainerRuntimeOK",
                             "ok_message": "containerd, runc and CPU quotas as required"},
    "KernelRisk": {"checks": ["kernel", "reboot"], "ok_reason": "KernelOK",
                   "ok_message": "kernel without known node killers, no reboot pending"},
}

DEFAULTS = {"min_severity": "medium", "ignore": [], "waivers": [], "host": "", "options": {}, "root": "/"}
MAX_OUTPUT = 80


class NpdConfigError(ValueError):
    """A bad plugin configuration (the plugin then exits Unknown with this message)."""


def check_config(config):
    """The plugin configuration with defaults; NpdConfigError names the bad key."""
    if not isinstance(config, dict):
        raise NpdConfigError("config must be a JSON object")
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise NpdConfigError("unknown config keys: %s" % ", ".join(unknown))
    out = dict(DEFAULTS, **config)
    if out["min_severity"] not in SEVERITIES:
        raise NpdConfigError("min_severity %r is not one of %s" % (out["min_severity"], ", ".join(SEVERITIES)))
    if not isinstance(out["ignore"], list) or not all(isinstance(i, str) for i in out["ignore"]):
        raise NpdConfigError("ignore must be a list of finding id globs")
    if not isinstance(out["options"], dict) or set(out["options"]) - set(CHECK_NAMES):
        raise NpdConfigError("options must be keyed by detector (%s)" % ", ".join(CHECK_NAMES))
    # the fleet report's waivers, applied the same way (host and subject globs, expiry checked on every run)
    check_waivers(out["waivers"])
    return out


def message(findings, limit=MAX_OUTPUT):
    """``<n> finding(s): id (count), ...`` worst first, cut to ``limit`` characters."""
    counts, worst = {}, {}
    for f in findings:
        counts[f["id"]] = counts.get(f["id"], 0) + 1
        worst[f["id"]] = min(worst.get(f["id"], len(SEVERITIES)), SEVERITIES.index(f["severity"]))
    order = sorted(counts, key=lambda i: (worst[i], i))
    text = "%d finding(s): %s" % (len(findings), ", ".join(
        "%s (%d)" % (i, counts[i]) if counts[i] > 1 else i for i in order))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def evaluate(condition, result, config, limit=MAX_OUTPUT):
    """(exit code, message) of one condition from a run_checks result."""
    spec = CONDITIONS[condition]
    failed = [f for f in result["findings"] if f["id"] == "audit.check_failed" and f.get("subject") in spec["checks"]]
    if failed:
        return UNKNOWN, ("cannot check: %s" % "; ".join(
            "%s: %s" % (f["subject"], (f.get("evidence") or {}).get("msg", "failed")) for f in failed))[:limit]
    active, _expired = check_waivers(config["waivers"])
    mine = [f for f in result["findings"] if f.get("check") in spec["checks"]
            and not any(fnmatch.fnmatchcase(f["id"], glob) for glob in config["ignore"])
            and not waiver_for(active, config["host"], f)]
    bad = findings_at_or_above(mine, config["min_severity"])
    if bad:
        return NONOK, message(bad, limit)
    return OK, spec["ok_message"][:limit]


def run(condition, config, runner=None):
    """Run the condition's detectors once; (exit code, message)."""
    spec = CONDITIONS[condition]
    options = dict((name, config["options"].get(name) or {}) for name in spec["checks"])
    result = run_checks(runner or SubprocessRunner(), root=config["root"], checks=spec["checks"], options=options)
    return evaluate(condition, result, config)


def monitor_config(plugin_path, config_path, invoke_interval="300s", timeout="5s", source="nodefix-k8s"):
    """NPD's custom plugin monitor config: one permanent rule per condition, running ``plugin_path``."""
    return {
        "plugin": "custom",
        "pluginConfig": {"invoke_interval": invoke_interval, "timeout": timeout, "max_output_length": MAX_OUTPUT,
                         "concurrency": 1, "enable_message_change_based_condition_update": False},
        "source": source,
        "metricsReporting": True,
        "conditions": [{"type": name, "reason": spec["ok_reason"], "message": spec["ok_message"]}
                       for name, spec in sorted(CONDITIONS.items())],
        "rules": [{"type": "permanent", "condition": name, "reason": name, "path": plugin_path,
                   "args": ["--config", config_path, "--condition", name], "timeout": timeout}
                  for name in sorted(CONDITIONS)],
    }


def cli(argv=None, out=None):
    """``--condition NAME [--config FILE]``: print one message line, exit 0/1/2 (NPD's plugin protocol)."""
    import argparse
    out = out or sys.stdout
    parser = argparse.ArgumentParser(description="nodefix.k8s detectors as a node-problem-detector custom plugin.")
    parser.add_argument("--condition", required=True, choices=sorted(CONDITIONS))
    parser.add_argument("--config", help="JSON: min_severity, ignore (finding id globs), waivers and host (the fleet "
                                         "report's waivers), options (per detector), root")
    args = parser.parse_args(argv)
    try:
        config = {}
        if args.config:
            with open(args.config) as fh:
                config = json.load(fh)
        config = check_config(config)
    except (IOError, OSError, ValueError) as exc:
        out.write(("bad config: %s" % exc)[:MAX_OUTPUT] + "\n")
        return UNKNOWN
    try:
        code, text = run(args.condition, config)
    except Exception as exc:  # pylint: disable=broad-except
        # never exit 1 (NPD's "problem") for the plugin's own failure
        code, text = UNKNOWN, ("%s: %s" % (type(exc).__name__, exc))[:MAX_OUTPUT]
    out.write(text + "\n")
    return code
