# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for kubelet_rollback: a failed restart is rolled back, kubelet ends active with the old config."""

import json


def configz(host):
    out = host.check_output("python3 -c \"import urllib.request as u; "
                            "print(u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:10248/configz').read().decode())\"")
    return json.loads(out)["kubeletconfig"]


def test_kubelet_active_again(host):
    assert host.check_output("systemctl is-active kubelet") == "active"


def test_previous_configuration_in_effect(host):
    kc = configz(host)
    assert kc["kubeAPIQPS"] == 5 and kc["eventRecordQPS"] == 5
    assert kc["serializeImagePulls"] is True and "maxParallelImagePulls" not in kc


def test_previous_files_restored(host):
    assert host.file("/etc/default/kubelet").content_string == 'KUBELET_EXTRA_ARGS="--kube-api-qps=5 --event-qps=5"\n'
    cfg = host.file("/var/lib/kubelet/config.yaml").content_string
    assert "kubeAPIQPS: 5  # see KUB-112\n" in cfg and "maxParallelImagePulls" not in cfg


def test_the_failure_was_the_injected_one(host):
    log = host.check_output("journalctl -u kubelet --no-pager -o cat")
    assert "injected start failure (kubeAPIQPS=50)" in log
