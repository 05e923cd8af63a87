# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""The kubelet detector: how a node's kubelet is configured, what it really runs with, and what is wrong
with it (``FINDINGS``, ``check``); changing it is ``_kubelet.plan``'s job.

Discovery starts from the systemd unit (``systemctl cat kubelet``): the
ExecStart line after ``Environment=``/``EnvironmentFile=`` expansion gives the
kubelet's command line, hence ``--config``, ``--config-dir`` and any
deprecated flag. That covers kubeadm (10-kubeadm.conf, kubeadm-flags.env,
/etc/default/kubelet or /etc/sysconfig/kubelet), kubespray
(/etc/kubernetes/kubelet.env + kubelet-config.yaml), drop-in directories and
flags-only nodes without guessing.

Precedence, lowest to highest (kubernetes
cmd/kubelet/app/server.go ``mergeKubeletConfigurations``): version defaults
< ``--config`` file < ``--config-dir`` ``*.conf`` drop-ins in lexical order
(RFC 7386 JSON merge patch: maps merge key by key, lists are replaced) <
command-line flags (a map flag replaces the whole map).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import durable as kubelet_durable
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import (
    _suggest,
    FLAG_FIELDS,
    KNOWN_FIELDS,
    KubeletError,
    parse_kubelet_version,
    RATE_LIMIT_FLOOR,
    SUPPORTED,
    UNIT,
    unit_name_errors,
    version_defaults,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.unit import flag_value
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.config_yaml import plain
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.node import (
    discover,
    effective,
    kubelet_errors,
    load_layers,
    read_version,
    report,
)

# ---------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------

ROLE = "nodefix.k8s.kubelet"

FINDINGS = {
    "kubelet.api_qps_low": {
        "severity": "medium",
        "title": "kubelet talks to the API server with low rate limits (kubeAPIQPS/kubeAPIBurst)",
        "remedy": "raise kubeAPIQPS/kubeAPIBurst to at least %d/%d, and never below the kubelet version's defaults "
                  "(50/100 since 1.27), in the kubelet config; "
                  "pods stay Pending/ContainerCreating while kubelet waits for its client rate limiter"
                  % (RATE_LIMIT_FLOOR["kubeAPIQPS"], RATE_LIMIT_FLOOR["kubeAPIBurst"]),
        "role": ROLE, "tag": "kubelet_profile",
    },
    "kubelet.event_qps_low": {
        "severity": "low",
        "title": "kubelet event rate limits (eventRecordQPS/eventBurst) are low and drop events",
        "remedy": "raise eventRecordQPS/eventBurst to at least %d/%d, and never below the kubelet version's "
                  "defaults (50/100 since 1.27)" % (RATE_LIMIT_FLOOR["eventRecordQPS"], RATE_LIMIT_FLOOR["eventBurst"]),
        "role": ROLE, "tag": "kubelet_profile",
    },
    "kubelet.serialized_image_pulls": {
        "severity": "medium",
        "title": "kubelet pulls one image at a time: one slow pull blocks every other pod on the node",
        "remedy": "set serializeImagePulls: false with a bounded maxParallelImagePulls (kubelet 1.27+)",
        "role": ROLE, "tag": "kubelet_profile",
    },
    "kubelet.stale_flag_override": {
        "severity": "medium",
        "title": "a deprecated kubelet command-line flag silently overrides the config file",
        "remedy": "move the value into the KubeletConfiguration and remove the flag from the env file or unit drop-in",
        "role": ROLE, "tag": "kubelet_profile",
    },
    "kubelet.no_eviction_guard": {
        "severity": "low",
        "title": "no memory reserved for the system and only the default hard eviction threshold",
        "remedy": "set evictionHard memory.available and systemReserved/kubeReserved memory so that the node evicts "
                  "pods before the kernel thrashes near OOM",
        "role": ROLE, "tag": "kubelet_guard_rails",
    },
    "kubelet.pod_pids_unlimited": {
        "severity": "low",
        "title": "pods may create unlimited processes (podPidsLimit -1): one fork bomb or zombie leak exhausts the node's PIDs",
        "remedy": "set podPidsLimit (for example 4096) in the kubelet config",
        "role": ROLE, "tag": "kubelet_guard_rails",
    },
    "kubelet.invalid_config": {
        "severity": "high",
        "title": "the kubelet's merged configuration is one kubelet refuses: the next restart fails",
        "remedy": "fix the listed fields (for example serializeImagePulls: false when maxParallelImagePulls > 1)",
        "role": ROLE, "tag": "kubelet_profile",
    },
    "kubelet.unknown_field": {
        "severity": "low",
        "title": "the kubelet config contains field names KubeletConfiguration does not know (typos are ignored by kubelet)",
        "remedy": "correct or remove the field",
        "role": None, "tag": None,
    },
    "kubelet.config_unreadable": {
        "severity": "high",
        "title": "the kubelet configuration cannot be read or parsed",
        "remedy": "repair the file named in the evidence; kubelet will not start with it",
        "role": None, "tag": None,
    },
    "kubelet.kops_managed": {
        "severity": "info",
        "title": "kOps regenerates this node's kubelet files: change the cluster spec (kubelet: section) instead",
        "remedy": "kops edit cluster / instancegroup, then kops update cluster and a rolling update",
        "role": None, "tag": None,
    },
}
# kubelet.fix_not_durable is made by kubelet_durable (its owner); listed here so the kubelet detector's
# registry documents every kubelet id (docs/findings.md).
FINDINGS.update(kubelet_durable.FINDINGS)


def low_thresholds(version):
    """((api qps, api burst), (event qps, event burst)) below which limits are low.

    The higher of RATE_LIMIT_FLOOR (the floor the kubelet role writes) and the
    kubelet version's defaults.
    """
    d = version_defaults(version)
    floor = dict((k, max(RATE_LIMIT_FLOOR[k], d[k])) for k in ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst"))
    return (floor["kubeAPIQPS"], floor["kubeAPIBurst"]), (floor["eventRecordQPS"], floor["eventBurst"])


def limit_rank(field, value):
    """Comparable size of a rate-limit value (0 = unlimited where kubelet says so)."""
    if value is None:
        return None
    spec = SUPPORTED.get(field, {})
    if value == 0 and spec.get("zero") == "unlimited":
        return float("inf")
    if value == 0 and spec.get("zero") == "client-default":
        return 5  # client-go uses its default QPS 5 when the value is 0
    return value


def stale_flags(node, sources):
    """Active deprecated flags that set a KubeletConfiguration field."""
    out = []
    for f in node.flags:
        spec = FLAG_FIELDS.get(f["name"])
        if not spec:
            continue
        field, kind = spec
        try:
            value = flag_value(kind, f["value"])
        except ValueError:
            value = f["value"]
        out.append({"flag": "--" + f["name"], "field": field, "value": value,
                    "path": f["origin"].get("path"), "variable": f["origin"].get("variable"),
                    "kind": f["origin"].get("kind")})
    return out


def findings_for(node, config, sources, layers, flags_found, errors):
    findings = []

    def src(field):
        s = sources.get(field, {})
        return {"value": config.get(field), "source": s.get("source"), "path": s.get("path"), "flag": s.get("flag")}

    if node.kops:
        findings.append(finding_from(FINDINGS, "kubelet.kops_managed", evidence={"markers": node.kops}))
    low_api, low_event = low_thresholds(node.version)
    qps, burst = config.get("kubeAPIQPS"), config.get("kubeAPIBurst")
    if (limit_rank("kubeAPIQPS", qps) or 0) < low_api[0] or (limit_rank("kubeAPIBurst", burst) or 0) < low_api[1]:
        findings.append(finding_from(FINDINGS, "kubelet.api_qps_low",
                                     evidence={"kubeAPIQPS": src("kubeAPIQPS"), "kubeAPIBurst": src("kubeAPIBurst"),
                                               "kubelet_version": node.version_text}))
    eq, eb = config.get("eventRecordQPS"), config.get("eventBurst")
    if limit_rank("eventRecordQPS", eq) != float("inf") and ((limit_rank("eventRecordQPS", eq) or 0) < low_event[0] or (eb or 0) < low_event[1]):
        findings.append(finding_from(FINDINGS, "kubelet.event_qps_low",
                                     evidence={"eventRecordQPS": src("eventRecordQPS"), "eventBurst": src("eventBurst")}))
    if config.get("serializeImagePulls", True):
        findings.append(finding_from(FINDINGS, "kubelet.serialized_image_pulls",
                                     evidence={"serializeImagePulls": src("serializeImagePulls"),
                                               "maxParallelImagePulls": src("maxParallelImagePulls")}))
    for f in flags_found:
        if f["field"] not in SUPPORTED:
            continue
        layer_value = None
        for layer in layers:
            if f["field"] in layer.data:
                layer_value = plain(layer.data[f["field"]])
        findings.append(finding_from(FINDINGS, "kubelet.stale_flag_override", subject=f["flag"],
                                     evidence=dict(f, config_value=layer_value)))
    eh = config.get("evictionHard") or {}
    reserved = (config.get("systemReserved") or {}).get("memory") or (config.get("kubeReserved") or {}).get("memory")
    if not reserved and eh.get("memory.available", "100Mi") in ("100Mi", "0", "0%", ""):
        findings.append(finding_from(FINDINGS, "kubelet.no_eviction_guard",
                                     evidence={"evictionHard": src("evictionHard"), "systemReserved": src("systemReserved"),
                                               "kubeReserved": src("kubeReserved")}))
    if config.get("podPidsLimit", -1) in (-1, 0, None):
        findings.append(finding_from(FINDINGS, "kubelet.pod_pids_unlimited", evidence={"podPidsLimit": src("podPidsLimit")}))
    if errors:
        findings.append(finding_from(FINDINGS, "kubelet.invalid_config", evidence={"errors": errors}))
    unknown = []
    for layer in layers:
        for key in layer.data:
            if key not in KNOWN_FIELDS:
                unknown.append({"path": layer.path, "field": str(key), "hint": _suggest(str(key), KNOWN_FIELDS).strip(" ()")})
    if unknown:
        findings.append(finding_from(FINDINGS, "kubelet.unknown_field", evidence={"fields": unknown}))
    return findings


def inspect(runner, root="/", unit=UNIT, kubelet_version=None, roundtrip=False):
    """Discover, load and merge; return (node, layers, facts dict)."""
    node = discover(runner, root, unit)
    if not node.unit_files:
        return node, [], {"present": False, "unit": unit}
    read_version(runner, node, root, kubelet_version)
    layers = load_layers(node, root, roundtrip=roundtrip)
    config, _merged, sources, flag_errors = effective(node, layers)
    errors = flag_errors + kubelet_errors(config, node.version)
    flags_found = stale_flags(node, sources)
    facts = {
        "present": True,
        "unit": unit,
        "unit_files": [p for p, _t in node.unit_files],
        "env_files": [p for p, _o in node.env_files],
        "binary": node.binary,
        "argv": [w for w, _o in node.argv],
        "layout": node.layout,
        "kops": node.kops,
        "version": node.version_text,
        "config_path": node.config_path,
        "config_dir": node.config_dir,
        "dropins": [layer.path for layer in layers if layer.kind == "drop-in"],
        "effective": report(config, sources),
        "deprecated_flags": flags_found,
        "errors": errors,
    }
    facts["findings"] = findings_for(node, config, sources, layers, flags_found, errors)
    return node, layers, facts


# The detector's options (an Ansible argument spec): part of kubelet_config's
# argument_spec and node_audit's options.kubelet, checked by _core.options.
OPTIONS = {
    "unit": {"type": "str", "default": UNIT},
    "kubelet_version": {"type": "str"},
}


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    errors = unit_name_errors(p.get("unit"))
    if p.get("kubelet_version") and parse_kubelet_version("Kubernetes v%s" % p["kubelet_version"].lstrip("v"))[0] is None:
        errors.append("kubelet_version %r is not a version like 1.29.3" % p["kubelet_version"])
    return errors


def check(runner, root="/", **opts):
    """Detector for node_audit: kubelet facts plus ``findings``.

    A configuration that cannot be read or parsed leaves every kubelet check
    unknown: the KubeletError goes up (``_audit`` reports ``audit.check_failed``
    naming the file, never a clean kubelet) carrying the node's own finding,
    ``kubelet.config_unreadable`` (kubelet will not start with that file either).
    """
    try:
        _node, _layers, facts = inspect(runner, root, unit=opts.get("unit") or UNIT,
                                        kubelet_version=opts.get("kubelet_version"), roundtrip=False)
    except KubeletError as exc:
        exc.findings = [finding_from(FINDINGS, "kubelet.config_unreadable",
                                     evidence=dict((k, v) for k, v in (("error", exc.msg),
                                                                       ("path", exc.details.get("path"))) if v))]
        raise
    findings = facts.pop("findings", [])
    return {"kubelet": facts, "findings": findings}
