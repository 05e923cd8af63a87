# SPDX-License-Identifier: GPL-3.0-or-later
"""node_events never takes a run down: an API server that refuses the connection or accepts it and never
answers is a warning, the module returns (rc 0, not failed, no traceback), and options the real API server
could never accept are refused before anything is sent.

The module runs as Ansible runs it (a subprocess reading its arguments file, the official kubernetes
client talking to a real socket); the subprocess timeout only guards the test run against a module that
blocks forever (as the old one did), it is not asserted.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
AUDIT = {"findings": [{"id": "kubelet.api_qps_low", "severity": "medium", "check": "kubelet", "title": "t"}], "checks": {}}


def kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": "u", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def run(tmp_path, port, **over):
    args = {"kubeconfig": kubeconfig(tmp_path, port), "node": "node-a", "run_id": "4711", "phase": "end",
            "audit_before": AUDIT, "audit_after": {"findings": [], "checks": {}},
            "remediation": {"status": "ok", "roles": ["nodefix.k8s.kubelet"]}, "finished": 1764150000.0,
            "drained": True}
    args.update(over)
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=COLLECTIONS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for key in list(env):
        if key.lower().endswith("_proxy"):
            del env[key]
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.nodefix.k8s.plugins.modules.node_events",
                           str(args_file)], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_an_api_server_that_refuses_the_connection_is_a_warning(tmp_path):
    rc, result = run(tmp_path, closed_port())
    assert rc == 0 and not result.get("failed"), result
    assert result["posted"] == 0 and result["annotation"] == {} and result["changed"] is False
    (error,) = result["errors"]
    assert "the API server could not be reached or did not answer" in error and "4 event(s) and the annotation not written" in error
    # ansible-core 2.19 structures its warnings; older ones give the text
    assert any("trail on node node-a is incomplete" in json.dumps(w) for w in result["warnings"])


def test_an_api_server_that_accepts_and_never_answers_is_a_warning_after_the_timeout(tmp_path):
    # a listening socket never accept()ed: the kernel completes the handshake, nothing ever answers; the
    # default request_timeout (10 s) applies
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        rc, result = run(tmp_path, silent.getsockname()[1], phase="start", started=1764150000.0)
    finally:
        silent.close()
    assert rc == 0 and not result.get("failed"), result
    (error,) = result["errors"]
    assert "the API server could not be reached or did not answer" in error and "timed out" in error.lower()
    assert "1 event(s) not written" in error
    assert any("trail on node node-a is incomplete" in json.dumps(w) for w in result["warnings"])
    assert result["events"][0]["reason"] == "FindingsDetected"


@pytest.mark.parametrize("over, words", [
    ({"namespace": "nodefix-system"}, "value of namespace must be one of: default, kube-system"),
    ({"instance": "i" * 200}, "instance: the Event's reportingInstance must be 1 to 128 bytes, got 200"),
    ({"request_timeout": 0}, "request_timeout must be more than 0"),
])
def test_options_the_server_could_never_accept_fail_at_the_start(tmp_path, over, words):
    rc, result = run(tmp_path, closed_port(), **over)
    assert rc != 0 and result["failed"] and words in result["msg"], result
    assert "errors" not in result or not result["errors"]


def test_neither_trail_task_of_remediate_can_stop_the_run():
    """playbooks/remediate.yml posts its trail through the action nodefix.k8s.rollout (its start_event and end_event
    steps, in-process; an Event that cannot be posted is a warning of the step:
    test_rollout_machine.py's test_an_event_that_cannot_be_posted_is_a_warning_and_the_rollout_goes_on): no
    node_events task is left in it, and both rollout tasks register their result and ignore a failure of the action
    itself (a crash) - with serial 1 a failed task would end the rollout there and no report would be written."""
    import yaml  # pylint: disable=import-outside-toplevel

    def tasks(items):
        for item in items or []:
            if isinstance(item, dict):
                yield item
                for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks"):
                    yield from tasks(item.get(key))

    with open(os.path.join(ROOT, "playbooks", "remediate.yml")) as fh:
        every = list(tasks(yaml.safe_load(fh)))
    assert not [t for t in every if "nodefix.k8s.node_events" in t]
    rollout = [t for t in every if "nodefix.k8s.rollout" in t]
    assert sorted(t["nodefix.k8s.rollout"]["phase"] for t in rollout) == ["begin", "end"]
    assert all(t.get("ignore_errors") is True and t.get("register") for t in rollout)


def test_against_the_strict_double_the_events_pass_and_a_422_is_a_warning_naming_the_field(tmp_path):
    """lab/apiserver-double (a TEST DOUBLE of kube-apiserver, as strict as its validation): the node already carries
    256 KiB of annotations less 50 bytes, so the summary annotation passes the limit - a 422 the module reports."""
    import time  # pylint: disable=import-outside-toplevel
    node = "n" * 60 + ".example." + "x" * 182   # 251 characters
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"nodes": {node: {"annotations": {"example.com/big": "x" * (256 * 1024 - 15 - 50)}}}, "pods": []}))
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py"),
                             "--state", str(state), "--port-file", str(port_file)])
    try:
        for _dummy in range(100):
            if port_file.exists():
                break
            time.sleep(0.1)
        rc, result = run(tmp_path, int(port_file.read_text()), node=node, instance="é" * 64,
                         remediation={"status": "failed", "roles": [], "msg": "сбой " * 400})
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert rc == 0 and not result.get("failed"), result
    assert result["posted"] == len(result["events"]) == 3 and result["annotation"] == {}
    (error,) = result["errors"]
    assert error.startswith("annotation nodefix.k8s/last-remediation: 422 Unprocessable Entity: Node \"%s\" is invalid: "
                            "metadata.annotations: Too long: must have at most 262144 bytes" % node), error
    events = json.loads(state.read_text())["events"]
    assert [e["reason"] for e in events] == ["Drained", "RemediationFailed", "Uncordoned"]
    assert all(e["regarding"]["name"] == node and e["note"].startswith("node %s: run 4711: " % node) for e in events)
