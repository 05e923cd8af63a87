# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""Which names are a secret's: a key, an environment variable, a header or a flag (``secret_name``) - the one rule
the redactor (``_core.redact``), the redirect policy (``_core.redirects``) and the credential values of an option
(``_core.secret_values``) read. The decided cases are in ``_core.redact``'s docstring; two limits of the rule:

- a name shaped as Kubernetes names nodes and pods with a number of its own (``auth-01``, ``token-ring-2``,
  ``secret-db-1``, ``node-pass-1``) is data - the key of a map of nodes, a node named in a message - never a secret's
  name; unless the word right before its number names a secret itself (``db-password-2``, ``api-token-3``,
  ``client-secret-1``: ``password``, ``passwd``, ``passphrase``, ``pwd``, ``token``, ``secret``, ``apikey``,
  ``credential(s)``) - how a config numbers its second password, not how nodes are named (a role, a service, then the
  number: ``auth-01``, ``secret-store-2``). A node or a StatefulSet's pod whose name ends so (``vault-token-0``) keeps
  its name; the value beside such a name (``numbered``) is hidden unless it reads as data (``_core.secret_shapes.
  not_a_secret``: ``vault-token-0: Ready`` shown, ``db-password-2: X9s...`` hidden). A name Kubernetes generates
  (``generateName``: a 5-character suffix with a digit, ``default-token-abc12``) counts as numbered;
- a name whose last word measures or times a secret (``token_ttl``, ``--authentication-token-webhook-cache-ttl``)
  holds no secret, nor one whose last word is ``name`` (``secretName``, ``token_secret_name``: an object's name).
  A name whose last word names a component (``token-cleaner``, ``*controller``, ``*manager``), a public key's name
  (``publicKey``, ``ssh_pub_key``) and a hash's or fingerprint's name with a CA's, certificate's, host's or public
  key's word (``--discovery-token-ca-cert-hash``, ``caCertHashes``) ARE secrets' names: what is kept under them is
  decided by the value too (``_core.secret_kept``), never by the name alone. Abbreviations of a password are
  secret words (``pw``, ``pwd``, ``pswd``: ``DB_PW``); OAuth's ``code_verifier`` (RFC 7636) is a secret whole."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# names that are secrets whole (normalised: lower case, '-' and '.' as '_')
_EXACT = frozenset(("auth", "password", "passwd", "identitytoken", "registrytoken", "token", "client_key_data",
                    "client_certificate_data", "secret", "apikey", "api_key", "creds",
                    "private_token", "authkey", "sig", "code_verifier",
                    # the private keys of Kubernetes' kubernetes.io/tls and kubernetes.io/ssh-auth Secrets
                    "tls_key", "ssh_privatekey"))
# ('secret' only as a word, _WORD_ANY: a node or a list named *secrets* is not one)
_PART = ("token", "password", "passwd", "passphrase", "passcode", "credential", "cookie", "api_key", "apikey",
         "private_key", "privatekey", "access_key")
# whole words of a name (split at '_', '-', '.' and camelCase) that make it a secret anywhere in it, or last
_WORD_ANY = frozenset(("auth", "creds", "cred", "pass", "pwd", "pw", "pswd", "token", "secret"))
_WORD_LAST = frozenset(("api", "signature"))
# the words before a last 'key' that make it a secret key, not a key's path or a map's key (kubeadm's
# --certificate-key, which decrypts the control plane's certificates in the kubeadm-certs Secret; an encryption key;
# Azure's Ocp-Apim-Subscription-Key header); a kubeconfig's client-key is a path and stays one
_KEY_AFTER = frozenset(("certificate", "encryption", "subscription", "signing", "master", "session", "shared"))
# names that say where a secret is (a path), not the secret
_REFERENCE_ENDS = ("file", "files", "path", "dir")
# a name as Kubernetes names nodes and pods (RFC 1123, lower case) with a number of its own after a '-' (auth-01,
# token-ring-2, secret-db-1.example.com): a node's name that a map of nodes is keyed by, never a config key
# or a suffix Kubernetes generates (generateName: 5 characters with a digit, default-token-abc12)
_SUFFIX = r"(?:[0-9]+|(?=[a-z]{0,4}[0-9])[a-z0-9]{5})"
_DATA_NAME = lazy_compile(r"^[a-z0-9][a-z0-9.\-]*-" + _SUFFIX + r"(?:[.\-][a-z0-9.\-]*)?$")
# the words that make a node-shaped name a secret's after all, right before its number (db-password-2)
_NUMBERED = lazy_compile(r"(?:^|[.\-])(?:password|passwd|passphrase|pwd|token|secret|apikey|credentials?)-" + _SUFFIX
                         + r"(?:[.\-]|$)")
# a name's last word that says it measures or times a secret, not the secret (token_ttl, token-cache-ttl: 2m)
_MEASURE_LAST = frozenset(("ttl", "timeout", "interval", "period", "duration", "age", "lifetime", "expiry",
                           "expiration", "count", "size", "length", "limit", "retries", "seconds", "minutes", "hours",
                           "days", "type", "mode", "provider", "audience", "version", "kind", "format", "algorithm",
                           "method", "history"))
# a hash's or fingerprint's name with one of these words: its value is public only when it is a hash (_core.secret_kept)
_PUBLIC_HASH = frozenset(("ca", "cert", "certificate", "pubkey", "public", "pub", "host"))


def _words(name):
    """The words of a name: split at '_', '-', '.', ' ' and lower-to-upper case changes, lower-cased."""
    return [w.lower() for w in re.split(r"[_\-. ]+|(?<=[a-z0-9])(?=[A-Z])", str(name).lstrip("-")) if w]


words_of = _words


def numbered(name):
    """Whether ``name`` is shaped as Kubernetes names nodes, pods and Secrets and a secret word stands right before its
    number or generated suffix (``db-password-2``, ``vault-token-0``, ``default-token-abc12``): a secret's name and a
    node's alike, so the value beside it decides (``_core.secret_shapes.not_a_secret``)."""
    return _DATA_NAME.match(str(name)) is not None and _NUMBERED.search(str(name)) is not None


# every rule below needs one of these in the name (the exact names, the words, the parts, '_key', 'Key', 'pass'): a
# name without any is none of them, read at the cost of one search (a long text's many names: A=B=C=...)
# (their first letters looked at first: several times faster over names that hold none)
_ANY = lazy_compile(r"(?i)(?=[acpstkhf])(?:auth|cred|pass|pw|psw|token|secret|sig|api|cookie|key|certificate|code_verifier"
                    r"|hash|fingerprint)")


def secret_name(name):
    """Whether a key, variable, header or flag named ``name`` holds a secret (see the module's docstring)."""
    if _ANY.search(str(name)) is None:
        return False
    norm = re.sub(r"[-.]", "_", str(name).lstrip("-")).lower()
    if _DATA_NAME.match(str(name)) and not _NUMBERED.search(str(name)):
        return False    # a node's (a pod's, a host's) name: auth-01, token-ring-2, secret-db-1 - data, not a key
    if norm in _EXACT:
        return True
    if norm.endswith(_REFERENCE_ENDS):
        return False
    words = _words(name)
    if words and words[-1] in ("name", "names") and len(words) > 1:
        return False    # which Secret, by its object name (secretName: default-token-abc12), not the secret
    if words and words[-1] in _MEASURE_LAST:
        return False    # what measures a secret, not the secret: --authentication-token-webhook-cache-ttl=2m
    if words and words[-1] in ("hash", "hashes", "fingerprint", "fingerprints") and _PUBLIC_HASH.intersection(words):
        return True     # caCertHashes, --discovery-token-ca-cert-hash: a hash is kept by its value (_core.secret_kept)
    if len(words) > 1 and words[-1] == "key" and words[-2] in _KEY_AFTER:
        return True
    if words and (words[-1] in _WORD_LAST or any(w in _WORD_ANY for w in words)):
        return True
    # *_KEY as environment variables are named, *Key in camelCase (privateKey, accessKey); a kubeconfig's
    # client-key is a path. *_PASS as environment variables are named (DB_PASS)
    return (any(part in norm for part in _PART) or str(name).lower().endswith("_key") or norm.endswith("_pass")
            or norm == "pass" or re.search(r"[a-z]Key$", str(name)) is not None)
