# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""containerd and runc: versions, config schemas, runtimes, findings.

Formats parsed here (the real outputs of Debian's containerd 1.4-2.1 and runc
packages are kept as fixtures in tests/unit/fixtures/containerd/):

- ``containerd --version``
  Debian:   ``containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3``
  upstream: ``containerd github.com/containerd/containerd v1.7.0-rc.1 <commit>``
  2.x:      ``containerd github.com/containerd/containerd/v2 2.1.9+unknown `` (trailing space)
- ``runc --version`` first line ``runc version 1.1.5+ds1`` (Debian 11: ``1.0.0~rc93+ds1``).
- ``ctr version``: ``Client:`` and ``Server:`` blocks with ``Version:`` lines.
- config.toml schema: ``version`` absent (1), 2, 3 (containerd 2.0 - 2.2), 4 (2.3+).

The config is read with Python's tomllib (3.11+), else tomlkit (a
style-preserving TOML library, the editor's): containerd 2.x writes literal
(single-quoted) strings and nested, indented tables that a hand-rolled reader
would break. A node with neither cannot be read: ``NoTomlParser``, which the
detectors report as a check that could not run, never as an invalid config.
Editing it is ``_containerd.edit``'s job (tomlkit only).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import re
import sys

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.procfs import pid_files
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# tomlkit (the editor's parser, _containerd.edit) is imported only when used: the detectors read
# with Python's tomllib where there is one, and the node-problem-detector plugin runs them every few
# minutes on every node (importing tomlkit cost ~20 ms a run)
try:
    HAS_TOMLKIT = importlib.util.find_spec("tomlkit") is not None
except (ImportError, ValueError):  # pragma: no cover - a broken installation
    HAS_TOMLKIT = False
TOMLKIT_IMPORT_ERROR = None if HAS_TOMLKIT else "No module named 'tomlkit'"

DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_ADDRESS = "/run/containerd/containerd.sock"
KNOWN_SCHEMAS = (1, 2, 3, 4)

# CRI plugin path of the ``runtimes`` table per schema version (containerd
# docs/cri/config.md for versions 1-2, docs/PLUGINS.md and the 2.0 config for 3).
RUNTIMES_PATH = {
    1: ("plugins", "cri", "containerd", "runtimes"),
    2: ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes"),
    3: ("plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes"),
    4: ("plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes"),
}

# runc PR #1651 (rounds systemd CPUQuota up to 10 ms) first shipped in v1.0.0-rc5
# (opencontainers/runc release notes).
RUNC_QUOTA_FIX = "1.0.0-rc5"
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


class ContainerdConfigError(NodefixError):
    """A config.toml that cannot be read, parsed or understood."""


# --------------------------------------------------------------------------
# versions

_PRE_RE = lazy_compile(r"^(alpha|beta|rc)[.\-_]?(\d*)", re.IGNORECASE)
_SEMVER_RE = lazy_compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(.*)$")
_PRE_RANK = {"alpha": 0, "beta": 1, "rc": 2}
_FINAL_RANK = 3


def parse_semver(text):
    """Split a containerd/runc version string.

    Handles upstream (``v1.7.0-rc.1``), Debian (``1.6.20~ds1``, ``1.0.0~rc93+ds1``,
    ``1.7.0~rc.1``) and Go build suffixes (``2.1.9+unknown``). Returns a dict
    with ``version`` (normalised ``X.Y.Z`` or ``X.Y.Z-<pre>``), ``base``,
    ``major``/``minor``/``patch``, ``prerelease`` (``rc.1``, ``rc93`` or None),
    ``is_prerelease`` and ``key`` (a tuple that orders pre-releases before
    the final release), or None when ``text`` is not a version.
    """
    text = (text or "").strip()
    m = _SEMVER_RE.match(text)
    if not m:
        return None
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    rest = m.group(4) or ""
    build = None
    if "+" in rest:
        rest, build = rest.split("+", 1)
    prerelease = None
    pre_kind, pre_num = None, 0
    # the suffix is a list of parts separated by - ~ . ; the first alpha/beta/rc
    # part marks a pre-release, Debian's ``ds1``/``dfsg`` repack marks are not.
    parts = [p for p in re.split(r"[-~]", rest) if p]
    distro = []
    for part in parts:
        pm = _PRE_RE.match(part.lstrip("."))
        if pm and prerelease is None:
            pre_kind = pm.group(1).lower()
            pre_num = int(pm.group(2)) if pm.group(2) else 0
            prerelease = part.lstrip(".")
            continue
        distro.append(part)
    base = "%d.%d.%d" % (major, minor, patch)
    key = (major, minor, patch, _PRE_RANK[pre_kind] if pre_kind else _FINAL_RANK, pre_num)
    return {
        "raw": text,
        "version": base + ("-" + prerelease if prerelease else ""),
        "base": base,
        "major": major,
        "minor": minor,
        "patch": patch,
        "prerelease": prerelease,
        "is_prerelease": prerelease is not None,
        "distro_suffix": "~".join(distro) or None,
        "build": build,
        "key": key,
    }


def semver_lt(a, b):
    """True when version text ``a`` is older than ``b`` (pre-releases first)."""
    pa, pb = parse_semver(a), parse_semver(b)
    if pa is None or pb is None:
        raise ValueError("not a version: %r / %r" % (a, b))
    return pa["key"] < pb["key"]


def parse_containerd_version(text):
    """Parse ``containerd --version`` (any build); None when unrecognised."""
    for line in (text or "").splitlines():
        tokens = line.split()
        if len(tokens) < 3 or tokens[0] != "containerd":
            continue
        parsed = parse_semver(tokens[2])
        if parsed is None:
            continue
        parsed.update({
            "package": tokens[1],
            "revision": tokens[3] if len(tokens) > 3 else None,
            "line": line.rstrip(),
        })
        return parsed
    return None


def parse_runc_version(text):
    """Parse ``runc --version``; adds ``commit`` and ``spec`` when printed."""
    result = None
    extra = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("runc version"):
            result = parse_semver(line[len("runc version"):].strip())
        elif ":" in line:
            key, value = line.split(":", 1)
            extra[key.strip().lower()] = value.strip()
    if result is None:
        return None
    result["commit"] = extra.get("commit")
    result["spec"] = extra.get("spec")
    return result


def runc_has_quota_bug(info):
    """True when runc (``parse_runc_version``'s result) predates the CPU-quota rounding fix (v1.0.0-rc5)."""
    return info["key"] < parse_semver(RUNC_QUOTA_FIX)["key"]


def parse_ctr_version(text):
    """Parse ``ctr version`` into {'client': ver, 'server': ver, 'server_revision': rev}."""
    section = None
    result = {"client": None, "server": None, "server_revision": None, "uuid": None}
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped in ("Client:", "Server:"):
            section = stripped[:-1].lower()
            continue
        if ":" not in stripped or section is None:
            continue
        key, value = [s.strip() for s in stripped.split(":", 1)]
        if key == "Version":
            result[section] = value
        elif key == "Revision" and section == "server":
            result["server_revision"] = value
        elif key == "UUID" and section == "server":
            result["uuid"] = value
    return result


# --------------------------------------------------------------------------
# config

def require_tomlkit():
    if not HAS_TOMLKIT:
        raise ContainerdConfigError("the Python library tomlkit is required on the node (Debian: python3-tomlkit): %s" % TOMLKIT_IMPORT_ERROR)


def parse_config(text, path="config.toml"):
    """Parse config text with tomlkit; raise ContainerdConfigError on bad TOML."""
    require_tomlkit()
    import tomlkit  # pylint: disable=import-outside-toplevel
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit raises several ParseError subclasses
        raise ContainerdConfigError("%s is not valid TOML: %s" % (path, exc))


class NoTomlParser(NodefixError):
    """Neither tomlkit nor tomllib (Python < 3.11 without python3-tomlkit): nothing TOML can be read.
    Not a ContainerdConfigError - the config is not known to be invalid, it could not be looked at:
    the detectors fail (audit.check_failed, an Unknown condition), never report it invalid."""


def parse_plain(text, path="config.toml"):
    """Read-only parse into plain dicts: Python's tomllib (3.11+), else tomlkit (the editor's
    parser) when installed - both read TOML 1.0 into the same values. NoTomlParser when the node
    has neither."""
    try:
        import tomllib  # pylint: disable=import-outside-toplevel
    except ImportError:
        tomllib = None
    if tomllib is None and HAS_TOMLKIT:
        return _plain(parse_config(text, path))
    if tomllib is None:
        raise NoTomlParser("cannot read %s: this Python (%s) has no TOML parser - tomllib is Python 3.11+, and tomlkit "
                           "is not installed (Debian/Ubuntu: python3-tomlkit; pip install tomlkit); nothing was "
                           "checked" % (path, sys.version.split()[0]))
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContainerdConfigError("%s is not valid TOML: %s" % (path, exc))


def read_runtimes(root, path):
    """The one reader of containerd's runtimes: what the config at node path ``path`` registers.

    Returns ``exists``, ``error`` (None, or why the file could not be read or
    understood), ``schema_version``, ``runtimes`` (as ``list_runtimes``) and
    ``runc_systemd_cgroup``, and ``grpc_address``. Never raises for a bad file.
    """
    info = {"config_path": path, "exists": False, "error": None, "schema_version": None, "runtimes": [],
            "runc_systemd_cgroup": None, "grpc_address": DEFAULT_ADDRESS}
    local = root_path(root, path)
    info["exists"] = os.path.lexists(root_path(root, path, follow_last=False))  # a dangling link exists
    if not info["exists"]:
        return info
    try:
        if not os.path.isfile(local):
            raise ContainerdConfigError("%s is not a regular file" % path)
        try:
            with open(local, "rb") as fh:
                text = fh.read().decode("utf-8")
        except (IOError, OSError) as exc:
            raise ContainerdConfigError("cannot read %s: %s" % (path, exc))
        except UnicodeDecodeError as exc:
            raise ContainerdConfigError("%s is not UTF-8 text: %s" % (path, exc))
        doc = parse_plain(text, path)
        schema = schema_version(doc, path)
    except ContainerdConfigError as exc:
        info["error"] = str(exc)
        return info
    info["schema_version"] = schema
    info["runtimes"] = list_runtimes(doc, schema)
    info["runc_systemd_cgroup"] = runc_systemd_cgroup(doc, schema)
    info["grpc_address"] = grpc_address(doc)
    return info


def schema_version(doc, path="config.toml"):
    """Schema of a parsed config: 1 when ``version`` is absent, else 2, 3 or 4."""
    if doc is None or "version" not in doc:
        return 1
    value = _plain(doc["version"])
    if isinstance(value, bool) or not isinstance(value, int) or value not in KNOWN_SCHEMAS:
        raise ContainerdConfigError(
            "%s has unknown config schema version %r (known: %s)" % (path, value, ", ".join(str(v) for v in KNOWN_SCHEMAS)))
    return value


def schema_for_containerd(version_text):
    """Schema a containerd release writes by default (1.x: 2, 2.0-2.2: 3, 2.3+: 4)."""
    parsed = parse_semver(version_text)
    if parsed is None:
        return None
    if parsed["major"] < 2:
        return 2
    if parsed["major"] == 2 and parsed["minor"] < 3:
        return 3
    return 4


def runtime_path(schema, name):
    """Dotted TOML table name of runtime ``name`` (for messages and docs)."""
    return ".".join(_key_repr(k) for k in RUNTIMES_PATH[schema] + (name,))


def _key_repr(key):
    return key if re.match(r"^[A-Za-z0-9_-]+$", key) else '"%s"' % key


def _plain(value):
    """tomlkit item -> plain Python value."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if isinstance(value, dict):
        return dict((k, _plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, (bool, int, float, str)):
        return _plain(value.value)
    return value


def _get(doc, keys):
    node = doc
    for key in keys:
        if not hasattr(node, "get") or key not in node:
            return None
        node = node[key]
    return node


def list_runtimes(doc, schema):
    """Runtimes registered in the CRI plugin: [{name, runtime_type, options, table}]."""
    table = _get(doc, RUNTIMES_PATH[schema]) if doc is not None else None
    result = []
    if table is None:
        return result
    for name in table:
        entry = table[name]
        if not hasattr(entry, "get"):
            continue
        plain = _plain(entry)
        options = plain.pop("options", {}) if isinstance(plain, dict) else {}
        result.append({
            "name": name,
            "runtime_type": plain.get("runtime_type"),
            "options": options if isinstance(options, dict) else {},
            "settings": dict((k, v) for k, v in plain.items() if k != "runtime_type"),
            "table": runtime_path(schema, name),
        })
    return result


def runc_systemd_cgroup(doc, schema):
    """runc's ``SystemdCgroup`` (True/False), or None when not set."""
    if doc is None:
        return None
    value = _get(doc, RUNTIMES_PATH[schema] + ("runc", "options", "SystemdCgroup"))
    return None if value is None else bool(_plain(value))


# --------------------------------------------------------------------------
# node inspection

def daemon_process(root="/"):
    """The running containerd: {pid, argv, started (epoch seconds)} or None.

    ``started`` comes from /proc/<pid>/stat (start time in clock ticks after
    boot) plus /proc/stat ``btime``; the role compares it with the ctime of
    containerd's files to tell whether the files on disk are the ones the
    daemon runs with.
    """
    proc = root_path(root, "/proc")
    for number, comm in pid_files(proc, "comm"):
        if (comm or "").strip() != "containerd":
            continue
        pid = str(number)
        argv = [a for a in (read_text(os.path.join(proc, pid, "cmdline"), "") or "").split("\0") if a]
        started = None
        stat = read_text(os.path.join(proc, pid, "stat"), "") or ""
        btime = None
        for line in (read_text(os.path.join(proc, "stat"), "") or "").splitlines():
            if line.startswith("btime "):
                btime = int(line.split()[1])
        fields = stat.rsplit(")", 1)[-1].split()
        if btime is not None and len(fields) > 19:
            try:
                ticks = os.sysconf("SC_CLK_TCK")
            except (ValueError, OSError, AttributeError):
                ticks = 100
            started = btime + int(fields[19]) / float(ticks)
        return {"pid": int(pid), "argv": argv, "started": started}
    return None


_SCAN = object()


def find_config_path(root="/", daemon=_SCAN):
    """Config file the running containerd uses (``--config``/``-c``), else the default. ``daemon``: what
    ``daemon_process`` already returned (each call reads every process's ``comm``)."""
    daemon = daemon_process(root) if daemon is _SCAN else daemon
    if daemon is None:
        return DEFAULT_CONFIG, "default"
    argv = daemon["argv"]
    for i, arg in enumerate(argv):
        if arg in ("--config", "-c") and i + 1 < len(argv):
            return argv[i + 1], "cmdline"
        if arg.startswith("--config="):
            return arg.split("=", 1)[1], "cmdline"
    return DEFAULT_CONFIG, "default"


def grpc_address(doc):
    value = _get(doc, ("grpc", "address")) if doc is not None else None
    value = _plain(value) if value is not None else None
    return value or DEFAULT_ADDRESS


def runc_state(runner, root="/", runc_binary=None, runtimes=()):
    """The one reader of runc: path, version and whether it has the CPU quota rounding bug.

    ``runc_binary`` wins; else the ``BinaryName`` of containerd's runc runtime
    (``runtimes`` as ``list_runtimes`` gives them); else ``runc`` on the PATH.
    Values are None when unknown.
    """
    state = {"binary": None, "version": None, "version_info": None, "cpu_quota_rounding_bug": None}
    name = runc_binary
    if not name:
        for rt in runtimes:
            if rt["name"] == "runc" and rt["options"].get("BinaryName"):
                name = rt["options"]["BinaryName"]
        name = name or "runc"
        if os.path.isabs(name):
            name = root_path(root, name)
    path = runner.bin(name) if runner is not None else None
    if not path:
        return state
    state["binary"] = path
    # One run per binary per audit: the containerd and cpu_quota detectors both
    # need it, and under node-problem-detector's 5 s timeout a Go binary's start
    # is not free. The runner's ``memo`` lives as long as the audit.
    memo = getattr(runner, "memo", None)
    key = ("runc --version", path)
    if memo is not None and key in memo:
        rc, out = memo[key]
    else:
        rc, out, _err = runner.run([path, "--version"], check=False)
        if memo is not None:
            memo[key] = (rc, out)
    info = parse_runc_version(out) if rc == 0 else None
    if info is not None:
        state["version"] = info["version"]
        state["version_info"] = info
        state["cpu_quota_rounding_bug"] = runc_has_quota_bug(info)
    return state


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
