# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""containerd's config.toml, read only: schemas, the CRI plugin's runtimes, runc's ``SystemdCgroup``.

config.toml schema: ``version`` absent (1), 2, 3 (containerd 2.0 - 2.2), 4 (2.3+).
The config is read with Python's tomllib (3.11+), else tomlkit (a
style-preserving TOML library, the editor's): containerd 2.x writes literal
(single-quoted) strings and nested, indented tables that a hand-rolled reader
would break. A node with neither cannot be read: ``NoTomlParser``, which the
detectors report as a check that could not run, never as an invalid config.
``read_runtimes`` is the one reader of a node's config (the containerd and gvisor
detectors). Editing it is ``_containerd.edit``'s job (tomlkit only).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import re
import sys

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd.version import parse_semver

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


class ContainerdConfigError(NodefixError):
    """A config.toml that cannot be read, parsed or understood."""


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


def grpc_address(doc):
    value = _get(doc, ("grpc", "address")) if doc is not None else None
    value = _plain(value) if value is not None else None
    return value or DEFAULT_ADDRESS
