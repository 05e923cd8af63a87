# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.pod_recreate (the gVisor role's opt-in eviction, one call) and _k8s.evictions, its code and
pod_eviction's, run in process (``run_module``) over the collection's real client (_k8s.client.Kube, built from a
kubeconfig with a token): only the transport is a fake API server (``Cluster``), which answers the pod listing
page by page, evictions (a PodDisruptionBudget's 429 a given number of times, an API error), the label-selected
listing of a namespace, and records every request. The clock is the test's own: no test waits, none asserts a
duration. Its behaviour against lab/apiserver-double through the role is test_13_rollout_double.py's."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import evictions
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import transport
from ansible_collections.nodefix.k8s.plugins.modules import pod_eviction, pod_recreate

pytest.importorskip("kubernetes")
TOKEN = "Recreate-Token-61-value"
ENV_SECRET = "Env-Value-Of-Cart-61"
SECRET_NAME = "cart-db-credentials"
DAEMONSET_REASON = "DaemonSet pods are not evicted; delete it to have it recreated"
BARE_REASON = "no controller would recreate this bare pod (see gvisor_evict_bare_pods)"


def pod(name, node="node-a", namespace="shop", owner="ReplicaSet", labels=None, ready=True, uid=None):
    """A pod as the API server lists it, spec and all: an environment value and a secret's name in it."""
    meta = {"name": name, "namespace": namespace, "uid": uid or "uid-" + name,
            "labels": {"app": name.split("-")[0]} if labels is None else labels,
            "annotations": {"note": "kept out"}, "resourceVersion": "7"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": name + "-owner",
                                    "uid": "owner-" + name, "controller": True}]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "cart:1", "env": [
                {"name": "DB_PASSWORD", "value": ENV_SECRET},
                {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": "user"}}}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Clock(object):
    """time for _k8s.evictions and _k8s.client: ``sleep`` moves it (recorded), nothing waits."""

    def __init__(self):
        self.now, self.slept = 1000000.0, []

    def time(self):
        return self.now

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class Cluster(object):
    """The fake API server behind the real client's transport. ``refuse``: {pod name: 429s before it is evicted}
    (``None``: always); ``broken``: {pod name: a status its eviction answers}; ``replace``: {pod name: whether its
    replacement gets Ready}, made by its controller once it is evicted; ``listing``: an exception or (status,
    body) the node's pod listing answers; ``page``: items per page of a listing."""

    def __init__(self, pods, refuse=None, broken=None, replace=None, listing=None, page=1):
        self.pods, self.refuse, self.broken = list(pods), dict(refuse or {}), dict(broken or {})
        self.replace, self.listing, self.page, self.seen = dict(replace or {}), listing, page, []

    def sender(self, _api_client, _error):
        return self.send

    @staticmethod
    def answer(status, body, headers=None):
        return status, dict(headers or {}), json.dumps(body).encode()

    def send(self, method, path, query, headers, body, timeout, _opened=None):
        query = dict(query or [])
        self.seen.append({"method": method, "path": path, "query": query, "body": body,
                          "auth": headers.get("authorization") or headers.get("Authorization")})
        if method == "GET" and path == "/api/v1/pods":
            if isinstance(self.listing, Exception):
                raise self.listing
            if self.listing:
                return self.answer(*self.listing)
            node = query["fieldSelector"].split("=", 1)[1]
            return self.paged([p for p in self.pods if p["spec"]["nodeName"] == node], query)
        if method == "GET" and path.startswith("/api/v1/namespaces/") and path.endswith("/pods"):
            ns = path.split("/")[4]
            want = dict(t.split("=", 1) for t in query["labelSelector"].split(","))
            return self.paged([p for p in self.pods if p["metadata"]["namespace"] == ns and all(
                p["metadata"]["labels"].get(k) == v for k, v in want.items())], query)
        if method == "POST" and path.endswith("/eviction"):
            return self.evict(path.split("/")[4], path.split("/")[6], body)
        raise AssertionError("unexpected request %s %s" % (method, path))

    def paged(self, items, query):
        start = int(query.get("continue") or 0)
        more = start + self.page < len(items)
        return self.answer(200, {"kind": "PodList", "apiVersion": "v1", "items": items[start:start + self.page],
                                 "metadata": {"continue": str(start + self.page)} if more else {}})

    def evict(self, ns, name, body):
        found = [p for p in self.pods if p["metadata"]["namespace"] == ns and p["metadata"]["name"] == name]
        if not found:
            return self.answer(404, {"kind": "Status", "reason": "NotFound", "message": 'pods "%s" not found' % name})
        p = found[0]
        want = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if want and want != p["metadata"]["uid"]:
            return self.answer(409, {"kind": "Status", "reason": "Conflict", "message": "Precondition failed"})
        if name in self.broken:
            return self.answer(self.broken[name], {"kind": "Status", "reason": "InternalError",
                                                   "message": "etcdserver: request timed out"})
        if name in self.refuse and (self.refuse[name] is None or self.refuse[name] > 0):
            if self.refuse[name] is not None:
                self.refuse[name] -= 1
            return self.answer(429, {"kind": "Status", "reason": "TooManyRequests",
                                     "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                                     "details": {"causes": [{"reason": "DisruptionBudget", "message":
                                                             "The disruption budget %s-pdb needs 1 healthy pods" % name}]}})
        self.pods.remove(p)
        if name in self.replace:
            meta = p["metadata"]
            new = pod(name + "-r1", p["spec"]["nodeName"], ns, meta["ownerReferences"][0]["kind"], meta["labels"],
                      ready=self.replace[name])
            self.pods.append(new)
        return self.answer(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    def posts(self):
        return [(e["path"], e["body"]) for e in self.seen if e["method"] == "POST"]


@pytest.fixture
def clock(monkeypatch):
    clk = Clock()
    monkeypatch.setattr(evictions, "time", clk)
    monkeypatch.setattr(kube, "time", clk)
    return clk


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def recreate(run_module, monkeypatch, cluster, kubeconfig, uids, check_mode=False, **args):
    monkeypatch.setattr(transport, "sender", cluster.sender)
    result, failed, _t = run_module(pod_recreate, dict({"kubeconfig": kubeconfig, "node": "node-a", "uids": uids},
                                                       **args), check_mode=check_mode)
    assert not failed, result
    dumped = json.dumps(result)
    # names, UIDs and results only: nothing of a pod's spec, and never the token
    for kept_out in (ENV_SECRET, SECRET_NAME, "DB_PASSWORD", "containers", "annotations", "kept out", TOKEN):
        assert kept_out not in dumped, (kept_out, result)
    return result


def test_one_listing_then_each_pod_in_order_evicted_or_skipped_with_its_reason(run_module, monkeypatch, kubeconfig,
                                                                               clock):
    cluster = Cluster([pod("cart-a"), pod("cart-b"), pod("proxy-a", namespace="kube-system", owner="DaemonSet"),
                       pod("debug-a", owner=None), pod("cart-c", node="node-b")], replace={"cart-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig,
                      ["uid-cart-a", "uid-gone", "uid-proxy-a", "uid-debug-a", "uid-cart-c"])
    assert result["changed"] is True
    assert result["results"] == [
        {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "evicted, replacement Ready"},
        {"uid": "uid-gone", "result": "skipped", "reason": "no pod with this uid on node node-a any more"},
        {"uid": "uid-proxy-a", "result": "skipped", "reason": DAEMONSET_REASON},
        {"uid": "uid-debug-a", "result": "skipped", "reason": BARE_REASON},
        {"uid": "uid-cart-c", "result": "skipped", "reason": "no pod with this uid on node node-a any more"}]
    # the node's pods listed once, every page (one pod a page), by the node's field selector
    listings = [e for e in cluster.seen if e["path"] == "/api/v1/pods"]
    assert [e["query"] for e in listings] == [{"fieldSelector": "spec.nodeName=node-a"}] + [
        {"fieldSelector": "spec.nodeName=node-a", "continue": str(n)} for n in (1, 2, 3)]
    # exactly that pod, with its UID as precondition; cart-b (same labels, same node) stays
    assert cluster.posts() == [("/api/v1/namespaces/shop/pods/cart-a/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "cart-a", "namespace": "shop"},
        "deleteOptions": {"preconditions": {"uid": "uid-cart-a"}}})]
    assert "cart-b" in [p["metadata"]["name"] for p in cluster.pods]
    # the replacement read: the pod's namespace, its labels
    reads = [e for e in cluster.seen if e["path"] == "/api/v1/namespaces/shop/pods"]
    assert reads and all(e["query"]["labelSelector"] == "app=cart" for e in reads)


def test_a_bare_pod_is_evicted_when_asked_and_a_pod_without_labels_is_not_waited_for(run_module, monkeypatch,
                                                                                     kubeconfig, clock):
    cluster = Cluster([pod("debug-a", owner=None), pod("job-a", labels={})])
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-debug-a", "uid-job-a"], bare_pods=True,
                      grace_period_seconds=5)
    assert result["results"] == [{"uid": "uid-debug-a", "pod": "shop/debug-a", "result": "evicted"},
                                 {"uid": "uid-job-a", "pod": "shop/job-a", "result": "evicted"}]
    assert [b["deleteOptions"] for _p, b in cluster.posts()] == [
        {"gracePeriodSeconds": 5, "preconditions": {"uid": "uid-debug-a"}},
        {"gracePeriodSeconds": 5, "preconditions": {"uid": "uid-job-a"}}]
    assert not [e for e in cluster.seen if e["path"] == "/api/v1/namespaces/shop/pods"]   # nothing waited for


def test_a_budget_that_refuses_twice_then_allows_is_asked_again_after_wait_sleep(run_module, monkeypatch, kubeconfig,
                                                                                 clock):
    cluster = Cluster([pod("db-0", owner="StatefulSet")], refuse={"db-0": 2}, replace={"db-0": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-db-0"], wait_timeout=60, wait_sleep=3)
    assert result["results"] == [{"uid": "uid-db-0", "pod": "shop/db-0", "result": "evicted, replacement Ready"}]
    assert len(cluster.posts()) == 3 and clock.slept == [3, 3]


def test_a_refused_or_failed_eviction_is_that_pods_failure_and_the_next_pod_goes_on(run_module, monkeypatch,
                                                                                    kubeconfig, clock):
    cluster = Cluster([pod("db-0", owner="StatefulSet"), pod("api-0"), pod("cart-a")], refuse={"db-0": None},
                      broken={"api-0": 500}, replace={"cart-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-db-0", "uid-api-0", "uid-cart-a"],
                      wait_timeout=10, wait_sleep=5)
    refused, broken, evicted = result["results"]
    assert refused["result"] == "failed" and refused["pod"] == "shop/db-0"
    assert refused["reason"].startswith("eviction of pod shop/db-0 refused by a PodDisruptionBudget after 3 attempt(s): "
                                        "429 Cannot evict pod"), refused
    assert "The disruption budget db-0-pdb needs 1 healthy pods" in refused["reason"]
    # a 500 without Retry-After is a write's answer: not asked again
    assert broken == {"uid": "uid-api-0", "pod": "shop/api-0", "result": "failed",
                      "reason": "eviction of pod shop/api-0 failed after 1 attempt(s): 500 etcdserver: request timed out"}
    assert evicted == {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "evicted, replacement Ready"}
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["db-0"] * 3 + ["api-0", "cart-a"]
    assert result["changed"] is True


def test_a_replacement_that_never_gets_ready_is_that_pods_failure_after_the_timeout(run_module, monkeypatch,
                                                                                    kubeconfig, clock):
    cluster = Cluster([pod("cart-a"), pod("web-a")], replace={"cart-a": False, "web-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-web-a"],
                      replacement_timeout=20, wait_sleep=5)
    assert result["results"] == [
        {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "failed", "reason": "replacement not Ready in time"},
        {"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"}]
    assert result["changed"] is True   # cart-a was evicted all the same
    reads = [e for e in cluster.seen if e["path"] == "/api/v1/namespaces/shop/pods"]
    assert len([e for e in reads if e["query"]["labelSelector"] == "app=cart"]) == 5   # at once, then every 5 s to 20
    assert clock.slept == [5, 5, 5, 5]


def test_a_listing_that_fails_leaves_every_pod_not_attempted_with_the_reason_and_no_token(run_module, monkeypatch,
                                                                                          kubeconfig, clock):
    refused = ConnectionRefusedError("[Errno 111] Connection refused (sent Authorization: Bearer %s)" % TOKEN)
    cluster = Cluster([pod("cart-a")], listing=refused)
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-web-a"], request_timeout=7)
    assert result["changed"] is False
    assert [(r["uid"], r["result"]) for r in result["results"]] == [
        ("uid-cart-a", "not attempted"), ("uid-web-a", "not attempted")]
    reason = result["results"][0]["reason"]
    assert reason.startswith("cannot list the pods of node node-a: the API server could not be reached or did not "
                             "answer within 7 s (ConnectionRefusedError: [Errno 111] Connection refused"), reason
    assert result["results"][1]["reason"] == reason and "<redacted>" in reason
    assert cluster.posts() == []


def test_a_listing_the_api_server_refuses_says_its_status(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a")], listing=(403, {"kind": "Status", "reason": "Forbidden", "message":
                                                      'pods is forbidden: User "robot" cannot list resource "pods"'}))
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a"])
    assert result["results"] == [{"uid": "uid-cart-a", "result": "not attempted", "reason":
                                  'cannot list the pods of node node-a: 403 pods is forbidden: User "robot" cannot '
                                  'list resource "pods"'}]


def test_a_kubeconfig_that_cannot_be_loaded_leaves_every_pod_not_attempted(run_module, monkeypatch, tmp_path, clock):
    cluster = Cluster([pod("cart-a")])
    result = recreate(run_module, monkeypatch, cluster, str(tmp_path / "missing"), ["uid-cart-a"])
    assert result["changed"] is False and result["results"][0]["result"] == "not attempted"
    assert result["results"][0]["reason"].startswith("cannot list the pods of node node-a: kubeconfig %s could not "
                                                     "be loaded" % (tmp_path / "missing"))
    assert cluster.seen == []


def test_check_mode_lists_and_says_what_it_would_do_and_evicts_nothing(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a"), pod("proxy-a", owner="DaemonSet")], replace={"cart-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-proxy-a"], check_mode=True)
    assert result["changed"] is True
    assert result["results"] == [{"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "would evict"},
                                 {"uid": "uid-proxy-a", "result": "skipped", "reason": DAEMONSET_REASON}]
    assert {e["method"] for e in cluster.seen} == {"GET"} and len(cluster.pods) == 2


def test_a_pod_already_gone_or_replaced_by_the_eviction_is_said_so(run_module, monkeypatch, kubeconfig, clock):
    """Listed, then gone (404) or replaced by a pod of the same name and another UID (the UID precondition's 409)
    before its eviction: nothing evicted, nothing waited for."""
    cluster = Cluster([pod("cart-a"), pod("db-0", owner="StatefulSet")])
    real = cluster.paged

    def listed_then_changed(items, query):
        answer = real(items, query)
        if "fieldSelector" in query and "continue" in query:   # the listing's last page: the cluster moves on
            cluster.pods = [pod("db-0", owner="StatefulSet", uid="uid-db-0-new")]
        return answer
    cluster.paged = listed_then_changed
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-db-0"])
    assert result["results"] == [{"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "gone"},
                                 {"uid": "uid-db-0", "pod": "shop/db-0", "result": "replaced"}]
    assert result["changed"] is False and len(cluster.pods) == 1


def test_no_uids_sends_nothing(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a")])
    assert recreate(run_module, monkeypatch, cluster, kubeconfig, [])["results"] == []
    assert cluster.seen == []


@pytest.mark.parametrize("args,words", [
    ({"node": "a/b"}, "node 'a/b' is not a Kubernetes object name"),
    ({"uids": ["u1", ""]}, "uids holds an empty UID"),
    ({"replacement_timeout": -1}, "must not be negative"),
    ({"request_timeout": 0}, "request_timeout must be more than 0 seconds"),
])
def test_bad_input_is_refused_before_any_request(run_module, monkeypatch, kubeconfig, args, words):
    cluster = Cluster([pod("cart-a")])
    monkeypatch.setattr(transport, "sender", cluster.sender)
    result, failed, _t = run_module(pod_recreate, dict({"kubeconfig": kubeconfig, "node": "node-a", "uids": ["u1"]},
                                                       **args))
    assert failed and words in result["msg"] and cluster.seen == []


def test_pod_eviction_sends_the_same_eviction_and_fails_naming_a_budget_that_still_refuses(run_module, monkeypatch,
                                                                                           kubeconfig, clock):
    """One owner of the eviction: pod_eviction's request and 429 wait are _k8s.evictions', as pod_recreate's."""
    cluster = Cluster([pod("cart-a"), pod("db-0", owner="StatefulSet")], refuse={"db-0": None})
    monkeypatch.setattr(transport, "sender", cluster.sender)
    # (pod_eviction reads the pod first: the fake answers the read from the pod list)
    real = cluster.send

    def send(method, path, query, headers, body, timeout, _opened=None):
        if method == "GET" and path.startswith("/api/v1/namespaces/shop/pods/"):
            name = path.rsplit("/", 1)[1]
            found = [p for p in cluster.pods if p["metadata"]["name"] == name]
            return cluster.answer(200, found[0]) if found else cluster.answer(404, {"kind": "Status"})
        return real(method, path, query, headers, body, timeout)
    cluster.send = send
    result, failed, _t = run_module(pod_eviction, {"kubeconfig": kubeconfig, "namespace": "shop", "name": "cart-a",
                                                   "uid": "uid-cart-a", "grace_period_seconds": 5})
    assert not failed and result["result"] == "evicted" and result["attempts"] == 1, result
    assert cluster.posts()[0][1] == evictions.eviction("shop", "cart-a", "uid-cart-a", 5)
    result, failed, _t = run_module(pod_eviction, {"kubeconfig": kubeconfig, "namespace": "shop", "name": "db-0",
                                                   "wait_timeout": 4, "wait_sleep": 2})
    assert failed and result["status"] == 429 and result["attempts"] == 3, result
    assert result["msg"].startswith("eviction of pod shop/db-0 refused by a PodDisruptionBudget after 3 attempt(s): 429")


@pytest.mark.parametrize("name", [None, ".", ".."])
def test_a_listed_item_without_a_name_is_no_pod_to_evict(run_module, monkeypatch, kubeconfig, clock, name):
    """(a name "." or "..": urllib3 collapses the dot segment - never a request of another object)"""
    broken = pod("cart-a")
    if name is None:
        del broken["metadata"]["name"]
    else:
        broken["metadata"]["name"] = name
    cluster = Cluster([broken])
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a"])
    assert result["results"] == [{"uid": "uid-cart-a", "result": "skipped",
                                  "reason": "no pod with this uid on node node-a any more"}]
    assert cluster.posts() == []
