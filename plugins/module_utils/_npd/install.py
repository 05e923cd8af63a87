# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""The npd role's small files on a node in one module run (``nodefix.k8s.npd_files``).

The role renders its entry points, the plugin's and node-problem-detector's configuration and the textfile timer's
units on the controller; this file puts them on the node the way the separate ``file``, ``template``, ``copy``,
``stat`` + ``assert`` tasks did, in one round trip:

- ``check_input``: every path absolute, each file once, modes octal, every file's directory existing or made by
  this run, node_exporter's textfile directory existing - or an error naming the problem, and nothing written;
- ``plan``: what would change, read only (check mode stops here): directories to make or give their mode, files
  whose bytes or mode differ (through symlinks: the link stays, its target changes), and the tick's shared result
  and kept looks to drop when a file the plugin reads changed (``drop_cache``);
- ``apply``: the plan as one transaction through ``_core/fileio`` (the collection's one writer: atomic, owner kept,
  pruned backups); a failure part-way takes back every directory made, mode set and file written;
- ``diffs``: the plan as a list of Ansible diffs (before/after text per file, state or mode per directory).

Never imported by the plugin (what runs on the node every tick carries no code that writes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import stat

from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import TEXTFILE
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import file_diff

# The tick's shared result and the textfile's kept looks in npd_cache_dir: _npd/tick.py RESULTS and _npd/textfile.py
# LOOKS (not imported: their imports would pack the whole plugin into this module; tests/unit hold them equal)
CACHE_FILES = ("tick", "looks")
DEFAULT_DIRECTORY_MODE = "0755"
# what a file of this many bytes shows in --diff instead of its text (no npd file comes near it)
MAX_DIFF_BYTES = 256 * 1024


class NpdFilesError(NodefixError):
    """Bad input, a file that cannot be written safely, or a failed write (taken back); the message says which."""


def _mode_text(mode):
    return None if mode is None else "%04o" % mode


def _absolute(path, what):
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path or "\n" in path:
        raise NpdFilesError("%s %r is not an absolute path; nothing was written" % (what, path), path=path)
    if ".." in path.split("/"):
        # /a/link/../b is /a/b spelled, but the parent of link's target on the node: neither is meant
        raise NpdFilesError("%s %s has a '..' component (give the path without it); nothing was written"
                            % (what, path), path=path)
    if what == "file" and path.endswith("/"):
        raise NpdFilesError("file %s ends with '/' (a directory's spelling; give the file's path); nothing was written"
                            % path, path=path)
    return path


def _mode(value, what):
    if value is not None and not isinstance(value, str):
        # a YAML number is not told apart: 0755 arrives as 493 (0755), 755 as 755 (01363: sticky, -wxrw--wx)
        raise NpdFilesError("%s: mode must be a quoted octal string like '0644', got the number %r (YAML reads 0755 "
                            "as 493 and 755 as 01363); nothing was written" % (what, value))
    try:
        return core_fileio.check_mode_value(value)
    except core_paths.FileSafetyError as exc:
        raise NpdFilesError("%s: %s; nothing was written" % (what, exc.msg))


def check_input(params):
    """The module's options checked and normalised: (directories, files, cache_dir); NpdFilesError
    naming the problem otherwise. Reads the node only to tell whether a directory exists."""
    directories, by_real = [], {}
    for entry in params.get("directories") or []:
        path = _absolute(entry.get("path"), "directory")
        mode = _mode(entry.get("mode", DEFAULT_DIRECTORY_MODE), "directory %s" % path)
        real = os.path.realpath(path)
        if real in by_real:
            # the same directory twice (npd_config_path and npd_monitor_config_path in one): once, with one mode
            if by_real[real]["mode"] != mode:
                raise NpdFilesError("directory %s is listed twice with different modes (%s, %s); nothing was written"
                                    % (path, _mode_text(by_real[real]["mode"]), _mode_text(mode)), path=path)
            continue
        by_real[real] = {"path": path, "real": real, "mode": mode}
        directories.append(by_real[real])
    made = set(d["real"] for d in directories)
    for d in directories:
        # the parents a directory's creation makes, too
        head = os.path.dirname(d["real"])
        while head != "/" and not os.path.lexists(head):
            made.add(head)
            head = os.path.dirname(head)
    files, seen = [], {}
    for entry in params.get("files") or []:
        path = _absolute(entry.get("path"), "file")
        content = entry.get("content")
        if not isinstance(content, str):
            raise NpdFilesError("file %s: content must be text, got %s; nothing was written"
                                % (path, type(content).__name__), path=path)
        try:
            content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise NpdFilesError("file %s: content cannot be written as UTF-8 (%s); nothing was written" % (path, exc),
                                path=path)
        try:
            real = core_paths.resolve_target("/", path, what="file")
        except core_paths.FileSafetyError as exc:
            raise NpdFilesError("%s" % exc.msg, path=path)
        if real in seen:
            raise NpdFilesError("file %s is listed twice (as %s and %s); nothing was written" % (real, seen[real], path),
                                path=path)
        seen[real] = path
        if real in made:
            raise NpdFilesError("file %s is also among the directories to make; nothing was written" % path, path=path)
        parent = os.path.dirname(real)
        if not os.path.isdir(parent) and parent not in made:
            raise NpdFilesError("the directory %s of file %s does not exist and is not among the directories to make; "
                                "nothing was written" % (parent, path), path=path)
        files.append({"path": path, "real": real, "content": content, "mode": _mode(entry.get("mode"), "file %s" % path),
                      "drop_cache": bool(entry.get("drop_cache"))})
    cache_dir = params.get("cache_dir") or ""
    if cache_dir:
        _absolute(cache_dir, "cache_dir")
    textfile = params.get("textfile") or ""
    if textfile:
        _absolute(textfile, "textfile")
        if os.path.basename(textfile) != TEXTFILE:  # the node's one file of the nodefix_* series (node_audit's)
            raise NpdFilesError("textfile %s must be named %s (the node's one file of the nodefix_* series: "
                                "node_audit writes the same; two files with the same series hide one another); nothing "
                                "was written" % (textfile, TEXTFILE), path=textfile)
        textfile_dir = os.path.dirname(textfile)
        if not os.path.isdir(textfile_dir):
            raise NpdFilesError(
                "textfile %s: the directory %s does not exist (is node_exporter's textfile collector set up? its "
                "--collector.textfile.directory; create it or point npd_textfile elsewhere); nothing was written"
                % (textfile, textfile_dir), path=textfile_dir)
    return directories, files, cache_dir


def _read(real, size=None):
    """(bytes, mode) of an existing regular file, (None, None) of none. Of a file that is not ``size`` bytes long, only
    its first MAX_DIFF_BYTES + 1 (it differs anyway; a huge file is not read whole into memory)."""
    try:
        with open(real, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise NpdFilesError("file %s is not a regular file (it is %s); nothing was written"
                                    % (real, core_paths.file_kind(st.st_mode)), path=real)
            if size is not None and st.st_size != size:
                return _Other(fh.read(MAX_DIFF_BYTES + 1), st.st_size), stat.S_IMODE(st.st_mode)
            return fh.read(), stat.S_IMODE(st.st_mode)
    except (IOError, OSError) as exc:
        if not os.path.lexists(real):
            return None, None
        raise NpdFilesError("cannot read file %s: %s; nothing was written" % (real, exc.strerror or exc), path=real)


class _Other(bytes):
    """The head of a file whose size differs from the new content's (``size``: its whole length)."""

    def __new__(cls, head, size):
        obj = bytes.__new__(cls, head)
        obj.size = size
        return obj


def plan(directories, files, cache_dir):
    """What would change (reads only): {directories, files, cache}."""
    dirs = []
    for d in directories:
        missing, head = [], os.path.normpath(d["path"])
        while not os.path.lexists(head):
            missing.append(head)
            head = os.path.dirname(head)
        if not os.path.isdir(head):
            raise NpdFilesError("%s is not a directory (making %s); nothing was written" % (head, d["path"]),
                                path=d["path"])
        old = None if missing else stat.S_IMODE(os.stat(head).st_mode)
        dirs.append(dict(d, created=list(reversed(missing)), old_mode=old,
                         mode_changed=bool(not missing and d["mode"] is not None and old != d["mode"])))
    planned = []
    for f in files:
        after = f["content"].encode("utf-8")
        before, old_mode = _read(f["real"], size=len(after))
        created = before is None
        planned.append(dict(f, before=before, old_mode=old_mode, created=created,
                            content_changed=created or before != after,
                            mode_changed=bool(not created and f["mode"] is not None and old_mode != f["mode"])))
    stale = any(f["drop_cache"] and (f["content_changed"] or f["mode_changed"]) for f in planned)
    cache = []
    if cache_dir and stale:
        cache = [os.path.join(cache_dir, name) for name in CACHE_FILES if os.path.lexists(os.path.join(cache_dir, name))]
    return {"directories": dirs, "files": planned, "cache": cache}


def changed(the_plan):
    return bool(the_plan["cache"] or any(d["created"] or d["mode_changed"] for d in the_plan["directories"])
                or any(f["content_changed"] or f["mode_changed"] for f in the_plan["files"]))


def _text(data):
    if data is None:
        return None
    size = getattr(data, "size", len(data))
    if size > MAX_DIFF_BYTES:
        return "(%d bytes, not shown)\n" % size
    return data.decode("utf-8", "replace")


def diffs(the_plan):
    """Ansible's diff of the plan, one entry per change (a list: Ansible shows each)."""
    out = []
    for d in the_plan["directories"]:
        for new in d["created"]:
            out.append({"before": {"path": new, "state": "absent"}, "after": {"path": new, "state": "directory"}})
        if d["mode_changed"]:
            out.append({"before": {"path": d["path"], "mode": _mode_text(d["old_mode"])},
                        "after": {"path": d["path"], "mode": _mode_text(d["mode"])}})
    for f in the_plan["files"]:
        if f["content_changed"]:
            out.append(file_diff(f["path"], _text(f["before"]), _text(f["content"].encode("utf-8"))))
        if f["mode_changed"]:
            out.append({"before": {"path": f["path"], "mode": _mode_text(f["old_mode"])},
                        "after": {"path": f["path"], "mode": _mode_text(f["mode"])}})
    for path in the_plan["cache"]:
        out.append({"before": {"path": path, "state": "file"}, "after": {"path": path, "state": "absent"}})
    return out


def apply(module, the_plan, backup=False, keep_backups=core_fileio.DEFAULT_KEEP_BACKUPS):
    """Make the plan true, all-or-nothing for the directories and files; then drop the cache. Returns
    {real path: backup path} of the files backed up."""
    steps = []
    try:
        steps.extend(core_fileio.make_directories(
            [(d["path"], d["mode"]) for d in the_plan["directories"] if d["created"] or d["mode_changed"]]))
        # a file whose bytes change gets its mode in the write (its backup keeps the old one); one whose mode
        # alone changes, here
        steps.extend(core_fileio.set_modes([(f["real"], f["mode"]) for f in the_plan["files"]
                                            if f["mode_changed"] and not f["content_changed"]]))
        backups = core_fileio.write_files(
            module, [(f["real"], f["content"], f["mode"]) for f in the_plan["files"] if f["content_changed"]],
            backup=backup, keep_backups=keep_backups, set_modes_of_existing=True)
    except core_paths.FileSafetyError as exc:
        errors = core_fileio.undo(steps)
        tail = ("; undo failed for " + ", ".join(errors)) if errors else (
            "; every directory made and mode set was taken back" if steps else "")
        details = {"path": exc.path}
        if errors or getattr(exc, "undo_failed", False):
            # something of this run stayed on the node: the failure says it changed it
            details["changed"] = True
        raise NpdFilesError("%s%s" % (exc.msg, tail), **details)
    backups = dict((real, b) for real, b in backups.items() if b)
    dropped = []
    for path in the_plan["cache"]:
        # the plugin's result of the old code or config: at worst it would be answered from for half an interval
        # (then it is stale), so a failure here leaves the files written and says so
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
            dropped.append(path)
        except OSError as exc:
            # the files were written: the failure carries the result of a run that changed them (changed,
            # changed_files: the role's systemd reload reads them; the next run finds nothing left to change)
            details = result(the_plan, backups)
            details["cache_dropped"] = dropped
            details["path"] = path
            raise NpdFilesError("the files were written, but the tick's shared result %s could not be removed: %s "
                                "(remove it; until then the plugin may answer from the old plugin's or config's look, "
                                "for at most half of npd_invoke_interval)" % (path, exc.strerror or exc), **details)
    return backups


def result(the_plan, backups):
    """The module's result keys (without ``diff``)."""
    out = {
        "changed": changed(the_plan),
        "changed_files": [f["path"] for f in the_plan["files"] if f["content_changed"] or f["mode_changed"]],
        "created_directories": [new for d in the_plan["directories"] for new in d["created"]],
        "changed_directories": [d["path"] for d in the_plan["directories"] if d["created"] or d["mode_changed"]],
        "cache_dropped": list(the_plan["cache"]),
    }
    real_paths = dict((f["path"], f["real"]) for f in the_plan["files"] if f["real"] != f["path"])
    if real_paths:
        out["real_paths"] = real_paths
    by_real = dict((f["real"], f["path"]) for f in the_plan["files"])
    if backups:
        out["backup_files"] = dict((by_real.get(real, real), b) for real, b in backups.items())
    return out


def run(module, params):
    """The whole module: check, plan, (unless check mode) apply; the result with its diff."""
    directories, files, cache_dir = check_input(params)
    keep = params.get("keep_backups", core_fileio.DEFAULT_KEEP_BACKUPS)
    if keep is not None and keep < 0:
        raise NpdFilesError("keep_backups must be 0 or more, got %d; nothing was written" % keep)
    the_plan = plan(directories, files, cache_dir)
    backups = {}
    if changed(the_plan) and not module.check_mode:
        backups = apply(module, the_plan, backup=params.get("backup", False), keep_backups=keep)
    out = result(the_plan, backups)
    if getattr(module, "_diff", False):
        out["diff"] = diffs(the_plan)
    return out
