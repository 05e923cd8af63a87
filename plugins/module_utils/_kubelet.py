# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""How a node's kubelet is configured, what it really runs with, and how to change it.

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

import os

from ansible_collections.nodefix.k8s.plugins.module_utils import _kubelet_durable
from ansible_collections.nodefix.k8s.plugins.module_utils import _kubelet_flags as kflags
from ansible_collections.nodefix.k8s.plugins.module_utils._common import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet_schema import (  # noqa: F401 pylint: disable=unused-import
    _suggest,
    API_VERSION,
    BOOL_FLAGS,
    DEFAULT_DROPIN_NAME,
    FIELD_FLAGS,
    FLAG_FIELDS,
    KIND,
    KNOWN_FIELDS,
    KubeletError,
    parse_kubelet_version,
    profile_settings,
    PROFILE_OPTIONS,
    RATE_LIMIT_FLOOR,
    SUPPORTED,
    UNIT,
    unit_name_errors,
    validate_settings,
    version_defaults,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet_unit import (  # noqa: F401 pylint: disable=unused-import
    flag_value,
    format_flag_value,
    parse_env_file,
    split_systemctl_cat,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet_yaml import (  # noqa: F401 pylint: disable=unused-import
    dump_yaml,
    load_yaml,
    merge_patch,
    new_map,
    plain,
    ruamel,
    ruamel_error,
    subset_yaml_load,
    YamlError,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet_node import (  # noqa: F401 pylint: disable=unused-import
    _read,
    cgroup_driver,
    discover,
    effective,
    kubelet_errors,
    Layer,
    load_layers,
    node_capacity,
    read_version,
    report,
    reservation_errors,
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
# kubelet.fix_not_durable is made by _kubelet_durable (its owner); listed here so the kubelet detector's
# registry documents every kubelet id (docs/findings.md).
FINDINGS.update(_kubelet_durable.FINDINGS)


def low_thresholds(version):
    """((api qps, api burst), (event qps, event burst)) below which limits are low.

    The higher of RATE_LIMIT_FLOOR (the floor the kubelet role writes) and the
    kubelet version's defaults.
    """
    d = version_defaults(version)
    floor = dict((k, max(RATE_LIMIT_FLOOR[k], d[k])) for k in ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst"))
    return (floor["kubeAPIQPS"], floor["kubeAPIBurst"]), (floor["eventRecordQPS"], floor["eventBurst"])


def _rank(field, value):
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
    if (_rank("kubeAPIQPS", qps) or 0) < low_api[0] or (_rank("kubeAPIBurst", burst) or 0) < low_api[1]:
        findings.append(finding_from(FINDINGS, "kubelet.api_qps_low",
                                     evidence={"kubeAPIQPS": src("kubeAPIQPS"), "kubeAPIBurst": src("kubeAPIBurst"),
                                               "kubelet_version": node.version_text}))
    eq, eb = config.get("eventRecordQPS"), config.get("eventBurst")
    if _rank("eventRecordQPS", eq) != float("inf") and ((_rank("eventRecordQPS", eq) or 0) < low_event[0] or (eb or 0) < low_event[1]):
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
# argument_spec and node_audit's options.kubelet, checked by _options.
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


# ---------------------------------------------------------------------------
# Planning changes
# ---------------------------------------------------------------------------

def _target_for(field, requested, current, default, allow_lower):
    spec = SUPPORTED[field]
    if spec["type"] == "map":
        return requested
    if spec.get("floor") and not allow_lower:
        best = requested
        for candidate in (default, current):
            if candidate is None:
                continue
            if (_rank(field, candidate) or 0) > (_rank(field, best) or 0):
                best = candidate
        return best
    return requested


def _set_in(data, field, value, fresh_map=False):
    """Set ``field`` in a ruamel mapping, updating nested maps in place; True when changed."""
    changed = False
    if isinstance(value, dict):
        existing = data.get(field)
        if isinstance(existing, dict) and not fresh_map:
            for key in list(existing.keys()):
                if key not in value:
                    del existing[key]
                    changed = True
            for key, val in value.items():
                if key not in existing or plain(existing.get(key)) != val:
                    existing[key] = val
                    changed = True
            return changed
        cm = new_map()
        for key, val in value.items():
            cm[key] = val
        data[field] = cm
        return True
    if value is None:
        if field in data:
            del data[field]
            return True
        return False
    current = plain(data.get(field)) if field in data else None
    if field not in data or current != value or type(current) is not type(value):
        data[field] = value
        return True
    return False


def _ensure_header_keys(data):
    """A KubeletConfiguration file (or drop-in) kubelet accepts starts with apiVersion and kind."""
    if "kind" not in data:
        data.insert(0, "kind", KIND) if hasattr(data, "insert") else data.setdefault("kind", KIND)
    if "apiVersion" not in data:
        data.insert(0, "apiVersion", API_VERSION) if hasattr(data, "insert") else data.setdefault("apiVersion", API_VERSION)


def _edit_stale_flags(node, root, targets, stale_mode):
    """Remove (or rewrite) deprecated flags for ``targets`` in every env and unit file of the kubelet."""
    names = sorted(set(FIELD_FLAGS[f] for f in targets if f in FIELD_FLAGS))
    rewrite = None
    if stale_mode == "rewrite":
        rewrite = dict((FIELD_FLAGS[f], format_flag_value(FLAG_FIELDS[FIELD_FLAGS[f]][1], v))
                       for f, v in targets.items() if f in FIELD_FLAGS)
    sources = [(path, _read(root, path), False) for path, _optional in node.env_files]
    sources += [(path, text, True) for path, text in node.unit_files]
    changes, flag_edits = {}, []
    for path, text, is_unit in sources:
        if text is None or not names:
            continue
        try:
            new, edits = kflags.edit_text(text, is_unit, names, BOOL_FLAGS, rewrite)
        except kflags.FlagEditError as exc:
            raise KubeletError("%s: %s; nothing was written" % (path, exc), path=path)
        if edits:
            changes[path] = (text, new)
            for e in edits:
                e["path"] = path
                if is_unit:
                    e["unit_file"] = True
            flag_edits.extend(edits)
    return changes, flag_edits


def reread(node, root="/", overlay=None):
    """Effective configuration read back from the node files (``overlay``: texts about to be written)."""
    again = discover(None, root, use_systemctl=False, overlay=overlay, unit_paths=[p for p, _t in node.unit_files])
    again.version, again.version_text = node.version, node.version_text
    stray = len(again.positional) - len(node.positional)
    if stray > 0:
        raise KubeletError("the edited kubelet command line would hold %d stray word(s) (%s) that kubelet refuses; "
                           "nothing was written" % (stray, " ".join(again.positional[-stray:])))
    layers = load_layers(again, root, roundtrip=False, overlay=overlay)
    config, _merged, sources, flag_errors = effective(again, layers)
    if flag_errors:
        raise KubeletError("the edited kubelet command line cannot be parsed: " + "; ".join(flag_errors))
    return config, sources


def missing_targets(config, targets):
    """Fields of ``targets`` that ``config`` does not hold."""
    mismatch = []
    for field, value in targets.items():
        got = config.get(field)
        if SUPPORTED[field]["type"] == "map":
            if any((got or {}).get(k) != v for k, v in value.items()):
                mismatch.append(field)
        elif got != value:
            mismatch.append(field)
    return mismatch


def _check_version(node, settings):
    if "maxParallelImagePulls" in settings and settings["maxParallelImagePulls"] is not None:
        if node.version is None:
            raise KubeletError("maxParallelImagePulls needs kubelet 1.27 or later and the kubelet version is unknown: "
                               "set kubelet_version")
        if tuple(node.version[:2]) < (1, 27):
            raise KubeletError("maxParallelImagePulls needs kubelet 1.27 or later; this kubelet is %s "
                               "(it does not know the field: pulls would stay serial)" % node.version_text)


def _targets(settings, before, merged_before, defaults, allow_lower, floors):
    """(targets, raised): the value each field gets (never below what is in effect unless ``allow_lower``),
    and the fields written higher than requested, with why."""
    targets = {}
    raised = []
    for field, requested in settings.items():
        if SUPPORTED[field]["type"] == "map":
            base = merged_before.get(field)
            target = dict(base if base is not None else (defaults.get(field) or {}))
            target.update(requested)
            targets[field] = target
            continue
        target = _target_for(field, requested, before.get(field) if field in merged_before else None,
                             defaults.get(field), allow_lower)
        if target != requested:
            reason = "version default" if target == defaults.get(field) else "current value is higher"
            raised.append({"field": field, "requested": requested, "written": target, "reason": reason,
                           "source": "profile" if field in floors else "settings"})
        targets[field] = target
    return targets, raised


def _target_layer(node, layers, dropin_name, use_config_dir):
    """(layer to write, layers with a new drop-in when one is created, created): the --config-dir drop-in
    when there is a config dir, else the --config file; a flags-only kubelet is refused."""
    if node.config_dir and use_config_dir:
        path = os.path.join(node.config_dir, dropin_name)
        for layer in layers:
            if layer.path == path:
                return layer, layers, False
        data = new_map()
        data["apiVersion"] = API_VERSION
        data["kind"] = KIND
        layer = Layer(path, "drop-in", None, data, exists=False)
        layer.header = ("# Managed by the nodefix.k8s collection (kubelet_config module).\n"
                        "# Drop-in for kubelet --config-dir; later files and command-line flags override it.\n")
        layers = sorted(layers + [layer], key=lambda x: (x.kind != "config", x.path))
        return layer, layers, True
    if node.config_path:
        return [layer for layer in layers if layer.kind == "config"][0], layers, False
    raise KubeletError("this kubelet runs on flags only (no --config file, no --config-dir): "
                       "create a KubeletConfiguration file and pass --config first; refusing to add more deprecated flags")


def _set_targets(layers, target_layer, targets):
    """Set the targets in ``target_layer``, and align drop-ins sorting after it that set the same fields
    (they would win); return the paths changed."""
    modified = set()
    for field, value in targets.items():
        if _set_in(target_layer.data, field, value):
            modified.add(target_layer.path)
    after = False
    for layer in layers:
        if layer is target_layer:
            after = True
            continue
        if after and layer.kind == "drop-in":
            for field, value in targets.items():
                if field in layer.data and _set_in(layer.data, field, value):
                    modified.add(layer.path)
    for layer in layers:
        if layer.path in modified:
            _ensure_header_keys(layer.data)
    return modified


def _new_files(node, layers, modified, env_changes):
    files = []
    for layer in layers:
        if layer.path in modified or not layer.exists:
            new_text = dump_yaml(layer.data, layer.text or "")
            if not layer.exists:
                new_text = getattr(layer, "header", "") + new_text
            if new_text != (layer.text or "") or not layer.exists:
                files.append({"path": layer.path, "before": layer.text, "after": new_text,
                              "created": not layer.exists, "unit": False})
    for path, (old, new) in env_changes.items():
        if old != new:
            files.append({"path": path, "before": old, "after": new, "created": False,
                          "unit": any(path == p for p, _t in node.unit_files)})
    return files


def _prove(node, root, files, targets, capacity):
    """Re-read the texts about to be written with the discovery's parsers; raise KubeletError when kubelet
    would reject them, the node could not hold the reservations, or a target would still be overridden."""
    after_cfg, sources_after = reread(node, root, overlay=dict((f["path"], f["after"]) for f in files))
    errors = kubelet_errors(after_cfg, node.version)
    if errors:
        raise KubeletError("refusing to write a configuration kubelet rejects: " + "; ".join(errors), errors=errors)
    reserving = [f for f in ("systemReserved", "kubeReserved", "evictionHard") if f in targets]
    short = reservation_errors(after_cfg, capacity or {}, reserving) if reserving else []
    if short:
        raise KubeletError("refusing reservations the node cannot hold: " + "; ".join(short) + "; nothing was written",
                           errors=short)
    mismatch = missing_targets(after_cfg, targets)
    if mismatch:
        raise KubeletError("after the change these fields would still not have the wanted value (another file or "
                           "flag overrides them, or a flag this module cannot edit safely): %s; nothing was written"
                           % ", ".join(mismatch), effective=report(after_cfg, sources_after, mismatch))
    return after_cfg, sources_after


def plan(node, layers, settings, allow_lower=False, stale_mode="remove", dropin_name=DEFAULT_DROPIN_NAME,
         use_config_dir=True, root="/", floors=(), capacity=None):
    """Compute the new texts of every file; raise KubeletError before any write.

    ``capacity`` (``node_capacity``): reservations that would leave the node no
    allocatable memory, CPU, PIDs or ephemeral storage are refused.

    ``floors``: fields of ``settings`` that are a floor by intent (the profile's rate limits): a higher
    version default or value in effect is kept without being a surprise (``raised`` says ``source: profile``).
    """
    if ruamel() is None:
        raise KubeletError("the Python library ruamel.yaml is required on the node (Debian/Ubuntu: python3-ruamel.yaml)")
    before, merged_before, sources_before, flag_errors = effective(node, layers)
    if flag_errors:
        raise KubeletError("the kubelet command line cannot be parsed: " + "; ".join(flag_errors))
    _check_version(node, settings)
    targets, raised = _targets(settings, before, merged_before, version_defaults(node.version), allow_lower, floors)
    target_layer, layers, created = _target_layer(node, layers, dropin_name, use_config_dir)
    modified = _set_targets(layers, target_layer, targets)
    env_changes, flag_edits = _edit_stale_flags(node, root, targets, stale_mode)
    files = _new_files(node, layers, modified, env_changes)
    after_cfg, sources_after = _prove(node, root, files, targets, capacity)
    return {
        "targets": targets,
        "raised": raised,
        "flag_edits": flag_edits,
        "files": files,
        "target_path": target_layer.path,
        "dropin_created": created and any(f["created"] for f in files),
        "before": report(before, sources_before),
        "after": report(after_cfg, sources_after),
        "after_config": after_cfg,
    }


def configmap_plan(text, targets, allow_lower=False):
    """The kubeadm ``kubelet-config`` ConfigMap's KubeletConfiguration (``data.kubelet``) with ``targets``.

    ``kubeadm upgrade node`` writes ``/var/lib/kubelet/config.yaml`` from this text, so a fix made
    here survives the upgrade. Only the fields in ``targets`` are touched (never lowered: a rate
    limit already higher in the ConfigMap stays; maps get the target's keys), every other entry
    stays byte for byte. Returns {"changed", "text", "fields": {field: {"before", "after"}}};
    KubeletError when the text is not a KubeletConfiguration.
    """
    if ruamel() is None:
        raise KubeletError("the Python library ruamel.yaml is required to edit the kubelet-config ConfigMap")
    data = load_yaml(text or "", "the kubelet-config ConfigMap (data.kubelet)")
    if data is None:
        data = new_map()
    if not isinstance(data, dict) or data.get("kind", KIND) != KIND:
        raise KubeletError("the kubelet-config ConfigMap's data.kubelet is not a KubeletConfiguration; nothing was changed")
    errors = []
    for field in targets:
        if field not in SUPPORTED:
            errors.append("%s is not a setting this collection manages" % field)
    if errors:
        raise KubeletError("; ".join(errors))
    fields = {}
    for field in sorted(targets):
        current = plain(data.get(field)) if field in data else None
        if SUPPORTED[field]["type"] == "map":
            wanted = dict(current or {})
            wanted.update(targets[field])
        else:
            wanted = _target_for(field, targets[field], current, None, allow_lower)
        if _set_in(data, field, wanted):
            fields[field] = {"before": current, "after": wanted}
    if fields:
        _ensure_header_keys(data)
    new_text = dump_yaml(data, text or "") if fields else text
    return {"changed": bool(fields), "text": new_text, "fields": fields}
