# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout.node_cordon: ONE read of the Node feeds the give-back, whether the node was cordoned before,
its pods and the cordon (nodefix.k8s.node_cordon) - the requests, their order and bodies those the
playbook's four kubernetes.core tasks made; a malformed answer or a failure fails closed, and a failure
after the node's state was known carries it (the caller gives back a node it may have cordoned). A fake
API counts the requests."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import node_cordon

T0 = 1764150000.0


class Api(object):
    """A Node and its pods; ``fail`` maps a request ("get", "pods", "patch") to the error it raises. The Node keeps
    a resourceVersion, bumped by every patch; a patch given a stale ``resource_version`` is refused as the API
    server refuses it (409 Conflict) and changes nothing."""

    def __init__(self, node, pods=(), fail=None):
        self.node, self.pods, self.fail = node, list(pods), dict(fail or {})
        self.calls = []
        if isinstance((self.node or {}).get("metadata"), dict):
            self.node["metadata"].setdefault("resourceVersion", "1")

    def _maybe(self, what):
        self.calls.append(what)
        if what in self.fail:
            raise self.fail[what]

    def get_node(self, name):
        self._maybe("get")
        return None if self.node is None else json.loads(json.dumps(self.node))

    def list_pods(self, name):
        self._maybe("pods")
        return self.pods

    def list_budgets(self):
        self._maybe("budgets")
        return []

    def patch_node(self, name, body, resource_version=None):
        self._maybe("patch")
        self.calls[-1] = ("patch", json.loads(json.dumps(body)))
        current = self.node["metadata"].get("resourceVersion", "1")
        if resource_version is not None and resource_version != current:
            raise kube.KubeError("patching Node %s" % name, 409, "Conflict", "the object has been modified")
        self.node["metadata"]["resourceVersion"] = str(int(current) + 1)
        spec, notes = body.get("spec") or {}, (body.get("metadata") or {}).get("annotations") or {}
        if "unschedulable" in spec:
            self.node.setdefault("spec", {})["unschedulable"] = spec["unschedulable"]
        mine = self.node["metadata"].setdefault("annotations", {})
        for k, v in notes.items():
            if v is None:
                mine.pop(k, None)
            else:
                mine[k] = v
        return json.loads(json.dumps(self.node))


def node(unschedulable=False, **notes):
    return {"kind": "Node", "metadata": {"name": "node-a", "annotations": notes},
            "spec": {"unschedulable": True} if unschedulable else {}}


def record(run="dead-1"):
    return json.dumps({"run": run, "time": "2026-11-27T10:00:00Z"})


SECRET_POD = {"metadata": {"name": "web-1", "namespace": "default", "uid": "u1",
                           "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "PASSWORD=hunter2"},
                           "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "r"}]},
              "spec": {"containers": [{"env": [{"name": "PASSWORD", "value": "hunter2"}]}]},
              "status": {"phase": "Running"}}
DS_POD = {"metadata": {"name": "ds-1", "namespace": "kube-system", "ownerReferences": [{"kind": "DaemonSet"}]},
          "status": {"phase": "Running"}}
MIRROR_POD = {"metadata": {"name": "etcd-a", "namespace": "kube-system", "annotations": {cordon.MIRROR: "h"}},
              "status": {"phase": "Running"}}


def test_a_schedulable_node_is_read_once_its_pods_listed_and_cordoned_with_the_record_in_one_patch():
    api = Api(node(), [SECRET_POD, DS_POD])
    out = node_cordon.run(api, "node-a", "run-2", cordon=True, now=T0)
    assert [c if isinstance(c, str) else c[0] for c in api.calls] == ["get", "pods", "patch"]
    body = api.calls[2][1]
    assert body["spec"] == {"unschedulable": True}
    assert json.loads(body["metadata"]["annotations"][cordon.CORDONED_BY]) == {"run": "run-2", "time": "2025-11-26T09:40:00Z"}
    assert out["cordoned_before"] is False and out["cordoned"] is True and out["changed"] is True
    assert out["reclaim"]["action"] == "none"


def test_the_pods_carry_only_what_the_drain_verdict_reads_never_a_secret():
    out = node_cordon.run(Api(node(), [SECRET_POD, DS_POD, MIRROR_POD]), "node-a", "r", cordon=True, now=T0)
    assert "hunter2" not in json.dumps(out)
    # the verdict from the summaries is the one from the full pods
    assert cordon.drain_outcome(out["pods"], []) == cordon.drain_outcome([SECRET_POD, DS_POD, MIRROR_POD], [])
    assert cordon.drain_outcome(out["pods"], [])["evicted"] == ["default/web-1"]


def test_an_operators_cordon_is_read_once_and_never_patched():
    api = Api(node(True), [SECRET_POD])
    out = node_cordon.run(api, "node-a", "run-2", cordon=True, now=T0)
    assert api.calls == ["get", "pods"]
    assert out["cordoned_before"] is True and out["cordoned"] is False and out["reclaim"]["action"] == "keep"


def test_a_dead_runs_cordon_is_given_back_then_cordoned_again_by_this_run_from_the_same_read():
    api = Api(node(True, **{cordon.CORDONED_BY: record()}), [SECRET_POD])
    out = node_cordon.run(api, "node-a", "run-2", cordon=True, now=T0)
    assert [c if isinstance(c, str) else c[0] for c in api.calls] == ["get", "patch", "pods", "patch"]
    assert api.calls[1][1] == node_cordon.GIVE_BACK
    assert out["reclaim"]["action"] == "give_back" and out["cordoned_before"] is False and out["cordoned"]
    assert json.loads(api.node["metadata"]["annotations"][cordon.CORDONED_BY])["run"] == "run-2"


def test_reclaim_only_reads_the_node_and_gives_it_back_without_listing_pods():
    api = Api(node(True, **{cordon.CORDONED_BY: record()}))
    out = node_cordon.run(api, "node-a", "run-2", cordon=False)
    assert [c if isinstance(c, str) else c[0] for c in api.calls] == ["get", "patch"]
    assert out["changed"] and "cordoned_before" not in out and "pods" not in out
    assert api.node["spec"]["unschedulable"] is False


def test_a_stale_record_on_a_schedulable_node_is_removed():
    api = Api(node(False, **{cordon.CORDONED_BY: record()}))
    out = node_cordon.run(api, "node-a", "run-2")
    assert api.calls[1] == ("patch", node_cordon.CLEAR) and out["reclaim"]["action"] == "clear"


def test_a_held_node_stays_cordoned_untouched_and_is_reported_held():
    """Issue 62: a node the last run left held was drained and fixed again by the next run (it read as "cordoned
    before"), which said ok. Held, it is read once and nothing else: no pod list, no PATCH; the answer says held
    and how a person clears the hold."""
    held = json.dumps({"run": "dead-1", "time": "2026-12-01T00:00:00Z", "reason": "not verified"})
    api = Api(node(True, **{cordon.CORDONED_BY: record(), cordon.HELD: held}), [SECRET_POD])
    out = node_cordon.run(api, "node-a", "run-2", cordon=True)
    assert api.calls == ["get"] and out["cordoned_before"] is True and "pods" not in out and not out["changed"]
    assert out["reclaim"]["action"] == "keep" and out["reclaim"]["held"] is True
    assert out["reclaim"]["msg"].startswith("held cordoned by run dead-1 since 2026-12-01T00:00:00Z: not verified - "
                                            "left untouched until a person clears the hold (kubectl annotate node "
                                            "node-a nodefix.k8s/held- and kubectl uncordon node-a)")
    again = node_cordon.run(api, "node-a", "run-3", cordon=True)   # every run: held, never ok
    assert again["reclaim"]["held"] and api.calls == ["get", "get"]
    # a person cleared the hold (removed the annotation and uncordoned it): the next run may drain it again
    cleared = Api(node(False), [SECRET_POD])
    assert node_cordon.run(cleared, "node-a", "run-4", cordon=True)["reclaim"]["held"] is False


def test_a_failed_give_back_is_a_warning_and_the_node_stays_cordoned_before():
    api = Api(node(True, **{cordon.CORDONED_BY: record()}), [SECRET_POD], fail={"patch": NodefixError("403")})
    out = node_cordon.run(api, "node-a", "run-2", cordon=True)
    assert "403" in out["reclaim"]["error"] and out["cordoned_before"] is True and not out["cordoned"]
    assert not out["changed"]


def test_check_mode_reads_and_writes_nothing():
    api = Api(node(True, **{cordon.CORDONED_BY: record()}), [SECRET_POD])
    out = node_cordon.run(api, "node-a", "run-2", cordon=True, check_mode=True)
    # (changed: it would give it back - Ansible's check-mode convention)
    # (the dry run's plan also reads the PodDisruptionBudgets: a read)
    assert api.calls == ["get", "pods", "budgets"] and out["cordoned_before"] is True and out["changed"]
    assert api.node["spec"]["unschedulable"] is True
    api = Api(node(), [SECRET_POD])
    out = node_cordon.run(api, "node-a", "run-2", cordon=True, check_mode=True)
    assert api.calls == ["get", "pods", "budgets"] and out["cordoned_before"] is False and not out["cordoned"]


def test_an_unknown_node_is_never_drained_but_reclaim_alone_just_says_so():
    with pytest.raises(node_cordon.CordonError, match="not found in the API server") as err:
        node_cordon.run(Api(None), "node-a", "r", cordon=True)
    assert err.value.cordoned_before is None
    assert node_cordon.run(Api(None), "node-a", "r")["found"] is False


@pytest.mark.parametrize("answer", [
    {"kind": "Status"},                                                    # no metadata
    {"metadata": {"name": "node-b"}, "spec": {}},                          # another node
    {"metadata": {"name": "node-a", "annotations": ["x"]}, "spec": {}},    # annotations not a mapping
    {"metadata": {"name": "node-a"}, "spec": ["x"]},                       # spec not a mapping
])
def test_a_malformed_node_fails_closed_before_anything_is_written(answer):
    api = Api(answer)
    with pytest.raises(node_cordon.CordonError) as err:
        node_cordon.run(api, "node-a", "r", cordon=True)
    assert api.calls == ["get"] and err.value.cordoned_before is None


def test_a_failed_pod_list_or_cordon_carries_the_state_before_so_the_node_is_given_back():
    api = Api(node(), fail={"pods": NodefixError("listing the pods of node-a: no answer")})
    with pytest.raises(node_cordon.CordonError, match="no answer") as err:
        node_cordon.run(api, "node-a", "r", cordon=True)
    assert err.value.cordoned_before is False and api.calls == ["get", "pods"]
    api = Api(node(), [SECRET_POD], fail={"patch": NodefixError("patching Node node-a: no answer")})
    with pytest.raises(node_cordon.CordonError, match="cordoning Node node-a") as err:
        node_cordon.run(api, "node-a", "r", cordon=True)
    assert err.value.cordoned_before is False


def test_a_malformed_pod_fails_closed():
    bad = {"metadata": {"name": "p", "ownerReferences": "DaemonSet"}}
    api = Api(node(), [bad])
    with pytest.raises(NodefixError):
        node_cordon.run(api, "node-a", "r", cordon=True)
    assert "patch" not in [c if isinstance(c, str) else c[0] for c in api.calls]


def test_the_api_timeout_must_be_a_whole_number_of_seconds():
    for bad in (0, True, 1.5, "30"):
        with pytest.raises(NodefixError, match="whole number"):
            node_api.NodeApi("/dev/null", timeout=bad)


# Review R5: the public module's PATCHes (the give-back and the cordon) were unconditional - a person's cordon made
# between the read and the write was overwritten. Each is conditional on the read now.

class Versions(Api):
    """Api recording the resourceVersion each PATCH was conditional on; ``meanwhile``: a change another writer makes
    to the Node right before the first PATCH (the request then meets a newer Node: 409)."""

    def __init__(self, node_, pods=(), meanwhile=None):
        super(Versions, self).__init__(node_, pods)
        self.versions, self.meanwhile = [], meanwhile

    def patch_node(self, name, body, resource_version=None):
        self.versions.append(resource_version)
        if self.meanwhile:
            self.meanwhile(self.node)
            self.node["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)
            self.meanwhile = None
        return super(Versions, self).patch_node(name, body, resource_version)


def test_the_give_back_and_the_cordon_are_conditional_on_the_read():
    api = Versions(node(True, **{cordon.CORDONED_BY: record()}), [SECRET_POD])
    node_cordon.run(api, "node-a", "run-2", cordon=True, now=T0)
    assert api.versions == ["1", "2"]       # the give-back on the read, the cordon on the give-back's answer


def test_a_persons_cordon_made_between_the_read_and_the_cordon_is_read_again_and_kept():
    def person(n):
        n["spec"]["unschedulable"] = True
    api = Versions(node(), [SECRET_POD], meanwhile=person)
    out = node_cordon.run(api, "node-a", "run-2", cordon=True, now=T0)
    assert out["cordoned_before"] is True and out["cordoned"] is False
    assert cordon.CORDONED_BY not in api.node["metadata"]["annotations"]       # the person's cordon, not this run's
    assert [c if isinstance(c, str) else c[0] for c in api.calls] == ["get", "pods", "patch", "get", "pods"]


def test_a_node_without_a_resource_version_is_never_written():
    bare = node()
    api = Api(bare, [SECRET_POD])
    del api.node["metadata"]["resourceVersion"]
    with pytest.raises(node_cordon.CordonError, match="resourceVersion") as err:
        node_cordon.run(api, "node-a", "run-2", cordon=True, now=T0)
    assert err.value.cordoned_before is False and "patch" not in [c if isinstance(c, str) else c[0] for c in api.calls]
    api = Api(node(True, **{cordon.CORDONED_BY: record()}))
    del api.node["metadata"]["resourceVersion"]
    out = node_cordon.run(api, "node-a", "run-2")
    assert "resourceVersion" in out["reclaim"]["error"] and api.node["spec"]["unschedulable"] is True
