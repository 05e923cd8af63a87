# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kubelet_configmap against an API server of the test's own (a thread serving HTTP as the real server
answers the ConfigMap's GET and merge PATCH: each ConfigMap keeps its resourceVersion, a patch carrying a stale one
is a 409 Conflict that changes nothing). The module runs in process with the official client and the collection's
one API client (_k8s.client): a 404, a plan with nothing to do, a plan and its conditional patch, check mode, a
concurrent writer between the read and the patch (once: read and planned again; twice: a failure naming it), an API
server that cannot be reached, a token the server echoes, and the diff (redacted)."""

import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.filter.kubelet import kubelet_configmap as the_filter
from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact
from ansible_collections.nodefix.k8s.plugins.modules import kubelet_configmap

pytest.importorskip("kubernetes")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
with open(os.path.join(REPO, "lab", "kubelet-double", "layouts", "kubeadm", "var", "lib", "kubelet", "config.yaml")) as fh:
    KUBEADM = fh.read()
TOKEN = "kubecm-s3cr3t-token-61"
KEY = "kube-system/kubelet-config"
PATH = "/api/v1/namespaces/kube-system/configmaps/kubelet-config"
SETTINGS = {"kubeAPIQPS": 50, "kubeAPIBurst": 100, "serializeImagePulls": False}


class Api(object):
    """ConfigMaps {ns/name: {"data", "rv"}}; ``writers``: callables run on a PATCH before it is judged (another
    writer that changed the ConfigMap between this run's read and its patch; one per PATCH); ``answer``: a fixed (status, body)
    for every request instead; ``seen``: every request (method, path, content type, body)."""

    def __init__(self, configmaps):
        self.cms = dict((k, {"data": dict(v), "rv": 7}) for k, v in configmaps.items())
        self.writers, self.seen, self.answer, self.version = [], [], None, 7
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length).decode()) if length else None
                outer.seen.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                                   "type": self.headers.get("Content-Type"), "body": body})
                status, answer = outer.answer or outer.route(self.command, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever)
        self.thread.start()

    def write(self, key, text):
        """Another writer's update of the ConfigMap's kubelet key."""
        self.version += 1
        self.cms[key] = {"data": dict(self.cms[key]["data"], kubelet=text), "rv": self.version}

    def route(self, method, path, body):
        ns, _c, name = path.split("?")[0][len("/api/v1/namespaces/"):].split("/")
        key = "%s/%s" % (ns, name)
        if method == "PATCH" and self.writers:
            self.writers.pop(0)(self)
        cm = self.cms.get(key)
        if cm is None:
            return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
                         "message": 'configmaps "%s" not found' % name}
        if method == "PATCH":
            if str(body["metadata"]["resourceVersion"]) != str(cm["rv"]):
                return 409, {"kind": "Status", "status": "Failure", "reason": "Conflict", "code": 409,
                             "message": 'Operation cannot be fulfilled on configmaps "%s": the object has been '
                                        'modified; please apply your changes to the latest version and try again' % name}
            self.version += 1
            cm["data"].update(body["data"])
            cm["rv"] = self.version
        return 200, {"kind": "ConfigMap", "apiVersion": "v1", "data": dict(cm["data"]),
                     "metadata": {"namespace": ns, "name": name, "resourceVersion": str(cm["rv"])}}

    def patches(self):
        return [s for s in self.seen if s["method"] == "PATCH"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def api():
    srv = Api({KEY: {"kubelet": KUBEADM}})
    yield srv
    srv.close()


def kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


@pytest.fixture
def run(run_module, tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.lower().endswith("_proxy"):
            monkeypatch.delenv(key)

    def _run(port, check_mode=False, diff=False, **over):
        args = dict({"kubeconfig": kubeconfig(tmp_path, port), "settings": SETTINGS, "request_timeout": 5}, **over)
        result, failed, _table = run_module(kubelet_configmap, args, check_mode=check_mode, diff=diff)
        assert TOKEN not in json.dumps(result)
        return result, failed
    return _run


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_no_such_configmap_is_not_an_error_and_nothing_is_written(api, run):
    result, failed = run(api.port, name="kubelet-config-1.23", apply=True)
    assert not failed and result["exists"] is False and result["plan"] is None, result
    assert result["patched"] is False and result["changed"] is False
    assert [s["method"] for s in api.seen] == ["GET"] and api.seen[0]["path"].endswith("/configmaps/kubelet-config-1.23")


def test_the_plan_is_the_filters_and_the_read_writes_nothing(api, run):
    result, failed = run(api.port)
    assert not failed and result["exists"] and result["changed"] is False and result["patched"] is False
    # the one owner of the plan: the same function the filter nodefix.k8s.kubelet_configmap calls
    assert result["plan"] == the_filter(KUBEADM, SETTINGS)
    assert result["plan"]["changed"] and result["plan"]["fields"]["kubeAPIQPS"] == {"before": 5, "after": 50}
    assert api.patches() == [] and api.cms[KEY]["data"]["kubelet"] == KUBEADM


def test_a_changed_plan_is_patched_conditional_on_the_version_read(api, run):
    result, failed = run(api.port, apply=True)
    assert not failed and result["changed"] and result["patched"] and result["conflicts"] == 0, result
    (patch,) = api.patches()
    assert patch["type"] == "application/merge-patch+json" and patch["path"] == PATH
    assert patch["body"] == {"metadata": {"resourceVersion": "7"}, "data": {"kubelet": result["plan"]["text"]}}
    written = api.cms[KEY]["data"]["kubelet"]
    cm = yaml.safe_load(written)
    assert (cm["kubeAPIQPS"], cm["kubeAPIBurst"], cm["serializeImagePulls"]) == (50, 100, False)
    assert sorted(line for line in written.splitlines() if line not in KUBEADM.splitlines()) == [
        "kubeAPIBurst: 100", "kubeAPIQPS: 50 # see KUB-112", "serializeImagePulls: false"]
    assert "diff" not in result
    # a second run finds every setting there: nothing planned, nothing sent
    again, failed = run(api.port, apply=True)
    assert not failed and again["changed"] is False and again["plan"]["changed"] is False
    assert len(api.patches()) == 1


def test_check_mode_plans_and_says_it_would_patch_but_never_does(api, run):
    result, failed = run(api.port, check_mode=True, apply=True)
    assert not failed and result["changed"] is True and result["patched"] is False and result["plan"]["changed"]
    assert [s["method"] for s in api.seen] == ["GET"] and api.cms[KEY]["data"]["kubelet"] == KUBEADM


def test_a_concurrent_writer_is_kept_the_configmap_read_and_planned_again(api, run):
    theirs = KUBEADM + "eventRecordQPS: 9  # set by another writer\n"
    api.writers.append(lambda a: a.write(KEY, theirs))
    result, failed = run(api.port, apply=True, diff=True)
    assert not failed and result["patched"] and result["conflicts"] == 1, result
    first, second = api.patches()
    assert first["body"]["metadata"]["resourceVersion"] == "7" and second["body"]["metadata"]["resourceVersion"] == "8"
    written = api.cms[KEY]["data"]["kubelet"]
    assert "eventRecordQPS: 9  # set by another writer" in written and "kubeAPIQPS: 50" in written
    # the plan and the diff are the ones made from what the other writer left
    assert result["diff"]["before"] == theirs and result["diff"]["after"] == written == result["plan"]["text"]


def test_a_second_conflict_fails_naming_it_and_writes_nothing_of_this_run(api, run):
    api.writers = [lambda a: a.write(KEY, KUBEADM + "# one\n"), lambda a: a.write(KEY, KUBEADM + "# two\n")]
    result, failed = run(api.port, apply=True)
    assert failed and result["status"] == 409 and result["conflicts"] == 2, result
    assert result["msg"].startswith("patching ConfigMap kube-system/kubelet-config failed: 409 Conflict twice")
    assert "Operation cannot be fulfilled on configmaps" in result["msg"]
    assert len(api.patches()) == 2 and api.cms[KEY]["data"]["kubelet"] == KUBEADM + "# two\n"


def test_an_api_server_that_cannot_be_reached_fails_naming_the_configmap(run):
    result, failed = run(closed_port(), apply=True, request_timeout=2)
    assert failed and result["status"] is None
    assert result["msg"].startswith("reading ConfigMap kube-system/kubelet-config failed: the API server could not be "
                                    "reached or did not answer within 2 s ("), result["msg"]


def test_an_error_names_the_configmap_and_the_apis_reason_never_the_token(api, run):
    api.answer = (403, {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                        "message": 'configmaps "kubelet-config" is forbidden: User "system:anonymous" cannot get '
                                   'resource "configmaps" (Authorization: Bearer %s)' % TOKEN})
    result, failed = run(api.port)
    assert failed and result["status"] == 403
    assert result["msg"].startswith('reading ConfigMap kube-system/kubelet-config failed: 403 Forbidden: configmaps '
                                    '"kubelet-config" is forbidden'), result["msg"]
    assert api.seen[0]["auth"] == "Bearer %s" % TOKEN     # the token was sent, and is nowhere in the result


def test_the_diff_is_the_kubelet_key_before_and_after_redacted(api, run):
    secret = "Pr0xy-kubecm-61"
    text = KUBEADM + "# proxy: http://ops:%s@proxy.example.com:3128\n" % secret
    api.write(KEY, text)
    result, failed = run(api.port, check_mode=True, apply=True, diff=True)
    assert not failed and result["changed"] and not api.patches()
    diff = result["diff"]
    assert diff["before_header"] == diff["after_header"] == "kube-system/kubelet-config data.kubelet"
    assert secret not in json.dumps(result) and redact.MARK in diff["before"] and redact.MARK in diff["after"]
    assert diff["before"] == redact.redact_text(text)
    assert "kubeAPIQPS: 50" in diff["after"] and "kubeAPIQPS: 50" not in diff["before"]
    # the ConfigMap keeps its own text
    assert api.cms[KEY]["data"]["kubelet"] == text


def test_a_configmap_that_is_no_kubelet_configuration_fails_naming_it(api, run):
    api.write(KEY, "apiVersion: v1\nkind: Pod\n")
    result, failed = run(api.port, apply=True)
    assert failed and result["msg"].startswith("ConfigMap kube-system/kubelet-config (data.kubelet): ")
    assert not api.patches()
