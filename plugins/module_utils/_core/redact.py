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
                    "client_certificate_data", "secret", "apikey", "api_key", "creds",
                    "private_token"))
# ('secret' only as a word, _WORD_ANY: a node or a list named *secrets* is not one)
_PART = ("token", "password", "passwd", "credential", "cookie", "api_key", "apikey", "private_key", "access_key")
# whole words of a name (split at '_', '-', '.' and camelCase) that make it a secret anywhere in it, or last
_WORD_ANY = frozenset(("auth", "creds", "cred", "pass", "pwd", "token", "secret"))
_WORD_LAST = frozenset(("api",))
# names that say where a secret is (a path), not the secret
_REFERENCE_ENDS = ("file", "files", "path", "dir")
# flags whose value is ``name:password`` (etcdctl --user, curl -u/--user, skopeo --creds): the name is kept
_USER_FLAGS = frozenset(("user", "u", "proxy_user"))

_VALUE = (r"""(?P<val><redacted by nodefix\.k8s>|\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'"""
          r"""|\[[^\[\]]*\]|[^\s"',;}\]]+)""")
# key [sep] value: the key optionally quoted, '=' or ':' on one line, the value quoted (TOML's multi-line strings
# too), an array or bare
_KEY_VALUE = re.compile(
    r"""(?P<q>["']?)(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q)(?P<sep>[ \t]*[:=][ \t]*)""" + _VALUE)
# --flag value, -u value (the '=' form is a key = value above)
_FLAG_SPACE = re.compile(r"""(?<![\w-])(?P<key>--[A-Za-z0-9][A-Za-z0-9_\-]*|-u)(?P<sep>[ \t]+)"""
                         r"""(?P<val><redacted by nodefix\.k8s>|"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*)""")
# scheme://[user][:password]@host - the user information ends at the LAST '@' before the path (as Go's net/url and
# Python's urllib split it, RFC 3986 3.2.1): 'http://u:Pr0xy@Tail@proxy' has the password 'Pr0xy@Tail'
_URL_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#:@'\"<>]*):(?P<val>[^\s/?#'\"<>]+)@")
# user information without a password (https://ghp_...@github.com, https://token@mirror): a token as the user name
# is the usual way to put one in a URL, so the whole user information goes
_URL_TOKEN_USER = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<val>[^\s/?#:'\"<>]+)@")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic)[ \t]+)(?P<val>[A-Za-z0-9._~+/=\-]{4,})", re.IGNORECASE)
# the credential of any scheme in an Authorization header (Token, Digest, Negotiate, a bare key)
_AUTH_HEADER = re.compile(r"""(?P<head>\b(?:Proxy-)?Authorization["']?[ \t]*[:=][ \t]*\[?[ \t]*["']?"""
                          r"""(?:[A-Za-z][A-Za-z0-9-]*[ \t]+)?)(?P<val>[^\s"',\]]{4,})""", re.IGNORECASE)
_BOOTSTRAP = re.compile(r"\b(?P<head>[a-z0-9]{6}\.)(?P<val>[a-z0-9]{16})\b")
# a PEM private key of any kind (RSA, EC, ENCRYPTED, OPENSSH, PGP ... BLOCK); one cut short (a clipped journal or
# file) loses everything after its BEGIN line
_PEM_KEY = re.compile(r"(?P<head>-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*)-----)(?P<val>.*?)"
                      r"(?P<tail>-----END (?P=kind)-----|\Z)", re.DOTALL)


# a value under a secret's name that only switches something on or off (kubelet's
# --authentication-token-webhook=true): shown, so that a flag's diff stays readable
_SWITCH_WORDS = frozenset(("true", "false", "yes", "no", "on", "off"))


def _words(name):
    """The words of a name: split at '_', '-', '.', ' ' and lower-to-upper case changes, lower-cased."""
    return [w.lower() for w in re.split(r"[_\-. ]+|(?<=[a-z0-9])(?=[A-Z])", str(name).lstrip("-")) if w]


def secret_name(name):
    """Whether a key, variable, header or flag named ``name`` holds a secret (see the module's docstring)."""
    norm = re.sub(r"[-.]", "_", str(name).lstrip("-")).lower()
    if norm in _EXACT:
        return True
    if norm.endswith(_REFERENCE_ENDS):
        return False
    words = _words(name)
    if words and (words[-1] in _WORD_LAST or any(w in _WORD_ANY for w in words)):
        return True
    # *_KEY as environment variables are named, *Key in camelCase (privateKey, accessKey); a kubeconfig's
    # client-key is a path. *_PASS as environment variables are named (DB_PASS)
    return (any(part in norm for part in _PART) or str(name).lower().endswith("_key") or norm.endswith("_pass")
            or norm == "pass" or re.search(r"[a-z]Key$", str(name)) is not None)


def _user_flag(name):
    return re.sub(r"[-.]", "_", str(name).lstrip("-")).lower() in _USER_FLAGS


def _quoted(value):
    """The mark in the value's own quotes (a TOML/JSON/YAML file stays well-formed): an array's strings each."""
    for quote in ('"""', "'''"):
        if len(value) >= 6 and value.startswith(quote) and value.endswith(quote):
            return quote + MARK + quote
    if value.startswith("[") and value.endswith("]"):
        inner = re.sub(r""""(?:[^"\\]|\\.)*"|'[^']*'""", lambda m: m.group(0)[0] + MARK + m.group(0)[0], value[1:-1])
        return "[" + (inner if MARK in inner else re.sub(r"[^\s,]+", MARK, inner)) + "]"
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MARK + value[0]
    return MARK


def _unquoted(val):
    """(opening, inside, closing) of a quoted value, ('', val, '') of a bare one."""
    for quote in ('"""', "'''", '"', "'"):
        if len(val) >= 2 * len(quote) and val.startswith(quote) and val.endswith(quote):
            return quote, val[len(quote):-len(quote)], quote
    return "", val, ""


def _key_value(match):
    val = match.group("val")
    head = match.group(0)[:match.start("val") - match.start(0)]
    key = match.group("key")
    if _user_flag(key) and (key.startswith("-") or match.string[:match.start()].endswith("-")):
        opening, inside, closing = _unquoted(val)
        name, colon, password = inside.partition(":")
        if colon and password and not password.startswith(MARK[:9]):
            return head + opening + name + ":" + MARK + closing
        return match.group(0)
    if not secret_name(key):
        # the value may hold secrets of its own: Environment="API_TOKEN=x", EXTRA_ARGS=--token=x
        opening, inside, closing = _unquoted(val)
        return head + opening + redact_text(inside) + closing
    if val in ('""', "''", "[]") or val == MARK or (MARK in val and not val.startswith("[")):
        return match.group(0)
    if _unquoted(val)[1].lower() in _SWITCH_WORDS:
        return match.group(0)  # a switch, never a secret: --authentication-token-webhook=true, use_token: false
    return head + _quoted(val)


def redact_text(text):
    """``text`` with every secret the module docstring names replaced by MARK (None stays None)."""
    if not isinstance(text, str) or not text:
        return text
    text = _PEM_KEY.sub(lambda m: m.group("head") + "\n" + MARK + ("\n" + m.group("tail") if m.group("tail") else ""),
                        text)
    text = _URL_USERINFO.sub(lambda m: m.group("head") + ":" + MARK + "@", text)
    text = _URL_TOKEN_USER.sub(lambda m: m.group("head") + MARK + "@", text)
    text = _BEARER.sub(lambda m: m.group(0) if m.group("val").startswith("<") else m.group("head") + MARK, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(0) if m.group("val").startswith("<") else m.group("head") + MARK, text)
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


def _hidden_after(flag):
    """How the argv item after ``flag`` is shown: None when it is not a secret's flag."""
    if not isinstance(flag, str) or not re.match(r"^--?[A-Za-z][A-Za-z0-9_\-]*$", flag):
        return None
    if _user_flag(flag):
        return lambda v: v.split(":", 1)[0] + ":" + MARK if ":" in v and MARK not in v else v
    if flag.startswith("--") and secret_name(flag):
        return lambda v: MARK if v and MARK not in v and v.lower() not in _SWITCH_WORDS else v
    return None


def _items(items, depth):
    """A list's items redacted one by one, and an argv's secret after its flag (``["--password", "x"]``,
    ``["--user", "root:x"]``): the flag and the user name kept."""
    out, hide = [], None
    for item in items:
        if hide is not None and isinstance(item, str) and not item.startswith("-"):
            out.append(hide(item))
            hide = None
            continue
        hide = _hidden_after(item)
        out.append(redact(item, depth + 1))
    return out


def redact(value, depth=0):
    """``value`` (a module result: dicts, lists, strings) with every string (and every key) redacted, the value
    of every dict key that names a secret (``{"password": "x"}``) replaced whole, and an argv's secret after
    its flag. Deeper than 64 levels everything is MARK (fails closed)."""
    if isinstance(value, str):
        return redact_text(value)
    if depth > 64:
        return MARK if value is not None and not isinstance(value, (bool, int, float)) else value
    if isinstance(value, dict):
        return dict((redact_text(k) if isinstance(k, str) else k,
                     MARK if isinstance(k, str) and secret_name(k) and _secret_value(v) else redact(v, depth + 1))
                    for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return _items(value, depth)
    return value
