# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.npd_files as Ansible runs it (its main(), the real AnsibleModule's atomic_move and backup): the
result the npd role reads, check mode and --diff through the module's options, and a failure that leaves through the
one exit naming the problem. The guarantees themselves: tests/unit/plugins/module_utils/test_npd_install.py."""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import npd_files
from ansible_collections.nodefix.k8s.tests.unit import conftest as unit


def args(tmp_path, **over):
    lib = str(tmp_path / "lib" / "nodefix-npd")
    a = {
        "directories": [{"path": lib}],
        "files": [{"path": lib + "/nodefix-npd", "content": "#!/bin/bash\n", "mode": "0755", "drop_cache": True},
                  {"path": str(tmp_path / "units" / "nodefix-npd-textfile.timer"), "content": "[Timer]\n",
                   "mode": "0644"}],
        "cache_dir": str(tmp_path / "cache"),
    }
    a.update(over)
    return a


def test_writes_reports_and_is_idempotent(run_module, tmp_path):
    (tmp_path / "units").mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tick").write_text("t\n")
    result, failed, _t = run_module(npd_files, args(tmp_path))
    assert not failed and result["changed"]
    lib = tmp_path / "lib" / "nodefix-npd"
    assert (lib / "nodefix-npd").read_text() == "#!/bin/bash\n"
    assert oct(os.stat(str(lib / "nodefix-npd")).st_mode & 0o7777) == oct(0o755)
    assert oct(os.stat(str(lib)).st_mode & 0o7777) == oct(0o755)  # the directory's default mode
    assert result["changed_directories"] == [str(lib)]
    assert result["changed_files"] == [str(lib / "nodefix-npd"), str(tmp_path / "units" / "nodefix-npd-textfile.timer")]
    assert result["cache_dropped"] == [str(tmp_path / "cache" / "tick")] and not (tmp_path / "cache" / "tick").exists()
    again, failed, _t = run_module(npd_files, args(tmp_path))
    assert not failed and not again["changed"] and again["changed_files"] == []


def test_check_mode_with_diff_writes_nothing(run_module, tmp_path):
    (tmp_path / "units").mkdir()
    result, failed, _t = run_module(npd_files, args(tmp_path), check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert not (tmp_path / "lib").exists() and os.listdir(str(tmp_path / "units")) == []
    assert isinstance(result["diff"], list) and len(result["diff"]) == 4  # lib, lib/nodefix-npd, and the two files
    assert [d["after"] for d in result["diff"] if "after_header" in d] == ["#!/bin/bash\n", "[Timer]\n"]


def test_bad_input_fails_naming_it_and_writes_nothing(run_module, tmp_path):
    (tmp_path / "units").mkdir()
    result, failed, _t = run_module(npd_files, args(tmp_path, textfile=str(tmp_path / "node-exporter" / "nodefix.prom")))
    assert failed
    assert "--collector.textfile.directory" in result["msg"] and "nothing was written" in result["msg"]
    assert result["path"] == str(tmp_path / "node-exporter")
    assert not (tmp_path / "lib").exists()


@pytest.mark.parametrize("mode, problem", [(755, "the number 755"), (0o755, "the number 493"), (4095, "the number")])
def test_a_number_for_mode_is_refused(run_module, tmp_path, mode, problem):
    # YAML's 755 is 0o1363 (sticky, -wxrw--wx): it used to be given to the directory and the file as asked
    (tmp_path / "units").mkdir()
    a = args(tmp_path)
    a["files"][0]["mode"] = mode
    result, failed, _t = run_module(npd_files, a)
    assert failed and problem in result["msg"] and "quoted octal string" in result["msg"]
    assert not (tmp_path / "lib").exists() and os.listdir(str(tmp_path / "units")) == []


@pytest.mark.parametrize("content, kind", [(None, "NoneType"), (5, "int")])
def test_content_that_is_not_text_is_refused(run_module, tmp_path, content, kind):
    # a null content (an undefined template result) used to be written as an empty entry point
    (tmp_path / "units").mkdir()
    a = args(tmp_path)
    a["files"][0]["content"] = content
    result, failed, _t = run_module(npd_files, a)
    assert failed and "content must be text, got %s" % kind in result["msg"]
    assert not (tmp_path / "lib").exists()


@pytest.mark.parametrize("spelling, problem", [("/../x", "'..' component"), ("/sub/../x", "'..' component"),
                                               ("/x/", "ends with '/'")])
def test_dot_dot_and_trailing_slash_are_refused(run_module, tmp_path, spelling, problem):
    # /t/../x used to write a file outside the directory it names, /t/x/ a file where a directory is spelled
    (tmp_path / "units").mkdir()
    before = unit.snapshot(tmp_path)
    a = args(tmp_path)
    a["files"][1]["path"] = str(tmp_path / "units") + spelling
    result, failed, _t = run_module(npd_files, a)
    assert failed and problem in result["msg"] and "nothing was written" in result["msg"]
    assert unit.snapshot(tmp_path) == before
    a = args(tmp_path, directories=[{"path": str(tmp_path / "lib") + "/../lib2"}])
    result, failed, _t = run_module(npd_files, a)
    assert failed and "'..' component" in result["msg"] and unit.snapshot(tmp_path) == before


def test_failure_on_the_third_of_five_names_it_and_leaves_no_backup(run_module, tmp_path, monkeypatch):
    from ansible.module_utils import basic
    (tmp_path / "units").mkdir()
    for name in ("a", "b", "c", "d"):
        (tmp_path / "units" / name).write_text("old " + name)
    for i in range(3):  # older backups: none may be pruned by a run that failed
        (tmp_path / "units" / ("a.1.2020-01-0%d@00:00:00~" % (i + 1))).write_text("older")
    before = unit.snapshot(tmp_path)
    real_move = basic.AnsibleModule.atomic_move
    third = str(tmp_path / "units" / "c")

    def move(self, src, dest, unsafe_writes=False):
        if dest == third:
            raise OSError(28, "No space left on device")
        return real_move(self, src, dest, unsafe_writes=unsafe_writes)

    monkeypatch.setattr(basic.AnsibleModule, "atomic_move", move)
    files = [{"path": str(tmp_path / "lib" / "nodefix-npd" / "e"), "content": "new e"}] + [
        {"path": str(tmp_path / "units" / name), "content": "new " + name, "mode": "0600"} for name in "abcd"]
    result, failed, _t = run_module(npd_files, args(tmp_path, files=files, backup=True, keep_backups=1))
    assert failed and third in result["msg"] and result["path"] == third
    assert "restored" in result["msg"] and "taken back" in result["msg"] and not result.get("changed")
    after = unit.snapshot(tmp_path)
    assert sorted(after) == sorted(before)
    assert after == before   # content, mode, owner, link targets


def test_a_cache_drop_that_fails_reports_the_change_made(run_module, tmp_path, monkeypatch):
    (tmp_path / "units").mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tick").write_text("t\n")
    real_unlink = os.unlink

    def unlink(path, *a, **kw):
        if path == str(tmp_path / "cache" / "tick"):
            raise OSError(13, "Permission denied")
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    result, failed, _t = run_module(npd_files, args(tmp_path))
    assert failed and "the files were written" in result["msg"]
    # the role's daemon-reload reads changed_files: a failure that changed the units says so
    assert result["changed"] is True
    assert str(tmp_path / "units" / "nodefix-npd-textfile.timer") in result["changed_files"]
    assert result["cache_dropped"] == [] and result["path"] == str(tmp_path / "cache" / "tick")


def test_a_huge_existing_file_is_not_read_whole(run_module, tmp_path, monkeypatch):
    from ansible_collections.nodefix.k8s.plugins.module_utils._npd import install as npd_install
    (tmp_path / "units").mkdir()
    huge = tmp_path / "units" / "nodefix-npd-textfile.timer"
    with open(str(huge), "wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    reads = []
    real_open = open

    def counting_open(path, mode="r", *a, **kw):
        fh = real_open(path, mode, *a, **kw)
        if path == str(huge) and "b" in mode:
            real_read = fh.read
            fh = _Reader(fh, real_read, reads)
        return fh

    monkeypatch.setattr(npd_install, "open", counting_open, raising=False)
    result, failed, _t = run_module(npd_files, args(tmp_path), check_mode=True, diff=True)
    assert not failed and str(huge) in result["changed_files"]
    assert max(reads) <= npd_install.MAX_DIFF_BYTES + 1
    assert "(67108864 bytes, not shown)" in [d["before"] for d in result["diff"] if "before_header" in d][1]


class _Reader(object):
    def __init__(self, fh, read, reads):
        self._fh, self._read, self._reads = fh, read, reads

    def read(self, n=-1):
        data = self._read(n)
        self._reads.append(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._fh.__exit__(*exc)
