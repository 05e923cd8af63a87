# SPDX-License-Identifier: GPL-3.0-or-later
"""_core/fileio.write_files, the one writer of every module, with the real AnsibleModule's atomic_move and
backup_local: a failure part-way puts each file back whole (the same inode: bytes, mode, owner) and leaves no side
file; a new mode for an existing file lands with the write and its backup keeps the old one; a run killed (SIGKILL)
between two files leaves side files that the next write of the file removes, never those of a live run."""

import os
import signal
import subprocess
import sys

import pytest


from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import FileSafetyError
from ansible_collections.nodefix.k8s.tests.unit import conftest as unit
from ansible_collections.nodefix.k8s.tests.unit.plugins.module_utils.fileio_support import (
    fail_move_of, real_module, side_files)


@pytest.fixture
def module(monkeypatch):
    return real_module(monkeypatch)


def mode(path):
    return oct(os.stat(str(path)).st_mode & 0o7777)


def test_a_failure_on_the_second_file_puts_the_first_back_whole_and_leaves_no_side_file(module, tmp_path,
                                                                                        monkeypatch):
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("old a\n")
    os.chmod(str(first), 0o640)
    second.write_text("old b\n")
    inode = os.stat(str(first)).st_ino
    before = unit.snapshot(tmp_path)
    fail_move_of(module, monkeypatch, second)
    with pytest.raises(FileSafetyError) as failure:
        core_fileio.write_files(module, [(str(first), "new a\n"), (str(second), "new b\n")], backup=True)
    assert "writing %s failed" % second in failure.value.msg
    assert "every file already written was restored" in failure.value.msg
    assert unit.snapshot(tmp_path) == before            # bytes, modes, owners; no backup, no side file
    assert os.stat(str(first)).st_ino == inode          # the very file that was there, renamed back


def test_without_hard_links_the_old_bytes_and_mode_are_written_back(module, tmp_path, monkeypatch):
    first, second = tmp_path / "a.conf", tmp_path / "sub" / "b.conf"
    first.write_text("old a\n")
    os.chmod(str(first), 0o600)
    (tmp_path / "sub").mkdir()
    before = unit.snapshot(tmp_path)

    def no_link(src, dst):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    fail_move_of(module, monkeypatch, second, OSError(5, "Input/output error"))
    with pytest.raises(FileSafetyError):
        core_fileio.write_files(module, [(str(first), "new a\n", "0644"), (str(second), "b\n")],
                                set_modes_of_existing=True)
    assert unit.snapshot(tmp_path) == before            # 0600 again, not the 0644 of the write


def test_a_new_mode_lands_with_the_write_and_the_backup_keeps_the_old_one(module, tmp_path):
    config = tmp_path / "c.conf"
    config.write_text("secret=1\n")
    os.chmod(str(config), 0o600)
    backups = core_fileio.write_files(module, [(str(config), "secret=2\n", "0644")], backup=True,
                                      set_modes_of_existing=True)
    assert config.read_text() == "secret=2\n" and mode(config) == oct(0o644)
    backup = backups[str(config)]
    assert open(backup).read() == "secret=1\n" and mode(backup) == oct(0o600)
    assert side_files(tmp_path) == []


def test_without_the_flag_an_existing_file_keeps_its_mode(module, tmp_path):
    config = tmp_path / "c.conf"
    config.write_text("x\n")
    os.chmod(str(config), 0o600)
    core_fileio.write_files(module, [(str(config), "y\n", "0644")], backup=False)
    assert mode(config) == oct(0o600)


KILLED = r'''
import json, os, signal, sys
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio
basic._ANSIBLE_ARGS = to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": {"_ansible_remote_tmp": "/tmp"}}))
basic._ANSIBLE_PROFILE = "legacy"
module = basic.AnsibleModule(argument_spec={})
real = module.atomic_move
def move(src, dest, unsafe_writes=False):
    if dest.endswith("b.conf"):
        os.kill(os.getpid(), signal.SIGKILL)   # killed between the temp file and its move, the first file written
    return real(src, dest, unsafe_writes=unsafe_writes)
module.atomic_move = move
fileio.write_files(module, [(sys.argv[1], "new a\n"), (sys.argv[2], "new b\n")], backup=False)
'''


def test_the_side_files_of_a_killed_run_go_at_the_next_write_never_a_live_runs(module, tmp_path):
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("old a\n")
    second.write_text("old b\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    killed = subprocess.run([sys.executable, "-c", KILLED, str(first), str(second)], env=env, check=False,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = side_files(tmp_path)
    # the kept old a.conf and b.conf, and b.conf's temp file, named by the dead run's pid
    kinds = sorted(n.rsplit(".", 2)[0] for n in left)
    assert kinds == [".a.conf.nodefix-old", ".b.conf.nodefix-new", ".b.conf.nodefix-old"], left
    assert first.read_text() == "new a\n" and second.read_text() == "old b\n"   # where the kill left them
    # a live run's side file (this test's parent: a process that runs) and a name that is not ours stay
    live = tmp_path / (".b.conf.nodefix-new.%d.0a0b0c0d" % os.getppid())
    live.write_text("being written\n")
    other = tmp_path / ".b.conf.nodefix-new.x.y"
    other.write_text("not a side file\n")
    core_fileio.write_files(module, [(str(second), "fixed b\n")], backup=False)
    assert second.read_text() == "fixed b\n"
    assert sorted(side_files(tmp_path)) == sorted([n for n in left if n.startswith(".a.conf.")] +
                                                  [live.name, other.name])
    core_fileio.write_files(module, [(str(first), "fixed a\n")], backup=False)
    assert sorted(side_files(tmp_path)) == sorted([live.name, other.name])
