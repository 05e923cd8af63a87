# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's Prometheus client: what it sends (bearer token from a file, headers) to a local HTTP
TEST DOUBLE that records each request and answers as the HTTP API does, and that no credential reaches
an error. TLS, basic auth and the real API are in tests/unit/plugins/modules/test_prometheus_real.py."""

import base64
import http.server
import json
import threading

import pytest

from ansible.module_utils.urls import open_url

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.sig"


class Double(http.server.BaseHTTPRequestHandler):
    """A Prometheus HTTP API TEST DOUBLE: records the request, answers ``answer`` (status, body)."""
    seen = []
    answer = (200, {"status": "success", "data": {"resultType": "vector", "result": []}})

    def do_GET(self):  # noqa: N802 - the name http.server calls
        Double.seen.append({"path": self.path, "headers": dict((k.lower(), v) for k, v in self.headers.items())})
        status, body = Double.answer
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def server():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Double)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    Double.seen = []
    Double.answer = (200, {"status": "success", "data": {"resultType": "vector", "result": []}})
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


def test_a_bearer_token_from_a_file_and_extra_headers_are_sent_and_read_each_time(server, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    client = prometheus_client.Client(open_url, server, token_file=str(token), headers={"X-Scope-OrgID": "team-a"})
    result, warnings = client.query("up", 1800000000)
    assert result == [] and warnings == []
    sent = Double.seen[-1]
    assert sent["headers"]["authorization"] == "Bearer " + TOKEN and sent["headers"]["x-scope-orgid"] == "team-a"
    assert "time=1800000000.000" in sent["path"] and "partial_response=false" in sent["path"]
    token.write_text("rotated-token")
    client.query("up", 1800000000)
    assert Double.seen[-1]["headers"]["authorization"] == "Bearer rotated-token" and client.requests == 2


def test_warnings_are_returned_for_the_caller_to_decide(server):
    Double.answer = (200, {"status": "success", "warnings": ["store unreachable"],
                           "data": {"resultType": "vector", "result": []}})
    assert prometheus_client.Client(open_url, server).query("up", 1)[1] == ["store unreachable"]


@pytest.mark.parametrize("answer, error, says", [
    ((401, {"status": "error", "error": "Authorization: Bearer " + TOKEN}), prometheus_client.NoAnswer, "401"),
    ((400, {"status": "error", "errorType": "bad_data", "error": "parse error"}), prometheus_client.NoAnswer, "bad_data"),
    ((200, b"<html>login</html>"), prometheus_client.BadAnswer, "not JSON"),
    ((200, {"status": "error"}), prometheus_client.BadAnswer, "without a success status"),
    ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}), prometheus_client.BadAnswer, "vector"),
    ((200, {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}),
     prometheus_client.BadAnswer, "malformed sample"),
    # a label value that is not a string (the API's are strings): a bad answer, never a node skipped
    ((200, {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": 5}, "value": [1, "1"]}]}}), prometheus_client.BadAnswer, "not all strings"),
])
def test_an_answer_that_is_not_the_apis_is_an_error_naming_no_credential(server, tmp_path, answer, error, says):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    Double.answer = answer
    with pytest.raises(error) as err:
        prometheus_client.Client(open_url, server, token_file=str(token)).query("up", 1)
    assert says in err.value.msg and TOKEN not in err.value.msg and "c2VjcmV0LXRva2Vu" not in err.value.msg


def test_a_server_that_does_not_answer_is_an_error(server):
    with pytest.raises(prometheus_client.NoAnswer, match="did not answer"):
        prometheus_client.Client(open_url, server.rsplit(":", 1)[0] + ":9", timeout=2).query("up", 1)


@pytest.mark.parametrize("kw, says", [
    ({"url": "ftp://prom"}, "http:// or https://"),
    ({"password": "hunter2"}, "needs a username"),
    ({"username": "u", "password": "hunter2", "token_file": "/t"}, "exclude each other"),
    ({"headers": {"Authorization": "Basic aHVudGVyMg=="}}, "set by the client"),
    ({"headers": {"X-Bad\n": "v"}}, "not an HTTP header name"),
    ({"headers": {"X-Org": "a\r\nInjected: hunter2"}}, "one-line"),
    ({"timeout": 0}, "above 0"),
])
def test_options_that_cannot_work_fail_before_asking_and_name_no_secret(kw, says):
    args = dict({"url": "http://prom:9090"}, **kw)
    with pytest.raises(NodefixError) as err:
        prometheus_client.Client(open_url, args.pop("url"), **args)
    assert says in err.value.msg and "hunter2" not in err.value.msg and "aHVudGVyMg" not in err.value.msg


def test_an_unreadable_or_empty_token_file_is_named_not_read_out(tmp_path):
    (tmp_path / "token").write_text("two tokens")
    for path, says in ((tmp_path / "missing", "cannot be read"), (tmp_path / "token", "no single token")):
        with pytest.raises(NodefixError, match=says) as err:
            prometheus_client.Client(open_url, "http://prom:9090", token_file=str(path)).query("up", 1)
        assert "two tokens" not in err.value.msg


# issue 61 item 1: a URL with user information works as Go's client reads it (split at the last '@', percent-decoded,
# an empty user, a user alone), sent as basic auth; never shown; a warning names the options
@pytest.mark.parametrize("userinfo, user, password", [
    ("admin:hunter2@", "admin", "hunter2"),
    ("admin:hun@ter2@", "admin", "hun@ter2"),          # the last '@' ends the user information
    ("admin:p%40ss%3Aw@", "admin", "p@ss:w"),           # percent-decoded
    (":hunter2@", "", "hunter2"),                       # https://:pass@host
    ("hunter2token@", "hunter2token", ""),              # a token as the user
])
def test_a_url_with_user_information_works_warns_and_is_never_shown(server, userinfo, user, password):
    url = server.replace("http://", "http://" + userinfo)
    client = prometheus_client.Client(open_url, url)
    assert client.where == server and client.url == server
    assert client.warnings == [prometheus_client.URL_WARNING]
    assert "prometheus_username" in client.warnings[0] and "prometheus_token_file" in client.warnings[0]
    client.query("up", 1)
    sent = Double.seen[-1]["headers"]["authorization"]
    assert sent == "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    Double.answer = (500, {"status": "error", "error": "boom"})
    with pytest.raises(prometheus_client.NoAnswer) as err:
        client.query("up", 1)
    assert "hunter2" not in err.value.msg and "p%40ss" not in err.value.msg and server in err.value.msg


def test_the_options_win_over_a_urls_user_information(server, tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    client = prometheus_client.Client(open_url, server.replace("http://", "http://admin:hunter2@"),
                                      token_file=str(tmp_path / "token"))
    client.query("up", 1)
    assert Double.seen[-1]["headers"]["authorization"] == "Bearer " + TOKEN and client.warnings
    prometheus_client.Client(open_url, server.replace("http://", "http://admin:hunter2@"), username="robot",
                             password="opt").query("up", 1)
    assert Double.seen[-1]["headers"]["authorization"] == "Basic " + base64.b64encode(b"robot:opt").decode()
    prometheus_client.Client(open_url, server).query("up", 1)
    assert "authorization" not in Double.seen[-1]["headers"]


def test_the_clients_own_credential_values_leave_no_error_or_warning(server, tmp_path):
    """A body (or a warning) that echoes the password, a header's value or the token read from the token file:
    none is shown, however it is written (the shape-based redaction alone misses these)."""
    secret = "Echo-Pw-63"
    token = tmp_path / "token"
    token.write_text(secret)
    for kw in ({"username": "robot", "password": secret}, {"headers": {"X-Api-Key": secret}},
               {"token_file": str(token)}):
        client = prometheus_client.Client(open_url, server, **kw)
        Double.answer = (401, b"Unauthorized (invalid credentials robot/" + secret.encode() + b")")
        with pytest.raises(prometheus_client.NoAnswer) as err:
            client.query("up", 1)
        assert "Unauthorized" in err.value.msg and secret not in err.value.msg
        Double.answer = (200, {"status": "success", "warnings": ["X-Api-Key %s rejected by a store" % secret],
                               "data": {"resultType": "vector", "result": []}})
        (warning,) = client.query("up", 1)[1]
        assert "rejected by a store" in warning and secret not in warning
        assert secret in client.secret_values()


def test_only_credentials_are_secret_values_never_a_tenant_or_a_user_name():
    """The values removed as substrings from every output are the password, a token and the secret-named headers'
    values: a tenant header (X-Scope-OrgID: prod) is data - removed, it would turn node prod-b into ********-b."""
    client = prometheus_client.Client(lambda *a, **kw: None, "http://prometheus.test:9090", username="root",
                                      password="Pw-63", headers={"X-Scope-OrgID": "prod", "X-Api-Key": "Key-63",
                                                                 "Private-Token": "Tok-63"})
    assert client.secret_values() == {"Pw-63", "Key-63", "Tok-63"}
    assert client.scrub("node prod-b held by root: Key-63") == "node prod-b held by root: ********"


@pytest.mark.parametrize("url", ["admin:Zx9/kQ2pL7w@prom:9090", "http:/admin:Zx9/kQ2pL7w@prom:9090",
                                 "http//admin:Zx9/kQ2pL7w@prom:9090", "admin:Zx9#kQ2pL7w@prom:9090",
                                 "admin:Zx9?kQ2pL7w@prom:9090"])
def test_a_url_that_is_not_one_is_never_echoed(url):
    """Review of issue 63 (2026-12-07): a mistyped scheme printed the password (or its first characters)."""
    with pytest.raises(NodefixError) as err:
        prometheus_client.Client(None, url)
    assert "Zx9" not in str(err.value) and "kQ2" not in str(err.value) and "http://" in str(err.value)
