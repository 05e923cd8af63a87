# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Planning a kubelet configuration change (``kubelet_config``) and proving it: the targets
against the kubelet version's defaults and the fleet's floors, the layer that gets them (the
``--config`` file, a ``--config-dir`` drop-in), stale flags that would override the file removed or
rewritten (``_kubelet.flag_edit``), the files re-read with the discovery parser and the result
compared with what was asked, and the kubeadm ConfigMap's copy (``configmap_plan``). The detector is
``_kubelet.detect``; discovery and the effective configuration are ``_kubelet.node``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flag_edit as kubelet_flag_edit
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import (
    API_VERSION,
    BOOL_FLAGS,
    DEFAULT_DROPIN_NAME,
    FIELD_FLAGS,
    FLAG_FIELDS,
    KIND,
    KubeletError,
    SUPPORTED,
    version_defaults,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.unit import format_flag_value
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.config_yaml import (
    dump_yaml,
    load_yaml,
    new_map,
    plain,
    ruamel,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.node import (
    _read,
    discover,
    effective,
    kubelet_errors,
    Layer,
    load_layers,
    report,
    reservation_errors,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.detect import limit_rank


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
            if (limit_rank(field, candidate) or 0) > (limit_rank(field, best) or 0):
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
            new, edits = kubelet_flag_edit.edit_text(text, is_unit, names, BOOL_FLAGS, rewrite)
        except kubelet_flag_edit.FlagEditError as exc:
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
