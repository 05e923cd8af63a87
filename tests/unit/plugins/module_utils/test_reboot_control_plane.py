# SPDX-License-Identifier: GPL-3.0-or-later
"""_reboot.control_plane - the control-plane guard (labels, etcd health, one at a time) and the
reclaim of a slot left by a dead run - over the in-memory Leases of test_reboot (409s as the API
server answers them) and fake Nodes, etcd pods and /readyz/etcd answers in the API's shapes."""

import datetime

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import control_plane as cp
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
from plugins.module_utils.test_reboot import FakeLeases

CP_LABEL = "node-role.kubernetes.io/control-plane"
MASTER_LABEL = "node-role.kubernetes.io/master"


def node(name, labels=None, ready="True"):
    return {"metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def etcd_pod(on, ready="True", phase="Running"):
    """kubeadm's etcd static pod (its mirror pod): etcd-<node> in kube-system, component=etcd."""
    return {"metadata": {"name": "etcd-" + on, "namespace": "kube-system",
                         "labels": {"component": "etcd", "tier": "control-plane"}},
            "spec": {"nodeName": on}, "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}


class Api(FakeLeases):
    def __init__(self, nodes, pods, readyz=(200, "ok")):
        super(Api, self).__init__()
        self.nodes = dict((n["metadata"]["name"], n) for n in nodes)
        self.pods = pods
        self.readyz_answer = readyz
        self.asked = []

    def get_node(self, name):
        return self.nodes.get(name)

    def list_nodes(self):
        return list(self.nodes.values())

    def list_namespaced_pods(self, namespace, selector):
        self.asked.append((namespace, selector))
        return [p for p in self.pods if p["metadata"]["namespace"] == namespace
                and p["metadata"]["labels"].get("component") == selector.split("=", 1)[1]]

    def readyz(self, check):
        return self.readyz_answer


def three(**kw):
    nodes = [node("cp-1", {CP_LABEL: ""}), node("cp-2", {CP_LABEL: ""}), node("cp-3", {MASTER_LABEL: ""}),
             node("w-1")]
    pods = [etcd_pod("cp-1"), etcd_pod("cp-2"), etcd_pod("cp-3")]
    return Api(nodes, pods, **kw)


def lock(api, holder, name="nodefix-control-plane"):
    return reboot_gate_lib.LeaseLock(api, "kube-system", name, 1, holder)


def guard(api, name, allow=True, **kw):
    return cp.guard(api.get_node(name), allow, api, lock(api, name), "reboot", **kw)


def test_the_labels_kubeadm_sets_make_a_control_plane_node():
    assert cp.is_control_plane(node("a", {CP_LABEL: ""})) and cp.is_control_plane(node("b", {MASTER_LABEL: ""}))
    assert not cp.is_control_plane(node("c", {"node-role.kubernetes.io/worker": ""}))
    assert not cp.is_control_plane(None)


def test_a_worker_goes_through_and_takes_nothing():
    api = three()
    out = guard(api, "w-1", allow=False)
    assert out["control_plane"] is False and out["allowed"] and out["held_by"] == [] and api.leases == {}


@pytest.mark.parametrize("name", ["cp-1", "cp-3"], ids=["control-plane-label", "legacy-master-label"])
def test_not_opted_in_a_control_plane_node_is_held_and_etcd_is_not_even_read(name):
    api = three()
    out = guard(api, name, allow=False)
    assert out["control_plane"] and not out["allowed"] and api.leases == {} and api.asked == []
    assert out["held_by"][0].startswith("control plane: %s is a control-plane node and nodefix_control_plane is false"
                                        % name)


def test_the_hint_makes_a_node_without_labels_a_control_plane_node():
    api = three()
    out = guard(api, "w-1", allow=False, hint=True)
    assert out["control_plane"] and not out["allowed"]


def test_opted_in_one_control_plane_node_at_a_time():
    api = three()
    first = guard(api, "cp-1")
    assert first["allowed"] and first["lock"]["slot"] == "nodefix-control-plane-0"
    assert first["etcd"]["mode"] == "static" and first["etcd"]["problems"] == [] and first["etcd"]["readyz"] == "200 ok"
    second = guard(api, "cp-2")
    assert not second["allowed"] and second["lock"]["slot"] is None
    assert "another control-plane node is being disrupted (nodefix-control-plane-0 held by cp-1" in second["held_by"][0]
    again = guard(api, "cp-1")   # a re-run keeps its slot
    assert again["allowed"] and again["lock"]["slot"] == "nodefix-control-plane-0"


@pytest.mark.parametrize("change, said", [
    (lambda api: api.pods[1]["status"]["conditions"][0].update(status="False"),
     "etcd member etcd-cp-2 on cp-2 is not Ready (phase Running)"),
    (lambda api: api.pods[1]["status"].update(phase="Pending"), "etcd member etcd-cp-2 on cp-2 is not Ready (phase Pending)"),
    (lambda api: api.pods.pop(2), "control-plane node cp-3 has no etcd member"),
    (lambda api: setattr(api, "readyz_answer", (500, "[-]etcd failed: reason withheld\nreadyz check failed")),
     "the API server's /readyz/etcd answered 500 [-]etcd failed"),
    (lambda api: setattr(api, "readyz_answer", (None, "no answer: connection refused")),
     "the API server's /readyz/etcd answered None no answer"),
    (lambda api: setattr(api, "readyz_answer", (200, "not ok")), "the API server's /readyz/etcd answered 200 not ok"),
], ids=["member-not-ready", "member-pending", "member-missing", "readyz-failing", "readyz-silent", "readyz-not-ok"])
def test_an_unhealthy_etcd_holds_every_control_plane_node(change, said):
    api = three()
    change(api)
    out = guard(api, "cp-1")
    assert not out["allowed"] and api.leases == {}
    assert out["held_by"][0].startswith("control plane: etcd is not healthy: ") and said in out["held_by"][0], out


def test_external_etcd_needs_the_users_health_command():
    api = three()
    api.pods = []
    out = guard(api, "cp-1")
    assert not out["allowed"] and "etcd runs outside the cluster" in out["held_by"][0] and api.leases == {}
    calls = []

    def run(argv, rc=1):
        calls.append(argv)
        return rc, "", "cluster is unhealthy"
    out = guard(api, "cp-1", health_command=["etcdctl", "endpoint", "health", "--cluster"], run_command=run)
    assert not out["allowed"] and "the etcd health command etcdctl endpoint health --cluster exited 1: cluster is " \
                                  "unhealthy" in out["held_by"][0]
    out = guard(api, "cp-1", health_command=["etcdctl", "endpoint", "health"], run_command=lambda argv: (0, "ok", ""))
    assert out["allowed"] and out["etcd"]["mode"] == "external" and calls == [["etcdctl", "endpoint", "health", "--cluster"]]


def test_reclaim_gives_back_a_ready_nodes_slot_and_keeps_a_down_nodes():
    api = three()
    api.nodes["w-2"] = node("w-2", ready="False")
    for holder, slot in (("w-1", "nodefix-reboot-0"), ("w-2", "nodefix-reboot-1")):
        body = {"metadata": {"name": slot}, "spec": {"holderIdentity": holder, "acquireTime": "T0"}}
        assert api.create_lease("kube-system", body)
    reboot = dict((h, reboot_gate_lib.LeaseLock(api, "kube-system", "nodefix-reboot", 2, h)) for h in ("w-1", "w-2"))
    dry = cp.reclaim(reboot["w-1"], api.get_node("w-1"), dry_run=True)
    assert dry["released"] == "nodefix-reboot-0" and "nodefix-reboot-0" in api.leases   # check mode: nothing deleted
    out = cp.reclaim(reboot["w-1"], api.get_node("w-1"))
    assert out == {"slot": "nodefix-reboot-0", "since": "T0", "released": "nodefix-reboot-0", "kept": None}
    assert "nodefix-reboot-0" not in api.leases
    down = cp.reclaim(reboot["w-2"], api.get_node("w-2"))
    assert down["released"] is None and "not Ready in the API server - it went down and is not back" in down["kept"]
    assert "nodefix-reboot-1" in api.leases
    # a node that holds nothing: nothing to say
    assert cp.reclaim(reboot["w-1"], api.get_node("w-1")) == {"slot": None, "since": None, "released": None, "kept": None}


@pytest.mark.parametrize("marked", [True, False], ids=["kept", "control-unmarked"])
def test_a_kept_slot_is_marked_on_its_lease_and_never_expires_even_once_its_holder_is_ready(marked):
    # w-2 went down holding the slot: reclaim keeps it and marks the Lease; w-2 is Ready again later (Ready is not
    # "back in service"), and w-3's lock, far past the TTL on its own clock, still does not take it over
    api = three()
    api.nodes["w-2"] = node("w-2", ready="False")
    body = {"metadata": {"name": "nodefix-reboot-0"},
            "spec": {"holderIdentity": "w-2", "acquireTime": "T0", "renewTime": "T0", "leaseDurationSeconds": 60}}
    assert api.create_lease("kube-system", body)
    if marked:
        out = cp.reclaim(reboot_gate_lib.LeaseLock(api, "kube-system", "nodefix-reboot", 1, "w-2"), api.get_node("w-2"))
        assert out["kept"] and "could not be marked" not in out["kept"]
        assert api.leases["nodefix-reboot-0"]["metadata"]["annotations"][reboot_gate_lib.KEPT] == out["kept"]
    api.nodes["w-2"] = node("w-2")
    now = [datetime.datetime(2026, 12, 6, 7, 0, tzinfo=datetime.timezone.utc)]
    other = reboot_gate_lib.LeaseLock(api, "kube-system", "nodefix-reboot", 1, "w-3", 60, now=lambda: now[0],
                                      observed={})
    assert other.acquire()[0] is None
    now[0] += datetime.timedelta(hours=5)
    taken = other.acquire()[0]
    assert taken == (None if marked else "nodefix-reboot-0")      # the control: an unmarked Lease is taken over


def test_the_control_planes_slot_comes_back_only_with_its_etcd_member_ready():
    api = three()
    assert guard(api, "cp-1")["allowed"]
    api.pods[0]["status"]["conditions"][0]["status"] = "False"
    back = cp.own_member_back(api, "cp-1")
    assert back == (False, "etcd member etcd-cp-1 on cp-1 is not Ready")
    out = cp.reclaim(lock(api, "cp-1"), api.get_node("cp-1"), back)
    assert out["released"] is None and "etcd member etcd-cp-1 on cp-1 is not Ready" in out["kept"]
    api.pods[0]["status"]["conditions"][0]["status"] = "True"
    out = cp.reclaim(lock(api, "cp-1"), api.get_node("cp-1"), cp.own_member_back(api, "cp-1"))
    assert out["released"] == "nodefix-control-plane-0" and api.leases == {}
    assert cp.own_member_back(api, "w-1") == (False, "no etcd member (component=etcd pod) on w-1")


@pytest.mark.parametrize("argv", [
    ["etcdctl", "--user=root:Etcd-Held-61", "endpoint", "health"],
    ["etcdctl", "--user", "root:Etcd-Held-61", "endpoint", "health"],
    ["etcdctl", "--password", "Etcd-Held-61", "endpoint", "health"],
    ["etcdctl", "--password=Etcd-Held-61", "endpoint", "health"],
])
def test_a_failing_etcd_health_command_is_quoted_redacted(argv):
    """held_by quotes the failing command (issue 61): its credentials never, the rest of it always."""
    (problem,) = cp.run_health_command(lambda a: (1, "", "context deadline exceeded"), argv)
    assert "Etcd-Held-61" not in problem and "etcdctl" in problem and "endpoint health" in problem
    assert "context deadline exceeded" in problem


@pytest.mark.parametrize("argv, warns", [
    (["etcdctl", "--user", "root:Etcd-Line-61", "endpoint", "health"], True),
    (["etcdctl", "--user=root:Etcd-Line-61", "endpoint", "health"], True),
    (["etcdctl", "--password", "Etcd-Line-61", "endpoint", "health"], True),
    (["etcdctl", "--endpoints=https://root:Etcd-Line-61@etcd.example.com:2379", "endpoint", "health"], True),
    (["etcdctl", "--user", "root", "endpoint", "health", "--cluster"], False),
    (["etcdctl", "--cacert=/etc/etcd/ca.pem", "--key=/etc/etcd/client-key.pem", "endpoint", "health"], False),
    ([], False),
])
def test_a_credential_on_the_health_commands_line_warns_naming_the_environment_option(argv, warns):
    """Issue 61 item 1 for etcd: the command runs as given, is shown redacted (above), and warns."""
    assert cp.health_command_warnings(argv) == ([cp.COMMAND_WARNING] if warns else [])
    assert "etcd_health_environment" in cp.COMMAND_WARNING and "ETCDCTL_PASSWORD" in cp.COMMAND_WARNING


def test_the_health_command_gets_the_environment_option():
    class Module(object):
        seen = []

        def run_command(self, argv, environ_update=None):
            self.seen.append((argv, environ_update))
            return 0, "", ""

    run = cp.health_command_runner(Module(), {"ETCDCTL_USER": "root", "ETCDCTL_PASSWORD": "Etcd-Env-61"})
    assert cp.run_health_command(run, ["etcdctl", "endpoint", "health"]) == []
    assert Module.seen == [(["etcdctl", "endpoint", "health"], {"ETCDCTL_USER": "root", "ETCDCTL_PASSWORD": "Etcd-Env-61"})]


# issue 62, the rollout review: etcd members without a control-plane label, and quorum arithmetic


@pytest.mark.parametrize("labels", [{"node-role.kubernetes.io/etcd": "true"}, {}],
                         ids=["rke2-etcd-only-node", "kubeadm-member-whose-role-label-was-removed"])
def test_an_etcd_member_without_a_control_plane_label_is_guarded_as_one(labels):
    api = three()
    api.nodes["etcd-4"] = node("etcd-4", labels)
    api.pods.append(etcd_pod("etcd-4"))
    out = guard(api, "etcd-4", allow=False)
    assert out["control_plane"] and not out["allowed"] and api.leases == {}
    assert out["etcd_member"] and "is an etcd member" in out["held_by"][0], out
    # opted in, while another member is down, it is held like any control-plane node (quorum kept)
    api.pods[0]["status"]["conditions"][0]["status"] = "False"
    out = guard(api, "etcd-4")
    assert not out["allowed"] and "etcd is not healthy" in out["held_by"][0] and api.leases == {}


def test_a_worker_is_a_worker_after_the_membership_check():
    api = three()
    out = guard(api, "w-1", allow=False)
    assert out["control_plane"] is False and out["etcd_member"] == "" and api.asked == [("kube-system", "component=etcd")]


def test_a_membership_list_that_fails_raises_never_a_worker_on_a_guess():
    api = three()

    def broken(namespace, selector):
        raise NodefixError("listing the pods in kube-system: 503")
    api.list_namespaced_pods = broken
    with pytest.raises(NodefixError, match="503"):
        guard(api, "w-1", allow=False)


@pytest.mark.parametrize("members, held", [(1, True), (2, True), (3, False), (4, False), (5, False)])
def test_quorum_arithmetic_holds_a_member_whose_going_down_loses_the_majority(members, held):
    names = ["cp-%d" % i for i in range(1, members + 1)]
    api = Api([node(n, {CP_LABEL: ""}) for n in names], [etcd_pod(n) for n in names])
    out = guard(api, "cp-1")
    assert out["allowed"] is (not held), out
    if held:
        assert "the members left would lose quorum" in out["held_by"][0] and api.leases == {}
        assert "nodefix_control_plane_quorum_override" in out["held_by"][0]
        assert out["etcd"]["quorum"] == {"problem": out["etcd"]["quorum"]["problem"], "accepted": False}
        accepted = guard(api, "cp-1", accept_quorum_loss=True)
        assert accepted["allowed"] and accepted["etcd"]["quorum"]["accepted"] and accepted["lock"]["slot"]


def test_quorum_counts_members_already_down():
    assert cp.quorum_problem([{"name": "a", "node": "a", "ready": True}, {"name": "b", "node": "b", "ready": True},
                              {"name": "c", "node": "c", "ready": True}], "a") == ""
    said = cp.quorum_problem([{"name": "a", "node": "a", "ready": True}, {"name": "b", "node": "b", "ready": False},
                              {"name": "c", "node": "c", "ready": True}], "a")
    assert said == "taking a down leaves 1 of 3 etcd member(s) up (1 down already), and quorum needs 2"
    assert "single control plane" in cp.quorum_problem([{"name": "a", "node": "a", "ready": True}], "a")


def _quorum_lost(members, down):
    """The arithmetic by hand: ``members`` members, ``down`` of them down already (never the node taken), one more
    taken down - quorum is a majority of ALL members."""
    return members - down - 1 < members // 2 + 1


# (members, down already): every case of 1, 2, 3, 5 members with 0, 1 or 2 of the others down
MEMBER_CASES = [(n, d) for n in (1, 2, 3, 5) for d in (0, 1, 2) if d < n]


@pytest.mark.parametrize("how", ["not_ready", "pod_missing", "etcd_label_pod_missing"])
@pytest.mark.parametrize("members, down", MEMBER_CASES)
def test_quorum_counts_members_not_pods(members, down, how):
    """A member whose pod is missing counts as a member that is down - never as a smaller cluster (five members,
    two pods gone: taking a third leaves 2 of 5, not 2 of 3). The override lets a quorum loss go on only with every
    member healthy; a member down already holds the node whatever the override."""
    names = ["cp-%d" % i for i in range(1, members + 1)]
    downs = names[1:1 + down]
    label = {"node-role.kubernetes.io/etcd": "true"} if how == "etcd_label_pod_missing" else {CP_LABEL: ""}
    nodes = [node(n, {CP_LABEL: ""} if n == "cp-1" else label) for n in names]
    pods = [etcd_pod(n, ready="False" if n in downs and how == "not_ready" else "True") for n in names
            if not (n in downs and how != "not_ready")]
    api = Api(nodes, pods)
    lost = _quorum_lost(members, down)
    out = guard(api, "cp-1")
    assert len(out["etcd"]["members"]) == members, out["etcd"]
    assert bool(out["etcd"]["quorum"]["problem"]) is lost, out["etcd"]
    if lost:
        assert ("leaves %d of %d etcd member(s) up" % (members - down - 1, members)) in out["etcd"]["quorum"]["problem"]
    assert out["allowed"] is (not lost and not down), out
    if down:
        assert out["held_by"][0].startswith("control plane: etcd is not healthy: "), out
    overridden = guard(api, "cp-1", accept_quorum_loss=True)
    assert overridden["allowed"] is (not down), overridden
    assert overridden["etcd"]["quorum"]["accepted"] is bool(lost and not down)
    # the arithmetic alone, as the guard's callers ask it
    said = cp.quorum_problem(out["etcd"]["members"], "cp-1")
    assert bool(said) is lost


ETCDCTL_SIMPLE = ("https://10.0.0.1:2379 is healthy: successfully committed proposal: took = 2.1ms\n"
                  "https://10.0.0.2:2379 is healthy: successfully committed proposal: took = 2.4ms\n")


@pytest.mark.parametrize("out, err, rc, members, down", [
    (ETCDCTL_SIMPLE, "", 0, 2, 0),
    (ETCDCTL_SIMPLE + "https://10.0.0.3:2379 is healthy: successfully committed proposal: took = 3ms\n", "", 0, 3, 0),
    (ETCDCTL_SIMPLE, "https://10.0.0.3:2379 is unhealthy: failed to commit proposal: context deadline exceeded\n"
     "Error: unhealthy cluster\n", 1, 3, 1),
    ('[{"endpoint":"https://10.0.0.1:2379","health":true,"took":"1ms"},'
     '{"endpoint":"https://etcd-b.example:2379","health":true,"took":"1ms"},'
     '{"endpoint":"https://10.0.0.9:2379","health":false,"error":"timeout"}]', "", 1, 3, 1),
    ("+-----+\n| ENDPOINT | HEALTH | TOOK | ERROR |\n| https://10.0.0.1:2379 | true | 1ms | |\n", "", 0, 1, 0),
])
def test_external_etcd_members_are_the_endpoints_the_health_command_names(out, err, rc, members, down):
    """etcd outside the cluster (kubespray's etcd as a systemd unit on the control-plane nodes): the members are the
    endpoints etcdctl endpoint health --cluster names; the node's own is the one at its address."""
    cp1 = node("cp-1", {CP_LABEL: ""})
    cp1["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"}]
    api = Api([cp1, node("w-1")], [])
    got = guard(api, "cp-1", health_command=["etcdctl", "endpoint", "health", "--cluster"],
                run_command=lambda argv: (rc, out, err))
    assert len(got["etcd"]["members"]) == members and [m["node"] for m in got["etcd"]["members"]][0] == "cp-1"
    assert len([m for m in got["etcd"]["members"] if not m["ready"]]) == down
    lost = _quorum_lost(members, down)
    assert bool(got["etcd"]["quorum"]["problem"]) is lost, got["etcd"]
    assert got["allowed"] is (not lost and not down and rc == 0), got


def test_an_output_that_names_no_endpoint_is_judged_by_its_exit_code():
    api = Api([node("cp-1", {CP_LABEL: ""})], [])
    got = guard(api, "cp-1", health_command=["/usr/local/bin/etcd-ok"], run_command=lambda argv: (0, "all good", ""))
    assert got["allowed"] and got["etcd"]["members"] == [] and got["etcd"]["quorum"]["problem"] == ""
