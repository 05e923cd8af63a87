# SPDX-License-Identifier: GPL-3.0-or-later
"""URL user information, read one way: the redactor (_core/redact) and _core/mirror_auth.split_userinfo (which the
mirror, Prometheus and filter code use) follow Go's url.Parse (net/url: the authority to the first '/', '?' or '#',
its user information to the last '@' in it, the password after the first ':'). Every URL of a grid of user names,
passwords (every character Go takes raw, and '/', '?', '#', '@', quotes), hosts, ports and paths (with '@') is held
to one rule: where split_userinfo reads a password the redactor shows exactly the URL with that password hidden
(host, port and path kept); where it reads a user alone, the redactor hides it unless it is a plain user name;
where it reads none, the redactor changes nothing; and where it refuses the URL (not valid, or ambiguous - review
finding: ``https://u:123/x@h`` is host u, port 123 and path /x@h to Go, and the password ``123/x`` by its shape),
the redactor hides what could be the password. Never both showing it."""

import itertools

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import mirror_auth
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact_text, url_userinfo

USERS = ["", "robot", "user1", "o'brien", "a.b-c", "u!x$", "u%40x", "ghp_0123456789abcdefghijABCDEFGHIJ0123"]
# None: no ':' (a user alone); every password carries Zq, so that a leak is seen whatever the rest shows
PASSWORDS = [None, "", "Zq", "123/Zq", "9876Zq", "Zq@Tail", "Pw/Zq", "Pw?Zq", "Pw#Zq", "Pw'Zq", "Pw%2FZq",
             "Pw!$&()*+,;=Zq", "Pw:Zq", "0/Zq"]
HOSTS = ["h.example.com", "10.0.0.1", "[fe80::1%25eth0]", "h!x", ""]
PORTS = ["", ":443"]
RESTS = ["", "/x", "/x@y", "/a@b?c=1", "#f", "/p?x=@y", "/@scope/pkg"]
PLAIN = ("robot", "a.b-c")  # user names alone (letters, '.', '-', no digit): nothing to hide


def urls():
    for user, password, host, port, rest in itertools.product(USERS, PASSWORDS, HOSTS, PORTS, RESTS):
        if not user and password is None:
            yield "https://%s%s%s" % (host, port, rest), None, None
            continue
        userinfo = user + ("" if password is None else ":" + password)
        yield "https://%s@%s%s%s" % (userinfo, host, port, rest), user, password


CASES = list(urls())


def test_the_grid_is_large_and_holds_the_reviewed_shape():
    assert len(CASES) > 5000
    assert ("https://u:123/x@h", "u", "123/x") not in CASES  # built below with its own rows
    assert any(c[0] == "https://robot:123/Zq@h.example.com" for c in CASES)


@pytest.mark.parametrize("chunk", range(8))
def test_split_userinfo_and_the_redactor_read_every_url_the_same_way(chunk):
    for url, user, password in CASES[chunk::8]:
        shown = redact_text(url)
        assert redact_text(shown) == shown, url
        try:
            clean, got_user, got_password = mirror_auth.split_userinfo(url, "base_url")
        except NodefixError as exc:
            assert "Zq" not in exc.msg and "base_url" in exc.msg, url
            # refused: what could be the password is hidden all the same
            assert "Zq" not in shown and "ghp_" not in shown, (url, shown)
            continue
        head = url[:url.index("://") + 3]
        after = url[len(head):]
        if got_password is not None:
            userinfo = url_userinfo(url)
            name = userinfo.partition(":")[0]
            name = MARK if name.startswith("ghp_") else name  # a token as the user name: hidden by its shape too
            assert shown == head + name + ":" + MARK + "@" + after[len(userinfo) + 1:], (url, shown)
            assert clean == head + after[len(userinfo) + 1:], url
        elif got_user is not None:
            rest = after[len(url_userinfo(url)) + 1:]
            assert shown == (url if got_user in PLAIN else head + MARK + "@" + rest), (url, shown)
        else:
            assert shown == url, (url, shown)
            assert not (user or password), url  # a URL with user information never reads as one without


@pytest.mark.parametrize("url, shown", [
    # the reviewed shape: a password of digits then a raw '/' - Go reads host:port and a path with an '@'
    ("https://u:123/x@h", "https://u:%s@h" % MARK),
    ("https://u:123/x@h.example.com/repo", "https://u:%s@h.example.com/repo" % MARK),
    ("https://u:1?x@h", "https://u:%s@h" % MARK),
    ("https://u:1#x@h", "https://u:%s@h" % MARK),
    # the same shape written on purpose (a path with '@' after host:port): hidden too - the decided false positive
    ("http://proxy:3128/a@b", "http://proxy:%s@b" % MARK),
    # Go's reading first: the last '@' of the authority, the path's '@' kept
    ("https://user:Pw'Quote12@h.example.com/a@b?x=1", "https://user:%s@h.example.com/a@b?x=1" % MARK),
    ("https://u:p@h!x/", "https://u:%s@h!x/" % MARK),
    ("https://o'brien:p@h/", "https://o'brien:%s@h/" % MARK),
    ("https://u:p@/x", "https://u:%s@/x" % MARK),
])
def test_reviewed_urls(url, shown):
    assert redact_text(url) == shown
    assert redact_text("GET %s failed" % url) == "GET %s failed" % shown


@pytest.mark.parametrize("url", ["https://u:123/x@h", "http://proxy:3128/a@b", "https://u:1?x@h"])
def test_split_userinfo_refuses_an_ambiguous_url_without_quoting_it(url):
    with pytest.raises(NodefixError) as exc:
        mirror_auth.split_userinfo(url, "prometheus_url")
    assert "prometheus_url" in exc.value.msg and "ambiguous" in exc.value.msg and url not in exc.value.msg
    assert mirror_auth.split_userinfo(url.replace("@", "%40"), "prometheus_url")[1:] == (None, None)
