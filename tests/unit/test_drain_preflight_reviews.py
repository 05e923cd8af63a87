# SPDX-License-Identifier: GPL-3.0-or-later
"""The drain preflight asks for every permission the run needs (playbooks/tasks/preflight_drain.yml, included as it
is and run by ansible-playbook on localhost against the kube-apiserver TEST DOUBLE, lab/apiserver-double, whose
SelfSubjectAccessReviews are validated and answered as the real API server's): besides the drain's own (get/patch
nodes, list pods, create pods/eviction), list PodDisruptionBudgets (the drain's plan), list nodes when the storm
breaker is on, get/patch the kubeadm kubelet ConfigMap in kube-system when the kubelet role's durable step can run
(kubelet_durable_enabled, the name kubelet_configmap_name), get pods, apps replicasets and statefulsets and
replicationcontrollers when the gVisor eviction is on and the
non-resource get /readyz/etcd when the control-plane guard is on (spec.nonResourceAttributes) - and only those
that are switched on. A denial refuses the rollout naming what was denied."""

import json
import os
import subprocess
import sys

import yaml

import pytest

from ansible_collections.nodefix.k8s.tests.unit.plugins.modules.test_node_ready import Double

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFLIGHT = os.path.join(ROOT, "playbooks", "tasks", "preflight_drain.yml")
DRAIN = [{"verb": "get", "resource": "nodes"}, {"verb": "patch", "resource": "nodes"},
         {"verb": "list", "resource": "pods"}, {"verb": "create", "resource": "pods", "subresource": "eviction"},
         {"verb": "list", "group": "policy", "resource": "poddisruptionbudgets"}]


def refusals(tmp_path, cases):
    """{case: _nodefix_drain_refused (or {})} of one ansible-playbook run, a play a case ({case: vars}; a refusal is
    localhost's fact: each play starts without it)."""
    plays = []
    for case, extra in cases.items():
        out = str(tmp_path / ("%s.json" % case))
        plays.append({"name": case, "hosts": "localhost", "gather_facts": False,
                      "vars": dict({"ansible_python_interpreter": sys.executable, "nodefix_events": False,
                                    "_nodefix_storm_percent": 100}, **extra),
                      "tasks": [
                          {"name": "start without a refusal", "ansible.builtin.set_fact": {"_nodefix_drain_refused": {}}},
                          {"ansible.builtin.include_tasks": PREFLIGHT},
                          {"name": "keep the refusal", "ansible.builtin.copy": {
                              "content": "{{ hostvars.localhost._nodefix_drain_refused | default({}) | to_json }}",
                              "dest": out, "mode": "0600"}}]})
    play = tmp_path / "preflight.yml"
    play.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
    env.update({"ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
                "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
                "ANSIBLE_HOME": str(tmp_path / "home"), "ANSIBLE_NOCOLOR": "1"})
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([exe, "-i", "localhost,", "-c", "local", str(play)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return dict((case, json.loads((tmp_path / ("%s.json" % case)).read_text())) for case in cases)


def drainer(api, **switches):
    return dict({"inventory_hostname": "node-a", "nodefix_node_name": "node-a", "nodefix_kubeconfig": api.kubeconfig},
                **switches)


def asked(api):
    return [e["attributes"] for e in api.data()["log"] if "selfsubjectaccessreviews" in e["path"]]


@pytest.fixture
def doubles(tmp_path):
    """A double of its own (its own state and record) for each case."""
    made = {}

    def make(case, denials):
        (tmp_path / case).mkdir()
        made[case] = Double(tmp_path / case, {"nodes": {"node-a": {}}, "access_denials": denials})
        return made[case]
    yield make
    for one in made.values():
        one.stop()


def test_the_preflight_asks_for_every_permission_switched_on_and_names_a_denial(tmp_path, doubles):
    apis = dict((case, doubles(case, denials)) for case, denials in (
        ("off", []), ("all", []), ("guard_denied", [{"verb": "get", "path": "/readyz/etcd", "reason": "no"}]),
        ("owners_denied", [{"verb": "get", "group": "apps", "resource": "statefulsets", "reason": "no"}])))
    seen = refusals(tmp_path, {
        "off": {"_nodefix_drainers": [drainer(apis["off"], kubelet_durable_enabled=False)]},
        "all": {"_nodefix_drainers": [drainer(apis["all"], kubelet_configmap_name="kubelet-config-1.23",
                                              gvisor_evict_pods=True)],
                "_nodefix_storm_percent": 20, "nodefix_control_plane": True},
        "guard_denied": {"_nodefix_drainers": [drainer(apis["guard_denied"], kubelet_durable_enabled="false")],
                         "nodefix_control_plane": True},
        "owners_denied": {"_nodefix_drainers": [drainer(apis["owners_denied"], kubelet_durable_enabled=False)],
                          "gvisor_evict_pods": True}})
    assert seen["off"] == {} and seen["all"] == {}, seen
    assert asked(apis["off"]) == DRAIN
    cm = {"resource": "configmaps", "namespace": "kube-system", "name": "kubelet-config-1.23"}
    assert asked(apis["all"]) == DRAIN + [
        {"verb": "list", "resource": "nodes"}, dict(cm, verb="get"), dict(cm, verb="patch"),
        {"verb": "get", "resource": "pods"},
        # (the gVisor eviction reads the controller of each pod it would evict)
        {"verb": "get", "group": "apps", "resource": "replicasets"},
        {"verb": "get", "group": "apps", "resource": "statefulsets"},
        {"verb": "get", "resource": "replicationcontrollers"}, {"verb": "get", "path": "/readyz/etcd"},
        # (the storm breaker's reserve: the Leases in the lock's namespace)
        {"verb": "get", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system"},
        {"verb": "create", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system"},
        {"verb": "update", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system"},
        {"verb": "delete", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system"}]
    assert asked(apis["guard_denied"]) == DRAIN + [{"verb": "get", "path": "/readyz/etcd"}]
    msg = seen["guard_denied"]["msg"]
    assert "the API server denies this run (its kubeconfig's user) get /readyz/etcd (the control-plane guard)" in msg
    # the gVisor eviction on (the play's gvisor_evict_pods): its controllers' reads asked, a denial named
    assert asked(apis["owners_denied"])[len(DRAIN):] == [
        {"verb": "get", "resource": "pods"}, {"verb": "get", "group": "apps", "resource": "replicasets"},
        {"verb": "get", "group": "apps", "resource": "statefulsets"},
        {"verb": "get", "resource": "replicationcontrollers"}]
    assert "denies this run (its kubeconfig's user) get apps statefulsets (the gVisor eviction)" in \
        seen["owners_denied"]["msg"], seen["owners_denied"]
