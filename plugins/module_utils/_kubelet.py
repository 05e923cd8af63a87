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

import copy
import difflib
import io
import json
import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils import _fileio
from ansible_collections.nodefix.k8s.plugins.module_utils import _kubelet_flags as kflags
from ansible_collections.nodefix.k8s.plugins.module_utils._common import (
    NodefixError,
    finding_from,
    root_path,
)

try:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    HAS_RUAMEL = True
    RUAMEL_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - depends on the node
    HAS_RUAMEL = False
    RUAMEL_IMPORT_ERROR = exc
    YAML = None
    CommentedMap = dict

try:
    import yaml as pyyaml
    HAS_PYYAML = True
except ImportError:  # pragma: no cover - depends on the node
    pyyaml = None
    HAS_PYYAML = False

UNIT = "kubelet.service"
API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"
DEFAULT_DROPIN_NAME = "99-nodefix-k8s.conf"

# systemd unit search path, highest priority first (systemd.unit(5)).
UNIT_DIRS = [
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
]

# ---------------------------------------------------------------------------
# KubeletConfiguration knowledge
# ---------------------------------------------------------------------------

# Top-level fields of kubelet.config.k8s.io/v1beta1 KubeletConfiguration
# (k8s.io/kubelet/config/v1beta1/types.go, up to 1.35). Used to spot typos.
KNOWN_FIELDS = frozenset("""
apiVersion kind enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency
httpCheckFrequency staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile
tlsPrivateKeyFile tlsCipherSuites tlsMinVersion rotateCertificates serverTLSBootstrap
authentication authorization registryPullQPS registryBurst imagePullCredentialsVerificationPolicy
preloadedImagesVerificationAllowlist eventRecordQPS eventBurst enableDebuggingHandlers
enableContentionProfiling healthzPort healthzBindAddress oomScoreAdj clusterDomain clusterDNS
streamingConnectionIdleTimeout nodeStatusUpdateFrequency nodeStatusReportFrequency
nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge imageGCHighThresholdPercent
imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups cgroupRoot
cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions
cpuManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy topologyManagerScope
topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods podCIDR
podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles
contentType kubeAPIQPS kubeAPIBurst serializeImagePulls maxParallelImagePulls evictionHard
evictionSoft evictionSoftGracePeriod evictionPressureTransitionPeriod evictionMaxPodGracePeriod
evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore enableControllerAttachDetach
protectKernelDefaults makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates
failSwapOn memorySwap containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers
containerLogMonitorInterval configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved
reservedSystemCPUs showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup
enforceNodeAllocatable allowedUnsafeSysctls volumePluginDir providerID kernelMemcgNotification
logging enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff reservedMemory
enableProfilingHandler enableDebugFlagsHandler seccompDefault memoryThrottlingFactor
registerWithTaints registerNode tracing localStorageCapacityIsolation containerRuntimeEndpoint
imageServiceEndpoint failCgroupV1 userNamespaces
""".split())

EVICTION_SIGNALS = frozenset([
    "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
    "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available",
    "allocatableMemory.available",
])
RESERVED_RESOURCES = frozenset(["cpu", "memory", "ephemeral-storage", "pid"])

# Fields this collection can ensure. ``floor``: a rate limit the module never
# lowers (requested value, version default and current value are floors);
# ``zero``: what 0 means for that field.
SUPPORTED = {
    "kubeAPIQPS": {"type": "int", "min": 0, "flag": "kube-api-qps", "floor": True, "zero": "client-default"},
    "kubeAPIBurst": {"type": "int", "min": 0, "flag": "kube-api-burst", "floor": True},
    "eventRecordQPS": {"type": "int", "min": 0, "flag": "event-qps", "floor": True, "zero": "unlimited"},
    "eventBurst": {"type": "int", "min": 0, "flag": "event-burst", "floor": True},
    "registryPullQPS": {"type": "int", "min": 0, "flag": "registry-qps", "floor": True, "zero": "unlimited"},
    "registryBurst": {"type": "int", "min": 0, "flag": "registry-burst", "floor": True},
    "serializeImagePulls": {"type": "bool", "flag": "serialize-image-pulls"},
    "maxParallelImagePulls": {"type": "int", "min": 1, "nullable": True, "since": (1, 27)},
    "podPidsLimit": {"type": "int", "min": -1, "flag": "pod-max-pids"},
    "maxPods": {"type": "int", "min": 0, "flag": "max-pods"},
    "evictionHard": {"type": "map", "keys": EVICTION_SIGNALS, "flag": "eviction-hard"},
    "evictionSoft": {"type": "map", "keys": EVICTION_SIGNALS, "flag": "eviction-soft"},
    "systemReserved": {"type": "map", "keys": RESERVED_RESOURCES, "flag": "system-reserved"},
    "kubeReserved": {"type": "map", "keys": RESERVED_RESOURCES, "flag": "kube-reserved"},
}

# Deprecated kubelet flags that set a KubeletConfiguration field
# (kubernetes cmd/kubelet/app/options/options.go AddKubeletConfigFlags).
# value kinds: int, bool, str, list (comma separated), map< (k<v,...), map= (k=v,...)
FLAG_FIELDS = {
    "kube-api-qps": ("kubeAPIQPS", "int"),
    "kube-api-burst": ("kubeAPIBurst", "int"),
    "event-qps": ("eventRecordQPS", "int"),
    "event-burst": ("eventBurst", "int"),
    "registry-qps": ("registryPullQPS", "int"),
    "registry-burst": ("registryBurst", "int"),
    "serialize-image-pulls": ("serializeImagePulls", "bool"),
    "pod-max-pids": ("podPidsLimit", "int"),
    "max-pods": ("maxPods", "int"),
    "eviction-hard": ("evictionHard", "map<"),
    "eviction-soft": ("evictionSoft", "map<"),
    "system-reserved": ("systemReserved", "map="),
    "kube-reserved": ("kubeReserved", "map="),
    "cgroup-driver": ("cgroupDriver", "str"),
    "container-runtime-endpoint": ("containerRuntimeEndpoint", "str"),
    "healthz-port": ("healthzPort", "int"),
    "healthz-bind-address": ("healthzBindAddress", "str"),
    "fail-swap-on": ("failSwapOn", "bool"),
    "cluster-dns": ("clusterDNS", "list"),
    "cluster-domain": ("clusterDomain", "str"),
    "resolv-conf": ("resolvConf", "str"),
    "rotate-certificates": ("rotateCertificates", "bool"),
    "max-open-files": ("maxOpenFiles", "int"),
    "read-only-port": ("readOnlyPort", "int"),
    "port": ("port", "int"),
    "address": ("address", "str"),
    "cgroup-root": ("cgroupRoot", "str"),
    "cgroups-per-qos": ("cgroupsPerQOS", "bool"),
    "image-gc-high-threshold": ("imageGCHighThresholdPercent", "int"),
    "image-gc-low-threshold": ("imageGCLowThresholdPercent", "int"),
    "runtime-request-timeout": ("runtimeRequestTimeout", "str"),
    "feature-gates": ("featureGates", "map="),
    "pods-per-core": ("podsPerCore", "int"),
    "protect-kernel-defaults": ("protectKernelDefaults", "bool"),
    "provider-id": ("providerID", "str"),
}
BOOL_FLAGS = frozenset(k for k, v in FLAG_FIELDS.items() if v[1] == "bool") | frozenset(
    ["register-node", "logtostderr", "alsologtostderr", "exit-on-lock-contention", "help", "version"])
FIELD_FLAGS = dict((v[0], k) for k, v in FLAG_FIELDS.items())

DEFAULT_EVICTION_HARD = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
}

# The API and event limits that changed in 1.27 (kubernetes PR #116121).
NEW_DEFAULTS_SINCE = (1, 27)


def version_defaults(version):
    """KubeletConfiguration v1beta1 defaults for a kubelet ``version`` tuple.

    An unknown version gets the 1.27+ defaults: the higher floors, so that a
    caller never writes a value below what a current kubelet uses.
    """
    new = version is None or tuple(version[:2]) >= NEW_DEFAULTS_SINCE
    return {
        "kubeAPIQPS": 50 if new else 5,
        "kubeAPIBurst": 100 if new else 10,
        "eventRecordQPS": 50 if new else 5,
        "eventBurst": 100 if new else 10,
        "registryPullQPS": 5,
        "registryBurst": 10,
        "serializeImagePulls": True,
        "maxParallelImagePulls": None,
        "podPidsLimit": -1,
        "maxPods": 110,
        "evictionHard": dict(DEFAULT_EVICTION_HARD),
        "evictionSoft": {},
        "systemReserved": {},
        "kubeReserved": {},
        "healthzPort": 10248,
        "healthzBindAddress": "127.0.0.1",
    }


_KVER_RE = re.compile(r"Kubernetes\s+v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_kubelet_version(text):
    """``Kubernetes v1.29.3`` -> ((1, 29, 3), "1.29.3"); (None, None) when unparsable."""
    m = _KVER_RE.search(text or "")
    if not m:
        m2 = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
        if not m2:
            return None, None
        m = m2
    parts = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return parts, "%d.%d.%d" % parts


class KubeletError(NodefixError):
    """A problem the module reports with fail_json (no file was changed)."""


# ---------------------------------------------------------------------------
# Values: validation of requested settings
# ---------------------------------------------------------------------------

_QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]+)?$")
_PERCENT_RE = re.compile(r"^[0-9]+(\.[0-9]+)?%$")


def _to_int(name, value, errors):
    if isinstance(value, bool):
        errors.append("%s: expected an integer, got a boolean (%r)" % (name, value))
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value.strip())
    errors.append("%s: expected an integer, got %r" % (name, value))
    return None


def _to_bool(name, value, errors):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.strip().lower() in ("true", "yes", "on", "1")
    errors.append("%s: expected a boolean, got %r" % (name, value))
    return None


def _suggest(name, choices):
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = dict((c.lower(), c) for c in choices)
        if name.lower() in lowered:
            close = [lowered[name.lower()]]
    return " (did you mean %s?)" % close[0] if close else ""


def validate_settings(settings):
    """Normalise requested fields; raise KubeletError listing every problem."""
    errors = []
    out = {}
    for name, value in (settings or {}).items():
        spec = SUPPORTED.get(name)
        if spec is None:
            if name in KNOWN_FIELDS:
                errors.append("%s: a KubeletConfiguration field this module does not manage; supported: %s"
                              % (name, ", ".join(sorted(SUPPORTED))))
            else:
                errors.append("%s: unknown KubeletConfiguration field%s" % (name, _suggest(name, SUPPORTED.keys())))
            continue
        if value is None:
            if spec.get("nullable"):
                out[name] = None
                continue
            errors.append("%s: a value is required" % name)
            continue
        kind = spec["type"]
        if kind == "int":
            num = _to_int(name, value, errors)
            if num is None:
                continue
            if num < spec["min"]:
                if spec["min"] == 0:
                    errors.append("%s: %d must not be a negative number" % (name, num))
                elif spec["min"] == 1:
                    errors.append("%s: %d must be a positive number" % (name, num))
                else:
                    errors.append("%s: %d must be %d or greater" % (name, num, spec["min"]))
                continue
            if num > 2 ** 31 - 1 and name != "podPidsLimit":
                errors.append("%s: %d does not fit in int32 (kubelet's type for this field)" % (name, num))
                continue
            if num > 2 ** 63 - 1:
                errors.append("%s: %d does not fit in int64 (kubelet's type for this field)" % (name, num))
                continue
            out[name] = num
        elif kind == "bool":
            b = _to_bool(name, value, errors)
            if b is not None:
                out[name] = b
        elif kind == "map":
            if not isinstance(value, dict):
                errors.append("%s: expected a mapping, got %r" % (name, value))
                continue
            clean = {}
            for key, val in value.items():
                if key not in spec["keys"]:
                    errors.append("%s: unknown key %r%s" % (name, key, _suggest(str(key), spec["keys"])))
                    continue
                sval = str(val).strip() if not isinstance(val, bool) else None
                if sval is None or not sval:
                    errors.append("%s.%s: expected a quantity, got %r" % (name, key, val))
                    continue
                if name.startswith("eviction"):
                    ok = _PERCENT_RE.match(sval) or _QUANTITY_RE.match(sval)
                else:
                    ok = _QUANTITY_RE.match(sval)
                if not ok:
                    errors.append("%s.%s: %r is not a valid quantity" % (name, key, val))
                    continue
                if sval.startswith("-"):
                    errors.append("%s.%s: %r must not be negative" % (name, key, val))
                    continue
                if sval.endswith("%") and float(sval[:-1]) > 100:
                    errors.append("%s.%s: %r is more than 100%%" % (name, key, val))
                    continue
                clean[key] = sval
            out[name] = clean
    if errors:
        raise KubeletError("invalid settings: " + "; ".join(errors), errors=errors)
    return out


# ---------------------------------------------------------------------------
# systemd unit parsing
# ---------------------------------------------------------------------------

def split_systemctl_cat(text):
    """Split ``systemctl cat`` output into [(path, content)]."""
    files = []
    current, buf = None, []
    prev_blank = True
    for line in (text or "").splitlines():
        m = re.match(r"^# (/\S+\.(?:service|conf))\s*$", line)
        if m and prev_blank:
            if current is not None:
                files.append((current, "\n".join(buf).rstrip("\n") + "\n"))
            current, buf = m.group(1), []
            prev_blank = False
            continue
        buf.append(line)
        prev_blank = line.strip() == ""
    if current is not None:
        files.append((current, "\n".join(buf).rstrip("\n") + "\n"))
    return files


def unit_paths_from_tree(root, unit=UNIT):
    """The unit file and its drop-ins as systemd would pick them (no systemctl)."""
    main = None
    for d in UNIT_DIRS:
        p = os.path.join(d, unit)
        rp = root_path(root, p)
        if os.path.isfile(rp) or os.path.islink(rp):
            if os.path.realpath(rp) == "/dev/null":
                return []
            main = p
            break
    if main is None:
        return []
    dropins = {}
    for d in reversed(UNIT_DIRS):
        dd = os.path.join(d, unit + ".d")
        rdd = root_path(root, dd)
        if not os.path.isdir(rdd):
            continue
        for name in os.listdir(rdd):
            if name.endswith(".conf"):
                dropins[name] = os.path.join(dd, name)
    return [main] + [dropins[n] for n in sorted(dropins)]


def logical_lines(text):
    """Yield (first_line_index, last_line_index, joined) for unit/env syntax with ``\\`` continuation."""
    lines = (text or "").split("\n")
    i = 0
    while i < len(lines):
        start = i
        parts = []
        line = lines[i]
        while line.endswith("\\") and i + 1 < len(lines) and not line.lstrip().startswith(("#", ";")):
            parts.append(line[:-1])
            i += 1
            line = lines[i]
        parts.append(line)
        yield start, i, " ".join(p for p in parts)
        i += 1


def split_words(text, keep_quotes=False):
    """Split a systemd command line / Environment= value into words (quotes, backslashes)."""
    words = []
    cur = []
    in_word = False
    quote = None
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                quote = None
                if keep_quotes:
                    cur.append(c)
            elif c == "\\" and quote == '"' and i + 1 < n:
                i += 1
                cur.append(text[i])
            else:
                cur.append(c)
        elif c in "\"'":
            quote = c
            in_word = True
            if keep_quotes:
                cur.append(c)
        elif c == "\\" and i + 1 < n:
            i += 1
            cur.append(text[i])
            in_word = True
        elif c.isspace():
            if in_word:
                words.append("".join(cur))
                cur = []
                in_word = False
        else:
            cur.append(c)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(cur))
    return words


def parse_unit(text, path):
    """Entries of the [Service] section: list of (key, value, path)."""
    entries = []
    section = None
    for _s, _e, line in logical_lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if section != "Service" or "=" not in stripped:
            continue
        key, value = stripped.split("=", 1)
        # "%%" is a literal "%" in unit files (systemd.unit(5) "Specifiers")
        entries.append((key.strip(), value.strip().replace("%%", "%"), path))
    return entries


def parse_env_file(text):
    """systemd EnvironmentFile= syntax -> list of (name, value) (the reader is _kubelet_flags.env_assignments)."""
    return [(name, value) for name, value, _posmap in kflags.env_assignments(text)]


def parse_exec_start(value):
    """ExecStart value -> argv words (with ``$VAR`` / ``${VAR}`` kept for expansion)."""
    value = value.strip()
    while value[:1] in ("-", "@", ":", "+", "!"):
        value = value[1:]
    return split_words(value, keep_quotes=True)


def _unquote(word):
    return split_words(word)[0] if split_words(word) else ""


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def parse_flags(args):
    """pflag-like parsing of ``args`` (list of (word, origin)).

    Returns a list of dicts ``{name, value, origin, raw}`` for every flag in
    order; ``value`` is the string after ``=`` or the next word.
    """
    out = []
    i = 0
    while i < len(args):
        word, origin = args[i]
        if not word.startswith("-") or word in ("-", "--"):
            i += 1
            continue
        body = word.lstrip("-")
        if "=" in body:
            name, value = body.split("=", 1)
            raw = [word]
        elif body in BOOL_FLAGS:
            name, value, raw = body, "true", [word]
        elif i + 1 < len(args):
            name, value, raw = body, args[i + 1][0], [word, args[i + 1][0]]
            i += 1
        else:
            name, value, raw = body, "", [word]
        out.append({"name": name, "value": value, "origin": origin, "raw": raw})
        i += 1
    return out


def positional_words(args):
    """Words that are neither flags nor flag values (kubelet refuses to start with any)."""
    out = []
    i = 0
    while i < len(args):
        word = args[i][0]
        if not word.startswith("-") or word in ("-", "--"):
            out.append(word)
        elif "=" not in word and word.lstrip("-") not in BOOL_FLAGS:
            i += 1
        i += 1
    return out


def flag_value(kind, text):
    """Convert a flag value like kubelet's pflag types do; raise ValueError."""
    if kind == "int":
        return int(text.strip())
    if kind == "bool":
        t = text.strip().lower()
        if t in ("true", "1", "t"):
            return True
        if t in ("false", "0", "f"):
            return False
        raise ValueError("invalid boolean %r" % text)
    if kind == "list":
        return [p.strip() for p in text.split(",") if p.strip()]
    if kind in ("map<", "map="):
        sep = "<" if kind == "map<" else "="
        out = {}
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if sep not in part:
                raise ValueError("malformed pair %r" % part)
            k, v = part.split(sep, 1)
            out[k.strip()] = v.strip()
        return out
    return text


def format_flag_value(kind, value):
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("map<", "map="):
        sep = "<" if kind == "map<" else "="
        return ",".join("%s%s%s" % (k, sep, v) for k, v in value.items())
    if kind == "list":
        return ",".join(value)
    return str(value)


# ---------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------

def _rt_yaml(text=None):
    yml = YAML(typ="rt")
    yml.preserve_quotes = True
    yml.width = 4096
    offset = 0
    if text:
        # keep the file's sequence style: "key:\n- a" (kubeadm) or "key:\n  - a"
        prev_indent = None
        for line in text.splitlines():
            stripped = line.lstrip()
            if not stripped or stripped.startswith("#"):
                continue
            ind = len(line) - len(stripped)
            if stripped.startswith("- ") and prev_indent is not None:
                offset = max(0, ind - prev_indent)
                break
            if stripped.endswith(":"):
                prev_indent = ind
            else:
                prev_indent = None
    yml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yml


# Read-only fallback when neither ruamel.yaml nor PyYAML is on the node
# (node_audit must still work there): the YAML subset KubeletConfiguration
# files use - block mappings and sequences, flow {} / [], plain and quoted
# scalars, comments. The same parser is in lab/kubelet-double/kubelet.

class YamlError(Exception):
    """Input outside the YAML subset, or malformed."""


def _strip_comment(line):
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _split_key(content, lineno):
    quote = None
    for i, c in enumerate(content):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'" and i == 0:
            quote = c
        elif c == ":" and (i + 1 == len(content) or content[i + 1] in " \t"):
            return _scalar(content[:i].strip(), lineno), content[i + 1:].strip()
    return None, None


def _split_flow(text):
    parts, depth, quote, cur = [], 0, None, []
    for c in text:
        if quote:
            cur.append(c)
            if c == quote:
                quote = None
            continue
        if c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _scalar(text, lineno):
    t = text.strip()
    if t.startswith(("|", ">", "&", "*", "!")):
        raise YamlError("line %d: unsupported YAML construct %r" % (lineno, t[:10]))
    if t.startswith("{"):
        if not t.endswith("}"):
            raise YamlError("line %d: unterminated flow mapping" % lineno)
        out = {}
        for part in _split_flow(t[1:-1]):
            k, v = _split_key(part, lineno)
            if k is None:
                raise YamlError("line %d: bad flow mapping entry %r" % (lineno, part))
            out[k] = _scalar(v, lineno)
        return out
    if t.startswith("["):
        if not t.endswith("]"):
            raise YamlError("line %d: unterminated flow sequence" % lineno)
        return [_scalar(p, lineno) for p in _split_flow(t[1:-1])]
    if t.startswith('"'):
        if len(t) < 2 or not t.endswith('"'):
            raise YamlError("line %d: unterminated double-quoted string" % lineno)
        try:
            return json.loads(t)
        except ValueError:
            raise YamlError("line %d: bad double-quoted string" % lineno)
    if t.startswith("'"):
        if len(t) < 2 or not t.endswith("'"):
            raise YamlError("line %d: unterminated single-quoted string" % lineno)
        return t[1:-1].replace("''", "'")
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if re.match(r"^[-+]?[0-9]+$", t):
        return int(t)
    if re.match(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$", t):
        return float(t)
    if t.startswith(("]", "}", "`", "@")) or ": " in t:
        raise YamlError("line %d: cannot parse %r" % (lineno, t))
    return t


def subset_yaml_load(text):
    """A YAML subset: block mappings/sequences, flow {}/[], plain/quoted scalars, comments."""
    lines = []
    for no, raw in enumerate(text.splitlines(), 1):
        if raw.strip() in ("---",) and not lines:
            continue
        body = _strip_comment(raw).rstrip()
        if not body.strip():
            continue
        lead = body[:len(body) - len(body.lstrip())]
        if "\t" in lead:
            raise YamlError("line %d: found a tab character used for indentation" % no)
        lines.append([len(lead), body.strip(), no])
    if not lines:
        return None
    if lines[0][1].startswith(("{", "[")) and len(lines) == 1:
        return _scalar(lines[0][1], lines[0][2])
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise YamlError("invalid JSON: %s" % exc)
    pos = [0]

    def is_item(content):
        return content == "-" or content.startswith("- ")

    def node(indent):
        if pos[0] >= len(lines):
            return None
        ind, content, _no = lines[pos[0]]
        if ind < indent:
            return None
        if is_item(content):
            return seq(ind)
        return mapping(ind)

    def mapping(ind):
        out = {}
        while pos[0] < len(lines):
            cur_ind, content, no = lines[pos[0]]
            if cur_ind < ind:
                break
            if cur_ind > ind:
                raise YamlError("line %d: bad indentation of a mapping entry" % no)
            if is_item(content):
                break
            key, rest = _split_key(content, no)
            if key is None:
                raise YamlError("line %d: could not find expected ':'" % no)
            if key in out:
                raise YamlError("line %d: mapping key %r already defined" % (no, key))
            pos[0] += 1
            if rest == "":
                if pos[0] < len(lines) and lines[pos[0]][0] > ind:
                    out[key] = node(lines[pos[0]][0])
                elif pos[0] < len(lines) and lines[pos[0]][0] == ind and is_item(lines[pos[0]][1]):
                    out[key] = seq(ind)
                else:
                    out[key] = None
            else:
                out[key] = _scalar(rest, no)
        return out

    def seq(ind):
        out = []
        while pos[0] < len(lines):
            cur_ind, content, no = lines[pos[0]]
            if cur_ind != ind or not is_item(content):
                if cur_ind > ind:
                    raise YamlError("line %d: bad indentation of a sequence entry" % no)
                break
            item = content[1:].strip()
            if item == "":
                pos[0] += 1
                out.append(node(ind + 1))
                continue
            key, _rest = _split_key(item, no)
            if key is not None and not item.startswith(("\"", "'", "{", "[")):
                # "- key: value" starts a mapping whose column is the item's
                lines[pos[0]] = [cur_ind + (len(content) - len(item)), item, no]
                out.append(mapping(lines[pos[0]][0]))
                continue
            pos[0] += 1
            out.append(_scalar(item, no))
        return out

    result = node(0)
    if pos[0] < len(lines):
        raise YamlError("line %d: unexpected content %r" % (lines[pos[0]][2], lines[pos[0]][1]))
    return result


def load_yaml(text, path, roundtrip=True):
    """Parse a KubeletConfiguration document; raise KubeletError on malformed input."""
    if roundtrip and not HAS_RUAMEL:
        raise KubeletError("the Python library ruamel.yaml is required on the node to edit %s "
                           "(Debian/Ubuntu: python3-ruamel.yaml)" % path)
    try:
        if HAS_RUAMEL:
            data = _rt_yaml(text).load(text) if roundtrip else YAML(typ="safe", pure=True).load(text)
        elif HAS_PYYAML:
            data = pyyaml.safe_load(text)
        else:
            data = subset_yaml_load(text)
    except KubeletError:
        raise
    except Exception as exc:  # ruamel/pyyaml raise many error types
        raise KubeletError("%s is not valid YAML: %s" % (path, str(exc).replace("\n", " ")), path=path)
    if data is None:
        data = CommentedMap() if roundtrip and HAS_RUAMEL else {}
    if not isinstance(data, dict):
        raise KubeletError("%s: expected a KubeletConfiguration mapping, got %s" % (path, type(data).__name__), path=path)
    kind = data.get("kind")
    if kind is not None and kind != KIND:
        raise KubeletError("%s: kind is %r, expected %s" % (path, kind, KIND), path=path)
    return data


def dump_yaml(data, original_text):
    buf = io.StringIO()
    _rt_yaml(original_text).dump(data, buf)
    return buf.getvalue()


def plain(value):
    """Convert ruamel containers to plain Python types."""
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (what kubelet uses for drop-ins)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


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
        joined = _fileio.node_path(root, path)
        real = _fileio.resolve_target(root, joined, what="kubelet file")
        return _fileio.read_utf8(real, what="kubelet file")
    except _fileio.FileSafetyError as exc:
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


def discover(runner, root="/", unit=UNIT, use_systemctl=None, overlay=None, unit_paths=None):
    """Read the unit and its environment; return a Node (no config parsing yet).

    ``unit_paths`` re-reads the unit from these files (a planned change,
    with ``overlay``) instead of asking systemd again.
    """
    node = Node()
    paths = None
    if unit_paths is not None:
        use_systemctl = False
    systemctl = None
    if use_systemctl is None:
        use_systemctl = root in (None, "", "/")
    if use_systemctl and runner is not None:
        systemctl = runner.bin("systemctl")
    if systemctl:
        rc, out, _err = runner.run([systemctl, "cat", "--no-pager", unit], check=False)
        if rc == 0 and out.strip():
            cat_files = split_systemctl_cat(out)
            node.unit_files = []
            for path, content in cat_files:
                text = _read(root, path, overlay)
                node.unit_files.append((path, text if text is not None else content))
            paths = [p for p, _t in node.unit_files]
    if paths is None:
        for path in unit_paths_from_tree(root, unit) if unit_paths is None else unit_paths:
            node.unit_files.append((path, _read(root, path, overlay) or ""))
    if not node.unit_files:
        return node

    entries = []
    for path, text in node.unit_files:
        entries.extend(parse_unit(text, path))

    env_assign = []   # Environment=
    env_files = []
    exec_starts = []
    for key, value, path in entries:
        if key == "Environment":
            if value == "":
                env_assign = []
                continue
            for word in split_words(value):
                if "=" in word:
                    name, val = word.split("=", 1)
                    env_assign.append({"name": name, "value": val, "path": path, "kind": "unit"})
        elif key == "EnvironmentFile":
            if value == "":
                env_files = []
                continue
            optional = value.startswith("-")
            env_files.append((value.lstrip("-"), optional))
        elif key == "ExecStart":
            if value == "":
                exec_starts = []
            else:
                exec_starts.append((value, path))
    node.env_files = env_files
    # Environment= first, then EnvironmentFile= override (systemd.exec(5)).
    defs = list(env_assign)
    for fpath, optional in env_files:
        text = _read(root, fpath, overlay)
        if text is None:
            if not optional:
                raise KubeletError("EnvironmentFile %s of %s does not exist (kubelet would not start)" % (fpath, unit))
            continue
        for name, val in parse_env_file(text):
            defs.append({"name": name, "value": val, "path": fpath, "kind": "envfile"})
    node.env_defs = defs
    for d in defs:
        node.env[d["name"]] = d
    if not exec_starts:
        raise KubeletError("%s has no ExecStart= line" % unit)
    value, epath = exec_starts[-1]
    node.exec_start = parse_exec_start(value)

    argv = []
    for idx, word in enumerate(node.exec_start):
        origin_lit = {"kind": "execstart", "path": epath}
        m = re.match(r"^\$([A-Za-z_][A-Za-z0-9_]*)$", word)
        if m:
            d = node.env.get(m.group(1))
            if d is not None:
                for w in split_words(d["value"]):
                    argv.append((w, {"kind": d["kind"], "path": d["path"], "variable": d["name"]}))
            continue

        def _sub(mm):
            d = node.env.get(mm.group(1))
            return d["value"] if d else ""
        expanded = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", _sub, word)
        words = split_words(expanded)
        argv.append((words[0] if words else "", origin_lit))
    node.argv = argv
    # the binary: first word, or the first one named like kubelet (wrappers)
    words = [w for w, _o in argv]
    node.binary = words[0] if words else None
    for w in words:
        if os.path.basename(w).startswith("kubelet") or os.path.basename(w) == "hyperkube":
            node.binary = w
            break
    start = words.index(node.binary) + 1 if node.binary in words else 1
    node.flags = parse_flags(argv[start:])
    node.positional = positional_words(argv[start:])
    for f in node.flags:
        if f["name"] == "config":
            node.config_path = f["value"]
        elif f["name"] == "config-dir":
            node.config_dir = f["value"] or None
    node.kops = kops_markers(root, node.unit_files)
    env_paths = [p for p, _o in env_files]
    if node.kops:
        node.layout = "kops"
    elif any(p.endswith("/kubelet.env") for p in env_paths) or node.config_path == "/etc/kubernetes/kubelet-config.yaml":
        node.layout = "kubespray"
    elif any(p.endswith("kubeadm-flags.env") for p in env_paths) or any(p.endswith("10-kubeadm.conf") for p, _t in node.unit_files):
        node.layout = "kubeadm"
    elif node.config_path:
        node.layout = "config-file"
    else:
        node.layout = "flags-only"
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
        base = _fileio.node_path(root, config_dir)
    except _fileio.FileSafetyError as exc:
        raise KubeletError("--config-dir: %s" % exc.msg, path=config_dir)
    if not _fileio.inside(root, os.path.realpath(base)):
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


# ---------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------

ROLE = "nodefix.k8s.kubelet"

FINDINGS = {
    "kubelet.api_qps_low": {
        "severity": "medium",
        "title": "kubelet talks to the API server with low rate limits (kubeAPIQPS/kubeAPIBurst)",
        "remedy": "raise kubeAPIQPS/kubeAPIBurst to at least 30/40, and never below the kubelet version's defaults "
                  "(50/100 since 1.27), in the kubelet config; "
                  "pods stay Pending/ContainerCreating while kubelet waits for its client rate limiter",
        "role": ROLE, "tag": "kubelet_profile",
    },
    "kubelet.event_qps_low": {
        "severity": "low",
        "title": "kubelet event rate limits (eventRecordQPS/eventBurst) are low and drop events",
        "remedy": "raise eventRecordQPS/eventBurst to at least 30/40, and never below the kubelet version's "
                  "defaults (50/100 since 1.27)",
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

# Busy nodes outgrow the pre-1.27 defaults of 5/10 (kubernetes#80647: pods
# wait for kubelet's client rate limiter); 30/40 is the floor this collection
# applies, and kubelet 1.27 made 50/100 the defaults. A limit is low when it is
# below the higher of the two for the node's kubelet version (the same floor
# the kubelet role writes).
RATE_LIMIT_FLOOR = {"kubeAPIQPS": 30, "kubeAPIBurst": 40, "eventRecordQPS": 30, "eventBurst": 40}


def low_thresholds(version):
    """((api qps, api burst), (event qps, event burst)) below which limits are low."""
    d = version_defaults(version)
    floor = dict((k, max(v, d[k])) for k, v in RATE_LIMIT_FLOOR.items())
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


def stale_flags(node, layers_merged, sources):
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
    flags_found = stale_flags(node, _merged, sources)
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


_UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.service$")


def unit_name_errors(name, key="unit"):
    """A systemd service name (no path): the unit is looked up by name in systemd's directories."""
    if name is not None and (not _UNIT_NAME_RE.match(name) or name.startswith(".")):
        return ["%s %r is not a systemd service name (like kubelet.service)" % (key, name)]
    return []


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    errors = unit_name_errors(p.get("unit"))
    if p.get("kubelet_version") and parse_kubelet_version("Kubernetes v%s" % p["kubelet_version"].lstrip("v"))[0] is None:
        errors.append("kubelet_version %r is not a version like 1.29.3" % p["kubelet_version"])
    return errors


def check(runner, root="/", **opts):
    """Detector for node_audit: kubelet facts plus ``findings``."""
    try:
        _node, _layers, facts = inspect(runner, root, unit=opts.get("unit") or UNIT,
                                        kubelet_version=opts.get("kubelet_version"), roundtrip=False)
    except KubeletError as exc:
        facts = {"present": True, "error": exc.msg,
                 "findings": [finding_from(FINDINGS, "kubelet.config_unreadable", evidence={"error": exc.msg})]}
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
        cm = CommentedMap()
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


def plan(node, layers, settings, allow_lower=False, stale_mode="remove", dropin_name=DEFAULT_DROPIN_NAME,
         use_config_dir=True, root="/"):
    """Compute the new texts of every file; raise KubeletError before any write."""
    if not HAS_RUAMEL:
        raise KubeletError("the Python library ruamel.yaml is required on the node (Debian/Ubuntu: python3-ruamel.yaml)")
    before, merged_before, sources_before, flag_errors = effective(node, layers)
    if flag_errors:
        raise KubeletError("the kubelet command line cannot be parsed: " + "; ".join(flag_errors))
    defaults = version_defaults(node.version)
    if "maxParallelImagePulls" in settings and settings["maxParallelImagePulls"] is not None:
        if node.version is None:
            raise KubeletError("maxParallelImagePulls needs kubelet 1.27 or later and the kubelet version is unknown: "
                               "set kubelet_version")
        if tuple(node.version[:2]) < (1, 27):
            raise KubeletError("maxParallelImagePulls needs kubelet 1.27 or later; this kubelet is %s "
                               "(it does not know the field: pulls would stay serial)" % node.version_text)

    targets = {}
    raised = []
    for field, requested in settings.items():
        spec = SUPPORTED[field]
        if spec["type"] == "map":
            base = merged_before.get(field)
            if base is None:
                base = dict(defaults.get(field) or {})
            target = dict(base)
            target.update(requested)
            targets[field] = target
            continue
        target = _target_for(field, requested, before.get(field) if field in merged_before else None,
                             defaults.get(field), allow_lower)
        if target != requested:
            reason = "version default" if target == defaults.get(field) else "current value is higher"
            raised.append({"field": field, "requested": requested, "written": target, "reason": reason})
        targets[field] = target

    # where to write
    target_layer = None
    created = False
    if node.config_dir and use_config_dir:
        path = os.path.join(node.config_dir, dropin_name)
        for layer in layers:
            if layer.path == path:
                target_layer = layer
        if target_layer is None:
            data = CommentedMap()
            data["apiVersion"] = API_VERSION
            data["kind"] = KIND
            target_layer = Layer(path, "drop-in", None, data, exists=False)
            target_layer.header = ("# Managed by the nodefix.k8s collection (kubelet_config module).\n"
                                   "# Drop-in for kubelet --config-dir; later files and command-line flags override it.\n")
            layers = layers + [target_layer]
            layers.sort(key=lambda x: (x.kind != "config", x.path))
            created = True
    elif node.config_path:
        target_layer = [layer for layer in layers if layer.kind == "config"][0]
    else:
        raise KubeletError("this kubelet runs on flags only (no --config file, no --config-dir): "
                           "create a KubeletConfiguration file and pass --config first; refusing to add more deprecated flags")

    modified = set()
    for field, value in targets.items():
        if _set_in(target_layer.data, field, value):
            modified.add(target_layer.path)
    # drop-ins that sort after ours and set the same field would win: align them
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
    env_changes, flag_edits = _edit_stale_flags(node, root, targets, stale_mode)

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

    # re-read the texts about to be written with the same parsers as discovery
    after_cfg, sources_after = reread(node, root, overlay=dict((f["path"], f["after"]) for f in files))
    errors = kubelet_errors(after_cfg, node.version)
    if errors:
        raise KubeletError("refusing to write a configuration kubelet rejects: " + "; ".join(errors), errors=errors)
    mismatch = missing_targets(after_cfg, targets)
    if mismatch:
        raise KubeletError("after the change these fields would still not have the wanted value (another file or "
                           "flag overrides them, or a flag this module cannot edit safely): %s; nothing was written"
                           % ", ".join(mismatch), effective=report(after_cfg, sources_after, mismatch))
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
