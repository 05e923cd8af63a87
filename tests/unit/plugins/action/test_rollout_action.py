# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/action/rollout.py (nodefix.k8s.rollout) driven through its own ``run()`` as the rolling play calls it -
a fake task and connection, the node-side modules (node_evidence, node_audit) answered by a recording fake of
``_execute_module`` - against the kube-apiserver TEST DOUBLE (lab/apiserver-double, a real HTTP server, as
tests/unit/test_rollout_api_double_http.py uses it): a whole begin -> (fix) -> end on a worker; check mode writing
nothing with the same step names; a held node; a node a live run holds; secrets never in the result; bad options
refused before anything is written."""

import json
import os
import stat
import time
from unittest import mock

import pytest

from ansible_collections.nodefix.k8s.plugins.action import rollout as rollout_action
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import rollout_api
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import cordon
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import observed as observed_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import record
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import machine
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome
from plugins.action.action_harness import action_of
from plugins.module_utils.rollout_machine_harness import CONTAINERD, REASON, REBOOT, audit_before, plan
# the fixture that starts the double on a free port (with this module's STATE: indirect)
from test_apiserver_double_node_version import double  # pylint: disable=unused-import

PODS = [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet", "labels": {"app": "web"}},
        {"namespace": "kube-system", "name": "ds-1", "node": "node-a", "owner": "DaemonSet"}]
HELD_SECRET = "Held-Secret-62"
HELD = json.dumps({"run": "run-0", "time": "2026-12-06T06:00:00Z", "reason": "password=%s not verified" % HELD_SECRET})
STATE = {"nodes": {"node-a": {}, "node-b": {},
                   "node-held": {"unschedulable": True, "annotations": {cordon.HELD: HELD}},
                   "node-live": {}},
         "pods": PODS}
pytestmark = pytest.mark.parametrize("double", [STATE], indirect=True, ids=["nodes"])
AUDIT_SECRET = "Evidence-Secret-62"


class Node(object):
    """The node side: ``_execute_module`` answered per module and recorded (one round trip each)."""

    def __init__(self, after=()):
        self.calls, self.after = [], list(after)

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_kw):
        self.calls.append((module_name, module_args))
        if module_name == "nodefix.k8s.node_evidence":
            return {"changed": False, "evidence": {"bytes": 42, "missing": [{"source": "journal"}],
                                                   "sources": {"kubelet": "token=%s" % AUDIT_SECRET}}}
        if module_name == "nodefix.k8s.node_audit":
            return {"changed": False, "euid": 0, "findings": list(self.after), "checks": {"containerd": {}}}
        raise AssertionError("unexpected module %s" % module_name)


def run(args, node=None, check_mode=False, host="node-a"):
    """The action's run() as Ansible calls it for one host (its connection faked, its node-side modules
    ``node``); the display lines it printed."""
    action = action_of(rollout_action, args, check_mode, load_name="nodefix.k8s.rollout")
    action._execute_module = node or Node()
    printed = []
    # every line Display prints (a warning too: Display.warning prints through display)
    with mock.patch.object(rollout_action.display, "display",
                           side_effect=lambda msg, *_a, **_kw: printed.append(msg)):
        result = action.run(task_vars={"inventory_hostname": host})
    return result, printed


def base(double, node_name="node-a", **extra):  # noqa: F811
    # (node-held, held by an earlier run, is unavailable: with the node in flight, 2 of the double's 4 Nodes - the
    # storm breaker's re-count lets it go at 50 %)
    out = {"kubeconfig": double["kubeconfig"], "node": node_name, "run_id": "run-62", "api_timeout": 10,
           "drain_timeout": 30, "storm_percent": 50}
    out.update(extra)
    return out


def begin_args(double, tmp_path, node_name="node-a", **extra):  # noqa: F811
    return base(double, node_name, phase="begin", audit_before=audit_before([CONTAINERD]), plan=plan([CONTAINERD]),
                evidence_path=str(tmp_path / "evidence" / node_name / "run-62.json"), **extra)


def end_args(double, first, node_name="node-a", **extra):  # noqa: F811
    # the state as a registered variable carries it: plain data
    return base(double, node_name, phase="end", audit_before=audit_before([CONTAINERD]),
                state=json.loads(json.dumps(first["state"])),
                remediation={"status": "ok", "roles": first["fix_roles"], "msg": ""},
                audit_args={"checks": ["containerd"]}, **extra)


@pytest.fixture
def api(double):  # noqa: F811
    return rollout_api.RolloutApi(double["kubeconfig"], timeout=10)


def notes(api, name):
    return api.get_node(name)["metadata"].get("annotations") or {}


def events(api, name):
    items = api.kube.items("events", "/apis/events.k8s.io/v1/namespaces/default/events")
    return [e["reason"] for e in items if (e.get("regarding") or {}).get("name") == name]


def leases(api):
    return api.kube.items("leases", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")


def test_a_whole_rollout_of_a_worker_begin_fix_end(double, api, tmp_path):  # noqa: F811
    node = Node()
    first, printed = run(begin_args(double, tmp_path), node)
    # begin: the play runs the fix roles; the node is cordoned, drained, its record at phase fix
    assert first["outcome"] is None and first["failed"] is False and first["changed"] is True, first
    assert first["fix_roles"] == [CONTAINERD] and first["drained"] is True and first["reboot_allowed"] is False
    assert first["reboot_reasons"] == [] and first["reboot_held"] == []
    assert [s["name"] for s in first["steps"]] == list(machine.BEFORE)
    # the storm breaker counted the double's Nodes again right before the cordon (node-held is unavailable)
    assert [s["detail"] for s in first["steps"] if s["name"] == "storm"] == [
        "counted again: 2 of 4 node(s) (50%) unavailable or in flight, within 50%; reserved node-a (Lease "
        "kube-system/nodefix-storm)"]
    assert api.get_node("node-a")["spec"].get("unschedulable") is True
    assert record.read(notes(api, "node-a"))["phase"] == "fix"
    assert [p["metadata"]["name"] for p in api.list_pods("node-a")] == ["ds-1"]
    assert events(api, "node-a") == ["FindingsDetected"]
    # one line a step, printed as it ended and in the result
    assert len(printed) == len(first["steps"]) == len(first["lines"]) and "node-a | drain" in printed[-3]
    # the evidence: written 0600 (atomically, no temporary file left), its content never in the result
    path = tmp_path / "evidence" / "node-a" / "run-62.json"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600 and os.listdir(str(path.parent)) == ["run-62.json"]
    assert json.loads(path.read_text())["bytes"] == 42 and AUDIT_SECRET not in json.dumps(first)
    assert first["evidence"]["path"] == str(path) and first["evidence"]["missing"] == ["journal"]
    assert [c[0] for c in node.calls] == ["nodefix.k8s.node_evidence"]

    second, printed = run(end_args(double, first), node)
    assert second["outcome"] == Outcome.OK and second["failed"] is False, second
    assert [s["name"] for s in second["steps"]] == list(machine.AFTER + machine.FINISH)
    assert len(printed) == len(second["steps"])
    # the verify ran node_audit once with the play's arguments; the node is back, the record gone
    assert node.calls[-1] == ("nodefix.k8s.node_audit", {"checks": ["containerd"]})
    assert not api.get_node("node-a")["spec"].get("unschedulable")
    assert record.ANNOTATION not in notes(api, "node-a") and cordon.CORDONED_BY not in notes(api, "node-a")
    # the trail, in the node_events module's words: the outcome and the give-back, the last-remediation annotation
    assert events(api, "node-a")[1:] == ["EvidenceKept", "Drained", "FixApplied", "RemediationVerified", "Uncordoned"]
    assert json.loads(notes(api, "node-a")["nodefix.k8s/last-remediation"])["outcome"] == "ok"
    rec = second["remediation"]
    assert rec["status"] == "ok" and rec["outcome"] == Outcome.OK and rec["roles"] == [CONTAINERD]
    assert rec["evidence"]["path"] == str(path) and "seconds" in rec and second["audit_after"]["euid"] == 0


def test_check_mode_writes_nothing_and_shows_the_same_steps(double, api, tmp_path):  # noqa: F811
    before = api.get_node("node-a")
    node = Node()
    observed = tmp_path / "observed"
    first, printed = run(begin_args(double, tmp_path, observed_dir=str(observed)), node, check_mode=True)
    assert first["outcome"] is None and first["failed"] is False and first["changed"] is True, first
    second, _p = run(end_args(double, first, observed_dir=str(observed)), node, check_mode=True)
    assert second["outcome"] == Outcome.OK, second
    # not even what the dry run saw of the lock slots (it would shorten a later real run's wait before a takeover)
    assert not (observed / observed_lib.LockObservations.NAME).exists()
    # nothing written: the Node as it was (its resourceVersion too), no Event, no Lease, no evidence file, no pod gone
    assert api.get_node("node-a") == before and events(api, "node-a") == [] and leases(api) == []
    assert not (tmp_path / "evidence").exists() and node.calls == []
    assert len(api.list_pods("node-a")) == 2
    assert all(line.startswith("(check) node-a | ") for line in printed)
    would = dict((s["name"], s["detail"]) for s in first["steps"] + second["steps"] if s["outcome"] == "would")
    assert "would evict default/web-1" in would["drain"] and would["cordon"] == "would cordon node-a"
    # the same step names as the real run (node-b, a node alike)
    real, _p = run(begin_args(double, tmp_path, "node-b", observed_dir=str(observed)), Node(), host="node-b")
    real_end, _p = run(end_args(double, real, "node-b", observed_dir=str(observed)), Node(), host="node-b")
    assert (observed / observed_lib.LockObservations.NAME).exists()     # a real run keeps them
    assert [s["name"] for s in first["steps"]] == [s["name"] for s in real["steps"]]
    assert [s["name"] for s in second["steps"]] == [s["name"] for s in real_end["steps"]]


def test_a_node_held_by_an_earlier_run_is_left_untouched_and_reported_held(double, api, tmp_path):  # noqa: F811
    before = api.get_node("node-held")
    node = Node()
    first, _p = run(begin_args(double, tmp_path, "node-held"), node, host="node-held")
    assert first["outcome"] == Outcome.HELD and first["failed"] is False, first
    assert first["remediation"]["status"] == "skipped" and first["remediation"]["outcome"] == Outcome.HELD
    now = api.get_node("node-held")
    # still cordoned, still held, no record of this run, nothing run on the node
    assert now["spec"]["unschedulable"] is True and notes(api, "node-held")[cordon.HELD] == HELD
    assert record.ANNOTATION not in notes(api, "node-held") and node.calls == []
    assert before["spec"] == now["spec"]
    # the hold's reason came from the API: its secret never in the result
    assert HELD_SECRET not in json.dumps(first) and "not verified" in first["detail"]


def test_a_node_a_live_run_holds_is_refused_and_untouched(double, api, tmp_path):  # noqa: F811
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    other = {"version": 2, "run": "run-other", "phase": "drain", "started": now, "moved": now, "renewed": now,
             "leaseSeconds": 1800, "holder": {"host": "another-controller", "pid": 4711, "boot": "b"},
             "cordonedBefore": False, "slots": []}
    node0 = api.get_node("node-live")
    api.patch_node("node-live", {"metadata": {"annotations": {record.ANNOTATION: json.dumps(other)}}},
                   node0["metadata"]["resourceVersion"])
    before = api.get_node("node-live")
    first, _p = run(begin_args(double, tmp_path, "node-live"), Node(), host="node-live")
    assert first["outcome"] == Outcome.REFUSED and first["failed"] is True, first
    assert "run-other" in first["detail"] and first["remediation"]["status"] == "failed"
    after = api.get_node("node-live")
    assert after["spec"] == before["spec"] and json.loads(notes(api, "node-live")[record.ANNOTATION]) == other
    assert [s["name"] for s in first["steps"]][:3] == ["plan", "claim", "give_back"]


@pytest.mark.parametrize("accepted", [True, False], ids=["event-accepted", "event-refused"])
def test_an_event_the_api_did_not_accept_is_a_warning_never_a_change(double, api, tmp_path, accepted):  # noqa: F811
    """Review 9d: a node refused before its claim writes nothing but its end Event: ``changed`` is that Event
    accepted; one the API refused is a warning in the result (Ansible prints it), the step skipped, never a change."""
    refused = (0, False, ["event RemediationFailed: 403 Forbidden: events is forbidden"])
    with mock.patch.object(rollout_action.events_api, "post", wraps=rollout_action.events_api.post) as post:
        if not accepted:
            post.side_effect = None
            post.return_value = refused
        first, _p = run(begin_args(double, tmp_path, "node-b", refused="the kernel upgrade cannot be planned"),
                        Node(), host="node-b")
    steps = dict((s["name"], s) for s in first["steps"])
    assert first["outcome"] == Outcome.REFUSED and post.call_count == 1
    assert first["changed"] is accepted, first["steps"]
    assert steps["end_event"]["outcome"] == ("done" if accepted else "skipped")
    if accepted:
        assert "warnings" not in first
    else:
        assert first["warnings"] == ["the end Event (refused) could not be posted: event RemediationFailed: "
                                     "403 Forbidden: events is forbidden"]


def test_a_secret_option_value_never_leaves_in_the_result(double, api, tmp_path):  # noqa: F811
    """The etcd health command's environment is no_log: what the command said with it (here it prints it) is
    masked in every step, line and message."""
    secret = "Etcd-Env-Secret-62"
    node0 = api.get_node("node-b")
    assert node0 is not None
    args = begin_args(double, tmp_path, "node-b", control_plane=True,
                      etcd_health_command=["sh", "-c", 'echo "$ETCD_PASS" >&2; exit 1'],
                      etcd_health_environment={"ETCD_PASS": secret})
    with mock.patch.object(rollout_action.control_plane, "is_control_plane", return_value=True):
        first, printed = run(args, Node(), host="node-b")
    assert first["outcome"] == Outcome.HELD, first
    assert "etcd health command" in first["detail"] and "exited 1" in first["detail"]
    assert secret not in json.dumps(first), first["detail"]
    # the lines printed as each step ended, and what was posted to the cluster (Events, annotations), too
    assert any("control_plane" in line and "exited 1" in line for line in printed), printed
    assert not [line for line in printed if secret in line]
    posted = double["state"].read_text()
    assert "etcd is not healthy" in posted and secret not in posted


class FailingEvidence(Node):
    """The node side whose evidence module fails quoting credentials (a module's own unredacted message)."""

    def __call__(self, module_name=None, module_args=None, task_vars=None, **_kw):
        if module_name == "nodefix.k8s.node_evidence":
            self.calls.append((module_name, module_args))
            return {"failed": True, "msg": "journal of https://u:NodeS3cret62@mirror.example unreadable: "
                                           "password=NodeS3cret62"}
        return super(FailingEvidence, self).__call__(module_name, module_args, task_vars, **_kw)


def test_a_credential_by_shape_in_a_step_detail_is_hidden_in_lines_events_and_result(double, api,
                                                                                      tmp_path):  # noqa: F811
    """A step's detail is redacted by shape once, when it is recorded: the evidence module's failure quoting a
    URL's password and a ``password=`` leaves neither in the printed lines, nor in the Events and annotations
    posted, nor in the result; the host and the key stay."""
    first, printed = run(begin_args(double, tmp_path), FailingEvidence())
    posted = double["state"].read_text()
    line = [x for x in printed if x.startswith("node-a | evidence")]
    assert line and "mirror.example unreadable" in line[0] and "password=" in line[0], printed
    for text in ["\n".join(printed), posted, json.dumps(first)]:
        assert "NodeS3cret62" not in text, text


def test_only_credentials_among_the_secret_options_are_masked_not_user_names_or_versions(double, api,
                                                                                       tmp_path):  # noqa: F811
    """etcd_health_environment and prometheus_headers are no_log as options, but only a value under a secret's
    name (and the password of a ``user:password``) is removed as a substring: ``ETCDCTL_USER=root``,
    ``ETCDCTL_API=3`` and a tenant header leave the step ``root``, the seconds and the node names as they are."""
    args = begin_args(double, tmp_path, "node-a", etcd_health_environment={
        "ETCDCTL_API": "3", "ETCDCTL_USER": "root", "ETCDCTL_PASSWORD": "node-a-Pw62"},
        prometheus_headers={"X-Scope-OrgID": "node"})
    assert rollout_action.secret_values(rollout_action.interface.argument_spec() and args) == {"node-a-Pw62"}
    first, printed = run(args, Node(), host="node-a")
    text = json.dumps(first)
    assert "VALUE_SPECIFIED" not in text and "********" not in text, text
    assert [s["name"] for s in first["steps"]][:5] == ["plan", "claim", "root", "kernel_boot", "control_plane"]
    assert all(isinstance(s["seconds"], float) for s in first["steps"])
    assert any(line.startswith("node-a | root") for line in printed), printed
    user_pw = rollout_action.secret_values({"etcd_health_environment": {"ETCDCTL_USER": "root:Pw-62"}})
    assert user_pw == {"Pw-62"}


@pytest.mark.parametrize("bad,words", [
    ({"lease": "soon"}, ["lease"]),
    ({"phase": "middle"}, ["phase", "begin, end, recheck"]),
    ({"no_such_option": 1}, ["no_such_option"]),
    ({"phase": "end"}, ["state", "remediation"]),
    ({"lock_slots": 0}, ["lock_slots"]),
    ({"window_start": "25:00"}, ["25:00"]),
    ({"api_timeout": 0}, ["api_timeout"]),
    ({"etcd_health_environment": "Bad-Env-Secret-62"}, ["etcd_health_environment"]),
    ({"backoff": "6 hours"}, ["backoff (nodefix_reboot_backoff)", "'6 hours' is not a duration"]),
], ids=["type", "choice", "unknown", "required", "range", "window", "timeout", "secret", "duration"])
def test_bad_options_are_refused_naming_them_and_nothing_is_written(double, api, tmp_path, bad, words):  # noqa: F811
    before = api.get_node("node-a")
    with pytest.raises(Exception) as raised:
        run(dict(begin_args(double, tmp_path), **bad))
    exc = raised.value
    assert type(exc).__name__ == "AnsibleActionFail", exc
    text = "%s %s" % (exc.message, json.dumps(exc.result))
    for word in words:
        assert word in text, (word, text)
    assert "Bad-Env-Secret-62" not in text     # (ansible-core's validator names a secret option, not its value)
    assert api.get_node("node-a") == before and events(api, "node-a") == [] and leases(api) == []
    assert not (tmp_path / "evidence").exists()


@pytest.mark.parametrize("bad,words", [
    ({"state": {"fix_roles": []}}, ["state is not the state phase=begin answered", "claimed"]),
    ({"remediation": {"status": "done"}}, ["remediation.status must be ok, failed or unreachable", "'done'"]),
], ids=["state", "status"])
def test_an_end_given_what_begin_did_not_answer_is_refused_and_nothing_is_written(double, api, tmp_path, bad,
                                                                                  words):  # noqa: F811
    first, _p = run(begin_args(double, tmp_path))
    before = api.get_node("node-a")
    with pytest.raises(Exception) as raised:
        run(dict(end_args(double, first), **bad))
    assert type(raised.value).__name__ == "AnsibleActionFail"
    for word in words:
        assert word in raised.value.message, (word, raised.value.message)
    assert api.get_node("node-a") == before


def test_a_kubeconfig_that_cannot_be_loaded_fails_the_task_naming_it(double, tmp_path):  # noqa: F811
    """The kubeconfig cannot be loaded: the task fails naming it, nothing was read or written."""
    args = dict(begin_args(double, tmp_path), kubeconfig=str(tmp_path / "missing-kubeconfig"))
    with pytest.raises(Exception) as raised:
        run(args)
    assert type(raised.value).__name__ == "AnsibleActionFail" and "missing-kubeconfig" in raised.value.message


def test_without_a_kubeconfig_the_node_is_fixed_undrained_no_api_asked(double, api, tmp_path):  # noqa: F811
    before = api.get_node("node-a")
    args = begin_args(double, tmp_path)
    del args["kubeconfig"]
    node = Node()
    first, _p = run(args, node)
    assert first["outcome"] is None and first["fix_roles"] == [CONTAINERD] and first["drained"] is False, first
    end = end_args(double, first)
    del end["kubeconfig"]
    second, _p = run(end, node)
    assert second["outcome"] == Outcome.OK and [s["name"] for s in second["steps"]] == list(machine.AFTER)
    assert second["remediation"]["status"] == "ok" and [c[0] for c in node.calls] == [
        "nodefix.k8s.node_evidence", "nodefix.k8s.node_audit"]
    assert api.get_node("node-a") == before and events(api, "node-a") == []


def test_without_a_kubeconfig_nothing_is_changed_but_the_evidence_file(double, api, tmp_path):  # noqa: F811
    """Without an API server the rollout writes nothing on the cluster: its begin and end are not changes (a
    second remediate of fixed nodes is idempotent), the evidence file it keeps is one."""
    for keep in (False, True):
        args = begin_args(double, tmp_path)
        del args["kubeconfig"]
        if not keep:
            del args["evidence_path"]
        first, _p = run(args, Node())
        end = end_args(double, first)
        del end["kubeconfig"]
        second, _p = run(end, Node())
        assert (first["changed"], second["changed"]) == (keep, False), (keep, first["steps"], second["steps"])


def test_recheck_before_the_reboot_drops_it_when_the_window_closed_and_end_gives_the_slot_back(
        double, api, tmp_path):  # noqa: F811
    roles = [CONTAINERD, REBOOT]
    first, _p = run(dict(begin_args(double, tmp_path, "node-b"), audit_before=audit_before(roles), plan=plan(roles)),
                    Node(), host="node-b")
    assert first["outcome"] is None and first["reboot_allowed"] is True and first["reboot_reasons"] == [REASON]
    # (the lock's slot; the storm breaker's reserve, Lease nodefix-storm, holds no slot)
    assert [lease["spec"].get("holderIdentity") for lease in leases(api)
            if lease["metadata"]["name"] != "nodefix-storm"] == ["node-b"]
    today = time.strftime("%a", time.gmtime()).lower()[:2]
    others = [d for d in ("mo", "tu", "we", "th", "fr", "sa", "su") if d != today]
    again, printed = run(base(double, "node-b", phase="recheck", state=json.loads(json.dumps(first["state"])),
                              window_days=others), Node(), host="node-b")
    assert again["outcome"] is None and again["failed"] is False and again["reboot_allowed"] is False, again
    assert again["fix_roles"] == [CONTAINERD] and "outside the reboot window" in again["reboot_held"][0]
    assert [s["name"] for s in again["steps"]] == ["reboot_recheck"] and len(printed) == 1
    second, _p = run(dict(end_args(double, again, "node-b"), audit_before=audit_before(roles),
                          remediation={"status": "ok", "roles": again["fix_roles"], "msg": ""}), Node(), host="node-b")
    assert second["outcome"] == Outcome.OK and [lease["spec"].get("holderIdentity") for lease in leases(api)
                                                if lease["spec"].get("holderIdentity")] == []


def test_evidence_that_cannot_be_written_is_said_and_the_rollout_goes_on(double, api, tmp_path):  # noqa: F811
    """A report directory that cannot be written (here: a file where a directory should be) is the evidence's
    failure, said in its step - never an exception that leaves the node claimed and its slots taken."""
    (tmp_path / "not-a-dir").write_text("")
    args = dict(begin_args(double, tmp_path), evidence_path=str(tmp_path / "not-a-dir" / "node-a" / "run-62.json"))
    first, _p = run(args)
    assert first["outcome"] is None and first["drained"] is True, first
    step = [s for s in first["steps"] if s["name"] == "evidence"][0]
    assert "the evidence could not be kept (the remediation goes on)" in step["detail"] and "not-a-dir" in step["detail"]
    assert "not-a-dir" in first["evidence"]["error"] and first["evidence"]["before"] == ["drain"]


def test_recheck_fails_the_task_when_another_run_took_the_node_over_and_renews_the_claim_otherwise(
        double, api, tmp_path):  # noqa: F811
    roles = [CONTAINERD, REBOOT]
    first, _p = run(dict(begin_args(double, tmp_path, "node-b"), audit_before=audit_before(roles), plan=plan(roles)),
                    Node(), host="node-b")
    assert first["outcome"] is None and first["reboot_allowed"] is True
    state = json.loads(json.dumps(first["state"]))
    again, _p = run(base(double, "node-b", phase="recheck", state=state, reboot_timeout=600,
                         reboot_settle_timeout=60), Node(), host="node-b")
    assert again["outcome"] is None and again["failed"] is False and again["reboot_allowed"] is True, again
    # (the fix phase's cover, fix_timeout 3600, kept beside the reboot's worst case: fixes may follow a recheck)
    assert json.loads(notes(api, "node-b")[record.ANNOTATION])["leaseSeconds"] == 1800 + 3600 + 2 * 600 + 4 * 60
    # a second controller judged this run dead and took the node over: the recheck fails, the reboot dropped
    taken = {"version": 2, "run": "run-other", "phase": "claimed", "started": "2026-12-06T07:00:00Z",
             "moved": "2026-12-06T07:00:00Z", "renewed": "2026-12-06T07:00:00Z", "leaseSeconds": 1800,
             "holder": {"host": "another-controller", "pid": 4711, "boot": "b"}, "cordonedBefore": None, "slots": []}
    api.patch_node("node-b", {"metadata": {"annotations": {record.ANNOTATION: json.dumps(taken)}}})
    lost, _p = run(base(double, "node-b", phase="recheck", state=state), Node(), host="node-b")
    assert lost["failed"] is True and lost["outcome"] == Outcome.FAILED and lost["reboot_allowed"] is False, lost
    assert "names run run-other" in lost["msg"]
    assert json.loads(notes(api, "node-b")[record.ANNOTATION])["run"] == "run-other"


def test_a_short_credential_never_mangles_the_machines_state_or_outcome(double, api, tmp_path):  # noqa: F811
    """Review of issue 61 (2026-12-07): the whole result went through remove_values - with ETCDCTL_PASSWORD=ok the
    outcome "ok" and the lock slot's name became VALUE_SPECIFIED_IN_NO_LOG_PARAMETER, and phase=end worked from that
    state. The texts are still masked."""
    secret = "ok"
    first, _printed = run(begin_args(double, tmp_path, etcd_health_environment={"ETCDCTL_PASSWORD": secret}), Node())
    assert first["failed"] is False and "VALUE_SPECIFIED" not in json.dumps(first["state"]), first["state"]
    assert [s["name"] for s in first["steps"]] == list(machine.BEFORE)
    second, _printed = run(end_args(double, first, etcd_health_environment={"ETCDCTL_PASSWORD": secret}), Node())
    assert second["outcome"] == Outcome.OK and second["failed"] is False, second
    assert not api.get_node("node-a")["spec"].get("unschedulable")
    masked = rollout_action.scrubbed({"msg": "ok then", "outcome": "ok", "state": {"slots": ["kube-system/ok"]},
                                      "steps": [{"name": "ok", "outcome": "ok", "detail": "ok"}]}, {"ok"})
    assert masked["outcome"] == "ok" and masked["state"] == {"slots": ["kube-system/ok"]}
    assert masked["steps"][0]["name"] == "ok" and "ok" not in masked["steps"][0]["detail"] and "ok" not in masked["msg"]


def test_the_states_texts_are_masked_its_codes_kept(double):  # noqa: F811 - every test here runs per client
    """Review of 2026-12-07: ``scrubbed`` kept the whole state - its detail, reboot_held and steps hold text."""
    out = rollout_action.scrubbed({"detail": "etcdctl said Tr0ub4dor", "outcome": "held", "state": {
        "detail": "etcdctl said Tr0ub4dor", "reboot_held": ["x Tr0ub4dor"], "given_back": "Tr0ub4dor",
        "slots": ["kube-system/Tr0ub4dor-slot"], "outcome": "held",
        "steps": [{"name": "control_plane", "outcome": "held", "detail": "Tr0ub4dor"}]}}, {"Tr0ub4dor"})
    shown = json.dumps(dict(out, state=dict(out["state"], slots=[])))
    assert "Tr0ub4dor" not in shown, shown
    assert out["state"]["slots"] == ["kube-system/Tr0ub4dor-slot"] and out["state"]["outcome"] == "held"
