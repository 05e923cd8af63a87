# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout machine's API object (_k8s.rollout_api.RolloutApi) through the collection's one client, against the
kube-apiserver TEST DOUBLE (lab/apiserver-double, a real HTTP server): the contract the machine's in-memory double
(tests/unit/plugins/module_utils/rollout_api_double.py) claims to honour - an eviction a budget refuses is a 429 that
is returned (not retried by the client), a replaced pod's eviction a 409, a missing pod's a 404; a stale Node patch
is a 409 and changes nothing; a Lease taken is not taken twice - and one whole rollout of the machine over it."""

import datetime

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import rollout_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome
from plugins.module_utils.rollout_machine_harness import CONTAINERD, HERE, Work, audit_before, plan
# the fixture that starts the double on a free port (with this module's STATE: indirect)
from test_apiserver_double_node_version import double  # pylint: disable=unused-import

PODS = [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet", "pdb": True,
         "labels": {"app": "web"}},
        {"namespace": "default", "name": "web-2", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "web"}},
        {"namespace": "kube-system", "name": "ds-1", "node": "node-a", "owner": "DaemonSet"}]
STATE = {"nodes": {"node-a": {}, "node-b": {}}, "pods": PODS}
# every test here runs against a double started with STATE
pytestmark = pytest.mark.parametrize("double", [STATE], indirect=True, ids=["pods"])


@pytest.fixture
def api(double):  # noqa: F811
    return rollout_api.RolloutApi(double["kubeconfig"], timeout=10)


def test_evictions_answer_what_the_drain_judges(api):
    uid = [p for p in api.list_pods("node-a") if p["metadata"]["name"] == "web-1"][0]["metadata"]["uid"]
    status, after, said = api.evict("default", "web-1", uid)
    assert status == 429 and after is None and "disruption budget" in said
    assert api.evict("default", "web-2", "not-its-uid")[0] == 409
    assert api.evict("default", "web-2")[0] in (200, 201)
    assert api.evict("default", "web-2")[0] == 404
    assert sorted(p["metadata"]["name"] for p in api.list_pods("node-a")) == ["ds-1", "web-1"]
    assert [p["metadata"]["name"] for p in api.list_pods("node-a", "app=web")] == ["web-1"]


def test_a_stale_node_patch_is_a_409_and_a_lease_is_taken_once(api):
    node = api.get_node("node-a")
    api.patch_node("node-a", {"metadata": {"annotations": {"a": "1"}}}, node["metadata"]["resourceVersion"])
    with pytest.raises(kube.KubeError) as exc:
        api.patch_node("node-a", {"metadata": {"annotations": {"b": "1"}}}, node["metadata"]["resourceVersion"])
    assert exc.value.status == 409 and "b" not in api.get_node("node-a")["metadata"]["annotations"]
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "nodefix-reboot-0", "namespace": "kube-system"}, "spec": {"holderIdentity": "node-a"}}
    assert api.create_lease("kube-system", body) is True and api.create_lease("kube-system", body) is False
    assert api.get_lease("kube-system", "nodefix-reboot-0")["spec"]["holderIdentity"] == "node-a"


def test_one_whole_rollout_over_http(api):
    now = [datetime.datetime(2026, 12, 6, 7, tzinfo=datetime.timezone.utc)]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += datetime.timedelta(seconds=seconds)
    ctx = mctx.Context(api, "node-a", "run-http", HERE, lambda pid: True, audit_before([CONTAINERD]),
                       plan([CONTAINERD]), lambda: now[0], sleep, {"drain_timeout": 12}, **Work().kw())
    first = machine.begin(ctx)
    # web-1's budget never allows: asked again every 5 s (the 429 names no retryAfterSeconds) until the timeout
    assert first["outcome"] == Outcome.DRAIN_FAILED and "default/web-1 (refused by a PodDisruptionBudget)" in \
        first["detail"] and slept[:2] == [5, 5]
    notes = api.get_node("node-a")["metadata"].get("annotations") or {}
    assert not api.get_node("node-a")["spec"].get("unschedulable") and cordon.CORDONED_BY not in notes
    assert record.ANNOTATION not in notes
    # the storm breaker's reserve (a Lease created with the API server's own validation) taken, then given back
    storm = [s["detail"] for s in first["steps"] if s["name"] == "storm"][0]
    assert "reserved node-a (Lease kube-system/nodefix-storm)" in storm, storm
    assert api.get_lease("kube-system", "nodefix-storm") is None
