# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the fleet report (per-host results), the severity ladder for roles, the NPD monitor config, and
what remediate does for a node (its plan, and the reboot's reasons after the boot)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import findings_at_or_above as _at_or_above
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._npd.plugin import monitor_config as _monitor_config
from ansible_collections.nodefix.k8s.plugins.module_utils._npd.plugin import (
    monitor_config_errors as _monitor_config_errors,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot.detect import reasons_after as _reasons_after
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.remediation import plan as _remediation_plan


def audit_results(hostvars, hosts, name="_nodefix_audit", not_run=None):
    """Map each host to its registered result ``name``.

    A host without the variable (unreachable, or failed before the audit)
    maps to ``{"unreachable": true, "msg": ...}`` so that the report lists it
    instead of silently dropping it; one ``not_run`` names (host: why) maps to
    ``{"not_run": true, "msg": why}`` instead: it was left alone on purpose
    (a rollout stopped before it), not lost.
    """
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("audit_results: hosts must be a list of host names, got %s" % type(hosts).__name__)
    not_run = not_run or {}
    if not isinstance(not_run, dict):
        raise AnsibleFilterError("audit_results: not_run must be a dict of host: reason, got %s" % type(not_run).__name__)
    out = {}
    for host in hosts:
        try:
            hv = hostvars[host]
        except KeyError:
            hv = {}
        value = hv.get(name) if hasattr(hv, "get") else None
        if (value is None or not isinstance(value, dict) or value.get("skipped")) and host in not_run:
            out[host] = {"not_run": True, "msg": str(not_run[host])}
        elif value is None or not isinstance(value, dict) or value.get("skipped"):
            out[host] = {"unreachable": True, "msg": "no %s result for this host (unreachable or failed before it ran)" % name}
        else:
            out[host] = value
    return out


def findings_at_or_above(findings, threshold, ignore=None):
    """The findings at ``threshold`` or worse (``_core.findings.at_or_above``), without the ids in ``ignore``."""
    if not isinstance(findings, (list, tuple)):
        raise AnsibleFilterError("findings_at_or_above: expected a list of findings, got %s" % type(findings).__name__)
    try:
        return _at_or_above([f for f in findings if isinstance(f, dict)], threshold, tuple(ignore or ()))
    except ValueError as exc:
        raise AnsibleFilterError("findings_at_or_above: %s" % exc)


def npd_monitor_config(plugin_path, config_path, invoke_interval="300s", timeout="5s", source="nodefix-k8s",
                       concurrency=1, legacy_condition_names=False):
    """node-problem-detector's custom plugin monitor config for the nodefix.k8s plugin (``_npd.plugin.monitor_config``);
    a config node-problem-detector would refuse, or whose schedule drops ticks (``_npd.plugin.monitor_config_errors``),
    is an error naming the rule."""
    for name, value in (("invoke_interval", invoke_interval), ("timeout", timeout)):
        if not isinstance(value, str) or not value[:-1].isdigit() or not value.endswith("s") or int(value[:-1]) < 1:
            raise AnsibleFilterError("npd_monitor_config: %s must be whole seconds like '5s', got %r" % (name, value))
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise AnsibleFilterError("npd_monitor_config: concurrency must be a whole number of at least 1, got %r"
                                 % (concurrency,))
    if not isinstance(legacy_condition_names, bool):
        raise AnsibleFilterError("npd_monitor_config: legacy_condition_names must be true or false, got %r"
                                 % (legacy_condition_names,))
    cfg = _monitor_config(plugin_path, config_path, invoke_interval=invoke_interval, timeout=timeout, source=source,
                          concurrency=concurrency, legacy_names=legacy_condition_names)
    errors = _monitor_config_errors(cfg)
    if errors:
        raise AnsibleFilterError("npd_monitor_config: %s" % "; ".join(errors))
    return cfg


def reboot_reasons_after(audit, reasons):
    """The reboot's reasons still open, and those whose detector could not run (``_reboot.detect.reasons_after``)."""
    try:
        return _reasons_after(audit, reasons)
    except NodefixError as exc:
        raise AnsibleFilterError("reboot_reasons_after: %s" % exc.msg)


def remediation_plan(audit, drainable=False, reboot=False, mount_units_reboot=False, dying_memcgs=False,
                     kubelet_guard_rails="auto", kernel_upgrade=False, evidence_units=100):
    """What remediate does for a node (roles, reboot reasons, guard rails, what disrupts it):
    ``_audit.remediation.plan``."""
    try:
        return _remediation_plan(audit, drainable=drainable, reboot=reboot, mount_units_reboot=mount_units_reboot,
                                 dying_memcgs=dying_memcgs, kubelet_guard_rails=kubelet_guard_rails,
                                 kernel_upgrade=kernel_upgrade, evidence_units=evidence_units)
    except NodefixError as exc:
        raise AnsibleFilterError("remediation_plan: %s" % exc.msg)


class FilterModule(object):
    def filters(self):
        return {"audit_results": audit_results, "findings_at_or_above": findings_at_or_above,
                "npd_monitor_config": npd_monitor_config, "reboot_reasons_after": reboot_reasons_after,
                "remediation_plan": remediation_plan}
