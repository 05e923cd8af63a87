# SPDX-License-Identifier: GPL-3.0-or-later
"""pod_eviction with bad input: a clear error naming the problem, no request sent.

Its behaviour against an API server (exactly one pod evicted, 429 retried, UID precondition) is
tested in tests/integration/test_13_rollout_double.py against the kube-apiserver test double.
"""

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import pod_eviction


@pytest.mark.parametrize("args,words", [
    ({"name": "a/b", "namespace": "shop"}, ["name 'a/b' is not a Kubernetes object name"]),
    ({"name": "cart", "namespace": ""}, ["namespace '' is not a Kubernetes object name"]),
    ({"name": "cart", "namespace": "shop", "wait_timeout": -1}, ["must not be negative"]),
    ({"name": "cart", "namespace": "shop", "kubeconfig": "/nonexistent/kubeconfig"},
     ["cannot load the kubeconfig /nonexistent/kubeconfig"]),
])
def test_bad_input_is_refused(run_module, args, words):
    result, failed, _t = run_module(pod_eviction, args)
    assert failed
    for word in words:
        assert word in result["msg"]


def test_garbage_kubeconfig_is_refused(run_module, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nclusters: [ {\n")
    result, failed, _t = run_module(pod_eviction, {"name": "cart", "namespace": "shop", "kubeconfig": str(path)})
    assert failed and "cannot load the kubeconfig" in result["msg"]
