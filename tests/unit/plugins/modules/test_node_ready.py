# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.node_ready as Ansible runs it (a subprocess reading its arguments file, the official kubernetes client
on a real socket) against the kube-apiserver TEST DOUBLE (lab/apiserver-double): Ready now, Ready after a wait (the
node's status patched to Ready while the module waits, once the double recorded its first read), never Ready, a Node
the API server does not know, an API server that refuses the connection or never answers - an unread Node is
``ready: null`` with its error, never "not Ready" -, and a kubeconfig token file ending in a newline: trimmed as
client-go trims it, never quoted. The wait's own rules (an error read again, an answer waiting cannot change) run
in process with a fake API and clock. The subprocess timeouts only guard the test run, they are not asserted."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.modules import node_ready

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
TOKEN = "Node-Ready-Token-61"


def env():
    out = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
    out["PYTHONPATH"] = COLLECTIONS + os.pathsep + os.environ.get("PYTHONPATH", "")
    return out


def start(module, tmp_path, args):
    """The module as Ansible starts it: a subprocess reading its arguments file."""
    args_file = tmp_path / ("%s-args-%d.json" % (module, time.monotonic_ns()))
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    return subprocess.Popen([sys.executable, "-m", "ansible_collections.nodefix.k8s.plugins.modules." + module,
                             str(args_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())


def finish(proc):
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in out + err, out + err
    return proc.returncode, json.loads(out), out + err


def run(module, tmp_path, args):
    return finish(start(module, tmp_path, args))


def kubeconfig(tmp_path, port, token_file=None):
    """A kubeconfig of http://127.0.0.1:port; with ``token_file``, its user reads the token there (``tokenFile``)."""
    path = tmp_path / ("kubeconfig-%d" % port)
    user = {"tokenFile": str(token_file)} if token_file else {"token": "not-checked"}
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Double(object):
    """lab/apiserver-double on a free port with ``state``, every request recorded (``--record``)."""

    def __init__(self, tmp_path, state):
        self.state, self.record = tmp_path / "state.json", tmp_path / "record.jsonl"
        port_file = tmp_path / "port"
        self.state.write_text(json.dumps(dict({"nodes": {}, "pods": [], "configmaps": {}}, **state)))
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py"),
                                      "--state", str(self.state), "--port-file", str(port_file),
                                      "--kubeconfig", str(tmp_path / "kc"), "--record", str(self.record)])
        for _dummy in range(100):
            if port_file.exists():
                self.port = int(port_file.read_text())
                self.kubeconfig = str(tmp_path / "kc")
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the apiserver double did not start")

    def requests(self):
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def data(self):
        return json.loads(self.state.read_text())

    def patch_node_status(self, node, ready):
        """The kubelet's status update of the Node's Ready condition."""
        body = json.dumps({"status": {"conditions": [{"type": "Ready", "status": ready}]}}).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/api/v1/nodes/%s/status" % (self.port, node), data=body,
                                     method="PATCH", headers={"Content-Type": "application/strategic-merge-patch+json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def double(tmp_path):
    made = []

    def make(state):
        made.append(Double(tmp_path, state))
        return made[-1]
    yield make
    for one in made:
        one.stop()


def test_a_ready_node_is_ready_at_the_first_read_with_only_the_conditions_fields(tmp_path, double):
    api = double({"nodes": {"node-a": {}}})
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a"})
    assert rc == 0 and out["ready"] is True and out["found"] is True and out["reads"] == 1, out
    assert out["error"] == "" and out["msg"] == "Node node-a is Ready (KubeletReady)" and not out["changed"]
    assert out["conditions"] == [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]   # no message
    assert [(r["method"], r["path"]) for r in api.requests()] == [("GET", "/api/v1/nodes/node-a")]


def test_a_node_that_becomes_ready_while_the_module_waits_is_ready(tmp_path, double):
    api = double({"nodes": {"node-a": {"ready": "False"}}})
    proc = start("node_ready", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "wait_timeout": 120,
                                          "wait_sleep": 1})
    try:
        # the kubelet says Ready once the module read again (its first answer was NotReady, then it waited)
        for _dummy in range(1200):
            if len([r for r in api.requests() if r["method"] == "GET"]) >= 2 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert api.patch_node_status("node-a", "True")["status"]["conditions"][0]["status"] == "True"
    finally:
        rc, out, _text = finish(proc)
    assert rc == 0 and out["ready"] is True and out["reads"] >= 2, out
    assert [e["ready"] for e in api.data()["log"] if e["path"].endswith("/status")] == ["True"]


def test_a_node_never_ready_is_not_ready_with_its_condition_after_the_wait(tmp_path, double):
    api = double({"nodes": {"node-a": {"ready": "Unknown"}}})
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "wait_timeout": 2,
                                                  "wait_sleep": 1})
    assert rc == 0 and out["ready"] is False and out["found"] is True and out["reads"] >= 2, out
    assert "is not Ready after" in out["msg"] and "Ready=Unknown (NodeStatusUnknown)" in out["msg"], out
    assert out["error"] == ""


def test_a_node_without_a_ready_condition_is_not_ready(tmp_path, double):
    api = double({"nodes": {"node-a": {"ready": None}}})
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "wait_timeout": 0})
    assert rc == 0 and out["ready"] is False and out["conditions"] == [] and "no Ready condition" in out["msg"], out


def test_a_node_the_api_server_does_not_know_is_not_read_not_not_ready(tmp_path, double):
    api = double({"nodes": {"node-b": {}}})
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": api.kubeconfig, "node": "node-a", "wait_timeout": 0})
    assert rc == 0 and out["ready"] is None and out["found"] is False, out
    assert "404" in out["error"] and "node-a is not in the API server" in out["msg"], out


def test_an_api_server_that_refuses_the_connection_is_not_read_with_the_reason(tmp_path):
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": kubeconfig(tmp_path, free_port()), "node": "node-a",
                                                  "wait_timeout": 0})
    assert rc == 0 and out["ready"] is None and out["found"] is None, out
    assert "reading Node node-a: no answer from the API server" in out["error"], out
    assert out["msg"].startswith("Node node-a could not be read after"), out


def test_an_api_server_that_never_answers_is_not_read_after_the_request_timeout(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": kubeconfig(tmp_path, silent.getsockname()[1]),
                                                      "node": "node-a", "wait_timeout": 0, "request_timeout": 1})
    finally:
        silent.close()
    assert rc == 0 and out["ready"] is None and "timed out" in out["error"].lower(), out


def test_a_kubeconfig_that_cannot_be_loaded_is_not_read(tmp_path):
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": str(tmp_path / "missing"), "node": "node-a"})
    assert rc == 0 and out["ready"] is None and out["reads"] == 0 and "could not be loaded" in out["error"], out


def test_a_token_file_ending_in_a_newline_is_trimmed_and_never_quoted(tmp_path, double):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    api = double({"nodes": {"node-a": {}}})
    rc, out, text = run("node_ready", tmp_path, {"kubeconfig": kubeconfig(tmp_path, api.port, token), "node": "node-a",
                                                 "wait_timeout": 0})
    assert rc == 0 and out["ready"] is True, out
    sent = dict((k.lower(), v) for k, v in api.requests()[0]["headers"].items())
    assert sent["authorization"] == "Bearer " + TOKEN
    assert TOKEN not in text
    rc, out, text = run("node_ready", tmp_path, {"kubeconfig": kubeconfig(tmp_path, free_port(), token),
                                                 "node": "node-a", "wait_timeout": 0})
    assert rc == 0 and out["ready"] is None and TOKEN not in text, out


def test_bad_input_fails_before_any_request(tmp_path):
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": kubeconfig(tmp_path, free_port()), "node": "a/b"})
    assert rc != 0 and "not a Kubernetes object name" in out["msg"], out
    rc, out, _text = run("node_ready", tmp_path, {"kubeconfig": kubeconfig(tmp_path, free_port()), "node": "node-a",
                                                  "wait_sleep": 0})
    assert rc != 0 and "wait_sleep" in out["msg"], out


def test_without_the_kubernetes_library_the_module_fails_naming_it(run_module, monkeypatch):
    monkeypatch.setattr(kube, "available", lambda: False)
    result, failed, _t = run_module(node_ready, {"kubeconfig": "/nonexistent", "node": "node-a"})
    assert failed and "kubernetes" in result["msg"], result


class FakeApi(object):
    """get_node answering ``answers`` in turn (a Node, None for a 404, or a KubeError to raise); the last one repeats."""

    def __init__(self, answers):
        self.answers, self.reads = list(answers), 0

    def get_node(self, name):
        self.reads += 1
        one = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(one, Exception):
            raise one
        return one


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def node(status):
    return {"metadata": {"name": "node-a"}, "status": {"conditions": [
        {"type": "Ready", "status": status, "reason": "R", "message": "not kept", "lastTransitionTime": "t"}]}}


def test_a_failed_read_is_read_again_until_the_node_answers_ready():
    clock = Clock()
    api = FakeApi([kube.KubeError("reading Node node-a", why="ConnectionRefusedError: refused"), None,
                   kube.KubeError("reading Node node-a", 503, body="etcd"), node("False"), node("True")])
    out = node_ready.wait_ready(api, "node-a", 60, 5, clock, clock.sleep)
    assert out["ready"] is True and out["reads"] == 5 and out["waited"] == 20, out
    assert out["conditions"] == [{"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "t"}]


def test_the_last_read_decides_a_node_read_not_ready_then_unread_is_not_read():
    clock = Clock()
    api = FakeApi([node("False"), kube.KubeError("reading Node node-a", why="ReadTimeoutError: timed out")])
    out = node_ready.wait_ready(api, "node-a", 10, 5, clock, clock.sleep)
    assert out["ready"] is None and "timed out" in out["error"] and out["reads"] == 3, out
    assert out["conditions"][0]["status"] == "False"     # the last read that answered


def test_an_answer_waiting_cannot_change_ends_the_wait_at_once():
    clock = Clock()
    api = FakeApi([kube.KubeError("reading Node node-a", 403, body='{"message": "forbidden"}')])
    out = node_ready.wait_ready(api, "node-a", 300, 5, clock, clock.sleep)
    assert out["ready"] is None and out["reads"] == 1 and "403" in out["error"], out


@pytest.mark.parametrize("answer,odd", [
    ({"status": [1]}, "its status is a list ([1]), not an object"),
    ({"status": {"conditions": 5}}, "its status.conditions is a number (5), not a list"),
    ({"status": {"conditions": {"type": "Ready", "status": "True"}}}, "its status.conditions is an object"),
    ({"status": {"conditions": [{"type": "Ready", "status": "True"}, "x"]}}, "its status.conditions[1] is a string"),
    ({"status": {"conditions": [{"type": "Ready", "status": True}]}}, "its Ready condition's status is a boolean"),
])
def test_a_node_whose_shape_cannot_be_read_is_unread_never_not_ready_and_never_a_crash(answer, odd):
    """Its docs: the module never fails on an odd node - an answer it cannot read is "could not be read"."""
    clock = Clock()
    out = node_ready.wait_ready(FakeApi([dict(answer, metadata={"name": "node-a"})]), "node-a", 0, 5, clock, clock.sleep)
    assert out["ready"] is None and out["found"] is True and odd in out["error"], out
    assert out["msg"].startswith("Node node-a could not be read after 0 s (1 read(s)): Node node-a answered a shape"), out
    # no status or no conditions yet (a Node just registered): read, and not Ready
    for fresh in ({}, {"status": {}}, {"status": {"conditions": None}}):
        out = node_ready.wait_ready(FakeApi([fresh]), "node-a", 0, 5, clock, clock.sleep)
        assert out["ready"] is False and out["error"] == "" and "no Ready condition" in out["msg"], out
