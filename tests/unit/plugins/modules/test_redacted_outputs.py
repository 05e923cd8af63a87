# SPDX-License-Identifier: GPL-3.0-or-later
"""The config modules' results and diffs are redacted (_core.redact), the files they write keep the real values.

Credentials are planted in the files each module reads and changes; with --diff (``diff=True``) the whole result
(what -v, --diff and AWX's job events carry) holds none of them, the file on the node still holds every one.
"""

import json
import os
import shutil

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redact
from ansible_collections.nodefix.k8s.plugins.modules import containerd_config, kubelet_config, runsc_config

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
FIX = os.path.join(REPO, "tests", "unit", "fixtures", "containerd")
BIN = "/usr/bin/containerd"
MARK = redact.MARK

REGISTRY = """
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
  username = "robot"
  password = "S3cr3t-registry-password"
  auth = "cm9ib3Q6UzNjcjN0LXJlZ2lzdHJ5"
  identitytoken = "registry-identity-token"
[plugins."io.containerd.grpc.v1.cri".registry.configs."other.example.com".auth]
  username = "robot"
  password = '''
Multi-Line-Registry-61'''
[plugins."io.containerd.grpc.v1.cri".registry.configs."other.example.com".headers]
  Private-Token = ["Header-Array-Registry-61"]
  X-JFrog-Art-Api = ["JFrog-Registry-61"]
  X-Registry-Auth = ["Registry-Auth-Header-61"]
"""
REGISTRY_SECRETS = ("S3cr3t-registry-password", "cm9ib3Q6UzNjcjN0LXJlZ2lzdHJ5", "registry-identity-token",
                    "Multi-Line-Registry-61", "Header-Array-Registry-61", "JFrog-Registry-61", "Registry-Auth-Header-61")


def leaked(result, secrets):
    dumped = json.dumps(result)
    return [s for s in secrets if s in dumped]


def test_containerd_config_diff_is_redacted_and_the_file_keeps_the_password(run_module, tmp_path):
    path = tmp_path / "etc" / "containerd" / "config.toml"
    path.parent.mkdir(parents=True)
    with open(os.path.join(FIX, "config-default-1.6.20.toml")) as fh:
        path.write_text(fh.read() + REGISTRY)
    with open(os.path.join(FIX, "config-dump-1.6.20-runsc-systemd.toml")) as fh:
        dump = fh.read() + REGISTRY
    result, failed, _t = run_module(containerd_config, {"path": str(path), "runc_systemd_cgroup": True},
                                    commands=[{"argv": [BIN, "--config"], "rc": 0, "out": dump, "err": ""}],
                                    diff=True, bins={"containerd": BIN})
    assert not failed and result["changed"], result
    assert leaked(result, REGISTRY_SECRETS) == []
    assert '  password = "%s"' % MARK in result["diff"]["before"] and '  password = "%s"' % MARK in result["diff"]["after"]
    written = path.read_text()
    assert "SystemdCgroup = true" in written and all(s in written for s in REGISTRY_SECRETS)


def test_runsc_config_diff_is_redacted_and_the_file_keeps_it(run_module, tmp_path):
    path = tmp_path / "runsc.toml"
    path.write_text('log_level = "debug"\n# mirror https://robot:runsc-mirror-password@mirror.example.com\n'
                    '[runsc_config]\n  debug = "true"\n')
    result, failed, _t = run_module(runsc_config, {"path": str(path), "runsc_config": {"systemd-cgroup": True}}, diff=True)
    assert not failed and result["changed"]
    assert leaked(result, ["runsc-mirror-password"]) == [] and MARK in result["diff"]["before"]
    assert "runsc-mirror-password" in path.read_text() and 'systemd-cgroup = "true"' in path.read_text()


def test_kubelet_config_result_and_diff_are_redacted_and_the_env_file_keeps_them(run_module, tmp_path):
    root = str(tmp_path / "root")
    shutil.copytree(os.path.join(REPO, "lab", "kubelet-double", "layouts", "kubeadm"), root, symlinks=True)
    kubelet = os.path.join(root, "usr", "bin", "kubelet")
    os.makedirs(os.path.dirname(kubelet))
    with open(kubelet, "w") as fh:
        fh.write("#!/bin/sh\nexit 99\n")
    os.chmod(kubelet, 0o755)
    env = os.path.join(root, "etc", "default", "kubelet")
    with open(env, "a") as fh:
        fh.write("HTTPS_PROXY=http://proxyuser:kubelet-proxy-password@proxy.example.com:3128\n"
                 "HTTP_PROXY=http://u:Pr0xy@Tail-Kubelet-61@proxy.example.com:3128\n"
                 "REGISTRY_TOKEN=kubelet-env-token\n")
    secrets = ["kubelet-proxy-password", "kubelet-env-token", "Tail-Kubelet-61", "Pr0xy"]
    cmds = [{"argv": [kubelet, "--version"], "out": "Kubernetes v1.29.3\n"}]
    result, failed, _t = run_module(kubelet_config, {"root": root, "settings": {"kubeAPIQPS": 30}}, commands=cmds,
                                    diff=True)
    assert not failed and result["changed"], result.get("msg")
    assert leaked(result, secrets) == []
    diffs = dict((d["before_header"], d) for d in result["diff"])
    assert "REGISTRY_TOKEN=%s" % MARK in diffs["/etc/default/kubelet (before)"]["after"]
    assert "HTTP_PROXY=http://u:%s@proxy.example.com:3128" % MARK in diffs["/etc/default/kubelet (before)"]["after"]
    with open(env) as fh:
        written = fh.read()
    assert "--kube-api-qps" not in written and all(s in written for s in secrets)
