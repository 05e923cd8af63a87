# SPDX-License-Identifier: GPL-3.0-or-later
"""_core.redact, free text (review finding L3 of issue 61): the shapes operators write credentials in - YAML
block and plain scalars, command lines (curl, mysql, sshpass, ipmitool, redis-cli, the ldap tools, registry
logins, openssl, etcdctl), environment assignments, .netrc, JSON (escaped too), query strings, tokens known by
their shape - hidden; and in the other direction the text around them (hosts, paths, key names, switch words,
other tools' short flags) still shown. Every row: the secret gone, the kept text still there, redacting again
changes nothing."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact, secret_names
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact_text

# (text, secrets that must be gone, texts that must still show)
HIDDEN = [
    # YAML block scalars under a secret's key: every indicator
    ("password: |\n  Block-Lit-L3a\n  Block-Lit-L3b\nuser: admin\n", ["Block-Lit-L3a", "Block-Lit-L3b"],
     ["password: |", "user: admin"]),
    ("auth:\n  token: >-\n    Folded-L3a\n    Folded-L3b\n  server: https://vault.example.com\n",
     ["Folded-L3a", "Folded-L3b"], ["token: >-", "server: https://vault.example.com"]),
    ("password: |2\n   Indent-Ind-L3\nhost: db.example.com", ["Indent-Ind-L3"], ["host: db.example.com"]),
    ("password: >+ # keep\n  Keep-Chomp-L3\n\nport: 5432", ["Keep-Chomp-L3"], ["port: 5432", "# keep"]),
    ("- name: db\n  password: |-\n    Seq-Block-L3\n  host: db1\n", ["Seq-Block-L3"], ["host: db1", "- name: db"]),
    # plain scalars with spaces, a comment kept; continued plain and quoted scalars
    ("password: correct horse Plain-Spaces-L3  # rotated monthly\nhost: h1", ["Plain-Spaces-L3", "horse"],
     ["# rotated monthly", "host: h1"]),
    ("db_password: first words\n  Continued-L3 words\nuser: u", ["Continued-L3", "first words"], ["user: u"]),
    ('token: "Quoted-Start-L3\n  Quoted-End-L3"\nport: 1', ["Quoted-Start-L3", "Quoted-End-L3"], ["port: 1"]),
    ("password: 'it''s Single-Esc-L3'\nuser: u", ["Single-Esc-L3", "s Single"], ["user: u"]),
    ("tokens_dir: /var/lib/t\ntoken:\n  - Seq-Item-L3a\n  - Seq-Item-L3b\nuser: u",
     ["Seq-Item-L3a", "Seq-Item-L3b"], ["tokens_dir: /var/lib/t", "user: u"]),
    # curl
    ("curl -uadmin:Curl-Attached-L3 https://api.example.com/x", ["Curl-Attached-L3"],
     ["curl -uadmin:", "https://api.example.com/x"]),
    ("curl -u admin:Curl-Space-L3 https://api.example.com", ["Curl-Space-L3"], ["-u admin:"]),
    ("curl --user=admin:Curl-Eq-L3 https://api.example.com", ["Curl-Eq-L3"], ["--user=admin:"]),
    ("curl -U proxy:Curl-Proxy-L3 -x http://proxy:3128 https://a", ["Curl-Proxy-L3"], ["-U proxy:", "http://proxy:3128"]),
    ("curl --proxy-user proxy:Curl-Proxy2-L3 https://a", ["Curl-Proxy2-L3"], ["--proxy-user proxy:"]),
    ("curl -H 'Authorization: Bearer Hdr-Bearer-L3' https://a", ["Hdr-Bearer-L3"], ["-H 'Authorization: Bearer "]),
    ('curl -H "X-Auth-Token: Hdr-Custom-L3" https://a', ["Hdr-Custom-L3"], ['-H "X-Auth-Token: ']),
    ('curl -H "PRIVATE-TOKEN: Hdr-Gitlab-L3" https://gitlab.example.com', ["Hdr-Gitlab-L3"], ["gitlab.example.com"]),
    # mysql and friends: -pX and -p X; the user and the port stay
    ("mysql -h db.example.com -u root -pMysql-Att-L3 app", ["Mysql-Att-L3"], ["-h db.example.com -u root -p", " app"]),
    ("mysql -h db -P 3306 -u root -p Mysql-Space-L3", ["Mysql-Space-L3"], ["-P 3306 -u root -p "]),
    ("/usr/bin/mysqldump -uroot -p'Mysql-Quoted L3' db", ["Mysql-Quoted L3"], ["-uroot", " db"]),
    ("mariadb-admin -pMaria-L3 status", ["Maria-L3"], ["status"]),
    ("sshpass -p Sshpass-L3 ssh -p 2222 admin@host", ["Sshpass-L3"], ["ssh -p 2222 admin@host"]),
    ("ipmitool -I lanplus -H bmc1 -U admin -P Ipmi-L3 power status", ["Ipmi-L3"], ["-H bmc1 -U admin -P ", "power"]),
    ("redis-cli -h cache -a Redis-L3 ping", ["Redis-L3"], ["-h cache -a ", "ping"]),
    ("ldapsearch -x -D cn=admin,dc=example -w Ldap-L3 -b dc=example", ["Ldap-L3"], ["cn=admin,dc=example", "-b dc=example"]),
    ("docker login -u robot -p Docker-Login-L3 registry.example.com", ["Docker-Login-L3"],
     ["-u robot -p ", "registry.example.com"]),
    ("helm registry login registry.example.com --username robot --password Helm-Login-L3", ["Helm-Login-L3"],
     ["--username robot"]),
    ("openssl pkcs12 -in a.p12 -passin pass:Openssl-L3 -nokeys", ["Openssl-L3"], ["-passin pass:", "-nokeys"]),
    # flags: a value starting with one dash, a continued line, commas, escapes, quotes
    ("etcdctl --password -Dash-Start-L3 get /x", ["Dash-Start-L3"], ["get /x"]),
    ("etcdctl --user root --password Etcd-Pw-L3 endpoint health", ["Etcd-Pw-L3"], ["--user root", "endpoint health"]),
    ("tool --password \\\n  Continued-Flag-L3 --v=2", ["Continued-Flag-L3"], ["--v=2"]),
    ("tool --password=Comma,Inside-L3 --v=2", ["Inside-L3"], ["--v=2"]),
    ("tool --password=Esc\\ Space-L3 --v=2", ["Space-L3"], ["--v=2"]),
    ('tool --password="Spaced Quoted-L3" --v=2', ["Quoted-L3"], ["--v=2"]),
    ("tool --client-secret=Client-Secret-L3", ["Client-Secret-L3"], ["--client-secret="]),
    ("tailscale up --authkey=Tskey-L3", ["Tskey-L3"], ["tailscale up --authkey="]),
    ("kubectl create secret generic s --from-literal=password=Literal-L3", ["Literal-L3"], ["--from-literal=password="]),
    ("helm install x --set db.password=Helm-Set-L3,image.tag=v1", ["Helm-Set-L3"], ["image.tag=v1"]),
    ("mount -t cifs -o username=svc,password=Mount-L3,uid=0 //fs/share /mnt", ["Mount-L3"], ["username=svc", "uid=0"]),
    # environment assignments
    ("PGPASSWORD=Pg-L3 psql -h db -p 5432 -U app", ["Pg-L3"], ["psql -h db -p 5432 -U app"]),
    ("export GITHUB_TOKEN=Gh-Env-L3 VAULT_ADDR=https://vault:8200", ["Gh-Env-L3"], ["VAULT_ADDR=https://vault:8200"]),
    ("MYSQL_PWD='Mysql-Pwd-L3' mysql -u root", ["Mysql-Pwd-L3"], ["mysql -u root"]),
    ("DB_PASSPHRASE=Passphrase-L3", ["Passphrase-L3"], ["DB_PASSPHRASE="]),
    ("Server=db;User Id=app;Password=Ado-L3;Database=x", ["Ado-L3"], ["Server=db;User Id=app;", ";Database=x"]),
    # .netrc
    ("machine mirror.example.com login robot password Netrc-L3\n", ["Netrc-L3"], ["machine mirror.example.com login robot"]),
    ("machine a.example.com\n  login robot\n  password Netrc-Multi-L3\n", ["Netrc-Multi-L3"], ["login robot"]),
    ("default login anonymous password Netrc-Default-L3 account Netrc-Acct-L3", ["Netrc-Default-L3", "Netrc-Acct-L3"],
     ["default login anonymous"]),
    # JSON, and JSON inside a JSON string
    ('{"password": "Json-L3", "host": "db.example.com"}', ["Json-L3"], ['"host": "db.example.com"']),
    ('{"msg": "{\\"token\\": \\"Json-Esc-L3\\", \\"node\\": \\"n1\\"}"}', ["Json-Esc-L3"], ['\\"node\\": \\"n1\\"']),
    ("{'password': 'Pyrepr-L3', 'port': 1}", ["Pyrepr-L3"], ["'port': 1"]),
    # query strings: each parameter on its own
    ("GET https://api.example.com/v1?token=Query-Tok-L3&page=2", ["Query-Tok-L3"], ["&page=2", "api.example.com/v1"]),
    ("https://a.example.com/cb?access_token=Access-L3&state=s1#top", ["Access-L3"], ["state=s1"]),
    ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE/20261206/"
     "us-east-1/s3/aws4_request&X-Amz-Signature=Amz-Sig-L3&X-Amz-Security-Token=Amz-Tok-L3",
     ["Amz-Sig-L3", "Amz-Tok-L3", "AKIAEXAMPLE"], ["X-Amz-Algorithm=AWS4-HMAC-SHA256", "b.s3.amazonaws.com/k"]),
    ("https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sig=Azure-Sig-L3&se=2026", ["Azure-Sig-L3"], ["sv=2022-11-02", "se=2026"]),
    ("https://maps.example.com/api?key=Google-Key-L3&q=x", ["Google-Key-L3"], ["&q=x"]),
    # tokens known by their shape, wherever they are
    ("kubelet[1]: eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.Jwt-Sig-L3 rejected", ["eyJzdWIiOiJzeXN0ZW0ifQ", "Jwt-Sig-L3"],
     ["kubelet[1]:", "rejected"]),
    ("cloned with ghp_0123456789abcdefghijABCDEFGHIJ0123 ok", ["ghp_0123456789abcdefghijABCDEFGHIJ0123"], ["cloned with", "ok"]),
    ("notify xoxb-1234567890-abcdefghij done", ["xoxb-1234567890-abcdefghij"], ["notify", "done"]),
    ("glpat-abcdefghij0123456789 in a log", ["glpat-abcdefghij0123456789"], ["in a log"]),
    # a Kubernetes bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}) where the text speaks of tokens, joins, bootstrap or
    # kubeadm - anywhere in it: the id (public) kept, the secret hidden
    ("kubeadm join 10.0.0.1:6443 --token abc123.bootsecret0000l3", ["bootsecret0000l3"], ["--token "]),
    ("kubeadm join 10.0.0.1:6443 --token=abc123.bootsecret0001l3", ["bootsecret0001l3"], ["--token="]),
    ("kubeadm join --discovery-token abc123.bootsecret0002l3", ["bootsecret0002l3"], ["--discovery-token "]),
    ("TOKEN                     TTL   USAGES\nabc123.bootsecret0003l3   23h   authentication,signing\n",
     ["bootsecret0003l3"], ["abc123.", "23h   authentication,signing"]),            # kubeadm token list
    ("$ kubeadm token create\nabc123.bootsecret0004l3\n", ["bootsecret0004l3"], ["abc123."]),
    ("bootstrap credential abc123.bootsecret0005l3 rotated", ["bootsecret0005l3"], ["bootstrap credential abc123."]),
    ("joined the cluster with abc123.bootsecret0006l3", ["bootsecret0006l3"], ["joined the cluster with"]),
    ("KUBEADM_TOKEN=abc123.bootsecret0007l3", ["bootsecret0007l3"], ["KUBEADM_TOKEN="]),
    # (review M5) an argv as CalledProcessError prints it: a Python list, a JSON one; the flags and the user kept
    ("Command '['etcdctl', '--password', 'Argv-Text-M5a', 'endpoint', 'health']' returned non-zero exit status 1.",
     ["Argv-Text-M5a"], ["'--password', '", "'endpoint', 'health']' returned"]),
    ("Command '['etcdctl','--user','root:Argv-Text-M5b']' returned non-zero exit status 1.", ["Argv-Text-M5b"],
     ["'--user','root:"]),
    ("argv: ['mysql', '-p', 'Argv-Text-M5c', '-h', 'db']", ["Argv-Text-M5c"], ["['mysql', '-p', '", "'-h', 'db']"]),
    ('failed to run ["etcdctl", "--password", "Argv-Text-M5d"]', ["Argv-Text-M5d"], ['["etcdctl", "--password", "']),
    # TOML dotted keys after a quoted segment (containerd's registry auth written on one line)
    ('plugins."io.containerd.grpc.v1.cri".registry.configs."reg.example".auth.password = "Toml-Dotted-M5"',
     ["Toml-Dotted-M5"], ['configs."reg.example".auth.password = "']),
    ('registry.configs."r".auth.identitytoken = "Toml-Dotted-M5b"', ["Toml-Dotted-M5b"], ['"r".auth.identitytoken']),
    # Kubernetes name/value pairs: YAML and JSON
    ("env:\n- name: DB_PASSWORD\n  value: Env-Pair-M5a\n- name: LOG_LEVEL\n  value: debug\n", ["Env-Pair-M5a"],
     ["name: DB_PASSWORD", "value: debug"]),
    ('exec:\n  env:\n  - name: AWS_SECRET_ACCESS_KEY\n    value: "Env-Pair-M5b"\n', ["Env-Pair-M5b"],
     ["name: AWS_SECRET_ACCESS_KEY", 'value: "']),
    ('[{"name":"API_TOKEN","value":"Env-Pair-M5c"},{"name":"MODE","value":"fast"}]', ["Env-Pair-M5c"],
     ['"name":"API_TOKEN"', '"value":"fast"']),
    # user:password@host without a scheme: a proxy variable, Go's MySQL DSN
    ("HTTPS_PROXY=u:Bare-Proxy-M5@proxy.example.com:3128", ["Bare-Proxy-M5"], ["HTTPS_PROXY=u:", "@proxy.example.com:3128"]),
    ("proxy=u:Bare-Proxy-M5b@proxy:3128 no_proxy=.svc", ["Bare-Proxy-M5b"], ["@proxy:3128 no_proxy=.svc"]),
    ("dsn: root:Go-Dsn-M5@tcp(db:3306)/app?parseTime=true", ["Go-Dsn-M5"], ["root:", "@tcp(db:3306)/app"]),
    # Go-valid sub-delims in a URL's password (quote, parentheses, comma)
    ("http://u:ab'),Sub-Delim-M5@h.example.com/x", ["Sub-Delim-M5"], ["http://u:", "@h.example.com/x"]),
    ("http://u:Sub-Delim-M5b'),@h.example.com/x", ["Sub-Delim-M5b"], ["@h.example.com/x"]),
    # a YAML scalar that starts on the next line
    ("PASSWORD:\n  Next-Line-M5\nUSER: admin\n", ["Next-Line-M5"], ["PASSWORD:", "USER: admin"]),
    # HTTP Digest: the response hidden, the user and realm shown
    ('Authorization: Digest username="u", realm="r", nonce="n1", response="Digest-Resp-M5"', ["Digest-Resp-M5"],
     ['Digest username="u", realm="r"', 'response="']),
    # XML, Perl/Ruby hashes
    ("<config><password>Xml-Elem-M5</password><user>admin</user></config>", ["Xml-Elem-M5"],
     ["<password>", "<user>admin</user>"]),
    ("<Password>Xml-Elem-M5b</Password>", ["Xml-Elem-M5b"], ["<Password>", "</Password>"]),
    ("{ password => 'Perl-Hash-M5', user => 'admin' }", ["Perl-Hash-M5"], ["password => '", "user => 'admin'"]),
]


def assert_hidden(text, secrets, kept):
    """The secrets gone from ``text`` redacted, the kept parts still there, redacting again changes nothing (the
    table tests of test_redact_prose.py use it too)."""
    out = redact_text(text)
    for secret in secrets:
        assert secret not in out, out
    assert MARK in out, out
    for part in kept:
        assert part in out, (part, out)
    assert redact_text(out) == out


@pytest.mark.parametrize("text,secrets,kept", HIDDEN, ids=["%02d" % i for i in range(len(HIDDEN))])
def test_an_operators_shape_is_hidden_and_its_context_shown(text, secrets, kept):
    assert_hidden(text, secrets, kept)


def test_a_yaml_text_stays_yaml_and_line_for_line():
    yaml = pytest.importorskip("yaml")
    text = ("registry:\n  password: |\n    line-one-L3\n    line-two-L3\n  token: a b c\n  tokens:\n    - t1\n"
            "  user: robot\n  enabled: true\n  notes: >\n    kept text\n")
    out = redact_text(text)
    assert len(out.splitlines()) == len(text.splitlines())
    doc = yaml.safe_load(out)
    assert doc["registry"]["user"] == "robot" and doc["registry"]["enabled"] is True
    assert doc["registry"]["notes"] == "kept text\n" and doc["registry"]["tokens"] == [MARK]
    assert "line-one-L3" not in out and MARK in doc["registry"]["password"] and doc["registry"]["token"] == MARK


# texts that hold no secret: shown exactly as they are
KEPT = [
    "psql -h db.example.com -p 5432 -U app",
    "docker run -p 8080:80 nginx",
    "ssh -p 2222 admin@host",
    "podman run -p 9090:9090 -v /data:/data prom/prometheus",
    "mysql -h db -P 3306 -u root --protocol=tcp",
    "mysql -u root -p -h db.example.com",              # -p with nothing after it: mysql prompts
    "curl -u admin https://api.example.com",            # a user without a password
    "curl -sSfL -o /tmp/x https://mirror.example.com/runsc",
    "etcdctl --user root endpoint health",
    "tool --password --v=2",                          # a secret flag followed by the next flag
    "token: true", "password: false", "use_token: yes", "auth:\n  enabled: on",
    "password_file: /etc/nodefix/password", "tokenFile: /var/run/secrets/token",
    "auth:\n  username: robot\n  server: https://registry.example.com",
    "authentication:\n  webhook:\n    enabled: true",
    "kubelet --authentication-token-webhook -v=2",
    "https://api.example.com/v1/nodes?limit=500&continue=abc",
    "https://mirror.example.com/gvisor/releases/release/20250811/x86_64/runsc.sha512",
    "machine learning jobs were evicted",
    "password reset for user bob failed",
    "openssl s_client -connect api.example.com:443 -passin file:/etc/pw",
    "openssl req -passin env:KEY_PASS -new",
    "the gvisor.runsc_outdated finding on node-a: runsc 20240101 < 20250811",
    "signature_algorithm: RS256", "signatures: 3 verified",
    "host: db.example.com\nport: 5432\npath: /var/lib/db\n",
    "containerd_archive_base_url: https://mirror.example.com/containerd",
    # the bootstrap token's shape is a valid Node name of two labels: alone (a line, a report's key, a result's
    # 'node'), beside a status, in a list of nodes - without token/join/bootstrap/kubeadm in the text: a name
    "node01.abcdefabcdef0123",
    "node01.abcdefabcdef0123\nnode02.abcdefabcdef0124\n",
    "node01.abcdefabcdef0123   Ready    <none>   12d   v1.31.2",
    "cordoned node01.abcdefabcdef0123: 3 pods evicted",
    # (review M5) what the new shapes must leave alone: an image's tag and digest, an email, a ssh target, a list of
    # plain words, a name/value pair that is no secret, an XML element that is none, Digest without a response
    "image docker.io/library/nginx:1.25@sha256:0123abcd pulled",
    "nginx:1.25@sha256:0123abcd",
    "mail admin@example.com: sent",
    "ssh root@node-a.example.com",
    "Command '['systemctl', 'restart', 'kubelet']' returned non-zero exit status 1.",
    "- name: LOG_LEVEL\n  value: debug\n",
    '[{"name":"MODE","value":"fast"}]',
    "<user>admin</user>",
    "<password_file>/etc/pw</password_file>",
    'WWW-Authenticate: Digest realm="r", nonce="n1", qop="auth"',
    # (review L1) node names that hold a secret's word are data; what measures a token is no token; Basic/Bearer
    # before an ordinary word; the collection's own warning
    "node auth-01: kubelet not ready",
    "drain of secret-store-2: 3 pods left",
    "held: token-svc-1: budget exhausted",
    "node-pass-1: cordoned",
    "auth-01.example.com: cordoned",
    "--authentication-token-webhook-cache-ttl=2m",
    "token_ttl: 30m",
    "Basic authentication failed for mirror",
    "the client sent Bearer token, refused",
    "they are used as basic auth meanwhile",
]


@pytest.mark.parametrize("text", KEPT, ids=["%02d" % i for i in range(len(KEPT))])
def test_text_without_a_secret_is_shown_as_it_is(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("argv,shown", [
    (["mysql", "-uroot", "-pArgv-Mysql-L3", "app"], ["mysql", "-uroot", "-p" + MARK, "app"]),
    (["/usr/bin/mysql", "-p", "Argv-Mysql2-L3", "-h", "db"], ["/usr/bin/mysql", "-p", MARK, "-h", "db"]),
    (["sshpass", "-p", "Argv-Sshpass-L3", "ssh", "-p", "2222", "h"], ["sshpass", "-p", MARK, "ssh", "-p", "2222", "h"]),
    (["docker", "login", "-p", "Argv-Docker-L3", "r.example.com"], ["docker", "login", "-p", MARK, "r.example.com"]),
    (["docker", "run", "-p", "8080:80", "nginx"], ["docker", "run", "-p", "8080:80", "nginx"]),
    (["etcdctl", "--password", "-Argv-Dash-L3", "get"], ["etcdctl", "--password", MARK, "get"]),
    (["etcdctl", "--password", "--insecure"], ["etcdctl", "--password", "--insecure"]),
    (["curl", "-U", "p:Argv-Proxy-L3"], ["curl", "-U", "p:" + MARK]),
    (["curl", "-uadmin:Argv-Curl-L3", "https://a"], ["curl", "-uadmin:" + MARK, "https://a"]),
    (["openssl", "pkcs12", "-passin", "pass:Argv-Openssl-L3"], ["openssl", "pkcs12", "-passin", "pass:" + MARK]),
    (["openssl", "pkcs12", "-passin", "file:/etc/pw"], ["openssl", "pkcs12", "-passin", "file:/etc/pw"]),
])
def test_an_argv_hides_a_tools_password_and_shows_the_rest(argv, shown):
    out = redact.redact(argv)
    assert out == shown and "L3" not in json.dumps(out)


def test_a_map_keyed_by_node_names_keeps_its_values():
    """storm_gate's unavailable map, a report's nodes: node names holding auth/token/secret/pass are data."""
    value = {"unavailable": {"auth-01": "cordoned", "token-ring-2": ["drained", "rebooted"], "secret-db-1": 3,
                             "node-pass-1": "NotReady"}, "password": "Map-Pw-L1", "db_token": "Map-Tok-L1"}
    out = redact.redact(value)
    assert out["unavailable"] == value["unavailable"]
    assert out["password"] == MARK and out["db_token"] == MARK


def test_the_collections_own_warnings_read_as_written():
    from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus.client import URL_WARNING
    assert redact_text(URL_WARNING) == URL_WARNING


@pytest.mark.parametrize("text,secret", [("Authorization: Basic dXNlcjpMMS1zZWNyZXQ=", "dXNlcjpMMS1zZWNyZXQ="),
                                         ("Bearer eyJhbGciOiJIUzI1NiJ9", "eyJhbGciOiJIUzI1NiJ9"),
                                         ("basic Zm9vOmJhcg==", "Zm9vOmJhcg=="), ("bearer ab12cd34ef", "ab12cd34ef"),
                                         ("Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz")])
def test_basic_and_bearer_credentials_are_still_hidden(text, secret):
    assert secret not in redact_text(text)


def test_a_kubernetes_env_pair_hides_its_value_in_a_structure():
    env = [{"name": "DB_PASSWORD", "value": "Env-Struct-M5"}, {"name": "LOG_LEVEL", "value": "debug"},
           {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "token"}}}]
    assert redact.redact({"env": env}) == {"env": [{"name": "DB_PASSWORD", "value": MARK}, env[1], env[2]]}


@pytest.mark.parametrize("name,secret", [("X-Amz-Signature", True), ("sig", True), ("DB_PASSPHRASE", True),
                                         ("authkey", True), ("signature_algorithm", False), ("signatures", False)])
def test_more_secret_names(name, secret):
    assert secret_names.secret_name(name) is secret


def test_a_result_keyed_by_a_node_whose_name_has_the_bootstrap_shape_keeps_it():
    """Keys are redacted as text is (a node's name can carry a secret), so the shape is judged the same way there: a
    Node name stays a name; under a key that speaks of tokens, a token-shaped value is a token."""
    out = redact.redact({"nodes": {"node01.abcdefabcdef0123": {"state": "clean"}},
                         "node": "node01.abcdefabcdef0123", "join_command": ["kubeadm", "join", "abc123.bootsecret0008l3"],
                         "bootstrap": {"id": "abc123.bootsecret0009l3"}})
    assert out["nodes"] == {"node01.abcdefabcdef0123": {"state": "clean"}} and out["node"] == "node01.abcdefabcdef0123"
    assert "bootsecret0008l3" not in json.dumps(out) and "bootsecret0009l3" not in json.dumps(out)
    assert out["join_command"][2] == "abc123." + MARK


@pytest.mark.parametrize("text,secret", [
    ('[host."https://r.example".header]\nAuthorization = [\n  "S3cretMulti1",\n]\n', "S3cretMulti1"),
    ('[host."https://r.example".header]\n  Proxy-Authorization = [\n    "Basic S3cretMulti2"\n  ]', "S3cretMulti2"),
    ('password = """ab\\"""S3cretTail1"""', "S3cretTail1"),                 # TOML's escaped quote inside """
    ('{"password":\n  "S3cretJson1"}', "S3cretJson1"),                      # JSON pretty-printed, value on its line
    ("- {name: API_TOKEN, value: S3cretFlow1}", "S3cretFlow1"),              # Kubernetes env in flow style
    ('- {name: "API_TOKEN", value: "S3cretFlow2"}', "S3cretFlow2"),
    ("env:\n- {value: S3cretFlow3, name: DB_PASSWORD}", "S3cretFlow3"),     # the other order
])
def test_review_shapes_of_2026_12_07(text, secret):
    """Review of issue 61 (2026-12-07): shapes operators write that the redactor did not read."""
    out = redact_text(text)
    assert secret not in out and MARK in out, out


@pytest.mark.parametrize("text", ["- {name: LOG_LEVEL, value: debug}", '{"name": "HOME", "value": "/root"}',
                                  'x = """plain""" and y', '{"note":\n  "hello"}', "{value: 3, name: REPLICAS}"])
def test_what_those_shapes_show_stays(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("text,secrets", [
    ('Authorization = ["tokenAAAA1", "tokenBBBB2"]', ("tokenAAAA1", "tokenBBBB2")),     # every element of the array
    ('Authorization = [\n  "tokenAAAA1",\n  "tokenBBBB2"\n]', ("tokenAAAA1", "tokenBBBB2")),
    ('{"Authorization":\n  "S3cretNext1"}', ("S3cretNext1",)),
    ('{"X-Authorization":\n  "S3cretNext2"}', ("S3cretNext2",)),
])
def test_every_authorization_value_in_arrays_and_on_the_next_line(text, secrets):
    """Second review of 2026-12-07: only an array's first element, no value on the next line."""
    out = redact_text(text)
    assert not [s for s in secrets if s in out], out


@pytest.mark.parametrize("key", ["HTTP_AUTHORIZATION", "X_Authorization", "authorization_header"])
def test_authorization_named_keys_are_hidden(key):
    assert redact.redact({key: "S3cretKey77"})[key] == MARK
    assert redact.redact({"authorization_mode": "Webhook"}) == {"authorization_mode": "Webhook"}
