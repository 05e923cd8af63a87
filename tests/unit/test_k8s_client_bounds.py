# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The bounds of the collection's one API client (_k8s.client.Kube):

- a list ends: a continue token the API server repeats is an error, and so is a list past the client's bound of pages
  or items (the bounds made small here) - never a list asked without end;
- a request ends: a server that dribbles its answer a byte at a time (each read well inside the timeout, the whole far
  past it) is "timed out: no whole answer within N s" with each client release the range admits (.cache/k8s-clients, as
  tests/unit/test_k8s_client_releases.py runs them), and a prompt answer is still read;
- a name is one path segment: "", "." and ".." are refused before any request (urllib3 collapses dot segments: a
  ConfigMap's ".." is its Namespace, a Node's is the NodeList), by the client and by every module that puts a name
  of its arguments in a path - no request with such a segment is ever built.

The subprocess timeouts only guard the test run; no duration is asserted."""

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import transport

pytest.importorskip("kubernetes")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
CLIENTS = os.path.join(ROOT, ".cache", "k8s-clients")
BODY = b'{"kind":"Node","metadata":{"name":"n"}}'


def write_kubeconfig(path, port):
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": "u", "user": {"token": "bounds-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


@pytest.fixture
def kubeconfig(tmp_path):
    return write_kubeconfig(tmp_path / "kubeconfig", 9)


class Pages(object):
    """A fake API server behind the real client's transport: every list page answers ``items`` and ``token(n)``."""

    def __init__(self, items, token):
        self.items, self.token, self.asked = items, token, []

    def sender(self, _api_client, _error):
        return self.send

    def send(self, method, path, query, headers, body, timeout, _opened=None):
        self.asked.append(dict(query or []).get("continue"))
        if len(self.asked) > 50:    # (a client without the bounds would ask for ever: this ends the test)
            raise AssertionError("asked %d pages" % len(self.asked))
        page = {"kind": "NodeList", "apiVersion": "v1", "items": list(self.items),
                "metadata": {"continue": self.token(len(self.asked))}}
        return 200, {}, json.dumps(page).encode()


def test_a_repeated_continue_token_ends_the_list(monkeypatch, kubeconfig):
    pages = Pages([], lambda n: "same")
    monkeypatch.setattr(transport, "sender", pages.sender)
    with pytest.raises(kube.KubeError) as exc:
        kube.Kube(kubeconfig, timeout=5).items("listing the Nodes", "/api/v1/nodes")
    assert "the API server repeated its continue token" in str(exc.value), exc.value
    assert pages.asked == [None, "same"]
    pages = Pages([], lambda n: ["not", "a", "token"])
    monkeypatch.setattr(transport, "sender", pages.sender)
    with pytest.raises(kube.KubeError) as exc:
        kube.Kube(kubeconfig, timeout=5).items("listing the Nodes", "/api/v1/nodes")
    assert "continue token is not a string" in str(exc.value) and pages.asked == [None], exc.value


def test_a_list_past_the_pages_bound_or_the_items_bound_is_an_error_naming_it(monkeypatch, kubeconfig):
    monkeypatch.setattr(kube, "PAGES", 5)
    pages = Pages([], lambda n: "token-%d" % n)      # a new token every page, for ever
    monkeypatch.setattr(transport, "sender", pages.sender)
    with pytest.raises(kube.KubeError) as exc:
        kube.Kube(kubeconfig, timeout=5).items("listing the Nodes", "/api/v1/nodes")
    assert "past 5 pages" in str(exc.value) and len(pages.asked) == 5, (exc.value, pages.asked)
    monkeypatch.setattr(kube, "PAGES", 1000)
    monkeypatch.setattr(kube, "ITEMS", 10)
    pages = Pages([{"metadata": {"name": "n"}}] * 4, lambda n: "token-%d" % n)
    monkeypatch.setattr(transport, "sender", pages.sender)
    with pytest.raises(kube.KubeError) as exc:
        kube.Kube(kubeconfig, timeout=5).items("listing the Nodes", "/api/v1/nodes")
    assert "more than 10 items" in str(exc.value) and len(pages.asked) == 3, (exc.value, pages.asked)
    # a list that ends is read whole
    pages = Pages([{"metadata": {"name": "n"}}], lambda n: "t%d" % n if n < 3 else "")
    monkeypatch.setattr(transport, "sender", pages.sender)
    assert len(kube.Kube(kubeconfig, timeout=5).items("listing the Nodes", "/api/v1/nodes")) == 3


class Dribbler(object):
    """An HTTP server on 127.0.0.1: /dribble answers its headers at once and its body one byte every 0.25 s (40
    bytes: 10 s in all); anything else answers the body at once."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.flush()
                for i in range(len(BODY)):
                    if self.path.startswith("/dribble"):
                        time.sleep(0.25)
                    try:
                        self.wfile.write(BODY[i:i + 1])
                        self.wfile.flush()
                    except OSError:     # the client gave up: nothing more to send
                        return

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


REQUEST = r"""
import json, sys
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client
import kubernetes
kube = client.Kube(sys.argv[1], timeout=1)
out = {"version": kubernetes.__version__}
for path in ("/prompt", "/dribble"):
    try:
        out[path] = kube.request("reading %s" % path, "GET", path, retry=False)
    except client.KubeError as exc:
        out[path] = {"error": str(exc), "status": exc.status}
print(json.dumps(out))
"""


def releases():
    with open(os.path.join(CLIENTS, "tested.json"), encoding="utf-8") as fh:
        record = json.load(fh)
    return [record["floor"], record["newest"]]


@pytest.fixture(scope="module")
def dribbler():
    server = Dribbler()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.mark.parametrize("end", [0, 1], ids=["floor", "newest"])
def test_a_request_is_bounded_in_total_with_each_release(dribbler, tmp_path, end):
    version = releases()[end]
    env = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
    env["PYTHONPATH"] = os.pathsep.join([COLLECTIONS, os.path.join(CLIENTS, version)])
    config = write_kubeconfig(tmp_path / "kubeconfig", dribbler.port)
    proc = subprocess.run([sys.executable, "-c", REQUEST, config], capture_output=True, text=True, timeout=120,
                          env=env, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert out["version"] == version
    assert out["/prompt"] == json.loads(BODY), out
    # each byte came within the per-read timeout, the whole answer would take 10 s: it is no answer within 1 s
    assert out["/dribble"]["status"] is None, out
    assert out["/dribble"]["error"].startswith("reading /dribble: no answer from the API server: timed out: no "
                                               "whole answer within 1 s"), out


@pytest.mark.parametrize("value", ["", ".", "..", None])
def test_a_name_is_one_path_segment_never_a_dot_segment(value):
    with pytest.raises(NodefixError) as exc:
        kube.name(value)
    assert "cannot be the name of a Kubernetes object" in str(exc.value)
    assert kube.name("a..b") == "a..b" and kube.name("...") == "..." and kube.name("a/b") == "a%2Fb"


REASONS = [{"id": "kernel.newer_installed", "check": "kernel", "reason": "a newer kernel is installed"}]
AUDIT = {"findings": [], "checks": {}}
# every module that puts a name of its arguments in an API path (grep "kube.name(" in plugins/module_utils/_k8s and
# plugins/modules), with a dot segment in it
CASES = [
    ("node_ready", {"node": "..", "wait_timeout": 0}),
    ("node_ready", {"node": ".", "wait_timeout": 0}),
    ("api_access", {"node": "..", "reviews": [{"verb": "get", "resource": "nodes"}]}),
    ("node_cordon", {"node": "..", "run_id": "run-1", "cordon": True}),
    ("pod_eviction", {"namespace": "..", "name": "web-1", "wait_timeout": 0}),
    ("pod_eviction", {"namespace": "default", "name": ".", "wait_timeout": 0}),
    ("node_events", {"node": "..", "run_id": "run-1", "phase": "start", "started": 1764150000.0, "audit_before": AUDIT}),
    ("reboot_backoff", {"node": "..", "state": "record", "reasons": REASONS, "run_id": "run-1"}),
    ("reboot_backoff", {"node": "..", "state": "check", "reasons": REASONS}),
    ("control_plane_gate", {"node": "..", "allow": True, "wait": 0}),
    ("control_plane_gate", {"node": "cp-1", "allow": True, "wait": 0, "lock_namespace": ".."}),
    ("kubelet_configmap", {"namespace": "..", "settings": {"kubeAPIQPS": 50}, "apply": True}),
    ("kubelet_configmap", {"name": "..", "settings": {"kubeAPIQPS": 50}, "apply": True}),
]


class Recorder(object):
    """Every request the client would send; each answered 404."""

    def __init__(self):
        self.paths = []

    def sender(self, _api_client, _error):
        return self.send

    def send(self, method, path, query, headers, body, timeout, _opened=None):
        self.paths.append((method, path))
        return 404, {}, json.dumps({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                                    "message": "not found"}).encode()


@pytest.mark.parametrize("module_name,args", CASES, ids=["%s-%d" % (c[0], i) for i, c in enumerate(CASES)])
def test_every_module_refuses_a_dot_segment_name_before_any_request_of_it(run_module, monkeypatch, kubeconfig,
                                                                          module_name, args):
    module = __import__("ansible_collections.nodefix.k8s.plugins.modules." + module_name, fromlist=["main"])
    recorder = Recorder()
    monkeypatch.setattr(transport, "sender", recorder.sender)
    result, failed, _t = run_module(module, dict(args, kubeconfig=kubeconfig))
    text = json.dumps(result)
    # no request with an empty or a dot segment was built (urllib3 would have asked another object)
    assert not [p for p in recorder.paths if [s for s in p[1].split("?")[0].split("/")[1:] if s in ("", ".", "..")]], \
        recorder.paths
    assert ("cannot be the name of a Kubernetes object" in text or "is not a Kubernetes object name" in text
            or "name (a DNS-1123" in text), result
    # a failure, or (node_ready, reboot_backoff's check) the Node reported unread / the reboot held - never a write
    assert failed or result.get("ready", "no") is None or result.get("held") is True, result
    assert not [m for m, _p in recorder.paths if m != "GET"], recorder.paths
