# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.api_access as Ansible runs it (a subprocess, the official kubernetes client on a real socket) against
the kube-apiserver TEST DOUBLE (lab/apiserver-double, its SelfSubjectAccessReviews validated as the real server
validates them): the node read, then one review a question, each answer in order - allowed, or denied with the
API server's reason -; a Node the API server does not know is an answer; a Node that cannot be read (a refused
connection, a 403) fails naming the kubeconfig and what the API server said; a token file ending in a newline is
trimmed and never quoted. The subprocess timeouts only guard the test run, they are not asserted."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.modules import api_access
from ansible_collections.nodefix.k8s.tests.unit.plugins.modules.test_node_ready import (  # pylint: disable=unused-import
    double, free_port, kubeconfig, run)

TOKEN = "Api-Access-Token-61"
DRAIN = [{"verb": "get", "resource": "nodes"}, {"verb": "patch", "resource": "nodes"},
         {"verb": "list", "resource": "pods"}, {"verb": "create", "resource": "pods", "subresource": "eviction"},
         {"verb": "create", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system"}]
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def test_every_review_allowed_is_answered_in_order_after_one_read_of_the_node(tmp_path, double):
    api = double({"nodes": {"node-a": {}}})
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": DRAIN})
    assert rc == 0 and not out["changed"] and out["node"] == {"name": "node-a", "found": True}, out
    assert out["all_allowed"] is True and [r["attributes"] for r in out["reviews"]] == DRAIN
    assert [(r["allowed"], r["denied"], r["reason"]) for r in out["reviews"]] == [(True, False, "")] * len(DRAIN)
    assert out["msg"] == "kubeconfig %s: Node node-a read, 5 of 5 review(s) allowed" % api.kubeconfig
    assert [(r["method"], r["path"]) for r in api.requests()] == [("GET", "/api/v1/nodes/node-a")] + [("POST", SSAR)] * 5
    # each review as the API server takes it: authorization.k8s.io/v1, the attributes asked, nothing else
    bodies = [json.loads(r["body"]) for r in api.requests()[1:]]
    assert bodies[3] == {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                         "spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction"}}}
    assert [e["attributes"] for e in api.data()["log"]] == DRAIN


def test_a_review_the_api_server_denies_says_so_with_its_reason(tmp_path, double):
    api = double({"nodes": {"node-a": {}}, "access_denials": [
        {"verb": "create", "resource": "pods", "subresource": "eviction", "reason": "no RBAC policy matched"}]})
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": DRAIN})
    assert rc == 0 and out["all_allowed"] is False, out
    assert [r["allowed"] for r in out["reviews"]] == [True, True, True, False, True]
    assert out["reviews"][3]["reason"] == "no RBAC policy matched" and out["reviews"][3]["denied"] is False
    assert "4 of 5 review(s) allowed" in out["msg"]


def test_check_mode_asks_the_same_questions(tmp_path, double):
    api = double({"nodes": {"node-a": {}}})
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": DRAIN[:1],
                                                  "_ansible_check_mode": True})
    assert rc == 0 and out["all_allowed"] is True and len(api.requests()) == 2, out


def test_a_node_the_api_server_does_not_know_is_an_answer(tmp_path, double):
    api = double({"nodes": {"node-b": {}}})
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": DRAIN[:2]})
    assert rc == 0 and out["node"] == {"name": "node-a", "found": False} and out["all_allowed"], out
    assert "Node node-a not in the API server (404)" in out["msg"]


def test_an_api_server_that_refuses_the_connection_fails_naming_the_kubeconfig(tmp_path):
    kc = kubeconfig(tmp_path, free_port())
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": kc, "node": "node-a", "reviews": DRAIN,
                                                  "request_timeout": 5})
    assert rc != 0 and out["failed"], out
    assert out["msg"].startswith("kubeconfig %s: cannot read Node node-a: no answer from the API server within 5 s (" % kc)
    assert "reviews" not in out


class Forbidden(BaseHTTPRequestHandler):
    """Every request answered 403 with the Status the real server sends (RBAC)."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": 'nodes "node-a" is forbidden: User "nodefix" cannot get resource "nodes" in API '
                                      'group "" at the cluster scope', "reason": "Forbidden",
                           "details": {"name": "node-a", "kind": "nodes"}, "code": 403}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


@pytest.fixture
def forbidden():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_node_read_the_api_server_forbids_fails_with_its_reason_and_no_token(tmp_path, forbidden):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    kc = kubeconfig(tmp_path, forbidden, token)
    rc, out, text = run("api_access", tmp_path, {"kubeconfig": kc, "node": "node-a", "reviews": DRAIN})
    assert rc != 0 and out["status"] == 403, out
    assert out["msg"] == ('kubeconfig %s: cannot read Node node-a: the API server answered 403 Forbidden: nodes "node-a" '
                          'is forbidden: User "nodefix" cannot get resource "nodes" in API group "" at the cluster '
                          'scope' % kc), out["msg"]
    assert TOKEN not in text


def test_a_token_file_ending_in_a_newline_is_trimmed_and_never_quoted(tmp_path, double):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    api = double({"nodes": {"node-a": {}}})
    rc, out, text = run("api_access", tmp_path, {"kubeconfig": kubeconfig(tmp_path, api.port, token), "node": "node-a",
                                                 "reviews": DRAIN[:1]})
    assert rc == 0 and out["all_allowed"], out
    sent = [dict((k.lower(), v) for k, v in r["headers"].items())["authorization"] for r in api.requests()]
    assert sent == ["Bearer " + TOKEN] * 2 and TOKEN not in text
    rc, out, text = run("api_access", tmp_path, {"kubeconfig": kubeconfig(tmp_path, free_port(), token),
                                                 "node": "node-a", "reviews": DRAIN[:1], "request_timeout": 5})
    assert rc != 0 and TOKEN not in text, out


def test_a_kubeconfig_that_cannot_be_loaded_fails_naming_it(tmp_path):
    missing = str(tmp_path / "missing")
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": missing, "node": "node-a"})
    assert rc != 0 and out["msg"].startswith("kubeconfig %s could not be loaded" % missing), out


def test_a_review_without_a_verb_or_resource_fails_before_any_request(tmp_path):
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": kubeconfig(tmp_path, free_port()), "node": "node-a",
                                                  "reviews": [{"resource": "nodes"}]})
    assert rc != 0 and "needs a verb and a resource" in out["msg"], out


def test_an_answer_without_status_allowed_is_not_allowed():
    out = api_access.answer({"verb": "get", "resource": "nodes"}, {"kind": "Status", "apiVersion": "v1"})
    assert out["allowed"] is False and "no status.allowed" in out["reason"]
    out = api_access.answer({"verb": "get", "resource": "nodes"}, {"status": {
        "allowed": False, "denied": True, "reason": "denied by policy", "evaluationError": "webhook timed out"}})
    assert (out["allowed"], out["denied"], out["reason"]) == (False, True, "denied by policy; webhook timed out")
    assert api_access.attributes_text(DRAIN[4]) == "create leases.coordination.k8s.io in kube-system"


def test_without_the_kubernetes_library_the_module_fails_naming_it(run_module, monkeypatch):
    monkeypatch.setattr(kube, "available", lambda: False)
    result, failed, _t = run_module(api_access, {"kubeconfig": "/nonexistent", "node": "node-a"})
    assert failed and "kubernetes" in result["msg"], result


def test_an_odd_answer_is_read_fail_closed():
    """status not an object, allowed not a boolean: not allowed, saying why - never a crash, never allowed."""
    attrs = {"verb": "get", "resource": "nodes"}
    for body in ({"status": [True]}, {"status": "allowed"}, {"status": {"allowed": "true"}}, {"status": {"allowed": 1}}):
        out = api_access.answer(attrs, dict(body, kind="SelfSubjectAccessReview"))
        assert out["allowed"] is False and "no status.allowed" in out["reason"], (body, out)


def test_no_review_asked_is_never_all_allowed(tmp_path, double):
    api = double({"nodes": {"node-a": {}}})
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": []})
    assert rc == 0 and out["all_allowed"] is False and out["reviews"] == [], out
    assert out["msg"].endswith("Node node-a read, no review was asked (all_allowed false)"), out


def test_a_non_resource_review_is_asked_as_nonresourceattributes_and_a_denial_names_it(tmp_path, double):
    """The control-plane guard's /readyz/etcd: a SelfSubjectAccessReview's spec.nonResourceAttributes (verb, path),
    which the double validates and answers as the real API server does."""
    denial = {"verb": "get", "path": "/readyz/etcd", "reason": "no RBAC policy matched"}
    api = double({"nodes": {"node-a": {}}, "access_denials": [denial]})
    reviews = [{"verb": "get", "resource": "nodes"}, {"verb": "get", "path": "/readyz/etcd"}]
    rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": reviews})
    assert rc == 0 and out["all_allowed"] is False, out
    assert [(r["attributes"], r["allowed"]) for r in out["reviews"]] == [(reviews[0], True), (reviews[1], False)]
    assert out["reviews"][1]["reason"] == "no RBAC policy matched"
    assert "1 of 2 review(s) allowed - not allowed: get /readyz/etcd" in out["msg"], out
    bodies = [json.loads(r["body"]) for r in api.requests()[1:]]
    assert bodies[1]["spec"] == {"nonResourceAttributes": {"verb": "get", "path": "/readyz/etcd"}}
    # a path with resource attributes beside it, or not absolute, is refused before any request
    for bad in ({"verb": "get", "path": "/readyz", "resource": "nodes"}, {"verb": "get", "path": "readyz"}):
        rc, out, _text = run("api_access", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "reviews": [bad]})
        assert rc != 0 and "a non-resource review has a verb and a path" in out["msg"], out
