# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_k8s.client, the collection's one Kubernetes API client, against a scripted HTTP server of the test's own
(it answers what each test lists, in order, and records every request with its Authorization header): the retry
policy (a 429 and a read's 5xx retried after Retry-After or the backoff, bounded; a write's 5xx without
Retry-After never; a caller's own statuses), the token file trimmed as client-go trims it, errors that name the
request and never quote the token, answers that are not JSON objects. The waits are recorded, not slept."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube

pytest.importorskip("kubernetes")
TOKEN = "s3cr3t-token-value"


class Scripted(object):
    """An HTTP server answering ``answers`` (status, headers, body) in order, the last one again when they end."""

    def __init__(self):
        self.answers, self.seen = [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                outer.seen.append({"method": self.command, "path": self.path,
                                   "auth": self.headers.get("Authorization"),
                                   "type": self.headers.get("Content-Type"),
                                   "body": self.rfile.read(length).decode() if length else None})
                status, headers, body = outer.answers[min(len(outer.seen), len(outer.answers)) - 1]
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                for key, value in dict(headers, **{"Content-Length": str(len(data))}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def server():
    srv = Scripted()
    yield srv
    srv.close()


@pytest.fixture
def waits(monkeypatch):
    slept = []
    monkeypatch.setattr(kube.time, "sleep", slept.append)
    return slept


def kubeconfig(tmp_path, port, token="%s\n" % TOKEN):
    (tmp_path / "token").write_text(token)
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": "u", "user": {"tokenFile": str(tmp_path / "token")}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def api(tmp_path, server, **kwargs):
    return kube.Kube(kubeconfig(tmp_path, server.server.server_address[1], **kwargs), timeout=5)


STATUS_429 = {"kind": "Status", "status": "Failure", "reason": "TooManyRequests", "code": 429,
              "message": "Cannot evict pod as it would violate the pod's disruption budget.",
              "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget db needs 1"}]}}


def test_a_token_file_ending_in_a_newline_is_sent_trimmed_on_every_request(tmp_path, server):
    server.answers = [(200, {}, {"kind": "Node", "metadata": {"name": "a"}})]
    k = api(tmp_path, server)
    for _dummy in range(2):   # the client re-reads the token before requests: trimmed again
        assert k.request("reading Node a", "GET", "/api/v1/nodes/a")["metadata"]["name"] == "a"
    assert [s["auth"] for s in server.seen] == ["Bearer %s" % TOKEN] * 2


def test_a_429_is_retried_after_its_retry_after_and_the_attempts_are_bounded(tmp_path, server, waits):
    server.answers = [(429, {"Retry-After": "3"}, STATUS_429), (429, {"Retry-After": "1"}, STATUS_429),
                      (429, {}, STATUS_429)]
    with pytest.raises(kube.KubeError) as err:
        api(tmp_path, server).request("creating Lease x", "POST", "/apis/x", body={"a": 1})
    assert len(server.seen) == kube.ATTEMPTS == 3
    assert waits == [3, 1]   # Retry-After honoured
    assert err.value.status == 429 and err.value.said.startswith("Cannot evict")
    assert err.value.detail() == "Cannot evict pod as it would violate the pod's disruption budget.; " \
                                 "The disruption budget db needs 1"
    assert err.value.phrase() == "429 Too Many Requests"


def test_a_retry_after_past_the_remaining_timeout_is_never_cut_short_the_answer_is_returned(tmp_path, server, waits):
    """Review 9c: a Retry-After of 60 s with 5 s of timeout left is not asked again after 10 s (before the server
    asked): the 429 is the answer, and the error says when the server asked to be asked again."""
    server.answers = [(429, {"Retry-After": "60"}, STATUS_429), (200, {}, {})]
    with pytest.raises(kube.KubeError) as err:
        api(tmp_path, server).request("creating Lease x", "POST", "/apis/x", body={"a": 1})
    assert len(server.seen) == 1 and waits == []
    assert "asked to be asked again after 60 s (Retry-After)" in err.value.detail()
    # the caller's own budget bounds it too (the drain's time left): 3 s asked, 2 s left
    server.answers, server.seen[:] = [(503, {"Retry-After": "3"}, "busy"), (200, {}, {})], []
    assert api(tmp_path, server).call("eviction", "POST", "/e", body={}, retry=kube.RETRY_SERVER, budget=2) == \
        (503, "busy")
    assert len(server.seen) == 1 and waits == []
    server.seen[:] = []
    assert api(tmp_path, server).call("eviction", "POST", "/e", body={}, retry=kube.RETRY_SERVER, budget=4)[0] == 200
    assert len(server.seen) == 2 and waits == [3]


@pytest.mark.parametrize("value, seconds", [("7", 7), (" 7 ", 7), ("Sun, 06 Dec 2026 18:00:30 GMT", 30),
                                            ("Sun, 06 Dec 2026 17:59:00 GMT", 0), ("soon", None), ("-3", None),
                                            ("", None), ("\u00b2", None), ("\u0663", None)])
def test_retry_after_is_delay_seconds_or_an_http_date(value, seconds):
    now = 1796580000.0      # 2026-12-06T18:00:00Z
    assert kube.retry_after({"Retry-After": value}, now=now) == seconds
    assert kube.retry_after({}, now=now) is None


def test_an_http_date_retry_after_is_waited_for(tmp_path, server, waits, monkeypatch):
    monkeypatch.setattr(kube.time, "time", lambda: 1796580000.0)
    server.answers = [(503, {"Retry-After": "Sun, 06 Dec 2026 18:00:04 GMT"}, "busy"),
                      (200, {}, {"items": [], "metadata": {}})]
    assert api(tmp_path, server).items("listing the Nodes", "/api/v1/nodes") == []
    assert waits == [4]


def test_a_reads_5xx_is_retried_with_backoff_and_then_answers(tmp_path, server, waits):
    server.answers = [(503, {}, "busy"), (500, {}, "busy"), (200, {}, {"items": [], "metadata": {}})]
    assert api(tmp_path, server).items("listing the Nodes", "/api/v1/nodes", [("limit", 5)]) == []
    assert waits == [kube.BACKOFF, kube.BACKOFF * 2] and server.seen[-1]["path"] == "/api/v1/nodes?limit=5"


def test_a_writes_5xx_without_retry_after_is_not_sent_again(tmp_path, server, waits):
    server.answers = [(500, {}, "boom"), (200, {}, {})]
    with pytest.raises(kube.KubeError, match=r"^patching Node a: the API server answered 500 boom$"):
        api(tmp_path, server).request("patching Node a", "PATCH", "/api/v1/nodes/a", body={"spec": {}},
                                      content_type="application/merge-patch+json")
    assert len(server.seen) == 1 and waits == [] and server.seen[0]["type"] == "application/merge-patch+json"
    assert json.loads(server.seen[0]["body"]) == {"spec": {}}


def test_a_caller_names_the_statuses_it_retries(tmp_path, server, waits):
    # an eviction's 429 is the caller's (pod_eviction waits on its own terms); /readyz's 500 is an answer
    server.answers = [(429, {"Retry-After": "1"}, STATUS_429)]
    with pytest.raises(kube.KubeError):
        api(tmp_path, server).request("eviction", "POST", "/e", body={}, retry=kube.RETRY_SERVER)
    server.answers, server.seen[:] = [(500, {}, "[-]etcd failed")], []
    assert api(tmp_path, server).call("readyz", "GET", "/readyz/etcd", retry=(429,)) == (500, "[-]etcd failed")
    assert len(server.seen) == 1 and waits == []


def test_a_404_is_none_when_the_caller_allows_it_and_an_answer_must_be_a_json_object(tmp_path, server):
    server.answers = [(404, {}, {"kind": "Status", "code": 404, "reason": "NotFound"})]
    assert api(tmp_path, server).request("reading Node a", "GET", "/n", missing_ok=True) is None
    server.answers, server.seen[:] = [(200, {}, "[1, 2]")], []
    with pytest.raises(kube.KubeError, match=r"^reading Node a: the API server's answer is not a JSON object"):
        api(tmp_path, server).request("reading Node a", "GET", "/n")
    server.answers, server.seen[:] = [(200, {}, {"items": "x"})], []
    with pytest.raises(kube.KubeError, match="has no list of items"):
        api(tmp_path, server).items("listing", "/l")


def test_no_message_quotes_the_token(tmp_path):
    # a token with a newline inside is still an invalid header: the client's error quotes it, ours does not
    import socket  # pylint: disable=import-outside-toplevel
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    try:
        k = kube.Kube(kubeconfig(tmp_path, sock.getsockname()[1], token="%s\nx-%s\n" % (TOKEN, TOKEN)), timeout=1)
        with pytest.raises(kube.KubeError) as err:
            k.request("reading Node a", "GET", "/api/v1/nodes/a")
    finally:
        sock.close()
    assert err.value.status is None and "no answer from the API server" in err.value.msg
    assert TOKEN not in err.value.msg and "<redacted>" in err.value.msg, err.value.msg
    assert k.scrub("Authorization: Basic dXNlcjpwYXNz; b'Bearer abc.def'") == \
        "Authorization: Basic <redacted>; b'Bearer <redacted>'"


def test_a_kubeconfig_that_cannot_be_loaded_and_a_bad_timeout_are_clear(tmp_path):
    with pytest.raises(kube.KubeConfigError, match="^kubeconfig /nonexistent could not be loaded"):
        kube.Kube("/nonexistent")
    for bad in (0, -1, True, "5"):
        with pytest.raises(NodefixError, match="the API timeout must be"):
            kube.Kube("/nonexistent", timeout=bad)
    for bad in (0, 1.5, True):
        with pytest.raises(NodefixError, match="whole number"):
            kube.whole_seconds(bad)


def test_an_evictions_429_names_its_retry_after_header_and_a_500_is_its_own_answer(tmp_path, server, waits):
    """Review 9b/9c through the real client: a 429 whose Status has no retryAfterSeconds answers the Retry-After
    header's seconds (the drain waits them); a 500 is answered once, its message without this client's token."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import rollout_api  # pylint: disable=import-outside-toplevel
    evictions = rollout_api.RolloutApi(kubeconfig(tmp_path, server.server.server_address[1]), timeout=5)
    plain = dict(STATUS_429, details={})
    server.answers = [(429, {"Retry-After": "9"}, plain)]
    assert evictions.evict("default", "web-1", "u-1", budget=30) == (
        429, 9, "Cannot evict pod as it would violate the pod's disruption budget.")
    server.answers, server.seen[:] = [(500, {}, {"kind": "Status", "code": 500, "message": "boom %s" % TOKEN})], []
    assert evictions.evict("default", "web-1", budget=30) == (500, None, "boom <redacted>")
    assert len(server.seen) == 1 and waits == []


def test_the_api_modules_options_are_one_spec_each_module_adds_its_own_to():
    """kubeconfig and context as every API module takes them; node and request_timeout where it asks for them (an
    int or a float default, its type)."""
    assert kube.argument_spec() == {"kubeconfig": {"type": "path"}, "context": {"type": "str"}}
    assert kube.argument_spec(required=True, node=True, request_timeout=30) == {
        "kubeconfig": {"type": "path", "required": True}, "context": {"type": "str"},
        "node": {"type": "str", "required": True}, "request_timeout": {"type": "int", "default": 30}}
    assert kube.argument_spec(request_timeout=10.0)["request_timeout"] == {"type": "float", "default": 10.0}
    assert kube.argument_spec() is not kube.argument_spec()     # each module's own dict to add to


class Module(object):
    """The little of AnsibleModule ``module_client`` uses: params, and a fail_json that exits."""

    def __init__(self, **params):
        self.params, self.failed = dict({"context": None, "request_timeout": 5}, **params), None

    def fail_json(self, **result):
        self.failed = result
        raise SystemExit(1)


def test_a_module_gets_its_client_of_its_options_or_fails_with_the_clients_reason(tmp_path, server):
    module = Module(kubeconfig=kubeconfig(tmp_path, server.server.server_address[1]))
    assert isinstance(kube.module_client(module), kube.Kube) and module.failed is None
    made = kube.from_params(dict(module.params, request_timeout=7), lambda *args: args)
    assert made == (module.params["kubeconfig"], None, 7)
    module = Module(kubeconfig="/nonexistent")
    with pytest.raises(SystemExit):
        kube.module_client(module, where="ConfigMap a/b: ", status=None)
    assert module.failed["msg"].startswith("ConfigMap a/b: kubeconfig /nonexistent could not be loaded: ")
    assert module.failed["status"] is None
