# SPDX-License-Identifier: GPL-3.0-or-later
"""The redactor's fast path (``_core.secret_shapes.benign``): a string it lets through unread must be one the whole
redactor (``_core.redact._slow``) returns as it is. Held on every text of every redaction table of the tests, on
every piece of them the fast path could take (their words, and the runs of its alphabet between other characters,
where node names, addresses and labels live), with and without a token context; and on generated names that carry
each shape the fast path must send on (a catalogued token, a bootstrap token, a Slack webhook, mysql/-pX, a secret
word before a '+': prose form-encoded)."""

import random
import re

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact, secret_shapes
from plugins.module_utils import (test_redact_chains, test_redact_classes, test_redact_prose, test_redact_shapes,
                                  test_redact_urls)


def _table_texts():
    texts = []
    for module in (test_redact_chains, test_redact_prose, test_redact_shapes):
        texts += [row[0] for row in module.HIDDEN] + list(module.KEPT)
    for rows in test_redact_classes.HIDDEN.values():
        texts += [row[0] for row in rows]
    for rows in test_redact_classes.KEPT.values():
        texts += list(rows)
    texts += list(test_redact_prose.CATALOGUE)
    texts += ["https://%s:%s@%s/x" % (u, p, h) for u in test_redact_urls.USERS for p in test_redact_urls.PASSWORDS
              if p for h in test_redact_urls.HOSTS]
    return texts


def _pieces(text):
    """The text, its words, the runs of the fast path's alphabet in it, and each of those as a host with a port."""
    runs = re.findall(r"[A-Za-z0-9._/+~\-]+", text)
    return set([text] + text.split() + runs + [r + ":9100" for r in runs] + [r + ":1" for r in runs])


PIECES = sorted(set(p for t in _table_texts() for p in _pieces(t)))


def test_the_tables_give_the_fast_path_work_on_both_sides():
    benign = [p for p in PIECES if secret_shapes.benign(p)]
    # most of the pieces are taken by the fast path, and some of them would be redacted if it let them through
    assert len(benign) > 500 and len(PIECES) - len(benign) > 500, (len(benign), len(PIECES))
    assert any(redact._slow(p, True) != p for p in PIECES if re.match(r"[A-Za-z0-9._/+~\-]+\Z", p))


@pytest.mark.parametrize("token_context", [False, True])
def test_what_the_fast_path_lets_through_the_whole_redactor_keeps(token_context):
    through = [p for p in PIECES if secret_shapes.benign(p)]
    changed = [p for p in through if redact._slow(p, token_context) != p]
    assert not changed, changed


# one piece of the fast path's alphabet that every rule it has to send on holds (the rules that need a blank, ':',
# '=', '@', '%', '[', '<' or '\\' are sent on by the alphabet itself)
SHAPES = ["ghp_FakeGithub0123456789abcdefghijklmnopq", "glpat-FakeGitlab0123456789ab", "AIzaFakeGoogle0123456789abcdefghijklmno",
          "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.Cat-Jwt-Sig", "hvs.CAESIFakeVaultService0123456789abcdef",
          "abcdef.0123456789abcdef", "hooks.slack.com/services/T000/B000/XXXXXXXX", "mysql/-pMysqlSlash1",
          "sshpass+-pSshPlus1", "docker/login/-pDockerSlash1", "npm_FakeNpm0123456789abcdefghijklmnopqrs",
          # prose form-encoded ('+' is its blank: q=password+is+X): a secret word before a '+' (fourth review)
          "password+is+Hunter2x", "token+Tok9xyzABC", "the+api+key+is+Key9xyzAB", "PWD+is+Pwd9xyzAB"]


# host:port pieces that a rule reading ':' would redact, each sent on
COLON_SHAPES = ["password:1234", "token:9100", "db-password-2:12345", "api-key:8080", "secret:443", "pwd:1",
                "etcdctl_user:1", "-u:1234", "login:2", "mysql:3306", "abcdef.0123456789abcdef:9100",
                "pw:1234", "db-pw:1", "db_pswd:22", "code_verifier:1"]


def test_every_shape_the_alphabet_lets_in_is_sent_on():
    rng = random.Random(61)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/+~-"
    for shape in SHAPES:
        for _i in range(40):
            pre = "".join(rng.choice(alphabet) for _j in range(rng.randint(0, 12)))
            post = "".join(rng.choice(alphabet) for _j in range(rng.randint(0, 12)))
            for text in (shape, pre + shape, shape + post, pre + "/" + shape + "/" + post):
                if redact._slow(text, True) != text:
                    assert not secret_shapes.benign(text), text
    # and each of them alone is redacted (the fast path is not what keeps them)
    assert all(redact.redact_text(s, True) != s for s in SHAPES)
    for text in COLON_SHAPES:
        assert redact._slow(text, True) == text or not secret_shapes.benign(text), text
    assert sum(redact._slow(t, True) != t for t in COLON_SHAPES) >= 9


@pytest.mark.parametrize("text", ["worker-0001", "ip-10-0-3-17.ec2.internal", "10.0.3.17", "us-east-1a",
                                  "node-role.kubernetes.io/control-plane", "amd64", "v1.28.3", "vault-token-0",
                                  "node-00001:9100", "10.0.3.17:10250"])
def test_a_node_name_an_address_a_label_take_the_fast_path(text):
    assert secret_shapes.benign(text)
    assert redact.redact_text(text) == text


def test_the_names_prefilter_refuses_no_secret_name(monkeypatch):
    """secret_names' one search before its rules (``_ANY``): every name of the tables (every word of their texts,
    split where a key ends) reads the same with the search and with a stand-in that lets every name through."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_names
    names = set()
    for text in _table_texts():
        names.update(w for w in re.split(r"""[\s=:"'{}\[\],;@/?&<>()]+""", text) if w)
    names.update(["client_certificate_data", "client-key-data", "X-JFrog-Art-Api", "privateKey", "DB_PASS", "sig",
                  "X-Amz-Signature", "cookie", "authkey", "creds", "pwd", "apikey"])
    with_filter = dict((n, secret_names.secret_name(n)) for n in names)

    class _Every(object):
        @staticmethod
        def search(_name):
            return True
    monkeypatch.setattr(secret_names, "_ANY", _Every())
    assert dict((n, secret_names.secret_name(n)) for n in names) == with_filter
    assert sum(with_filter.values()) > 50
