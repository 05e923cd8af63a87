# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's pipelined podman connection (lab/connection_plugins/nodefix_podman.py).

Every lab and molecule run goes through it, so a plugin that did not work would fail them all;
these tests pin what a broken one could still get wrong quietly: pipelining on, `podman exec
--interactive` only when Ansible sends stdin (a pipelined module), every other podman call
(mount, a plain exec) exactly as containers.podman.podman makes it, and the plugin's
documentation loadable by Ansible's loader (its options are read from it, not from the parent).
"""

import importlib.util
import json
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


# -- the fast path: the container's podman facts cached, runc exec ------------------------------

class FakePopen:
    """subprocess.Popen for the plugin: records argv and stdin, answers as told."""
    calls = []
    answer = (0, b"out", b"")

    def __init__(self, argv, **_kw):
        FakePopen.calls.append([a.decode() for a in argv])
        self.returncode = FakePopen.answer[0]

    def communicate(self, input=None):  # noqa: A002 (subprocess's own name)
        FakePopen.calls[-1].append(input)
        return FakePopen.answer[1], FakePopen.answer[2]


@pytest.fixture
def fast(tmp_path, monkeypatch):
    """A plugin instance whose cache and runc root are under tmp_path, its container's init
    process this test process (a real /proc entry with a real start time)."""
    module = load()
    monkeypatch.setattr(module, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(module, "RUNC_ROOT", str(tmp_path / "runc"))
    monkeypatch.setattr(module, "RUNC", "/usr/sbin/runc")
    monkeypatch.setattr(module, "FAST", True)
    monkeypatch.setattr(module.subprocess, "Popen", FakePopen)
    FakePopen.calls, FakePopen.answer = [], (0, b"out", b"")
    (tmp_path / "runc" / "cid").mkdir(parents=True)
    (tmp_path / "runc" / "cid" / "state.json").write_text("{}")
    (tmp_path / "mnt").mkdir()
    (tmp_path / "mnt" / "etc").mkdir()
    podman = []

    def parent(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        podman.append(cmd)
        if cmd[:1] == ["inspect"]:
            return 0, b"cid %d\n" % os.getpid(), b""
        if cmd == "mount":
            return 0, str(tmp_path / "mnt").encode() + b"\n", b""
        return 0, b"via podman", b""

    monkeypatch.setattr(PodmanConnection, "_podman", parent)
    instance = module.Connection.__new__(module.Connection)
    instance._container_id, instance.user, instance._connected, instance._fast = "node-a", None, False, None
    instance._mount_point = None
    return module, instance, podman, tmp_path


def test_the_first_task_looks_the_container_up_and_runs_through_runc(fast):
    module, instance, podman, tmp_path = fast
    rc, out, err = instance.exec_command("/bin/sh -c '/usr/bin/python3 && sleep 0'", in_data=b"module")
    assert (rc, out, err) == (0, b"out", b"")
    assert podman == [["inspect", "--format", "{{.Id}} {{.State.Pid}}"], "mount"]
    assert FakePopen.calls == [["/usr/sbin/runc", "--root", str(tmp_path / "runc"), "exec", "cid", "/bin/sh", "-c",
                                "/usr/bin/python3 && sleep 0", b"module"]]
    assert instance._mount_point == str(tmp_path / "mnt").encode()  # put_file/fetch_file append to it, as the parent's
    cached = json.loads((tmp_path / "cache" / "node-a.json").read_text())
    assert cached["id"] == "cid" and cached["pid"] == os.getpid() and cached["start"] == module.proc_start(os.getpid())


def test_the_next_task_needs_no_podman_at_all(fast):
    module, instance, podman, _tmp = fast
    instance.exec_command("true")
    second = module.Connection.__new__(module.Connection)
    second._container_id, second.user, second._connected, second._fast, second._mount_point = "node-a", None, False, None, None
    podman.clear()
    second.exec_command("true")
    assert podman == [] and FakePopen.calls[-1][3:5] == ["exec", "cid"]


def test_a_recreated_container_is_looked_up_again(fast):
    module, instance, podman, tmp_path = fast
    instance.exec_command("true")
    entry = tmp_path / "cache" / "node-a.json"
    entry.write_text(json.dumps(dict(json.loads(entry.read_text()), start=1)))  # another process now
    again = module.Connection.__new__(module.Connection)
    again._container_id, again.user, again._connected, again._fast, again._mount_point = "node-a", None, False, None, None
    podman.clear()
    again.exec_command("true")
    assert podman[0][0] == "inspect"


def test_a_runc_refusal_goes_through_podman_and_forgets_the_entry(fast):
    module, instance, podman, tmp_path = fast
    FakePopen.answer = (1, b"", b'time="2026-11-26T23:00:00Z" level=error msg="exec failed: container does not exist"\n')
    rc, out, _err = instance.exec_command("true")
    assert (rc, out) == (0, b"via podman") and podman[-1] == ["exec"]
    assert not (tmp_path / "cache" / "node-a.json").exists()


def test_a_command_that_fails_is_not_run_twice(fast):
    _module, instance, podman, _tmp = fast
    FakePopen.answer = (2, b"", b"sh: 1: nosuch: not found\n")
    rc, _out, err = instance.exec_command("nosuch")
    assert rc == 2 and err.startswith(b"sh:") and podman.count(["exec"]) == 0 and len(FakePopen.calls) == 1


@pytest.mark.parametrize("setting", ["user", "off", "no-runc"])
def test_a_remote_user_or_the_switch_keeps_podman(fast, monkeypatch, setting):
    module, instance, podman, _tmp = fast
    if setting == "user":
        instance.user = "nobody"
    else:
        monkeypatch.setattr(module, "FAST" if setting == "off" else "RUNC", False if setting == "off" else None)
    monkeypatch.setattr(PodmanConnection, "exec_command", lambda self, cmd, in_data=None, sudoable=False: (0, b"podman", b""))
    assert instance.exec_command("true") == (0, b"podman", b"") and FakePopen.calls == []


def test_put_and_fetch_go_through_the_cached_mount_point(fast, tmp_path):
    _module, instance, _podman, tmp = fast
    instance.exec_command("true")
    src = tmp_path / "src"
    src.write_text("payload")
    instance.put_file(str(src), "/etc/nodefix")
    assert (tmp / "mnt" / "etc" / "nodefix").read_text() == "payload"
    instance.fetch_file("/etc/nodefix", str(tmp_path / "back"))
    assert (tmp_path / "back").read_text() == "payload"


def test_a_container_runc_did_not_make_goes_through_podman_exec(fast, monkeypatch):
    # another OCI runtime: no runc state for the container; one podman inspect and one mount, then
    # the command through podman exec (nothing cached, no second mount)
    module, instance, podman, tmp_path = fast
    (tmp_path / "runc" / "cid" / "state.json").unlink()
    monkeypatch.setattr(PodmanConnection, "exec_command", lambda self, cmd, in_data=None, sudoable=False: (0, b"podman", b""))
    assert instance.exec_command("true") == (0, b"podman", b"")
    assert podman == [["inspect", "--format", "{{.Id}} {{.State.Pid}}"], "mount"] and FakePopen.calls == []
    assert instance._mount_point == str(tmp_path / "mnt").encode()
    assert not (tmp_path / "cache" / "node-a.json").exists()


def test_a_name_that_cannot_be_a_cache_file_goes_through_podman(fast, monkeypatch):
    _module, instance, podman, _tmp = fast
    instance._container_id = "../etc/passwd"
    monkeypatch.setattr(PodmanConnection, "exec_command", lambda self, cmd, in_data=None, sudoable=False: (0, b"podman", b""))
    assert instance.exec_command("true") == (0, b"podman", b"") and podman == ["mount"] and FakePopen.calls == []
