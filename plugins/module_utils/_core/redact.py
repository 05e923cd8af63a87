# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
r"""The one redaction layer: no secret read on a node leaves it in a module's result.

Applied where node text is read for output (the evidence bundle, node_audit's and the info modules'
results, every config diff). What is replaced, the key (or the user, the token's id) kept and the
value written as ``<redacted by nodefix.k8s>``:

- a key whose name is a secret, in TOML, INI, YAML, JSON, env files, systemd ``Environment=`` lines
  and command-line flags (``key = "v"``, ``key: v``, ``"key": "v"``, ``KEY=v``, ``--key=v``,
  ``--key v``): containerd's registry ``auth``, ``password``, ``identitytoken``, ``registrytoken``
  (containerd docs/cri/registry.md: ``[plugins."io.containerd.grpc.v1.cri".registry.configs."host".auth]``),
  a kubeconfig's ``token``, ``client-key-data``, ``client-certificate-data``, and any name holding
  ``TOKEN``, ``PASSWORD``/``PASSWD``/``PASSPHRASE`` or ``SECRET`` or ending in ``_KEY`` or ``SIGNATURE``
  (case-insensitive); a bare value runs to the next blank, quote, ``}`` or ``]`` - a ``,``, ``;`` or ``&``
  ends it only before the next ``name=`` (mount options, a query string), so ``--password=ab,cd`` is hidden
  whole; a backslash-escaped character is part of it (``--password=a\ b``);
- a ``key: value`` anywhere in a line, one after another (``stderr: token: X``): a bare value never ends in ``:``
  nor takes in the next ``key:``;
- the password of a URL's user information (``scheme://user:password@host``, RFC 3986 3.2.1), read as Go's url.Parse
  and _core/mirror_auth.split_userinfo read it (the authority to the first ``/``, ``?`` or ``#``, its user information
  to the last ``@`` in it: ``https://u:p@h/a@b`` keeps its host and path); where Go reads none but a later ``@`` in
  the word is followed by a host, to that ``@`` (a raw ``/``, ``?``, ``#`` or quote in the password, and
  ``https://u:123/x@h``, which Go reads as host ``u``, port 123 - split_userinfo refuses such a URL as ambiguous);
  a user name alone unless it is a plain name (``ssh://git@host`` kept); a quote in the password or right before its
  ``@`` (``curl "http://u:X"@h``, Go's quoted URL in its error: ``\"``) unless a JSON separator follows it;
- an AWS access key id followed by its secret access key (the secret), ``API key: X``, a Slack webhook's path;
- ``Bearer``/``Basic`` credentials (``Authorization: Bearer ...``, RFC 6750 2.1);
- the secret half of a bootstrap token (``[a-z0-9]{6}.[a-z0-9]{16}`` as a whole word, never in a host name, kubernetes
  docs/reference/access-authn-authz/bootstrap-tokens: the id is public, the secret is not) in a text that says
  ``token``, ``join``, ``bootstrap`` or ``kubeadm`` anywhere (or under a key that does: ``join_command``);
- the body of a PEM private key;
- the value of a secret's key in YAML whatever its form: a plain scalar with spaces (to the end of the line, a
  comment kept), a quoted or plain scalar continued on deeper lines, a block scalar (``|``, ``>``, with
  indentation and chomping indicators: its lines), a sequence of scalars under it (at the key's column too);
- command lines: a user flag's password (``--user name:pass``, ``--user=name:pass``, ``-u name:pass``, etcdctl's
  ``ETCDCTL_USER=name:pass``, ``-uname:pass``, curl's ``-U``/``--proxy-user``), a secret flag's value starting with
  one dash (``--password -x1``), a value continued on the next line (``--password \``), the short password flags of
  the tools that take one (``mysql -pX``/``-p X`` and the MariaDB tools, ``sshpass -p``, ``ipmitool -P``, ``redis-cli
  -a``, the ldap tools' ``-w``, ``docker|podman|nerdctl|buildah|skopeo|helm|oras|crane|regctl login -p``), openssl's
  ``-passin pass:X``;
- a ``.netrc`` line's ``password`` (and ``account``);
- an argv printed as a list (``CalledProcessError``: ``['etcdctl', '--password', 'X']``) read as an argv; TOML dotted
  keys after a quoted segment (``configs."reg".auth.password = "X"``); ``key => 'X'``; Kubernetes name/value pairs
  (``- name: DB_PASSWORD`` / ``value: X``, their JSON, a structure's); ``user:pass@host`` without a scheme
  (``HTTPS_PROXY=u:X@proxy:3128``, Go's MySQL DSN ``root:X@tcp(db)``; never ``image:tag@sha256:``); an XML element
  named as a secret; Digest's ``response``; a YAML secret's scalar starting on the next line;
- a URL query's secret parameters (any secret name: ``token``, ``access_token``, ``X-Amz-Signature``,
  ``X-Amz-Credential``, ``X-Amz-Security-Token``, ``sig``; and ``key``, OAuth's ``code`` but a number), each on its own;
- tokens recognisable by their shape wherever they are (``_core.secret_shapes.PREFIXED``, each row citing its vendor's
  description of the format): JSON Web Tokens (JWS and JWE: a service account token), a registry config in base64,
  HashiCorp Vault (``hvs.``/``hvb.``/``hvr.``), Stripe (``sk_``/``rk_`` live and test, ``whsec_``), GitHub
  (``gh[pousr]_``, ``github_pat_``), GitLab (``glpat-`` and its other prefixes), Slack (``xox?-``, ``xapp-``), Google
  API (``AIza``), npm, PyPI and Docker Hub tokens, crypt(3) password hashes (``$6$...``: /etc/shadow);
- in ``_core.secret_shapes`` (its docstring): a secret word in a sentence and its value (``Password is X``, ``password
  for user admin: X``, ``reset to X``; ``token X`` where X looks like a credential; form-encoded: ``q=password+is+X``);
  percent-encoded query strings, URLs' user information and Authorization headers; an env file's value of several
  words (``GPG_PASSPHRASE=a b``; a command line's is one word: ``env A=1 B_PASSWORD=X cmd``), Dockerfile's ``ENV k v``;
  every auth-param of an Authorization scheme but the public ones (``Token token="X"``, Digest's ``response``,
  ``cnonce``, ``nonce``); a URL's user information from its first colon, raw or encoded (``https://u%3AX:Y@h``).

Decided false positives (kept as they are): a name shaped as a node's with a number of its own (``auth-01``,
``token-ring-2``: the key of a map of nodes, a node a message names - ``_core.secret_names``) unless its number follows
a secret word (``db-password-2``, ``vault-token-0``: then the value beside it is hidden unless it reads as data,
``secret_shapes.not_a_secret``: ``vault-token-0: Ready``); a count (``tokens: 5``, ``passwords: 3 rotated``); a word, a
number, a version, a path or a name after a secret word in prose (``token bucket``, ``token is v1.28.3`` -
``_core.secret_shapes``); a colon-joined value without a secret's name before a colon (``user: system:node:n1``);
a text no rule can match (``secret_shapes.benign``: returned unread); a name whose last word
measures a secret (``--authentication-token-webhook-cache-ttl=2m``); ``Basic``/``Bearer`` before an ordinary word
(``Basic authentication failed``: letters in lower case after an optional capital, at most 15); a key naming where a
secret is rather than the secret
(its name ends in ``file``, ``path`` or ``dir``: ``password_file = "/etc/pw"``, ``tokenFile``,
``--tls-private-key-file``) - a path is what an operator needs to read; ``auth`` only as a whole
key (``authentication``/``authorization`` are kubelet settings, not secrets); an empty value; a switch
(``true``/``false``/``yes``/``no``/``on``/``off``) under a secret's name; a short flag of another tool
(``psql -p 5432``, ``docker run -p 8080:80``, ``ssh -p 22``: ``-p`` is a password only for the tools named
above, and only its first one on a command line); a secret flag followed by ``--another-flag`` (a value
starting with two dashes is the next flag); an absolute path under a name ending in ``key`` (``ssh_host_key:
/etc/ssh/ssh_host_rsa_key``: where a key is); a URL whose path holds an ``@`` after ``host:port``
(``http://proxy:3128/a@b`` shows as ``http://proxy:<redacted>@b``: the same text as a password of digits with a raw
``/``, hidden).

Decided leak: a bootstrap-token-shaped word in a text that says none of token/join/bootstrap/kubeadm is shown - the
same shape is a valid Node name of two labels (``node01.abcdefabcdef0123``), which reports, results' keys and every
message name; every text kubeadm writes a token into names one of those words (the join command, ``kubeadm token
list``'s TOKEN column, its config's and the bootstrap kubeconfig's ``token:``).

Keys are redacted as text is (a node's name, a label value); two keys that read the same once redacted are both kept,
the later numbered (``unique_key``): no node is ever dropped from a result or a report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_kept, secret_shapes
from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_yaml
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_yaml import SWITCH_WORDS as _SWITCH_WORDS
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_yaml import unquoted as _unquoted
from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import secret_name

MARK = "<redacted by nodefix.k8s>"

# flags whose value is ``name:password`` (etcdctl --user, curl -u/--user, skopeo --creds): the name is kept
_USER_FLAGS = frozenset(("user", "u", "proxy_user"))
# environment variables that are such a flag (etcdctl reads ETCDCTL_<FLAG> for each --flag: ETCDCTL_USER is --user's
# "username[:password]", etcd-io/etcd etcdctl/README.md); only these: a `user:` key elsewhere names a user
# (`system:node:worker-1`), never a password
_USER_ENV = frozenset(("etcdctl_user",))

# a bare value: to the next blank, quote, '}' or ']'; a ',', ';' or '&' ends it only before the next 'name=' (mount
# options, a query string, a connection string) or a blank; a backslash escapes the next character
_BARE = (r"""(?![A-Za-z_][A-Za-z0-9_.\-]*[ \t]*:(?:\s|\Z))"""
         r"""(?:<redacted by nodefix\.k8s>|\\.|[^\s"',;&{}\]\\:]|:(?![\s"']|\Z))"""
         r"""(?:<redacted by nodefix\.k8s>|\\.|[^\s"',;&}\]\\:]|:(?![\s"']|\Z)"""
         r"""|[,;&](?![\s"',;&]|\Z|[A-Za-z_][A-Za-z0-9_.\-]*[ \t]*[=:])"""
         r"""(?<!;(?=[A-Za-z_][A-Za-z0-9_.\-]*(?:[ \t][A-Za-z_][A-Za-z0-9_.\-]*)+[ \t]*=)))*""")
_VALUE = (r"""(?P<val><redacted by nodefix\.k8s>|\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'"""
          r"""|\\"(?:\\\\\\"|[^"\\\n]|\\[^"\n])*?\\"|\[[^\[\]]*\]|""" + _BARE + ")")
# key [sep] value: the key optionally quoted (a JSON text inside a JSON string too: \"password\": \"x\"), '=' or ':'
# on one line, the value quoted (TOML's multi-line strings too), an array or bare. A key starts a word (with its
# flag's dashes: --password=x), as a URL's scheme does below: a regexp that may start inside a long word
# would read it again from each of its characters (a base64 blob in a journal: seconds for 100 KiB)
_KEY_VALUE = re.compile(
    r"""(?P<q>\\?["']|)(?:(?<![A-Za-z0-9_.\-])|(?<="\.))(?P<key>-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q)"""
    r"""(?P<sep>[ \t]*(?:=>|::=|:=|\?=|\+=|[:=])[ \t]*(?:\r?\n[ \t]*(?=\\?["']))?)"""
    + _VALUE)
# --flag value, -u/-U value (the '=' form is a key = value above): the value may start with one dash (a password
# '-x1'), never two and never as one letter (the next flag: --x, -v, -v=2, -v4); a line continued with a backslash
# goes on
_FLAG_SPACE = re.compile(r"""(?<![\w-])(?P<key>--[A-Za-z0-9][A-Za-z0-9_\-]*|-[uU])(?P<sep>(?:[ \t]|\\\r?\n)+)"""
                         r"""(?P<val><redacted by nodefix\.k8s>|"[^"\n]*"|'[^'\n]*'|(?:-(?!-|[A-Za-z](?:=|\d*(?:\s|\Z)))|[^\s"'\\-])"""
                         r"""(?:<redacted by nodefix\.k8s>|[^\s"'])*)""")
# curl's -uname:password, -Uname:password (the user kept)
_ATTACHED_USER = re.compile(r"""(?<![\w-])(?P<head>-[uU]["']?[^\s:"'<>-][^\s:"'<>]*:)(?P<val>[^\s"'<]+)""")
# scheme://[user][:password]@host, read as Go's url.Parse reads it (net/url: the authority runs to the first '/', '?'
# or '#', its user information to the LAST '@' in it - RFC 3986 3.2.1, as _core/mirror_auth.split_userinfo reads it):
# 'http://u:Pr0xy@Tail@proxy' has the password 'Pr0xy@Tail', 'https://u:p@h/a@b' the password 'p' (its path kept).
# Where Go reads no user information but a later '@' in the word is followed by a host, the text after the first ':'
# is hidden to that '@' - failing closed: a password with a raw '/', '?', '#' or quote ('https://robot:Sl/ash@host',
# not a valid URL), and one of digits then a raw '/' ('https://u:123/x@h'), which Go reads as host 'u', port 123 and
# the path '/x@h' - the same shape as 'http://proxy:3128/a@b', a path with an '@' (hidden too: the decided false
# positive; split_userinfo refuses such a URL as ambiguous, so the collection never uses one)
# a host as Go's url.Parse takes it: a name (sub-delims too), an [IPv6 address] (with a zone), empty; an optional port
_URL_HOST = r"""(?:\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._~%\-]+)?\]|[A-Za-z0-9._~%!$&'()*+,;=\-]*)(?::\d*)?"""
_URL_HOST_NEXT = r"""(?=""" + _URL_HOST + r"""(?:[/?#\s"'<>,;)\]}]|\Z))"""
_URL_USERINFO = re.compile(r"""(?<![A-Za-z0-9+.\-])(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://"""
                           r"""(?:[^\s/?#:@'"<>]|'(?![\s,;)\]}]|\Z))*):"""
                           r"""(?:(?P<go>[^\s/?#"<>]*)@""" + _URL_HOST_NEXT
                           + r"""|(?P<val>(?:[^\s"<>\\]|\\(?!")|\\?"(?![\s,:;)\]}]|\Z))+)@""" + _URL_HOST_NEXT + ")")
# user information without a password (https://ghp_...@github.com, https://token@mirror): a token as the user name
# is the usual way to put one in a URL, so the whole user information goes - unless it is a user name (letters,
# '_', '.', '-', no digit, at most 32: ssh://git@host, https://deploy@host), which has nothing to hide
_URL_PLAIN_USER = re.compile(r"""(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://)[A-Za-z_][A-Za-z_.\-]{0,31}@""" + _URL_HOST_NEXT)
_URL_TOKEN_USER = re.compile(r"""(?<![A-Za-z0-9+.\-])(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://)"""
                             r"""(?![A-Za-z_][A-Za-z_.\-]{0,31}@)(?P<val>[^\s/?#:'"<>]+)@""" + _URL_HOST_NEXT)
# a query's 'key' parameter (Google's ?key=AIza...) and 'code' (OAuth 2.0's authorization code in a redirect, RFC 6749
# 4.1.2: ?code=X&state=y; a number is a status: ?code=200); every other secret parameter is a secret name (_KEY_VALUE)
_QUERY_KEY = re.compile(r"(?P<head>[?&](?:key|code)=)(?P<val>(?![0-9]{1,4}(?:[&#\s\"'<>]|\Z))[^&#\s\"'<>]+)")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic)[ \t]+)(?P<val>[A-Za-z0-9._~+/=\-]{4,})", re.IGNORECASE)
# an ordinary word after Basic/Bearer ("Basic authentication failed", "basic auth"): no credential is only letters
# in lower case after an optional capital (base64 of user:password, a token: mixed case, digits, '=')
_WORD = re.compile(r"^[A-Za-z][a-z]{0,14}$")
# the credential of any scheme in an Authorization header (Token, Digest, Negotiate, a bare key)
# (a form body's Authorization=Bearer+X&b=1: '+' the blank, '&' before the next name= ends it)
_AUTH_HEADER = re.compile(r"""(?P<head>\b(?:Proxy-)?Authorization["']?[ \t]*[:=][ \t]*(?:\r?\n[ \t]*(?=["']))?"""
                          r"""(?:\[\s*)?["']?"""
                          r"""(?![A-Za-z][A-Za-z0-9-]*[ \t]+[A-Za-z][\w-]*[ \t]*=[ \t]*(?:\\?"|[^\s=,"]))"""
                          r"""(?:[A-Za-z][A-Za-z0-9-]*(?:[ \t]+|\+(?=[^\s&+])))?)"""
                          r"""(?P<val>(?:[^\s"',\]&]|&(?![A-Za-z_][\w.\-]*=)){4,})""", re.IGNORECASE)
# an Authorization header's array (TOML, JSON; on one line or many): every string in it
_AUTH_ARRAY = re.compile(r"""(?i)\b(?P<head>(?:[A-Za-z0-9]+[-_])*Authorization["']?[ \t]*[:=][ \t]*\[)(?P<body>[^\[\]]*)\]""")
_QUOTED_STRING = re.compile(r""""(?:[^"\\\n]|\\.)*"|'[^'\n]*'""")
# a .netrc line (machine/default/login first, or 'password X' alone on its line): its passwords and accounts
_NETRC_LINE = re.compile(r"(?m)^[ \t]*(?:(?:machine|default|login)\b.*|(?:password|account)[ \t]+\S+[ \t]*)$")
_NETRC = re.compile(r"(?<!\S)(?P<head>(?:password|account)[ \t]+)(?P<val>\S+)")
# openssl's -passin/-passout/-pass pass:<password> (env:, file:, fd: say where it is: kept)
_OPENSSL_PASS = re.compile(r"""(?<![\w-])(?P<head>-pass(?:in|out)?[ \t]+["']?pass:)(?P<val>[^\s"'<]+)""")
# the short password flag of the tools that take one (the first one after the command on its line: 'sshpass -p X
# ssh -p 22' keeps ssh's port); docker/podman/... only with 'login'
_SHORT_FLAG = dict([(c, "p") for c in ("mysql", "mysqldump", "mysqladmin", "mysqlcheck", "mysqlimport", "mysqlshow",
                                       "mysqlslap", "mysqlpump", "mariadb", "mariadb-dump", "mariadb-admin",
                                       "mariadb-check", "mariadb-import", "sshpass")]
                   + [("ipmitool", "P"), ("redis-cli", "a")]
                   + [(c, "w") for c in ("ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami",
                                         "ldappasswd", "ldapcompare", "ldapmodrdn")])
_LOGIN_COMMANDS = frozenset(("docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane", "regctl"))
_COMMAND = re.compile(r"(?<![\w.-])(?P<cmd>%s)(?![\w.-])(?P<args>[^\n|;&]*)" % "|".join(
    re.escape(c) for c in sorted(set(_SHORT_FLAG) | _LOGIN_COMMANDS, key=len, reverse=True)))
# a bootstrap token is a whole word (Kubernetes matches it as ^[a-z0-9]{6}\.[a-z0-9]{16}$): never a label of a host name
# (node01.abcdefabcdef0123.example.com), a host:port or a URL's host - and only in a text that speaks of tokens
# (_BOOTSTRAP_CONTEXT, or under a key that does): the same shape is a valid Node name of two labels
# (node01.abcdefabcdef0123), which a report, a result's key and every message name
_BOOTSTRAP = re.compile(r"""(?<![\w.\-@/])(?P<head>[a-z0-9]{6}\.)(?P<val>[a-z0-9]{16})(?![\w.\-@/]|:\d)""")
# what makes a bootstrap-token-shaped word a token: the text (or its key) says token, join, bootstrap or kubeadm -
# 'kubeadm join ... --token X', 'token: X' (kubeadm's config, the bootstrap kubeconfig), 'kubeadm token list''s TOKEN
# column, the bootstrap-token Secret, 'tls-bootstrap-token', KUBEADM_TOKEN=X
_BOOTSTRAP_CONTEXT = re.compile(r"token|join|bootstrap|kubeadm", re.IGNORECASE)
# an AWS access key id (its documented prefixes: AKIA long-term, ASIA temporary) followed by its 40-character secret
# access key (the pair as the console's CSV or a shell's echo shows it): the id kept, the secret hidden
_AWS_PAIR = re.compile(r"""(?P<head>(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}["']?[ \t]*[,:;=|\t ][ \t]*["']?)"""
                       r"""(?P<val>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])""")
# 'API key' as two words ('invalid API key: X', 'API Key = X'); api_key, apikey and api-key are secret names
_API_KEY_WORDS = re.compile(r"""(?P<head>(?<![\w-])api[ \t]+key[ \t]*(?:=>|:=|[:=])[ \t]*["']?)(?P<val>[^\s"'<,;>=][^\s"'<,;]*)""",
                            re.IGNORECASE)
# a Slack incoming webhook's URL: its path is the credential (api.slack.com/messaging/webhooks)
_SLACK_HOOK = re.compile(r"(?P<head>\bhooks\.slack\.com/(?:services|workflows|triggers)/)(?P<val>[A-Za-z0-9/_\-]+)")
# a PEM private key of any kind (RSA, EC, ENCRYPTED, OPENSSH, PGP ... BLOCK); one cut short (a clipped journal or
# file) loses everything after its BEGIN line
_PEM_KEY = re.compile(r"(?P<head>-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*)-----)(?P<val>.*?)"
                      r"(?P<tail>-----END (?P=kind)-----|\Z)", re.DOTALL)

# an argv as Python or JSON prints a list (CalledProcessError's "Command '[...]' returned ..."): its items read as an
# argv is (_items), each in its own quotes
_QUOTED_ITEM = r"""(?:'[^'\n]*'|"(?:[^"\\\n]|\\.)*")"""
_ARGV_TEXT = re.compile(r"\[[ \t]*" + _QUOTED_ITEM + r"(?:[ \t]*,[ \t]*" + _QUOTED_ITEM + r")+[ \t]*\]")
# user:password@host without a scheme (HTTPS_PROXY=u:p@proxy:3128, Go's MySQL DSN root:p@tcp(db:3306)/x): the user
# kept; never an image's tag and digest (nginx:1.25@sha256:...), never inside a word or after a ':' or '@'
_USERINFO_BARE = re.compile(r"""(?<![\w.~%!$&'()*+,;=:@\-])(?P<head>[A-Za-z0-9_~%][A-Za-z0-9._~%!$&*+,;=\-]{0,63}:)"""
                            r"""(?P<val>[^\s:@/"'<>]+)@(?!sha\d+:)(?=[A-Za-z0-9\[]|tcp\(|unix\()""")
# Kubernetes' name/value pairs (a container's env, an exec credential's env) whose name is a secret's: the value
_ENV_PAIR_YAML = re.compile(r"""(?m)^(?P<head>[ \t]*(?:-[ \t]+)?name:[ \t]*(?P<q>["']?)(?P<name>[A-Za-z_]\w*)(?P=q)"""
                            r"""[ \t]*\n[ \t]*value:[ \t]*)(?P<val>[^\s#][^\n]*)$""")
_ENV_PAIR_JSON = re.compile(r"""(?P<head>\{[ \t]*"name"[ \t]*:[ \t]*"(?P<name>[A-Za-z_]\w*)"[ \t]*,[ \t]*"value"[ \t]*:"""
                            r"""[ \t]*)(?P<val>"(?:[^"\\\n]|\\.)*")""")
# the same pairs in flow style ({name: API_TOKEN, value: x}, either order, quoted or not): pre, val, post
_FLOW_VAL = r"""(?P<val>"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,{}"'][^,{}\n]*?)"""
_FLOW_NAME = r"""(?P<nq>["']?)name(?P=nq)[ \t]*:[ \t]*(?P<q>["']?)(?P<name>[A-Za-z_]\w*)(?P=q)"""
_ENV_PAIR_FLOW = (
    re.compile(r"""(?P<pre>\{[ \t]*""" + _FLOW_NAME + r"""[ \t]*,[ \t]*(?P<vq>["']?)value(?P=vq)[ \t]*:[ \t]*)"""
               + _FLOW_VAL + r"""(?P<post>[ \t]*[,}])"""),
    re.compile(r"""(?P<pre>\{[ \t]*(?P<vq>["']?)value(?P=vq)[ \t]*:[ \t]*)""" + _FLOW_VAL
               + r"""(?P<post>[ \t]*,[ \t]*""" + _FLOW_NAME + r"""[ \t]*[,}])"""))
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# an XML element whose name is a secret's (<password>X</password>)
_XML_ELEMENT = re.compile(r"<(?P<tag>[A-Za-z_][\w.\-]*)(?P<attrs>[^<>]*)>(?P<val>[^<]+)</(?P=tag)>")
# HTTP Digest authentication (RFC 7616 3.4): its response is the credential (the user name and realm are shown)
_DIGEST = re.compile(r"""(?i)(?P<head>\bDigest[ \t]+(?:[A-Za-z][\w\-]*=(?:"[^"\n]*"|[^\s,"]*)[ \t]*,[ \t]*)*?"""
                     r"""response=)(?P<val>\\"(?:[^"\\\n]|\\[^"\n])*\\"|"[^"\n]*"|[^\s,"\\]+)""")

# what a value needs to hold a secret of its own that the whole text's reading has not seen: a key = value, a flag
_NESTED = re.compile(r"[=:]|(?:^|\s)-")
# (a value under a secret's name that only switches something on or off - kubelet's
# --authentication-token-webhook=true - is shown, so that a flag's diff stays readable: secret_yaml.SWITCH_WORDS)
# how deep a value is read again for secrets of its own (Environment="EXTRA=--token=x" is two): deeper is hidden whole,
# so that 'a:a:a:...' costs a few readings of the text, never one per character (nor Python's recursion limit); only
# its key = value and flag shapes are read again (every other shape was read in the whole text already)
_NEST = [0]
_NEST_MAX = 2


def _user_password_hidden(value):
    """``name:password`` with the password replaced (the name kept); anything else as it is."""
    name, colon, password = value.partition(":")
    return name + ":" + MARK if colon and password and not password.startswith(MARK[:9]) else value


def _user_flag(name):
    return re.sub(r"[-.]", "_", str(name).lstrip("-")).lower() in _USER_FLAGS


def _quoted(value):
    """The mark in the value's own quotes (a TOML/JSON/YAML file stays well-formed): an array's strings each."""
    for quote in ('"""', "'''", '\\"'):
        if len(value) >= 2 * len(quote) and value.startswith(quote) and value.endswith(quote):
            return quote + MARK + quote
    if value.startswith("[") and value.endswith("]"):
        inner = re.sub(r""""(?:[^"\\]|\\.)*"|'[^']*'""", lambda m: m.group(0)[0] + MARK + m.group(0)[0], value[1:-1])
        return "[" + (inner if MARK in inner else re.sub(r"[^\s,]+", MARK, inner)) + "]"
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MARK + value[0]
    return MARK


def _key_value(match):
    val = match.group("val")
    head = match.group(0)[:match.start("val") - match.start(0)]
    key = match.group("key")
    if (_user_flag(key) and (key.startswith("-") or match.string[:match.start()].endswith("-"))) \
            or key.lower() in _USER_ENV:
        opening, inside, closing = _unquoted(val)
        hidden = _user_password_hidden(inside)
        return head + opening + hidden + closing if hidden != inside else match.group(0)
    if not secret_name(key):
        # the value may hold secrets of its own: Environment="API_TOKEN=x", EXTRA_ARGS=--token=x (only a key = value
        # or a flag in it is new: every other shape was read in the whole text already)
        opening, inside, closing = _unquoted(val)
        if not _NESTED.search(inside) or ("=" not in inside and not re.search(r"(?:^|\s)-", inside) and not any(
                secret_name(part) for part in re.findall(r"(?<![\w.\-])([A-Za-z_][\w.\-]*)(?:\\?[\"'])?[ \t]*:", inside))):
            return match.group(0)   # system:serviceaccount:ns:name, image:tag - no key of a secret in it
        if _NEST[0] >= _NEST_MAX:
            return head + opening + MARK + closing  # 'a:b:c:...' nested deeper than any real text: fails closed
        _NEST[0] += 1
        try:
            return head + opening + _FLAG_SPACE.sub(_key_value, _KEY_VALUE.sub(_key_value, inside)) + closing
        finally:
            _NEST[0] -= 1
    if val in ('""', "''", "[]") or val == MARK or (MARK in val and not val.startswith("[")) or \
            secret_kept.kept_in_text(match):
        return match.group(0)   # (kubelet's volume "creds" : secret "x" not found; sshKey: ssh-rsa AAAA.. u@h)
    if (_unquoted(val)[1].lower() in _SWITCH_WORDS or secret_shapes.key_path(key, _unquoted(val)[1])
            or secret_shapes.not_a_secret(key, _unquoted(val)[1])):
        return match.group(0)  # a switch, never a secret: --authentication-token-webhook=true, use_token: false
    if ":" in match.group("sep") and secret_yaml.YAML_BLOCK.match(val):
        return match.group(0)  # a YAML block scalar's header: its lines are hidden by secret_yaml.values
    return head + _quoted(val)


def _short_flag(match):
    """A command line of a tool with a short password flag: its first one hidden (attached or the next word)."""
    cmd, args = match.group("cmd"), match.group("args")
    flag = _SHORT_FLAG.get(cmd)
    if flag is None:
        if not re.search(r"(?<![\w-])login(?![\w-])", args):
            return match.group(0)
        flag = "p"
    args = re.sub(r"""(?<![\w-])(-%s)(?:(?P<att><redacted by nodefix\.k8s>|[^\s"'<-]\S*|["'][^"'\n]*["'](?!\S))"""
                  r"""|(?P<sp>[ \t]+)(?P<val><redacted by nodefix\.k8s>|"[^"\n]*"|'[^'\n]*'|[^\s"'<-]\S*))""" % flag,
                  lambda m: m.group(0) if MARK in m.group(0) else m.group(1) + (m.group("sp") or "") + MARK,
                  args, count=1)
    return match.group(0)[:match.start("args") - match.start(0)] + args


def _argv_text(match):
    """An argv printed as a list: its items hidden as ``_items`` hides them, the list's text kept."""
    items = [m.group(0) for m in re.finditer(_QUOTED_ITEM, match.group(0))]
    hidden = iter(_items([i[1:-1] for i in items], 0))
    return re.sub(_QUOTED_ITEM, lambda m: m.group(0)[0] + next(hidden) + m.group(0)[0], match.group(0))


def _pair_kept(name, val):
    """Whether the value ``val`` of a name/value pair or an XML element named ``name`` is shown: the name is not a
    secret's, or the value is empty, hidden already, a switch or a key's path."""
    inside = _unquoted(val.strip())[1]
    return (not secret_name(name) or not inside or MARK in val or inside.lower() in _SWITCH_WORDS
            or secret_shapes.key_path(name, inside))


def _named_value(match):
    """A name/value pair, an XML element: the value hidden when the name is a secret's (a switch and a path kept)."""
    name = match.group("name") if "name" in match.groupdict() else match.group("tag")
    val = match.group("val")
    if _pair_kept(name, val):
        return match.group(0)
    if "tag" in match.groupdict():
        return "<%s%s>%s</%s>" % (name, match.group("attrs"), MARK, name)
    return match.group("head") + _quoted(val.strip())


def _flow_pair(match):
    """A name/value pair in flow style: the value hidden when the name is a secret's, as _named_value decides."""
    if _pair_kept(match.group("name"), match.group("val")):
        return match.group(0)
    return match.group("pre") + _quoted(match.group("val").strip()) + match.group("post")


def _more_shapes(text):
    """The shapes read before the key = value ones: an argv printed as a list, name/value pairs, XML elements,
    Digest's response, user:password@host without a scheme."""
    if "[" in text:
        text = _ARGV_TEXT.sub(_argv_text, text)
    if "name" in text:
        text = _ENV_PAIR_JSON.sub(_named_value, _ENV_PAIR_YAML.sub(_named_value, text))
        if "{" in text:
            for flow in _ENV_PAIR_FLOW:
                text = flow.sub(_flow_pair, text)
    if "</" in text:
        text = _XML_ELEMENT.sub(_named_value, text)
    text = secret_shapes.auth_params(text, MARK)
    text = _DIGEST.sub(lambda m: m.group(0) if MARK in m.group("val") else m.group("head") + _quoted(m.group("val")),
                       text)
    return _USERINFO_BARE.sub(lambda m: m.group("head") + MARK + "@", text) if "@" in text else text


def url_userinfo(url):
    """The user information this redactor reads in ``url`` (a URL alone: ``user:password``, a token, a plain user
    name), "" when it reads none - what _core/mirror_auth.split_userinfo holds against Go's reading."""
    for shape in (_URL_USERINFO, _URL_TOKEN_USER, _URL_PLAIN_USER):
        match = shape.match(url or "")
        if match:
            return match.group(0)[match.group(0).index("://") + 3:-1]
    return ""


def redact_text(text, token_context=False):
    """``text`` with every secret the module docstring names replaced by MARK (None stays None); ``token_context``:
    a bootstrap-token-shaped word is a token even where the text does not say so (its key does)."""
    if not isinstance(text, str) or not text or secret_shapes.benign(text):
        return text     # a node's name, an address, a label: no rule can match it (secret_shapes.benign)
    return _slow(text, token_context)


def _slow(text, token_context):
    token_context = token_context or _BOOTSTRAP_CONTEXT.search(text) is not None
    text = _PEM_KEY.sub(lambda m: m.group("head") + "\n" + MARK + ("\n" + m.group("tail") if m.group("tail") else ""),
                        text)
    text = _URL_USERINFO.sub(lambda m: secret_shapes.url_user_shown(m.group("head")) + MARK + "@", text)
    text = _URL_TOKEN_USER.sub(lambda m: secret_shapes.url_user_shown(m.group("head"), m.group("val")) + MARK + "@", text)
    text = _more_shapes(text)
    if len(text) >= 7:  # no shape of _core.secret_shapes is shorter ('sig%3Dx')
        text = secret_shapes.percent_encoded(secret_shapes.prefixed(text, MARK), MARK)
    for shape in (_AWS_PAIR, _API_KEY_WORDS, _SLACK_HOOK):
        text = shape.sub(lambda m: m.group(0) if m.group("val").startswith(MARK[:9]) else m.group("head") + MARK, text)
    text = _BEARER.sub(lambda m: m.group(0) if m.group("val").startswith("<") or _WORD.match(m.group("val"))
                       else m.group("head") + MARK, text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTH_ARRAY.sub(lambda m: m.group("head") + _QUOTED_STRING.sub(
            lambda q: q.group(0) if MARK in q.group(0) else q.group(0)[0] + MARK + q.group(0)[0], m.group("body")) + "]",
            text)
    text = _AUTH_HEADER.sub(lambda m: m.group(0) if m.group("val").startswith("<") else m.group("head") + MARK, text)
    text = secret_shapes.quoted_values(secret_shapes.env_values(secret_yaml.values(text, MARK), MARK), MARK)
    text = _NETRC_LINE.sub(lambda line: _NETRC.sub(
        lambda m: m.group(0) if m.group("val").startswith(MARK[:9]) else m.group("head") + MARK, line.group(0)), text)
    text = _COMMAND.sub(_short_flag, text)
    text = _OPENSSL_PASS.sub(lambda m: m.group("head") + MARK, text)
    text = _ATTACHED_USER.sub(lambda m: m.group(0) if m.group("val").startswith(MARK[:9]) else m.group("head") + MARK,
                              text)
    text = _QUERY_KEY.sub(lambda m: m.group("head") + MARK, text)
    text = _KEY_VALUE.sub(_key_value, text)
    text = _FLAG_SPACE.sub(_key_value, text)
    if token_context:
        text = _BOOTSTRAP.sub(lambda m: m.group("head") + MARK, text)
    return secret_shapes.prose(text, MARK) if len(text) >= 7 else text


def _secret_value(value):
    """A value under a secret's name replaced whole: a non-empty string, a number, a list of them at any depth, empty
    items and nulls beside them (``["x", None]``, ``[["x"]]``); a mapping is walked: its own keys say what in it is
    secret."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (str, int, float)):
        return value != ""
    if not isinstance(value, (list, tuple)) or not value:
        return False
    return all(_blank(v) or _secret_value(v) for v in value) and any(_secret_value(v) for v in value)


def _blank(value):
    """None, an empty string, or a list of nothing else."""
    return value is None or value == "" or (isinstance(value, (list, tuple)) and all(_blank(v) for v in value))


# keys that hold a credential whole whatever its scheme (RFC 9110 11.6.2, 11.7.2), and their X- variants
_AUTH_KEY = re.compile(r"^(?:[a-z0-9]+[-_])*authorization(?:[-_]header)?$", re.IGNORECASE)


def _hidden_after(flag, short=None):
    """How the argv item after ``flag`` is shown: None when it is not a secret's flag (``short``: the command's
    short password flag, ``-p`` of mysql)."""
    if not isinstance(flag, str) or not re.match(r"^--?[A-Za-z][A-Za-z0-9_\-]*$", flag):
        return None
    if _user_flag(flag) or flag == "-U":
        return lambda v: v.split(":", 1)[0] + ":" + MARK if ":" in v and MARK not in v else v
    if flag in ("-passin", "-passout", "-pass"):
        return lambda v: "pass:" + MARK if v.startswith("pass:") and MARK not in v else v
    if (flag.startswith("--") and secret_name(flag)) or (short is not None and flag == "-" + short):
        return lambda v: (v if not v or MARK in v or v.lower() in _SWITCH_WORDS or secret_shapes.key_path(flag, v)
                          or secret_shapes.not_a_secret(flag, v) else MARK)
    return None


def _next_flag(item):
    """Whether an argv item after a secret's flag is the next flag rather than its value (see _FLAG_SPACE)."""
    return item.startswith("--") or re.match(r"^-[A-Za-z](?:=.*|\d*)$", item, re.DOTALL) is not None


def _argv_short(items):
    """The short password flag of the command an argv runs (``["mysql", "-pX"]``), or None."""
    if not items or not isinstance(items[0], str):
        return None
    cmd = items[0].rsplit("/", 1)[-1]
    if cmd in _LOGIN_COMMANDS and "login" in items:
        return "p"
    return _SHORT_FLAG.get(cmd)


def _items(items, depth, token_context=False):
    """A list's items redacted one by one, and an argv's secret after its flag (``["--password", "x"]``,
    ``["--user", "root:x"]``, ``["mysql", "-p", "x"]``, ``["mysql", "-px"]``): the flag and the user name kept. A
    value may start with one dash, never two (the next flag)."""
    out, hide, short = [], None, _argv_short(items)
    for item in items:
        if hide is not None and isinstance(item, str) and not _next_flag(item):
            out.append(hide(item))
            hide = None
            continue
        hide = _hidden_after(item, short)
        if short is not None and isinstance(item, str) and item.startswith("-" + short) and len(item) > 2:
            out.append(item[:2] + (item[2:] if MARK in item else MARK))
            short = None
            continue
        if hide is not None and short is not None and item == "-" + short:
            short = None
        out.append(redact(item, depth + 1, token_context))
    return out


def unique_key(out, key):
    """``key`` as it goes into the mapping ``out``: a key that reads the same as one already there once redacted (two
    nodes whose names differ only in a secret) is numbered - ``name (2)`` - never one of them silently dropped."""
    if key not in out:
        return key
    n = 2
    while "%s (%d)" % (key, n) in out:
        n += 1
    return "%s (%d)" % (key, n)


def redact_key(key, token_context=False):
    """A mapping's key redacted as its text is: a node's name, a label value, a path can carry a secret as any
    string can (a tuple's strings each; any other key as it is)."""
    if isinstance(key, str):
        return redact_text(key, token_context)
    if isinstance(key, tuple):
        return tuple(redact_key(k, token_context) for k in key)
    return key


def redact(value, depth=0, token_context=False):
    """``value`` (a module result: dicts, lists, strings) with every string (and every key) redacted, the value
    of every dict key that names a secret (``{"password": "x"}``) replaced whole, and an argv's secret after
    its flag. Deeper than 64 levels everything is MARK (fails closed). ``token_context``: under a key that speaks
    of tokens (``join_command``), a bootstrap-token-shaped word is a token."""
    if isinstance(value, str):
        return redact_text(value, token_context)
    if depth > 64:
        return MARK if value is not None and not isinstance(value, (bool, int, float)) else value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            # a key that speaks of tokens (join_command, bootstrap) makes a token-shaped word under it a token
            under = token_context or (isinstance(k, str) and _BOOTSTRAP_CONTEXT.search(k) is not None)
            hidden = (isinstance(k, str) and (secret_name(k) or _AUTH_KEY.match(k) is not None) and _secret_value(v)
                      and not secret_shapes.key_path(k, v) and not secret_shapes.not_a_secret(k, v))
            if not hidden and isinstance(k, str) and k.lower() in _USER_ENV and isinstance(v, str):
                v = _user_password_hidden(v)        # {"ETCDCTL_USER": "root:x"}: the user kept
            out[unique_key(out, redact_key(k, token_context))] = MARK if hidden else redact(v, depth + 1, under)
        # a Kubernetes name/value pair ({"name": "DB_PASSWORD", "value": "x"}: a container's env) whose name is a
        # secret's: its value hidden (an environment variable's name: a node's DNS name, token-ring-2, is data)
        if (isinstance(out.get("name"), str) and _ENV_NAME.match(out["name"]) and secret_name(out["name"])
                and _secret_value(out.get("value"))):
            out["value"] = MARK
        return out
    if isinstance(value, (list, tuple)):
        return _items(value, depth, token_context)
    return value
