# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
r"""Secrets known by their shape rather than by a key's name - the part of ``_core.redact`` that reads free text
(its docstring has the whole list and the decided cases):

- ``PREFIXED``: a catalogue of credentials whose vendor documents a fixed prefix (or a fixed structure), each row
  citing the vendor's own description of the format; such a word is a secret wherever it is;
- ``prose``: a secret word in a sentence followed by its value - ``<secret word> <':', '=', 'is' or 'was'>
  <value>`` (``Password is X``, ``the API key: X``, ``secret access key = X``), and ``<secret word> <value>`` /
  ``login <value>`` (``token X``, ``apikey X``, ``vault login X``) where the value looks like a credential; its blanks
  may be a form's (``+``, ``%20``: ``q=password+is+X``, the value ending at the next ``+`` or ``&name=``);
- the connector phrase of ``prose``: whom the secret is for (``for``/``of`` and one to eight words) and what was done
  to it (``reset to``, ``set to:``, ``has been changed to``, ``is now``) between the word and a strong separator:
  ``Generated password for user admin: X``, ``password reset to X`` (a weak value never follows one);
- ``percent_encoded``: a query string percent-encoded inside another URL or a log (``password%3DX``,
  ``%26token%3DX``, encoded twice: ``token%253DX``; a header's ``%3A`` too: ``X-Auth-Token%3A%20X``), each parameter
  judged by its decoded name; a URL percent-encoded inside another value (``_PCT_USERINFO``: its user information
  hidden from its first colon, raw or encoded; to the last encoded ``@`` past an encoded ``/`` or ``?``), OAuth's
  ``code`` after an encoded ``?``/``&``, an ``Authorization`` header percent-encoded (``_PCT_AUTH``: the scheme kept);
- ``env_values``: an env file's unquoted value of several words under a secret's name, to the end of its line
  (``_ENV_KEY``) but a command line's (``_COMMAND_RUN``), Dockerfile's ``ENV k v``; ``auth_params``: an Authorization
  scheme's auth-params (kubelet's log forms of a Secret's or volume's name: ``_core.secret_kept.named_in_a_log``);
- ``counted``: a plural secret word over a number (``tokens: 5``, ``passwords: 3 rotated``) is a count, not a secret;
  ``not_a_secret``: that, or data (a state, a number, a version, a name) beside a name that is a node's and a secret's
  alike (``vault-token-0: Ready``) or a component's (``token-cleaner: starting``), a hash or a public key under its
  own name (``_core.secret_kept``);
- ``benign``: the fast path - a text no rule of ``_core.redact`` can match, returned unread.

What a value must look like to be hidden after a secret word without a separator (``token X``): 8 characters or
more of a token's alphabet (base64, base64url, hex: letters, digits, ``_-+/=.~``) mixing two of lower case, upper
case and digits, and not a word (``token bucket``), a number (``tokens 5``), a path, an address,
a host name in lower case (``login registry.example.com``) or a name shaped as Kubernetes names objects (``token
kube-system``, ``login auth-01``). After ``is``/``was``/``:``/``=`` every value is hidden except an ordinary word
(``Password is incorrect``, ``token was revoked``), a switch, a number of at most 3 digits (``password is 8
characters``), a version (``token is v1.28.3``), a name Kubernetes generates (``default-token-abc12``) and, after
``secret``/``credential``, a Kubernetes object's name (``secret is kube-system/regcred``).
A secret of letters only in prose (``password is hunter``) is shown: it reads as a word.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:
    from urllib.parse import unquote
except ImportError:  # pragma: no cover - Python 2 of old targets
    from urllib import unquote  # pylint: disable=no-name-in-module

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_kept import component_name, missing_object, public_value
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import numbered, secret_name

# The catalogue: (the format as its vendor documents it, where). A word of one of these shapes is replaced whole.
PREFIXED = (
    # JSON Web Token, JWS and JWE compact serialisations: base64url parts joined by '.', the first a JSON object
    # ('eyJ' is '{"'): three parts (JWS, RFC 7515 section 7.1; an unsecured JWT's third is empty, RFC 7519 section 6.1)
    # or five (JWE, RFC 7516 section 7.1). A Kubernetes service account token is one.
    (r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*)?",
     "https://www.rfc-editor.org/rfc/rfc7519#section-3"),
    # a registry credentials file (.dockerconfigjson) in base64: '{"auths":' and Docker's own tab-indented
    # config.json ('{\n\t"auths":'), https://kubernetes.io/docs/concepts/configuration/secret/#docker-config-secrets
    (r"(?:eyJhdXRocyI6|ewoJImF1dGhzIjo|ewogICJhdXRocyI6)[A-Za-z0-9+/=]*",
     "https://kubernetes.io/docs/concepts/configuration/secret/#docker-config-secrets"),
    # HashiCorp Vault: service (hvs.), batch (hvb.) and recovery (hvr.) tokens
    (r"hv[sbr]\.[A-Za-z0-9_-]{20,}", "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes"),
    # Stripe: secret (sk_) and restricted (rk_) keys, live and test (pk_ keys are publishable: kept); webhook
    # signing secrets (whsec_)
    (r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}", "https://docs.stripe.com/keys"),
    (r"whsec_[A-Za-z0-9+/=]{20,}", "https://docs.stripe.com/webhooks#verify-events"),
    # GitHub: personal (ghp_), OAuth (gho_), user-to-server (ghu_), server-to-server (ghs_), refresh (ghr_)
    # tokens, fine-grained personal access tokens (github_pat_)
    (r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",
     "https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/"
     "about-authentication-to-github#githubs-token-formats"),
    # GitLab: personal/project/group access (glpat-), OAuth application secret (gloas-), deploy (gldt-), runner
    # authentication (glrt-, glrtr-), CI/CD job (glcbt-), trigger (glptt-), feed (glft-), incoming mail (glimt-),
    # agent for Kubernetes (glagent-), SCIM (glsoat-), feature flags client (glffct-) tokens; the legacy runner
    # registration token (GR1348941)
    (r"gl(?:pat|oas|dt|rtr|rt|cbt|ptt|ft|imt|agent|soat|ffct)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,}",
     "https://docs.gitlab.com/ee/security/tokens/#token-prefixes"),
    # Slack: bot (xoxb-), user (xoxp-), workspace/legacy (xoxa-, xoxo-, xoxs-, xoxr-), refresh (xoxe-, xoxe.xoxp-)
    # and app-level (xapp-) tokens
    (r"(?:xoxe\.)?xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}",
     "https://api.slack.com/authentication/token-types"),
    # Google API keys
    (r"AIza[0-9A-Za-z_-]{35}", "https://cloud.google.com/docs/authentication/api-keys"),
    # npm access tokens
    (r"npm_[A-Za-z0-9]{36}", "https://docs.npmjs.com/about-access-tokens"),
    # PyPI API tokens (a macaroon after 'pypi-')
    (r"pypi-[A-Za-z0-9_-]{50,}", "https://pypi.org/help/#apitoken"),
    # Docker Hub personal access tokens
    (r"dckr_pat_[A-Za-z0-9_-]{20,}", "https://docs.docker.com/security/for-developers/access-tokens/"),
    # a password hash in crypt(3)'s format (/etc/shadow, htpasswd, a user's hashed_password): MD5 ($1$), bcrypt
    # ($2a$, $2b$, $2x$, $2y$), SHA-256/512 ($5$, $6$, rounds= too), scrypt ($7$), yescrypt ($y$, $gy$) - salt and hash
    (r"\$1\$[./A-Za-z0-9]{0,8}\$[./A-Za-z0-9]{22}|\$2[abxy]\$[0-9]{2}\$[./A-Za-z0-9]{53}"
     r"|\$[56]\$(?:rounds=[0-9]{1,9}\$)?[./A-Za-z0-9]{0,16}\$[./A-Za-z0-9]{43,86}|\$7\$[./A-Za-z0-9]{11,64}\$[./A-Za-z0-9]{43}"
     r"|\$g?y\$[./A-Za-z0-9]{1,32}\$[./A-Za-z0-9]{1,86}\$[./A-Za-z0-9]{20,86}",
     "https://github.com/besser82/libxcrypt/blob/develop/doc/crypt.5"),
)
# never inside a longer word of the token's alphabet ('my_sk_live_x' hides 'sk_live_x' all the same); the first
# letters of every prefix looked at first (a character set the regexp engine skips over quickly: 1 MiB of a journal
# is read several times faster than with the look-behind first)
_PREFIXED_SOURCE = r"(?=[eghrswxAGnpd$])(?<![A-Za-z0-9])(?:%s)" % "|".join(shape for shape, _doc in PREFIXED)
_PREFIXED = lazy_compile(_PREFIXED_SOURCE)


def _prose_source(blank, form):
    """The prose pattern with ``blank`` as its blank (``form``: form-encoded prose's ``+`` and ``%20`` too)."""
    inner = "[-_ +]" if form else "[-_ ]"
    name = (r"(?:(?<=%20)|(?<![\w.\-/@%]))" if form else r"(?<![\w.\-/@%])") + (
        r"(?P<name>(?:api{0}?key|access{0}key|(?:secret|private)(?:{0}access)?{0}key|pass(?:word|wd|phrase)|pwd|pw|pswd"
        r"|token|secret|credential)(?P<plural>s)?)(?![\w\-])").format(inner)
    word = r"(?:[^\s:=+%]|%(?!20)|:(?=[^\s:=+]))" if form else r"(?:[^\s:=]|:(?=[^\s:=]))"
    for_ = r"(?P<for>" + blank + r"+(?:for|of)(?:" + blank + r"+" + word + r"{1,128}){1,8}?)?"
    done = (r"(?:" + blank + r"+(?:(?:has|have|had)" + blank + r"+been" + blank + r"+|(?:is|was|were|got)" + blank
            + r"+(?:now" + blank + r"+)?)?(?:re)?(?:set|changed|updated|rotated|generated|created)(?:" + blank
            + r"+(?:to|as)(?:[ \t]*:)?" + blank + r"+|[ \t]*[:=][ \t]*))")
    return (r"(?=[aptscl])(?:" + name + r"|(?<![\w\-])(?P<login>login))(?:" + for_ + r"(?P<sep>" + done
            + r"|[ \t]*[:=][ \t]*|" + blank + r"+(?:is|was)(?:" + blank + r"+now)?(?:[ \t]*:)?" + blank + r"+)|"
            + blank + r"+)" + _VAL)


# the secret words of free text, as whole words, in the singular or the plural: 'API key' in any spelling (apikey,
# api-key, api_key, 'API key'), 'access key', '(secret|private) [access] key', password, passwd, passphrase, pwd, pw,
# pswd, token, secret, credential.
# A value: quoted, or a word (its trailing sentence punctuation is kept apart by _split; '&' ends it before 'name=')
_VAL = r"""(?P<val>"[^"\n]*"|'[^'\n]*'|(?:[^\s"'<&]|&(?![A-Za-z_][\w.\-]*=))[^\s"'<&]*(?:&(?![A-Za-z_][\w.\-]*=)[^\s"'<&]*)*)"""
# '<secret word> : = is was <value>' (strong: every value but a word); '<secret word> <value>' and 'login <value>'
# (weak: only a value that looks like a credential). One pass, its first letters looked at first (as _PREFIXED)
# A connector phrase may stand between the word and a strong separator: whom it is for (1 to 8 words after 'for' or
# 'of', a URL too: 'password for user admin: X', 'token of node-a is X', 'token for https://reg.example.com: X') and
# what was done to it ('password reset to X', 'has been changed to X', 'is now X', 'generated: X'); a weak value (no
# separator) never follows one. _PROSE_FORM reads a text with a '+' or '%20': its blanks may be a form's
# (application/x-www-form-urlencoded: q=password+is+X)
_PROSE = lazy_compile(_prose_source(r"[ \t]", False), re.IGNORECASE)
_PROSE_FORM = lazy_compile(_prose_source(r"(?:[ \t+]|%20)", True), re.IGNORECASE)
_FORM_BLANK = lazy_compile(r"\+|%20")
# an ordinary word (letters, lower case after an optional capital: 'incorrect', 'Expired') or one in capitals
_ORDINARY = lazy_compile(r"^(?:[A-Za-z][a-z]*|[A-Z]+)$")
_SWITCH_WORDS = ("true", "false", "yes", "no", "on", "off", "none", "null")
# a name as Kubernetes (RFC 1123) names objects and nodes: lower-case words joined by '-', '.', '_' or '/', a
# number of its own last (kube-system, auth-01, default/regcred)
_OBJECT_NAME = lazy_compile(r"^[a-z]+(?:[-._/][a-z]+)*(?:[-.][0-9]{1,5})?(?:[./][a-z][a-z0-9-]*)*$")
# a host name in lower case (with a port), an address
_HOST = lazy_compile(r"^(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+|\[?[0-9a-f]*:[0-9a-f:.]+\]?)(?::\d+)?$")
_TOKEN_ALPHABET = lazy_compile(r"^[A-Za-z0-9_\-+/=.~]{8,}$")
# a name Kubernetes generates: words, then one or two generated parts of at most 10, the last with a digit (a
# ReplicaSet's pod-template-hash, generateName's 5 characters, an ordinal: default-token-abc12, web-7d9f8b6c5-x2x9z,
# vault-token-0; never words alone: kubeconfig-token-value)
_GENERATED_NAME = lazy_compile(r"^(?:[a-z]{2,}-)+(?:[a-z0-9]{1,10}-)?(?=[a-z]{0,9}[0-9])[a-z0-9]{1,10}$")
# a version (v1.28.3, 1.28.3-rc.1, 2.42.0+ds): two parts at least
_VERSION = lazy_compile(r"^v?[0-9]{1,9}(?:\.[0-9]{1,9}){1,3}(?:[-+~][0-9A-Za-z.\-+~]{1,64})?$")
# a whole number, then words ('3 rotated', '12 mounted in 3 pods')
_COUNT = lazy_compile(r"^[0-9]{1,12}(?:[ \t]+[A-Za-z][A-Za-z0-9 \t,.()/-]{0,200})?$")
# the names that name a Kubernetes object holding a secret (a Secret), alone (client_secret is the secret itself; a
# token's key or flag holds the token: --token=leaked-token-1 stays hidden): under them a name Kubernetes generates or
# a namespace/name is the object's name (secret: default-token-abc12), never the secret
_OBJECT_NOUN = lazy_compile(r"(?i)^(?:secret|credential)s?$")
_NAMESPACED = lazy_compile(r"^[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9.-]{0,252}$")
# a word that reads as data under a name that is a node's and a secret's alike (vault-token-0: Ready): letters (a
# state: NotReady, cordoned), a number with a unit (5m, 10%, 3.5), a version, or a name as Kubernetes names things
_DATA_WORD = lazy_compile(r"^(?:[A-Za-z]{1,32}|[0-9]{1,12}(?:\.[0-9]{1,6})?(?:[a-z]{1,3}|%)?|\(?[0-9]{1,3}/[0-9]{1,3}\)?)$")
# a percent-encoded 'name=value' (never a URL's scheme: https%3A%2F%2F, whose query is read on its own; '%3D', '%253D'
# encoded twice; the name and the value each in encoded quotes or not:
# a JSON text in a query, data=%7B%22password%22%3A%22x%22%7D): the name a word or what follows an encoded
# character ('%3Ftoken', '%26token'); the value to the next encoded '&', '#', blank, quote or ';'. The name's
# parts are bounded (64 characters, 8 encoded '_'): an attempt may start after every encoded character, so an
# unbounded name made a long run of them quadratic
_PERCENT = lazy_compile(r"""(?:(?<=%[0-9A-Fa-f]{2})|(?<=%25[0-9A-Fa-f]{2})|(?<![A-Za-z0-9_.%\-]))"""
                        r"""(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,63}(?:%(?:25){0,3}5[Ff][A-Za-z0-9_.\-]{1,64}){0,8})"""
                        r"""(?P<sep>(?:%(?:25){0,3}2[27])?(?:%(?:25){0,3}3[Dd]|%(?:25){0,3}3[Aa](?:%(?:25){0,3}20|\+){0,8})"""
                        r"""(?:%(?:25){0,3}2[27])?)(?!(?:%(?:25){0,3}2[Ff]){2})"""
                        r"""(?P<val>(?:(?!%(?:25){0,3}(?:[01][0-9A-Fa-f]|2[02367]|3[Bb]))[^\s&#"'<>])+)""")
_PERCENT_GATE = lazy_compile(r"%(?:25){0,3}3[DdAa]")
# a URL percent-encoded inside another value (next=https%3A%2F%2Fadmin%3APw%40host, encoded twice: %253A, %2540; in
# any case; its '//' encoded or not): its user information read as a URL's is (to the LAST encoded '@' of the
# authority, which ends at an encoded '/', '?' or '#' of the same depth, or a raw '/', '?', '#', '&', blank or quote)
# - the part after its first encoded ':' hidden, the user kept; without a ':' (a token as the user) hidden whole
# unless it is a plain user name. 'e' is the depth of the URL's encoding ('%', '%25', ...); its parts are bounded
_PCT_UNIT = r"(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9._~!$'()*+,;=:\-])"
# Where the authority holds no encoded '@' before an encoded '/', '?' or '#' of its depth but its user information has
# an encoded ':' and a later encoded '@' in the word is followed by a host, to that '@' (a raw '/' or '?' in the
# password, as _core.redact reads a URL that Go cannot: fails closed)
_PCT_USERINFO = lazy_compile(
    r"(?:(?<=%[0-9A-Fa-f]{2})|(?<![A-Za-z0-9+.\-%]))(?P<head>[A-Za-z][A-Za-z0-9+.\-]{0,31}(?P<e>%(?:25){0,3})"
    r"3[Aa](?:(?P=e)2[Ff]|/){2})(?P<info>(?:(?!(?P=e)(?:2[Ff]|3[Ff]|23))" + _PCT_UNIT + r"){1,512}(?=(?P=e)40)"
    r"|(?:(?!(?P=e)(?:2[Ff]|3[Ff]|23|3[Aa]))" + _PCT_UNIT + r"){0,128}(?P=e)3[Aa]" + _PCT_UNIT + r"{1,512}(?=(?P=e)40))"
    r"(?P<at>(?P=e)40)(?=[A-Za-z0-9\[%])")
# the first ':' of user information, raw or percent-encoded at any depth: HTTP Basic splits user:password at the first
# colon (RFC 7617 2), so one encoded in the user name (https://u%3Ax:p@h) starts the password
_FIRST_COLON = lazy_compile(r":|%(?:25){0,3}3[Aa]")
# what stands right before a query's parameter, encoded ('?' or '&') or not
_QUERY_CODE = lazy_compile(r"(?:%(?:25){0,3}(?:3[Ff]|26)|[?&])\Z")
_PCT_URL_GATE = lazy_compile(r"%(?:25){0,3}3[Aa](?:%(?:25){0,3}2[Ff]|/)")
# an Authorization header percent-encoded (Authorization%3A%20Bearer%20X, a form body's Authorization=Bearer+X is
# _core.redact's): its scheme kept, its credential hidden to the next encoded blank, '&', '#', ';', ',' or quote
_PCT_AUTH = lazy_compile(
    r"(?:(?<=%[0-9A-Fa-f]{2})|(?<![A-Za-z0-9_.%\-]))(?P<head>(?:proxy-)?authorization(?:%(?:25){0,3}2[27])?"
    r"(?P<e>%(?:25){0,3})(?:3a|3d)(?:(?P=e)20|\+){0,8}(?:(?P=e)2[27])?(?:[a-z][a-z0-9\-]{0,31}(?:(?P=e)20|\+){1,8}(?=[^\s&#\"'>+%]|(?P=e)(?!20)))?)"
    r"(?P<val><redacted by nodefix\.k8s>|(?:(?!(?P=e)(?:[01][0-9a-f]|20|26|23|3b|2c|22|27))[^\s&#\"'<>+]){1,4096})", re.IGNORECASE)
_PLAIN_USER = lazy_compile(r"^[A-Za-z_][A-Za-z_.\-]{0,31}$")
_PLURALS = frozenset(("tokens", "passwords", "passwds", "secrets", "keys", "credentials", "creds", "cookies"))


# The fast path (``benign``): a text of letters, digits and '._/+~-' only (a node's name, an address, a label's value or
# key) that holds none of the following can match no rule of _core.redact - every other rule needs a blank, a ':',
# '=', '@', '%', '[', '<', '\\' or another character outside that alphabet; of the rest, a catalogued token needs its
# prefix, a bootstrap token its shape, a Slack webhook its host, a tool's short password flag a '-' after '.', '/',
# '+' or '~' (mysql/-pX), prose form-encoded a secret word before a '+' (password+is+X). test_redact_fast_path.py holds
# it against the slow path on every table of the tests;
_ALPHABET = lazy_compile(r"[A-Za-z0-9._/+~\-]*\Z")
_SLOW_ANYWAY = lazy_compile(r"[./+~]-|hooks\.slack\.com|[a-z0-9]{6}\.[a-z0-9]{16}|" + _PREFIXED_SOURCE)
# prose form-encoded: a secret word before a '+' (password+is+X, token+X)
_FORM_PROSE = lazy_compile(r"(?:key|pass(?:word|wd|phrase)?|pwd|pw|pswd|token|secret|credential|login)s?\+",
                           re.IGNORECASE)


# and a host:port (a Prometheus instance label: node-00001:9100) whose host is of that alphabet without '/+~', does not
# start with '-' (curl's -uname:password) and holds no word a rule that reads a ':' looks for (a secret's name, a
# secret word of prose, a user flag, login)
_HOST_PORT = lazy_compile(r"([A-Za-z0-9._][A-Za-z0-9._\-]*):[0-9]{1,5}\Z")
_COLON_WORDS = lazy_compile(r"(?i)(?=[acpstkluhf])(?:auth|cred|pass|pw|psw|token|secret|sig|api|cookie|key|certificate"
                            r"|login|user|code_verifier|hash|fingerprint)")


def benign(text):
    """Whether no rule of _core.redact can match ``text`` (a string): the fast path returns it as it is."""
    if _ALPHABET.match(text) is not None:
        return _SLOW_ANYWAY.search(text) is None and ("+" not in text or _FORM_PROSE.search(text) is None)
    host = _HOST_PORT.match(text)
    return host is not None and _COLON_WORDS.search(host.group(1)) is None and _SLOW_ANYWAY.search(text) is None


def prefixed(text, mark):
    """``text`` with every word of a catalogued shape (``PREFIXED``) replaced by ``mark``."""
    return _PREFIXED.sub(mark, text)


def counted(name, value):
    """Whether ``value`` under ``name`` is a count of secrets rather than one: the name's last word a plural
    (``tokens``, ``db_passwords``) and the value a whole number, alone or followed by words (``tokens: 5``,
    ``passwords: 3 rotated``)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return False
    last = str(name).lstrip("-").replace("-", "_").replace(".", "_").rsplit("_", 1)[-1].lower()
    return last in _PLURALS and (isinstance(value, int) or _COUNT.match(value) is not None)


def _data_word(word):
    return (_DATA_WORD.match(word) is not None or _VERSION.match(word) is not None
            or _OBJECT_NAME.match(word) is not None or _GENERATED_NAME.match(word) is not None
            or _HOST.match(word) is not None)


# what a log line says of a secret, never the secret: its state or the start of a sentence (``token: expired``,
# ``secret kube-system/x: not found``, ``anonymous token: unexpected status: 401``); a source file's line (klog's
# ``token_cleaner.go:166]``); the working directory (``PWD=/var/lib/kubelet``)
_STATE_WORDS = frozenset(("not", "no", "none", "null", "nil", "unset", "empty", "expired", "invalid", "revoked",
                          "missing", "unknown", "unexpected", "required", "present", "absent", "rejected", "denied",
                          "<none>", "(none)"))
_SOURCE_LINE = lazy_compile(r"[A-Za-z0-9_]\.(?:go|py|c|cc|h|rs|java|sh|js|ts)\Z")


def _said_of_it(name, value):
    if not isinstance(value, str) or isinstance(value, bool):
        return False
    name, value = str(name), value.strip()
    if value.lower() in _STATE_WORDS or ("not" in value and missing_object(name, value)):
        return True
    if _SOURCE_LINE.search(name) is not None and value.isdigit() and len(value) <= 6:
        return True
    return name.lower() in ("pwd", "oldpwd") and value.startswith("/") and " " not in value


def not_a_secret(name, value):
    """Whether ``value`` under a secret's ``name`` is data after all: a count (``counted``), a Secret's object name
    under the name ``secret`` or ``credential`` (``secret: default-token-abc12``, ``secret: kube-system/regcred``: a
    name Kubernetes generates or a namespace/name), a hash or a public key by its name and its value together
    (``_core.secret_kept.public_value``), or, under a name that is a node's and a secret's alike
    (``_core.secret_names.numbered``: ``vault-token-0``, ``default-token-abc12``) or a component's
    (``_core.secret_kept.component_name``: ``token-cleaner``), a number or text whose every word reads as data
    (``_data_word``: ``Ready``, ``NotReady since 5m``, ``v1.28.3``, ``kube-system``; a list of such values) - a value
    with a word of mixed letters and digits (``X9sdf8``, ``hunter2``) stays hidden."""
    if counted(name, value) or _said_of_it(name, value) or public_value(name, value):
        return True     # (a hash, a public key: by the name and the value together, _core.secret_kept)
    if (isinstance(value, str) and _OBJECT_NOUN.search(str(name)) is not None
            and (_GENERATED_NAME.match(value) is not None or _NAMESPACED.match(value) is not None)):
        return True     # secret: default-token-abc12, secret: kube-system/regcred - a Secret's name
    as_data = numbered(name) or component_name(name)
    if isinstance(value, (list, tuple)) and value and as_data:
        return all(isinstance(v, (int, float, str)) and not_a_secret(name, v) for v in value)   # ["NotReady", 3]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or not as_data:
        return False
    if not isinstance(value, str):
        return True
    words = [w for w in re.split(r"[\s,;]+", value.strip()) if w]
    return bool(words) and len(words) <= 32 and all(_data_word(w) for w in words)


def _inside(val):
    return val[1:-1] if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'" else val


def _kept_everywhere(inside, plural):
    # (a value without a letter or digit is syntax: a YAML block scalar's '|', Perl's '=>')
    return (not any(c.isalnum() for c in inside) or "<redacted" in inside or inside.lower() in _SWITCH_WORDS or inside.startswith(("$", "-"))
            or (plural and inside.isdigit()) or "://" in inside)


def _split(match):
    """(the text before the value, the value, its trailing sentence punctuation: 'Password is X.' -> 'X', '.')."""
    val = match.group("val")
    word = val if val[0] in "\"'" else val.rstrip(".,;:)]}") or val
    return match.group(0)[:match.start("val") - match.start(0)], word, val[len(word):]


def _prose(match, mark):
    head, val, tail = _split(match)
    blank = _FORM_BLANK.search(head) if "+" in head or "%20" in head else None
    if blank and blank.group(0) in val:     # form-encoded prose: its blank ends the value (q=password+is+X+y)
        val, tail = val[:val.index(blank.group(0))], val[val.index(blank.group(0)):] + tail
    if match.group("for") and match.group("sep")[-1:] in ":=":
        return match.group(0)   # 'password of a `user:password`': after a connector phrase, a ':' is followed by a blank
    strong = match.group("sep") and not match.group("login")
    if not (_strong if strong else _weak)(match, val):
        return match.group(0)
    return head + (val[0] + mark + val[0] if _inside(val) != val else mark) + tail


def _strong(match, val):
    """Whether ``val`` after a secret word and ':', '=', 'is' or 'was' is hidden."""
    inside = _inside(val)
    name = match.group("name").lower()
    return not (_kept_everywhere(inside, match.group("plural")) or _ORDINARY.match(val)
                or (inside.isdigit() and len(inside) <= 3) or inside.startswith(("/", "~/", "./"))
                or _VERSION.match(inside) or _GENERATED_NAME.match(inside)
                or (name.startswith(("secret", "credential")) and _OBJECT_NAME.match(inside)))


def looks_like_a_credential(value):
    """Whether a word after a secret word, with nothing between them, looks like a credential (the module's
    docstring)."""
    if (not _TOKEN_ALPHABET.match(value) or value.isdigit() or _ORDINARY.match(value) or _OBJECT_NAME.match(value)
            or _GENERATED_NAME.match(value) or _VERSION.match(value) or _HOST.match(value)
            or value.startswith(("/", "~/", "./", "-"))):
        return False
    kinds = [any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value)]
    return sum(kinds) >= 2


def _weak(match, val):
    """Whether ``val`` right after a secret word (or 'login') is hidden."""
    inside = _inside(val)
    return not _kept_everywhere(inside, match.group("plural")) and looks_like_a_credential(inside)


def prose(text, mark):
    """``text`` with the value after a secret word in a sentence replaced by ``mark`` (the module's docstring)."""
    return (_PROSE_FORM if "+" in text or "%20" in text else _PROSE).sub(lambda m: _prose(m, mark), text)


def _percent(match, mark):
    key = match.group("key")
    for _round in range(3):
        key = unquote(key)
    val = match.group("val")
    if key.lower() == "code" and _QUERY_CODE.search(match.string, 0, match.start()) and not unquote(val).isdigit():
        key = "key"     # OAuth's authorization code in an encoded redirect (%3Fcode%3DX%26state%3Dy), as _core.redact's
    if (not (secret_name(key) or key.lower() == "key") or mark[:9] in unquote(val) or counted(key, unquote(val))
            or unquote(val).lower() in _SWITCH_WORDS):
        return match.group(0)
    return match.group("key") + match.group("sep") + mark


def _percent_userinfo(match, mark):
    info, colon = match.group("info"), _FIRST_COLON.search(match.group("info"))
    if colon is None and _PLAIN_USER.match(unquote(unquote(unquote(info)))):
        return match.group(0)       # a user name alone: nothing to hide
    if mark[:9] in unquote(info):
        return match.group(0)
    user = info[:colon.end()] if colon else ""
    return match.group("head") + user + mark + match.group("at")


def url_user_shown(head, user=None):
    """``head`` (``scheme://``) and what is shown of a URL's ``user`` (no password follows; None: ``head`` is
    ``scheme://user`` and a raw ':' follows) - to its first encoded ':' and that colon (``u%3A`` of ``https://u%3Ax:p@h``:
    to a server, ``x:p`` is the password), else nothing of a user alone and the user and its ':' before a password."""
    if user is None:
        head, user = head[:head.index("://") + 3], head[head.index("://") + 3:]
        return head + (user[:_FIRST_COLON.search(user).end()] if _FIRST_COLON.search(user) else user + ":")
    return head + (user[:_FIRST_COLON.search(user).end()] if _FIRST_COLON.search(user) else "")


def percent_encoded(text, mark):
    """``text`` with the value of every percent-encoded secret parameter or header replaced by ``mark`` (the name
    kept), and the user information of a percent-encoded URL's (the user kept)."""
    if "%" not in text or not _PERCENT_GATE.search(text):
        return text
    if _PCT_URL_GATE.search(text):
        text = _PCT_USERINFO.sub(lambda m: _percent_userinfo(m, mark), text)
    text = _PCT_AUTH.sub(lambda m: m.group(0) if mark[:9] in m.group("val") else m.group("head") + mark, text)
    return _PERCENT.sub(lambda m: _percent(m, mark), text)


# an environment assignment in an env file's form (docker's --env-file, systemd's EnvironmentFile=, dotenv: the value
# of an unquoted assignment runs to the end of its line): a name as environment variables are named (POSIX: capitals,
# digits, '_' - anywhere in a text: GPG_PASSPHRASE=, Environment=API_TOKEN=) and '=', or any name starting its line
# (after 'export'; '.' and '-' in it, blanks around its '=': an INI or properties file's 'password = a b'), then a
# value that does not start with a quote, '[' or '{' (a TOML array or table: _core.redact's), of two words or more.
# It ends at the end of the line, before the next word that is another assignment or key (NAME=, name:) or a shell
# operator (';', '|', '&'), and at the quote that opened the text around it (Environment="A=x y"). A line whose value
# is followed by a flag (a word starting with '-') is a command line (PGPASSWORD=x psql -h db): there, as in a shell,
# the value is its first word, which _core.redact reads as any key = value
_ENV_KEY = lazy_compile(r"(?:(?<![^\s=\"'])(?P<env>[A-Z_][A-Z0-9_]{0,127})=|(?:^|(?<=\n))[ \t]*(?:export[ \t]+)?"
                        r"(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,127})[ \t]*=[ \t]*)(?=[^\"'\s\[{])")
_WORD = lazy_compile(r"\S+")
_NEXT_WORD = lazy_compile(r"[ \t]+(?![A-Za-z_][A-Za-z0-9_.\-]{0,127}(?:=|:(?!\S))|[;|&-])\S+")
_FLAG_NEXT = lazy_compile(r"[ \t]+-")


# env(1)'s operands ('env A=1 B_PASSWORD=x cmd': the run of assignments after a word 'env' and its options) are not an
# env file's: each value is one word, as the shell gives it, and the words after it are the command's (the key = value
# pass hides that word). Assignments starting a line stay an env file's (FOO=1 DB_PASSWORD=a b: FOO's value to docker)
_ASSIGN = r"""[A-Za-z_][A-Za-z0-9_]{0,127}=(?:"[^"\n]*"|'[^'\n]*'|[^\s"'])*"""
_COMMAND_RUN = lazy_compile(r"(?<![^\s;&|(])env(?:[ \t]+-[A-Za-z-]*(?:[ \t]+(?![A-Za-z_]\w*=|-)\S+)?)*[ \t]+"
                            r"(?P<run>" + _ASSIGN + r"(?:[ \t]+" + _ASSIGN + r")*)")
_ASSIGN_RE = lazy_compile(_ASSIGN)


def _command_assignments(text):
    """Where each assignment of a command line (``_COMMAND_RUN``) in ``text`` starts."""
    starts = set()
    for run in _COMMAND_RUN.finditer(text):
        starts.update(run.start("run") + one.start() for one in _ASSIGN_RE.finditer(run.group("run")))
    return starts


# Dockerfile's ENV in its other form, 'ENV <key> <value>' (the value is the rest of the line: ENV DB_PASSWORD a b c),
# at a line's start or after docker history's '#(nop)'
_DOCKER_ENV = lazy_compile(r"(?:(?:^|(?<=\n))[ \t]*|(?<=#\(nop\))[ \t]+)ENV[ \t]+(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,127})"
                           r"[ \t]+(?P<val>[^\s=][^\n]*)")


def _docker_env(match, mark):
    val = match.group("val").rstrip(" \t\r")
    if (not secret_name(match.group("key")) or val.startswith(mark[:9]) or val.lower() in _SWITCH_WORDS
            or not_a_secret(match.group("key"), val) or key_path(match.group("key"), val)):
        return match.group(0)
    return match.group(0)[:match.start("val") - match.start()] + mark + match.group("val")[len(val):]


def env_values(text, mark):
    """``text`` with the value of every environment assignment of a secret's name (``_ENV_KEY``) of two words or
    more replaced by ``mark`` whole (``GPG_PASSPHRASE=my very secret phrase``) - but a command line's
    (``_COMMAND_RUN``) - and a Dockerfile's ``ENV <key> <value>`` (``_DOCKER_ENV``); the name kept."""
    if "ENV" in text:
        text = _DOCKER_ENV.sub(lambda m: _docker_env(m, mark), text)
    if "=" not in text:
        return text
    out, pos, match, last, commands = [], 0, _ENV_KEY.search(text), 0, None
    while match is not None:
        # a name that is not a secret's costs its own length: the next one may be its value's (Environment=API_TOKEN=x y)
        after, val = match.end(), ""
        key = match.group("env") or match.group("key")
        if secret_name(key):
            # word by word (one pattern over all of them would read a long first word again for each retry); a value
            # starting inside the words of the last one read ends where it ended (each word is read once)
            end = after = _WORD.match(text, after).end()
            if end < last:
                end = last
            word = _NEXT_WORD.match(text, end)
            while word is not None:
                end = word.end()
                word = _NEXT_WORD.match(text, end)
            val, last = text[match.end():end], end
        opened = text[match.start() - 1] if match.start() and text[match.start() - 1] in "\"'" else None
        if opened and opened in val:
            val = val[:val.index(opened)]
        if (len(val.split()) >= 2 and not val.startswith(mark[:9]) and not not_a_secret(key, val)
                and not _FLAG_NEXT.match(text, match.end() + len(val))):
            commands = _command_assignments(text) if commands is None else commands
            if match.start("env" if match.group("env") else "key") in commands:
                match = _ENV_KEY.search(text, after)
                continue    # a command line's: its value is one word (the key = value pass's)
            out.append(text[pos:match.end()] + mark)
            pos = after = match.end() + len(val)
        match = _ENV_KEY.search(text, after)
    return "".join(out) + text[pos:] if out else text


# a secret's name, '=' (or ':='), then a quoted value, wherever the name starts - inside another assignment's value too,
# which the key = value pass reads as one bare value up to the quote and so never reaches (systemd's
# Environment=DB_PASSWORD="x", env: A="x"); and kubeadm's certificate key as `kubeadm init --upload-certs` prints it,
# on the line after its label
_QUOTED_AFTER_NAME = lazy_compile(r"""(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,127})[ \t]*:?=[ \t]*"""
                                  r"""(?P<val>"(?:[^"\\\n]|\\.){1,4096}"|'[^'\n]{1,4096}')""")
_CERTIFICATE_KEY = lazy_compile(r"(?i)(?P<head>\bcertificate key:[ \t]*\r?\n?[ \t]*)(?P<val>[0-9a-f]{64})(?![0-9a-f])")


# an absolute path (two components at least) under a *_key name is where a key is (ssh_host_key:
# /etc/ssh/ssh_host_rsa_key), not the key
_KEY_PATH = lazy_compile(r"^/(?:[A-Za-z0-9._\-]+/)+[A-Za-z0-9._\-]+$")


def key_path(name, value):
    """Whether ``value`` under a secret's ``name`` is where a key is - an absolute path under a name ending in
    ``key`` (``signing_key: /etc/kubernetes/pki/sa.key``) - shown as a path is."""
    return (isinstance(value, str) and re.sub(r"[^a-z]", "", str(name).lower()).endswith("key")
            and _KEY_PATH.match(value) is not None)


def quoted_values(text, mark):
    """``text`` with the quoted value of every secret's name assigned with '=' (``_QUOTED_AFTER_NAME``) and kubeadm's
    printed certificate key replaced by ``mark`` (the quotes and the name kept)."""
    if "certificate key" in text.lower():
        text = _CERTIFICATE_KEY.sub(lambda m: m.group("head") + mark, text)
    if '="' not in text and "='" not in text and '= "' not in text and "= '" not in text:
        return text

    def hide(match):
        inside = match.group("val")[1:-1]
        if (not secret_name(match.group("name")) or mark[:9] in inside or inside.lower() in _SWITCH_WORDS
                or not_a_secret(match.group("name"), inside) or key_path(match.group("name"), inside)):
            return match.group(0)
        return match.group(0)[:match.start("val") - match.start()] + match.group("val")[0] + mark + match.group("val")[-1]
    return _QUOTED_AFTER_NAME.sub(hide, text)


# an Authorization header whose scheme is followed by auth-params (RFC 9110 11.4: 'scheme name=value, name="value"'):
# Digest (RFC 7616 3.4), Rails' 'Token token="x"', AWS Signature Version 4, OAuth 1.0 (RFC 5849 3.5.1) - every
# parameter's value hidden but those that are public by their protocol (_PUBLIC_PARAMS: the user's name, the realm,
# the URI, counters and algorithms); a quoted value keeps its quotes (a JSON text's \" too)
_AUTH_PARAMS = lazy_compile(r"""\b(?:proxy-)?authorization\\?["']?[ \t]*[:=][ \t]*\\?["']?[A-Za-z][A-Za-z0-9-]{0,63}[ \t]+"""
                            r"""(?=[A-Za-z][\w-]{0,63}[ \t]*=[ \t]*(?:\\?"|[^\s=,"]))""", re.IGNORECASE)
_AUTH_PARAM = lazy_compile(r"""(?P<name>[A-Za-z][\w-]{0,63})[ \t]*=[ \t]*"""
                           r"""(?P<val>\\"(?:[^"\\\n]|\\[^"\n]){0,4096}\\"|"(?:[^"\\\n]|\\.){0,4096}"|[^\s,"\\]{1,4096})""")
_AUTH_PARAM_SEP = lazy_compile(r"[ \t]*,[ \t]*")
_PUBLIC_PARAMS = frozenset(("username", "realm", "uri", "qop", "nc", "algorithm", "opaque", "userhash", "charset",
                            "domain", "stale", "signedheaders", "oauth_signature_method", "oauth_version",
                            "oauth_timestamp"))


def auth_params(text, mark):
    """``text`` with the value of every auth-param of an Authorization header (``_AUTH_PARAMS``) but the public ones
    replaced by ``mark`` (the names, the scheme and the quotes kept)."""
    if "uthorization" not in text and "UTHORIZATION" not in text:
        return text
    out, pos, head = [], 0, _AUTH_PARAMS.search(text)
    while head is not None:
        end = head.end()
        param = _AUTH_PARAM.match(text, end)
        while param is not None:
            val = param.group("val")
            if param.group("name").lower() not in _PUBLIC_PARAMS and mark[:9] not in val:
                quote = '\\"' if val.startswith('\\"') else val[0] if val[0] == '"' else ""
                out.append(text[pos:param.start("val")] + quote + mark + quote)
                pos = param.end()
            end = param.end()
            sep = _AUTH_PARAM_SEP.match(text, end)
            param = _AUTH_PARAM.match(text, sep.end()) if sep is not None else None
        head = _AUTH_PARAMS.search(text, end)
    return "".join(out) + text[pos:] if out else text
