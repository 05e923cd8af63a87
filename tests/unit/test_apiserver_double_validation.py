# SPDX-License-Identifier: GPL-3.0-or-later
"""The kube-apiserver TEST DOUBLE (lab/apiserver-double) refuses what the real server refuses.

Each case is a request the real kube-apiserver answers with a 422 Invalid (or a 400), sent to the double
run as a subprocess; the expected status, message and ``details.causes`` are the real server's, built by
the Kubernetes source the double cites (pkg/apis/core/validation/events.go, apimachinery's
objectmeta.go / validation.go / field/errors.go, pkg/apis/coordination/validation, the eviction REST,
pkg/apis/authorization/validation). The first eight are the cases issue 54 found the double accepting.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOUBLE = os.path.join(REPO, "lab", "apiserver-double", "apiserver.py")
EVENTS = "/apis/events.k8s.io/v1/namespaces/%s/events"
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.fixture(scope="module")
def double(tmp_path_factory):
    work = tmp_path_factory.mktemp("apiserver")
    state = work / "state.json"
    state.write_text(json.dumps({
        "nodes": {"node-a": {"unschedulable": False}},
        "pods": [{"namespace": "default", "name": "web-1", "node": "node-a", "owner": "ReplicaSet"}],
        "configmaps": {"kube-system/kubelet-config": {"kubelet": "kind: KubeletConfiguration\n"}},
        "access_denials": [{"verb": "create", "resource": "pods", "subresource": "eviction",
                            "reason": "RBAC: no eviction for nodefix"}]}))
    port_file = work / "port"
    proc = subprocess.Popen([sys.executable, DOUBLE, "--state", str(state), "--port-file", str(port_file)])
    for _dummy in range(100):
        if port_file.exists():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("the apiserver double did not start")
    yield {"port": int(port_file.read_text()), "state": state}
    proc.terminate()
    proc.wait(timeout=10)


def call(double, method, path, body, content_type="application/json"):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (double["port"], path), method=method,
                                 data=json.dumps(body).encode(), headers={"Content-Type": content_type})
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode())


def event(**over):
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"generateName": "node-a.nodefix-"},
            "eventTime": "2026-11-27T10:00:00.000001Z", "reportingController": "nodefix.k8s",
            "reportingInstance": "controller-1", "action": "Verify", "reason": "RemediationVerified",
            "note": "run 1: verified", "type": "Normal", "regarding": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    body.update(over)
    return body


def invalid(code, body, *messages, kind="Event", group=""):
    """A 422 Invalid Status naming every one of ``messages`` (field: body) in its message and its causes."""
    assert code == 422, body
    assert body["reason"] == "Invalid" and body["details"]["kind"] == kind and body["details"]["group"] == group
    assert body["message"].startswith('%s%s "' % (kind, "." + group if group else "")), body["message"]
    assert " is invalid: " in body["message"]
    causes = ["%s: %s" % (c["field"], c["message"]) for c in body["details"]["causes"]]
    for text in messages:
        assert text in body["message"] and any(text in c for c in causes), (text, body)


# --- the eight the double accepted (issue 54) --------------------------------------------------------------

def test_a_note_of_1400_bytes_is_refused_though_it_is_700_characters(double):
    code, body = call(double, "POST", EVENTS % "default", event(note="é" * 700))
    invalid(code, body, 'message: Invalid value: "": can have at most 1024 characters')


def test_a_node_event_in_another_namespace_is_refused(double):
    code, body = call(double, "POST", EVENTS % "nodefix-system", event())
    invalid(code, body, 'involvedObject.namespace: Invalid value: "": does not match event.namespace')


@pytest.mark.parametrize("field", ["reason", "action", "reportingInstance"])
def test_129_bytes_of_reason_action_or_instance_are_refused(double, field):
    code, body = call(double, "POST", EVENTS % "default", event(**{field: "R" * 127 + "é"}))   # 129 bytes, 128 chars
    invalid(code, body, '%s: Invalid value: "": can have at most 128 characters' % field)


def test_a_reporting_controller_that_is_not_a_qualified_name_is_refused(double):
    code, body = call(double, "POST", EVENTS % "default", event(reportingController="nodefix k8s!"))
    invalid(code, body, 'reportingController: Invalid value: "nodefix k8s!": ' + NAME_PART)


def test_300_kib_of_annotations_on_a_node_are_refused(double):
    code, body = call(double, "PATCH", "/api/v1/nodes/node-a", {"metadata": {"annotations": {"nodefix.k8s/big": "x" * (300 * 1024)}}},
                      "application/merge-patch+json")
    invalid(code, body, "metadata.annotations: Too long: must have at most 262144 bytes", kind="Node")
    assert body["message"].startswith('Node "node-a" is invalid')


def test_an_annotation_key_that_is_not_a_qualified_name_is_refused(double):
    code, body = call(double, "PATCH", "/api/v1/nodes/node-a", {"metadata": {"annotations": {"not a key!": "v"}}},
                      "application/merge-patch+json")
    invalid(code, body, 'metadata.annotations: Invalid value: "not a key!": ' + NAME_PART, kind="Node")
    state = json.loads(double["state"].read_text())
    assert "not a key!" not in (state["nodes"]["node-a"].get("annotations") or {})


# --- more of the real server's rules ---------------------------------------------------------------------

def test_what_the_real_server_accepts_is_accepted(double):
    code, body = call(double, "POST", EVENTS % "kube-system", event(note="é" * 512))   # 1024 bytes
    assert code == 201, body
    assert body["metadata"]["name"].startswith("node-a.nodefix-") and len(body["metadata"]["name"]) == 20
    code, body = call(double, "PATCH", "/api/v1/nodes/node-a", {"metadata": {"annotations": {"nodefix.k8s/last-remediation": "{}"}}},
                      "application/merge-patch+json")
    assert code == 200 and body["metadata"]["annotations"]["nodefix.k8s/last-remediation"] == "{}"


def test_a_generate_name_beyond_253_characters_is_refused_and_a_generated_name_is_at_most_63(double):
    long_name = ".".join(["a" * 50] * 5) + "b"     # 256 characters, a DNS subdomain
    code, body = call(double, "POST", EVENTS % "default", event(metadata={"generateName": long_name + ".nodefix-"}))
    invalid(code, body, 'metadata.generateName: Invalid value: "%s.nodefix-": must be no more than 253 characters'
            % long_name)
    # the server cuts the base to 58 characters and adds 5 (apiserver pkg/storage/names/generate.go)
    assert len(body["details"]["name"]) == 63


def test_several_errors_are_one_message_in_brackets_with_a_cause_each(double):
    code, body = call(double, "POST", EVENTS % "default", event(type="Info", reason=""))
    invalid(code, body, "reason: Required value", 'type: Invalid value: "": has invalid value: Info')
    assert body["message"].split(" is invalid: ")[1].startswith("[")
    assert {c["reason"] for c in body["details"]["causes"]} == {"FieldValueRequired", "FieldValueInvalid"}
    # without an eventTime the legacy rules apply (no reason checked), and events.k8s.io/v1 requires one
    code, body = call(double, "POST", EVENTS % "default", event(eventTime=None, reason=""))
    invalid(code, body, "eventTime: Required value")
    assert "reason" not in body["message"]


def test_a_body_in_another_namespace_than_the_url_is_a_bad_request(double):
    code, body = call(double, "POST", EVENTS % "default", event(metadata={"generateName": "n.", "namespace": "kube-system"}))
    assert code == 400 and body["reason"] == "BadRequest"
    assert body["message"] == "the namespace of the provided object does not match the namespace sent on the request"


def test_configmap_keys_and_size_as_validate_configmap(double):
    path = "/api/v1/namespaces/kube-system/configmaps/kubelet-config"
    code, body = call(double, "PATCH", path, {"data": {"bad key": "x"}}, "application/merge-patch+json")
    invalid(code, body, 'data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric '
            "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
            "is '[-._a-zA-Z0-9]+')", kind="ConfigMap")
    code, body = call(double, "PATCH", path, {"data": {"big": "x" * (1024 * 1024 + 1)}}, "application/merge-patch+json")
    invalid(code, body, ": Too long: must have at most 1048576 bytes", kind="ConfigMap")


def test_a_configmap_write_with_a_stale_resource_version_is_a_conflict(double):
    """Optimistic concurrency as the real server applies it to a ConfigMap's patch: the patch's
    metadata.resourceVersion must be the stored one (409 Conflict, nothing changed, otherwise); a write bumps it."""
    path = "/api/v1/namespaces/kube-system/configmaps/kubelet-config"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open("http://127.0.0.1:%d%s" % (double["port"], path), timeout=10) as resp:
        read = json.loads(resp.read().decode())
    version = read["metadata"]["resourceVersion"]
    code, body = call(double, "PATCH", path, {"metadata": {"resourceVersion": version}, "data": {"kubelet": "a"}},
                      "application/merge-patch+json")
    assert code == 200 and body["data"]["kubelet"] == "a" and body["metadata"]["resourceVersion"] != version, body
    code, body = call(double, "PATCH", path, {"metadata": {"resourceVersion": version}, "data": {"kubelet": "b"}},
                      "application/merge-patch+json")
    assert code == 409 and body["reason"] == "Conflict", body
    assert body["message"].startswith('Operation cannot be fulfilled on configmaps "kubelet-config": the object has '
                                      'been modified')
    assert json.loads(double["state"].read_text())["configmaps"]["kube-system/kubelet-config"]["kubelet"] == "a"


def test_leases_as_validate_lease(double):
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    code, body = call(double, "POST", path, {"metadata": {"name": "Reboot_Lock"}, "spec": {"holderIdentity": "n"}})
    invalid(code, body, 'metadata.name: Invalid value: "Reboot_Lock": a lowercase RFC 1123 subdomain', kind="Lease", group="coordination.k8s.io")
    assert body["details"]["group"] == "coordination.k8s.io"
    assert body["message"].startswith('Lease.coordination.k8s.io "Reboot_Lock" is invalid')
    code, body = call(double, "POST", path, {"metadata": {"name": "lock-0"}, "spec": {"leaseDurationSeconds": 0}})
    invalid(code, body, "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0", kind="Lease", group="coordination.k8s.io")
    good = {"metadata": {"name": "lock-0"}, "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 60}}
    code, body = call(double, "POST", path, good)
    assert code == 201, body


def test_an_eviction_naming_another_pod_is_a_bad_request(double):
    code, body = call(double, "POST", "/api/v1/namespaces/default/pods/web-1/eviction",
                      {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-2", "namespace": "default"}})
    assert code == 400 and body["message"] == "name in URL does not match name in Eviction object"
    assert json.loads(double["state"].read_text())["pods"], "the pod was evicted"


def test_self_subject_access_reviews_allowed_by_default_denied_by_the_state(double):
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    ask = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
           "spec": {"resourceAttributes": {"verb": "patch", "resource": "nodes"}}}
    code, body = call(double, "POST", path, ask)
    assert code == 201 and body["status"] == {"allowed": True}
    ask["spec"]["resourceAttributes"] = {"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": "default"}
    code, body = call(double, "POST", path, ask)
    assert code == 201 and body["status"] == {"allowed": False, "reason": "RBAC: no eviction for nodefix"}
    code, body = call(double, "POST", path, {"spec": {}})
    invalid(code, body, "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or "
            "resourceAttributes must be specified", kind="SelfSubjectAccessReview",
            group="authorization.k8s.io")
