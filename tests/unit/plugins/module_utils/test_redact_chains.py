# SPDX-License-Identifier: GPL-3.0-or-later
"""_core.redact after the hostile review of issue 61 at ec97926: chained and mid-line ``key: value`` (a bare value
never ends in ':' nor takes in the next key), URL user information with a raw '/', '#', '?' or quote in the
password (the redactor, _core/mirror_auth.split_userinfo and the Prometheus client's safe_url), AWS key pairs,
'API key: X', Slack webhooks; and the other direction - paths under *_key names, a user name alone in a URL,
the text after a connection string's password, a flow mapping's '{', host names that look like a bootstrap
token. Every row: the secret gone, the kept text still there, redacting again changes nothing."""

import time

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import mirror_auth
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact, redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client

HIDDEN = [
    # 1. chained and mid-line key: value
    ("stderr: token: TokMid1 x", ["TokMid1"], ["stderr: token: ", " x"]),
    ("failed: Password: PwMid2", ["PwMid2"], ["failed: Password: "]),
    ("x: y: secret: ChainS3", ["ChainS3"], ["x: y: secret: "]),
    ("a: b: c: password: ChainPw4 done", ["ChainPw4"], ["a: b: c: password: ", " done"]),
    ("etcd said error: dial tcp 10.0.0.1:2379: token: MidTok5", ["MidTok5"], ["10.0.0.1:2379", "token: "]),
    ("msg=login failed, api_key: MidKey6 (retry)", ["MidKey6"], ["msg=login failed", "(retry)"]),
    # 2. URL user information with a raw '/', '#', '?' or quote in the password
    ("GET https://robot:Sl/ash-Pw61@127.0.0.1:19391/api/v1/query", ["Sl/ash-Pw61", "ash-Pw61"],
     ["https://robot:", "@127.0.0.1:19391/api/v1/query"]),
    ("https://robot:Hash#Pw61@h.example.com/x", ["Hash#Pw61", "Pw61"], ["@h.example.com/x"]),
    ("https://robot:Q?uery-Pw61@h.example.com", ["Q?uery-Pw61", "uery-Pw61"], ["@h.example.com"]),
    ("url: https://user:Pw'Quote12@h.example.com/x", ["Pw'Quote12", "Quote12"], ["@h.example.com/x"]),
    ("http://u:Pr0xy@Tail@proxy.example.com:3128", ["Pr0xy", "Tail"], ["@proxy.example.com:3128"]),
    ("https://u:Ipv6-Pw61@[::1]:9090/", ["Ipv6-Pw61"], ["@[::1]:9090/"]),
    # 5. shapes
    ("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
     ["AKIAIOSFODNN7EXAMPLE"]),
    ("AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["bPxRfiCYEXAMPLEKEY"], ["AKIAIOSFODNN7EXAMPLE,"]),
    ("invalid API key: ApiWords-61 for tenant a", ["ApiWords-61"], ["invalid API key: ", "for tenant a"]),
    ("apikey=ApiOne-61 api-key: ApiDash-61", ["ApiOne-61", "ApiDash-61"], ["apikey=", "api-key: "]),
    ("POST https://hooks.slack.com/services/T0000/B0000/SlackHook61x", ["SlackHook61x", "T0000/B0000"],
     ["https://hooks.slack.com/services/"]),
    # 6. the secret still hidden next to what is now kept
    ("Password=ConnPw61;User ID=sa;Initial Catalog=db", ["ConnPw61"], [";User ID=sa;Initial Catalog=db"]),
    ("auth: { username: u, password: FlowPw61 }", ["FlowPw61"], ["auth: { username: u, password: ", " }"]),
    ("kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef", ["0123456789abcdef"], ["--token "]),
    ("bootstrap abcdef.0123456789abcdef used", ["0123456789abcdef"], ["abcdef.", " used"]),
    ("private_key: /Ab3+base64", ["/Ab3+base64"], ["private_key: "]),
]

KEPT = [
    "ssh_host_key: /etc/ssh/ssh_host_rsa_key",
    'signing_key = "/etc/kubernetes/pki/sa.key"',
    "--service-account-signing-key /etc/kubernetes/pki/sa.key",
    "git clone ssh://git@git.example.com/o/r.git",
    "https://deploy@mirror.example.com/x",
    "node01.abcdefabcdef0123.example.internal Ready",
    "https://node01.abcdefabcdef0123:10250/healthz",
    "docker://registry.example.com:5000/img@sha256:0123abcd",
    "stderr: dial tcp 10.0.0.1:2379: connection refused",
    "time: 12:30:01 level: info",
]


@pytest.mark.parametrize("text, secrets, kept", HIDDEN)
def test_hidden(text, secrets, kept):
    out = redact_text(text)
    assert MARK in out, out
    for secret in secrets:
        assert secret not in out, out
    for part in kept:
        assert part in out, out
    assert redact_text(out) == out


@pytest.mark.parametrize("text", KEPT)
def test_kept(text):
    assert redact_text(text) == text


def test_a_key_path_stays_in_a_result_and_an_argv():
    result = redact({"signing_key": "/etc/kubernetes/pki/sa.key", "password": "/etc/x/not-a-path-here",
                     "argv": ["kube-apiserver", "--service-account-key-file", "/etc/k/sa.pub",
                              "--service-account-signing-key", "/etc/k/sa.key", "--token", "ArgvTok61"]})
    assert result["signing_key"] == "/etc/kubernetes/pki/sa.key" and result["password"] == MARK
    assert result["argv"][4] == "/etc/k/sa.key" and result["argv"][6] == MARK


@pytest.mark.parametrize("url", ["https://robot:Sl/ash-Pw61@127.0.0.1:19391", "https://robot:Hash#Pw61@h",
                                 "https://robot:Q?uery-Pw61@h"])
def test_a_url_whose_password_holds_a_raw_delimiter_is_refused_without_echoing_it(url):
    """Go's url.Parse reads the authority to the first '/', '?' or '#': 'robot:Sl' is then a host with a port
    that is not a number. Refused, naming the option, quoting nothing of the URL."""
    with pytest.raises(NodefixError) as exc:
        mirror_auth.split_userinfo(url, "base_url")
    assert "base_url" in exc.value.msg and "Pw61" not in exc.value.msg and "robot" not in exc.value.msg
    assert "Pw61" not in prometheus_client.safe_url(url)
    with pytest.raises(NodefixError) as exc:
        prometheus_client.Client(lambda *a, **k: None, url)
    assert "prometheus_url" in exc.value.msg and "Pw61" not in exc.value.msg


def test_a_valid_url_splits_at_the_last_at_sign_and_keeps_its_path():
    assert mirror_auth.split_userinfo("https://user:Pw'Quote12@h.example.com/a@b?x=1") == (
        "https://h.example.com/a@b?x=1", "user", "Pw'Quote12")
    assert mirror_auth.split_userinfo("http://u:Pr0xy@Tail@proxy:3128/") == ("http://proxy:3128/", "u", "Pr0xy@Tail")
    assert mirror_auth.split_userinfo("https://h.example.com/p@x") == ("https://h.example.com/p@x", None, None)
    assert prometheus_client.safe_url("https://u:p%2Fw@h.example.com:9090/prom?x=1") == "https://h.example.com:9090/prom"


@pytest.mark.parametrize("word", ["a" * (1 << 20), "a:" * (1 << 19), "https://u:" + "a@" * (1 << 19),
                                  "Password=x" + ";a b" * (1 << 18)])
def test_a_one_mib_word_is_read_in_one_go(word):
    """Measured, not asserted (no test asserts a duration): the seconds are printed for the record. What is
    asserted is that it finishes without Python's recursion limit (the nested reading is bounded)."""
    start = time.time()
    out = redact_text(word)
    print("1 MiB %r...: %.2f s" % (word[:12], time.time() - start))
    assert isinstance(out, str)
