# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The playbooks' variables checked before any node: known names, types, choices, ranges.

The spec is ``playbooks/vars/arguments.yml`` (the docsite's Playbooks page is written from the same
file). ``problems(spec, values_by_host, playbook, ignore)`` returns one message per problem, each naming
the variable (and the closest known name for an unknown one) and the hosts it was set for; nothing is
decided from a value that does not pass. Values arrive as Ansible gives them: from ``-e k=v`` every value
is a string, from YAML/JSON inventories a typed value - both are read as Ansible's own argument spec reads
them (``"20"`` is the int 20, ``"yes"`` is true), never more loosely (``"1e3"``, ``"100.5"``, ``"abc"`` are
not whole numbers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import fnmatch
import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

PLAYBOOKS = ("audit", "remediate", "npd", "merge")
TYPES = ("str", "bool", "int", "float", "list", "dict", "path", "serial", "bool_or_auto", "duration")
PREFIX = "nodefix_"
_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")
_INT = re.compile(r"^[+-]?[0-9]+$")
_FLOAT = re.compile(r"^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$")
_PERCENT = re.compile(r"^\s*([0-9]+([.][0-9]+)?)\s*%\s*$")
# seconds, or units as Go and systemd write them (6h, 90m, 1h30m, 1d, 2w)
_DURATION = re.compile(r"^(?:[0-9]+|(?:[0-9]+[smhdw])+)$")


class SpecError(NodefixError, ValueError):
    """The spec file itself is malformed: a bug of the collection, never a user's input."""


def check_spec(spec):
    """The spec's ``arguments`` mapping, checked for shape; raises SpecError naming the bad entry."""
    args = spec.get("arguments") if isinstance(spec, dict) else None
    if not isinstance(args, dict) or not args:
        raise SpecError("the playbook argument spec has no 'arguments' mapping")
    for name, entry in args.items():
        if not str(name).startswith(PREFIX) or not isinstance(entry, dict):
            raise SpecError("spec entry %r: a nodefix_ name with a mapping" % name)
        if entry.get("type") not in TYPES:
            raise SpecError("spec entry %s: type %r is not one of %s" % (name, entry.get("type"), ", ".join(TYPES)))
        if not entry.get("description"):
            raise SpecError("spec entry %s has no description" % name)
        bad = set(entry.get("playbooks") or []) - set(PLAYBOOKS)
        if bad:
            raise SpecError("spec entry %s: unknown playbooks %s" % (name, sorted(bad)))
    return args


def _as_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None  # as Ansible's int type: 100.0 from JSON is not taken as 100
    if isinstance(value, str) and _INT.match(value.strip()):
        return int(value.strip())
    return None


def _as_float(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _FLOAT.match(value.strip()):
        return float(value.strip())
    return None


def _as_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _as_list(value):
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                return None
            return parsed if isinstance(parsed, list) else None
        return [part.strip() for part in text.split(",") if part.strip()] if text else []
    return None


def _as_dict(value):
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _typed(entry, value):
    """(value as the type says, None) or (None, why not)."""
    kind = entry["type"]
    if kind in ("str", "path"):
        if isinstance(value, (dict, list, tuple)) or value is None:
            return None, "must be a string, got %s" % type(value).__name__
        return str(value), None
    if kind == "bool":
        out = _as_bool(value)
        return (out, None) if out is not None else (None, "must be true or false, got %s" % json.dumps(value, default=str))
    if kind == "bool_or_auto":
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto", None
        out = _as_bool(value)
        return (out, None) if out is not None else (None, "must be true, false or auto, got %s" % json.dumps(value, default=str))
    if kind == "int":
        out = _as_int(value)
        return (out, None) if out is not None else (None, "must be a whole number, got %s" % json.dumps(value, default=str))
    if kind == "float":
        out = _as_float(value)
        return (out, None) if out is not None else (None, "must be a number, got %s" % json.dumps(value, default=str))
    if kind == "serial":
        out = _as_int(value)
        if out is not None:
            return (out, None) if out >= 1 else (None, "must be at least 1 node, got %d" % out)
        match = _PERCENT.match(value) if isinstance(value, str) else None
        if match and 0 < float(match.group(1)) <= 100:
            return value.strip(), None
        return None, 'must be a number of nodes (1 or more) or a share such as "20%%", got %s' % json.dumps(value, default=str)
    if kind == "duration":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value, None
        if isinstance(value, str) and _DURATION.match(value.strip().lower()):
            return value.strip().lower(), None
        return None, "must be a duration (whole seconds, or e.g. 6h, 90m, 1h30m, 1d), got %s" % json.dumps(value, default=str)
    if kind == "list":
        out = _as_list(value)
        return (out, None) if out is not None else (None, "must be a list, got %s" % type(value).__name__)
    out = _as_dict(value)
    return (out, None) if out is not None else (None, "must be a mapping, got %s" % type(value).__name__)


def check_value(entry, value):
    """Why ``value`` does not pass ``entry`` (a message without the name), or None."""
    out, why = _typed(entry, value)
    if why:
        return why
    if entry["type"] in ("int", "float"):
        if entry.get("min") is not None and out < entry["min"]:
            return "must be at least %s, got %s" % (entry["min"], out)
        if entry.get("max") is not None and out > entry["max"]:
            return "must be at most %s, got %s" % (entry["max"], out)
    choices = entry.get("choices")
    if entry["type"] == "list":
        elem = entry.get("elements")
        for item in out:
            if elem == "dict" and not isinstance(item, dict):
                return "must be a list of mappings, got an item %s" % json.dumps(item, default=str)
            if elem == "str" and isinstance(item, (dict, list)):
                return "must be a list of strings, got an item %s" % json.dumps(item, default=str)
            if choices and str(item) not in choices:
                close = difflib.get_close_matches(str(item), [str(c) for c in choices], n=1)
                hint = " (did you mean %s?)" % close[0] if close else ""
                return "has %s, not one of %s%s" % (json.dumps(item, default=str), ", ".join(map(str, choices)), hint)
    elif choices and str(out) not in [str(c) for c in choices]:
        close = difflib.get_close_matches(str(out), [str(c) for c in choices], n=1)
        hint = " (did you mean %s?)" % close[0] if close else ""
        return "must be one of %s, got %s%s" % (", ".join(map(str, choices)), json.dumps(value, default=str), hint)
    if entry.get("nonempty") and isinstance(out, str) and not out.strip():
        return "must not be empty (unset it instead)"
    if entry.get("pattern") and isinstance(out, str) and not re.match(entry["pattern"], out):
        return "must be %s, got %s" % (entry.get("pattern_help") or "a match of %s" % entry["pattern"], json.dumps(out))
    return None


def _hosts(names, limit=5):
    names = sorted(names)
    return ", ".join(names[:limit]) + (" and %d more" % (len(names) - limit) if len(names) > limit else "")


def problems(args, values_by_host, playbook, ignore=()):
    """One message per problem of the nodefix_* variables in ``values_by_host`` ({host: {name: value}})."""
    if playbook not in PLAYBOOKS:
        raise SpecError("playbook %r is not one of %s" % (playbook, ", ".join(PLAYBOOKS)))
    ignore = list(ignore or [])
    by_problem = {}
    for host, values in values_by_host.items():
        for name, value in values.items():
            if not name.startswith(PREFIX) or any(fnmatch.fnmatchcase(name, pat) for pat in ignore):
                continue
            entry = args.get(name)
            if entry is None:
                close = difflib.get_close_matches(name, list(args), n=1, cutoff=0.75)
                why = "%s is not a variable of nodefix.k8s's playbooks%s" % (
                    name, " - did you mean %s?" % close[0] if close else
                    " (variables of your own with this prefix: nodefix_preflight_ignore)")
            else:
                why = check_value(entry, value)
                why = "%s %s" % (name, why) if why else None
            if why:
                by_problem.setdefault(why, set()).add(host)
    return ["%s (set for %s)" % (why, _hosts(hosts)) for why, hosts in sorted(by_problem.items())]
