# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for nodefix.k8s.containerd_snapshot (real files in tmp_path).

The module replaces the eleven tasks of roles/containerd/tasks/snapshot.yml; the
layout it writes is the one roles/containerd/tasks/rollback.yml restores from."""

import hashlib
import json
import os
import stat
import time

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import containerd_snapshot
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import snapshot as containerd_snapshot_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.tests.badinput.conftest import snapshot as tree


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def node(tmp_path):
    """A node's containerd files (absolute paths under tmp_path) and a snapshot dir beside them."""
    usr = tmp_path / "usr/bin"
    usr.mkdir(parents=True)
    (usr / "containerd").write_bytes(b"containerd 1.6.20\n")
    (usr / "containerd").chmod(0o755)
    (usr / "ctr").write_bytes(b"ctr 1.6.20\n")
    (usr / "ctr").chmod(0o711)
    os.symlink("containerd", str(usr / "containerd-stress"))
    etc = tmp_path / "etc/containerd"
    etc.mkdir(parents=True)
    (etc / "config.toml").write_bytes(b"version = 2\n")
    (etc / "config.toml").chmod(0o600)
    files = [str(usr / "containerd"), str(usr / "ctr"), str(usr / "containerd-stress"),
             str(usr / "containerd-shim-runc-v1"), str(etc / "config.toml")]
    return {"files": files, "dir": str(tmp_path / "state/last-good"), "base": tmp_path}


def args(node, **extra):
    out = {"path": node["dir"], "files": node["files"], "version": "1.6.20", "binary": "/usr/bin/containerd",
           "daemon_reachable": True, "daemon_started": time.time() + 60}
    out.update(extra)
    return out


def test_first_snapshot_copies_files_keeps_modes_and_links(run_module, node):
    result, failed, _t = run_module(containerd_snapshot, args(node, daemon_reachable=False, daemon_started=None))
    assert not failed and result["changed"] and result["recorded"]
    assert result["reason"].startswith("first snapshot (no snapshot yet)")
    assert result["previous_version"] is None
    d = node["dir"]
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(d, "manifest.json")).st_mode) == 0o600
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    assert manifest == result["manifest"]
    assert manifest["version"] == "1.6.20" and manifest["binary"] == "/usr/bin/containerd"
    by_path = dict((e["path"], e) for e in manifest["files"])
    assert [e["path"] for e in manifest["files"]] == node["files"]
    containerd, ctr, stress, shim, cfg = node["files"]
    assert by_path[containerd] == {"path": containerd, "exists": True, "checksum": sha(b"containerd 1.6.20\n")}
    assert by_path[stress] == {"path": stress, "exists": True, "checksum": ""}
    assert by_path[shim] == {"path": shim, "exists": False, "checksum": ""}

    def copy(path):
        return os.path.join(d, "files") + path
    assert open(copy(containerd), "rb").read() == b"containerd 1.6.20\n"
    assert stat.S_IMODE(os.stat(copy(ctr)).st_mode) == 0o711
    assert stat.S_IMODE(os.stat(copy(cfg)).st_mode) == 0o600
    assert os.readlink(copy(stress)) == "containerd"
    assert not os.path.lexists(copy(shim))
    assert not os.path.lexists(d + ".new") and not os.path.lexists(d + ".old")


def test_unchanged_files_are_left_alone(run_module, node):
    run_module(containerd_snapshot, args(node))
    before = tree(node["base"] / "state")
    result, failed, _t = run_module(containerd_snapshot, args(node, daemon_reachable=False), diff=True)
    assert not failed and not result["changed"] and not result["recorded"]
    assert result["reason"] == "the files are the ones recorded"
    assert result["diff"]["before"] == result["diff"]["after"]
    assert tree(node["base"] / "state") == before


@pytest.mark.parametrize("extra,reason", [
    ({"daemon_started": time.time() - 3600}, "the files changed after containerd started (a restart is pending)"),
    ({"daemon_reachable": False}, "containerd does not answer: the files on disk are not known to be good"),
    ({"daemon_started": None}, "containerd's start time is unknown: the files on disk are not known to be good"),
], ids=["restart-pending", "not-answering", "not-running"])
def test_a_change_not_proven_good_is_not_recorded(run_module, node, extra, reason):
    run_module(containerd_snapshot, args(node))
    before = tree(node["base"] / "state")
    with open(node["files"][4], "ab") as fh:
        fh.write(b"# edited\n")
    result, failed, _t = run_module(containerd_snapshot, args(node, **extra))
    assert not failed and not result["changed"] and not result["recorded"]
    assert result["reason"] == reason
    assert result["previous_version"] == "1.6.20"
    assert result["manifest"]["files"] != result["files"]   # the role says so (snapshot.yml)
    assert tree(node["base"] / "state") == before


def test_a_change_the_healthy_daemon_started_on_replaces_the_snapshot(run_module, node):
    run_module(containerd_snapshot, args(node))
    os.unlink(node["files"][0])
    with open(node["files"][0], "wb") as fh:
        fh.write(b"containerd 1.7.27\n")
    result, failed, _t = run_module(containerd_snapshot, args(node, version="1.7.27"), diff=True)
    assert not failed and result["changed"] and result["recorded"]
    assert result["reason"] == "the files changed and the running containerd started on them"
    assert result["previous_version"] == "1.6.20"
    assert '"version": "1.6.20"' in result["diff"]["before"] and '"version": "1.7.27"' in result["diff"]["after"]
    d = node["dir"]
    assert open(os.path.join(d, "files") + node["files"][0], "rb").read() == b"containerd 1.7.27\n"
    assert json.load(open(os.path.join(d, "manifest.json")))["version"] == "1.7.27"
    assert not os.path.lexists(d + ".new") and not os.path.lexists(d + ".old")


def test_check_mode_says_it_would_record_and_writes_nothing(run_module, node):
    before = tree(node["base"])
    result, failed, _t = run_module(containerd_snapshot, args(node), check_mode=True, diff=True)
    assert not failed and result["changed"] and not result["recorded"]
    assert result["diff"]["before"] == "" and '"version": "1.6.20"' in result["diff"]["after"]
    assert tree(node["base"]) == before


def test_an_unreadable_manifest_is_replaced_by_a_first_snapshot(run_module, node):
    os.makedirs(node["dir"])
    with open(os.path.join(node["dir"], "manifest.json"), "w") as fh:
        fh.write("{not json")
    result, failed, _t = run_module(containerd_snapshot, args(node, daemon_reachable=False))
    assert not failed and result["recorded"]
    assert result["reason"].startswith("first snapshot (the manifest is not JSON")
    assert json.load(open(os.path.join(node["dir"], "manifest.json")))["version"] == "1.6.20"


def test_a_symlinked_snapshot_dir_is_written_through_the_link(run_module, node):
    real = node["base"] / "srv/last-good"
    real.parent.mkdir()
    os.makedirs(os.path.dirname(node["dir"]))
    os.symlink(str(real), node["dir"])
    result, failed, _t = run_module(containerd_snapshot, args(node))
    assert not failed and result["recorded"] and result["real_path"] == str(real)
    assert os.path.islink(node["dir"])
    assert os.path.isfile(str(real / "manifest.json"))


def test_a_copy_failing_part_way_keeps_the_previous_snapshot(run_module, node, monkeypatch):
    run_module(containerd_snapshot, args(node))
    before = tree(node["base"] / "state")
    with open(node["files"][4], "ab") as fh:
        fh.write(b"# edited\n")
    calls = []

    def copy2(src, dest):
        calls.append(src)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_copy2(src, dest)
    real_copy2 = containerd_snapshot_lib.shutil.copy2
    monkeypatch.setattr(containerd_snapshot_lib.shutil, "copy2", copy2)
    result, failed, _t = run_module(containerd_snapshot, args(node))
    assert failed and "No space left on device" in result["msg"]
    assert "the previous snapshot is unchanged" in result["msg"]
    assert tree(node["base"] / "state") == before


def test_a_failed_swap_puts_the_previous_snapshot_back(run_module, node, monkeypatch):
    run_module(containerd_snapshot, args(node))
    before = tree(node["base"] / "state")
    with open(node["files"][4], "ab") as fh:
        fh.write(b"# edited\n")
    real_rename = os.rename

    def rename(src, dest):
        if src.endswith(".new"):
            raise OSError(16, "Device or resource busy")
        return real_rename(src, dest)
    monkeypatch.setattr(containerd_snapshot_lib.os, "rename", rename)
    result, failed, _t = run_module(containerd_snapshot, args(node))
    assert failed and "putting the snapshot in place" in result["msg"] and "busy" in result["msg"]
    assert tree(node["base"] / "state") == before


def test_an_unreadable_state_file_fails_before_anything_is_written(run_module, node, monkeypatch):
    real_open = open

    def deny(path, *a, **kw):
        if path == node["files"][4]:
            raise IOError(13, "Permission denied")
        return real_open(path, *a, **kw)
    monkeypatch.setattr("builtins.open", deny)
    result, failed, _t = run_module(containerd_snapshot, args(node))
    assert failed and node["files"][4] in result["msg"] and "Permission denied" in result["msg"]
    assert not os.path.lexists(node["dir"]) and not os.path.lexists(node["dir"] + ".new")


def test_files_are_read_under_root_and_recorded_with_node_paths(node):
    base = str(node["base"])
    node_paths = ["/usr/bin/containerd", "/etc/containerd/config.toml", "/usr/bin/runc"]
    result = containerd_snapshot_lib.run(os.path.join(base, "snap"), node_paths, version="1.6.20", root=base)
    assert result["recorded"]
    assert [e["path"] for e in result["manifest"]["files"]] == node_paths
    assert [e["exists"] for e in result["manifest"]["files"]] == [True, True, False]
    assert open(os.path.join(base, "snap/files/usr/bin/containerd"), "rb").read() == b"containerd 1.6.20\n"


def test_state_files_read_in_one_pass(tmp_path):
    # what the last-good snapshot records, for every kind of path
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/containerd").write_bytes(b"ELF containerd")
    os.symlink("/usr/bin/containerd", str(tmp_path / "usr/bin/ctr"))
    os.symlink("/nowhere", str(tmp_path / "usr/bin/containerd-stress"))  # dangling: exists (lstat)
    (tmp_path / "etc").mkdir()
    paths = ["/usr/bin/containerd", "/usr/bin/ctr", "/usr/bin/containerd-stress", "/usr/bin/containerd-shim",
             "/etc"]
    got = containerd_snapshot_lib.read_state_files(str(tmp_path), paths)
    assert [e["path"] for e in got] == paths
    assert got[0]["exists"] and got[0]["checksum"] == hashlib.sha256(b"ELF containerd").hexdigest()
    assert got[0]["ctime"] == os.lstat(str(tmp_path / "usr/bin/containerd")).st_ctime
    # a symlink is not followed (no checksum, as stat without follow), a dangling one exists
    assert (got[1]["exists"], got[1]["checksum"]) == (True, "")
    assert (got[2]["exists"], got[2]["checksum"]) == (True, "")
    assert got[3] == {"path": "/usr/bin/containerd-shim", "exists": False, "checksum": "", "ctime": 0, "identity": None}
    assert (got[4]["exists"], got[4]["checksum"]) == (True, "")


def test_state_file_that_cannot_be_read_is_an_error_naming_it(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_text("version = 2\n")
    real_open = open

    def refuse(path, *args, **kwargs):
        if str(path).endswith("config.toml"):
            raise IOError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(NodefixError, match="cannot read /config.toml"):
        containerd_snapshot_lib.read_state_files(str(tmp_path), ["/config.toml"])


def unread_checksums(monkeypatch):
    """The paths read for a checksum from here on."""
    read = []
    real = containerd_snapshot_lib._sha256

    def counting(local, path):
        read.append(path)
        return real(local, path)

    monkeypatch.setattr(containerd_snapshot_lib, "_sha256", counting)
    return read


def test_a_file_the_manifest_vouches_for_is_not_read_again(tmp_path, monkeypatch):
    # containerd's ~100 MB of binaries were hashed at every run: ~10 s of emulation on the lab's VM node
    (tmp_path / "usr/bin").mkdir(parents=True)
    binary = tmp_path / "usr/bin/containerd"
    binary.write_bytes(b"ELF containerd v1")
    old = time.time() - 60
    os.utime(str(binary), (old, old))
    snap = str(tmp_path / "snap")
    first = containerd_snapshot_lib.run(snap, ["/usr/bin/containerd"], root=str(tmp_path))
    assert first["recorded"] and first["manifest"]["identity"]["/usr/bin/containerd"]
    read = unread_checksums(monkeypatch)
    # the manifest's own time is the recording's: move it past the racy window, as a later run finds it
    manifest_path = os.path.join(snap, "manifest.json")
    manifest = json.loads(open(manifest_path).read())
    manifest["recorded_at"] += 10
    open(manifest_path, "w").write(json.dumps(manifest))
    again = containerd_snapshot_lib.run(snap, ["/usr/bin/containerd"], root=str(tmp_path))
    assert read == [] and not again["changed"]
    assert again["files"] == first["files"]


def test_a_changed_file_is_read_whatever_its_mtime_says(tmp_path, monkeypatch):
    (tmp_path / "usr/bin").mkdir(parents=True)
    binary = tmp_path / "usr/bin/containerd"
    binary.write_bytes(b"ELF containerd v1")
    snap = str(tmp_path / "snap")
    containerd_snapshot_lib.run(snap, ["/usr/bin/containerd"], root=str(tmp_path))
    manifest_path = os.path.join(snap, "manifest.json")
    manifest = json.loads(open(manifest_path).read())
    manifest["recorded_at"] += 10
    open(manifest_path, "w").write(json.dumps(manifest))
    st = os.stat(str(binary))
    binary.write_bytes(b"ELF containerd v2")              # same size, the mtime put back: only the ctime moved
    os.utime(str(binary), ns=(st.st_atime_ns, st.st_mtime_ns))
    read = unread_checksums(monkeypatch)
    again = containerd_snapshot_lib.run(snap, ["/usr/bin/containerd"], root=str(tmp_path), daemon_reachable=False)
    assert read == ["/usr/bin/containerd"]
    assert again["files"][0]["checksum"] == hashlib.sha256(b"ELF containerd v2").hexdigest()
    assert not again["changed"] and "does not answer" in again["reason"]   # the change seen, not recorded


def test_a_file_changed_just_before_the_record_is_read_again(tmp_path, monkeypatch):
    # its ctime within RACY_SECONDS of the recording: a second write in the same clock tick would not move it
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/containerd").write_bytes(b"ELF containerd v1")
    snap = str(tmp_path / "snap")
    containerd_snapshot_lib.run(snap, ["/usr/bin/containerd"], root=str(tmp_path))
    read = unread_checksums(monkeypatch)
    containerd_snapshot_lib.run(snap, ["/usr/bin/containerd"], root=str(tmp_path))
    assert read == ["/usr/bin/containerd"]


def test_a_manifest_without_identities_or_with_odd_ones_vouches_for_nothing():
    files = [{"path": "/usr/bin/containerd", "exists": True, "checksum": "ab"}]
    assert containerd_snapshot_lib.known_checksums({"files": files}) == {}
    assert containerd_snapshot_lib.known_checksums({"files": files, "recorded_at": "x",
                                                    "identity": {"/usr/bin/containerd": [1, 2, 3, 4, 5]}}) == {}
    assert containerd_snapshot_lib.known_checksums({"files": files, "recorded_at": 100.0,
                                                    "identity": {"/usr/bin/containerd": [1, 2, 3]}}) == {}
    assert containerd_snapshot_lib.known_checksums({"files": files, "recorded_at": 100.0,
                                                    "identity": {"/usr/bin/containerd": [1, 2, 3, 4, 5]}}) == \
        {"/usr/bin/containerd": ([1, 2, 3, 4, 5], "ab")}
