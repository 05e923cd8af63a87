# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for nodefix.k8s.containerd_config (real default configs as fixtures).

containerd's ``config dump`` is replayed from recorded real outputs
(config-dump-*.toml); test_containerd_real.py runs the real binaries.
"""

import hashlib
import os
import shutil

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import containerd_config

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "containerd")
BIN = "/usr/bin/containerd"
RUNSC = {
    "runsc": {
        "runtime_type": "io.containerd.runsc.v1",
        "options": {"TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"},
    }
}


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.fixture
def conf(tmp_path):
    def _make(name):
        path = tmp_path / "etc" / "containerd" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(FIX, name), str(path))
        return str(path)
    return _make


def dump_cmd(out, rc=0, err=""):
    return {"argv": [BIN, "--config"], "rc": rc, "out": out, "err": err}


def test_registers_runsc_and_systemd_cgroup_with_validation_backup_and_diff(run_module, conf):
    path = conf("config-default-1.6.20.toml")
    before = fixture("config-default-1.6.20.toml")
    result, failed, table = run_module(containerd_config, {"path": path, "runtimes": RUNSC, "runc_systemd_cgroup": True},
                                       commands=[dump_cmd(fixture("config-dump-1.6.20-runsc-systemd.toml"))],
                                       diff=True, bins={"containerd": BIN})
    assert not failed, result
    assert result["changed"] and result["validated"] and result["schema_version"] == 2
    # validation ran on a temporary candidate next to the file, not on the file itself
    candidate = table.calls[0][2]
    assert os.path.dirname(candidate) == os.path.dirname(path) and candidate != path
    assert not os.path.exists(candidate)
    after = open(path).read()
    assert 'ConfigPath = "/etc/containerd/runsc.toml"' in after and "SystemdCgroup = true" in after
    assert result["diff"]["before"] == before and result["diff"]["after"] == after
    assert open(result["backup_file"]).read() == before
    assert {r["name"] for r in result["runtimes"]} == {"runc", "runsc"}
    assert result["runc_systemd_cgroup"] is True
    # second run: nothing to do, no command at all
    result2, failed2, table2 = run_module(containerd_config, {"path": path, "runtimes": RUNSC, "runc_systemd_cgroup": True},
                                          bins={"containerd": BIN})
    assert not failed2 and not result2["changed"] and table2.calls == []


def test_check_mode_changes_nothing(run_module, conf, tmp_path):
    path = conf("config-default-2.1.9.toml")
    digest = sha(path)
    result, failed, table = run_module(containerd_config, {"path": path, "runtimes": RUNSC, "runc_systemd_cgroup": True},
                                       commands=[dump_cmd(fixture("config-dump-2.1.9-runsc-systemd.toml"))],
                                       check_mode=True, diff=True, bins={"containerd": BIN})
    assert not failed and result["changed"]
    assert sha(path) == digest
    assert os.listdir(os.path.dirname(path)) == ["config.toml"]
    assert "runsc" in result["diff"]["after"] and "backup_file" not in result


def test_validation_rejects_keeps_file(run_module, conf):
    path = conf("config-default-1.7.24.toml")
    digest = sha(path)
    result, failed, dummy = run_module(containerd_config, {"path": path, "runtimes": RUNSC},
                                       commands=[dump_cmd("", rc=1, err="containerd: failed to load TOML: (2, 2): unexpected token")],
                                       bins={"containerd": BIN})
    assert failed and "rejects the edited config" in result["msg"] and "unexpected token" in result["msg"]
    assert sha(path) == digest
    assert os.listdir(os.path.dirname(path)) == ["config.toml"]


def test_validation_detects_ignored_entries(run_module, conf):
    # a v1 file under containerd 2.x: loads fine, but the CRI plugin ignores plugins.cri
    path = conf("config-v1-handwritten.toml")
    digest = sha(path)
    result, failed, dummy = run_module(containerd_config, {"path": path, "runtimes": RUNSC},
                                       commands=[dump_cmd(fixture("config-default-2.1.9.toml"))], bins={"containerd": BIN})
    assert failed and "does not apply it" in result["msg"]
    assert result["problems"] == ["runtime runsc missing from config dump"]
    assert sha(path) == digest


@pytest.mark.parametrize("content, message", [
    ("version = 2\n[plugins\n", "is not valid TOML"),
    ("version = 5\n", "unknown config schema version 5"),
    ("version = 'two'\n", "unknown config schema version"),
    (b"version = 2\n# \xff\xfe\n", "not UTF-8"),
])
def test_bad_input_fails_and_changes_nothing(run_module, tmp_path, content, message):
    path = tmp_path / "config.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    digest = sha(str(path))
    result, failed, table = run_module(containerd_config, {"path": str(path), "runtimes": RUNSC, "runc_systemd_cgroup": True},
                                       bins={"containerd": BIN})
    assert failed and message in result["msg"]
    assert sha(str(path)) == digest and table.calls == []
    assert os.listdir(str(tmp_path)) == ["config.toml"]


def test_unreadable_path(run_module, tmp_path):
    path = tmp_path / "config.toml"
    path.mkdir()
    result, failed, dummy = run_module(containerd_config, {"path": str(path), "runtimes": RUNSC}, bins={"containerd": BIN})
    assert failed and "is a directory" in result["msg"]


def test_unreadable_file_permission(run_module, tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text(fixture("config-default-1.6.20.toml"))
    real_open = open

    def fake_open(name, *args, **kwargs):
        if str(name) == str(path):
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    result, failed, dummy = run_module(containerd_config, {"path": str(path), "runtimes": RUNSC}, bins={"containerd": BIN})
    assert failed and "cannot read" in result["msg"] and "Permission denied" in result["msg"]


def test_refuses_schema_mismatch(run_module, conf):
    path = conf("config-default-1.6.20.toml")
    digest = sha(path)
    result, failed, dummy = run_module(containerd_config, {"path": path, "runtimes": RUNSC, "schema_version": 3, "validate": False})
    assert failed and "refusing to mix" in result["msg"]
    assert sha(path) == digest


def test_missing_binary_with_validation(run_module, conf):
    path = conf("config-default-1.6.20.toml")
    result, failed, dummy = run_module(containerd_config, {"path": path, "runtimes": RUNSC}, bins={})
    assert failed and "not found" in result["msg"]


def test_new_file_schema_from_binary_version(run_module, tmp_path):
    path = tmp_path / "config.toml"
    result, failed, dummy = run_module(containerd_config, {"path": str(path), "runc_systemd_cgroup": True, "validate": False},
                                       commands=[{"argv": [BIN, "--version"], "out": fixture("containerd-version-2.1.9.txt")}],
                                       bins={"containerd": BIN})
    assert not failed and result["changed"] and result["schema_version"] == 3
    text = path.read_text()
    assert text.startswith("version = 3\n") and "SystemdCgroup = true" in text
    assert oct(os.stat(str(path)).st_mode & 0o777) == "0o644"


def test_failing_version_command_is_reported_with_rc_and_output(run_module, tmp_path):
    # Runner raises CommandError; the module turns it into fail_json with rc, stdout, stderr
    path = tmp_path / "config.toml"
    result, failed, dummy = run_module(containerd_config, {"path": str(path), "runc_systemd_cgroup": True, "validate": False},
                                       commands=[{"argv": [BIN, "--version"], "rc": 126, "err": "exec format error"}],
                                       bins={"containerd": BIN})
    assert failed and result["rc"] == 126 and result["stderr"] == "exec format error"
    assert result["cmd"] == [BIN, "--version"] and "Command failed" in result["msg"]
    assert not path.exists()


def test_new_file_without_schema_fails(run_module, tmp_path):
    result, failed, dummy = run_module(containerd_config, {"path": str(tmp_path / "config.toml"), "runc_systemd_cgroup": True, "validate": False}, bins={})
    assert failed and "no schema version" in result["msg"]
    assert not (tmp_path / "config.toml").exists()


def test_bad_runtime_spec(run_module, conf):
    path = conf("config-default-1.6.20.toml")
    result, failed, dummy = run_module(containerd_config, {"path": path, "runtimes": {"runsc": "io.containerd.runsc.v1"}, "validate": False})
    assert failed and "must be a dict" in result["msg"]
    result, failed, dummy = run_module(containerd_config, {"path": path, "runtimes": {"runsc": {"options": ["x"]}}, "validate": False})
    assert failed and "options must be a dict" in result["msg"]


def test_bad_argument_type(run_module, conf):
    path = conf("config-default-1.6.20.toml")
    result, failed, dummy = run_module(containerd_config, {"path": path, "schema_version": 7})
    assert failed and "schema_version" in result["msg"]
