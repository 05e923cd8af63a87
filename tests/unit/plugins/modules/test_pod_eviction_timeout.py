# SPDX-License-Identifier: GPL-3.0-or-later
"""pod_eviction against an API server that accepts the connection and never answers: the module fails with
the reason after its request_timeout, never waits without end (a hung API server holds the node, not the run).

The module runs as Ansible runs it (a subprocess, the official kubernetes client on a real socket); the
subprocess timeout only guards the test run, it is not asserted."""

import json
import os
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")


def test_a_silent_api_server_fails_the_eviction_with_its_reason(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:%d" % silent.getsockname()[1]}}],
        "users": [{"name": "u", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"kubeconfig": str(kubeconfig), "namespace": "shop",
                                                        "name": "cart-1", "request_timeout": 1}}))
    env = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
    env["PYTHONPATH"] = COLLECTIONS + os.pathsep + os.environ.get("PYTHONPATH", "")
    try:
        proc = subprocess.run([sys.executable, "-m", "ansible_collections.nodefix.k8s.plugins.modules.pod_eviction",
                               str(args)], capture_output=True, text=True, timeout=60, env=env, check=False)
    finally:
        silent.close()
    assert "Traceback" not in proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["failed"] and result["msg"].startswith(
        "cannot read pod shop/cart-1: the API server could not be reached or did not answer within 1 s")
    assert "timed out" in result["msg"].lower()
