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
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

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
# data.kubelet of a kubeadm v1.29 cluster's kube-system/kubelet-config, its rate limit lowered by hand (comment kept)
REAL_KUBEADM = """apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
kubeAPIQPS: 5  # lowered in the 2019 incident
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"""
# the same with SETTINGS: the one value changed in place (its comment kept), the new fields appended, nothing else
REAL_KUBEADM_PATCHED = """apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
kubeAPIQPS: 50 # lowered in the 2019 incident
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
kubeAPIBurst: 100
serializeImagePulls: false
"""


class Api(object):
    """ConfigMaps {ns/name: {"data", "rv"}}; ``writers``: callables run on a PATCH of this run (its token) before it is
    judged (another writer that changed the ConfigMap between this run's read and its patch; one per PATCH);
    ``answer``: a fixed (status, body) for every request instead; ``got``: a fixed (status, body) for every GET;
    ``lost``: per PATCH of this run, after it was judged (and applied), how its answer is lost - "503" (a 503 with
    ``Retry-After: 0``, the patch applied), "503-unapplied" (the same, the patch not applied) or "drop" (the patch
    applied, the connection closed without an answer); ``refuse``: a fixed (status, body) for a dry-run PATCH;
    a ``?dryRun=All`` PATCH is judged and answered and changes nothing, as the real server does; ``seen``: every
    request (method, path, content type, body)."""

    def __init__(self, configmaps):
        self.cms = dict((k, {"data": dict(v), "rv": 7}) for k, v in configmaps.items())
        self.writers, self.seen, self.answer, self.version = [], [], None, 7
        self.got, self.lost, self.refuse = None, [], None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length).decode()) if length else None
                auth = self.headers.get("Authorization")
                outer.seen.append({"method": self.command, "path": self.path, "auth": auth,
                                   "type": self.headers.get("Content-Type"), "body": body})
                ours = auth == "Bearer %s" % TOKEN
                headers = {}
                if outer.answer:
                    status, answer = outer.answer[0], outer.answer[1]
                elif self.command == "GET" and outer.got and ours:
                    status, answer = outer.got[0], outer.got[1]
                else:
                    status, answer = outer.route(self.command, self.path, body, ours)
                if self.command == "PATCH" and ours and outer.lost and "dryRun=All" not in self.path:
                    how = outer.lost.pop(0)
                    if how == "drop":
                        self.close_connection = True
                        return
                    status, headers = 503, {"Retry-After": "0"}
                    answer = {"kind": "Status", "status": "Failure", "reason": "ServiceUnavailable", "code": 503,
                              "message": "the load balancer lost the answer"}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
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

    def route(self, method, path, body, ours=True):
        ns, _c, name = path.split("?")[0][len("/api/v1/namespaces/"):].split("/")
        dry = "dryRun=All" in path.partition("?")[2].split("&")
        key = "%s/%s" % (ns, name)
        if method == "PATCH" and self.writers and ours:
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
            if dry and self.refuse:
                return self.refuse
            if dry:
                return 200, {"kind": "ConfigMap", "apiVersion": "v1", "data": dict(cm["data"], **body["data"]),
                             "metadata": {"namespace": ns, "name": name, "resourceVersion": str(cm["rv"])}}
            if self.lost and self.lost[0] == "503-unapplied" and ours:
                return 200, {}
            self.version += 1
            cm["data"].update(body["data"])
            cm["rv"] = self.version
        return 200, {"kind": "ConfigMap", "apiVersion": "v1", "data": dict(cm["data"]),
                     "metadata": {"namespace": ns, "name": name, "resourceVersion": str(cm["rv"])}}

    def patches(self, dry=False):
        return [s for s in self.seen if s["method"] == "PATCH" and ("dryRun=All" in s["path"]) == dry]

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


def test_the_plan_is_a_fixed_text_and_the_read_writes_nothing(api, run):
    api.write(KEY, REAL_KUBEADM)
    result, failed = run(api.port)
    assert not failed and result["exists"] and result["changed"] is False and result["patched"] is False
    assert result["plan"] == {"changed": True, "text": REAL_KUBEADM_PATCHED, "fields": {
        "kubeAPIQPS": {"before": 5, "after": 50}, "kubeAPIBurst": {"before": None, "after": 100},
        "serializeImagePulls": {"before": None, "after": False}}}
    assert api.patches() == [] and api.patches(dry=True) == [] and api.cms[KEY]["data"]["kubelet"] == REAL_KUBEADM
    # and with apply, that exact text is what the ConfigMap holds
    result, failed = run(api.port, apply=True)
    assert not failed and result["patched"] and api.cms[KEY]["data"]["kubelet"] == REAL_KUBEADM_PATCHED


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


def test_check_mode_sends_the_patch_as_a_server_side_dry_run_and_stores_nothing(api, run):
    result, failed = run(api.port, check_mode=True, apply=True)
    assert not failed and result["changed"] is True and result["patched"] is False and result["plan"]["changed"]
    assert result["dry_run"] is True
    # the same conditional merge patch, with ?dryRun=All: validated, authorized and admitted, stored nowhere
    (dry,) = api.patches(dry=True)
    assert dry["path"] == PATH + "?dryRun=All" and dry["type"] == "application/merge-patch+json"
    assert dry["body"] == {"metadata": {"resourceVersion": "7"}, "data": {"kubelet": result["plan"]["text"]}}
    assert api.patches() == [] and api.cms[KEY]["data"]["kubelet"] == KUBEADM and api.cms[KEY]["rv"] == 7
    # a plan that changes nothing sends no dry run either
    api.write(KEY, result["plan"]["text"])
    again, failed = run(api.port, check_mode=True, apply=True)
    assert not failed and again["changed"] is False and again["dry_run"] is False and len(api.patches(dry=True)) == 1


@pytest.mark.parametrize("status, reason, message", [
    (403, "Forbidden", 'configmaps "kubelet-config" is forbidden: User "ops" cannot patch resource "configmaps"'),
    (422, "Invalid", 'ConfigMap "kubelet-config" is invalid: admission webhook "cm.example.com" denied the request'),
])
def test_check_mode_reports_the_dry_runs_refusal_as_the_checks_failure(api, run, status, reason, message):
    api.refuse = (status, {"kind": "Status", "status": "Failure", "reason": reason, "code": status, "message": message})
    result, failed = run(api.port, check_mode=True, apply=True)
    assert failed and result["status"] == status, result
    assert result["msg"].startswith("dry-run patching (check mode: ") and message in result["msg"], result["msg"]
    assert "kube-system/kubelet-config" in result["msg"]
    assert len(api.patches(dry=True)) == 1 and api.patches() == [] and api.cms[KEY]["data"]["kubelet"] == KUBEADM


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


def test_a_kubeconfig_that_cannot_be_loaded_fails_naming_the_configmap_and_the_clients_reason_once(run_module):
    result, failed, _table = run_module(kubelet_configmap, {"kubeconfig": "/nonexistent/kubeconfig",
                                                            "settings": SETTINGS})
    assert failed and result["msg"].startswith(
        "ConfigMap kube-system/kubelet-config: kubeconfig /nonexistent/kubeconfig could not be loaded: "), result["msg"]
    assert result["msg"].count("/nonexistent/kubeconfig") == 1, result["msg"]


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
    assert not failed and result["changed"] and not api.patches() and len(api.patches(dry=True)) == 1
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
    assert failed and result["msg"].startswith("reading ConfigMap kube-system/kubelet-config: "), result["msg"]
    assert "kind is 'Pod', expected KubeletConfiguration" in result["msg"]
    assert not api.patches()


def _cm(**fields):
    return dict({"kind": "ConfigMap", "apiVersion": "v1",
                 "metadata": {"namespace": "kube-system", "name": "kubelet-config", "resourceVersion": "7"}}, **fields)


@pytest.mark.parametrize("answer, wrong", [
    ({"metadata": {"resourceVersion": "7"}}, "data is null, not a map"),
    (_cm(data=None), "data is null, not a map"),
    (_cm(data={"kubelet": {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}}),
     "data.kubelet is a dict, not a string"),
    (_cm(binaryData={"kubelet": "a2luZDogS3ViZWxldENvbmZpZ3VyYXRpb24K"}), "binaryData.kubelet is no KubeletConfiguration"),
    (_cm(data={"config": KUBEADM}), "data has no key 'kubelet'"),
    (_cm(data={"kubelet": ""}), "data.kubelet is empty"),
    (_cm(data={"kubelet": "kubeAPIQPS: 5\n"}), "data.kubelet has kind None, not KubeletConfiguration"),
    (_cm(data={"kubelet": "apiVersion: v1\nkind: KubeletConfiguration\n"}), "data.kubelet has apiVersion 'v1'"),
    (_cm(data={"kubelet": "- a list\n"}), "expected a KubeletConfiguration mapping, got list"),
    (dict(_cm(data={"kubelet": KUBEADM}), metadata=["kube-system"]), "metadata is a list, not a map"),
    (dict(_cm(data={"kubelet": KUBEADM}), metadata={"name": "kubelet-config"}), "metadata.resourceVersion is missing"),
    (dict(_cm(data={"kubelet": KUBEADM}), metadata={"name": "kubelet-config", "resourceVersion": 7}),
     "metadata.resourceVersion is 7"),
    # what GET /api/v1/namespaces/kube-system/ answers (the Namespace: a name of ".." collapsed away)
    ({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "kube-system", "resourceVersion": "3"}},
     "the answer is a 'Namespace', not a ConfigMap"),
])
@pytest.mark.parametrize("check_mode", [False, True])
def test_an_answer_that_is_no_kubelet_configmap_is_never_planned_or_patched(api, run, answer, wrong, check_mode):
    """A ConfigMap without a string data.kubelet that parses as a KubeletConfiguration (or without a
    metadata.resourceVersion) fails naming it and what is wrong - never a plan from "" (a near-empty
    KubeletConfiguration kubeadm upgrade node would write to every node)."""
    api.got = (200, answer)
    result, failed = run(api.port, apply=True, check_mode=check_mode)
    assert failed and "plan" not in result and "patched" not in result, result
    assert result["msg"].startswith("reading ConfigMap kube-system/kubelet-config: the API server's answer is not a "
                                    "ConfigMap whose data.kubelet is a KubeletConfiguration: "), result["msg"]
    assert wrong in result["msg"] and result["msg"].endswith("nothing was planned or written"), result["msg"]
    assert [s["method"] for s in api.seen] == ["GET"] and api.cms[KEY]["data"]["kubelet"] == KUBEADM


def test_an_answer_read_again_after_a_conflict_is_checked_the_same(api, run):
    def theirs(a):      # another writer leaves a ConfigMap without the kubelet key
        a.version += 1
        a.cms[KEY] = {"data": {"note": "moved"}, "rv": a.version}
    api.writers.append(theirs)
    result, failed = run(api.port, apply=True)
    assert failed and result["conflicts"] == 1, result
    assert result["msg"].startswith("reading again, after a 409 Conflict, ConfigMap kube-system/kubelet-config: the "
                                    "API server's answer is not a ConfigMap"), result["msg"]
    assert "data has no key 'kubelet'" in result["msg"]
    assert len(api.patches()) == 1 and api.cms[KEY]["data"] == {"note": "moved"}


@pytest.mark.parametrize("lost", ["503", "drop"])
def test_a_patch_whose_answer_is_lost_is_sent_once_and_reported_set_when_read_again(api, run, lost):
    """The PATCH is applied and its answer lost (a 503 with Retry-After from a proxy, or no answer): it is never
    sent again (a second copy would be refused 409 and the write reported as not made); the ConfigMap is read
    again and carries the settings: set, changed, the lost answer said."""
    api.lost.append(lost)
    result, failed = run(api.port, apply=True, diff=True)
    assert not failed and result["changed"] is True and result["patched"] is True and result["conflicts"] == 0, result
    assert "answer to the patch was lost" in result["answer_lost"]
    assert result["answer_lost"].endswith("written by this run or another")
    assert ("503 Service Unavailable" if lost == "503" else "could not be reached or did not answer") \
        in result["answer_lost"]
    assert len(api.patches()) == 1 and [s["method"] for s in api.seen] == ["GET", "PATCH", "GET"]
    written = api.cms[KEY]["data"]["kubelet"]
    assert result["plan"]["text"] == written == result["diff"]["after"] and result["diff"]["before"] == KUBEADM
    assert yaml.safe_load(written)["kubeAPIQPS"] == 50


def test_a_lost_answer_of_a_patch_not_applied_fails_naming_it(api, run):
    api.lost.append("503-unapplied")
    result, failed = run(api.port, apply=True)
    assert failed and result["status"] == 503, result
    assert result["msg"].startswith("patching ConfigMap kube-system/kubelet-config: the API server's answer to the "
                                    "patch was lost (503 Service Unavailable: "), result["msg"]
    assert "does not carry kubeAPIBurst, kubeAPIQPS, serializeImagePulls" in result["msg"]
    assert len(api.patches()) == 1 and api.cms[KEY]["data"]["kubelet"] == KUBEADM


@pytest.mark.parametrize("option, value", [
    ("name", ".."), ("name", "."), ("name", ""), ("name", "Kubelet-Config"), ("name", "kubelet-config/status"),
    ("name", "kubelet-config\n"), ("name", "a" * 254), ("name", "-kubelet"),
    ("namespace", ".."), ("namespace", "."), ("namespace", "kube.system"), ("namespace", "k" * 64),
])
def test_a_name_or_namespace_that_is_no_kubernetes_name_is_refused_before_any_request(api, run, option, value):
    """urllib3 collapses "." and ".." path segments: /namespaces/kube-system/configmaps/.. is the Namespace."""
    result, failed = run(api.port, apply=True, **{option: value})
    assert failed and result["msg"].startswith("%s %r is not a Kubernetes " % (option, value)), result
    assert "DNS-1123 %s" % ("subdomain" if option == "name" else "label") in result["msg"]
    assert api.seen == []


def test_two_other_writers_in_a_row_fail_naming_it_and_nothing_is_half_written(api, run):
    """Three writers at once: this run and two others, each a conditional read-modify-write over HTTP (the first
    between this run's read and its patch, the second between its read again and its second patch)."""
    def other(line):
        def write(a):
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            url = "http://127.0.0.1:%d%s" % (a.port, PATH)
            cm = json.loads(opener.open(url, timeout=5).read())
            body = {"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                    "data": {"kubelet": cm["data"]["kubelet"] + line}}
            req = urllib.request.Request(url, data=json.dumps(body).encode(), method="PATCH",
                                         headers={"Content-Type": "application/merge-patch+json"})
            assert opener.open(req, timeout=5).status == 200
        return write
    api.writers = [other("eventRecordQPS: 9\n"), other("eventBurst: 18\n")]
    result, failed = run(api.port, apply=True)
    assert failed and result["status"] == 409 and result["conflicts"] == 2, result
    assert result["msg"].startswith("patching ConfigMap kube-system/kubelet-config failed: 409 Conflict twice - "
                                    "another writer changed it"), result["msg"]
    assert "nothing of this run was written, run again" in result["msg"]
    ours = [s for s in api.patches() if s["auth"]]
    assert [p["body"]["metadata"]["resourceVersion"] for p in ours] == ["7", "8"] and api.cms[KEY]["rv"] == 9
    # both other writers' whole texts, in order; not a line of this run's
    assert api.cms[KEY]["data"]["kubelet"] == KUBEADM + "eventRecordQPS: 9\neventBurst: 18\n"
    assert "kubeAPIQPS: 5  # see KUB-112" in api.cms[KEY]["data"]["kubelet"]
