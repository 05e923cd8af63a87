# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""What the redactor (``_core.redact``) keeps under a secret's name by its name AND its value together - never by the
name alone (a name is chosen by whoever writes the file: ``db_password_manager``, ``vault_token_reviewer``,
``public_private_key`` hold what their writer put there):

- ``component_name``: a name whose last word names a component that handles tokens (kube-controller-manager's
  ``token-cleaner``/``tokencleaner``, a ``*controller``, ``*manager``, ``*plugin``...) and holds no other secret word
  (``password``, ``secret``, ``credential``, ``key``...: ``db_password_manager`` is a password's name) - its value is
  shown only when every word of it reads as data, as beside a numbered name (``token-cleaner: starting``;
  ``vault_token_reviewer: X9s...`` hidden; ``_core.secret_shapes.not_a_secret``);
- ``public_value``: under a public key's name (``publicKey``, ``ssh_pub_key``, ``sshKey``; never one with a private or
  secret word: ``public_private_key``, ``SSH_PRIVATE_KEY``) only a well-formed public key - an OpenSSH public key line
  whose base64 blob is the key's own wire format (RFC 4253 6.6: length-prefixed strings covering it exactly, the first
  the key's type) with no comment or one word of ``[\\w.@-]{1,64}`` (``user@host``), the blob alone, a PEM ``PUBLIC
  KEY`` or ``CERTIFICATE`` block; under a hash's or fingerprint's name with a CA's, certificate's, host's or public
  key's word (``--discovery-token-ca-cert-hash``, ``caCertHashes``, ``host_key_fingerprint``) only a hash
  (kubeadm's ``sha256:<64 hex>``, https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-join/; OpenSSH's
  ``SHA256:<43 base64>``; colon-joined hex pairs) - a list of them (``caCertHashes``) only when every item is one;
- ``kept_in_text``: a public key's line read from its type (``sshKey: ssh-rsa AAAA... user@host``), and
  ``named_in_a_log``: kubelet's own forms of a Secret's, ConfigMap's or volume's name in a log line, never a key of
  ``KEY=VALUE``: ``volume "creds" : secret "db-secret" not found`` (a quoted name after ``volume``/``secret``/
  ``configmap``, ``:`` and a word in lower case before another quoted name), ``Couldn't get secret default/db-secret:
  failed to sync`` (a name after ``secret``/``configmap`` and its ``namespace/``, then a sentence in lower case), and
  ``secret: "db-secret" not found`` (a quoted RFC 1123 name under ``secret``/``credential`` before ``not found``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import struct

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import words_of

# a name's last word (or the end of its last word: tokencleaner) that names a component handling tokens
_COMPONENT_LAST = tuple(w + s for w in ("cleaner", "signer", "controller", "manager", "publisher", "watcher",
                                        "reviewer", "rotator", "informer", "syncer", "plugin") for s in ("", "s"))
# the words that make a name a secret's whatever its last word (a password's manager is a password's name)
_NOT_A_COMPONENT = frozenset(("password", "passwd", "passphrase", "pass", "pwd", "pw", "pswd", "secret", "secrets",
                              "credential", "credentials", "cred", "creds", "auth", "key", "apikey", "private",
                              "cookie", "signature"))
_PUBLIC_KEY = frozenset(("pubkey", "public", "pub", "ssh", "authorized"))
_PUBLIC_HASH = frozenset(("ca", "cert", "certificate", "pubkey", "public", "pub", "host"))
_PRIVATE = frozenset(("private", "priv", "secret", "password", "passwd", "passphrase", "pwd", "pw", "pswd", "token",
                      "auth", "cred", "creds", "credential", "credentials", "pass", "signing", "session", "master",
                      "shared", "encryption", "subscription", "api", "apikey", "access"))
_HASH = lazy_compile(r"^(?:sha256:[0-9a-f]{64}|SHA256:[A-Za-z0-9+/]{43}=?|[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){15,63})$")
_SSH_TYPES = (r"(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp(?:256|384|521)"
              r"|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)(?:-cert-v01@openssh\.com)?")
_BLOB = r"AAAA(?:[A-Za-z0-9+/]{4}){1,4096}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
_SSH_LINE = lazy_compile(r"^(?P<type>" + _SSH_TYPES + r")[ \t]+(?P<blob>" + _BLOB + r")(?:[ \t]+[\w.@-]{1,64})?$")
_SSH_BLOB = lazy_compile(r"^(?P<blob>" + _BLOB + r")$")
_SSH_TYPE = lazy_compile(r"^" + _SSH_TYPES + r"$")
_PEM_PUBLIC = lazy_compile(r"^-----BEGIN (?P<kind>PUBLIC KEY|RSA PUBLIC KEY|CERTIFICATE)-----\r?\n"
                           r"(?:[A-Za-z0-9+/=]{1,76}\r?\n){1,256}-----END (?P=kind)-----$")
_FLOW_ITEM = lazy_compile(r"""[ \t]*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s,"'\[\]]+))[ \t]*(?:,|$)""")


def component_name(name):
    """Whether ``name`` names a component that handles tokens (the module's docstring): its value is judged as data."""
    words = words_of(name)
    return bool(words) and words[-1].endswith(_COMPONENT_LAST) and not _NOT_A_COMPONENT.intersection(words)


def hash_name(name):
    """Whether ``name`` names a public key's, a CA's, a certificate's or a host key's hash or fingerprint."""
    words = words_of(name)
    return (bool(words) and words[-1] in ("hash", "hashes", "fingerprint", "fingerprints")
            and bool(_PUBLIC_HASH.intersection(words)))


def _public_key_name(name):
    words = words_of(name)
    return (bool(words) and words[-1] in ("key", "keys") and bool(_PUBLIC_KEY.intersection(words))
            and not _PRIVATE.intersection(words))


def _wire(blob, kind=None):
    """Whether ``blob`` (base64) is an SSH public key's wire format: length-prefixed strings covering it exactly, the
    first a key type (``kind`` when given: a key's line, whose key material follows its type)."""
    try:
        raw = binascii.a2b_base64(blob.encode("ascii"))
    except (binascii.Error, ValueError):
        return False
    fields, pos = [], 0
    while pos < len(raw):
        if pos + 4 > len(raw) or len(fields) >= 32:
            return False
        size = struct.unpack(">I", raw[pos:pos + 4])[0]
        if pos + 4 + size > len(raw):
            return False
        fields.append(raw[pos + 4:pos + 4 + size])
        pos += 4 + size
    try:
        first = fields[0].decode("ascii") if fields else ""
    except UnicodeDecodeError:
        return False
    return _SSH_TYPE.match(first) is not None and (kind is None or (first == kind and len(fields) >= 2))


def _public_item(name, value):
    if hash_name(name):
        return _HASH.match(value) is not None
    line = _SSH_LINE.match(value) or _SSH_BLOB.match(value)
    if line is not None:
        return _wire(line.group("blob"), line.groupdict().get("type"))
    return _PEM_PUBLIC.match(value.strip()) is not None


def public_value(name, value):
    """Whether ``value`` under ``name`` is public by both (the module's docstring): a hash under a hash's name, a
    well-formed public key under a public key's name; a list (or a flow sequence's text) only when every item is."""
    if not (hash_name(name) or _public_key_name(name)):
        return False
    if isinstance(value, (list, tuple)):
        return bool(value) and all(isinstance(v, str) and public_value(name, v) for v in value)
    if not isinstance(value, str):
        return False
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if value.startswith("[") and value.endswith("]"):
        inner, items, pos = value[1:-1], [], 0
        while pos < len(inner):
            item = _FLOW_ITEM.match(inner, pos)
            if item is None or item.end() == pos:
                return False
            items.append([g for g in item.groups() if g is not None][0])
            pos = item.end()
        return bool(items) and all(_public_item(name, i) for i in items)
    return _public_item(name, value)


# kubelet's forms (see the module's docstring)
_KUBELET_NOUN = r"(?<![\w-])(?:volume|secret|configmap)s?[ \t]+"
_BEFORE_QUOTED = lazy_compile(_KUBELET_NOUN + r"\Z")
_BEFORE_NAMESPACED = lazy_compile(_KUBELET_NOUN + r"[a-z0-9][a-z0-9-]{0,62}/\Z")
_QUOTED_NAME_NEXT = lazy_compile(r"""[ \t]+["'][a-z0-9][a-z0-9.-]{0,252}["']""")
_SENTENCE_NEXT = lazy_compile(r"[ \t]+[a-z]")
_LOWER_WORD = lazy_compile(r"^[a-z]{1,32}$")
_OBJECT_NOUN = lazy_compile(r"(?i)^(?:secret|credential)s?$")
_OBJECT = r"""(?P<q>["'])[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?(?:/[a-z0-9][a-z0-9.-]{0,252})?(?P=q)"""
_QUOTED_OBJECT = lazy_compile(r"^" + _OBJECT + r"$")
_MISSING = r"""[ \t]+(?:(?:is|was)[ \t]+)?(?:not[ \t]+found|does[ \t]+not[ \t]+exist)\b"""
_MISSING_AFTER = lazy_compile(r"(?=[ \t][ \t]*[nidw])" + _MISSING)
_MISSING_OBJECT = lazy_compile(r"^" + _OBJECT + _MISSING)


def missing_object(name, value):
    """Whether ``value`` under ``name`` says a Secret was not found (``secret: "db-secret" not found``): a quoted
    RFC 1123 name under ``secret``/``credential`` alone, then ``not found``/``does not exist``."""
    return (isinstance(value, str) and _OBJECT_NOUN.match(str(name)) is not None
            and _MISSING_OBJECT.match(value.strip()) is not None)


def kept_in_text(match):
    """Whether ``match`` (a key = value of _core.redact: its ``key``, ``sep``, ``val``, a ``q`` quote) is kept as it
    is: an object's name in one of kubelet's log lines (``named_in_a_log``), or a public key's type whose line, to its
    end, is a well-formed public key under a public key's name (``sshKey: ssh-rsa AAAA... user@host``: the value read
    as a word is its type alone)."""
    if named_in_a_log(match):
        return True
    if _SSH_TYPE.match(match.group("val")) is None:
        return False
    # its line to its end, read only as far as a key's line can run (a line of many keys is read once, not per key)
    text, start = match.string, match.start("val")
    end = text.find("\n", start, start + 17001)
    if end < 0 and len(text) > start + 17000:
        return False
    return public_value(match.group("key"), text[start:end if end >= 0 else len(text)].rstrip("\r"))


def named_in_a_log(match):
    """Whether ``match`` (as ``kept_in_text``'s) is an object's name in one of kubelet's log lines rather than a
    secret's key and its value (the module's docstring)."""
    text, start, sep = match.string, match.start("key"), match.group("sep")
    if "=" in sep or ":" not in sep:
        return False
    quote = match.group("q") if "q" in match.re.groupindex else ""
    val = match.group("val")
    if (quote in ('"', "'") and _BEFORE_QUOTED.search(text, max(0, start - len(quote) - 64), start - len(quote))
            and _LOWER_WORD.match(val) and _QUOTED_NAME_NEXT.match(text, match.end())):
        return True     # volume "creds" : secret "db-secret" not found
    if (not quote and start and text[start - 1] == "/" and _LOWER_WORD.match(val)
            and _SENTENCE_NEXT.match(text, match.end()) and _BEFORE_NAMESPACED.search(text, max(0, start - 96), start)):
        return True     # Couldn't get secret default/db-secret: failed to sync secret cache
    return (_OBJECT_NOUN.match(match.group("key")) is not None and _QUOTED_OBJECT.match(val) is not None
            and _MISSING_AFTER.match(text, match.end()) is not None)      # secret: "db-secret" not found
