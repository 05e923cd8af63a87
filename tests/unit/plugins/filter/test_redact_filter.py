# SPDX-License-Identifier: GPL-3.0-or-later
"""The redaction filters the roles' own tasks use (plugins/filter/redact.py): ``mirror_headers`` builds the containerd
archive's request headers from the variables, else from the URL's user information as Go and runsc_install read it
(split at the last '@', percent-decoded - review finding L7: ``p%40ss`` authenticates as ``p@ss`` - an empty user,
a token as the user); ``url_without_userinfo`` is what every message shows."""

import base64

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.filter.redact import FilterModule

FILTERS = FilterModule().filters()


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


@pytest.mark.parametrize("url, user, password, headers, sent", [
    ("https://u:p%40ss@mirror.example.com/c", "", "", {}, {"Authorization": basic("u", "p@ss")}),
    ("https://u:Pr0xy@Tail@mirror.example.com/c", "", "", {}, {"Authorization": basic("u", "Pr0xy@Tail")}),
    ("https://r%2Fbot:a%3Ab@mirror.example.com", "", "", {}, {"Authorization": basic("r/bot", "a:b")}),
    ("https://:only-pass@mirror.example.com", "", "", {}, {"Authorization": basic("", "only-pass")}),
    ("https://tok3n@mirror.example.com", "", "", {}, {"Authorization": basic("tok3n", "")}),
    ("https://u:url-pass@mirror.example.com", "robot", "var-pass", {}, {"Authorization": basic("robot", "var-pass")}),
    ("https://mirror.example.com", "", "", {"X-JFrog-Art-Api": "k"}, {"X-JFrog-Art-Api": "k"}),
    ("https://mirror.example.com", "", "", {}, {}),
    ("https://mirror.example.com", "robot", "pw", {"Authorization": "Token t"}, {"Authorization": "Token t"}),
])
def test_mirror_headers_as_go_reads_the_url(url, user, password, headers, sent):
    assert FILTERS["mirror_headers"](url, user, password, headers) == sent


def test_a_header_that_is_not_one_line_is_refused_naming_it_not_its_value():
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["mirror_headers"]("https://m", "", "", {"X-Key": "Multi-Line-61\n"})
    assert "X-Key" in str(err.value) and "Multi-Line-61" not in str(err.value)


def test_the_url_shown_has_no_user_information():
    assert FILTERS["url_without_userinfo"]("https://u:p%40ss@Tail@mirror.example.com:8443/c?x=1") == \
        "https://mirror.example.com:8443/c?x=1"
