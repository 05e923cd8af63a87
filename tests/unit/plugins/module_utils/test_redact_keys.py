# SPDX-License-Identifier: GPL-3.0-or-later
"""Keys are text from the node too (review finding: a report or a result keyed by node name, where the name carries a
secret-shaped value). Walked channel by channel as test_one_exit walks the modules: every module's invocation
(through the one exit), the action plugin's exit, the core redactor, the triage (its answer, the inventory plugin's
host names) and every report format - no planted credential in a key survives, and two keys that read the same once
redacted are both kept (no node silently dropped)."""

import importlib
import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import exit as core_exit
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK, redact
from ansible_collections.nodefix.k8s.plugins.module_utils._report import console as report_console
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model, prometheus
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import run as triage_run
from plugins.inventory.test_triage_inventory import AT, FRESH, parse
from plugins.module_utils.test_one_exit import MODULES

SECRETS = ("Key-Url-61", "Key-Url-62", "Key-Flag-61", "Key-Jwt-61")
# two node names that differ only in their password (they read the same once redacted), a flag, a service account token
KEYS = ["https://robot:Key-Url-61@node-a.example.com", "https://robot:Key-Url-62@node-a.example.com",
        "node-b --token=Key-Flag-61", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJLZXktSnd0LTYxIn0.Key-Jwt-61"]


def keyed(value=None):
    return dict((k, {"state": "clean"} if value is None else value) for k in KEYS)


def leaks(text):
    return [s for s in SECRETS if s in text]


def test_the_redactor_hides_keys_and_drops_none():
    out = redact({"nodes": keyed(), "counts": keyed(1), ("tuple", "--password=Key-Flag-61"): 1})
    assert leaks(json.dumps(out["nodes"]) + json.dumps(out["counts"]) + repr(list(out))) == []
    assert len(out["nodes"]) == len(out["counts"]) == len(KEYS)
    assert list(out["nodes"]) == ["https://robot:%s@node-a.example.com" % MARK,
                                  "https://robot:%s@node-a.example.com (2)" % MARK, "node-b --token=" + MARK, MARK]


@pytest.mark.parametrize("name", MODULES)
def test_every_module_leaves_keys_redacted(run_module, name):
    """A mapping keyed by node names in every module's arguments (AnsibleModule's own check refuses it: the failing
    path every module has): its invocation, as -vvv and AWX show it, holds every key redacted and none dropped."""
    module = importlib.import_module("ansible_collections.nodefix.k8s.plugins.modules." + name)
    result, failed, _t = run_module(module, {"nodefix_planted_nodes": keyed()})
    assert failed and leaks(json.dumps(result)) == [], result
    assert len(result["invocation"]["module_args"]["nodefix_planted_nodes"]) == len(KEYS)


def test_the_action_plugins_exit_leaves_keys_redacted():
    out = core_exit.leave_action({"failed": True, "msg": "x", "nodes": keyed()})
    assert leaks(json.dumps(out)) == [] and len(out["nodes"]) == len(KEYS)


def _triage_answer():
    """Expected nodes and orphans named by label values that carry credentials (kube-state-metrics' node label, an
    exporter's instance): findings, unknown and orphans."""
    conf = triage_classify.settings(required_checks=["kubelet"], max_unknown_percent=100)
    expected = dict((k, {"internal_ip": None}) for k in KEYS[:2])
    observed = dict((k, dict(FRESH, findings=[{"id": "kubelet.eviction_thresholds", "severity": "high",
                                               "check": "kubelet", "subject": ""}])) for k in KEYS[:2])
    return triage_classify.classify(conf, expected, observed, set(KEYS[2:]), AT)


def test_the_triage_answer_redacts_its_keys():
    out = triage_run.redacted(_triage_answer())
    assert leaks(json.dumps(out)) == [], out
    assert len(out["nodes"]) == 2 and len(out["orphans"]) == 2


def test_the_triage_inventory_names_no_host_by_a_secret(tmp_path, monkeypatch):
    # what run.triage answers: a fresh triage is redacted there, once (the plugin redacts a cached one)
    inv = parse(tmp_path, monkeypatch, "max_unknown_percent: 100\n", triage_run.redacted(_triage_answer()))
    names = sorted(inv.hosts)
    assert leaks(json.dumps(names)) == [] and len(names) == len(KEYS), names
    findings = sorted(h.name for h in inv.groups["nodefix_triage_findings"].get_hosts())
    assert findings == ["https://robot:%s@node-a.example.com" % MARK, "https://robot:%s@node-a.example.com (2)" % MARK]


def test_every_report_format_keyed_by_node_names():
    audit = {"findings": [], "checks": {"kubelet": {}}}
    results = dict((k, audit) for k in KEYS)
    remediation = dict((k, {"status": "failed", "msg": "m", "roles": []}) for k in KEYS)
    m = model.build_model(results, before=results, remediation=remediation)
    assert len(m["nodes"]) == len(KEYS)
    for text in (model.to_json(m), report_document.to_markdown(m), report_document.to_junit(m),
                 "\n".join(report_console.table_lines(m)), prometheus.fleet_textfile(m)):
        assert leaks(text) == [], text


@pytest.mark.parametrize("value,secret", [
    ({"headers": {"Authorization": "S3cretAuth1"}}, "S3cretAuth1"),        # the header as a mapping's key
    ({"headers": {"X-Authorization": "S3cretAuth2"}}, "S3cretAuth2"),
    ({"Proxy-Authorization": "Basic S3cretAuth3"}, "S3cretAuth3"),
    ({"tokens": ["S3cretList1", None]}, "S3cretList1"),                     # a list under a secret key, nulls beside
    ({"passwords": [["S3cretList2"], [""]]}, "S3cretList2"),               # lists of lists
    ({"data": {"tls.key": "LS0tLS1CRUdJTiBTM2NyZXRUbHM="}}, "LS0tLS1CRUdJTiBTM2NyZXRUbHM="),   # kubernetes.io/tls
    ({"data": {"ssh-privatekey": "S3cretSshKey"}}, "S3cretSshKey"),       # kubernetes.io/ssh-auth
    ({"X-Passcode": "S3cretCode1"}, "S3cretCode1"),
])
def test_a_secret_keys_value_is_hidden_at_any_depth(value, secret):
    """Review of issue 61 (2026-12-07): an Authorization key and lists of lists under a secret key were shown."""
    assert secret not in json.dumps(redact(value))


@pytest.mark.parametrize("value", [
    {"authorization_mode": "Webhook"}, {"tls.crt": "LS0tLS1CRUdJTiBDRVJU"}, {"key": "node-role.kubernetes.io/master"},
    {"taints": [{"key": "dedicated", "value": "gpu"}]}, {"tokens": [None]}, {"passwords": []},
])
def test_what_is_not_a_secret_under_such_keys_stays(value):
    assert redact(value) == value
