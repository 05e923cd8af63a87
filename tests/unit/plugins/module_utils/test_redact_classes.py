# SPDX-License-Identifier: GPL-3.0-or-later
"""_core.redact after the second independent review of issue 61: five classes, each table-tested with its leaks and
the data that reads like them side by side, so that neither regresses.

Leaks (the secret gone, its context shown): a URL's user information percent-encoded inside another value, and URL
user information in query strings; an Authorization (or secret-named) header percent-encoded or in a form body; an
env file's unquoted value of several words; a secret word, a connector phrase ('for user admin', 'reset to') and its
value. Over-redaction (shown exactly as it is): a count, a version, a name Kubernetes generates, a node's name that
holds a secret word and its state, a user name with colons."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_names, secret_shapes
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact, redact_text
from plugins.module_utils.test_redact_shapes import assert_hidden

S5 = "hunter2Sup3rS3cret"
# real OpenSSH public keys (ssh-keygen -t ed25519 / -t rsa -b 1024, their private halves discarded) and kubeadm's
# discovery hash shape (sha256:<64 hex>)
ED25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIM/9P5zxba3EN5PxI6HciLq2iRjw2Qi/8qbChyC+HtRs"
RSA = ("AAAAB3NzaC1yc2EAAAADAQABAAAAgQDuWSkAREega+7xmBk9J5X00T6qoNZUfJDeO5Xk1LBIigTzb2bStU6lgG3XEgjr41O2ZUPjieppTkEj6M"
       "GDggchIORKNXdc98+3jTeQjDS/IIq9rZhPXlEgWpBPYoiQwF68waY8Bi0UFktpZBiHIHG5piyfATMWJ4PTBpzdB5Ggrw==")
CA_HASH = "sha256:" + "0123456789abcdef" * 4

# (text, secrets that must be gone, texts that must still show), by class
HIDDEN = {
    "url: percent-encoded URL user information, URL user information in a query": [
        ("next=https%3A%2F%2Fadmin%3APctPw-A1%40h.example.com%2Fx", ["PctPw-A1"],
         ["next=https%3A%2F%2Fadmin%3A", "%40h.example.com%2Fx"]),
        ("next=https%3a%2f%2fadmin%3aPctPw-A2%40h.example.com", ["PctPw-A2"], ["admin%3a", "%40h.example.com"]),
        ("url%3Dhttps%253A%252F%252Fadmin%253APctPw-A3%2540h.example.com%252Fx", ["PctPw-A3"],
         ["admin%253A", "%2540h.example.com%252Fx"]),
        ("url%3Dhttps%25253A%25252F%25252Fadmin%25253APctPw-A4%252540h.example.com", ["PctPw-A4"],
         ["admin%25253A", "%252540h.example.com"]),
        ("next=https%3A//admin%3APctPw-A5%40h.example.com/x", ["PctPw-A5"], ["admin%3A", "%40h.example.com/x"]),
        # the password holds an encoded '@': the user information runs to the last one (Go's reading)
        ("next=https%3A%2F%2Fadmin%3APct%40Pw-A6%40h.example.com", ["Pw-A6"], ["admin%3A", "%40h.example.com"]),
        # a token as the user name
        ("next=https%3A%2F%2FPctTok3nA7xyz%40git.example.com", ["PctTok3nA7xyz"], ["%40git.example.com"]),
        ("GET /cb?next=https://admin:QryPw-A8@h.example.com/x&y=1", ["QryPw-A8"], ["next=https://admin:", "&y=1"]),
        ("cb?redirect_uri=http://u:QryPw-A9@10.0.0.1:8080/&state=z", ["QryPw-A9"], ["@10.0.0.1:8080/&state=z"]),
    ],
    "header: percent-encoded or form-encoded Authorization and secret headers": [
        ("Authorization%3A%20Bearer%20PctBearerB1xyz", ["PctBearerB1xyz"], ["Authorization%3A%20Bearer%20"]),
        ("h=authorization%3a%20basic%20dXNlcjpQY3RCMg%3D%3D&x=1", ["dXNlcjpQY3RCMg"], ["basic%20", "&x=1"]),
        ("grant=1&Authorization=Bearer+FormB3xyz&scope=a", ["FormB3xyz"], ["Authorization=Bearer+", "&scope=a"]),
        ("Authorization%253A%2520Bearer%2520PctB4xyz", ["PctB4xyz"], ["Bearer%2520"]),
        ("hdr=Proxy-Authorization%3A+Basic+PctB5xyz", ["PctB5xyz"], ["Proxy-Authorization%3A+Basic+"]),
        ("%0D%0AAuthorization%3A%20Bearer%20PctB6xyz%0D%0AHost%3A%20h", ["PctB6xyz"], ["%0D%0AHost%3A%20h"]),
        ("X-Auth-Token%3A%20PctB7xyz&a=1", ["PctB7xyz"], ["X-Auth-Token%3A%20", "&a=1"]),
        ("token%3DPctB8xyz%0D%0AHost%3A%20h", ["PctB8xyz"], ["%0D%0AHost%3A%20h"]),
    ],
    "env: an env file's unquoted value of several words": [
        ("GPG_PASSPHRASE=my very secret phrase", ["very", "phrase"], ["GPG_PASSPHRASE="]),
        ("export DB_PASSWORD=correct horse battery staple\nDB_HOST=db", ["horse", "staple"], ["DB_HOST=db"]),
        # a command line (env's operands): the value is one word, the words after it the command's (fourth review)
        ("env FOO=1 API_TOKEN=two words here BAR=2 cmd", ["two"], ["env FOO=1 API_TOKEN=", " words here BAR=2 cmd"]),
        ('Environment="VAULT_PASSPHRASE=open sesame now" "OTHER=1"', ["sesame"], ['"OTHER=1"']),
        ("db_password=a b c\nhost=db", ["b c"], ["db_password=", "\nhost=db"]),
        ("SMTP_PASSWORD=pass phrase  \nSMTP_HOST=mail", ["phrase"], ["SMTP_HOST=mail"]),
        ("APIKEY=two words api-key: ApiDash-C7", ["two words", "ApiDash-C7"], ["api-key: "]),
        ("[db]\npassword = my very secret\nhost = db", ["very secret"], ["[db]\npassword = ", "\nhost = db"]),
        ("db.password=two words", ["two words"], ["db.password="]),
        # a command line: as in a shell, the value is one word, the command and its flags kept
        ("PGPASSWORD=PgOne-C8 psql -h db -p 5432", ["PgOne-C8"], [" psql -h db -p 5432"]),
    ],
    "prose: a secret word, a connector phrase, its value": [
        ("Generated password for user admin: GenPw-D1x", ["GenPw-D1x"], ["Generated password for user admin: "]),
        ("password reset to Reset9Pw", ["Reset9Pw"], ["password reset to "]),
        ("New password for admin is NewPw-D3x", ["NewPw-D3x"], ["New password for admin is "]),
        ("setup done. Your API token for node-a: Tok3nD4xyz", ["Tok3nD4xyz"], ["Your API token for node-a: "]),
        ("password for admin is Adm1nPwD5", ["Adm1nPwD5"], ["password for admin is "]),
        ("password has been changed to Chg9PwD6", ["Chg9PwD6"], ["has been changed to "]),
        ("token of node-a is now NodeTok9D7", ["NodeTok9D7"], ["token of node-a is now "]),
        ("db password set to: SetPw9D8", ["SetPw9D8"], ["set to: "]),
        ("the secret was rotated to Rot9SecD9", ["Rot9SecD9"], ["the secret was rotated to "]),
        ("Generated token for node-a: GenTok9D10 (expires in 24h)", ["GenTok9D10"], [" (expires in 24h)"]),
        ("token for https://registry.example.com: RegTok9D11", ["RegTok9D11"], ["token for https://registry.example.com: "]),
    ],
    "hash: a password hash in crypt's format (a colon-joined line is no longer hidden whole at depth: its hash is)": [
        ("root:$6$saltsalt$Jq9pXbTn3Ck0Y2wVhAq7m1s8dO5uR4eL6iZ3tG0kN9yB2cF7vH1jM4pQ8xW5zT6rS0aU3dE9gI2lK7oP1nC4b.:19000:0:99999:7:::",
         ["Jq9pXbTn3Ck0", "saltsalt"], ["root:", ":19000:0:99999:7:::"]),
        ("admin:$y$j9T$abcdEFGHijkl0123$XyZ0123456789abcdefGHIJKLmnopqrstuVWXyz012:19000:0:99999:7:::",
         ["XyZ0123456789"], ["admin:", ":19000:"]),
        ("u:$1$abcdefgh$0123456789abcdefghijkl:19000::::::", ["0123456789abcdefghijkl"], ["u:", ":19000:"]),
        ("web:$2y$10$abcdefghijklmnopqrstuu0123456789ABCDEFGHIJKLMNOPQRSTU", ["ABCDEFGHIJKLMNOPQRSTU"], ["web:"]),
        ("svc:$5$rounds=5000$salt$0123456789abcdefghijklmnopqrstuvwxyzABCDEFG:1::::::", ["ABCDEFG"], ["svc:", ":1:"]),
    ],
    "name: a value under a name that is a node's and a secret's alike, credential-shaped (guards of the kept rows)": [
        ("vault-token-0: X9sdf8sdfZZ", ["X9sdf8sdfZZ"], ["vault-token-0: "]),
        ("default-token-abc12: Xy7pQ2mnZZ", ["Xy7pQ2mnZZ"], ["default-token-abc12: "]),
        ("db-password-2: hunter22", ["hunter22"], ["db-password-2: "]),
        ("tokens: Tok3nsE1x", ["Tok3nsE1x"], ["tokens: "]),
        ("token is v1x9Zq8W2", ["v1x9Zq8W2"], ["token is "]),
        ("user: token:SecretE2x9", ["SecretE2x9"], ["user: token:"]),
        ("secret: hunter", ["hunter"], ["secret: "]), ("password: summer-2024", ["summer-2024"], ["password: "]),
        ("client_secret: abc-defg-12345", ["abc-defg-12345"], ["client_secret: "]),
        ("token: Xy7pQ2mnZZ", ["Xy7pQ2mnZZ"], ["token: "]),
        ("token: kubeconfig-token-value", ["kubeconfig-token-value"], ["token: "]),
        ("kubelet --token=leaked-token-1", ["leaked-token-1"], ["--token="]),
        ("token: default-token-abc12", ["default-token-abc12"], ["token: "]),
    ],
    "auth-params: every parameter of an Authorization scheme but the public ones (fourth review L4)": [
        ('Authorization: Token token="RailsTok9a"', ["RailsTok9a"], ['Authorization: Token token="']),
        ('Authorization: Token token="RailsTok9b", nonce="RailsNonce9b"', ["RailsTok9b", "RailsNonce9b"],
         ['Authorization: Token token="', '", nonce="']),
        ('Authorization: Digest username="admin", realm="kube", nonce="DgNonce9c", uri="/x", response="DgResp9c", '
         'cnonce="DgCnonce9c", nc=00000001, qop=auth, algorithm=MD5',
         ["DgNonce9c", "DgResp9c", "DgCnonce9c"],
         ['Digest username="admin", realm="kube", nonce="', 'uri="/x"', "nc=00000001, qop=auth, algorithm=MD5"]),
        ('Proxy-Authorization: Digest username="u",response="DgResp9d",cnonce=DgCnonce9d', ["DgResp9d", "DgCnonce9d"],
         ['Digest username="u",response="']),
        ('{"Authorization": "Digest username=\\"u\\", response=\\"DgResp9e\\""}', ["DgResp9e"], ['username=\\"u\\"']),
        ("Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
         "SignedHeaders=host;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
         ["AKIAIOSFODNN7EXAMPLE", "fe5f80f77d5fa3beca"], ["AWS4-HMAC-SHA256 Credential=", "SignedHeaders=host;x-amz-date"]),
        ('Authorization: OAuth oauth_consumer_key="OaKey9f", oauth_token="OaTok9f", oauth_signature="OaSig9f%3D", '
         'oauth_signature_method="HMAC-SHA1", oauth_version="1.0"', ["OaKey9f", "OaTok9f", "OaSig9f"],
         ['oauth_signature_method="HMAC-SHA1", oauth_version="1.0"']),
    ],
    "url: user information split at its first colon, raw or percent-encoded; an encoded '/' or '?' in an encoded "
    "URL's password (fourth review L6/L7)": [
        # Basic authentication splits user:password at the first colon: an encoded one in the user starts the password
        ("https://u%3Ax9a:p%40ss9a@h.example.com/x", ["x9a", "ss9a"], ["https://u%3A", "@h.example.com/x"]),
        ("https://u%3APass9b@h.example.com", ["Pass9b"], ["https://u%3A", "@h.example.com"]),
        ("next=https%3A%2F%2Fu%253Ax9c%3APw9c%40host", ["x9c", "Pw9c"], ["%2F%2Fu%253A", "%40host"]),
        ("next=https%3A%2F%2Fu:Pw9d%40host", ["Pw9d"], ["%2F%2Fu:", "%40host"]),
        # an encoded '/' or '?' of the URL's own depth in its password: not a valid URL, hidden to its last '@'
        ("next=https%3A%2F%2Fu%3Ap%2FPw9e%40host", ["Pw9e"], ["next=https%3A%2F%2Fu%3A", "%40host"]),
        ("next=https%3A%2F%2Fu%3Ap%3FPw9f%40host%2Fx", ["Pw9f"], ["u%3A", "%40host%2Fx"]),
        ("?next=https%3A%2F%2Fu%3APw9g%40host&y=1", ["Pw9g"], ["?next=https%3A%2F%2Fu%3A", "%40host&y=1"]),
        # a secret parameter right after the encoded URL's '?' (its scheme's '%3A' was read as a header's)
        ("next=https%3A%2F%2Fh%2Fcb%3Ftoken%3DTok9h%26a%3D1", ["Tok9h"], ["%3Ftoken%3D", "%26a%3D1"]),
    ],
    "prose: the value more than three words after the secret word, form-encoded prose (fourth review L8/L9)": [
        ("password for the cluster admin user is Hunter2a", ["Hunter2a"], ["password for the cluster admin user is "]),
        ("the token of the default service account in kube-system: Tok9bXyzAB", ["Tok9bXyzAB"],
         ["the token of the default service account in kube-system: "]),
        ("q=password+is+Hunter2c&page=2", ["Hunter2c"], ["q=password+is+", "&page=2"]),
        ("q=password%20is%20Hunter2d", ["Hunter2d"], ["q=password%20is%20"]),
        ("msg=the+token+for+node-a+is+Tok9eXyzAB&x=1", ["Tok9eXyzAB"], ["msg=the+token+for+node-a+is+", "&x=1"]),
        ("password+is+Hunter2f", ["Hunter2f"], ["password+is+"]),
        ("pass=Hunter2g&user=a", ["Hunter2g"], ["pass=", "&user=a"]),
    ],
    "env: a command line's assignments, Go's %v, Dockerfile's ENV, PowerShell (fourth review L10/L11)": [
        ("env FOO=1 DB_PASSWORD=EnvPw9a cmd", ["EnvPw9a"], ["env FOO=1 DB_PASSWORD=", " cmd"]),
        # assignments starting a line stay an env file's (docker reads FOO's value to the end of the line): fails closed
        ("FOO=1 DB_PASSWORD=EnvPw9b more words", ["EnvPw9b", "more words"], ["FOO=1 DB_PASSWORD="]),
        ("sudo env -i DB_PASSWORD=EnvPw9c API_TOKEN=EnvTok9c app run", ["EnvPw9c", "EnvTok9c"], [" app run"]),
        ("map[password:GoPw9d token:GoTok9d user:a]", ["GoPw9d", "GoTok9d"], ["map[password:", " user:a]"]),
        ("&{Username:a Password:GoPw9e Token:GoTok9e}", ["GoPw9e", "GoTok9e"], ["&{Username:a Password:"]),
        ("ENV DB_PASSWORD Secret9f", ["Secret9f"], ["ENV DB_PASSWORD "]),
        ("FROM alpine\nENV API_TOKEN a b Tok9g\nRUN make", ["Tok9g", "a b"], ["ENV API_TOKEN ", "\nRUN make"]),
        ('$env:DB_PASSWORD = "PsPw9h"', ["PsPw9h"], ["$env:DB_PASSWORD = "]),
        ("$env:API_TOKEN='PsTok9i'", ["PsTok9i"], ["$env:API_TOKEN="]),
    ],
    "abbreviation: pw, pwd; OAuth's code, client_secret, refresh_token (fourth review L12)": [
        ("DB_PW=DbPw9a", ["DbPw9a"], ["DB_PW="]), ("pw: Pw9b", ["Pw9b"], ["pw: "]), ("pwd=Pwd9c", ["Pwd9c"], ["pwd="]),
        ("--pw Pw9dAbc", ["Pw9dAbc"], ["--pw "]), ("DB_PSWD=Pswd9e", ["Pswd9e"], ["DB_PSWD="]),
        ("GET /cb?code=SplxlOBeZQQYbYS6WxSbIA&state=xyz", ["SplxlOBeZQQYbYS6WxSbIA"], ["/cb?code=", "&state=xyz"]),
        ("https://app/cb?state=xyz&code=4%2F0AfJohXn", ["0AfJohXn"], ["?state=xyz&code="]),
        ("next=https%3A%2F%2Fapp%2Fcb%3Fcode%3DOaCode9f%26state%3Dxyz", ["OaCode9f"], ["%3Fcode%3D", "%26state%3Dxyz"]),
        ("client_secret=CliSec9g&refresh_token=Refr9g", ["CliSec9g", "Refr9g"], ["client_secret=", "&refresh_token="]),
        ("code_verifier=dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", ["dBjftJeZ4CVP"], ["code_verifier="]),
        ("kubeadm join 10.0.0.1:6443 --discovery-token abcdef.0123456789abcdef --discovery-token-ca-cert-hash "
         "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ["0123456789abcdef "],
         ["--discovery-token ", "--discovery-token-ca-cert-hash sha256:0123456789abcdef0123"]),
        ("kubeadm join h:6443 --token abcdef.0123456789abcdef", ["0123456789abcdef"], ["--token "]),
    ],
    "kubeadm's certificate key, a quoted value nested in another assignment, separators of other languages (third review)": [
        ("kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef --control-plane --certificate-key "
         "f8902e114ef118304e561c3ecd4d0b543adc226b7a07f675f56564185ffe0c07", ["f8902e114ef1183", "0123456789abcdef"],
         ["kubeadm join 10.0.0.1:6443 --token ", " --control-plane --certificate-key "]),
        ("--certificate-key=0c07f8902e114ef118304e561c3ecd4d0b543adc226b7a07f675f56564185ffe", ["0c07f8902e114ef"],
         ["--certificate-key="]),
        ("[upload-certs] Using certificate key:\n5f56564185ffe0c07f8902e114ef118304e561c3ecd4d0b543adc226b7a07f67",
         ["5f56564185ffe0c"], ["[upload-certs] Using certificate key:\n"]),
        ("--encryption-key Enc9Key7Sekr", ["Enc9Key7Sekr"], ["--encryption-key "]),
        ("Ocp-Apim-Subscription-Key: Sub9Key7Sekr", ["Sub9Key7Sekr"], ["Ocp-Apim-Subscription-Key: "]),
        ('Environment=DB_PASSWORD="EnvQ1Sekr"', ["EnvQ1Sekr"], ['Environment=DB_PASSWORD="']),
        ("Environment=DB_PASSWORD='EnvQ2Sekr'", ["EnvQ2Sekr"], ["Environment=DB_PASSWORD='"]),
        ('Environment=DB_PASSWORD="alpha EnvQ3Sekr" OTHER=x', ["EnvQ3Sekr", "alpha"], ['" OTHER=x']),
        ('env: DB_PASSWORD="EnvQ4Sekr"', ["EnvQ4Sekr"], ["env: DB_PASSWORD="]),
        ('+FOO=DB_PASSWORD="EnvQ5Sekr"', ["EnvQ5Sekr"], ["+FOO=DB_PASSWORD="]),
        ("API Key => Sep1Sekr", ["Sep1Sekr"], ["API Key => "]),
        ("DB_PASSWORD := Sep2Sekr", ["Sep2Sekr"], ["DB_PASSWORD := "]),
        ('password := "Sep3Sekr"', ["Sep3Sekr"], ["password := "]),
        ("TOKEN ::= Sep4Sekr", ["Sep4Sekr"], ["TOKEN ::= "]),
        ("token ?= Sep5Sekr", ["Sep5Sekr"], ["token ?= "]),
        ("token += Sep6Sekr", ["Sep6Sekr"], ["token += "]),
        ("pwd: PwdK1Sekr", ["PwdK1Sekr"], ["pwd: "]), ("password: notfound9X", ["notfound9X"], ["password: "]),
        ("token_cleaner.go: TokG1Sekr", ["TokG1Sekr"], ["token_cleaner.go: "]),
        ("data=%7B%22password%22%3A%22PctJ1Sekr%22%7D", ["PctJ1Sekr"], ["data=%7B%22password%22%3A%22", "%22%7D"]),
        ("data=%7B%22token%22%3A%20%22PctJ2Sekr%22%7D", ["PctJ2Sekr"], ["%22token%22%3A%20%22"]),
        ("data=%257B%2522password%2522%253A%2522PctJ3Sekr%2522%257D", ["PctJ3Sekr"], ["%2522password%2522%253A"]),
        ("q=%27password%27%3D%27PctJ4Sekr%27", ["PctJ4Sekr"], ["q=%27password%27%3D%27"]),
        ("headers=%7B%22Authorization%22%3A%22Bearer%20PctJ5Sekr%22%7D", ["PctJ5Sekr"],
         ["%22Authorization%22%3A%22Bearer%20", "%22%7D"]),
        ("Authorization%3D%22Bearer%20PctJ6Sekr%22", ["PctJ6Sekr"], ["Authorization%3D%22Bearer%20"]),
    ],
}

HIDDEN["fifth review: what the kept rules kept by a name alone (component, public key and hash names, log forms, a "
       "public key's comment, caCertHashes)"] = [
    # a secret word in a component's name wins: its value is shown only when it reads as data
    ("db_password_manager: %s" % S5, [S5], ["db_password_manager: "]),
    ("DB_PASSWORD_ROTATOR=%s" % S5, [S5], ["DB_PASSWORD_ROTATOR="]),
    ('{"token_syncer": "%s"}' % S5, [S5], ['{"token_syncer": "']),
    ("--vault-token-plugin=%s" % S5, [S5], ["--vault-token-plugin="]),
    ("vault_token_reviewer: %s" % S5, [S5], ["vault_token_reviewer: "]),
    ("token-cleaner: %s" % S5, [S5], ["token-cleaner: "]),
    # a public key's or a hash's name keeps only a well-formed public key or hash
    ("publicKey: %s" % S5, [S5], ["publicKey: "]), ("ssh_pub_key: %s" % S5, [S5], ["ssh_pub_key: "]),
    ("public_private_key: %s" % S5, [S5], ["public_private_key: "]),
    ("cert_secret_hash: %s" % S5, [S5], ["cert_secret_hash: "]),
    ("host_token_fingerprint: %s" % S5, [S5], ["host_token_fingerprint: "]),
    ("--discovery-token-ca-cert-hash %s" % S5, [S5], ["--discovery-token-ca-cert-hash "]),
    ("--discovery-token-ca-cert-hash=%s" % S5, [S5], ["--discovery-token-ca-cert-hash="]),
    # kept before by the name (or the type) alone, hidden now: a cut-short key blob, a key's free-text comment
    ("publicKey: AAAAC3NzaC1lZDI1NTE5AAAAIGb0Zk4xQ7Wm3aV2", ["IGb0Zk4xQ7Wm3aV2"], ["publicKey: "]),
    ("sshKey: ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7x9 user@host", ["AAAAB3NzaC1yc2EAAAADAQABAAABAQC7x9"], ["sshKey: "]),
    ("publicKey: ssh-ed25519 %s my password is %s" % (ED25519, S5), [S5], ["publicKey: "]),
    # a quoted key after a word, KEY=VALUE before 'not found', a namespace after any word: no log line of kubelet's
    ('vault write auth/userpass/users/bob "password"="%s"' % S5, [S5], ['users/bob "password"="']),
    ('helm upgrade app ./chart --set "password"="%s"' % S5, [S5], ['--set "password"="']),
    ('msg "password": "%s"' % S5, [S5], ['msg "password": "']),
    ("DB_PASSWORD=%s not found" % S5, [S5], ["DB_PASSWORD="]),
    ("auth default/password: hunter", ["hunter"], ["auth default/password: "]),
    ('volume "password" : hunter', ["hunter"], ['volume "password" : ']),
    # an SSH public key's shape under a secret's name that is not a public key's
    ("token: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 %s" % S5, [S5], ["token: "]),
    ("token: ssh-ed25519 %s user@host" % ED25519, ["user@host"], ["token: "]),
    ("SSH_PRIVATE_KEY=ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI %s" % S5, [S5], ["SSH_PRIVATE_KEY="]),
    ("sshKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 %s" % S5, [S5], ["sshKey: "]),
    # caCertHashes: anything but sha256:<64 hex> (a bootstrap token in the list: the whole list, fail closed)
    ('caCertHashes: ["sha256:0123", "abcdef.0123456789hunter"]', ["0123456789hunter"], ["caCertHashes: ["]),
    ("caCertHashes:\n- %s" % S5, [S5], ["caCertHashes:\n- "]),
    ("discovery:\n  caCertHashes:\n  - %s\n  - %s\n  token: x" % (CA_HASH, S5), [S5], ["  caCertHashes:\n  - "]),
]

# the data of the same classes: shown exactly as it is
KEPT = {
    "fourth review: names of Secrets and components, public keys and hashes, public Authorization parameters": [
        'secret "db-secret" not found',
        'MountVolume.SetUp failed for volume "creds" : secret "db-secret" not found',
        "Couldn't get secret default/db-secret: failed to sync secret cache: timed out waiting for the condition",
        "failed to sync secret cache: timed out waiting for the condition", 'secret: "db-secret" not found',
        "token-cleaner: starting", "tokencleaner: ok", "bootstrap-signer: ok", "Starting tokencleaner controller",
        'I1206 controllermanager.go:1] "Started controller" controller="token-cleaner"',
        "--discovery-token-ca-cert-hash sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "caCertHashes: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb0Zk4xQ7Wm3aV2 user@host",
        # (fifth review: a public key's name keeps a well-formed key only - its blob the key's wire format)
        "sshKey: ssh-rsa %s user@host" % RSA, '"sshKey": "ssh-ed25519 %s user@host"' % ED25519,
        "publicKey: %s" % ED25519, "ssh_pub_key: AAAAC3NzaC1lZDI1NTE5", "publicKey: ssh-ed25519 %s" % ED25519,
        "x publicKey: ssh-ed25519 %s user@host" % ED25519, "--discovery-token-ca-cert-hash=" + CA_HASH,
        "caCertHashes:\n- " + CA_HASH, 'caCertHashes: ["%s"]' % CA_HASH,
        "discovery:\n  caCertHashes:\n  - %s\n  - %s\n  token: <redacted by nodefix.k8s>" % (CA_HASH, CA_HASH),
        "host_key_fingerprint: SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
        "token-cleaner: deleted 3 expired tokens",
        'WWW-Authenticate: Digest realm="kube", qop="auth", nonce="n1"', 'Authorization: Digest username="u", realm="r"',
        "PWD=/root", "exit code=1", "/healthz?code=200", "ENV DB_PASSWORD_FILE /run/secrets/db", "ENV TOKEN_TTL 30m",
        "env FOO=1 cmd --v=2",
    ],
    "third review: what reads like a certificate key or a nested quoted secret, and is not one": [
        "client-key: /etc/kubernetes/pki/apiserver-kubelet-client.key", 'Environment=DB_PASSWORD="true"',
        'Environment=PATH="/usr/local/bin:/usr/bin"', 'secretName="default-token-abc12"', 'a=b c="d"',
        "data=%7B%22name%22%3A%22node-1%22%7D", "data=%7B%22passwords%22%3A%223%22%7D",
        # what a log line says of a secret (its state, a sentence's start), a source line, the working directory,
        # a field that describes a secret (a duration, a type, a mode)
        "failed to get secret kube-system/bootstrap-token-abcdef: not found",
        "failed to fetch anonymous token: unexpected status: 401", "I1206 10:00:00.1 1 token_cleaner.go:166] deleted",
        "E1206 auth.go:301] webhook", "PWD=/var/lib/kubelet", "pwd: /home/core", "token: expired", "password: null",
        "tokenExpirationSeconds: 3600", "auth_mode: Webhook", "token_type: bootstrap.kubernetes.io/token",
        "password_history: 5",
        "--discovery-token-unsafe-skip-ca-verification", "ssh-key: /root/.ssh/id_ed25519.pub",
    ],
    "url: percent-encoded URLs without user information": [
        "next=https%3A%2F%2Fh.example.com%3A8443%2Fx", "next=https%3A%2F%2Fgit%40github.com%2Frepo",
        "next=https%3A%2F%2Fh.example.com%2Fa%40b", "GET /cb?next=https://h.example.com/x&y=1",
    ],
    "header: headers and words that are not an encoded credential": [
        "reason=Authorization%20failed", "authorization-mode%3DWebhook", "page%3A2%26limit%3A500",
    ],
    "env: env assignments that hold no secret of several words": [
        "NODE_NAME=worker one", "DB_PASSWORDS=3 rotated", "TOKEN_TTL=30 minutes", "GPG_PASSPHRASE_FILE=/run/a b",
        'Private-Token = ["<redacted by nodefix.k8s>"]', "password = true",
        "host = db one",
    ],
    "prose: prose with a connector phrase and no secret": [
        "password reset for user bob failed", "token for node-a refreshed", "password set to expire in 3 days",
        "password for user admin: 3 attempts left", "password reset to default", "token of node-a is valid",
        "passwords for 3 users rotated", "the token was revoked", "the password was changed: ok",
        "the password of a `user:password` under a user's name",
    ],
    "count: counts": ["passwords: 3 rotated", "tokens=12 issued", "secrets: 4 mounted in 2 pods", "tokens: 5"],
    "version: versions": ["token is v1.28.3", "the token was 1.28.3-rc.1", "kubeadm token is v1.30.0"],
    "generated: names Kubernetes generates": [
        "secret default-token-abc12 mounted", "default-token-abc12: found", "token web-7d9f8b6c5-x2x9z",
        "secret regcred-x7k2p", "secret: vault-token-0", "credential: default-token-abc12", "secret: kube-system/regcred",
        "  secretName: default-token-abc12", '{"secretName": "regcred"}',
    ],
    "node: node names that hold a secret word, and their states": [
        "vault-token-0: Ready", "vault-token-0: NotReady since 5m", "vault-token-1: cordoned, drained",
        "nodes:\n  vault-token-0: Ready\n  vault-token-1: NotReady\n", "storm held: vault-token-2: 3/10 unavailable",
    ],
    "hash: colon-joined lines without a hash": [
        "root:x:0:0:root:/root:/bin/bash", "root:*:19000:0:99999:7:::", 'echo "$1$HOME/foo"',
        'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"',
    ],
    "user: user names with colons": [
        "user: system:serviceaccount:a:b", "user: system:serviceaccount:kube-system:default",
        "subject: system:node:worker-1",
    ],
}


def _rows(table):
    return [(cls, row) for cls, rows in sorted(table.items()) for row in rows]


def _ids(table):
    return ["%s-%02d" % (cls.split(":")[0], i) for i, (cls, _row) in enumerate(_rows(table))]


@pytest.mark.parametrize("cls,row", _rows(HIDDEN), ids=_ids(HIDDEN))
def test_a_leak_of_each_class_is_hidden_and_its_context_shown(cls, row):
    assert_hidden(*row)


@pytest.mark.parametrize("cls,text", _rows(KEPT), ids=_ids(KEPT))
def test_the_data_of_each_class_is_shown_as_it_is(cls, text):
    assert redact_text(text) == text


def test_a_node_map_keeps_its_states_and_hides_a_credential_beside_a_numbered_name():
    # the storm view and the reports print maps keyed by node: a state beside a node's name is data
    value = {"vault-token-0": "Ready", "vault-token-1": "NotReady since 5m", "default-token-abc12": 3,
             "db-password-2": "hunter22", "api-token-3": "RvNumbered08", "user": "system:serviceaccount:a:b",
             "vault-token-2": ["NotReady", "cordoned"], "vault-token-3": ["Ready", "Xy7pQ2mnZZ"]}
    out = redact(value)
    assert out["vault-token-0"] == "Ready" and out["vault-token-1"] == "NotReady since 5m"
    assert out["default-token-abc12"] == 3 and out["user"] == "system:serviceaccount:a:b"
    assert out["db-password-2"] == MARK and out["api-token-3"] == MARK and out["vault-token-3"] == MARK
    assert out["vault-token-2"] == ["NotReady", "cordoned"]


@pytest.mark.parametrize("name,numbered", [
    ("vault-token-0", True), ("db-password-2", True), ("default-token-abc12", True), ("client-secret-x7k2p", True),
    ("auth-01", False), ("token-ring-2", False), ("password", False), ("default-token-abcde", False),
])
def test_a_numbered_name_is_a_nodes_and_a_secrets_alike(name, numbered):
    assert secret_names.numbered(name) is numbered


@pytest.mark.parametrize("value,data", [
    ("Ready", True), ("NotReady since 5m", True), ("v1.28.3", True), ("kube-system", True), (3, True),
    ("cordoned, drained", True), ("X9sdf8sdf", False), ("hunter22", False), ("s3cr3t", False), ("", False),
    (True, False), (["Ready", "cordoned", 3], True), (["Ready", "X9sdf8sdf"], False), ([], False), ([["Ready"]], False),
])
def test_what_reads_as_data_under_a_numbered_name(value, data):
    assert secret_shapes.not_a_secret("vault-token-0", value) is data
    # under a name that is only a secret's, nothing but a count is data
    assert secret_shapes.not_a_secret("password", value) is False


STRUCTURED_HIDDEN = [       # fifth review: a result's mapping (a module's, an Event's): the value hidden whole
    {"password": "%s not found" % S5}, {"token": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 %s" % S5},
    {"db_password_manager": S5}, {"publicKey": S5}, {"env": ["DB_PASSWORD=%s not found" % S5]},
    {"args": ["--discovery-token-ca-cert-hash", S5]}, {"caCertHashes": [CA_HASH, "abcdef.0123456789%s" % S5[:6].lower()]},
    {"token-cleaner": S5}, {"sshKey": "ssh-ed25519 %s %s pass" % (ED25519, S5)},
]
STRUCTURED_KEPT = [
    {"caCertHashes": [CA_HASH]}, {"args": ["kubeadm", "join", "--discovery-token-ca-cert-hash", CA_HASH]},
    {"publicKey": "ssh-ed25519 %s user@host" % ED25519}, {"token-cleaner": "starting"},
    {"secret": '"db-secret" not found'}, {"sshKey": "ssh-rsa %s" % RSA},
]


@pytest.mark.parametrize("value", STRUCTURED_HIDDEN, ids=[str(i) for i in range(len(STRUCTURED_HIDDEN))])
def test_a_structure_hides_what_the_kept_rules_kept_by_a_name_alone(value):
    out = redact(value)
    assert S5 not in str(out) and "0123456789hunter" not in str(out) and MARK in str(out), out


@pytest.mark.parametrize("value", STRUCTURED_KEPT, ids=[str(i) for i in range(len(STRUCTURED_KEPT))])
def test_a_structure_keeps_a_hash_a_public_key_and_a_components_state(value):
    assert redact(value) == value
