# SPDX-License-Identifier: GPL-3.0-or-later
"""_core.redact: every secret pattern replaced (key kept), and the decided false positives kept."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact, secret_names
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact_text

CONTAINERD = """version = 2
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
  username = "robot"
  password = "S3cr3t-registry-password"
  auth = "cm9ib3Q6UzNjcjN0"
  identitytoken = "id-token-value"
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".tls]
  key_file = "/etc/certs/client.key"
"""

HOSTS_TOML = """server = "https://registry.example.com"
[host."https://mirror.example.com"]
  capabilities = ["pull"]
  [host."https://mirror.example.com".header]
    Authorization = "Bearer bearer-token-value-1"
    registrytoken = 'registry-token-value'
"""

KUBECONFIG = """apiVersion: v1
kind: Config
users:
- name: kubelet
  user:
    token: kubeconfig-token-value
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCg==
    client-key: /var/lib/kubelet/pki/kubelet-client.key
    tokenFile: /var/run/secrets/token
"""

ENV = """KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5 --token=flag-token-value
HTTPS_PROXY=http://proxyuser:proxy-password-1@proxy.example.com:3128
NO_PROXY=10.0.0.0/8
REGISTRY_PASSWORD=env-password-value
AWS_SECRET_ACCESS_KEY=aws-secret-value
CLUSTER_API_KEY=api-key-value
JOIN_TOKEN_SECRET=""
"""

UNIT = """[Service]
Environment="HTTP_PROXY=http://u:unit-proxy-password@proxy:3128" "BOOTSTRAP_TOKEN=unit-token-value"
ExecStart=/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --password-file /etc/pw
"""

SECRETS = ["S3cr3t-registry-password", "cm9ib3Q6UzNjcjN0", "id-token-value", "bearer-token-value-1",
           "registry-token-value", "kubeconfig-token-value", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
           "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCg==", "flag-token-value", "proxy-password-1", "env-password-value",
           "aws-secret-value", "api-key-value", "unit-proxy-password", "unit-token-value"]


@pytest.mark.parametrize("text", [CONTAINERD, HOSTS_TOML, KUBECONFIG, ENV, UNIT],
                         ids=["containerd", "hosts.toml", "kubeconfig", "env", "unit"])
def test_every_planted_secret_is_gone_and_its_key_kept(text):
    out = redact_text(text)
    for secret in SECRETS:
        assert secret not in out
    assert out.count(MARK) == sum(1 for s in SECRETS if s in text)
    assert len(out.splitlines()) == len(text.splitlines())   # line for line: a diff stays readable


def test_the_keys_and_the_public_parts_are_kept():
    assert redact_text(CONTAINERD).splitlines()[3] == '  password = "%s"' % MARK    # the value's own quotes
    assert 'username = "robot"' in redact_text(CONTAINERD)
    assert "    registrytoken = '%s'" % MARK in redact_text(HOSTS_TOML)
    assert 'Authorization = "Bearer %s"' % MARK in redact_text(HOSTS_TOML)
    assert "    token: %s" % MARK in redact_text(KUBECONFIG)
    assert "HTTPS_PROXY=http://proxyuser:%s@proxy.example.com:3128" % MARK in redact_text(ENV)
    assert "--token=%s" % MARK in redact_text(ENV)
    assert redact_text("kubeadm join 10.0.0.1:6443 abcdef.0123456789abcdef") == \
        "kubeadm join 10.0.0.1:6443 abcdef.%s" % MARK            # the token's id is public, its secret not
    assert redact_text("curl -H 'Authorization: Bearer eyJhbGciOi.J9x'") == "curl -H 'Authorization: Bearer %s'" % MARK
    assert redact_text('{"password": "a b c", "user": "x"}') == '{"password": "%s", "user": "x"}' % MARK
    assert redact_text("kubelet --token tok-value --v=2") == "kubelet --token %s --v=2" % MARK


@pytest.mark.parametrize("text", [
    'password_file = "/etc/containerd/registry-password"',   # where a secret is, not the secret
    "tokenFile: /var/run/secrets/token",
    "--tls-private-key-file=/var/lib/kubelet/pki/kubelet.key",
    "--password-file /etc/pw",
    "client-key: /var/lib/kubelet/pki/kubelet-client.key",
    "authentication:\n  anonymous:\n    enabled: false",                 # not 'auth'
    "authorization:\n  mode: Webhook",
    'password = ""',                                                     # nothing to hide
    "NO_PROXY=10.0.0.0/8,.svc",
    "http://proxy.example.com:3128/path",                               # no user information
    "2026-11-27T10:00:01+0000 kubelet[812]: I1127 reconciler.go:357] time: 10:00:01",
    "kubelet.service loaded failed failed kubelet",
    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
    # a switch under a secret-like name (review of issue 61): kubelet's flag diffs stay readable
    "--authentication-token-webhook=true",
    "--authentication-token-webhook true",
    "use_token: false",
])
def test_decided_false_positives_are_kept(text):
    assert redact_text(text) == text


def test_a_switch_after_a_secret_flag_in_an_argv_is_kept_and_a_value_is_not():
    assert redact.redact(["kubelet", "--authentication-token-webhook", "true"]) == \
        ["kubelet", "--authentication-token-webhook", "true"]
    assert "Tok-61" not in str(redact.redact(["etcdctl", "--password", "Tok-61"]))


def test_the_result_of_a_module_redacted_whole():
    result = {"findings": [{"id": "kubelet.x", "evidence": {"cmdline": "kubelet --token=abc-tok", "password": "pw1",
                                                            "password_file": "/etc/pw", "count": 3}}],
              "checks": {"env": ["REGISTRY_PASSWORD=pw2"], "nested": ({"auth": "pw3"},)}, "secret": None}
    out = redact.redact(result)
    dumped = json.dumps(out)
    for secret in ("abc-tok", "pw1", "pw2", "pw3"):
        assert secret not in dumped
    assert out["findings"][0]["evidence"]["password"] == MARK and out["findings"][0]["evidence"]["count"] == 3
    assert out["findings"][0]["evidence"]["password_file"] == "/etc/pw" and out["secret"] is None
    assert redact.redact(None) is None and redact_text(None) is None and redact_text("") == ""


def test_redacting_twice_changes_nothing():
    once = redact_text(CONTAINERD + ENV + UNIT + KUBECONFIG + HOSTS_TOML)
    assert redact_text(once) == once


def test_a_pem_private_key_body_is_removed():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq83bQ==\n-----END RSA PRIVATE KEY-----\n"
    out = redact_text(pem)
    assert "MIIEowIBAAKCAQEA" not in out and out.startswith("-----BEGIN RSA PRIVATE KEY-----\n" + MARK)


# my_token_ttl: a ttl measures a token, it is none (review L1 of issue 61: --authentication-token-webhook-cache-ttl)
@pytest.mark.parametrize("name,secret", [("TOKEN", True), ("my_token_ttl", False), ("DB_PASSWORD", True),
                                         ("client_secret", True), ("SSH_KEY", True), ("auth", True),
                                         ("client-key-data", True), ("keyring", False), ("author", False),
                                         ("password_path", False), ("monkey", False), ("tokens_dir", False)])
def test_secret_names(name, secret):
    assert secret_names.secret_name(name) is secret


@pytest.mark.parametrize("text,secret", [
    ("privateKey: c2VjcmV0LWtleS1ib2R5", "c2VjcmV0LWtleS1ib2R5"),
    ("DB_PASS=hunter2hunter2", "hunter2hunter2"),
    ("credentials = \"AKIAEXAMPLEKEY/wJalrXUtnFEMI\"", "AKIAEXAMPLEKEY/wJalrXUtnFEMI"),
    ("x-api-key: 0123456789abcdef0123", "0123456789abcdef0123"),
    ("Cookie: session=0123456789abcdef", "0123456789abcdef"),
    ("git clone https://ghp_0123456789abcdefghijABCDEF@github.com/o/r", "ghp_0123456789abcdefghijABCDEF"),
])
def test_more_shapes_a_secret_takes(text, secret):
    """Shapes a hostile review found passing: camelCase *Key, *_PASS, credentials, API keys and cookies in
    headers, a token as a URL's user name."""
    out = redact.redact_text(text)
    assert secret not in out and redact.MARK in out, out


def test_a_secret_name_hides_numbers_and_lists_too():
    out = redact.redact({"password": 123456, "token": ["a1", "b2"], "auth": {"username": "u", "password": "p"},
                         "port": 6443})
    assert out == {"password": redact.MARK, "token": redact.MARK, "auth": {"username": "u", "password": redact.MARK},
                   "port": 6443}


# one row per shape operators use (issue 61): (text, the secret, what must still show)
SHAPES = [
    ("password = \'\'\'\nMulti-Line-Literal-61\n\'\'\'\nusername = \"robot\"", "Multi-Line-Literal-61",
     "username = \"robot\""),
    ('password = """\nMulti-Line-Basic-61\n"""', "Multi-Line-Basic-61", 'password = """'),
    ('[host."https://r.example.com".header]\n  Private-Token = ["Header-Array-61", "Second-61"]',
     "Header-Array-61", '[host."https://r.example.com".header]'),
    ('  Private-Token = ["Header-Array-61", "Second-61"]', "Second-61", "Private-Token = ["),
    ('X-JFrog-Art-Api = "JFrog-Api-Key-61"', "JFrog-Api-Key-61", "X-JFrog-Art-Api = "),
    ("X-Registry-Auth: Registry-Auth-61", "Registry-Auth-61", "X-Registry-Auth: "),
    ('X-Vault-Creds = "Vault-Creds-61"', "Vault-Creds-61", "X-Vault-Creds"),
    ("HTTPS_PROXY=http://u:Pr0xy@Tail61@proxy.example.com:3128", "Tail61", "@proxy.example.com:3128"),
    ("HTTPS_PROXY=http://u:Pr0xy@Tail61@proxy.example.com:3128", "Pr0xy", "http://u:"),
    ("mirror https://:Empty-User-61@mirror.example.com/x", "Empty-User-61", "@mirror.example.com/x"),
    ("etcdctl --user root:Etcd-User-61 endpoint health", "Etcd-User-61", "--user root:"),
    ("etcdctl --user=root:Etcd-Eq-61 endpoint health", "Etcd-Eq-61", "--user=root:"),
    ("curl -u admin:Curl-User-61 https://x", "Curl-User-61", "-u admin:"),
    ("skopeo copy --creds robot:Skopeo-Creds-61 docker://a", "Skopeo-Creds-61", "--creds "),
    ("etcdctl --password Space-Password-61 get", "Space-Password-61", "--password "),
    ("etcdctl --password=Eq-Password-61 get", "Eq-Password-61", "--password="),
    ("tool --token Space-Token-61 --v=2", "Space-Token-61", "--v=2"),
    ("tool --token=Eq-Token-61", "Eq-Token-61", "--token="),
    ("-----BEGIN EC PRIVATE KEY-----\nPem-Body-61\n-----END EC PRIVATE KEY-----", "Pem-Body-61",
     "-----END EC PRIVATE KEY-----"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nPgp-Body-61\n-----END PGP PRIVATE KEY BLOCK-----", "Pgp-Body-61",
     "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    ("journal clipped: -----BEGIN OPENSSH PRIVATE KEY-----\nCut-Short-61 ...", "Cut-Short-61", "journal clipped"),
    ("Authorization: Bearer Bearer-Scheme-61", "Bearer-Scheme-61", "Authorization: Bearer "),
    ("Authorization: Basic QmFzaWMtNjE6eA==", "QmFzaWMtNjE6eA==", "Authorization: Basic "),
    ("Authorization: Token Token-Scheme-61", "Token-Scheme-61", "Authorization: Token "),
    ('"Authorization" = ["Digest Digest-Scheme-61"]', "Digest-Scheme-61", '"Authorization" = ['),
    ("base_url: https://Short-Tok-61@mirror.example.com/gvisor", "Short-Tok-61", "@mirror.example.com/gvisor"),
]


@pytest.mark.parametrize("text,secret,kept", SHAPES, ids=["%d-%s" % (i, row[1]) for i, row in enumerate(SHAPES)])
def test_the_shapes_operators_use(text, secret, kept):
    out = redact_text(text)
    assert secret not in out and MARK in out, out
    assert kept in out, out
    assert redact_text(out) == out


def test_a_toml_file_stays_toml_after_redaction():
    tomlkit = pytest.importorskip("tomlkit")
    text = ("[a]\n  password = \'\'\'\nx\ny\n\'\'\'\n  Private-Token = [\"p1\", \"p2\"]\n"
            "  X-JFrog-Art-Api = \"k\"\n  plain = [\"public\"]\n")
    doc = tomlkit.parse(redact_text(text))
    assert doc["a"]["password"].strip() == MARK and list(doc["a"]["Private-Token"]) == [MARK, MARK]
    assert list(doc["a"]["plain"]) == ["public"]


@pytest.mark.parametrize("argv,shown", [
    (["etcdctl", "--user", "root:Argv-User-61", "endpoint", "health"], ["etcdctl", "--user", "root:" + MARK]),
    (["etcdctl", "--password", "Argv-Pass-61", "get"], ["etcdctl", "--password", MARK, "get"]),
    (["skopeo", "--creds", "u:Argv-Creds-61"], ["skopeo", "--creds", MARK]),
    (["kubelet", "--token", "Argv-Token-61", "--v", "2"], ["kubelet", "--token", MARK, "--v", "2"]),
    (["tool", "--password-file", "/etc/pw"], ["tool", "--password-file", "/etc/pw"]),
])
def test_an_argv_hides_the_item_after_a_secret_flag(argv, shown):
    out = redact.redact(argv)
    assert out[:len(shown)] == shown and "61" not in json.dumps(out)


@pytest.mark.parametrize("text", [
    "--authorization-mode=Webhook", "--kube-api-qps=50", "--kube-api-burst 100", "apiVersion: v1",
    "server = \"https://registry.example.com\"", "--user-agent curl", "user: kubelet", "--user kubelet",
    "client-key: /var/lib/kubelet/pki/kubelet-client.key", "--passes 3",
    "reading Node nodefix-secrets-debian12: no answer from the API server",   # a name with 'secrets' in it
])
def test_more_decided_false_positives(text):
    assert redact_text(text) == text


def test_a_key_that_is_a_url_with_userinfo_is_redacted_too():
    out = redact.redact({"https://u:Key-Url-61@mirror": {"capabilities": ["pull"]}})
    assert "Key-Url-61" not in json.dumps(out)
