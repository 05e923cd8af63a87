# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Discovering a node's kubelet (unit, flags, version, --config, --config-dir) and merging its
configuration layers into the effective configuration, flags > drop-ins > file (one job of the
kubelet detector, see ``_kubelet``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema
from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import (
    FLAG_FIELDS,
    KubeletError,
    parse_kubelet_version,
    parse_quantity,
    SUPPORTED,
    UNIT,
    UNIT_DIRS,
    version_defaults,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.unit import (
    flag_value,
    parse_env_file,
    parse_exec_start,
    parse_flags,
    parse_unit,
    positional_words,
    split_systemctl_cat,
    split_words,
    unit_paths_from_tree,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.config_yaml import load_yaml, merge_patch, plain

# ---------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------


def _read(root, path, overlay=None):
    """Text of node file ``path`` (None when absent), confined to ``root``.

    ``overlay`` ({node path: text}) stands for files about to be written, so
    that a planned change is re-read by the same parser before any write.
    """
    if overlay and path in overlay:
        return overlay[path]
    joined = None
    try:
        joined = core_paths.node_path(root, path)
        real = core_paths.resolve_target(root, joined, what="kubelet file")
        return core_paths.read_utf8(real, what="kubelet file")
    except core_paths.FileSafetyError as exc:
        msg = exc.msg.replace(joined, path) if joined and joined != path else exc.msg
        raise KubeletError(msg, path=path)


def kops_markers(root, unit_texts):
    """Evidence that kOps' nodeup owns this node (it regenerates kubelet files)."""
    found = []
    for p in ("/opt/kops", "/var/cache/kubernetes-install", "/etc/kubernetes/kops-controller"):
        if os.path.exists(root_path(root, p)):
            found.append(p)
    for d in UNIT_DIRS:
        p = os.path.join(d, "kops-configuration.service")
        if os.path.exists(root_path(root, p)):
            found.append(p)
    for path, text in unit_texts:
        if "kops" in (text or "").lower():
            found.append(path)
    return sorted(set(found))


class Node(object):
    """Everything discovered about one kubelet."""

    def __init__(self):
        self.unit_files = []        # [(path, text)]
        self.env = {}               # name -> {"value", "path", "kind": envfile|unit}
        self.env_defs = []          # every definition: {"name","value","path","kind"}
        self.env_files = []         # [(path, optional)]
        self.exec_start = []        # raw words
        self.argv = []              # [(word, origin)]
        self.flags = []
        self.positional = []
        self.binary = None
        self.config_path = None
        self.config_dir = None
        self.layout = None
        self.kops = []
        self.version = None
        self.version_text = None


def _unit_files(runner, root, unit, use_systemctl, overlay, unit_paths):
    """[(path, text)]: the unit and its drop-ins in systemd's order (``systemctl cat`` on the live node,
    else the unit search path of the tree; ``unit_paths`` re-reads a planned change)."""
    files = []
    if unit_paths is not None:
        use_systemctl = False
    if use_systemctl is None:
        use_systemctl = root in (None, "", "/")
    systemctl = runner.bin("systemctl") if use_systemctl and runner is not None else None
    if systemctl:
        rc, out, _err = runner.run([systemctl, "cat", "--no-pager", unit], check=False)
        if rc == 0 and out.strip():
            for path, content in split_systemctl_cat(out):
                text = _read(root, path, overlay)
                files.append((path, text if text is not None else content))
            return files
    for path in unit_paths_from_tree(root, unit) if unit_paths is None else unit_paths:
        files.append((path, _read(root, path, overlay) or ""))
    return files


def _unit_entries(unit_files):
    """(Environment= assignments, EnvironmentFile= entries, ExecStart= lines), an empty assignment
    resetting the list as systemd does."""
    env_assign, env_files, exec_starts = [], [], []
    for path, text in unit_files:
        for key, value, epath in parse_unit(text, path):
            if key == "Environment":
                if value == "":
                    env_assign = []
                    continue
                for word in split_words(value):
                    if "=" in word:
                        name, val = word.split("=", 1)
                        env_assign.append({"name": name, "value": val, "path": epath, "kind": "unit"})
            elif key == "EnvironmentFile":
                if value == "":
                    env_files = []
                    continue
                env_files.append((value.lstrip("-"), value.startswith("-")))
            elif key == "ExecStart":
                exec_starts = [] if value == "" else exec_starts + [(value, epath)]
    return env_assign, env_files, exec_starts


def _environment(root, unit, env_assign, env_files, overlay):
    """Environment= first, then EnvironmentFile= override (systemd.exec(5)); a missing required file raises."""
    defs = list(env_assign)
    for fpath, optional in env_files:
        text = _read(root, fpath, overlay)
        if text is None:
            if not optional:
                raise KubeletError("EnvironmentFile %s of %s does not exist (kubelet would not start)" % (fpath, unit))
            continue
        for name, val in parse_env_file(text):
            defs.append({"name": name, "value": val, "path": fpath, "kind": "envfile"})
    return defs


def _expand(exec_start, env, epath):
    """ExecStart='s words with $VAR (split into words) and ${VAR} (in place) expanded; each word with its origin."""
    argv = []
    for word in exec_start:
        m = re.match(r"^\$([A-Za-z_][A-Za-z0-9_]*)$", word)
        if m:
            d = env.get(m.group(1))
            if d is not None:
                for w in split_words(d["value"]):
                    argv.append((w, {"kind": d["kind"], "path": d["path"], "variable": d["name"]}))
            continue
        expanded = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                          lambda mm: env[mm.group(1)]["value"] if mm.group(1) in env else "", word)
        words = split_words(expanded)
        argv.append((words[0] if words else "", {"kind": "execstart", "path": epath}))
    return argv


def _layout(node):
    env_paths = [p for p, _o in node.env_files]
    if node.kops:
        return "kops"
    if any(p.endswith("/kubelet.env") for p in env_paths) or node.config_path == "/etc/kubernetes/kubelet-config.yaml":
        return "kubespray"
    kubeadm_dropin = any(p.endswith("10-kubeadm.conf") for p, _t in node.unit_files)
    if any(p.endswith("kubeadm-flags.env") for p in env_paths) or kubeadm_dropin:
        return "kubeadm"
    return "config-file" if node.config_path else "flags-only"


def discover(runner, root="/", unit=UNIT, use_systemctl=None, overlay=None, unit_paths=None):
    """Read the unit and its environment in systemd's own order (unit, drop-ins, Environment=,
    EnvironmentFile=, ExecStart=); return a Node (no config parsing yet).

    ``unit_paths`` re-reads the unit from these files (a planned change,
    with ``overlay``) instead of asking systemd again. A runner that only reads (``read_only``: the
    node-problem-detector plugin's, one look at the node for every detector) reads the node once for the
    detectors that ask (the kubelet's and gVisor's cgroup driver), each getting its own Node.
    """
    if overlay is None and unit_paths is None and getattr(runner, "read_only", False):
        key = ("kubelet.discover", root, unit, use_systemctl)
        if key not in runner.memo:
            runner.memo[key] = _discover(runner, root, unit, use_systemctl)
        node = Node()
        node.__dict__.update(runner.memo[key].__dict__)
        return node
    return _discover(runner, root, unit, use_systemctl, overlay, unit_paths)


def _discover(runner, root, unit, use_systemctl, overlay=None, unit_paths=None):
    node = Node()
    node.unit_files = _unit_files(runner, root, unit, use_systemctl, overlay, unit_paths)
    if not node.unit_files:
        return node
    env_assign, node.env_files, exec_starts = _unit_entries(node.unit_files)
    node.env_defs = _environment(root, unit, env_assign, node.env_files, overlay)
    for d in node.env_defs:
        node.env[d["name"]] = d
    if not exec_starts:
        raise KubeletError("%s has no ExecStart= line" % unit)
    value, epath = exec_starts[-1]
    node.exec_start = parse_exec_start(value)
    node.argv = _expand(node.exec_start, node.env, epath)
    # the binary: first word, or the first one named like kubelet (wrappers)
    words = [w for w, _o in node.argv]
    node.binary = words[0] if words else None
    for w in words:
        if os.path.basename(w).startswith("kubelet") or os.path.basename(w) == "hyperkube":
            node.binary = w
            break
    start = words.index(node.binary) + 1 if node.binary in words else 1
    node.flags = parse_flags(node.argv[start:])
    node.positional = positional_words(node.argv[start:])
    for f in node.flags:
        if f["name"] == "config":
            node.config_path = f["value"]
        elif f["name"] == "config-dir":
            node.config_dir = f["value"] or None
    node.kops = kops_markers(root, node.unit_files)
    node.layout = _layout(node)
    return node


def read_version(runner, node, root="/", override=None):
    if override:
        node.version, node.version_text = parse_kubelet_version("Kubernetes v%s" % str(override).lstrip("v"))
        if node.version is None:
            raise KubeletError("kubelet_version %r is not a version like 1.29.3" % override)
        return
    binary = node.binary
    if not binary or runner is None:
        return
    path = root_path(root, binary) if os.path.isabs(binary) else runner.bin(binary)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return
    rc, out, err = runner.run([path, "--version"], check=False)
    if rc == 0:
        node.version, node.version_text = parse_kubelet_version(out)


# ---------------------------------------------------------------------------
# Config layers and the effective configuration
# ---------------------------------------------------------------------------

class Layer(object):
    """One configuration file: the main --config file or a drop-in."""

    def __init__(self, path, kind, text, data, exists=True):
        self.path = path
        self.kind = kind          # config | drop-in
        self.text = text
        self.data = data          # ruamel CommentedMap (or dict)
        self.exists = exists
        self.new_text = text


def dropin_files(root, config_dir):
    """``*.conf`` under ``config_dir`` in the lexical walk order kubelet uses."""
    out = []
    try:
        base = core_paths.node_path(root, config_dir)
    except core_paths.FileSafetyError as exc:
        raise KubeletError("--config-dir: %s" % exc.msg, path=config_dir)
    if not core_paths.inside(root, os.path.realpath(base)):
        raise KubeletError("--config-dir %s resolves to %s, outside the node root %s; refusing to read or write it"
                           % (config_dir, os.path.realpath(base), root), path=config_dir)
    if not os.path.isdir(base):
        return out

    def walk(rel):
        full = os.path.join(base, rel) if rel else base
        for name in sorted(os.listdir(full)):
            sub = os.path.join(rel, name) if rel else name
            fp = os.path.join(base, sub)
            if os.path.isdir(fp):
                walk(sub)
            elif name.endswith(".conf"):
                out.append(os.path.join(config_dir, sub))
    walk("")
    return out


def load_layers(node, root="/", roundtrip=True, overlay=None):
    layers = []
    if node.config_path:
        text = _read(root, node.config_path, overlay)
        if text is None:
            raise KubeletError("kubelet --config file %s does not exist" % node.config_path, path=node.config_path)
        layers.append(Layer(node.config_path, "config", text, load_yaml(text, node.config_path, roundtrip)))
    if node.config_dir:
        paths = dropin_files(root, node.config_dir)
        for path in sorted(overlay or {}):
            if path.startswith(node.config_dir.rstrip("/") + "/") and path.endswith(".conf") and path not in paths:
                paths.append(path)
        for path in sorted(paths, key=lambda x: x.split("/")):  # kubelet's lexical walk order
            text = _read(root, path, overlay)
            layers.append(Layer(path, "drop-in", text, load_yaml(text, path, roundtrip)))
    return layers


def effective(node, layers, flags=None):
    """Merge defaults < config < drop-ins < flags; return (config, sources, errors)."""
    defaults = version_defaults(node.version)
    merged = {}
    sources = {}
    for layer in layers:
        data = plain(layer.data)
        data.pop("apiVersion", None)
        data.pop("kind", None)
        if layer.kind == "config":
            merged = data
        else:
            merged = merge_patch(merged, data)
        for key in data:
            sources[key] = {"source": layer.kind, "path": layer.path}
    errors = []
    seen_map_flags = set()
    for f in (node.flags if flags is None else flags):
        spec = FLAG_FIELDS.get(f["name"])
        if spec is None:
            continue
        field, kind = spec
        try:
            value = flag_value(kind, f["value"])
        except ValueError as exc:
            errors.append("invalid value %r for flag --%s: %s" % (f["value"], f["name"], exc))
            continue
        if kind.startswith("map") and field in seen_map_flags:
            merged[field] = dict(merged.get(field) or {}, **value)
        else:
            merged[field] = value
        seen_map_flags.add(field)
        origin = f["origin"]
        sources[field] = {"source": "flag", "flag": "--" + f["name"], "path": origin.get("path"),
                          "variable": origin.get("variable")}
    result = {}
    for key, value in defaults.items():
        result[key] = value
    result.update(merged)
    for key in defaults:
        sources.setdefault(key, {"source": "default", "path": None})
    return result, merged, sources, errors


def cgroup_driver(runner, root="/", unit=UNIT):
    """The kubelet's effective ``cgroupDriver`` (flags > drop-ins > --config file): the one reader.

    Returns ``driver`` (None when the kubelet does not set it or is not
    found), ``source`` (flag, drop-in or config), ``path`` and ``flag`` where
    it is set, and ``error`` when the kubelet's files cannot be read. No
    kubelet process is started.
    """
    out = {"driver": None, "source": None, "path": None, "flag": None, "error": None, "unit_found": False}
    node = discover(runner, root, unit)
    if not node.unit_files:
        return out
    out["unit_found"] = True
    try:
        layers = load_layers(node, root, roundtrip=False)
        config, merged, sources, errors = effective(node, layers)
    except KubeletError as exc:
        out["error"] = exc.msg
        return out
    bad = [e for e in errors if "--cgroup-driver" in e]
    if bad:
        out["error"] = "; ".join(bad)
    if "cgroupDriver" in merged and isinstance(config.get("cgroupDriver"), str):
        src = sources.get("cgroupDriver", {})
        out.update(driver=config["cgroupDriver"].lower(), source=src.get("source"), path=src.get("path"),
                   flag=src.get("flag"))
    return out


def report(config, sources, fields=None):
    """{field: {value, source, path, flag, variable}} for the interesting fields."""
    out = {}
    for key in (fields or sorted(set(list(SUPPORTED.keys())))):
        src = dict(sources.get(key, {"source": "default", "path": None}))
        src["value"] = config.get(key)
        out[key] = src
    return out


def kubelet_errors(config, version):
    """The checks kubelet itself runs on these fields (pkg/kubelet/apis/config/validation)."""
    errs = []
    for field, flag in (("eventBurst", "event-burst"), ("eventRecordQPS", "event-qps"), ("kubeAPIBurst", "kube-api-burst"),
                        ("kubeAPIQPS", "kube-api-qps"), ("registryBurst", "registry-burst"), ("registryPullQPS", "registry-qps"),
                        ("maxPods", "max-pods")):
        v = config.get(field)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            errs.append("invalid configuration: %s (--%s) %s must not be a negative number" % (field, flag, v))
    mpp = config.get("maxParallelImagePulls")
    if mpp is not None:
        if isinstance(mpp, int) and mpp < 1:
            errs.append("invalid configuration: maxParallelImagePulls %s must be a positive number" % mpp)
        if config.get("serializeImagePulls", True) and isinstance(mpp, int) and mpp > 1:
            errs.append("invalid configuration: maxParallelImagePulls cannot be larger than 1 unless "
                        "SerializeImagePulls (--serialize-image-pulls) is set to false")
    pids = config.get("podPidsLimit")
    if isinstance(pids, int) and pids < -1:
        errs.append("invalid configuration: podPidsLimit %s must be -1 (unlimited) or greater" % pids)
    return errs


def _online_cpus(text):
    """The number of CPUs in a sysfs cpu list (``0-3,6``); None when it cannot be read."""
    count = 0
    try:
        for part in text.strip().split(","):
            lo, _sep, hi = part.partition("-")
            count += int(hi or lo) - int(lo) + 1
    except ValueError:
        return None
    return count or None


def node_capacity(root="/"):
    """The node's capacity, as the kubelet reads it (cadvisor): ``memory`` (MemTotal of
    /proc/meminfo, bytes), ``cpu`` (online CPUs), ``pid`` (the smaller of kernel.pid_max and
    kernel.threads-max: both bound the tasks, and the kubelet takes the minimum -
    pkg/kubelet/stats/pidlimit/pidlimit_linux.go Stats, whose MaxPID is the container manager's
    ``pid`` capacity) and ``ephemeral-storage`` (size of the filesystem holding
    /var/lib/kubelet, bytes). A value that cannot be read is left out (and nothing is checked
    against it)."""
    cap = {}
    for line in (read_text(root_path(root, "/proc/meminfo")) or "").splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "MemTotal:" and fields[1].isdigit():
            cap["memory"] = int(fields[1]) * 1024
    cpus = _online_cpus(read_text(root_path(root, "/sys/devices/system/cpu/online")) or "")
    if cpus:
        cap["cpu"] = cpus
    limits = [v for v in (pids_detect.read_int(root_path(root, "/proc/sys/kernel/pid_max")),  # the pids detector's reader
                          pids_detect.read_int(root_path(root, "/proc/sys/kernel/threads-max"))) if v]
    if limits:
        cap["pid"] = min(limits)
    kubelet_dir = root_path(root, "/var/lib/kubelet")
    if os.path.isdir(kubelet_dir):
        try:
            st = os.statvfs(kubelet_dir)
            cap["ephemeral-storage"] = st.f_blocks * st.f_frsize
        except OSError:
            pass
    return cap


_CAPACITY_SOURCE = {"memory": "MemTotal in /proc/meminfo", "cpu": "/sys/devices/system/cpu/online",
                    "pid": "the smaller of kernel.pid_max and kernel.threads-max",
                    "ephemeral-storage": "the filesystem of /var/lib/kubelet"}

# The hard eviction thresholds the kubelet reserves, by resource (pkg/kubelet/cm/
# node_container_manager_linux.go hardEvictionReservation: memory.available against memory,
# nodefs.available against ephemeral-storage; a percentage is of the capacity).
EVICTION_RESERVES = {"memory": "memory.available", "ephemeral-storage": "nodefs.available"}


def _eviction_reserve(config, resource, total):
    """(name, value, quantity) of the hard eviction threshold reserved from ``resource``, or None.
    Without any evictionHard the kubelet's defaults count (10 % nodefs.available, 100Mi memory);
    a map that leaves a signal out has no threshold for it (the kubelet's partial-map rule)."""
    signal = EVICTION_RESERVES.get(resource)
    if signal is None:
        return None
    given = config.get("evictionHard")
    if given is None:
        given = kubelet_schema.DEFAULT_EVICTION_HARD
    value = (given or {}).get(signal)
    if value in (None, ""):
        return None
    value = str(value)
    quantity = total * float(value[:-1]) / 100 if value.endswith("%") else parse_quantity(value)
    return ("evictionHard.%s" % signal, value, quantity)


def reservation_errors(config, capacity, fields=("systemReserved", "kubeReserved", "evictionHard")):
    """Why the reservations of ``config`` leave the node nothing, by the kubelet's own rule
    (pkg/kubelet/cm/node_container_manager_linux.go validateNodeAllocatable: for every resource,
    systemReserved + kubeReserved + the hard eviction reservation must not exceed the capacity;
    here a zero allocatable is refused too). Every resource the node's ``capacity`` knows is
    checked; only those ``fields`` touch are reported."""
    errors = []
    for resource, total in sorted(capacity.items()):
        parts = []
        for field in ("systemReserved", "kubeReserved"):
            value = (config.get(field) or {}).get(resource)
            if value not in (None, ""):
                parts.append(("%s.%s" % (field, resource), value, parse_quantity(str(value))))
        reserve = _eviction_reserve(config, resource, total)
        if reserve is not None:
            parts.append(reserve)
        if not parts or not any(name.split(".", 1)[0] in fields for name, _v, _q in parts):
            continue
        reserved = sum(q for _n, _v, q in parts)
        if reserved >= total:
            errors.append("%s reserve %s of %s, and the node has %s (%s): its allocatable %s would be %s"
                          % (" + ".join("%s=%s" % (n, v) for n, v, _q in parts), _show(reserved), resource,
                             _show(total), _CAPACITY_SOURCE[resource], resource,
                             "zero" if reserved == total else "negative"))
    return errors


def _show(value):
    return str(int(value)) if value == int(value) else "%.3f" % float(value)
