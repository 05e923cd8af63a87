# SPDX-License-Identifier: GPL-3.0-or-later
"""No secret leaves a node: a REAL ``remediate -vvv --diff`` on one lab container (Debian 12, the
kubeadm-layout kubelet double broken by lab/break/kubelet.yml) with credentials planted in the files the
collection reads there, and every channel grepped for them: the run's whole output (-vvv, --diff), every
task result as AWX keeps job events (tests/callback_plugins/nodefix_job_events.py) and every file of the
report directory (the reports, the evidence bundle). The node's files keep the real values.

Planted: a proxy URL's password and a *TOKEN* variable in /etc/default/kubelet (the file the kubelet fix
rewrites: in its --diff and in the evidence bundle), a systemd Environment= drop-in of the kubelet with a
proxy password and a *TOKEN* variable (read by the audit, kept in the evidence), a line in the kubelet's
journal with a proxy password and a bearer token (the evidence's journal), and containerd's config.toml
registry auth with a hosts.toml bearer header (read when containerd is installed; this image has none,
so the containerd channels are held by tests/unit/plugins/modules/test_redacted_outputs.py).
"""

import copy
import json
import os

import pytest
import yaml

from conftest import ROOT, assert_ok, lab_exclusive, podman, run_logged

pytestmark = pytest.mark.lab

NAME = "nodefix-secrets-debian12"
MARK = "<redacted by nodefix.k8s>"
SECRETS = {
    "proxy-password": "Pr0xy-Secret-41a",
    "env-token": "Env-Token-Secret-41b",
    "unit-proxy-password": "Unit-Proxy-Secret-41c",
    "unit-token": "Unit-Token-Secret-41d",
    "journal-proxy-password": "Journal-Secret-41e",
    "journal-bearer": "Journal-Bearer-Secret-41f",
    "registry-password": "Registry-Secret-41g",
    "registry-auth": "UmVnaXN0cnktQXV0aC00MWg=",
    "hosts-bearer": "Hosts-Bearer-Secret-41i",
}
PLANT = r"""
set -eu
cat >> /etc/default/kubelet <<'EOF'
HTTPS_PROXY=http://proxyuser:{proxy-password}@proxy.example.com:3128
REGISTRY_TOKEN={env-token}
EOF
mkdir -p /etc/systemd/system/kubelet.service.d /etc/containerd/certs.d/registry.example.com
cat > /etc/systemd/system/kubelet.service.d/20-proxy.conf <<'EOF'
[Service]
Environment="HTTP_PROXY=http://u:{unit-proxy-password}@proxy.example.com:3128" "KUBELET_API_TOKEN={unit-token}"
EOF
systemctl daemon-reload
cat >> /etc/containerd/config.toml <<'EOF'
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
  username = "robot"
  password = "{registry-password}"
  auth = "{registry-auth}"
EOF
cat > /etc/containerd/certs.d/registry.example.com/hosts.toml <<'EOF'
server = "https://registry.example.com"
[host."https://registry.example.com".header]
  Authorization = "Bearer {hosts-bearer}"
EOF
message="pulling through http://u:{journal-proxy-password}@proxy.example.com with Authorization: Bearer {journal-bearer}"
printf 'MESSAGE=%s\nOBJECT_SYSTEMD_UNIT=kubelet.service\nSYSLOG_IDENTIFIER=kubelet\n' "$message" | logger --journald
journalctl --flush
"""


def inventory(path):
    """lab/inventory/lab.yml with its one Debian 12 container renamed and nothing else (no VM)."""
    with open(os.path.join(ROOT, "lab", "inventory", "lab.yml")) as fh:
        inv = yaml.safe_load(fh)
    lab = inv["all"]["children"]["nodefix_lab"]
    containers = lab["children"]["nodefix_lab_containers"]
    host = copy.deepcopy(containers["hosts"]["nodefix-lab-debian12"])
    host["nodefix_lab_breaks"] = ["kubelet"]
    containers["hosts"] = {NAME: host}
    lab["children"] = {"nodefix_lab_containers": containers}
    path.write_text(yaml.safe_dump(inv))
    return str(path)


def plant():
    script = PLANT
    for key, value in SECRETS.items():
        script = script.replace("{%s}" % key, value)
    podman("exec", NAME, "sh", "-c", script)


def leaks(text):
    return sorted(k for k, v in SECRETS.items() if v in text)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("secrets-lab")
    inv = inventory(work / "inventory.yml")
    reports = work / "reports"
    events = work / "job-events.jsonl"
    with lab_exclusive():
        try:
            rc, out = run_logged("secrets-lab-up", ["ansible-playbook", "-i", inv, os.path.join(ROOT, "lab", "up.yml")])
            assert_ok("secrets-lab-up", rc, out)
            plant()
            env = {"NODEFIX_REPORT_DIR": str(reports), "NODEFIX_JOB_EVENTS": str(events),
                   "ANSIBLE_CALLBACK_PLUGINS": os.path.join(ROOT, "tests", "callback_plugins"),
                   "ANSIBLE_CALLBACKS_ENABLED": "nodefix_task_times,nodefix_job_events"}
            rc, out = run_logged("secrets-lab-remediate", ["ansible-playbook", "-i", inv, "nodefix.k8s.remediate",
                                                           "-e", "nodefix_targets=nodefix_lab", "-vvv", "--diff"],
                                 env=env, timeout=1800)
            assert_ok("secrets-lab-remediate", rc, out)
            on_node = podman("exec", NAME, "cat", "/etc/default/kubelet", "/etc/containerd/config.toml",
                             "/etc/systemd/system/kubelet.service.d/20-proxy.conf")
            yield {"out": out, "events": events.read_text(), "reports": reports, "on_node": on_node}
        finally:
            podman("rm", "-f", "-t", "0", NAME, check=False)


def test_the_run_output_and_its_diff_hold_no_secret(run):
    assert leaks(run["out"]) == []
    # the kubelet fix's --diff of /etc/default/kubelet was shown, its secrets redacted
    assert "/etc/default/kubelet (before)" in run["out"]
    assert "HTTPS_PROXY=http://proxyuser:%s@proxy.example.com:3128" % MARK in run["out"]
    assert "REGISTRY_TOKEN=%s" % MARK in run["out"]


def test_the_job_events_hold_no_secret(run):
    assert run["events"].count("\n") > 20
    assert leaks(run["events"]) == []
    # the audit read the kubelet's drop-in (its Environment= line is in the audit's result), redacted
    assert "20-proxy.conf" in run["events"]


def test_the_report_directory_and_the_evidence_hold_no_secret(run):
    files = [os.path.join(d, f) for d, _s, names in os.walk(str(run["reports"])) for f in names]
    evidence = [f for f in files if "/evidence/" in f and f.endswith(".json")]
    assert evidence, files
    for path in files:
        with open(path, "rb") as fh:
            assert leaks(fh.read().decode("utf-8", "replace")) == [], path
    with open(evidence[0]) as fh:
        bundle = json.load(fh)
    kept = bundle["files"]["/etc/default/kubelet"]
    assert "REGISTRY_TOKEN=%s" % MARK in kept and "proxyuser:%s@" % MARK in kept
    assert '"KUBELET_API_TOKEN=%s"' % MARK in bundle["files"]["/etc/systemd/system/kubelet.service.d/20-proxy.conf"]
    journal = bundle["sources"]["journal-kubelet"]["text"]
    assert "Authorization: Bearer %s" % MARK in journal and "u:%s@proxy" % MARK in journal
    assert bundle["states"]["journal-kubelet"]["state"] == "kept"


def test_the_node_keeps_the_real_values(run):
    for key in ("proxy-password", "env-token", "unit-proxy-password", "unit-token", "registry-password",
                "registry-auth"):
        assert SECRETS[key] in run["on_node"], key
    assert "--kube-api-qps" not in run["on_node"]   # the kubelet fix did rewrite /etc/default/kubelet
