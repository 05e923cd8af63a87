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

The config is read and edited with tomlkit (a style-preserving TOML library):
containerd 2.x writes literal (single-quoted) strings and nested, indented
tables that a hand-rolled reader would break.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._common import (
    finding_from,
    read_text,
    root_path,
)

try:
    import tomlkit
    from tomlkit.items import Table as _TomlTable, Whitespace as _TomlWhitespace
    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - depends on the node
    tomlkit = None
    _TomlTable = _TomlWhitespace = None
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = exc

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
        "remedy": "Fix the file (containerd --config <file> config dump must succeed) before restarting containerd.",
        "role": "nodefix.k8s.containerd",
        "tag": "containerd_config",
    },
    "runc.cpu_quota_rounding_bug": {
        "severity": "high",
        "title": "runc is older than v1.0.0-rc5: CPU limits that are not whole percents fail with EINVAL under the systemd cgroup driver",
        "remedy": "Upgrade runc to v1.0.0-rc5 or later (opencontainers/runc PR #1651).",
        "role": "nodefix.k8s.containerd",
        "tag": "containerd_upgrade",
    },
}


class ContainerdConfigError(Exception):
    """A config.toml that cannot be read, parsed or understood."""


# --------------------------------------------------------------------------
# versions

_PRE_RE = re.compile(r"^(alpha|beta|rc)[.\-_]?(\d*)", re.IGNORECASE)
_SEMVER_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(.*)$")
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


def runc_has_quota_bug(version_text):
    """True when runc predates the CPU-quota rounding fix (v1.0.0-rc5)."""
    return semver_lt(version_text, RUNC_QUOTA_FIX)


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
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit raises several ParseError subclasses
        raise ContainerdConfigError("%s is not valid TOML: %s" % (path, exc))


def load_config(path):
    """Return (text, document) of ``path``; text None when the file is absent."""
    if not os.path.lexists(path):
        return None, None
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except (IOError, OSError) as exc:
        raise ContainerdConfigError("cannot read %s: %s" % (path, exc))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContainerdConfigError("%s is not UTF-8 text: %s" % (path, exc))
    return text, parse_config(text, path)


def parse_plain(text, path="config.toml"):
    """Read-only parse into plain dicts: tomlkit when installed (the editor's parser),
    else Python's tomllib (3.11+), so a node without python3-tomlkit is still read."""
    if HAS_TOMLKIT:
        return _plain(parse_config(text, path))
    try:
        import tomllib  # pylint: disable=import-outside-toplevel
    except ImportError:
        require_tomlkit()
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
    info["exists"] = os.path.lexists(local)
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


def runtimes_path(schema):
    return RUNTIMES_PATH[schema]


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
# editing (tomlkit, keeping comments, indentation and quoting style)

def _indent_of(item):
    try:
        return item.trivia.indent
    except AttributeError:
        return ""


def _uses_literal_strings(text):
    """containerd 2.x writes 'single quoted' strings; new strings follow the file."""
    literal = len(re.findall(r"=\s*'", text or ""))
    basic = len(re.findall(r'=\s*"', text or ""))
    return literal > basic


def _toml_value(value, literal):
    if isinstance(value, str) and literal and "'" not in value and "\n" not in value:
        return tomlkit.string(value, literal=True)
    if isinstance(value, list):
        arr = tomlkit.array()
        for v in value:
            arr.append(_toml_value(v, literal))
        return arr
    return tomlkit.item(value)


def _tables_in(container):
    return [(k, v) for k, v in container.items() if isinstance(v, _TomlTable)]


class _Style(object):
    """How the file lays out tables: containerd's generated configs indent each
    table header by two spaces per nesting level (items two more), 2.x adds a
    blank line before sub-tables; hand-written files often indent nothing."""

    def __init__(self, text):
        self.indented = bool(re.search(r"^[ \t]+\[", text or "", re.M))
        self.literal = _uses_literal_strings(text) if (text or "").strip() else False

    def header(self, depth):
        return "  " * (depth - 1) if self.indented else ""

    def item(self, depth):
        return "  " * depth if self.indented else ""


def _set_key(table, key, value, literal, indent):
    """Set ``key`` in ``table``; returns True when the value changed."""
    if key in table:
        current = _plain(table[key])
        if current == value and type(current) is type(value):
            return False
        table[key] = _toml_value(value, literal)
        return True
    for k, v in table.value.body:
        if k is not None and not isinstance(v, _TomlTable):
            indent = _indent_of(v)
            break
    item = _toml_value(value, literal)
    item.trivia.indent = indent
    body = table.value.body
    position = len(body)
    for idx in range(len(body) - 1, -1, -1):
        if isinstance(body[idx][1], (_TomlTable, _TomlWhitespace)):
            position = idx
            continue
        break
    if position == len(body):
        table.add(key, item)
    else:
        _insert_at(table, position, key, item)
    _fix_indent(table, key, indent)
    return True


def _fix_indent(table, key, indent):
    """tomlkit prefixes new items with the table's own indent; set it exactly."""
    for k, v in table.value.body:
        if k is not None and k.key == key:
            v.trivia.indent = indent


def _insert_at(table, position, key, item):
    try:
        table.value._insert_at(position, key, item)  # pylint: disable=protected-access
    except Exception:  # older tomlkit: append instead
        table.add(key, item)


def _explicit_table():
    """A table rendered with its own header even when it only holds tables."""
    try:
        return tomlkit.table(False)
    except TypeError:  # pragma: no cover - tomlkit without is_super_table
        return tomlkit.table()


def _ensure_path(doc, keys, style):
    """Walk ``keys`` from the document, creating missing levels as explicit,
    empty tables with their own header the way containerd's generated configs
    do (tomlkit does not round-trip indented sub-tables of implicit tables)."""
    node = doc
    for depth, key in enumerate(keys, 1):
        if key in node:
            node = node[key]
            if not hasattr(node, "get"):
                raise ContainerdConfigError("%s is not a table in the config" % key)
            continue
        node.add(key, _explicit_table())
        node = node[key]
        node.trivia.indent = style.header(depth)
    return node


def _fill_table(table, values, style, levels, blank_before_tables):
    """Populate a new table; ``levels`` is [(header indent, item indent), ...]
    for the table and its sub-tables."""
    header, item_indent = levels[0]
    table.trivia.indent = header
    for key, value in values.items():
        if isinstance(value, dict):
            continue
        table.add(key, _toml_value(value, style.literal))
        _fix_indent(table, key, item_indent)
    for key, value in values.items():
        if not isinstance(value, dict):
            continue
        if blank_before_tables and len(table.value.body):
            table.add(tomlkit.nl())
        table.add(key, tomlkit.table())
        _fill_table(table[key], value, style, levels[1:] or levels[-1:], blank_before_tables)


def _first_item_indent(table, default):
    for k, v in table.value.body:
        if k is not None and not isinstance(v, _TomlTable):
            return _indent_of(v)
    return default


def _levels_like(sibling, style, depth):
    """Indentation of a runtime table and its options table, copied from an
    existing runtime when there is one (hand-written files indent by taste)."""
    if sibling is None:
        return [(style.header(depth), style.item(depth)), (style.header(depth + 1), style.item(depth + 1))]
    header = _indent_of(sibling)
    step = style.item(1) if style.indented else ""
    item = _first_item_indent(sibling, header + step)
    sub = sibling.get("options") if hasattr(sibling, "get") else None
    if isinstance(sub, _TomlTable):
        sub_header = _indent_of(sub)
        sub_item = _first_item_indent(sub, sub_header + (item[len(header):] if item.startswith(header) else step))
    else:
        sub_header, sub_item = item, item + (item[len(header):] if item.startswith(header) else step)
    return [(header, item), (sub_header, sub_item)]


def _ends_with_blank(table):
    body = table.value.body
    if not body:
        return False
    last = body[-1][1]
    if isinstance(last, _TomlTable):
        return _ends_with_blank(last)
    return isinstance(last, _TomlWhitespace) and "\n" in last.s


def _last_table(table):
    tables = _tables_in(table)
    return _last_table(tables[-1][1]) if tables else table


def _has_blank_before_subtable(table):
    body = table.value.body
    for idx, (key, value) in enumerate(body):
        if isinstance(value, _TomlTable) and idx > 0 and isinstance(body[idx - 1][1], _TomlWhitespace):
            return True
    return False


def set_runtime(doc, schema, name, spec, style):
    """Ensure runtime ``name`` has ``spec`` ({runtime_type, options: {...}, other keys}).

    Keys that already have the wanted value are not touched (their quoting
    and place stay); differing keys are replaced in place; missing keys and
    tables are added in the file's indentation and quoting style.
    Returns True on change.
    """
    base = RUNTIMES_PATH[schema]
    runtimes = _ensure_path(doc, base, style)
    spec = dict(spec or {})
    options = spec.pop("options", None) or {}
    flat = dict((k, v) for k, v in spec.items() if v is not None)
    depth = len(base) + 1
    if name not in runtimes:
        siblings = _tables_in(runtimes)
        blank = bool(siblings) and _has_blank_before_subtable(siblings[-1][1])
        separate = bool(siblings) and _ends_with_blank(siblings[-1][1])
        runtimes.add(name, tomlkit.table())
        values = dict(flat)
        if options:
            values["options"] = options
        levels = _levels_like(siblings[-1][1] if siblings else None, style, depth)
        _fill_table(runtimes[name], values, style, levels, blank)
        if separate:
            _last_table(runtimes[name]).add(tomlkit.nl())
        return True
    entry = runtimes[name]
    if not hasattr(entry, "get"):
        raise ContainerdConfigError("runtime %s is not a table" % name)
    changed = False
    levels = _levels_like(entry, style, depth)
    for key, value in flat.items():
        changed = _set_key(entry, key, value, style.literal, levels[0][1]) or changed
    if options:
        if "options" not in entry:
            entry.add("options", tomlkit.table())
            entry["options"].trivia.indent = levels[1][0]
            changed = True
        opt_table = entry["options"]
        for key, value in options.items():
            changed = _set_key(opt_table, key, value, style.literal, levels[1][1]) or changed
    return changed


def set_runc_systemd_cgroup(doc, schema, value, style):
    """Set runc's ``SystemdCgroup``; creates the runc runtime when missing."""
    runtimes = _get(doc, RUNTIMES_PATH[schema])
    if runtimes is None or "runc" not in runtimes:
        return set_runtime(doc, schema, "runc", {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": bool(value)}}, style)
    return set_runtime(doc, schema, "runc", {"options": {"SystemdCgroup": bool(value)}}, style)


def edit_config(text, runtimes=None, systemd_cgroup=None, schema=None, path="config.toml"):
    """Apply the requested changes to config ``text``.

    ``text`` None or empty means a new file written with ``schema`` (which
    is then required). Returns (new_text, schema_version, changed_keys).
    Raises ContainerdConfigError on bad TOML or an unknown schema version.
    """
    require_tomlkit()
    if text is None or not text.strip():
        if schema is None:
            raise ContainerdConfigError("%s is empty or missing and no schema version is known (set schema_version or containerd_binary)" % path)
        if schema not in KNOWN_SCHEMAS:
            raise ContainerdConfigError("unknown config schema version %r" % (schema,))
        doc = tomlkit.document()
        if schema > 1:
            doc.add("version", schema)
        text = ""
    else:
        doc = parse_config(text, path)
        found = schema_version(doc, path)
        if schema is not None and schema != found:
            raise ContainerdConfigError("%s uses schema version %s, not %s; refusing to mix schemas" % (path, found, schema))
        schema = found
    style = _Style(text)
    if not text.strip():
        style.literal = schema >= 3
    expected = expected_plain(_plain(doc), schema, runtimes, systemd_cgroup)
    changes = []
    try:
        for name, spec in sorted((runtimes or {}).items()):
            if set_runtime(doc, schema, name, spec, style):
                changes.append(runtime_path(schema, name))
        if systemd_cgroup is not None:
            if set_runc_systemd_cgroup(doc, schema, systemd_cgroup, style):
                changes.append(runtime_path(schema, "runc") + ".options.SystemdCgroup")
        new_text = tomlkit.dumps(doc)
    except ContainerdConfigError:
        raise
    except Exception as exc:  # tomlkit refuses some layouts (inline tables holding tables, ...)
        raise ContainerdConfigError("%s cannot be edited safely (%s: %s); edit it by hand, nothing was changed"
                                    % (path, type(exc).__name__, exc))
    if new_text == text:
        return new_text, schema, []
    # re-read what would be written: the wanted values, and nothing else changed
    check = parse_config(new_text, path)
    schema_version(check, path)
    got = _plain(check)
    if got != expected:
        raise ContainerdConfigError(
            "%s uses a layout this module cannot edit safely (dotted keys or inline tables around the runtimes "
            "table?): the edit would change %s; convert those keys to [table] form or edit by hand, nothing was "
            "changed" % (path, ", ".join(plain_differences(expected, got)) or "the document"))
    return new_text, schema, changes


def expected_plain(before, schema, runtimes, systemd_cgroup):
    """The plain document ``edit_config`` must produce: ``before`` plus the wanted keys."""
    doc = copy.deepcopy(before)

    def runtime(name):
        node = doc
        for key in RUNTIMES_PATH[schema] + (name,):
            if not isinstance(node.get(key, {}), dict):
                raise ContainerdConfigError("%s is not a table in the config" % key)
            node = node.setdefault(key, {})
        return node

    for name, spec in (runtimes or {}).items():
        entry = runtime(name)
        spec = dict(spec or {})
        options = spec.pop("options", None) or {}
        for key, value in spec.items():
            if value is not None:
                entry[key] = value
        if options:
            if not isinstance(entry.get("options", {}), dict):
                raise ContainerdConfigError("runtime %s: options is not a table in the config" % name)
            entry.setdefault("options", {}).update(options)
    if systemd_cgroup is not None:
        node = doc
        for key in RUNTIMES_PATH[schema]:
            node = node.get(key) if isinstance(node, dict) else None
        had_runc = isinstance(node, dict) and "runc" in node
        entry = runtime("runc")
        if not had_runc:
            entry["runtime_type"] = "io.containerd.runc.v2"
        if not isinstance(entry.get("options", {}), dict):
            raise ContainerdConfigError("runtime runc: options is not a table in the config")
        entry.setdefault("options", {})["SystemdCgroup"] = bool(systemd_cgroup)
    return doc


def plain_differences(a, b, prefix=""):
    """Dotted keys whose values differ between plain documents ``a`` and ``b``."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return [prefix or "(root)"] if a != b else []
    out = []
    for key in sorted(set(a) | set(b), key=str):
        sub = "%s.%s" % (prefix, _key_repr(str(key))) if prefix else _key_repr(str(key))
        if key not in a or key not in b:
            out.append(sub)
        else:
            out.extend(plain_differences(a[key], b[key], sub))
    return out


RUNTIME_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
OPTION_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
INT64 = (-(2 ** 63), 2 ** 63 - 1)
UINT32_OPTIONS = ("IoUid", "IoGid")


def _check_value(where, value):
    if value is None:
        raise ContainerdConfigError("%s is null; give a value or leave the key out" % where)
    if isinstance(value, float):
        raise ContainerdConfigError("%s: floating point values are not used by containerd runtimes" % where)
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise ContainerdConfigError("%s = %d does not fit a 64-bit integer" % (where, value))
        return
    if isinstance(value, str):
        if "\n" in value or "\r" in value or "\0" in value:
            raise ContainerdConfigError("%s contains a newline or NUL character" % where)
        return
    if isinstance(value, list):
        for idx, item in enumerate(value):
            if not isinstance(item, str) or isinstance(item, bool):
                raise ContainerdConfigError("%s[%d] must be a string, got %r" % (where, idx, item))
            _check_value("%s[%d]" % (where, idx), item)
        return
    raise ContainerdConfigError("%s must be a string, integer, boolean or list of strings, got %s"
                                % (where, type(value).__name__))


def check_runtime_specs(runtimes):
    """Refuse runtime names, keys and values containerd's TOML tables would not take."""
    if not isinstance(runtimes, dict):
        raise ContainerdConfigError("runtimes must be a dict keyed by runtime name, got %s" % type(runtimes).__name__)
    for name, spec in runtimes.items():
        if not isinstance(name, str) or not RUNTIME_NAME_RE.match(name):
            raise ContainerdConfigError("runtime name %r is not valid: use letters, digits, '.', '_' and '-' "
                                        "(at most 63, starting with a letter or digit)" % (name,))
        if not isinstance(spec, dict):
            raise ContainerdConfigError("runtimes.%s must be a dict (runtime_type, options), got %r" % (name, spec))
        options = spec.get("options")
        if options is not None and not isinstance(options, dict):
            raise ContainerdConfigError("runtimes.%s.options must be a dict, got %r" % (name, options))
        for key, value in spec.items():
            if key == "options":
                continue
            if not isinstance(key, str) or not OPTION_KEY_RE.match(key):
                raise ContainerdConfigError("runtimes.%s: key %r is not a valid containerd runtime key" % (name, key))
            if isinstance(value, dict):
                raise ContainerdConfigError("runtimes.%s.%s must be a scalar or a list, not a table" % (name, key))
            if value is not None:
                _check_value("runtimes.%s.%s" % (name, key), value)
        if key_runtime_type_bad(spec.get("runtime_type")):
            raise ContainerdConfigError("runtimes.%s.runtime_type %r is not a runtime type like io.containerd.runc.v2"
                                        % (name, spec.get("runtime_type")))
        for key, value in (options or {}).items():
            if not isinstance(key, str) or not OPTION_KEY_RE.match(key):
                raise ContainerdConfigError("runtimes.%s.options: key %r is not a valid option name" % (name, key))
            where = "runtimes.%s.options.%s" % (name, key)
            if isinstance(value, dict):
                raise ContainerdConfigError("%s must be a scalar or a list, not a table" % where)
            _check_value(where, value)
            if key in UINT32_OPTIONS and (isinstance(value, bool) or not isinstance(value, int)
                                          or not 0 <= value <= 2 ** 32 - 1):
                raise ContainerdConfigError("%s must be an integer between 0 and 4294967295, got %r" % (where, value))


def key_runtime_type_bad(value):
    if value is None:
        return False
    return not isinstance(value, str) or not re.match(r"^[A-Za-z0-9_.-]+$", value)


def dump_has(dump_text, runtimes=None, systemd_cgroup=None):
    """Check ``containerd config dump`` output holds the wanted entries.

    Returns a list of problems (empty when everything is there). The dump is
    written in the binary's own schema (1.x: 2, 2.x: 3).
    """
    problems = []
    doc = parse_config(dump_text, "config dump output")
    schema = schema_version(doc, "config dump output")
    for name, spec in (runtimes or {}).items():
        found = _get(doc, RUNTIMES_PATH[schema] + (name,))
        if found is None:
            problems.append("runtime %s missing from config dump" % name)
            continue
        plain = _plain(found)
        rtype = (spec or {}).get("runtime_type")
        if rtype and plain.get("runtime_type") != rtype:
            problems.append("runtime %s has runtime_type %r in config dump" % (name, plain.get("runtime_type")))
        dumped_options = plain.get("options") or {}
        # containerd 1.4's config dump prints runtime options tables empty
        # (BurntSushi encoder and map[string]interface{}); nothing to compare then.
        for key, value in ((spec or {}).get("options") or {}).items() if dumped_options else ():
            if dumped_options.get(key) != value:
                problems.append("runtime %s option %s is %r in config dump" % (name, key, (plain.get("options") or {}).get(key)))
    runc_options = _get(doc, RUNTIMES_PATH[schema] + ("runc", "options"))
    if systemd_cgroup is not None and runc_options is not None and len(runc_options):
        got = runc_systemd_cgroup(doc, schema)
        if bool(got) != bool(systemd_cgroup):
            problems.append("runc SystemdCgroup is %r in config dump" % (got,))
    return problems


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
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        pids = []
    for pid in sorted(pids, key=int):
        comm = (read_text(os.path.join(proc, pid, "comm"), "") or "").strip()
        if comm != "containerd":
            continue
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


def find_config_path(root="/"):
    """Config file the running containerd uses (``--config``/``-c``), else the default."""
    daemon = daemon_process(root)
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
        state["cpu_quota_rounding_bug"] = info["key"] < parse_semver(RUNC_QUOTA_FIX)["key"]
    return state


def runc_findings(state, **evidence):
    """``runc.cpu_quota_rounding_bug`` for a ``runc_state``: the only place that finding is made."""
    if not state["cpu_quota_rounding_bug"]:
        return []
    found = {"version": state["version"], "fixed_in": RUNC_QUOTA_FIX}
    found.update(evidence)
    return [finding_from(FINDINGS, "runc.cpu_quota_rounding_bug", subject=state["binary"], evidence=found)]


# The detector's options (an Ansible argument spec): containerd_info's
# argument_spec and node_audit's options.containerd, checked by _options.
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


# Long on purpose (~85 lines): one straight read of containerd, its config, runc and the socket, in the
# order the facts depend on each other.
def check(runner, root="/", minimum_version=DEFAULT_MINIMUM_VERSION, containerd_binary="containerd",
          ctr_binary="ctr", runc_binary=None, config_path=None, check_socket=True, timeout="5s", **_opts):
    """containerd/runc detector used by containerd_info and node_audit.

    Returns facts (``installed``, ``version``, ``config_path``, ``schema_version``,
    ``runtimes``, ``runc_systemd_cgroup``, ``runc``, ``socket``) and ``findings``.
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

    path, source = (config_path, "option") if config_path else find_config_path(root)
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

    address = ctd["grpc_address"]
    facts["socket"]["address"] = address
    if check_socket and facts["installed"]:
        ctr = runner.bin(ctr_binary)
        if not ctr:
            facts["socket"]["error"] = "ctr not found"
        elif not os.path.exists(root_path(root, address)):
            facts["socket"]["reachable"] = False
            facts["socket"]["error"] = "socket %s does not exist" % address
        else:
            rc, out, err = runner.run([ctr, "--address", address, "--timeout", timeout, "version"], check=False)
            parsed = parse_ctr_version(out)
            facts["socket"]["reachable"] = rc == 0 and parsed["server"] is not None
            facts["socket"]["server_version"] = parsed["server"]
            server = parse_semver(parsed["server"] or "")
            facts["socket"]["server_base"] = server["base"] if server else None
            if not facts["socket"]["reachable"]:
                facts["socket"]["error"] = (err or out).strip() or "ctr version rc=%s" % rc
        if facts["socket"]["reachable"] is False:
            findings.append(finding_from(FINDINGS, "containerd.socket_unreachable", subject=address, evidence={
                "error": facts["socket"]["error"]}))
    facts["findings"] = findings
    return facts
