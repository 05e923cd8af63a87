# SPDX-License-Identifier: GPL-3.0-or-later
"""runsc_install's mirror credentials are options (issue 61): username + password (or password_file) as Basic
authentication with the first request, extra headers, and a URL's user information used but never shown.

A real HTTP server on 127.0.0.1 records every request's headers and answers 404 (the module then fails, its
failure message naming the URL): the server saw the credentials, the module's result holds none of them."""

import base64
import json
import threading

import pytest
from http.server import BaseHTTPRequestHandler, HTTPServer

from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.common import warnings as ansible_warnings

from ansible_collections.nodefix.k8s.plugins.modules import runsc_install

SUM = "a" * 128


class Handler(BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):  # noqa: N802 - http.server's name
        Handler.seen.append(dict((k.lower(), v) for k, v in self.headers.items()))
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def mirror():
    Handler.seen = []
    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1:%d" % server.server_port
    server.shutdown()
    server.server_close()


def run(run_module, tmp_path, **args):
    base = dict(release="20240729.0", arch="x86_64", allow_insecure=True, dest=str(tmp_path / "runsc"),
                shim_dest=str(tmp_path / "shim"), checksums={"runsc": SUM, "containerd-shim-runsc-v1": SUM})
    base.update(args)
    return run_module(runsc_install, base)


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def test_username_password_and_headers_are_sent_and_never_shown(run_module, tmp_path, mirror):
    result, failed, _t = run(run_module, tmp_path, base_url="http://%s/release" % mirror, username="robot",
                             password="Opt-Password-61", headers={"X-JFrog-Art-Api": "Opt-Header-61"})
    assert failed and "download of http://%s/release/20240729.0/x86_64/runsc failed: HTTP 404" % mirror in result["msg"]
    assert Handler.seen[0]["authorization"] == basic("robot", "Opt-Password-61")
    assert Handler.seen[0]["x-jfrog-art-api"] == "Opt-Header-61"
    # the double of exit_json sees the result before Ansible's no_log masking: the options' own secrets are masked
    # there by Ansible (no_log), so only the shown msg and url are asserted here
    assert "Opt-Password-61" not in result["msg"] and "robot" in json.dumps(result["invocation"])


def test_a_password_file_loses_its_trailing_newline(run_module, tmp_path, mirror):
    pw = tmp_path / "pw"
    pw.write_text("File-Password-61\n")
    result, failed, _t = run(run_module, tmp_path, base_url="http://%s/release" % mirror, username="robot",
                             password_file=str(pw))
    assert failed and Handler.seen[0]["authorization"] == basic("robot", "File-Password-61")
    assert "File-Password-61" not in json.dumps(result)


def test_a_url_with_userinfo_works_is_never_shown_and_warns(run_module, tmp_path, mirror, monkeypatch):
    ansible_warnings._global_warnings.clear()  # pylint: disable=protected-access
    # the warning goes into the module's result (not the controller's display, see test_one_exit.py)
    monkeypatch.setattr(ansible_internal, "is_controller", False, raising=False)
    result, failed, _t = run(run_module, tmp_path, base_url="http://u:Pr0xy@Tail-Url-61@%s/release" % mirror)
    assert failed and Handler.seen[0]["authorization"] == basic("u", "Pr0xy@Tail-Url-61")
    dumped = json.dumps(result)
    assert "Tail-Url-61" not in dumped and "Pr0xy" not in dumped
    assert "http://%s/release/20240729.0" % mirror in result["msg"]
    warned = " ".join(str(w) for w in ansible_warnings.get_warnings())
    assert "gvisor_mirror_username" in warned and "password_file" in warned and "Tail-Url-61" not in warned


def test_an_unreadable_password_file_is_named(run_module, tmp_path):
    result, failed, _t = run(run_module, tmp_path, base_url="https://mirror.example.com/release",
                             password_file=str(tmp_path / "missing"))
    assert failed and "cannot read the password file %s" % (tmp_path / "missing") in result["msg"]


def test_a_header_value_with_a_line_break_is_refused_naming_the_header_only(run_module, tmp_path, mirror):
    """A header value ending in a newline (a slurped file, a block scalar): Python's HTTP client would refuse it
    quoting the value ("Invalid header value b'...\\n'") - refused before any request, the header named, never
    its value (the review of issue 61)."""
    Handler.seen.clear()
    result, failed, _t = run(run_module, tmp_path, base_url="http://%s/release" % mirror,
                             headers={"X-JFrog-Art-Api": "Nl-Header-61\n"})
    assert failed and "mirror header X-JFrog-Art-Api needs a one-line value" in result["msg"], result
    assert "Nl-Header-61" not in json.dumps(result) and Handler.seen == []
