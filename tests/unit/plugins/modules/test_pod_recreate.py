# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.pod_recreate (the gVisor role's opt-in eviction, one call) and _k8s.evictions, its code and
pod_eviction's, run in process (``run_module``) over the collection's real client (_k8s.client.Kube, built from a
kubeconfig with a token): only the transport is a fake API server (``Cluster``), which answers the pod listing
page by page, evictions (a PodDisruptionBudget's 429 a given number of times, an API error), the label-selected
listing of a namespace, and records every request. The clock is the test's own: no test waits, none asserts a
duration. Its behaviour against lab/apiserver-double through the role is test_13_rollout_double.py's."""

import json
import re

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
NOT_READ = ("the desired replicas of its %s %s were not read (they are for a ReplicaSet, StatefulSet or "
            "ReplicationController): only its other pods were checked")
# an ownerReference's apiVersion by its kind (apps/v1 for the rest)
API_VERSIONS = {"ReplicationController": "v1", "Job": "batch/v1", "Node": "v1", "Rollout": "argoproj.io/v1alpha1"}
# a controller's path -> its kind
CONTROLLER_PATH = re.compile(r"^(?:/apis/apps/v1|/api/v1)/namespaces/([^/]+)/(replicasets|statefulsets|"
                             r"replicationcontrollers)/([^/]+)$")
KINDS = {"replicasets": "ReplicaSet", "statefulsets": "StatefulSet", "replicationcontrollers": "ReplicationController"}


def pod(name, node="node-a", namespace="shop", owner="ReplicaSet", labels=None, ready=True, uid=None, owner_name=None,
        deleting=False):
    """A pod as the API server lists it, spec and all: an environment value and a secret's name in it. Its
    controller: ``owner`` (a kind) named ``owner_name`` (default, its own ``<name>-owner``: no sibling);
    ``deleting``: it has a deletionTimestamp (terminating)."""
    meta = {"name": name, "namespace": namespace, "uid": uid or "uid-" + name,
            "labels": {"app": name.split("-")[0]} if labels is None else labels,
            "annotations": {"note": "kept out"}, "resourceVersion": "7"}
    if owner:
        owner_name = owner_name or name + "-owner"
        meta["ownerReferences"] = [{"apiVersion": API_VERSIONS.get(owner, "apps/v1"), "kind": owner, "name": owner_name,
                                    "uid": "owner-" + owner_name, "controller": True}]
    if deleting:
        meta.update(deletionTimestamp="2026-12-07T17:00:00Z", deletionGracePeriodSeconds=30)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "cart:1", "env": [
                {"name": "DB_PASSWORD", "value": ENV_SECRET},
                {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": "user"}}}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def ready(p):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])


def rs(name, uid, replicas, ready_replicas, kind="ReplicaSet", namespace="shop"):
    """A controller object as the API server answers it (``replicas``/``ready_replicas`` None: the field left out)."""
    obj = {"kind": kind, "apiVersion": "v1" if kind == "ReplicationController" else "apps/v1",
           "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 2},
           "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"spec": {"containers": [
               {"name": "app", "env": [{"name": "DB_PASSWORD", "value": ENV_SECRET}]}]}}},
           "status": {"replicas": replicas or 0, "observedGeneration": 2}}
    if replicas is not None:
        obj["spec"]["replicas"] = replicas
    if ready_replicas is not None:
        obj["status"]["readyReplicas"] = ready_replicas
    return obj


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
    (``None``: always); ``broken``: {pod name: a status its eviction answers}; ``conflict``: {pod name: the 409s
    (a budget's resourceVersion conflict) its eviction answers before it is evicted}; ``raw``: {pod name: (status,
    text) its eviction answers, the pod evicted all the same when 2xx}; ``replace``: {pod name: whether its
    replacement gets Ready - True, False, n: at the n-th namespace listing after the eviction, or "terminating" (Ready
    with a deletionTimestamp)}, made by its controller (the same ownerReferences) once it is evicted; ``listing``:
    an exception or (status, body) the node's pod listing answers; ``mangle``: a function of a namespace listing's
    page (a dict), after the first eviction; ``page``: items per page of a listing; ``controllers``: {(kind, name):
    the controller's answer - an object (200), (status, text), or an exception}; a controller not given is answered
    as its pods make it (``controller``)."""

    def __init__(self, pods, refuse=None, broken=None, replace=None, listing=None, page=1, conflict=None, raw=None,
                 mangle=None, controllers=None):
        self.pods, self.refuse, self.broken = list(pods), dict(refuse or {}), dict(broken or {})
        self.replace, self.listing, self.page, self.seen = dict(replace or {}), listing, page, []
        self.conflict, self.raw, self.mangle, self.evicted, self.later = dict(conflict or {}), dict(raw or {}), mangle, 0, []
        self.controllers = dict(controllers or {})

    def controller(self, ns, kind, name):
        """(status, body) of a GET of a controller: given in ``controllers``, else the object its pods in ``ns``
        (their ownerReferences of that kind and name) make - its uid theirs, ``spec.replicas`` the pods not being
        deleted, ``status.readyReplicas`` those Ready (a consistent controller: every replica it wants there); 404
        when no pod names it."""
        given = self.controllers.get((kind, name))
        if isinstance(given, Exception):
            raise given
        if isinstance(given, tuple):
            return given[0], {}, given[1].encode()
        if given is not None:
            return self.answer(200, given)
        mine = [p for p in self.pods if p["metadata"]["namespace"] == ns and any(
            o["kind"] == kind and o["name"] == name for o in p["metadata"].get("ownerReferences", []))]
        if not mine:
            return self.answer(404, {"kind": "Status", "reason": "NotFound", "code": 404})
        live = [p for p in mine if "deletionTimestamp" not in p["metadata"]]
        uid = [o["uid"] for o in mine[0]["metadata"]["ownerReferences"] if o["kind"] == kind][0]
        return self.answer(200, rs(name, uid, len(live), len([p for p in live if ready(p)]), kind, ns))

    def sender(self, _api_client, _error):
        return self.send

    @staticmethod
    def answer(status, body, headers=None):
        return status, dict(headers or {}), json.dumps(body).encode()

    def send(self, method, path, query, headers, body, timeout, _opened=None):
        query = dict(query or [])
        self.seen.append({"method": method, "path": path, "query": query, "body": body,
                          "auth": headers.get("authorization") or headers.get("Authorization")})
        found = CONTROLLER_PATH.match(path)
        if method == "GET" and found:
            assert path.startswith("/api/v1/" if found.group(2) == "replicationcontrollers" else "/apis/apps/v1/")
            return self.controller(found.group(1), KINDS[found.group(2)], found.group(3))
        if method == "GET" and path == "/api/v1/pods":
            if isinstance(self.listing, Exception):
                raise self.listing
            if self.listing:
                return self.answer(*self.listing)
            node = query["fieldSelector"].split("=", 1)[1]
            return self.paged([p for p in self.pods if p["spec"]["nodeName"] == node], query)
        if method == "GET" and path.startswith("/api/v1/namespaces/") and path.endswith("/pods"):
            ns = path.split("/")[4]
            want = dict(t.split("=", 1) for t in query["labelSelector"].split(",")) if query.get("labelSelector") else {}
            if "continue" not in query:
                self.ripen()
            status, hdrs, data = self.paged([p for p in self.pods if p["metadata"]["namespace"] == ns and all(
                p["metadata"]["labels"].get(k) == v for k, v in want.items())], query)
            if self.mangle and self.evicted:
                data = json.dumps(self.mangle(json.loads(data.decode()))).encode()
            return status, hdrs, data
        if method == "GET" and path.startswith("/api/v1/namespaces/") and "/pods/" in path:
            ns, name = path.split("/")[4], path.split("/")[6]
            found = [p for p in self.pods if p["metadata"]["namespace"] == ns and p["metadata"]["name"] == name]
            return self.answer(200, found[0]) if found else self.answer(404, {"kind": "Status", "reason": "NotFound"})
        if method == "POST" and path.endswith("/eviction"):
            return self.evict(path.split("/")[4], path.split("/")[6], body)
        raise AssertionError("unexpected request %s %s" % (method, path))

    def paged(self, items, query):
        start = int(query.get("continue") or 0)
        more = start + self.page < len(items)
        return self.answer(200, {"kind": "PodList", "apiVersion": "v1", "items": items[start:start + self.page],
                                 "metadata": {"continue": str(start + self.page)} if more else {}})

    def ripen(self):
        """A replacement Ready after a number of namespace listings: one listing nearer."""
        for entry in list(self.later):
            entry[1] -= 1
            if entry[1] <= 0:
                self.later.remove(entry)
                entry[0]["status"]["conditions"][0]["status"] = "True"

    def evict(self, ns, name, body):
        found = [p for p in self.pods if p["metadata"]["namespace"] == ns and p["metadata"]["name"] == name]
        if not found:
            return self.answer(404, {"kind": "Status", "reason": "NotFound", "message": 'pods "%s" not found' % name})
        p = found[0]
        want = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if want and want != p["metadata"]["uid"]:
            return self.answer(409, {"kind": "Status", "reason": "Conflict", "message": "Precondition failed"})
        if self.conflict.get(name):
            self.conflict[name] -= 1
            return self.answer(409, {"kind": "Status", "reason": "Conflict", "message": 'Operation cannot be fulfilled '
                                     'on poddisruptionbudgets.policy "%s-pdb": the object has been modified' % name})
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
        self.evicted += 1
        if name in self.replace:
            meta, how = p["metadata"], self.replace[name]
            new = pod(name + "-r1", p["spec"]["nodeName"], ns, meta["ownerReferences"][0]["kind"], meta["labels"],
                      ready=how is True or how == "terminating", deleting=how == "terminating")
            new["metadata"]["ownerReferences"] = json.loads(json.dumps(meta["ownerReferences"]))   # its controller
            if not isinstance(how, bool) and isinstance(how, int):
                self.later.append([new, how])
            self.pods.append(new)
        if name in self.raw:
            return self.raw[name][0], {}, self.raw[name][1].encode()
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
    """cart-b is a sibling of cart-a (the same ReplicaSet, labels, node), Ready all along: the wait is over only
    once cart-a's own replacement is Ready (the second read after the eviction), never on cart-b."""
    cluster = Cluster([pod("cart-a", owner_name="cart"), pod("cart-b", owner_name="cart"),
                       pod("proxy-a", namespace="kube-system", owner="DaemonSet"), pod("debug-a", owner=None),
                       pod("cart-c", node="node-b", owner_name="cart")], replace={"cart-a": 2})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig,
                      ["uid-cart-a", "uid-gone", "uid-proxy-a", "uid-debug-a", "uid-cart-c"])
    assert result["changed"] is True
    assert result["results"] == [
        {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "evicted, replacement Ready"},
        {"uid": "uid-gone", "result": "skipped", "reason": "no pod with this uid on node node-a any more"},
        {"uid": "uid-proxy-a", "result": "skipped", "reason": DAEMONSET_REASON},
        {"uid": "uid-debug-a", "result": "skipped", "reason": BARE_REASON},
        {"uid": "uid-cart-c", "result": "skipped", "reason": "no pod with this uid on node node-a any more"}]
    assert clock.slept == [5]   # the first read after the eviction: cart-b Ready, the replacement not yet
    # per pod, what happened, in the module's msg
    assert result["msg"] == ("cart-a: evicted, replacement Ready; uid-gone: skipped (no pod with this uid on node node-a "
                             "any more); uid-proxy-a: skipped (%s); uid-debug-a: skipped (%s); uid-cart-c: skipped (no "
                             "pod with this uid on node node-a any more)" % (DAEMONSET_REASON, BARE_REASON))
    # the node's pods listed once, every page (one pod a page), by the node's field selector
    listings = [e for e in cluster.seen if e["path"] == "/api/v1/pods"]
    assert [e["query"] for e in listings] == [{"fieldSelector": "spec.nodeName=node-a"}] + [
        {"fieldSelector": "spec.nodeName=node-a", "continue": str(n)} for n in (1, 2, 3)]
    # exactly that pod, with its UID as precondition; cart-b (same labels, same node) stays
    assert cluster.posts() == [("/api/v1/namespaces/shop/pods/cart-a/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "cart-a", "namespace": "shop"},
        "deleteOptions": {"preconditions": {"uid": "uid-cart-a"}}})]
    assert "cart-b" in [p["metadata"]["name"] for p in cluster.pods]
    # the siblings (before) and the replacement (after) read: the pod's namespace, the whole of it (a StatefulSet's
    # pods differ in a label), its controller's pods picked by ownerReferences; one listing before, two after
    reads = [e for e in cluster.seen if e["path"] == "/api/v1/namespaces/shop/pods"]
    assert len([e for e in reads if "continue" not in e["query"]]) == 3 and all(
        "labelSelector" not in e["query"] for e in reads)


def test_a_bare_pod_is_evicted_when_asked_and_not_waited_for(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("debug-a", owner=None), pod("tmp-a", owner=None, labels={})])
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-debug-a", "uid-tmp-a"], bare_pods=True,
                      grace_period_seconds=5)
    assert result["results"] == [{"uid": "uid-debug-a", "pod": "shop/debug-a", "result": "evicted"},
                                 {"uid": "uid-tmp-a", "pod": "shop/tmp-a", "result": "evicted"}]
    assert [b["deleteOptions"] for _p, b in cluster.posts()] == [
        {"gracePeriodSeconds": 5, "preconditions": {"uid": "uid-debug-a"}},
        {"gracePeriodSeconds": 5, "preconditions": {"uid": "uid-tmp-a"}}]
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
    listings = [e for e in cluster.seen if e["path"] == "/api/v1/namespaces/shop/pods" and "continue" not in e["query"]]
    # cart-a: its siblings once, then its replacement at once and every 5 s to 20; web-a: siblings, Ready at once
    assert len(listings) == 1 + 5 + 1 + 1
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
    cluster = Cluster([pod("cart-a"), pod("db-0", owner="StatefulSet")], controllers={
        ("ReplicaSet", "cart-a-owner"): rs("cart-a-owner", "owner-cart-a-owner", 1, 1),
        ("StatefulSet", "db-0-owner"): rs("db-0-owner", "owner-db-0-owner", 1, 1, "StatefulSet")})
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
    said = "missing" if name is None else repr(name)
    assert result["results"] == [{"uid": "uid-cart-a", "result": "skipped", "reason": "the pod could not be read "
                                  "(metadata.name is %s): never evicted on an answer that cannot be read" % said}]
    assert cluster.posts() == []


# ---- the review's defects (each test fails on the code before the fix) -----------------------------------

SIBLING_NOT_READY = "another pod of ReplicaSet/cart is not Ready (shop/cart-b is %s): evicting this one could leave none"


def test_a_sibling_replica_never_counts_as_the_replacement(run_module, monkeypatch, kubeconfig, clock):
    """cart-a and cart-b: one ReplicaSet, the same labels, both Ready; nothing replaces cart-a. Its wait is not
    satisfied by cart-b, and cart-b is then not evicted (cart-a's replacement was never Ready: none would be left)."""
    cluster = Cluster([pod("cart-a", owner_name="cart"), pod("cart-b", owner_name="cart")])
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-cart-b"], replacement_timeout=10)
    assert result["results"] == [
        {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "failed", "reason": "replacement not Ready in time"},
        {"uid": "uid-cart-b", "result": "skipped", "reason": "the replacement of shop/cart-a, a pod of ReplicaSet/cart "
                                                             "evicted before it, was not confirmed Ready: evicting "
                                                             "this one could leave none"}]
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["cart-a"]
    assert [p["metadata"]["name"] for p in cluster.pods] == ["cart-b"]


def test_a_ready_pod_of_another_controller_with_the_same_labels_never_counts(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a", owner_name="cart"), pod("cart-x", owner_name="cart-old")])
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a"], replacement_timeout=5)
    assert result["results"] == [{"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "failed",
                                  "reason": "replacement not Ready in time"}]


def test_a_replacement_ready_but_terminating_never_counts(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a", owner_name="cart")], replace={"cart-a": "terminating"})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a"], replacement_timeout=5)
    assert result["results"][0]["result"] == "failed", result


@pytest.mark.parametrize("sibling", [dict(ready=False), dict(deleting=True)], ids=["not-ready", "terminating"])
def test_a_pod_whose_sibling_is_not_ready_or_terminating_is_skipped(run_module, monkeypatch, kubeconfig, clock,
                                                                    sibling):
    """An earlier run stopped while cart-b (cart-a's replacement then) was not Ready yet, or a sibling terminating:
    evicting cart-a could leave none - skipped, nothing sent (check mode says so too)."""
    cluster = Cluster([pod("cart-a", owner_name="cart"), pod("cart-b", owner_name="cart", **sibling)],
                      replace={"cart-a": True})
    state = "not Ready" if "ready" in sibling else "terminating"
    for check in (True, False):
        result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a"], check_mode=check)
        assert result["results"] == [{"uid": "uid-cart-a", "result": "skipped", "reason": SIBLING_NOT_READY % state}]
        assert result["changed"] is False
    assert cluster.posts() == []


def no_list(page):
    page["items"][0]["metadata"] = ["not", "an", "object"]
    return page


def odd_conditions(page):
    for item in page["items"]:
        item["status"]["conditions"] = 7
    return page


def odd_owners(page):
    for item in page["items"]:
        item["metadata"]["ownerReferences"] = 3
    return page


@pytest.mark.parametrize("mangle,words", [
    (no_list, "metadata is a list, not a dict"), (odd_conditions, "status.conditions is a int, not a list"),
    (odd_owners, "metadata.ownerReferences is a int, not a list"),
], ids=["metadata-list", "conditions-number", "owners-number"])
def test_an_unreadable_answer_after_an_eviction_is_that_pods_result_only(run_module, monkeypatch, kubeconfig, clock,
                                                                         mangle, words):
    """After cart-a's eviction every namespace listing is malformed: cart-a is "evicted, replacement not confirmed"
    with the reason (never "not attempted" - it was evicted), and the next pod (another namespace's) goes on."""
    cluster = Cluster([pod("cart-a"), pod("web-a", namespace="web")], replace={"cart-a": True, "web-a": True},
                      mangle=lambda page: mangle(page) if page["items"] and
                      page["items"][0]["metadata"]["namespace"] == "shop" else page)
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-web-a"], replacement_timeout=5)
    first, second = result["results"]
    assert first["result"] == "evicted, replacement not confirmed" and first["pod"] == "shop/cart-a", first
    assert words in first["reason"], first
    assert second == {"uid": "uid-web-a", "pod": "web/web-a", "result": "evicted, replacement Ready"}
    assert result["changed"] is True
    assert result["msg"].startswith("cart-a: evicted, replacement not confirmed (")


def test_an_unreadable_listed_pod_is_never_evicted_and_the_others_go_on(run_module, monkeypatch, kubeconfig, clock):
    odd = pod("cart-a")
    odd["metadata"]["ownerReferences"] = 5
    odd_status = pod("db-0", owner="StatefulSet")
    odd_status["status"] = ["Running"]
    cluster = Cluster([odd, odd_status, pod("api-a"), pod("web-a", namespace="web")], replace={"web-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-db-0", "uid-api-a", "uid-web-a"])
    assert result["results"] == [
        {"uid": "uid-cart-a", "result": "skipped", "reason": "the pod could not be read (metadata.ownerReferences is a "
                                                             "int, not a list): never evicted on an answer that cannot "
                                                             "be read"},
        {"uid": "uid-db-0", "result": "skipped", "reason": "the pod could not be read (status is a list, not a dict): "
                                                           "never evicted on an answer that cannot be read"},
        # cart-a's owner is unknown: it could be api-a's sibling
        {"uid": "uid-api-a", "result": "skipped", "reason": "the pods of ReplicaSet/api-a-owner could not be read "
                                                            "(listing the pods of namespace shop: a pod (cart-a) could "
                                                            "not be read: metadata.ownerReferences is a int, not a "
                                                            "list): never evicted without knowing them"},
        {"uid": "uid-web-a", "pod": "web/web-a", "result": "evicted, replacement Ready"}]
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["web-a"]


def test_a_2xx_eviction_answer_that_is_not_json_is_an_eviction(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a"), pod("web-a")], raw={"cart-a": (201, "<html>ok</html>")},
                      replace={"cart-a": 1, "web-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-web-a"])
    assert result["results"] == [{"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "evicted, replacement Ready"},
                                 {"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"}]


def test_a_409_with_the_same_uid_still_there_is_a_failure_not_replaced(run_module, monkeypatch, kubeconfig, clock):
    """The eviction handler's 409 after its own retries on a PodDisruptionBudget's conflict: the pod is read - the
    same UID is still there, so it is that eviction's failure (a 409 for a pod since gone is "gone")."""
    cluster = Cluster([pod("db-0", owner="StatefulSet"), pod("web-a")], conflict={"db-0": 1}, replace={"web-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-db-0", "uid-web-a"])
    failed, evicted = result["results"]
    assert failed["result"] == "failed" and failed["pod"] == "shop/db-0", failed
    assert failed["reason"].startswith("eviction of pod shop/db-0 failed after 1 attempt(s): 409 Conflict: Operation "
                                       "cannot be fulfilled on poddisruptionbudgets"), failed
    assert "the pod still has UID uid-db-0: not replaced" in failed["reason"]
    assert evicted["result"] == "evicted, replacement Ready"
    assert "db-0" in [p["metadata"]["name"] for p in cluster.pods]


def test_a_409_for_a_pod_gone_since_is_gone(run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("db-0", owner="StatefulSet")], conflict={"db-0": 1})
    real = cluster.evict

    def evict_then_gone(ns, name, body):
        answer = real(ns, name, body)
        cluster.pods = []
        return answer
    cluster.evict = evict_then_gone
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-db-0"])
    assert result["results"] == [{"uid": "uid-db-0", "pod": "shop/db-0", "result": "gone"}]


def test_a_uid_given_twice_is_evicted_once_and_a_mirror_pod_is_skipped(run_module, monkeypatch, kubeconfig, clock):
    mirror = pod("etcd-node-a", namespace="kube-system", owner="Node")
    cluster = Cluster([pod("cart-a"), mirror], replace={"cart-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-etcd-node-a", "uid-cart-a"])
    assert result["results"] == [
        {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "evicted, replacement Ready"},
        {"uid": "uid-etcd-node-a", "result": "skipped", "reason": "a mirror (static) pod: the kubelet recreates it "
                                                                  "from its manifest, an eviction does not recreate "
                                                                  "its sandbox"}]
    assert len(cluster.posts()) == 1


@pytest.mark.parametrize("name", [".", ".."])
def test_a_listed_pod_named_dot_or_dotdot_is_never_put_in_a_url(run_module, monkeypatch, kubeconfig, clock, name):
    odd = pod("cart-a")
    odd["metadata"]["name"] = name
    cluster = Cluster([odd])
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a"])
    assert result["results"][0]["result"] == "skipped" and "metadata.name is '%s'" % name in result["results"][0]["reason"]
    assert cluster.posts() == [] and not [e for e in cluster.seen if "/namespaces/" in e["path"]]


@pytest.mark.parametrize("module,args,words", [
    (pod_recreate, {"wait_sleep": 0}, "wait_sleep must be at least 1 s"),
    (pod_recreate, {"grace_period_seconds": -1}, "grace_period_seconds must not be negative"),
    (pod_recreate, {"node": ".."}, "node '..' is not a Kubernetes object name"),
    (pod_eviction, {"wait_sleep": 0}, "wait_sleep must be at least 1 s"),
    (pod_eviction, {"grace_period_seconds": -1}, "grace_period_seconds must not be negative"),
    (pod_eviction, {"name": ".."}, "name '..' is not a Kubernetes object name"),
    (pod_eviction, {"namespace": "."}, "namespace '.' is not a Kubernetes object name"),
], ids=["recreate-sleep", "recreate-grace", "recreate-node", "eviction-sleep", "eviction-grace", "eviction-name",
        "eviction-namespace"])
def test_bad_wait_sleep_grace_or_name_is_refused_before_any_request(run_module, monkeypatch, kubeconfig, module, args,
                                                                    words):
    cluster = Cluster([pod("cart-a")])
    monkeypatch.setattr(transport, "sender", cluster.sender)
    base = ({"node": "node-a", "uids": ["u1"]} if module is pod_recreate else {"namespace": "shop", "name": "cart-a"})
    result, failed, _t = run_module(module, dict(base, kubeconfig=kubeconfig, **args))
    assert failed and words in result["msg"] and cluster.seen == [], result


def test_the_role_passes_gvisor_evict_request_timeout_as_request_timeout():
    """The per-request timeout of the eviction is the role's (it was 120 s under kubernetes.core): a variable,
    default 30, documented, and handed to pod_recreate."""
    import os
    import yaml
    role = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "gvisor")
    defaults = yaml.safe_load(open(os.path.join(role, "defaults", "main.yml")))
    specs = yaml.safe_load(open(os.path.join(role, "meta", "argument_specs.yml")))
    tasks = yaml.safe_load(open(os.path.join(role, "tasks", "evict.yml")))
    assert defaults["gvisor_evict_request_timeout"] == 30
    assert specs["argument_specs"]["main"]["options"]["gvisor_evict_request_timeout"]["default"] == 30
    call = [t for block in tasks for t in block.get("block", []) if "nodefix.k8s.pod_recreate" in t][0]
    assert call["nodefix.k8s.pod_recreate"]["request_timeout"] == "{{ gvisor_evict_request_timeout | int }}"
    assert "gvisor_evict_request_timeout" in open(os.path.join(role, "README.md")).read()


def test_an_unexpected_error_after_an_eviction_is_that_pods_result_and_the_next_pod_goes_on(run_module, monkeypatch,
                                                                                            kubeconfig, clock):
    """The per-pod net: whatever a reader raises after cart-a's eviction, cart-a is "evicted, replacement not
    confirmed" (never "not attempted": the role's rescue would say so of an evicted pod), web-a goes on."""
    cluster = Cluster([pod("cart-a"), pod("web-a")], replace={"cart-a": True, "web-a": True})
    real = evictions.replacement_ready

    def odd_once(api, pod_, before, timeout, sleep=5):
        if pod_["name"] == "cart-a":
            raise TypeError("'int' object is not iterable")
        return real(api, pod_, before, timeout, sleep)
    monkeypatch.setattr(evictions, "replacement_ready", odd_once)
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-web-a"])
    assert result["results"] == [
        {"uid": "uid-cart-a", "pod": "shop/cart-a", "result": "evicted, replacement not confirmed",
         "reason": "TypeError: 'int' object is not iterable"},
        {"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"}]
    assert result["changed"] is True


def test_pod_eviction_takes_a_2xx_that_is_not_json_as_evicted_and_fails_on_a_409_with_the_same_uid(
        run_module, monkeypatch, kubeconfig, clock):
    cluster = Cluster([pod("cart-a"), pod("db-0", owner="StatefulSet")], raw={"cart-a": (200, "<html>ok</html>")},
                      conflict={"db-0": 1})
    monkeypatch.setattr(transport, "sender", cluster.sender)
    result, failed, _t = run_module(pod_eviction, {"kubeconfig": kubeconfig, "namespace": "shop", "name": "cart-a"})
    assert not failed and result["result"] == "evicted" and result["changed"] is True, result
    result, failed, _t = run_module(pod_eviction, {"kubeconfig": kubeconfig, "namespace": "shop", "name": "db-0",
                                                   "uid": "uid-db-0"})
    assert failed and result["status"] == 409 and "the pod still has UID uid-db-0: not replaced" in result["msg"], result


def test_a_pod_without_labels_is_waited_for_by_its_controller(run_module, monkeypatch, kubeconfig, clock):
    """The replacement is found by its controller, not by labels: a pod without labels is waited for too. A Job's
    desired count is not read (only a ReplicaSet's, StatefulSet's or ReplicationController's): the sibling check as
    before, and its result says the count was not read."""
    cluster = Cluster([pod("job-a", labels={}, owner="Job")], replace={"job-a": 2})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-job-a"])
    assert result["results"] == [{"uid": "uid-job-a", "pod": "shop/job-a", "result": "evicted, replacement Ready",
                                  "note": NOT_READ % ("Job", "job-a-owner")}]
    assert result["msg"] == "job-a: evicted, replacement Ready [%s]" % (NOT_READ % ("Job", "job-a-owner"))
    assert clock.slept == [5]
    assert not [e for e in cluster.seen if "/apis/" in e["path"] or "jobs" in e["path"]]


def test_an_eviction_without_an_answer_keeps_the_next_pod_of_its_controller(run_module, monkeypatch, kubeconfig, clock):
    """No answer to cart-a's eviction (it may have been evicted): cart-b, of the same ReplicaSet, is not evicted
    after it; web-a, of another, is."""
    cluster = Cluster([pod("cart-a", owner_name="cart"), pod("cart-b", owner_name="cart"), pod("web-a")],
                      replace={"web-a": True})
    real = cluster.evict

    def silent(ns, name, body):
        if name == "cart-a":
            raise TimeoutError("timed out")
        return real(ns, name, body)
    cluster.evict = silent
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-cart-a", "uid-cart-b", "uid-web-a"])
    first, second, third = result["results"]
    assert first["result"] == "failed" and "whether it was evicted is unknown" in first["reason"], first
    assert second["result"] == "skipped" and second["reason"].startswith("the replacement of shop/cart-a"), second
    assert third["result"] == "evicted, replacement Ready"


# ---- a controller short of a replica: its desired count read (_k8s.replicas) ----------------------------------

SHORT = "its %s %s has %d of %d replicas ready: evicting this pod would take another one down"
SHORT_OTHERS = ("its %s %s has %d of %d replicas ready and this pod is not one of them: another replica is missing "
                "or not Ready")
UNREAD = "its %s %s could not be read (%s): never evicted without knowing its desired replicas"
PATHS = {"ReplicaSet": "/apis/apps/v1/namespaces/shop/replicasets/", "StatefulSet":
         "/apis/apps/v1/namespaces/shop/statefulsets/", "ReplicationController":
         "/api/v1/namespaces/shop/replicationcontrollers/"}


def reads(cluster, kind=None):
    return [e["path"] for e in cluster.seen if any(e["path"].startswith(p) for k, p in PATHS.items()
                                                   if kind in (None, k))]


def replicated(kind, ready_pods, desired, ready_replicas, **cluster_args):
    """``ready_pods`` Ready pods web-a (on node-a: the one to evict), web-b, ... (the others on node-b) of one
    controller ``kind`` "web" whose object says ``desired`` and ``ready_replicas``."""
    pods = [pod("web-" + "abcdefgh"[n], node="node-a" if n == 0 else "node-b", owner=kind, owner_name="web")
            for n in range(ready_pods)]
    return Cluster(pods, controllers={(kind, "web"): rs("web", "owner-web", desired, ready_replicas, kind)},
                   **cluster_args)


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet", "ReplicationController"])
@pytest.mark.parametrize("ready_pods", [2, 3], ids=["one-missing", "status-short"])
def test_a_controller_short_of_a_ready_replica_holds_its_pod_even_when_every_other_pod_is_ready(
        run_module, monkeypatch, kubeconfig, clock, kind, ready_pods):
    """spec.replicas 3, readyReplicas 2: one replica missing wholly (unschedulable, not created yet) while web-a's
    sibling is Ready - or two Ready siblings while the status counts 2 -: the sibling check passes, the controller's
    count holds web-a (check mode too: the reads happen, nothing is sent), named in the result and in msg."""
    for check in (False, True):
        cluster = replicated(kind, ready_pods, 3, 2, replace={"web-a": True})
        result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"], check_mode=check)
        assert result["results"] == [{"uid": "uid-web-a", "result": "skipped", "reason": SHORT % (kind, "web", 2, 3)}]
        assert result["msg"] == "uid-web-a: skipped (%s)" % (SHORT % (kind, "web", 2, 3))
        assert result["changed"] is False and cluster.posts() == []
        assert reads(cluster) == [PATHS[kind] + "web"]
        assert {e["method"] for e in cluster.seen} == {"GET"}


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet", "ReplicationController"])
def test_a_controller_with_every_replica_ready_lets_its_pod_be_evicted(run_module, monkeypatch, kubeconfig, clock,
                                                                       kind):
    cluster = replicated(kind, 3, 3, 3, replace={"web-a": True})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"])
    assert result["results"] == [{"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"}]
    assert [p for p, _b in cluster.posts()] == ["/api/v1/namespaces/shop/pods/web-a/eviction"]
    assert reads(cluster) == [PATHS[kind] + "web"]
    check = replicated(kind, 3, 3, 3)
    result = recreate(run_module, monkeypatch, check, kubeconfig, ["uid-web-a"], check_mode=True)
    assert result["results"] == [{"uid": "uid-web-a", "pod": "shop/web-a", "result": "would evict"}]
    assert check.posts() == [] and reads(check) == [PATHS[kind] + "web"]


def test_absent_counts_read_as_the_api_server_defaults_them(run_module, monkeypatch, kubeconfig, clock):
    """No spec.replicas: 1 (the API server's default); no status.readyReplicas: 0 (omitted when zero)."""
    held = replicated("ReplicaSet", 1, None, None)
    result = recreate(run_module, monkeypatch, held, kubeconfig, ["uid-web-a"])
    assert result["results"][0]["reason"] == SHORT % ("ReplicaSet", "web", 0, 1) and held.posts() == []
    fine = replicated("ReplicaSet", 1, None, 1, replace={"web-a": True})
    result = recreate(run_module, monkeypatch, fine, kubeconfig, ["uid-web-a"])
    assert result["results"][0]["result"] == "evicted, replacement Ready", result


def odd(**changes):
    obj = rs("web", "owner-web", 3, 3)
    for key, value in changes.items():
        part, _dot, field = key.partition("__")
        if field:
            obj[part][field] = value
        else:
            obj[part] = value
    return obj


@pytest.mark.parametrize("answer,why", [
    ((404, json.dumps({"kind": "Status", "reason": "NotFound", "message": 'replicasets.apps "web" not found'})),
     "404: no such ReplicaSet in namespace shop"),
    ((403, json.dumps({"kind": "Status", "reason": "Forbidden", "message": 'replicasets.apps "web" is forbidden: User '
                       '"robot" cannot get resource "replicasets" in API group "apps" in the namespace "shop"'})),
     '403 replicasets.apps "web" is forbidden: User "robot" cannot get resource "replicasets" in API group "apps" in '
     'the namespace "shop"'),
    ((200, "<html>garbage</html>"), "the API server's answer is not a JSON object ('<html>garbage</html>')"),
    ((200, "[3]"), "the API server's answer is not a JSON object ('[3]')"),
    (TimeoutError("timed out"), "the API server could not be reached or did not answer within 30 s (TimeoutError: "
                                "timed out)"),
    (odd(spec=["replicas", 3]), "spec is a list, not an object"),
    (odd(status__readyReplicas="3"), "status.readyReplicas is '3', not a count"),
    (odd(spec__replicas=True), "spec.replicas is True, not a count"),
    (odd(spec__replicas=-1), "spec.replicas is -1, not a count"),
    (odd(metadata={"name": "web"}), "metadata.uid is missing"),
    (odd(metadata__uid="owner-web-old"), "its uid is owner-web-old, not the pod's ownerReference's owner-web: "
                                         "another object of that name"),
], ids=["404", "403", "html", "json-list", "timeout", "spec-list", "ready-string", "replicas-bool", "replicas-negative",
        "no-uid", "uid-mismatch"])
def test_a_controller_that_cannot_be_read_holds_its_pod_with_what_could_not_be_read(run_module, monkeypatch,
                                                                                    kubeconfig, clock, answer, why):
    """Fail closed: a 404, a 403, no answer, an answer of another shape or another object of that name (its uid not
    the pod's ownerReference's) - web-a is held, nothing is sent; the next pod (another controller's) goes on."""
    cluster = replicated("ReplicaSet", 3, 3, 3, replace={"api-a": True})
    cluster.controllers[("ReplicaSet", "web")] = answer
    cluster.pods.append(pod("api-a", owner_name="api"))
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a", "uid-api-a"])
    assert result["results"] == [
        {"uid": "uid-web-a", "result": "skipped", "reason": UNREAD % ("ReplicaSet", "web", why)},
        {"uid": "uid-api-a", "pod": "shop/api-a", "result": "evicted, replacement Ready"}]
    assert [p for p, _b in cluster.posts()] == ["/api/v1/namespaces/shop/pods/api-a/eviction"]
    assert ENV_SECRET not in json.dumps(result) and TOKEN not in json.dumps(result)


def test_each_pod_reads_its_controller_right_before_its_eviction(run_module, monkeypatch, kubeconfig, clock):
    """web-a and web-b (one ReplicaSet, every replica Ready) both evicted: the ReplicaSet read before each (a verdict
    kept from web-a's read would not see a replica gone missing while web-a's replacement came up); db-0 and db-1 (a
    StatefulSet short of one) both held: read for each, its reason on both."""
    pods = [pod(n, owner_name="web") for n in ("web-a", "web-b")] + [pod("web-c", node="node-b", owner_name="web")] + [
        pod(n, owner="StatefulSet", owner_name="db") for n in ("db-0", "db-1")]
    cluster = Cluster(pods, replace={"web-a": True, "web-b": True}, controllers={
        ("ReplicaSet", "web"): rs("web", "owner-web", 3, 3),
        ("StatefulSet", "db"): rs("db", "owner-db", 3, 2, "StatefulSet")})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a", "uid-db-0", "uid-web-b", "uid-db-1"])
    short = SHORT % ("StatefulSet", "db", 2, 3)
    assert result["results"] == [
        {"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"},
        {"uid": "uid-db-0", "result": "skipped", "reason": short},
        {"uid": "uid-web-b", "pod": "shop/web-b", "result": "evicted, replacement Ready"},
        {"uid": "uid-db-1", "result": "skipped", "reason": short}]
    assert reads(cluster) == [PATHS["ReplicaSet"] + "web", PATHS["StatefulSet"] + "db"] * 2
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["web-a", "web-b"]


def test_a_replica_gone_missing_after_the_first_eviction_holds_the_next_pod(
        run_module, monkeypatch, kubeconfig, clock):
    """web-a evicted with 3 of 3 Ready; by web-b's turn the ReplicaSet says 2 of 3 (a replica gone missing
    meanwhile, which no pod list shows): web-b is held - the count is read again, not kept from web-a's turn."""
    pods = [pod(n, owner_name="web") for n in ("web-a", "web-b")] + [pod("web-c", node="node-b", owner_name="web")]
    cluster = Cluster(pods, replace={"web-a": True, "web-b": True},
                      controllers={("ReplicaSet", "web"): rs("web", "owner-web", 3, 3)})
    after_first_eviction(monkeypatch, cluster, lambda cl: cl.controllers.update(
        {("ReplicaSet", "web"): rs("web", "owner-web", 3, 2)}))
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a", "uid-web-b"])
    assert result["results"] == [
        {"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"},
        {"uid": "uid-web-b", "result": "skipped", "reason": SHORT % ("ReplicaSet", "web", 2, 3)}], result
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["web-a"]


@pytest.mark.parametrize("ready_replicas, held", [(2, False), (1, True)], ids=["only-itself-down", "another-down"])
def test_a_pod_that_is_not_ready_itself_is_held_only_for_another_replica(
        run_module, monkeypatch, kubeconfig, clock, ready_replicas, held):
    """web-a is not Ready (the ReplicaSet's readyReplicas does not count it): with its two siblings Ready (2 of 3) its
    eviction takes no Ready replica away - evicted; with 1 of 3 another replica is missing or not Ready - held."""
    pods = [pod("web-a", owner_name="web", ready=False), pod("web-b", node="node-b", owner_name="web"),
            pod("web-c", node="node-b", owner_name="web")]
    cluster = Cluster(pods, replace={"web-a": True},
                      controllers={("ReplicaSet", "web"): rs("web", "owner-web", 3, ready_replicas)})
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"])
    if held:
        assert result["results"] == [{"uid": "uid-web-a", "result": "skipped",
                                      "reason": SHORT_OTHERS % ("ReplicaSet", "web", 1, 3)}], result
        assert cluster.posts() == []
    else:
        assert result["results"] == [{"uid": "uid-web-a", "pod": "shop/web-a", "result": "evicted, replacement Ready"}]


@pytest.mark.parametrize("kind", ["Job", "Rollout"])
def test_a_controller_of_another_kind_keeps_the_sibling_check_and_says_its_count_was_not_read(
        run_module, monkeypatch, kubeconfig, clock, kind):
    """A Job's, or a custom resource's, pod: nothing read of its controller (no such path for the kind), the sibling
    check as before - evicted with its siblings Ready, skipped with one not Ready -, and a note in its result."""
    note = NOT_READ % (kind, "batch")
    cluster = Cluster([pod("batch-a", owner=kind, owner_name="batch"), pod("batch-b", owner=kind, owner_name="batch"),
                       pod("batch-c", owner=kind, owner_name="batch", ready=False)], replace={"batch-a": True})
    cluster.pods[2]["metadata"]["namespace"] = "other"
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-batch-a"])
    assert result["results"] == [{"uid": "uid-batch-a", "pod": "shop/batch-a", "result": "evicted, replacement Ready",
                                  "note": note}]
    [p for p in cluster.pods if p["metadata"]["name"] == "batch-c"][0]["metadata"]["namespace"] = "shop"   # not Ready
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-batch-b"], check_mode=True)
    assert result["results"][0]["result"] == "skipped", result
    assert result["results"][0]["reason"].startswith("another pod of %s/batch is not Ready" % kind)
    assert reads(cluster) == [] and not [e for e in cluster.seen if e["path"].startswith("/apis/")]


def test_a_replicaset_of_another_api_group_is_not_read_as_apps(run_module, monkeypatch, kubeconfig, clock):
    """An owner of kind ReplicaSet in another group (a custom resource) is no apps/v1 ReplicaSet: not read, noted."""
    cluster = Cluster([pod("web-a", owner_name="web")], replace={"web-a": True})
    cluster.pods[0]["metadata"]["ownerReferences"][0]["apiVersion"] = "example.com/v1"
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"])
    assert result["results"][0]["note"] == NOT_READ % ("ReplicaSet", "web") and reads(cluster) == []


def test_a_replicaset_owner_without_an_api_version_holds_its_pod(run_module, monkeypatch, kubeconfig, clock):
    """Which group the ReplicaSet is of cannot be told (an ownerReference the API server would refuse): held."""
    cluster = replicated("ReplicaSet", 3, 3, 3, replace={"web-a": True})
    for item in cluster.pods:
        del item["metadata"]["ownerReferences"][0]["apiVersion"]
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"])
    assert result["results"] == [{"uid": "uid-web-a", "result": "skipped", "reason": UNREAD % (
        "ReplicaSet", "web", "its ownerReference has no apiVersion: which API group is unknown")}]
    assert cluster.posts() == [] and reads(cluster) == []


SCALED_TO_ZERO = ("its %s %s is scaled to zero replicas (spec.replicas 0): nothing would recreate this pod once "
                  "evicted")
LEFT = "no longer a pod of %s (orphaned, or adopted by another owner): nothing would recreate it"


def after_first_eviction(monkeypatch, cluster, change):
    """``change(cluster)`` once the first eviction was answered (while that pod's replacement is waited for)."""
    real_evict, done = cluster.evict, []

    def evict_then_change(ns, name, body):
        answer = real_evict(ns, name, body)
        if not done:
            done.append(change(cluster))
        return answer

    monkeypatch.setattr(cluster, "evict", evict_then_change)


def test_the_pods_own_ready_state_is_read_right_before_its_eviction_not_at_the_start(
        run_module, monkeypatch, kubeconfig, clock):
    """The ReplicaSet web wants 3: web-a (listed not Ready), web-b Ready, the third missing wholly. While api-a (an
    earlier pod of the run) is evicted and its replacement waited for, web-a turns Ready (readyReplicas 2): evicting
    web-a now would leave 1 of 3 - held (the node's listing at the start said web-a was not Ready)."""
    pods = [pod("api-a", owner_name="api"), pod("web-a", owner_name="web", ready=False),
            pod("web-b", node="node-b", owner_name="web")]
    cluster = Cluster(pods, replace={"api-a": True, "web-a": True},
                      controllers={("ReplicaSet", "web"): rs("web", "owner-web", 3, 1)})

    def web_a_ready(cl):
        [p for p in cl.pods if p["metadata"]["name"] == "web-a"][0]["status"]["conditions"][0]["status"] = "True"
        cl.controllers[("ReplicaSet", "web")] = rs("web", "owner-web", 3, 2)

    after_first_eviction(monkeypatch, cluster, web_a_ready)
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-api-a", "uid-web-a"])
    assert result["results"] == [
        {"uid": "uid-api-a", "pod": "shop/api-a", "result": "evicted, replacement Ready"},
        {"uid": "uid-web-a", "result": "skipped", "reason": SHORT % ("ReplicaSet", "web", 2, 3)}], result
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["api-a"]


def test_a_pod_orphaned_since_the_nodes_listing_is_skipped(run_module, monkeypatch, kubeconfig, clock):
    """web-a's ownerReference removed (orphaned: nothing recreates it now) while api-a's replacement was waited for:
    it is no longer among the pods of ReplicaSet/web - skipped, never evicted."""
    pods = [pod("api-a", owner_name="api"), pod("web-a", owner_name="web"), pod("web-b", node="node-b", owner_name="web")]
    cluster = Cluster(pods, replace={"api-a": True, "web-a": True})

    def orphaned(cl):
        [p for p in cl.pods if p["metadata"]["name"] == "web-a"][0]["metadata"]["ownerReferences"] = []

    after_first_eviction(monkeypatch, cluster, orphaned)
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-api-a", "uid-web-a"])
    assert result["results"][1] == {"uid": "uid-web-a", "result": "skipped", "reason": LEFT % "ReplicaSet/web"}, result
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["api-a"]


def test_an_owner_that_is_not_the_controller_makes_no_controller(run_module, monkeypatch, kubeconfig, clock):
    """Only an ownerReference with controller: true is a controller (Kubernetes' owners and dependents): a pod whose
    only owner has controller false (or none) is bare - skipped, nothing read or sent; evicted, and not waited for,
    with bare_pods. A pod with such an owner and a controller is its controller's."""
    def cluster_of():
        pods = [pod("debug-a", owner_name="web"), pod("debug-b", owner_name="web"),
                pod("web-c", owner_name="web"), pod("web-d", node="node-b", owner_name="web")]
        pods[0]["metadata"]["ownerReferences"][0]["controller"] = False
        del pods[1]["metadata"]["ownerReferences"][0]["controller"]
        pods[2]["metadata"]["ownerReferences"].insert(
            0, {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "owner-cfg"})
        return Cluster(pods, replace={"web-c": True}, controllers={("ReplicaSet", "web"): rs("web", "owner-web", 2, 2)})

    cluster = cluster_of()
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-debug-a", "uid-debug-b", "uid-web-c"])
    bare = BARE_REASON + " - its ownerReferences (ReplicaSet/web) name no controller (controller: true)"
    assert result["results"] == [
        {"uid": "uid-debug-a", "result": "skipped", "reason": bare},
        {"uid": "uid-debug-b", "result": "skipped", "reason": bare},
        {"uid": "uid-web-c", "pod": "shop/web-c", "result": "evicted, replacement Ready"}], result
    assert [p.rsplit("/", 2)[1] for p, _b in cluster.posts()] == ["web-c"]
    cluster = cluster_of()
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-debug-a", "uid-debug-b"], bare_pods=True)
    assert result["results"] == [{"uid": "uid-debug-a", "pod": "shop/debug-a", "result": "evicted"},
                                 {"uid": "uid-debug-b", "pod": "shop/debug-b", "result": "evicted"}], result
    assert reads(cluster) == []


@pytest.mark.parametrize("api_version", ["extensions/v1beta1", "apps/v1beta2"])
def test_a_replicaset_of_an_older_api_version_is_read_at_apps_v1(
        run_module, monkeypatch, kubeconfig, clock, api_version):
    """An ownerReference written before apps/v1 names the same ReplicaSet, served at apps/v1 today: read there
    (short of a replica: held; every replica Ready: evicted), not left to the sibling check."""
    for ready_replicas, held in ((2, True), (3, False)):
        cluster = replicated("ReplicaSet", 3, 3, ready_replicas, replace={"web-a": True})
        for item in cluster.pods:
            item["metadata"]["ownerReferences"][0]["apiVersion"] = api_version
        result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"])
        assert reads(cluster) == [PATHS["ReplicaSet"] + "web"]
        if held:
            assert result["results"] == [{"uid": "uid-web-a", "result": "skipped",
                                          "reason": SHORT % ("ReplicaSet", "web", 2, 3)}], result
        else:
            assert result["results"] == [{"uid": "uid-web-a", "pod": "shop/web-a",
                                          "result": "evicted, replacement Ready"}], result


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet", "ReplicationController"])
def test_a_controller_scaled_to_zero_holds_its_pod(run_module, monkeypatch, kubeconfig, clock, kind):
    """spec.replicas 0 (its pods being scaled down): nothing would recreate the pod - held with that reason at once,
    not evicted and then waited for a replacement that never comes."""
    cluster = replicated(kind, 1, 0, 1)
    result = recreate(run_module, monkeypatch, cluster, kubeconfig, ["uid-web-a"])
    assert result["results"] == [{"uid": "uid-web-a", "result": "skipped", "reason": SCALED_TO_ZERO % (kind, "web")}]
    assert cluster.posts() == [] and clock.slept == []
