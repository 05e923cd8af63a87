# SPDX-License-Identifier: GPL-3.0-or-later
"""The npd role's small files in one module run (module_utils/_npd/install.py, the module nodefix.k8s.npd_files):
every guarantee of the file/template/copy/stat+assert tasks it replaces - check mode changes nothing and says what
would change, --diff per file, atomic writes through symlinks, owner kept, the mode asked for (or the file's own),
pruned backups, all or nothing, bad input refused before anything is written, the textfile directory named, the
tick's cache dropped only when a file the plugin reads changed. Real files in tmp_path."""

import os
import shutil
import time

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import install as npd_install
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import textfile as npd_textfile
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick
from ansible_collections.nodefix.k8s.tests.unit import conftest as unit

ENTRY = "#!/bin/bash\nexec python3 -IS \"$0.py\" \"$@\"\n"
CONFIG = '{\n    "min_severity": "medium"\n}\n'


class Module(object):
    """What _core/fileio needs of AnsibleModule: atomic_move, backup_local (its naming), check_mode, _diff."""

    def __init__(self, check_mode=False, diff=False, fail_on=None):
        self.check_mode = check_mode
        self._diff = diff
        self.fail_on = fail_on
        self.moves = []
        self.backups = 0

    def atomic_move(self, src, dest, unsafe_writes=False):
        assert unsafe_writes is False
        if self.fail_on is not None and dest == self.fail_on:
            raise OSError(28, "No space left on device")
        self.moves.append(dest)
        os.rename(src, dest)

    def backup_local(self, fn):
        # AnsibleModule.backup_local's name (<file>.<pid>.<YYYY-MM-DD@HH:MM:SS>~), a second apart each
        self.backups += 1
        stamp = time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime(1700000000 + self.backups))
        backup = "%s.%s.%s~" % (fn, os.getpid(), stamp)
        shutil.copy2(fn, backup)
        os.utime(backup, (1700000000 + self.backups, 1700000000 + self.backups))
        return backup


@pytest.fixture
def node(tmp_path):
    """A node: the textfile directory (node_exporter's), the cache with a tick result and looks, /etc."""
    (tmp_path / "textfile").mkdir()
    cache = tmp_path / "run" / "nodefix-npd"
    cache.mkdir(parents=True)
    (cache / "tick").write_text("nodefix-npd-tick 1\n")
    (cache / "looks").write_text("nodefix-npd-looks 1\n")
    (tmp_path / "etc").mkdir()
    return tmp_path


def params(node, **over):
    lib = str(node / "usr" / "local" / "lib" / "nodefix-npd")
    p = {
        "directories": [{"path": lib, "mode": "0755"}, {"path": str(node / "etc" / "nodefix"), "mode": "0755"}],
        "files": [
            {"path": lib + "/nodefix-npd", "content": ENTRY, "mode": "0755", "drop_cache": True},
            {"path": lib + "/nodefix-npd-nsenter", "content": "#!/bin/sh\n", "mode": "0755", "drop_cache": False},
            {"path": str(node / "etc" / "nodefix" / "npd.json"), "content": CONFIG, "mode": "0644", "drop_cache": True},
        ],
        "cache_dir": str(node / "run" / "nodefix-npd"),
        "textfile": str(node / "textfile" / "nodefix.prom"),
        "backup": False,
        "keep_backups": 3,
    }
    p.update(over)
    return p


def mode(path):
    return oct(os.stat(str(path)).st_mode & 0o7777)


def test_the_cache_files_are_the_ones_the_plugin_writes():
    assert npd_install.CACHE_FILES == (npd_tick.RESULTS, npd_textfile.LOOKS)


def test_a_first_run_makes_the_directories_writes_the_files_and_a_second_changes_nothing(node):
    result = npd_install.run(Module(), params(node))
    lib = node / "usr" / "local" / "lib" / "nodefix-npd"
    assert result["changed"] is True
    assert (lib / "nodefix-npd").read_text() == ENTRY and mode(lib / "nodefix-npd") == oct(0o755)
    assert (node / "etc" / "nodefix" / "npd.json").read_text() == CONFIG and mode(node / "etc" / "nodefix" / "npd.json") == oct(0o644)
    # the missing parents too, parents first, each with the mode asked for (not the umask's)
    assert result["created_directories"] == [str(node / "usr"), str(node / "usr" / "local"), str(node / "usr" / "local" / "lib"),
                                             str(lib), str(node / "etc" / "nodefix")]
    assert all(mode(p) == oct(0o755) for p in result["created_directories"])
    assert result["changed_files"] == [f["path"] for f in params(node)["files"]]
    assert result["cache_dropped"] == [str(node / "run" / "nodefix-npd" / "tick"), str(node / "run" / "nodefix-npd" / "looks")]
    assert not (node / "run" / "nodefix-npd" / "tick").exists() and not (node / "run" / "nodefix-npd" / "looks").exists()
    before = unit.snapshot(node)
    again = npd_install.run(Module(), params(node))
    assert again == {"changed": False, "changed_files": [], "created_directories": [], "changed_directories": [],
                     "cache_dropped": []}
    assert unit.snapshot(node) == before


def test_check_mode_changes_nothing_and_says_what_would_change(node):
    npd_install.run(Module(), params(node))
    (node / "run" / "nodefix-npd" / "tick").write_text("nodefix-npd-tick 1\n")
    wanted = params(node)
    wanted["files"][2]["content"] = CONFIG.replace("medium", "high")
    wanted["files"][1]["mode"] = "0750"
    wanted["directories"].append({"path": str(node / "etc" / "node-problem-detector"), "mode": "0755"})
    before = unit.snapshot(node)
    result = npd_install.run(Module(check_mode=True), wanted)
    assert unit.snapshot(node) == before
    assert result["changed"] is True
    assert result["changed_files"] == [wanted["files"][1]["path"], wanted["files"][2]["path"]]
    assert result["created_directories"] == [str(node / "etc" / "node-problem-detector")]
    assert result["cache_dropped"] == [str(node / "run" / "nodefix-npd" / "tick")]


def test_check_mode_on_a_new_node_writes_nothing(node):
    before = unit.snapshot(node)
    result = npd_install.run(Module(check_mode=True), params(node))
    assert unit.snapshot(node) == before and result["changed"] and len(result["changed_files"]) == 3


def test_diff_shows_each_file_before_and_after_and_each_directory(node):
    npd_install.run(Module(), params(node))
    wanted = params(node)
    wanted["files"][2]["content"] = CONFIG.replace("medium", "high")
    wanted["files"][0]["mode"] = "0700"
    wanted["directories"].append({"path": str(node / "etc" / "node-problem-detector"), "mode": "0755"})
    result = npd_install.run(Module(check_mode=True, diff=True), wanted)
    diff = result["diff"]
    assert isinstance(diff, list)
    assert {"before": {"path": str(node / "etc" / "node-problem-detector"), "state": "absent"},
            "after": {"path": str(node / "etc" / "node-problem-detector"), "state": "directory"}} in diff
    assert {"before": {"path": wanted["files"][0]["path"], "mode": "0755"},
            "after": {"path": wanted["files"][0]["path"], "mode": "0700"}} in diff
    text = [d for d in diff if d.get("before_header")]
    assert text == [{"before": CONFIG, "after": CONFIG.replace("medium", "high"),
                     "before_header": "%s (before)" % wanted["files"][2]["path"],
                     "after_header": "%s (after)" % wanted["files"][2]["path"]}]
    assert {"before": {"path": str(node / "run" / "nodefix-npd" / "tick"), "state": "file"},
            "after": {"path": str(node / "run" / "nodefix-npd" / "tick"), "state": "absent"}} not in diff  # dropped already
    # a new file's diff starts from nothing
    fresh = npd_install.run(Module(check_mode=True, diff=True), params(node / "textfile", textfile=""))
    firsts = [d for d in fresh["diff"] if d.get("before_header")]
    assert len(firsts) == 3 and all(d["before"] == "" for d in firsts)


def test_a_symlinked_file_is_written_through_its_link(node):
    npd_install.run(Module(), params(node))
    real = node / "srv" / "npd.json"
    real.parent.mkdir()
    real.write_text("{}\n")
    link = node / "etc" / "nodefix" / "npd.json"
    link.unlink()
    link.symlink_to(real)
    result = npd_install.run(Module(), params(node))
    assert link.is_symlink() and os.readlink(str(link)) == str(real)
    assert real.read_text() == CONFIG
    assert result["real_paths"] == {str(link): str(real)} and result["changed_files"] == [str(link)]


def test_a_dangling_link_is_refused_and_nothing_is_written(node):
    link = node / "etc" / "nodefix"
    link.mkdir()
    (link / "npd.json").symlink_to(node / "nowhere.json")
    before = unit.snapshot(node)
    with pytest.raises(npd_install.NpdFilesError, match="dangling"):
        npd_install.run(Module(), params(node))
    assert unit.snapshot(node) == before


def test_the_mode_asked_for_is_given_and_an_unasked_mode_and_the_owner_are_kept(node):
    npd_install.run(Module(), params(node))
    entry = node / "usr" / "local" / "lib" / "nodefix-npd" / "nodefix-npd"
    nsenter = node / "usr" / "local" / "lib" / "nodefix-npd" / "nodefix-npd-nsenter"
    config = node / "etc" / "nodefix" / "npd.json"
    # someone made the entry point non-executable: the mode asked for comes back, content unchanged
    os.chmod(str(entry), 0o644)
    # an existing file without a mode asked for keeps its own, and its owner, when its content changes
    os.chmod(str(config), 0o600)
    if os.getuid() == 0:
        os.chown(str(config), 1234, 1234)
    wanted = params(node)
    wanted["files"][2].update(content=CONFIG.replace("medium", "high"), mode=None)
    result = npd_install.run(Module(), wanted)
    assert mode(entry) == oct(0o755) and entry.read_text() == ENTRY
    assert mode(config) == oct(0o600) and config.read_text() == CONFIG.replace("medium", "high")
    if os.getuid() == 0:
        assert (os.stat(str(config)).st_uid, os.stat(str(config)).st_gid) == (1234, 1234)
    assert result["changed_files"] == [str(entry), str(config)] and mode(nsenter) == oct(0o755)


def test_an_existing_directory_is_given_its_mode(node):
    (node / "etc" / "nodefix").mkdir(mode=0o700)
    os.chmod(str(node / "etc" / "nodefix"), 0o700)
    result = npd_install.run(Module(), params(node))
    assert mode(node / "etc" / "nodefix") == oct(0o755)
    assert str(node / "etc" / "nodefix") in result["changed_directories"]
    assert str(node / "etc" / "nodefix") not in result["created_directories"]


def test_a_failure_part_way_takes_everything_back(node):
    npd_install.run(Module(), params(node))
    config = node / "etc" / "nodefix" / "npd.json"
    entry = node / "usr" / "local" / "lib" / "nodefix-npd" / "nodefix-npd"
    os.chmod(str(entry), 0o644)
    wanted = params(node)
    wanted["directories"].append({"path": str(node / "etc" / "node-problem-detector"), "mode": "0755"})
    wanted["files"][0]["content"] = ENTRY + "# new\n"
    wanted["files"].append({"path": str(node / "etc" / "node-problem-detector" / "monitor.json"), "content": "{}\n",
                            "mode": "0644", "drop_cache": False})
    wanted["files"][2]["content"] = CONFIG.replace("medium", "high")
    (node / "run" / "nodefix-npd" / "tick").write_text("kept\n")
    before = unit.snapshot(node)
    # the config is written after the entry point: the disk fills up there
    with pytest.raises(npd_install.NpdFilesError) as exc:
        npd_install.run(Module(fail_on=str(config)), wanted)
    assert "No space left on device" in exc.value.msg and "taken back" in exc.value.msg
    assert unit.snapshot(node) == before  # the entry point's bytes and mode, the new directory, the cache: all as they were
    assert not (node / "etc" / "node-problem-detector").exists()


@pytest.mark.parametrize("change,problem", [
    (lambda p: p["files"][0].update(path="usr/local/lib/nodefix-npd/nodefix-npd"), "is not an absolute path"),
    (lambda p: p["directories"][0].update(path="relative/dir"), "is not an absolute path"),
    (lambda p: p.update(cache_dir="run/nodefix-npd"), "cache_dir 'run/nodefix-npd' is not an absolute path"),
    (lambda p: p["files"].append(dict(p["files"][0])), "is listed twice"),
    (lambda p: p["files"][0].update(mode="rwx"), "mode must be an octal string"),
    (lambda p: p["files"][0].update(content=b"bytes"), "content must be text"),
    (lambda p: p["files"].append({"path": "/nonexistent-npd-dir/x.json", "content": "{}", "mode": "0644"}),
     "the directory /nonexistent-npd-dir of file /nonexistent-npd-dir/x.json does not exist and is not among"),
    (lambda p: p["directories"].append({"path": p["directories"][0]["path"], "mode": "0700"}),
     "listed twice with different modes"),
    (lambda p: p["directories"].append({"path": p["files"][0]["path"], "mode": "0755"}),
     "is also among the directories"),
])
def test_bad_input_is_refused_naming_the_problem_and_nothing_is_written(node, change, problem):
    wanted = params(node)
    change(wanted)
    before = unit.snapshot(node)
    with pytest.raises(npd_install.NpdFilesError) as exc:
        npd_install.run(Module(), wanted)
    assert problem in exc.value.msg and "nothing was written" in exc.value.msg, exc.value.msg
    assert unit.snapshot(node) == before


def test_a_missing_textfile_directory_names_node_exporters_flag_and_nothing_is_written(node):
    shutil.rmtree(str(node / "textfile"))
    before = unit.snapshot(node)
    for check_mode in (True, False):
        with pytest.raises(npd_install.NpdFilesError) as exc:
            npd_install.run(Module(check_mode=check_mode), params(node))
        msg = exc.value.msg
        assert str(node / "textfile") in msg and "--collector.textfile.directory" in msg and "npd_textfile" in msg
        assert "nothing was written" in msg
    assert unit.snapshot(node) == before


def test_a_textfile_not_named_nodefix_prom_is_refused_and_nothing_is_written(node):
    """Review D1: node_audit writes nodefix.prom; a second file of the same series beside it (nodefix-audit.prom)
    hides one or the other in node_exporter's export - the collection writes one file a node."""
    before = unit.snapshot(node)
    with pytest.raises(npd_install.NpdFilesError) as exc:
        npd_install.run(Module(), params(node, textfile=str(node / "textfile" / "nodefix-npd.prom")))
    assert "must be named nodefix.prom" in exc.value.msg and "nothing was written" in exc.value.msg
    assert unit.snapshot(node) == before


def test_the_cache_is_dropped_only_when_a_file_the_plugin_reads_changed(node):
    npd_install.run(Module(), params(node))
    cache = node / "run" / "nodefix-npd"
    (cache / "tick").write_text("t\n")
    (cache / "looks").write_text("l\n")
    # the nsenter wrapper is not read by the plugin (drop_cache false): the tick's result stays
    wanted = params(node)
    wanted["files"][1]["content"] = "#!/bin/sh\nexec true\n"
    result = npd_install.run(Module(), wanted)
    assert result["changed_files"] == [wanted["files"][1]["path"]] and result["cache_dropped"] == []
    assert (cache / "tick").exists() and (cache / "looks").exists()
    # a changed mode of the entry point is a change of a file the plugin reads
    os.chmod(wanted["files"][0]["path"], 0o700)
    result = npd_install.run(Module(), wanted)
    assert result["cache_dropped"] == [str(cache / "tick"), str(cache / "looks")] and not (cache / "tick").exists()
    # no cache_dir: nothing to drop
    wanted["files"][2]["content"] = CONFIG.replace("medium", "low")
    (cache / "tick").write_text("t\n")
    assert npd_install.run(Module(), dict(wanted, cache_dir=""))["cache_dropped"] == []
    assert (cache / "tick").exists()


def test_a_backup_keeps_the_mode_the_old_content_had(node):
    """Review: the mode was set before the write, so a 0600 file made 0644 left a 0644 backup of its old content."""
    npd_install.run(Module(), params(node))
    config = node / "etc" / "nodefix" / "npd.json"
    os.chmod(str(config), 0o600)
    wanted = params(node, backup=True)
    wanted["files"][2]["content"] = CONFIG.replace("medium", "high")
    result = npd_install.run(Module(), wanted)
    assert mode(config) == oct(0o644)
    assert mode(result["backup_files"][str(config)]) == oct(0o600)


def test_backups_are_made_when_asked_and_pruned(node):
    npd_install.run(Module(), params(node))
    module = Module()
    config = node / "etc" / "nodefix" / "npd.json"
    for n in range(4):
        wanted = params(node, backup=True, keep_backups=2)
        wanted["files"][2]["content"] = CONFIG.replace("medium", "v%d" % n)
        result = npd_install.run(module, wanted)
        assert os.path.exists(result["backup_files"][str(config)])
    assert len(core_fileio.backups_of(str(config))) == 2
    # without backup: none made
    wanted = params(node)
    wanted["files"][2]["content"] = CONFIG
    assert "backup_files" not in npd_install.run(module, wanted)
    with pytest.raises(npd_install.NpdFilesError, match="keep_backups must be 0 or more"):
        npd_install.run(Module(), params(node, keep_backups=-1))


def test_write_files_gives_each_new_file_its_own_mode(tmp_path):
    core_fileio.write_files(Module(), [(str(tmp_path / "a"), "a", "0700"), (str(tmp_path / "b"), "b"),
                                       (str(tmp_path / "c"), "c", None)], backup=False, mode="0640")
    assert [mode(tmp_path / n) for n in "abc"] == [oct(0o700), oct(0o640), oct(0o640)]


def test_make_directories_takes_back_its_own_steps_on_a_failure(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(core_fileio.FileSafetyError) as exc:
        core_fileio.make_directories([(str(tmp_path / "a" / "b"), "0755"), (str(tmp_path / "file" / "c"), "0755")])
    assert "is not a directory" in str(exc.value) and "taken back" in str(exc.value)
    assert sorted(os.listdir(str(tmp_path))) == ["file"]
