# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""The kubelet's KubeletConfiguration knowledge: fields, the deprecated flags that set them,
version defaults, and the validation of requested settings (one job of the kubelet detector,
see ``_kubelet``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

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


_KVER_RE = lazy_compile(r"Kubernetes\s+v?(\d+)\.(\d+)(?:\.(\d+))?")


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

# resource.Quantity's serialization format (k8s.io/apimachinery/pkg/api/resource,
# https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/):
# <sign?><digits>[.<digits>] with a binary-SI suffix (Ki..Ei), a decimal-SI one
# (n u m "" k M G T P E) or a decimal exponent (e<int> / E<int>; "E" alone is exa).
_QUANTITY_RE = lazy_compile(r"^([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_PERCENT_RE = lazy_compile(r"^[0-9]+(\.[0-9]+)?%$")
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# "no quantity may represent a number greater than 2^63-1 in magnitude" (the Quantity docs)
QUANTITY_MAX = 2 ** 63 - 1


def parse_quantity(text):
    """The value of a Kubernetes quantity as an exact Fraction; ValueError names what is wrong.

    Parsed the way resource.ParseQuantity reads it (suffixes, exponents, a
    leading sign, ``5.`` and ``.5``), and bounded as a Quantity is: a magnitude
    above 2^63-1 (``1e999``) is refused, where Kubernetes would silently cap it.
    """
    import fractions  # pylint: disable=import-outside-toplevel  # only here: the NPD plugin imports this module every tick
    found = _QUANTITY_RE.match(text) if isinstance(text, str) else None
    if not found:
        raise ValueError("%r is not a Kubernetes quantity (like 500Mi, 1.5G, 100m or 12e6)" % (text,))
    sign, number, suffix = found.group(1), found.group(2), found.group(3) or ""
    if suffix in _BINARY_SI:
        scale = fractions.Fraction(2 ** _BINARY_SI[suffix])
    else:
        exponent = _DECIMAL_SI[suffix] if suffix in _DECIMAL_SI else int(suffix[1:])
        # beyond 10^±40 no digits of a real quantity are left (bounded before 10**exponent is computed)
        if exponent > 40:
            raise ValueError("%r is larger than a Kubernetes quantity can be (2^63-1)" % text)
        if exponent < -40:
            return fractions.Fraction(0)
        scale = fractions.Fraction(10) ** exponent
    value = fractions.Fraction(number if not number.endswith(".") else number[:-1]) * scale
    if sign == "-":
        value = -value
    if abs(value) > QUANTITY_MAX:
        raise ValueError("%r is larger than a Kubernetes quantity can be (2^63-1)" % text)
    return value


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
    import difflib  # pylint: disable=import-outside-toplevel  # only for a misspelled name (the NPD plugin imports this module every tick)
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
                if name.startswith("eviction") and _PERCENT_RE.match(sval):
                    if float(sval[:-1]) > 100:
                        errors.append("%s.%s: %r is more than 100%%" % (name, key, val))
                        continue
                else:
                    try:
                        quantity = parse_quantity(sval)
                    except ValueError as exc:
                        errors.append("%s.%s: %s" % (name, key, exc))
                        continue
                    if quantity < 0:
                        errors.append("%s.%s: %r must not be negative" % (name, key, val))
                        continue
                clean[key] = sval
            out[name] = clean
    if errors:
        raise KubeletError("invalid settings: " + "; ".join(errors), errors=errors)
    return out


# ---------------------------------------------------------------------------
# The profile: what the kubelet role applies by default, understood by the
# module itself (option ``profile``), so the version decisions live here and
# its rate limits are floors, not requests that "get raised".
# ---------------------------------------------------------------------------

# The rate-limit floor of this collection, set here and nowhere else: the
# kubelet role writes it (profile), the kubelet detector reports a limit below
# it (or below the version default, when higher: 50/100 for API and events since
# 1.27, kubernetes PR #116121), and docs/findings.md is generated from it.
# Busy nodes outgrow the pre-1.27 defaults of 5/10 (kubernetes#80647: pods wait
# for kubelet's client rate limiter).
RATE_LIMIT_FLOOR = {
    "kubeAPIQPS": 30,
    "kubeAPIBurst": 40,
    "eventRecordQPS": 30,
    "eventBurst": 40,
    "registryPullQPS": 30,
    "registryBurst": 40,
}

# Rate limits of the profile: a floor each (the module keeps the version
# default or the value in effect when higher). Omitted (None), the floor above.
PROFILE_FLOORS = {
    "api_qps": "kubeAPIQPS", "api_burst": "kubeAPIBurst",
    "event_qps": "eventRecordQPS", "event_burst": "eventBurst",
    "registry_qps": "registryPullQPS", "registry_burst": "registryBurst",
}
# maxParallelImagePulls exists since kubelet 1.27 (kubernetes PR #115220)
PARALLEL_PULLS_SINCE = (1, 27)

# The module's ``profile`` option (an Ansible argument spec, suboptions).
PROFILE_OPTIONS = {
    "api_qps": {"type": "int"},
    "api_burst": {"type": "int"},
    "event_qps": {"type": "int"},
    "event_burst": {"type": "int"},
    "registry_qps": {"type": "int"},
    "registry_burst": {"type": "int"},
    "parallel_image_pulls": {"type": "bool", "default": True},
    "max_parallel_image_pulls": {"type": "int", "default": 5},
    "unbounded_parallel_pulls": {"type": "bool", "default": False},
}


def profile_settings(profile, version, version_text=None):
    """The settings ``profile`` (PROFILE_OPTIONS values) means on a kubelet of ``version``.

    Returns ``(settings, floors, notes)``: the KubeletConfiguration fields, the
    names of those that are floors, and what the profile could not do here, in
    words (parallel pulls on a kubelet that cannot bound them).
    """
    errors = ["profile.%s: must be 0 or more, got %d" % (k, profile[k]) for k in sorted(PROFILE_FLOORS)
              if profile.get(k) is not None and profile[k] < 0]
    if profile.get("max_parallel_image_pulls") is not None and profile["max_parallel_image_pulls"] < 1:
        errors.append("profile.max_parallel_image_pulls: must be 1 or more, got %d"
                      % profile["max_parallel_image_pulls"])
    if errors:
        raise KubeletError("invalid profile: " + "; ".join(errors), errors=errors)
    settings = dict((field, RATE_LIMIT_FLOOR[field] if profile.get(key) is None else profile[key])
                    for key, field in PROFILE_FLOORS.items())
    floors = sorted(settings)
    notes = []
    if profile.get("parallel_image_pulls"):
        bounded = version is not None and tuple(version[:2]) >= PARALLEL_PULLS_SINCE
        if bounded:
            settings["serializeImagePulls"] = False
            settings["maxParallelImagePulls"] = profile["max_parallel_image_pulls"]
        elif profile.get("unbounded_parallel_pulls"):
            settings["serializeImagePulls"] = False
            notes.append("kubelet %s cannot bound parallel image pulls (maxParallelImagePulls needs 1.27): pulling "
                         "in parallel without a bound (unbounded_parallel_pulls)" % (version_text or "of unknown version"))
        else:
            notes.append("kubelet %s cannot bound parallel image pulls (maxParallelImagePulls needs 1.27): image "
                         "pulls stay serial; set unbounded_parallel_pulls to pull in parallel without a bound"
                         % (version_text or "of unknown version"))
    return settings, floors, notes


_UNIT_NAME_RE = lazy_compile(r"^[A-Za-z0-9:_.@\\-]+\.service$")


def unit_name_errors(name, key="unit"):
    """A systemd service name (no path): the unit is looked up by name in systemd's directories."""
    if name is not None and (not _UNIT_NAME_RE.match(name) or name.startswith(".")):
        return ["%s %r is not a systemd service name (like kubelet.service)" % (key, name)]
    return []
