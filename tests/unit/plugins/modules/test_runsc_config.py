# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for nodefix.k8s.runsc_config (real files in tmp_path, hash-checked on failure)."""

import hashlib
import os

import pytest
import tomlkit

from ansible_collections.nodefix.k8s.plugins.modules import runsc_config

EXISTING = """# gVisor shim config, managed by hand until now
log_path = "/var/log/runsc/%ID%/shim.log"
log_level = "debug"

[runsc_config]
  # keep the debug log
  debug = "true"
  debug-log = "/var/log/runsc/%ID%/gvisor.%COMMAND%.log"
"""


def sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "runsc.toml"
    path.write_text(EXISTING)
    return str(path)


def test_adds_systemd_cgroup_quoted_and_keeps_comments(run_module, cfg):
    result, failed, _table = run_module(runsc_config, {"path": cfg, "runsc_config": {"systemd-cgroup": True}}, diff=True)
    assert not failed and result["changed"]
    text = open(cfg).read()
    assert text.startswith(EXISTING.rstrip("\n"))
    assert '  systemd-cgroup = "true"\n' in text
    assert "# keep the debug log" in text
    assert tomlkit.parse(text)["runsc_config"].unwrap() == {
        "debug": "true", "debug-log": "/var/log/runsc/%ID%/gvisor.%COMMAND%.log", "systemd-cgroup": "true"}
    assert result["changes"] == ['runsc_config.systemd-cgroup: (absent) -> "true"']
    assert result["diff"]["before"] == EXISTING and result["diff"]["after"] == text
    again, failed, _table = run_module(runsc_config, {"path": cfg, "runsc_config": {"systemd-cgroup": "true"}})
    assert not failed and not again["changed"]


def test_check_mode_changes_nothing(run_module, cfg):
    before = sha(cfg)
    result, failed, _table = run_module(runsc_config, {"path": cfg, "runsc_config": {"systemd-cgroup": "true"},
                                                       "settings": {"log_level": "info"}}, check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert 'log_level = "info"' in result["diff"]["after"]
    assert sha(cfg) == before


def test_creates_new_file(run_module, tmp_path):
    path = str(tmp_path / "new.toml")
    result, failed, _table = run_module(runsc_config, {"path": path, "runsc_config": {"systemd-cgroup": "true"},
                                                       "settings": {"io_uid": "0", "log_level": "info"}})
    assert not failed and result["changed"]
    data = tomlkit.parse(open(path).read()).unwrap()
    assert data == {"io_uid": 0, "log_level": "info", "runsc_config": {"systemd-cgroup": "true"}}
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_top_level_key_goes_above_tables(run_module, tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('[runsc_config]\n  debug = "true"\n')
    result, failed, _table = run_module(runsc_config, {"path": str(path), "settings": {"binary_name": "/usr/local/bin/runsc"}})
    assert not failed
    data = tomlkit.parse(path.read_text()).unwrap()
    assert data == {"binary_name": "/usr/local/bin/runsc", "runsc_config": {"debug": "true"}}


def test_absent_removes_flag_only(run_module, tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('# c\n[runsc_config]\n  systemd-cgroup = "true"\n  debug = "true"\n')
    result, failed, _table = run_module(runsc_config, {"path": str(path), "runsc_config_absent": ["systemd-cgroup"],
                                                       "backup": True})
    assert not failed and result["changed"]
    assert path.read_text() == '# c\n[runsc_config]\n  debug = "true"\n'
    assert os.path.exists(result["backup_file"])


def test_literal_string_value_is_accepted_unchanged(run_module, tmp_path):
    path = tmp_path / "r.toml"
    path.write_text("[runsc_config]\n  systemd-cgroup = 'true'\n")
    result, failed, _table = run_module(runsc_config, {"path": str(path), "runsc_config": {"systemd-cgroup": "true"}})
    assert not failed and not result["changed"]


@pytest.mark.parametrize("content,args,message", [
    ("[runsc_config]\n  systemd-cgroup = true\n", {"runsc_config": {"systemd-cgroup": "true"}},
     "systemd-cgroup = true"),
    ("[runsc_config]\n  debug = \"true\"\n  num-network-channels = 4\n", {"runsc_config": {"debug": "false"}},
     "num-network-channels = 4"),
    ("[runsc_config\n debug = \"true\"\n", {"runsc_config": {"debug": "true"}}, "is not valid TOML"),
    ("runsc_config = \"x\"\n", {"runsc_config": {"debug": "true"}}, "runsc_config is not a table"),
    ("log_level = \"debug\"\n", {"settings": {"io_uid": "root"}}, "settings.io_uid must be an integer"),
    ("log_level = \"debug\"\n", {"settings": {"log_level": 3}}, "settings.log_level must be a string"),
    ("log_level = \"debug\"\n", {"runsc_config": {"debug": "true"}, "runsc_config_absent": ["debug"]},
     "both wanted and absent"),
])
def test_bad_input_fails_and_changes_nothing(run_module, tmp_path, content, args, message):
    path = tmp_path / "runsc.toml"
    path.write_text(content)
    before = sha(str(path))
    payload = dict(args, path=str(path), backup=True)
    result, failed, _table = run_module(runsc_config, payload)
    assert failed and message in result["msg"]
    assert sha(str(path)) == before
    assert sorted(os.listdir(str(tmp_path))) == ["runsc.toml"]


def test_missing_file_without_create(run_module, tmp_path):
    result, failed, _table = run_module(runsc_config, {"path": str(tmp_path / "x.toml"), "create": False,
                                                       "runsc_config": {"debug": "true"}})
    assert failed and "does not exist" in result["msg"]
    assert not os.path.exists(str(tmp_path / "x.toml"))


def test_missing_directory(run_module, tmp_path):
    result, failed, _table = run_module(runsc_config, {"path": str(tmp_path / "no" / "x.toml"),
                                                       "runsc_config": {"debug": "true"}})
    assert failed and "directory" in result["msg"]


def test_new_file_is_created_even_without_entries(run_module, tmp_path):
    """containerd's ConfigPath must point at an existing file on a cgroupfs node too."""
    path = tmp_path / "runsc.toml"
    result, failed, _table = run_module(runsc_config, {"path": str(path), "runsc_config_absent": ["systemd-cgroup"]})
    assert not failed and result["changed"] and path.exists()
    assert tomlkit.parse(path.read_text()).unwrap() == {}
    again, failed, _table = run_module(runsc_config, {"path": str(path), "runsc_config_absent": ["systemd-cgroup"]})
    assert not failed and not again["changed"]
