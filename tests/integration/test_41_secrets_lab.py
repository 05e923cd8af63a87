# SPDX-License-Identifier: GPL-3.0-or-later
"""No secret leaves a node or the controller (issue 61): on one lab container (Debian 12, the kubeadm-layout
kubelet double broken by lab/break/kubelet.yml) with credentials planted in the files the collection reads there
and in the options operators set, three real runs - ``audit``, ``remediate --check -vvv --diff`` and
``remediate -vvv --diff`` - against the kube-apiserver double recording every request it receives, and every
channel grepped for every credential: each run's whole output (-vvv: every task result and its invocation;
--diff), every task result as AWX keeps job events (tests/callback_plugins/nodefix_job_events.py), every file of
the report directories (JSON, Markdown, HTML, JUnit, the evidence bundle, the dry-run plan), the node's
Prometheus textfile, and every request the API double received (the Events, the annotations, the cordon) and
its state. The node's files keep the real values; the non-secret parts (hosts, paths, key names) still show.

Planted on the node: a proxy URL's password, one split at its last '@' and a *TOKEN* variable in
/etc/default/kubelet (the file the kubelet fix rewrites: in its --diff and in the evidence bundle) with a PEM
private key in a comment; a systemd Environment= drop-in of the kubelet with a proxy password, a *TOKEN*
variable, an *_API key, a ``--token x`` and a ``--creds user:x`` (read by the audit, kept in the evidence); a line
in the kubelet's journal with a proxy password, a bearer token, ``curl -uuser:x``, ``mysql -px`` and a JSON Web
Token (the evidence's journal); containerd's
config.toml registry auth (a TOML multi-line literal password too) and a hosts.toml with a bearer header, a header
array and an X-JFrog-Art-Api header (read when containerd is installed; this image has none, so the containerd
channels are held by tests/unit/plugins/modules/test_redacted_outputs.py).
Planted as options: the etcd health command's ``--user root:x`` and its environment's ETCDCTL_PASSWORD (the check
run makes the node a control-plane node whose etcd check fails: the command is quoted in held_by, the dry-run plan
and the report, and warns naming reboot_etcd_health_environment); the gVisor
mirror's and the containerd archive's URL user information, password and header (set for every run; their
download paths, which this node's findings do not reach, are held end to end by tests/badinput/
test_bad_downloads.py against a mirror behind Basic auth and an API-key header).
"""

import copy
import json
import os

import pytest
import yaml

from conftest import ROOT, ApiServerDouble, assert_ok, lab_exclusive, podman, run_logged

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
    "proxy-last-at-head": "Pr0xy-Secret-41j",
    "proxy-last-at-tail": "Tail-Secret-41j",
    "pem-key": "Pem-Body-Secret-41k",
    "unit-api-key": "Api-Key-Secret-41l",
    "unit-token-flag": "Token-Flag-Secret-41m",
    "unit-creds": "Creds-Secret-41n",
    "registry-multiline": "Multi-Line-Secret-41o",
    "hosts-header-array": "Header-Array-Secret-41p",
    "hosts-jfrog": "JFrog-Secret-41q",
    "etcd-user": "Etcd-User-Secret-41r",
    "gvisor-url": "Gvisor-Url-Secret-41s",
    "gvisor-password": "Gvisor-Password-Secret-41t",
    "gvisor-header": "Gvisor-Header-Secret-41u",
    "containerd-url": "Containerd-Url-Secret-41v",
    "containerd-password": "Containerd-Password-Secret-41w",
    "containerd-header": "Containerd-Header-Secret-41x",
    "journal-curl": "Curl-Secret-41y",
    "journal-mysql": "Mysql-Secret-41z",
    "journal-jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlZml4LTQxIn0.Jwt-Sig-Secret-41A",
    "etcd-env": "Etcd-Env-Secret-41B",
}
TEXTFILE = "/var/lib/node_exporter/textfile_collector/nodefix.prom"
# the options every run gets (the etcd ones only the check run, which makes the node a control-plane node)
OPTIONS = {
    "gvisor_mirror_base_url": "https://robot:%s@mirror.example.com/gvisor/release" % SECRETS["gvisor-url"],
    "gvisor_mirror_password": SECRETS["gvisor-password"],
    "gvisor_mirror_headers": {"X-JFrog-Art-Api": SECRETS["gvisor-header"]},
    "containerd_archive_base_url": "https://robot:%s@mirror.example.com/containerd" % SECRETS["containerd-url"],
    "containerd_archive_password": SECRETS["containerd-password"],
    "containerd_archive_headers": {"X-Registry-Auth": SECRETS["containerd-header"]},
    "nodefix_prometheus_textfile": TEXTFILE,
}
CONTROL_PLANE = {"nodefix_control_plane": True, "reboot_control_plane_groups": ["nodefix_lab_containers"],
                 "nodefix_etcd_health_command": ["/bin/false", "--user", "root:" + SECRETS["etcd-user"],
                                                 "endpoint", "health"],
                 # the role's variable (remediate passes the command; the environment is the role's own)
                 "reboot_etcd_health_environment": {"ETCDCTL_PASSWORD": SECRETS["etcd-env"]}}
PLANT = r"""
set -eu
cat >> /etc/default/kubelet <<'EOF'
HTTPS_PROXY=http://proxyuser:{proxy-password}@proxy.example.com:3128
HTTP_PROXY=http://u:{proxy-last-at-head}@{proxy-last-at-tail}@proxy.example.com:3128
REGISTRY_TOKEN={env-token}
# -----BEGIN EC PRIVATE KEY----- {pem-key} -----END EC PRIVATE KEY-----
EOF
mkdir -p /etc/systemd/system/kubelet.service.d /etc/containerd/certs.d/registry.example.com
cat > /etc/systemd/system/kubelet.service.d/20-proxy.conf <<'EOF'
[Service]
Environment="HTTP_PROXY=http://u:{unit-proxy-password}@proxy.example.com:3128" "KUBELET_API_TOKEN={unit-token}"
Environment="ARTIFACTORY_API={unit-api-key}" "PULL_ARGS=--token {unit-token-flag} --creds robot:{unit-creds}"
EOF
systemctl daemon-reload
cat >> /etc/containerd/config.toml <<'EOF'
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
  username = "robot"
  password = "{registry-password}"
  auth = "{registry-auth}"
[plugins."io.containerd.grpc.v1.cri".registry.configs."other.example.com".auth]
  password = '''
{registry-multiline}'''
EOF
cat > /etc/containerd/certs.d/registry.example.com/hosts.toml <<'EOF'
server = "https://registry.example.com"
[host."https://registry.example.com".header]
  Authorization = "Bearer {hosts-bearer}"
  Private-Token = ["{hosts-header-array}"]
  X-JFrog-Art-Api = "{hosts-jfrog}"
EOF
mkdir -p $(dirname {textfile})
message="pulling through http://u:{journal-proxy-password}@proxy.example.com with Authorization: Bearer {journal-bearer}; \
retried: curl -uadmin:{journal-curl} https://registry.example.com, mysql -h db -p{journal-mysql}, token {journal-jwt}"
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
    for key, value in dict(SECRETS, textfile=TEXTFILE).items():
        script = script.replace("{%s}" % key, value)
    podman("exec", NAME, "sh", "-c", script)


def leaks(text):
    return sorted(k for k, v in SECRETS.items() if v in text)


def playbook(label, inv, name, env, extra, *args):
    return run_logged(label, ["ansible-playbook", "-i", inv, name, "-e", "nodefix_targets=nodefix_lab",
                              "-e", json.dumps(extra)] + list(args), env=env, timeout=1800)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("secrets-lab")
    inv = inventory(work / "inventory.yml")
    with lab_exclusive():
        api = None
        try:
            rc, out = run_logged("secrets-lab-up", ["ansible-playbook", "-i", inv, os.path.join(ROOT, "lab", "up.yml")])
            assert_ok("secrets-lab-up", rc, out)
            plant()
            # the API double records every request it receives (conftest.ApiServerDouble: --record)
            api = ApiServerDouble(work, [NAME], [{"namespace": "default", "name": "web-0", "node": NAME,
                                                  "owner": "ReplicaSet"}])
            options = dict(OPTIONS, nodefix_kubeconfig=api.kubeconfig)
            runs = {}
            for label, name, extra, args in (
                    ("audit", "nodefix.k8s.audit", options, []),
                    ("check", "nodefix.k8s.remediate", dict(options, **CONTROL_PLANE), ["--check", "-vvv", "--diff"]),
                    ("remediate", "nodefix.k8s.remediate", options, ["-vvv", "--diff"])):
                events = work / ("job-events-%s.jsonl" % label)
                env = {"NODEFIX_REPORT_DIR": str(work / "reports" / label), "NODEFIX_JOB_EVENTS": str(events),
                       "ANSIBLE_CALLBACK_PLUGINS": os.path.join(ROOT, "tests", "callback_plugins"),
                       "ANSIBLE_CALLBACKS_ENABLED": "nodefix_task_times,nodefix_warm_loaders,nodefix_job_events"}
                rc, out = playbook("secrets-lab-" + label, inv, name, env, extra, *args)
                if label == "check":
                    # the node is held whole as a control-plane node whose etcd check fails: a held node is not
                    # remediated and fails the run after the report (test_18b_lock_control_plane.py)
                    assert "held: control plane: etcd is not healthy" in out, out[-3000:]
                else:
                    assert_ok("secrets-lab-" + label, rc, out)
                runs[label] = {"out": out, "events": events.read_text()}
                if label == "audit":
                    runs[label]["textfile"] = podman("exec", NAME, "cat", TEXTFILE)
            with open(api.record) as fh:
                requests = fh.read()
            on_node = podman("exec", NAME, "cat", "/etc/default/kubelet", "/etc/containerd/config.toml",
                             "/etc/systemd/system/kubelet.service.d/20-proxy.conf")
            yield {"runs": runs, "out": runs["remediate"]["out"], "events": runs["remediate"]["events"],
                   "reports": work / "reports", "on_node": on_node, "requests": requests, "api": api.state(),
                   "textfile": podman("exec", NAME, "cat", TEXTFILE)}
        finally:
            if api is not None:
                api.stop()
            podman("rm", "-f", "-t", "0", NAME, check=False)


def test_every_run_output_and_job_event_holds_no_secret(run):
    for label, result in run["runs"].items():
        assert leaks(result["out"]) == [], label
        assert leaks(result["events"]) == [], label
        assert result["events"].count("\n") > 5, label
    # -vvv printed the invocations (ansible.cfg: YAML results), redacted; the rollout's control_plane step quotes the
    # etcd command it ran with its user kept and its password redacted
    assert "module_args:" in run["runs"]["check"]["out"] and "module_args:" in run["out"]
    assert "--user root:%s endpoint health" % MARK in run["runs"]["check"]["out"]
    # the etcd command's credential on its line warns, naming the option for it (issue 61 item 1)
    assert "etcd_health_environment" in run["runs"]["check"]["out"]


def test_the_etcd_command_is_quoted_redacted_in_the_plan_and_the_report(run):
    shown = "/bin/false --user root:%s endpoint health" % MARK
    assert shown in run["runs"]["check"]["out"]
    reports = [p for p in (run["reports"] / "check").rglob("report.json") if shown in p.read_text()]
    assert reports, "the check run's report does not quote the held node's etcd command"


def test_the_api_double_received_no_secret(run):
    assert leaks(run["requests"]) == [] and leaks(json.dumps(run["api"])) == []
    requests = [json.loads(line) for line in run["requests"].splitlines()]
    posted = [r for r in requests if r["method"] == "POST" and "/events" in r["path"]]
    patched = [r for r in requests if r["method"] == "PATCH" and r["path"].endswith("/nodes/" + NAME)]
    assert posted and patched, sorted(set((r["method"], r["path"]) for r in requests))
    assert "nodefix.k8s/last-remediation" in json.dumps(run["api"]["nodes"][NAME])


def test_the_textfile_holds_no_secret(run):
    assert "nodefix_" in run["textfile"] and leaks(run["textfile"]) == []
    assert leaks(run["runs"]["audit"]["textfile"]) == []


def test_the_run_output_and_its_diff_hold_no_secret(run):
    assert leaks(run["out"]) == []
    # the kubelet fix's --diff of /etc/default/kubelet was shown, its secrets redacted
    assert "/etc/default/kubelet (before)" in run["out"]
    assert "HTTPS_PROXY=http://proxyuser:%s@proxy.example.com:3128" % MARK in run["out"]
    assert "REGISTRY_TOKEN=%s" % MARK in run["out"]
    assert "HTTP_PROXY=http://u:%s@proxy.example.com:3128" % MARK in run["out"]
    assert "-----BEGIN EC PRIVATE KEY-----" in run["out"]


def test_the_job_events_hold_no_secret(run):
    assert run["events"].count("\n") > 20
    assert leaks(run["events"]) == []
    # the audit read the kubelet's drop-in (its Environment= line is in the audit's result), redacted
    assert "20-proxy.conf" in run["events"]


def test_the_report_directories_and_the_evidence_hold_no_secret(run):
    files = [os.path.join(d, f) for d, _s, names in os.walk(str(run["reports"])) for f in names]
    for kind in ("report.json", "report.md", "report.html", "junit.xml"):
        assert [f for f in files if f.endswith(kind)], (kind, files)
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
    assert "curl -uadmin:%s https://registry.example.com" % MARK in journal and "mysql -h db -p%s" % MARK in journal
    assert bundle["states"]["journal-kubelet"]["state"] == "kept"


def test_the_node_keeps_the_real_values(run):
    for key in ("proxy-password", "env-token", "unit-proxy-password", "unit-token", "registry-password",
                "registry-auth", "proxy-last-at-tail", "pem-key", "unit-api-key", "unit-creds", "registry-multiline"):
        assert SECRETS[key] in run["on_node"], key
    assert "--kube-api-qps" not in run["on_node"]   # the kubelet fix did rewrite /etc/default/kubelet
