# SPDX-License-Identifier: GPL-3.0-or-later
"""_core/fileio.write_files at its edges, with the real AnsibleModule: AnsibleModule's own fail_json during a write
(ansible-core 2.17/2.18's atomic_move and backup_local, SELinux on every version), a failure after the move of the
file being written, the mode new bytes are visible under, one file listed twice, names that merely look like side
files, names near NAME_MAX, a symlinked target and a file with several hard links."""

import os
import stat
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


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def two_files(tmp_path):
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("old a\n")
    os.chmod(str(first), 0o640)
    second.write_text("old b\n")
    if os.geteuid() == 0:
        os.chown(str(first), 1234, 2345)   # an owner other than the writer's: the undo gives it back too
    return first, second


def test_a_fail_json_in_atomic_move_is_undone_like_any_failure(module, tmp_path, monkeypatch, capsys):
    # ansible-core 2.17/2.18: atomic_move reports a failed rename by fail_json (SystemExit), not an exception
    first, second = two_files(tmp_path)
    before = unit.snapshot(tmp_path)
    real_move = module.atomic_move

    def move(src, dest, unsafe_writes=False):
        if dest == str(second):
            module.fail_json(msg="Could not replace file: %s to %s: [Errno 28] No space left on device" % (src, dest))
        return real_move(src, dest, unsafe_writes=unsafe_writes)

    monkeypatch.setattr(module, "atomic_move", move)
    with pytest.raises(FileSafetyError) as failure:
        core_fileio.write_files(module, [(str(first), "new a\n"), (str(second), "new b\n")], backup=True)
    assert "Could not replace file" in failure.value.msg
    assert "every file already written was restored" in failure.value.msg
    assert unit.snapshot(tmp_path) == before
    assert capsys.readouterr().out == ""     # no result printed: the module's own failure is the one
    assert "fail_json" not in vars(module)   # the module's fail_json is its own again


def test_a_fail_json_in_backup_local_is_undone_like_any_failure(module, tmp_path, monkeypatch):
    first, second = two_files(tmp_path)
    before = unit.snapshot(tmp_path)
    real_backup = module.backup_local

    def backup(fn):
        if fn == str(second):
            module.fail_json(msg="Could not make backup of %s: [Errno 13] Permission denied" % fn)
        return real_backup(fn)

    monkeypatch.setattr(module, "backup_local", backup)
    with pytest.raises(FileSafetyError) as failure:
        core_fileio.write_files(module, [(str(first), "new a\n"), (str(second), "new b\n")], backup=True)
    assert "every file already written was restored" in failure.value.msg
    assert unit.snapshot(tmp_path) == before


@pytest.mark.parametrize("existed", [True, False])
def test_a_failure_after_the_move_puts_that_file_back_too(module, tmp_path, monkeypatch, existed):
    # atomic_move renamed, then failed (its SELinux context step, a chmod after it): the file is written
    first, second = two_files(tmp_path)
    if not existed:
        second.unlink()
    before = unit.snapshot(tmp_path)
    fail_move_of(module, monkeypatch, second, OSError(95, "Operation not supported"), after=True)
    with pytest.raises(FileSafetyError) as failure:
        core_fileio.write_files(module, [(str(first), "new a\n"), (str(second), "new b\n")], backup=False)
    assert "every file already written was restored" in failure.value.msg
    assert unit.snapshot(tmp_path) == before


def published_modes(module, monkeypatch, real):
    """The modes ``real`` has right after each atomic_move into it (before anything write_files does after it)."""
    seen = []
    real_move = module.atomic_move

    def move(src, dest, unsafe_writes=False):
        real_move(src, dest, unsafe_writes=unsafe_writes)
        if dest == real:
            seen.append(stat.S_IMODE(os.stat(dest).st_mode))

    monkeypatch.setattr(module, "atomic_move", move)
    return seen


def test_new_bytes_are_never_visible_under_the_old_wider_mode(module, tmp_path, monkeypatch):
    # npd_files: a file whose content and mode change (0644 -> 0600) - a kill right after the move must not leave
    # the new bytes world-readable
    config = tmp_path / "c.conf"
    config.write_text("token=public\n")
    os.chmod(str(config), 0o644)
    keep = tmp_path / "elsewhere"
    os.link(str(config), str(keep))     # another name of the old file: its mode stays what it was
    seen = published_modes(module, monkeypatch, str(config))
    backups = core_fileio.write_files(module, [(str(config), "token=secret\n", "0600")], backup=True,
                                      set_modes_of_existing=True)
    assert seen and all(m & ~0o600 == 0 for m in seen), [oct(m) for m in seen]
    assert stat.S_IMODE(os.stat(str(config)).st_mode) == 0o600 and config.read_text() == "token=secret\n"
    assert stat.S_IMODE(os.stat(backups[str(config)]).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(str(keep)).st_mode) == 0o644 and keep.read_text() == "token=public\n"
    assert side_files(tmp_path) == []


def test_a_narrowed_file_is_put_back_with_its_old_mode(module, tmp_path, monkeypatch):
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("old a\n")
    os.chmod(str(first), 0o644)
    second.write_text("old b\n")
    os.chmod(str(second), 0o644)
    before = unit.snapshot(tmp_path)
    fail_move_of(module, monkeypatch, second)
    with pytest.raises(FileSafetyError):
        core_fileio.write_files(module, [(str(first), "new a\n", "0600"), (str(second), "new b\n", "0600")],
                                set_modes_of_existing=True)
    assert unit.snapshot(tmp_path) == before   # 0644 again, both the written one and the one that failed


def test_a_new_file_is_never_visible_under_the_umask_mode(module, tmp_path, monkeypatch):
    secret = tmp_path / "new.key"
    seen = published_modes(module, monkeypatch, str(secret))
    old_umask = os.umask(0o022)
    try:
        core_fileio.write_files(module, [(str(secret), "key\n", "0600")], backup=False)
    finally:
        os.umask(old_umask)
    assert seen and all(m & ~0o600 == 0 for m in seen), [oct(m) for m in seen]
    assert stat.S_IMODE(os.stat(str(secret)).st_mode) == 0o600
    assert os.umask(old_umask) == old_umask   # the process's umask is its own again


def test_one_file_listed_twice_with_two_contents_is_refused_before_anything_is_written(module, tmp_path):
    first, second = two_files(tmp_path)
    before = unit.snapshot(tmp_path)
    with pytest.raises(FileSafetyError) as failure:
        core_fileio.write_files(module, [(str(first), "new a\n"), (str(second), "b1\n"), (str(second), "b2\n")],
                                backup=True)
    assert "listed twice" in failure.value.msg and "nothing was written" in failure.value.msg
    assert unit.snapshot(tmp_path) == before


def test_one_file_listed_twice_with_one_content_is_written_once(module, tmp_path, monkeypatch):
    first, second = two_files(tmp_path)
    before = unit.snapshot(tmp_path)
    fail_move_of(module, monkeypatch, first)
    with pytest.raises(FileSafetyError):
        core_fileio.write_files(module, [(str(second), "new b\n"), (str(second), "new b\n"), (str(first), "x\n")],
                                backup=True)
    assert unit.snapshot(tmp_path) == before   # no backup of b.conf left behind
    monkeypatch.undo()
    backups = core_fileio.write_files(module, [(str(second), "new b\n"), (str(second), "new b\n")], backup=True)
    assert open(backups[str(second)]).read() == "old b\n"
    assert len(core_fileio.backups_of(str(second))) == 1


def test_names_that_merely_look_like_side_files_stay(module, tmp_path):
    config = tmp_path / "a.conf"
    config.write_text("old\n")
    huge = tmp_path / ".a.conf.nodefix-new.99999999999999999999.0a0b0c0d"   # no pid is that large
    newline = tmp_path / (".a.conf.nodefix-old.%d.0a0b0c0d\n" % dead_pid())
    for path in (huge, newline):
        path.write_text("the user's\n")
    # a.conf.b's side file (a killed run's): a.conf's write leaves it, a.conf.b's removes it
    longer = tmp_path / (".a.conf.b.nodefix-old.%d.0a0b0c0d" % dead_pid())
    longer.write_text("old a.conf.b\n")
    core_fileio.write_files(module, [(str(config), "new\n")], backup=False)
    assert config.read_text() == "new\n"
    assert huge.read_text() == newline.read_text() == "the user's\n" and longer.exists()
    core_fileio.write_files(module, [(str(tmp_path / "a.conf.b"), "b\n")], backup=False)
    assert not longer.exists() and huge.exists() and newline.exists()


def test_a_long_name_is_written_and_its_leftovers_found(module, tmp_path, monkeypatch):
    # NAME_MAX 255: the old temp name (.<name>.nodefix.XXXXXXXX) fitted names up to 237 bytes
    first = tmp_path / ("k" * 230 + ".conf")
    second = tmp_path / "b.conf"
    first.write_text("old\n")
    second.write_text("old b\n")
    before = unit.snapshot(tmp_path)
    core_fileio.write_files(module, [(str(first), "new\n")], backup=False)
    assert first.read_text() == "new\n" and side_files(tmp_path) == []
    first.write_text("old\n")
    fail_move_of(module, monkeypatch, second)
    inode = os.stat(str(first)).st_ino
    with pytest.raises(FileSafetyError):
        core_fileio.write_files(module, [(str(first), "new\n"), (str(second), "new b\n")], backup=False)
    assert unit.snapshot(tmp_path) == before and os.stat(str(first)).st_ino == inode   # kept by a hard link
    # a killed run's side file of that name goes at the next write
    leftover = core_fileio._side_name(str(first), "old").replace(".%d." % os.getpid(), ".%d." % dead_pid())
    open(leftover, "w").close()
    monkeypatch.undo()
    core_fileio.write_files(module, [(str(first), "new\n")], backup=False)
    assert side_files(tmp_path) == []


def test_through_a_symlink_the_side_files_are_next_to_the_real_file_and_the_link_stays(module, tmp_path,
                                                                                       monkeypatch):
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "real" / "a.conf"
    target.write_text("old\n")
    link = tmp_path / "links" / "a.conf"
    link.symlink_to(target)
    made = []
    real_link = os.link

    def spy(src, dst, **kwargs):
        made.append(dst)
        return real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", spy)
    core_fileio.write_files(module, [(str(target), "new\n")], backup=True)
    assert made and all(os.path.dirname(p) == str(tmp_path / "real") for p in made)
    assert os.readlink(str(link)) == str(target) and link.read_text() == "new\n"
    assert os.listdir(str(tmp_path / "links")) == ["a.conf"]


def test_a_file_with_several_hard_links_gets_its_links_back_on_failure(module, tmp_path, monkeypatch):
    first, second = two_files(tmp_path)
    other = tmp_path / "other-name"
    os.link(str(first), str(other))
    fail_move_of(module, monkeypatch, second)
    with pytest.raises(FileSafetyError):
        core_fileio.write_files(module, [(str(first), "new a\n"), (str(second), "new b\n")], backup=True)
    assert os.stat(str(first)).st_ino == os.stat(str(other)).st_ino and os.stat(str(first)).st_nlink == 2
    assert side_files(tmp_path) == []


@pytest.mark.parametrize("err", [1, 18, 31])   # EPERM, EXDEV, EMLINK
def test_where_link_fails_the_old_bytes_mode_and_owner_are_written_back(module, tmp_path, monkeypatch, err):
    first, second = two_files(tmp_path)
    before = unit.snapshot(tmp_path)

    def no_link(src, dst, **kwargs):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "link", no_link)
    fail_move_of(module, monkeypatch, second)
    with pytest.raises(FileSafetyError) as failure:
        core_fileio.write_files(module, [(str(first), "new a\n", "0600"), (str(second), "new b\n")], backup=True,
                                set_modes_of_existing=True)
    assert "every file already written was restored" in failure.value.msg
    assert unit.snapshot(tmp_path) == before
