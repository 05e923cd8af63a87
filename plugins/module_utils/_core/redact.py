# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""The one redaction layer: no secret read on a node leaves it in a module's result.

Applied where node text is read for output (the evidence bundle, node_audit's and the info modules'
results, every config diff). What is replaced, the key (or the user, the token's id) kept and the
value written as ``<redacted by nodefix.k8s>``:

- a key whose name is a secret, in TOML, INI, YAML, JSON, env files, systemd ``Environment=`` lines
  and command-line flags (``key = "v"``, ``key: v``, ``"key": "v"``, ``KEY=v``, ``--key=v``,
  ``--key v``): containerd's registry ``auth``, ``password``, ``identitytoken``, ``registrytoken``
  (containerd docs/cri/registry.md: ``[plugins."io.containerd.grpc.v1.cri".registry.configs."host".auth]``),
  a kubeconfig's ``token``, ``client-key-data``, ``client-certificate-data``, and any name holding
  ``TOKEN``, ``PASSWORD``/``PASSWD`` or ``SECRET`` or ending in ``_KEY`` (case-insensitive);
- the password of a URL's user information (``scheme://user:password@host``, RFC 3986 3.2.1);
- ``Bearer``/``Basic`` credentials (``Authorization: Bearer ...``, RFC 6750 2.1);
- the secret half of a bootstrap token (``[a-z0-9]{6}.[a-z0-9]{16}``, kubernetes
  docs/reference/access-authn-authz/bootstrap-tokens: the id is public, the secret is not);
- the body of a PEM private key.

Decided false positives (kept as they are): a key naming where a secret is rather than the secret
(its name ends in ``file``, ``path`` or ``dir``: ``password_file = "/etc/pw"``, ``tokenFile``,
``--tls-private-key-file``) - a path is what an operator needs to read; ``auth`` only as a whole
key (``authentication``/``authorization`` are kubelet settings, not secrets); an empty value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

MARK = "<redacted by nodefix.k8s>"

# names that are secrets whole (normalised: lower case, '-' and '.' as '_')
_EXACT = frozenset(("auth", "password", "passwd", "identitytoken", "registrytoken", "token", "client_key_data",
                    "client_certificate_data", "secret", "apikey", "api_key"))
_PART = ("token", "password", "passwd", "secret", "credential", "cookie", "api_key", "apikey", "private_key",
         "access_key")
# names that say where a secret is (a path), not the secret
_REFERENCE_ENDS = ("file", "files", "path", "dir")

# key [sep] value: the key optionally quoted, '=' or ':' on one line, the value quoted or bare
_KEY_VALUE = re.compile(
    r"""(?P<q>["']?)(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q)(?P<sep>[ \t]*[:=][ \t]*)"""
    r"""(?P<val><redacted by nodefix\.k8s>|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"',;}\]]+)""")
# --flag value (the '=' form is a key = value above)
_FLAG_SPACE = re.compile(r"""(?P<key>--[A-Za-z0-9][A-Za-z0-9_\-]*)(?P<sep>[ \t]+)"""
                         r"""(?P<val><redacted by nodefix\.k8s>|"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*)""")
_URL_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@'\"]+):(?P<val>[^\s@/'\"]+)@")
# a token as a URL's user name (https://ghp_...@github.com): a long opaque user name, never a login
_URL_TOKEN_USER = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<val>[A-Za-z0-9_\-]{20,})@")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic)[ \t]+)(?P<val>[A-Za-z0-9._~+/=\-]{4,})", re.IGNORECASE)
_BOOTSTRAP = re.compile(r"\b(?P<head>[a-z0-9]{6}\.)(?P<val>[a-z0-9]{16})\b")
_PEM_KEY = re.compile(r"(?P<head>-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----)(?P<val>.*?)(?P<tail>-----END (?:[A-Z0-9]+ )?"
                      r"PRIVATE KEY-----)", re.DOTALL)


def secret_name(name):
    """Whether a key, variable or flag named ``name`` holds a secret (see the module's docstring)."""
    norm = re.sub(r"[-.]", "_", str(name).lstrip("-")).lower()
    if norm in _EXACT:
        return True
    if norm.endswith(_REFERENCE_ENDS):
        return False
    # *_KEY as environment variables are named, *Key in camelCase (privateKey, accessKey); a kubeconfig's
    # client-key is a path. *_PASS as environment variables are named (DB_PASS)
    return (any(part in norm for part in _PART) or str(name).lower().endswith("_key") or norm.endswith("_pass")
            or norm == "pass" or re.search(r"[a-z]Key$", str(name)) is not None)


def _quoted(value):
    """The mark in the value's own quotes (a TOML/JSON/YAML file stays well-formed)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MARK + value[0]
    return MARK


def _key_value(match):
    val = match.group("val")
    head = match.group(0)[:match.start("val") - match.start(0)]
    if not secret_name(match.group("key")):
        # the value may hold secrets of its own: Environment="API_TOKEN=x", EXTRA_ARGS=--token=x
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'":
            return head + val[0] + redact_text(val[1:-1]) + val[-1]
        return head + redact_text(val)
    if val in ('""', "''") or MARK in val:
        return match.group(0)
    return head + _quoted(val)


def redact_text(text):
    """``text`` with every secret the module docstring names replaced by MARK (None stays None)."""
    if not isinstance(text, str) or not text:
        return text
    text = _PEM_KEY.sub(lambda m: m.group("head") + "\n" + MARK + "\n" + m.group("tail"), text)
    text = _URL_USERINFO.sub(lambda m: m.group("head") + ":" + MARK + "@", text)
    text = _URL_TOKEN_USER.sub(lambda m: m.group("head") + MARK + "@", text)
    text = _BEARER.sub(lambda m: m.group(0) if m.group("val").startswith("<") else m.group("head") + MARK, text)
    text = _KEY_VALUE.sub(_key_value, text)
    text = _FLAG_SPACE.sub(_key_value, text)
    return _BOOTSTRAP.sub(lambda m: m.group("head") + MARK, text)


def _secret_value(value):
    """A value under a secret's name replaced whole: a non-empty string, a number, a list of them (a mapping
    is walked: its own keys say what in it is secret)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (str, int, float)):
        return value != ""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, (str, int, float)) for v in value)


def redact(value, depth=0):
    """``value`` (a module result: dicts, lists, strings) with every string redacted, and the value of
    every dict key that names a secret (``{"password": "x"}``) replaced whole."""
    if isinstance(value, str):
        return redact_text(value)
    if depth > 64:
        return value
    if isinstance(value, dict):
        return dict((k, MARK if isinstance(k, str) and secret_name(k) and _secret_value(v)
                     else redact(v, depth + 1)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [redact(v, depth + 1) for v in value]
    return value


def protect(module):
    """Make ``module``'s exit_json and fail_json redact their result (``redact``) before it leaves the
    node: the one place a module's output passes, whatever path returned it (a failure's stdout of
    ``containerd config dump`` included). Returns the module."""
    exit_json, fail_json = module.exit_json, module.fail_json

    def _exit(**result):
        exit_json(**redact(result))

    def _fail(msg=None, **result):
        fail_json(msg=redact_text(msg), **redact(result))

    module.exit_json, module.fail_json = _exit, _fail
    return module
