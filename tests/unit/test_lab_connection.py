# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's pipelined podman connection (lab/connection_plugins/nodefix_podman.py).

Every lab and molecule run goes through it, so a plugin that did not work would fail them all;
these tests pin what a broken one could still get wrong quietly: pipelining on, `podman exec
--interactive` only when Ansible sends stdin (a pipelined module), every other podman call
(mount, a plain exec) exactly as containers.podman.podman makes it, and the plugin's
documentation loadable by Ansible's loader (its options are read from it, not from the parent).
"""

import importlib.util
import os

import pytest
from ansible import constants as C
from ansible.plugins.loader import connection_loader

from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "lab", "connection_plugins")


def load():
    spec = importlib.util.spec_from_file_location("nodefix_podman_under_test", os.path.join(PLUGINS, "nodefix_podman.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def conn(monkeypatch):
    calls = []

    def parent(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        calls.append((cmd, cmd_args, in_data, use_container_id))
        return 0, b"", b""

    monkeypatch.setattr(PodmanConnection, "_podman", parent)
    module = load()
    instance = module.Connection.__new__(module.Connection)  # no play context needed for _podman
    return instance, calls


def test_pipelining_is_on():
    module = load()
    assert module.Connection.has_pipelining is True
    assert PodmanConnection.has_pipelining is False  # why the plugin exists


def test_exec_with_stdin_is_interactive(conn):
    instance, calls = conn
    instance._podman(["exec"], ["/bin/sh", "-c", "/usr/bin/python3 && sleep 0"], b"payload")
    assert calls == [(["exec", "--interactive"], ["/bin/sh", "-c", "/usr/bin/python3 && sleep 0"], b"payload", True)]


def test_exec_with_user_keeps_the_user(conn):
    instance, calls = conn
    instance._podman(["exec", "--user", "root"], ["true"], b"x")
    assert calls[0][0] == ["exec", "--interactive", "--user", "root"]


@pytest.mark.parametrize("cmd,in_data", [(["exec"], None), ("mount", None), ("umount", None)])
def test_other_calls_are_untouched(conn, cmd, in_data):
    instance, calls = conn
    instance._podman(cmd, ["true"], in_data)
    assert calls == [(cmd, ["true"], in_data, True)]


def test_ansible_loads_it_with_pipelining_option():
    connection_loader.add_directory(PLUGINS)
    plugin = connection_loader.get("nodefix_podman", class_only=True)
    assert plugin is not None and plugin.transport == "nodefix_podman"
    defs = C.config.get_configuration_definitions("connection", "nodefix_podman")
    assert defs["pipelining"]["default"] is True
    assert {"remote_addr", "remote_user", "podman_executable", "podman_extra_args"} <= set(defs)
