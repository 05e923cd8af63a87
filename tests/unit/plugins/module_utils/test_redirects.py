# SPDX-License-Identifier: GPL-3.0-or-later
"""The one redirect policy (_core/redirects.py) over real HTTP: two servers on two ports of 127.0.0.1 (two origins,
RFC 6454: the port is part of it), the Prometheus client through Ansible's own Request (transport.OpenUrl), and
runsc_install through Ansible's fetch_url. A redirect to the other port gets none of the operator's headers -
no Authorization, no secret-named header, no header of a name of its own (X-Authorization, Key, a tenant's) - only
Accept, User-Agent and the like; one to the same origin gets them all; https -> http, a non-http scheme, user
information in the Location and an endless loop are refused."""

import base64
import glob
import json
import os
import threading

import pytest
import yaml
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ansible_collections.nodefix.k8s.plugins.module_utils._core import redirects
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import transport
from ansible_collections.nodefix.k8s.plugins.modules import runsc_install

import yaml_tasks

EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}


class Origins(object):
    """Two servers: ``a`` redirects (``/cross/...`` to ``b``, ``/same/...`` to itself, ``/loop`` to itself forever,
    ``/ftp`` to an ftp URL), ``b`` and ``a``'s ``/final/...`` answer 200; every request's headers recorded."""

    def __init__(self):
        self.seen = []
        self.servers = []
        origins = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                port = self.server.server_address[1]
                headers = dict((k.lower(), v) for k, v in self.headers.items())
                origins.seen.append((port, self.path.split("?")[0], headers))
                rest = self.path.split("/", 2)[-1]
                target = {"cross": "http://127.0.0.1:%d/final/%s" % (origins.port("b"), rest),
                          "same": "/final/%s" % rest, "loop": "/loop/x", "ftp": "ftp://127.0.0.1/x",
                          "back": "http://127.0.0.1:%d/final/%s" % (origins.port("a"), rest)}
                kind = self.path.split("/")[1]
                if port == origins.port("b") and kind == "back":
                    self.send_response(302)
                    self.send_header("Location", target["back"])
                elif port == origins.port("a") and kind in target:
                    self.send_response(302)
                    self.send_header("Location", target[kind])
                else:
                    self.send_response(200)
                    body = json.dumps(EMPTY).encode()
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        for _name in ("a", "b"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)

    def port(self, name):
        return self.servers["ab".index(name)].server_address[1]

    def url(self, name):
        return "http://127.0.0.1:%d" % self.port(name)

    def headers_at(self, name, prefix="/final"):
        return [h for port, path, h in self.seen if port == self.port(name) and path.startswith(prefix)]

    def close(self):
        for server in self.servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def origins():
    out = Origins()
    yield out
    out.close()


def client(url, **kw):
    return prometheus_client.Client(transport.OpenUrl(), url, username="robot", password="Redir-Pw-61",
                                    headers={"X-Api-Key": "Redir-Key-61", "X-Scope-OrgID": "tenant-1"}, **kw)


def test_prometheus_credentials_never_follow_a_redirect_to_another_origin(origins):
    assert client(origins.url("a") + "/cross").query("up", 1) == ([], [])
    (sent,) = origins.headers_at("b")
    assert "authorization" not in sent and "x-api-key" not in sent, sent
    assert "x-scope-orgid" not in sent      # an operator's header stays with its origin: a name cannot tell a key


def test_prometheus_credentials_follow_a_redirect_to_the_same_origin_and_back_to_it(origins):
    assert client(origins.url("a") + "/same").query("up", 1) == ([], [])
    assert client(origins.url("a") + "/back").query("up", 1) == ([], [])     # b redirects back to a
    basic = "Basic " + base64.b64encode(b"robot:Redir-Pw-61").decode()
    assert [h["authorization"] for h in origins.headers_at("a")] == [basic, basic]
    assert [h["x-api-key"] for h in origins.headers_at("a")] == ["Redir-Key-61"] * 2


@pytest.mark.parametrize("path,words", [("/loop", "more than 10 redirects"), ("/ftp", "not http or https")])
def test_prometheus_refused_redirects_are_no_answer(origins, path, words):
    with pytest.raises(prometheus_client.NoAnswer) as err:
        client(origins.url("a") + path).query("up", 1)
    assert words in err.value.msg and "Redir-Pw-61" not in err.value.msg


@pytest.mark.parametrize("first,current,location,want", [
    ("https://p.example/api", "https://p.example/api", "http://p.example/api", "from https to http"),
    ("https://p.example/api", "https://o.example/x", "http://p.example/api", "from https to http"),
    ("http://p.example/api", "http://p.example/api", "http://u:Pw-61@o.example/", "user information"),
    ("http://p.example/api", "http://p.example/api", "file:///etc/passwd", "not http or https"),
    ("http://p.example/api", "http://p.example/api", "http://o.example:x/", "port is not a number"),
])
def test_refused_redirects_say_why_without_credentials(first, current, location, want):
    with pytest.raises(NodefixError) as err:
        redirects.follow(first, current, location, {"Authorization": "Basic x"})
    assert want in err.value.msg and "Pw-61" not in err.value.msg


@pytest.mark.parametrize("location,kept", [
    ("/other", True), ("https://p.example:443/x", True), ("https://P.EXAMPLE/x", True),
    ("https://p.example:8443/x", False), ("https://o.example/x", False), ("https://sub.p.example/x", False),
])
def test_the_origin_decides_what_a_redirect_carries(location, kept):
    headers = {"Authorization": "Bearer t", "X-JFrog-Art-Api": "k", "Private-Token": "p", "Cookie": "c",
               "X-Authorization": "S3cretValue99", "Key": "k3y", "X-Honeycomb-Team": "hc1", "X-Passcode": "p4ss",
               "X-Hub-Signature-256": "sha256=ab", "X-Scope-OrgID": "tenant", "Accept": "application/json",
               "User-Agent": "nodefix"}
    target, sent = redirects.follow("https://p.example/api", "https://p.example/api", location, headers)
    assert target.endswith(location.lstrip("/").split("/")[-1])
    assert sent == (headers if kept else {"Accept": "application/json", "User-Agent": "nodefix"})


def test_runsc_install_sends_no_mirror_credential_to_another_origin(run_module, tmp_path, origins):
    """The mirror hands off to another port (an object store): the download goes on there without the Basic
    authentication, the API key header and any other header the operator gave."""
    result, failed, _t = run_module(runsc_install, dict(
        base_url=origins.url("a") + "/cross/release", release="20240729.0", arch="x86_64", allow_insecure=True,
        username="robot", password="Redir-Pw-61", headers={"X-JFrog-Art-Api": "Redir-Key-61", "X-Tenant": "t1"},
        dest=str(tmp_path / "runsc"), shim_dest=str(tmp_path / "shim"),
        checksums={"runsc": "a" * 128, "containerd-shim-runsc-v1": "a" * 128}))
    assert failed   # b answers JSON, not runsc: the checksum refuses it
    first = [h for port, _p, h in origins.seen if port == origins.port("a")][0]
    assert first["authorization"].startswith("Basic ") and first["x-jfrog-art-api"] == "Redir-Key-61"
    handed = origins.headers_at("b")
    assert handed and all("authorization" not in h and "x-jfrog-art-api" not in h for h in handed), handed
    assert all("x-tenant" not in h for h in handed)


def test_every_role_request_with_headers_sends_them_with_the_first_request_only():
    """The roles' ansible.builtin.uri/get_url follow a redirect with every header to any host (Ansible's redirect
    handler keeps them): each task that sends headers lists all of them in unredirected_headers."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
    found = 0
    for path in glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml")):
        with open(path) as handle:
            for task in yaml_tasks.tasks(yaml.safe_load(handle)):
                for name in ("ansible.builtin.uri", "ansible.builtin.get_url"):
                    args = task.get(name)
                    if isinstance(args, dict) and args.get("headers"):
                        found += 1
                        # "{{ X }}" -> "{{ X | list }}": every name of the headers it sends
                        want = args["headers"].replace(" ", "").replace("}}", "|list}}")
                        assert args.get("unredirected_headers", "").replace(" ", "") == want, (path, task.get("name"))
    assert found == 2   # the containerd archive's checksum and archive


def test_ansible_unredirected_headers_keeps_the_mirror_headers_off_a_redirect(origins):
    """What the role relies on, with the ansible-core installed: open_url (uri's request) with
    unredirected_headers sends those headers to the first URL and to no redirect's target."""
    from ansible.module_utils.urls import open_url
    headers = {"Authorization": "Basic cm9ib3Q6UmVkaXItUHctNjE=", "X-JFrog-Art-Api": "Redir-Key-61"}
    open_url(origins.url("a") + "/cross/archive", headers=headers, unredirected_headers=list(headers),
             follow_redirects="safe").read()
    first = [h for port, _p, h in origins.seen if port == origins.port("a")][0]
    (handed,) = origins.headers_at("b")
    assert first["x-jfrog-art-api"] == "Redir-Key-61" and "authorization" in first
    assert "authorization" not in handed and "x-jfrog-art-api" not in handed
