# SPDX-License-Identifier: GPL-3.0-or-later
"""runsc_config under hostile input: clear errors with an identical tree, or the right write."""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import runsc_config
from ansible_collections.nodefix.k8s.tests.badinput.conftest import read, refused, snapshot

GOOD = 'log_level = "info"\n\n[runsc_config]\n  platform = "systrap"\n'


@pytest.fixture
def toml(tmp_path):
    base = tmp_path / "node"
    (base / "etc/containerd").mkdir(parents=True)
    path = base / "etc/containerd/runsc.toml"
    path.write_text(GOOD)
    return base, str(path)


BAD_INPUT = [
    ({"runsc_config": {"systemd cgroup": "true"}}, ["'systemd cgroup'", "not a runsc flag name"]),
    ({"runsc_config": {'systemd-"cgroup': "true"}}, ["not a runsc flag name"]),
    ({"runsc_config": {"": "true"}}, ["runsc_config key ''"]),
    ({"runsc_config": {"debug\nx": "true"}}, ["not a runsc flag name"]),
    ({"runsc_config": {"--debug": "true"}}, ["'--debug'", "not a runsc flag name"]),
    ({"runsc_config": {"debug=true": "true"}}, ["not a runsc flag name"]),
    ({"runsc_config": {"debug": None}}, ["runsc_config.debug is null", "runsc_config_absent"]),
    ({"runsc_config": {"debug": ["a", "b"]}}, ["runsc_config.debug", "got list"]),
    ({"runsc_config": {"debug": {"a": 1}}}, ["runsc_config.debug", "got dict"]),
    ({"runsc_config": {"debug-log": "/tmp/x\n[evil]"}}, ["runsc_config.debug-log", "newline"]),
    ({"runsc_config": {"debug": 1.5}}, ["runsc_config.debug", "got float"]),
    ({"settings": {"io_uid": -1}}, ["settings.io_uid", "4294967295"]),
    ({"settings": {"io_uid": 2 ** 32}}, ["settings.io_uid", "4294967295"]),
    ({"settings": {"io_gid": "wheel"}}, ["settings.io_gid must be an integer"]),
    ({"settings": {"io_gid": True}}, ["settings.io_gid must be an integer"]),
    ({"settings": {"log_level": 3}}, ["settings.log_level must be a string"]),
    ({"settings": {"LogLevel": "debug"}}, ["'LogLevel'", "not a shim option name"]),
    ({"settings": {"log_path": None}}, ["settings.log_path must be a string"]),
    ({"settings": {"shim_cgroup": "a\nb"}}, ["settings.shim_cgroup", "newline"]),
    ({"settings": {"runsc_config": "x"}}, ["settings cannot hold runsc_config"]),
    ({"settings": {"extra": [1]}}, ["settings.extra must be a string, integer or boolean"]),
    ({"runsc_config": {"debug": "true"}, "runsc_config_absent": ["debug"]}, ["both wanted and absent"]),
    ({"runsc_config_absent": ["bad key"]}, ["runsc_config_absent", "not a runsc flag name"]),
    ({"settings_absent": ["runsc_config"]}, ["settings_absent", "not a shim option name"]),
    ({"runsc_config": {"debug": "true"}, "mode": ["0644"]}, ["mode must be an octal string"]),
    ({"runsc_config": {"debug": "true"}, "mode": "0999"}, ["mode must be an octal string"]),
    ({"runsc_config": {"debug": "true"}, "mode": "rw-r--r--"}, ["mode must be an octal string"]),
    ({"runsc_config": {"debug": "true"}, "keep_backups": -2}, ["keep_backups"]),
]


@pytest.mark.parametrize("extra,words", BAD_INPUT, ids=[str(i) for i in range(len(BAD_INPUT))])
def test_bad_input_is_refused(run_module, toml, extra, words):
    base, path = toml
    refused(run_module, runsc_config, dict({"path": path}, **extra), base, words)


BAD_FILES = [
    (b'[runsc_config]\n  systemd-cgroup = true\n', ["not quoted strings", "systemd-cgroup = true"]),
    (b'runsc_config = "x"\n', ["runsc_config is not a table"]),
    (b'[runsc_config\n', ["is not valid TOML"]),
    (b'[runsc_config]\na = "1"\na = "2"\n', ["is not valid TOML"]),
    (b'log_level = "caf\xe9"\n', ["not UTF-8", "line 1"]),
    (b'[log_level]\nx = "1"\n', ["top-level key log_level is a table"]),
]


@pytest.mark.parametrize("content,words", BAD_FILES, ids=[str(i) for i in range(len(BAD_FILES))])
def test_files_it_cannot_edit_are_refused(run_module, toml, content, words):
    base, path = toml
    with open(path, "wb") as fh:
        fh.write(content)
    refused(run_module, runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"},
                                       "settings": {"log_level": "debug"}}, base, words)


def test_dangling_symlink_is_refused(run_module, toml):
    base, path = toml
    os.remove(path)
    os.symlink(str(base / "nowhere.toml"), path)
    refused(run_module, runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"}}, base,
            ["dangling symlink"])


def test_missing_file_without_create_is_refused(run_module, toml):
    base, path = toml
    os.remove(path)
    refused(run_module, runsc_config, {"path": path, "create": False, "runsc_config": {"debug": "true"}}, base,
            ["does not exist and create=false"])


def test_missing_directory_is_refused(run_module, toml):
    base, _path = toml
    refused(run_module, runsc_config, {"path": str(base / "etc/nope/runsc.toml"), "runsc_config": {"debug": "true"}},
            base, ["directory", "does not exist"])


def test_oversized_file_is_refused(run_module, toml):
    base, path = toml
    with open(path, "w") as fh:
        fh.write("#" * (2 * 1024 * 1024) + "\n")
    refused(run_module, runsc_config, {"path": path, "runsc_config": {"debug": "true"}}, base, ["larger than"])


def test_symlinked_file_is_edited_through_the_link(run_module, toml):
    base, path = toml
    target = base / "srv/gvisor/runsc.toml"
    target.parent.mkdir(parents=True)
    os.rename(path, str(target))
    os.symlink("../../srv/gvisor/runsc.toml", path)
    result, failed, _t = run_module(runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": True}})
    assert not failed and result["changed"] and result["real_path"] == str(target)
    assert os.readlink(path) == "../../srv/gvisor/runsc.toml"
    assert 'systemd-cgroup = "true"' in read(str(target))


def test_mode_is_honoured_for_a_new_file(run_module, toml):
    base, path = toml
    os.remove(path)
    result, failed, _t = run_module(runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"},
                                                   "mode": "0640"})
    assert not failed and result["changed"]
    assert os.stat(path).st_mode & 0o7777 == 0o640


def test_existing_mode_and_owner_are_kept(run_module, toml):
    base, path = toml
    os.chmod(path, 0o600)
    os.chown(path, 4321, 4321)
    result, failed, _t = run_module(runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"},
                                                   "mode": "0644"})
    assert not failed and result["changed"]
    st = os.stat(path)
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, 4321, 4321)


def test_uid_bounds_accept_the_edges(run_module, toml):
    base, path = toml
    result, failed, _t = run_module(runsc_config, {"path": path, "settings": {"io_uid": 0, "io_gid": "4294967295"}})
    assert not failed and result["settings"]["io_uid"] == 0 and result["settings"]["io_gid"] == 4294967295


def test_dotted_table_keys_are_edited_in_place(run_module, toml):
    base, path = toml
    with open(path, "w") as fh:
        fh.write('runsc_config.platform = "systrap"\n')
    result, failed, _t = run_module(runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"}})
    assert not failed and result["changed"]
    import tomlkit
    assert tomlkit.parse(read(path)).unwrap() == {"runsc_config": {"platform": "systrap", "systemd-cgroup": "true"}}


def test_inline_table_is_refused(run_module, toml):
    base, path = toml
    with open(path, "w") as fh:
        fh.write('runsc_config = { platform = "systrap" }\n')
    refused(run_module, runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"}}, base,
            ["cannot be edited safely", "nothing changed"])


def test_check_mode_then_idempotent(run_module, toml):
    base, path = toml
    before = snapshot(base)
    args = {"path": path, "runsc_config": {"systemd-cgroup": "true"}, "backup": True}
    result, failed, _t = run_module(runsc_config, args, check_mode=True, diff=True)
    assert not failed and result["changed"] and 'systemd-cgroup = "true"' in result["diff"]["after"]
    assert snapshot(base) == before
    first, failed, _t = run_module(runsc_config, args)
    assert not failed and first["changed"] and os.path.exists(first["backup_file"])
    second, failed, _t = run_module(runsc_config, args)
    assert not failed and second["changed"] is False
