# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Editing of containerd-shim-runsc-v1's TOML file (runsc.toml) for runsc_config.

The shim decodes the file into its ``options`` struct: top-level keys
(``log_path``, ``io_uid`` ...) and a ``[runsc_config]`` table read as
``map[string]string`` whose entries become ``--key=value`` runsc flags
(https://gvisor.dev/docs/user_guide/containerd/configuration/). Inputs are
checked against that contract, the edit keeps every other byte (tomlkit),
and the edited text is parsed again and compared with what was asked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re
import traceback

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

TOMLKIT_IMP_ERR = None
try:
    import tomlkit
    HAS_TOMLKIT = True
except ImportError:
    HAS_TOMLKIT = False
    TOMLKIT_IMP_ERR = traceback.format_exc()

INT_SETTINGS = ("io_uid", "io_gid")
STR_SETTINGS = ("log_path", "log_level", "binary_name", "root", "shim_cgroup")
UINT32_MAX = 2 ** 32 - 1
# runsc flag names (flag.FlagSet): letters, digits, '-', '_' and '.'; the TOML key must not need escapes
FLAG_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
SETTING_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class RunscTomlError(NodefixError):
    """Bad input or a file this module cannot edit; nothing is written."""


def as_string(key, value):
    """The quoted-string form the shim's map[string]string needs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if "\n" in value or "\r" in value or "\0" in value:
            raise RunscTomlError("runsc_config.%s contains a newline or NUL character" % key)
        return value
    if value is None:
        raise RunscTomlError("runsc_config.%s is null; use runsc_config_absent to remove a key" % key)
    raise RunscTomlError("runsc_config.%s must be a string, integer or boolean (runsc takes --%s=<value>), got %s"
                         % (key, key, type(value).__name__))


def plain(value):
    """A tomlkit item as a plain Python value (tomlkit < 0.11 has no unwrap())."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if hasattr(value, "value") and not isinstance(value, dict):
        return value.value
    return value


def _indent_of(table):
    """Indentation of the existing entries of a table (0 when none)."""
    for _key, item in table.value.body:
        trivia = getattr(item, "trivia", None)
        if _key is not None and trivia is not None:
            return len(trivia.indent.replace("\t", "    "))
    return 0


def fmt(value):
    if value is None:
        return "(absent)"
    if isinstance(value, str):
        return '"%s"' % value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_setting(key, value):
    if not isinstance(key, str) or not SETTING_KEY_RE.match(key):
        raise RunscTomlError("settings: %r is not a shim option name (lower-case letters, digits, '_')" % (key,))
    if key == "runsc_config":
        raise RunscTomlError("settings cannot hold runsc_config: use the runsc_config option")
    if key in INT_SETTINGS:
        if isinstance(value, bool):
            raise RunscTomlError("settings.%s must be an integer, got %r" % (key, value))
        try:
            number = int(str(value).strip())
        except ValueError:
            raise RunscTomlError("settings.%s must be an integer, got %r" % (key, value))
        if not 0 <= number <= UINT32_MAX:
            raise RunscTomlError("settings.%s must be between 0 and %d (a uid/gid), got %d" % (key, UINT32_MAX, number))
        return number
    if key in STR_SETTINGS and not isinstance(value, str):
        raise RunscTomlError("settings.%s must be a string, got %r" % (key, value))
    if value is None or isinstance(value, (dict, list, float)):
        raise RunscTomlError("settings.%s must be a string, integer or boolean, got %r" % (key, value))
    if isinstance(value, str) and ("\n" in value or "\0" in value):
        raise RunscTomlError("settings.%s contains a newline or NUL character" % key)
    return value


def check_inputs(params):
    """Validated (wanted runsc_config strings, settings) from the module parameters."""
    wanted = {}
    for key, value in params["runsc_config"].items():
        if not isinstance(key, str) or not FLAG_KEY_RE.match(key):
            raise RunscTomlError("runsc_config key %r is not a runsc flag name (letters, digits, '-', '_', '.'; "
                                 "no spaces, quotes or '=')" % (key,))
        wanted[key] = as_string(key, value)
    for key in params["runsc_config_absent"]:
        if not FLAG_KEY_RE.match(key or ""):
            raise RunscTomlError("runsc_config_absent: %r is not a runsc flag name" % (key,))
    both = set(wanted) & set(params["runsc_config_absent"])
    if both:
        raise RunscTomlError("keys both wanted and absent in runsc_config: %s" % ", ".join(sorted(both)))
    settings = dict((k, _check_setting(k, v)) for k, v in params["settings"].items())
    for key in params["settings_absent"]:
        if not SETTING_KEY_RE.match(key or "") or key == "runsc_config":
            raise RunscTomlError("settings_absent: %r is not a shim option name" % (key,))
    both = set(settings) & set(params["settings_absent"])
    if both:
        raise RunscTomlError("keys both wanted and absent in settings: %s" % ", ".join(sorted(both)))
    return wanted, settings


def _parse(text, path):
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit raises several ParseError subclasses
        raise RunscTomlError("%s is not valid TOML, nothing changed: %s" % (path, exc))


def _plain_doc(doc):
    return dict((k, plain(v)) for k, v in doc.items())


def _check_table(doc, path):
    table = doc.get("runsc_config")
    if table is not None and not isinstance(table, dict):
        raise RunscTomlError("%s: runsc_config is not a table, nothing changed" % path)
    if table is not None:
        unquoted = sorted(k for k, v in table.items() if not isinstance(plain(v), str))
        if unquoted:
            raise RunscTomlError(
                "%s: [runsc_config] holds values that are not quoted strings (%s); containerd-shim-runsc-v1 "
                "decodes this table as map[string]string and fails on them. Quote them (e.g. "
                "systemd-cgroup = \"true\") and run again; nothing changed."
                % (path, ", ".join("%s = %s" % (k, fmt(plain(table[k]))) for k in unquoted)))
    return table


def _expected(before_plain, wanted, absent, settings, settings_absent):
    doc = copy.deepcopy(before_plain)
    for key, value in settings.items():
        doc[key] = value
    for key in settings_absent:
        if key in doc and not isinstance(doc[key], dict):
            del doc[key]
    if wanted or "runsc_config" in doc:
        table = doc.setdefault("runsc_config", {})
        table.update(wanted)
        for key in absent:
            table.pop(key, None)
    return doc


def _apply(doc, path, wanted, absent, settings, settings_absent):
    changes = []
    table = _check_table(doc, path)
    for key, value in sorted(settings.items()):
        current = plain(doc.get(key))
        if isinstance(current, dict):
            raise RunscTomlError("%s: top-level key %s is a table, nothing changed" % (path, key))
        if current != value or type(current) is not type(value):
            changes.append("%s: %s -> %s" % (key, fmt(current), fmt(value)))
            doc[key] = value  # tomlkit places a new top-level key above the first table
    for key in settings_absent:
        if key in doc and not isinstance(plain(doc.get(key)), dict):
            changes.append("%s: %s -> (absent)" % (key, fmt(plain(doc.get(key)))))
            del doc[key]
    for key, value in sorted(wanted.items()):
        current = plain(table.get(key)) if table is not None else None
        if current != value:
            changes.append("runsc_config.%s: %s -> %s" % (key, fmt(current), fmt(value)))
            if table is None:
                doc.add("runsc_config", tomlkit.table())
                table = doc["runsc_config"]
            if key in table:
                table[key] = value
            else:
                table.add(key, value)
                indent = _indent_of(table)
                if indent:
                    table[key].indent(indent)
    for key in absent:
        if table is not None and key in table:
            changes.append("runsc_config.%s: %s -> (absent)" % (key, fmt(plain(table.get(key)))))
            del table[key]
    return changes


def edit(before, path, wanted, absent, settings, settings_absent):
    """(after_text, changes, runsc_config table, settings) or RunscTomlError; writes nothing."""
    doc = _parse(before or "", path)
    _check_table(doc, path)
    expected = _expected(_plain_doc(doc), wanted, absent, settings, settings_absent)
    try:
        changes = _apply(doc, path, wanted, absent, settings, settings_absent)
        after_text = tomlkit.dumps(doc)
    except RunscTomlError:
        raise
    except Exception as exc:  # a layout tomlkit cannot edit (dotted keys, inline tables)
        raise RunscTomlError("%s cannot be edited safely (%s: %s); edit it by hand, nothing changed"
                             % (path, type(exc).__name__, exc))
    if before is None:
        # a new file is always written, even without entries: containerd's ConfigPath must exist
        changes.append("%s: created" % path)
        if not after_text.strip():
            after_text = "# containerd-shim-runsc-v1 configuration (nodefix.k8s.runsc_config)\n"
    if changes and not after_text.endswith("\n"):
        after_text += "\n"
    # re-read what would be written: exactly the wanted change, quoted strings only
    check = _parse(after_text, path)
    got = _plain_doc(check)
    if got != expected:
        raise RunscTomlError("%s uses a layout this module cannot edit safely (dotted keys or an inline "
                             "[runsc_config] table?): the edit would not give the wanted keys only; edit it by "
                             "hand, nothing changed" % path)
    _check_table(check, path)
    final_table = dict(got.get("runsc_config") or {})
    final_settings = dict((k, v) for k, v in got.items() if not isinstance(v, dict))
    return after_text, changes, final_table, final_settings
