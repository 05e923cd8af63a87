# SPDX-License-Identifier: GPL-3.0-or-later
"""containerd_config under hostile input: clear errors with an identical tree, or the right write."""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import containerd_config
from ansible_collections.nodefix.k8s.tests.badinput.conftest import read, refused, snapshot

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit", "fixtures", "containerd")
RUNSC = {"runsc": {"runtime_type": "io.containerd.runsc.v1",
                   "options": {"TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"}}}
CRI = '[plugins."io.containerd.grpc.v1.cri".containerd]'


def fixture_text(name="config-default-1.6.20.toml"):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


@pytest.fixture
def cfg(tmp_path):
    base = tmp_path / "node"
    (base / "etc/containerd").mkdir(parents=True)
    path = base / "etc/containerd/config.toml"
    path.write_text(fixture_text())
    return base, str(path)


def args(path, **kw):
    out = {"path": path, "validate": False}
    out.update(kw)
    return out


# ---- bad values: refused before anything is read or written --------------------------------------------

BAD_RUNTIMES = [
    ({"runsc": {"runtime_type": "io.containerd.runsc.v1", "options": {"ConfigPath": None}}}, ["options.ConfigPath", "null"]),
    ({"": {"runtime_type": "io.containerd.runc.v2"}}, ["runtime name ''"]),
    ({"run\nsc": {"runtime_type": "io.containerd.runc.v2"}}, ["runtime name", "not valid"]),
    ({'ru"nsc': {"runtime_type": "io.containerd.runc.v2"}}, ["runtime name", "not valid"]),
    ({"run sc": {"runtime_type": "io.containerd.runc.v2"}}, ["runtime name", "not valid"]),
    ({"runsc": ["io.containerd.runsc.v1"]}, ["runtimes.runsc must be a dict"]),
    ({"runsc": {"runtime_type": "io.containerd.runsc.v1", "options": "ConfigPath=/x"}}, ["runtimes.runsc.options must be a dict"]),
    ({"runsc": {"runtime_type": "io.containerd.runsc.v1", "options": {"Weight": 1.5}}}, ["options.Weight", "floating point"]),
    ({"runc": {"options": {"IoUid": -1}}}, ["options.IoUid", "4294967295"]),
    ({"runc": {"options": {"IoUid": 2 ** 32}}}, ["options.IoUid", "4294967295"]),
    ({"runc": {"options": {"IoGid": "root"}}}, ["options.IoGid", "4294967295"]),
    ({"runc": {"options": {"BinaryName": "/usr/bin/runc\n[evil]"}}}, ["options.BinaryName", "newline"]),
    ({"runc": {"options": {"Bad Key": "x"}}}, ["'Bad Key'", "not a valid option name"]),
    ({"runc": {"options": {"Nested": {"a": 1}}}}, ["options.Nested", "not a table"]),
    ({"runc": {"pod_annotations": {"a": "b"}}}, ["runtimes.runc.pod_annotations", "not a table"]),
    ({"runc": {"pod_annotations": ["ok", 3]}}, ["pod_annotations[1]", "must be a string"]),
    ({"runc": {"runtime_type": "io.containerd.runc.v2 --debug"}}, ["runtime_type", "not a runtime type"]),
    ({"runc": {"options": {"Weight": 2 ** 64}}}, ["options.Weight", "64-bit"]),
]


@pytest.mark.parametrize("runtimes,words", BAD_RUNTIMES, ids=[str(i) for i in range(len(BAD_RUNTIMES))])
def test_bad_runtime_values_are_refused(run_module, cfg, runtimes, words):
    base, path = cfg
    refused(run_module, containerd_config, args(path, runtimes=runtimes), base, words)


def test_negative_keep_backups_is_refused(run_module, cfg):
    base, path = cfg
    refused(run_module, containerd_config, args(path, runtimes=RUNSC, keep_backups=-1), base, ["keep_backups"])


# ---- files that cannot be edited safely -------------------------------------------------------------------

BAD_FILES = [
    ("version = 2\n" + CRI + "\n  runtimes.runc.runtime_type = \"io.containerd.runc.v2\"\n", RUNSC,
     ["cannot edit safely", "runtimes.runsc"]),
    ("version = 2\n" + CRI + "\n  runtimes = { runc = { runtime_type = \"io.containerd.runc.v2\" } }\n", RUNSC,
     ["cannot be edited safely", "Inline tables"]),
    ("version = 2\n[[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes]]\n", RUNSC, ["runtimes is not a table"]),
    ("version = 2\nplugins = 3\n", RUNSC, ["plugins is not a table"]),
    ("version = 7\n", RUNSC, ["unknown config schema version 7"]),
    ("version = 2\n[plugins\n", RUNSC, ["is not valid TOML"]),
    ("version = 2\nversion = 2\n", RUNSC, ["is not valid TOML"]),
    ("version = \"2\"\n", RUNSC, ["unknown config schema version"]),
]


@pytest.mark.parametrize("text,runtimes,words", BAD_FILES, ids=[str(i) for i in range(len(BAD_FILES))])
def test_layouts_it_cannot_edit_are_refused(run_module, cfg, text, runtimes, words):
    base, path = cfg
    with open(path, "w") as fh:
        fh.write(text)
    refused(run_module, containerd_config, args(path, runtimes=runtimes), base, words)


def test_dotted_systemd_cgroup_key_is_edited_in_place(run_module, cfg):
    base, path = cfg
    with open(path, "w") as fh:
        fh.write("version = 2\n" + CRI + "\n  runtimes.runc.options.SystemdCgroup = false\n  snapshotter = \"overlayfs\"\n")
    result, failed, _t = run_module(containerd_config, args(path, runc_systemd_cgroup=True))
    assert not failed and result["changed"] and result["runc_systemd_cgroup"] is True
    assert "runtimes.runc.options.SystemdCgroup = true" in read(path)
    assert "[runtimes" not in read(path)


def test_non_utf8_file_is_refused(run_module, cfg):
    base, path = cfg
    with open(path, "wb") as fh:
        fh.write(b"version = 2\n# caf\xe9\n")
    refused(run_module, containerd_config, args(path, runtimes=RUNSC), base, ["not UTF-8", "line 2"])


def test_oversized_file_is_refused_fast(run_module, cfg):
    base, path = cfg
    with open(path, "w") as fh:
        fh.write("version = 2\n" + ("# padding padding padding padding padding padding padding\n" * 200000))
    refused(run_module, containerd_config, args(path, runtimes=RUNSC), base, ["larger than 1048576 bytes"])


def test_directory_is_refused(run_module, cfg):
    base, path = cfg
    os.remove(path)
    os.mkdir(path)
    refused(run_module, containerd_config, args(path, runtimes=RUNSC), base, ["is a directory"])


def test_dangling_symlink_is_refused(run_module, cfg):
    base, path = cfg
    os.remove(path)
    os.symlink(str(base / "srv/missing.toml"), path)
    refused(run_module, containerd_config, args(path, runtimes=RUNSC), base, ["dangling symlink"])


def test_missing_directory_is_refused(run_module, cfg):
    base, path = cfg
    missing = str(base / "etc/nowhere/config.toml")
    refused(run_module, containerd_config, args(missing, runtimes=RUNSC, schema_version=2), base, ["does not exist"])


# ---- the right write --------------------------------------------------------------------------------------

@pytest.mark.parametrize("hops", [1, 2])
def test_symlinked_config_is_edited_through_the_link(run_module, cfg, hops):
    base, path = cfg
    (base / "srv").mkdir()
    target = base / "srv/containerd.toml"
    os.rename(path, str(target))
    link = str(target)
    for i in range(hops - 1):
        nxt = str(base / ("srv/hop%d.toml" % i))
        os.symlink(link, nxt)
        link = nxt
    os.symlink(link, path)
    result, failed, _t = run_module(containerd_config, args(path, runtimes=RUNSC))
    assert not failed and result["changed"] and result["real_path"] == str(target)
    assert os.path.islink(path) and os.readlink(path) == link
    assert "io.containerd.runsc.v1" in read(str(target))


def test_mode_and_owner_are_kept(run_module, cfg):
    base, path = cfg
    os.chmod(path, 0o600)
    os.chown(path, 1234, 2345)
    result, failed, _t = run_module(containerd_config, args(path, runtimes=RUNSC))
    assert not failed and result["changed"]
    st = os.stat(path)
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o600, 1234, 2345)


def test_check_mode_reports_and_writes_nothing_then_real_run_is_idempotent(run_module, cfg):
    base, path = cfg
    before = snapshot(base)
    result, failed, _t = run_module(containerd_config, args(path, runtimes=RUNSC), check_mode=True, diff=True)
    assert not failed and result["changed"] and "io.containerd.runsc.v1" in result["diff"]["after"]
    assert snapshot(base) == before
    first, failed, _t = run_module(containerd_config, args(path, runtimes=RUNSC))
    assert not failed and first["changed"]
    second, failed, _t = run_module(containerd_config, args(path, runtimes=RUNSC))
    assert not failed and second["changed"] is False


def test_backups_are_pruned(run_module, cfg):
    """Four backups of earlier runs (other pids, older), keep_backups=2: the newest old one and the new one stay."""
    base, path = cfg
    for n in range(4):
        old = "%s.%d.2026-01-0%d@00:00:00~" % (path, 100 + n, n + 1)
        with open(old, "w") as fh:
            fh.write("old %d\n" % n)
        os.utime(old, (1000 + n, 1000 + n))
    unrelated = path + ".dpkg-old"
    with open(unrelated, "w") as fh:
        fh.write("not a backup of ours\n")
    result, failed, _t = run_module(containerd_config, args(path, runtimes=RUNSC, keep_backups=2))
    assert not failed and result["changed"]
    left = sorted(n for n in os.listdir(os.path.dirname(path)) if n.startswith("config.toml."))
    assert left == sorted(["config.toml.103.2026-01-04@00:00:00~", os.path.basename(result["backup_file"]),
                           "config.toml.dpkg-old"])
