# SPDX-License-Identifier: GPL-3.0-or-later
"""The node-problem-detector plugin keeps binaries' ``--version`` answers between ticks (module_utils/_npd/versions.py)
only while it can prove the binary is the same file: a binary replaced, rewritten in place or retouched is asked
again (a cache keyed by the path alone fails these), a script's or an incomplete answer is never kept, and a
versions file that is symlinked, open to others, of another boot, cut short or older than an hour is not trusted."""

import os
import time

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import SubprocessRunner
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import versions as npd_versions

ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 57


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A cache directory as the plugin makes it, an ELF "binary" and a runner that counts what it starts (the
    binary is never executed: SubprocessRunner.run answers as the binary at that moment would)."""
    cache = tmp_path / "run" / "nodefix-npd"
    cache.mkdir(parents=True, mode=0o700)
    binary = tmp_path / "bin" / "runc"
    binary.parent.mkdir()
    binary.write_bytes(ELF + b"version 1.1.12")
    binary.chmod(0o755)
    started = []

    def run(self, argv, check=True, data=None, msg=None):
        started.append(list(argv))
        if not os.path.isfile(argv[0]):
            return 127, "", "%s: not found" % argv[0]
        with open(argv[0], "rb") as fh:
            body = fh.read()
        if b"rc=3" in body:
            return 3, "", "broken"
        return 0, "runc %s\n" % body.rsplit(b"version ", 1)[-1].decode(), ""
    monkeypatch.setattr(SubprocessRunner, "run", run)
    return {"cache": str(cache), "binary": str(binary), "started": started}


def tick(node, argv=None):
    """One tick's look: a new TickRunner asking the binary's version (twice, as two detectors may), the file saved."""
    versions = npd_versions.VersionCache(node["cache"])
    runner = npd_plugin.TickRunner(deadline=time.monotonic() + 30, versions=versions)
    answers = [runner.run(argv or [node["binary"], "--version"], check=False) for _i in range(2)]
    versions.save()
    assert answers[0] == answers[1]
    return answers[0]


def test_an_answer_is_kept_between_ticks_while_the_binary_is_the_same_file(node):
    assert tick(node) == (0, "runc 1.1.12\n", "")
    assert tick(node) == (0, "runc 1.1.12\n", "") and len(node["started"]) == 1
    with open(os.path.join(node["cache"], "versions")) as fh:
        assert fh.read().startswith(npd_versions.MAGIC + "\nboot ")
    assert os.stat(os.path.join(node["cache"], "versions")).st_mode & 0o777 == 0o600


def test_a_binary_replaced_rewritten_or_retouched_is_asked_again(node):
    """Each change keeps the path, and the first two the size and the modification time too: a cache keyed by path
    (or by path, size and mtime) would answer the old version."""
    tick(node)
    st = os.stat(node["binary"])
    # rewritten in place, same size, its modification time put back (its change time moves: it cannot be put back)
    with open(node["binary"], "r+b") as fh:
        fh.seek(len(ELF))
        fh.write(b"version 1.1.13")
    os.utime(node["binary"], ns=(st.st_atime_ns, st.st_mtime_ns))
    assert tick(node) == (0, "runc 1.1.13\n", "") and len(node["started"]) == 2
    # replaced by a new file (a package upgrade: a new inode renamed over it), same size and times
    new = node["binary"] + ".dpkg-new"
    with open(new, "wb") as fh:
        fh.write(ELF + b"version 1.1.14")
    os.chmod(new, 0o755)
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(new, node["binary"])
    assert tick(node) == (0, "runc 1.1.14\n", "") and len(node["started"]) == 3
    # the path a symlink to another file now
    other = node["binary"] + "-1.2.0"
    with open(other, "wb") as fh:
        fh.write(ELF + b"version 1.2.0")
    os.chmod(other, 0o755)
    link = node["binary"] + "-link"
    os.symlink(node["binary"], link)
    assert tick(node, [link, "--version"])[1] == "runc 1.1.14\n"
    os.unlink(link)
    os.symlink(other, link)
    assert tick(node, [link, "--version"])[1] == "runc 1.2.0\n" and len(node["started"]) == 5
    assert tick(node) == (0, "runc 1.1.14\n", "") and len(node["started"]) == 5     # kept all along


def test_only_a_complete_answer_of_an_elf_binary_is_kept(node):
    script = os.path.join(os.path.dirname(node["binary"]), "wrapper")
    with open(script, "w") as fh:
        fh.write("#!/bin/sh\nexec /opt/bin/runc \"$@\"\n# version 9\n")
    tick(node, [script, "--version"])
    tick(node, [script, "--version"])
    assert len(node["started"]) == 2                       # a script may run another binary: never kept
    with open(node["binary"], "ab") as fh:
        fh.write(b" rc=3")
    assert tick(node)[0] == 3 and tick(node)[0] == 3 and len(node["started"]) == 4   # a failed answer: asked again
    tick(node, [node["binary"], "version"])
    tick(node, ["runc", "--version"])
    assert len(node["started"]) == 6                       # only "/absolute/path --version" is kept


def test_a_timed_out_answer_is_not_kept(node, monkeypatch):
    monkeypatch.setattr(SubprocessRunner, "run", lambda self, argv, check=True, data=None, msg=None:
                        node["started"].append(argv) or (SubprocessRunner.TIMED_OUT, "", "killed"))
    tick(node)
    tick(node)
    assert len(node["started"]) == 2


def corrupt(path, how):
    with open(path) as fh:
        text = fh.read()
    if how == "cut":
        text = text.replace("\nend\n", "\n")
    elif how == "boot":
        text = text.replace("\nboot ", "\nboot 0")
    elif how == "format":
        text = text.replace(npd_versions.MAGIC, "nodefix-npd-versions 0")
    elif how == "old":
        at = text.split("\ne ", 1)[1].split(" ", 1)[0]
        text = text.replace("\ne %s " % at, "\ne %d " % (int(at) - npd_versions.MAX_AGE_CS))
    elif how == "garbled":
        text = text.replace("\ne ", "\ne x")
    with open(path, "w") as fh:
        fh.write(text)


@pytest.mark.parametrize("how", ["cut", "boot", "format", "old", "garbled"])
def test_a_cut_foreign_garbled_or_hour_old_file_is_not_trusted(node, how):
    tick(node)
    corrupt(os.path.join(node["cache"], "versions"), how)
    tick(node)
    assert len(node["started"]) == 2
    tick(node)                                             # and the file written again is whole
    assert len(node["started"]) == 2


def test_a_symlinked_file_or_one_others_can_write_is_not_trusted(node, tmp_path):
    tick(node)
    path = os.path.join(node["cache"], "versions")
    elsewhere = str(tmp_path / "planted")
    os.rename(path, elsewhere)
    os.symlink(elsewhere, path)
    tick(node)
    assert len(node["started"]) == 2
    os.unlink(path)
    tick(node)
    os.chmod(path, 0o622)
    tick(node)
    assert len(node["started"]) == 4


def test_the_first_rule_of_a_tick_keeps_the_answers_for_the_next_tick(node, tmp_path, monkeypatch):
    """Through the plugin's cli: the shared result of the tick and the versions file beside it."""
    monkeypatch.delenv(npd_tick.FRESH_ENV, raising=False)
    asked = []

    def check(runner, root="/", **_opts):
        asked.append(runner.run([node["binary"], "--version"], check=False))
        return {"findings": []}
    monkeypatch.setattr(npd_plugin, "detectors", lambda names: [(n, type("M", (), {"check": staticmethod(check)}))
                                                                for n in names])
    cfg = tmp_path / "npd.json"
    cfg.write_text('{"interval": 300, "cache_dir": "%s", "timeout": 5}' % node["cache"])
    for _tick in range(2):
        monkeypatch.setenv(npd_tick.FRESH_ENV, "1")        # a new tick: the node is read again
        assert npd_plugin.cli(["--config", str(cfg), "--condition", "KernelRisk"], out=open(os.devnull, "w")) == 0
    assert len(asked) == 2 * 8 and len(node["started"]) == 1


def test_a_launcher_of_another_name_is_asked_every_tick(node, tmp_path):
    """Review finding: /snap/bin/kubelet leads to /usr/bin/snap, which does not change when the snap it starts is
    refreshed - an answer kept by the launcher's identity would be stale for up to an hour. A symlink to a file of
    the same name (an alternatives link) is still kept."""
    launcher = tmp_path / "bin" / "snap"
    launcher.write_bytes(ELF + b"version 1.29.0")
    (tmp_path / "snapbin").mkdir()
    kubelet = tmp_path / "snapbin" / "kubelet"
    kubelet.symlink_to(launcher)
    tick(node, [str(kubelet), "--version"])
    tick(node, [str(kubelet), "--version"])
    assert len(node["started"]) == 2
    alias = tmp_path / "snapbin" / "runc"
    alias.symlink_to(node["binary"])
    tick(node, [str(alias), "--version"])
    tick(node, [str(alias), "--version"])
    assert len(node["started"]) == 3
