# SPDX-License-Identifier: GPL-3.0-or-later
"""_k8s.reboot_api.KubeApi: every call of the reboot lock and the blocking-pod check has a timeout, and a server
that refuses or never answers is a NodefixError naming the call - never a traceback, never a run held forever.
The servers here are sockets of the test's own (one that refuses: a closed port; one that accepts and never
answers)."""

import socket

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import reboot_api
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

pytest.importorskip("kubernetes")


def kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
        "users": [{"name": "t", "user": {"token": "x"}}]}))
    return str(path)


@pytest.fixture
def silent():
    """A server that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def refused():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


CALLS = [
    ("list_pods", ("node-a", "app=db"), "listing the pods"),
    ("get_lease", ("kube-system", "nodefix-reboot-0"), "reading Lease"),
    ("create_lease", ("kube-system", {"metadata": {"name": "nodefix-reboot-0"}, "spec": {}}), "creating Lease"),
    ("replace_lease", ("kube-system", "nodefix-reboot-0", {"metadata": {"name": "nodefix-reboot-0"}}), "taking over Lease"),
    ("delete_lease", ("kube-system", "nodefix-reboot-0", "7"), "releasing Lease"),
]


# every call against a refused port; a read and a write against the silent server (each waits its timeout)
CASES = [c + ("refused",) for c in CALLS] + [c + ("silent",) for c in CALLS if c[0] in ("list_pods", "create_lease")]


@pytest.mark.parametrize("method,args,words,server", CASES, ids=["%s-%s" % (c[0], c[3]) for c in CASES])
def test_every_lock_call_fails_naming_itself_when_the_server_does_not_answer(
        request, tmp_path, monkeypatch, method, args, words, server):
    monkeypatch.setattr(reboot_api.KubeApi, "TIMEOUT", 1)
    api = reboot_api.KubeApi(kubeconfig(tmp_path, request.getfixturevalue(server)))
    with pytest.raises(NodefixError) as err:
        getattr(api, method)(*args)
    assert words in err.value.msg and "no answer from the API server" in err.value.msg
