# SPDX-License-Identifier: GPL-3.0-or-later
"""The patterns added after the second (third and fourth) review of issue 61 stay linear (the redactor reads journals and whole files):
each fed 100 kB strings built against it - runs that make an unbounded or nested pattern backtrack - through the
function that applies it (``READER``; the whole redactor for the patterns of ``_core.redact``). No duration is
asserted (no test does): each text is redacted in a worker process, and the test asserts that the worker finished
within a generous bound (120 s for all of one pattern's strings; quadratic reading of 100 kB takes hours), with a
string as its answer. The seconds are printed for the record."""

import multiprocessing
import time

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact as redact_module
from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_shapes
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact, redact_text

N = 100 * 1024

# pattern -> strings of about 100 kB built to make it backtrack
ADVERSARIAL = {
    # second review of 2026-12-07: '{value: x' never closed was read from every '{' to the line's end (100 KB ~18 s)
    "Kubernetes name/value pairs in flow style (_ENV_PAIR_FLOW)": [
        "name " + "{value: x" * (N // 9), "name " + "{name: A, value: x" * (N // 18), "{value: " + "x," * (N // 2),
    ],
    "Authorization arrays (_AUTH_ARRAY)": [
        "Authorization = [" * (N // 17), "Authorization = [" + '"a",' * (N // 4), "Authorization:\n" * (N // 15),
    ],
    "percent-encoded URL user information (_PCT_USERINFO)": [
        "a%3A%2F%2F" + "%41" * (N // 3), " x%3A%2F%2F" * (N // 11), "a%3A%2F%2Fu%3A" + "%40" * (N // 3),
        "a%253A%252F%252F" + "b%253A" * (N // 6), "a%3A//" + "%3A" * (N // 3) + "@", "h%3A%2F%2F" + "u" * N,
        ("a%3A%2F%2Fu%3Ap%40" * (N // 18)),
    ],
    "percent-encoded Authorization (_PCT_AUTH)": [
        "Authorization%3A" + "%20" * (N // 3), ("Authorization%3A+Bearer+") * (N // 24),
        "authorization%3D" + "+" * N, "Authorization%3A%20Bearer%20" + "x" * N,
        "%0AAuthorization%253A" + "%2520" * (N // 5),
    ],
    "percent-encoded secret header (_PERCENT with ':')": [
        "token%3A" + "%20" * (N // 3), "token%3A" * (N // 8), "x-auth-token%253A" + "+" * N,
        "%22token%22%3A%22" * (N // 17), "%2522" * (N // 5) + "token%3D", "token%22%3A" + "%22" * (N // 3),
        "%22Authorization%22%3A%22" * (N // 25), "Authorization%22%3A%22Bearer%20" + "x" * N,
    ],
    "a connector phrase in prose (_PROSE)": [
        "password for " + "a " * (N // 2), "password for a b c " * (N // 19), "password has been " * (N // 18),
        "token" + " is now" * (N // 7), "token of " + "x" * N, "password reset " * (N // 15),
        "secret " + "for " * (N // 4) + "x",
        "token for " + "a:" * (N // 2), ("token for https://h:" * (N // 20)),
    ],
    "an env file's value of several words (_ENV_KEY, _ENV_VALUE)": [
        "A=" * (N // 2), "PASSWORD=" + "a " * (N // 2), "PASSWORD=a " + "b " * (N // 2) + "-x",
        "API_TOKEN=" * (N // 10), "A=B=" * (N // 4), "TOKEN=x y " * (N // 10), "\nexport token=a b" * (N // 17),
        # a value that starts inside the words of the last one (each word read once, not once per name)
        "A_TOKEN=x 'A_TOKEN=x " * (N // 20) + "-f", "A_TOKEN=x " + "y " * (N // 2) + "A_TOKEN=",
        # an INI line's blanks around its '='
        "\npassword = a b" * (N // 15), "password" + " " * N + "= a b", "\n" + " " * N + "password = a b",
    ],
    "a form body's Authorization (_AUTH_HEADER)": [
        "Authorization: " + "&a" * (N // 2), "Authorization=Bearer+" + "&" * N, "Authorization=" + "x+" * (N // 2),
    ],
    "data under a numbered name (secret_names._DATA_NAME, secret_shapes.not_a_secret)": [
        "a-" * (N // 2) + "token-abc12: x", "a-1" * (N // 3) + ": Ready", "vault-token-0: " + "Ready " * (N // 6),
        "passwords: 3 " + "a " * (N // 2), "token is " + "ab-" * (N // 3), "token is v1" + ".1" * (N // 2),
    ],
    "a password hash in crypt's format (PREFIXED)": [
        "$6$" + "a" * N, "$6$rounds=1$" * (N // 12), "$y$" + "a$" * (N // 2), "x:$1$" * (N // 5), "$2y$10$" + "." * N,
    ],
    "colon-joined values read again (_key_value)": [
        "user: " + "a:" * (N // 2), "x: " + "token:" * (N // 6), "x: " + "a\\\":" * (N // 4),
        # a name run without its colon after a colon (the parts were read from every character: 10 kB took 50 s)
        "x: :" + "a" * N, "x: :" + "a-" * (N // 2), "x: " + ":a" * (N // 2), "x: " + "a" * N + ":b:c",
    ],
    "a quoted value after a secret's name, kubeadm's certificate key (_QUOTED_AFTER_NAME, _CERTIFICATE_KEY)": [
        'A="' * (N // 3), 'password="' + "a" * N, "x=" + "a" * N + '="b"', 'a.b-' * (N // 4) + '="x"',
        "token ='" + "\\" * N, "certificate key:" * (N // 16), "certificate key:\n" + "0" * N,
        ('password := "' + "x\\\"" * (N // 3) + '"'), "api key =" * (N // 9), "API key => " + ">" * N,
    ],
    "the fast path (secret_shapes.benign)": ["a" * N, "ab-" * (N // 3), "abcdef." * (N // 7), "/-" * (N // 2),
                                             "password+" * (N // 9), "a+" * (N // 2)],
    # the fourth review's
    "auth-params of an Authorization scheme (auth_params)": [
        "Authorization: Digest " + "a=b, " * (N // 5), 'Authorization: Digest a="' + "x" * N,
        "Authorization: Token t=x " * (N // 24), 'Authorization: Digest a=\\"' + '\\"' * (N // 2),
        "Authorization: X " + "a" * N + "=b", "authorization:" * (N // 14), "Authorization: D a=" + "=" * N,
    ],
    "a command line's assignments, Dockerfile's ENV (_COMMAND_RUN, _DOCKER_ENV)": [
        "env " + "A=x " * (N // 4) + "B_TOKEN=y z", "env" + " -i" * (N // 3) + " A_TOKEN=x y",
        "env" + " -u x" * (N // 5) + " A_TOKEN=x y", "A=1 " * (N // 4) + "API_TOKEN=a b", 'A="' * (N // 3) + " A_TOKEN=a b",
        "\nA=1 B=2" * (N // 8) + " API_TOKEN=a b", "ENV " + "A" * N + " x", "\nENV A_TOKEN x y" * (N // 16),
        "#(nop)" * (N // 6) + " ENV TOKEN x", "env " * (N // 4) + "A_TOKEN=x y",
    ],
    "an encoded URL's password with an encoded '/' (_PCT_USERINFO's second reading)": [
        "a%3A%2F%2Fu%3A" + "%2F" * (N // 3), "a%3A%2F%2Fu%3Ap%2F" + "%40" * (N // 3),
        "h%3A%2F%2Fu%3Ap%2Fx" * (N // 18) + "%40h", "a%3A%2F%2F" + "%3A" * (N // 3) + "%40h",
    ],
    "prose form-encoded, a longer connector phrase (_PROSE with '+', '%20')": [
        "password+for+" + "a+" * (N // 2), "token%20" * (N // 8), "password+is+" * (N // 12),
        "q=password+for" + "+a" * (N // 2) + "+is+X", "password" + "%20" * (N // 3) + "is",
        "token for " + "a " * (N // 2) + ": x", "password%20for%20" + "a%20" * (N // 4),
    ],
    "a log line's object names, OAuth's code (named_in_a_log, _QUERY_KEY)": [
        'x "' + 'password" : ' * (N // 12), "default/" * (N // 8) + "db-secret: failed", "secret: x" + " " * N + "not found",
        "?code=" * (N // 6), "&code=" + "1" * N, "%3Fcode%3D" * (N // 10), 'v "token" : ' + "a" * N,
        'volume "password" : secret ' * (N // 27), "secret default/password: a" + " " * N, "get secret a/" * (N // 13),
    ],
    # the fifth review's
    "what is kept by a name and a value together (secret_kept: kept_in_text, public_value, component_name)": [
        "sshKey: ssh-rsa " * (N // 16), "publicKey: ssh-ed25519 AAAA" + "A" * N, "sshKey: ssh-rsa AAAA" + "AAAA " * (N // 5),
        "caCertHashes: [" + '"sha256:0", ' * (N // 12) + "]", "caCertHashes:\n" + "- sha256:0\n" * (N // 11),
        "caCertHashes:" + "\n- " * (N // 3), "token-cleaner: " + "ok " * (N // 3), "publicKey: " + "AAAA" * (N // 4),
        "x: [" + "[" * N, "a_token_manager: a" + " b" * (N // 2), "publicKey: |\n" + "  AAAA\n" * (N // 7),
    ],
}


# the function that applies each pattern (the whole redactor for those of _core.redact: it is what they run in)
READER = {
    "colon-joined values read again (_key_value)": lambda t: redact_module._KEY_VALUE.sub(redact_module._key_value, t),
    "a password hash in crypt's format (PREFIXED)": lambda t: secret_shapes.prefixed(t, MARK),
    "percent-encoded URL user information (_PCT_USERINFO)": lambda t: secret_shapes.percent_encoded(t, MARK),
    "percent-encoded Authorization (_PCT_AUTH)": lambda t: secret_shapes.percent_encoded(t, MARK),
    "percent-encoded secret header (_PERCENT with ':')": lambda t: secret_shapes.percent_encoded(t, MARK),
    "a connector phrase in prose (_PROSE)": lambda t: secret_shapes.prose(t, MARK),
    "prose form-encoded, a longer connector phrase (_PROSE with '+', '%20')": lambda t: secret_shapes.prose(t, MARK),
    "auth-params of an Authorization scheme (auth_params)": lambda t: secret_shapes.auth_params(t, MARK),
    "a command line's assignments, Dockerfile's ENV (_COMMAND_RUN, _DOCKER_ENV)":
        lambda t: secret_shapes.env_values(t, MARK),
    "an encoded URL's password with an encoded '/' (_PCT_USERINFO's second reading)":
        lambda t: secret_shapes.percent_encoded(t, MARK),
    "an env file's value of several words (_ENV_KEY, _ENV_VALUE)": lambda t: secret_shapes.env_values(t, MARK),
    "a quoted value after a secret's name, kubeadm's certificate key (_QUOTED_AFTER_NAME, _CERTIFICATE_KEY)":
        lambda t: redact_text(secret_shapes.quoted_values(t, MARK)),
}


def _redact_all(pattern, queue):
    texts, read = ADVERSARIAL[pattern], READER.get(pattern, redact_text)
    started, sizes = time.time(), []
    for text in texts:
        sizes.append(len(read(text)))
    # a result's mapping: the value under a numbered name read as data or not (secret_shapes.not_a_secret)
    sizes.append(len(redact({"vault-token-0": texts[-1], "a-" * (N // 2) + "token-1": texts[0]})))
    # and under a hash's, a public key's and a component's name (secret_kept.public_value, component_name)
    sizes.append(len(redact({"caCertHashes": texts[:2], "publicKey": texts[-1], "token_syncer": texts[0]})))
    queue.put((sizes, time.time() - started))


@pytest.mark.parametrize("pattern", sorted(ADVERSARIAL))
def test_each_new_pattern_reads_100_kb_built_against_it_in_one_go(pattern):
    texts = ADVERSARIAL[pattern]
    assert all(len(t) >= 90 * 1024 for t in texts), [len(t) for t in texts]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    worker = ctx.Process(target=_redact_all, args=(pattern, queue))
    worker.start()
    worker.join(120)
    if worker.is_alive():
        worker.terminate()
        worker.join()
        pytest.fail("%s: 100 kB strings not read within 120 s (backtracking)" % pattern)
    sizes, seconds = queue.get(timeout=10)
    print("%s: %d strings, %.2f s" % (pattern, len(texts), seconds))
    assert worker.exitcode == 0 and len(sizes) == len(texts) + 2 and all(sizes), (worker.exitcode, sizes)
