# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""containerd's config.toml, edited: runtimes and runc's SystemdCgroup set with
tomlkit while keeping comments, indentation and quoting style; the edit is
parsed again and compared with what was asked; specs are validated first; a
``containerd config dump`` is checked for the result.

The reader (schemas, runtimes, the plain view) is ``_containerd``; this file
only writes. Used by the ``containerd_config`` module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.config import (
    _get,
    _key_repr,
    _plain,
    ContainerdConfigError,
    KNOWN_SCHEMAS,
    parse_config,
    require_tomlkit,
    runc_systemd_cgroup,
    runtime_path,
    RUNTIMES_PATH,
    schema_version,
)

try:
    import tomlkit
    from tomlkit.items import Table as _TomlTable, Whitespace as _TomlWhitespace
except ImportError:  # pragma: no cover - the modules check HAS_TOMLKIT before editing
    tomlkit = None
    _TomlTable = _TomlWhitespace = ()


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
