# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""containerd's last known-good state: the snapshot the containerd role rolls back to.

Layout of a snapshot directory (what ``roles/containerd/tasks/rollback.yml`` reads)::

    <dir>/manifest.json          {"version", "binary", "files": [{"path", "exists", "checksum"}],
                                 "recorded_at", "identity": {path: [dev, inode, size, mtime_ns, ctime_ns]}}
    <dir>/files/<absolute path>  a copy of every file that exists (mode, owner, times kept;
                                 a symlink is copied as the link)

When to record (``decide``): the first snapshot is taken whatever the state
(there is nothing better to go back to, and so is one whose manifest cannot be
read); afterwards only when the files differ from the manifest AND they are the
ones the HEALTHY running daemon started with (its socket answers and no file
changed - ctime - after it started). A change waiting for its restart is never
recorded as good.

``record`` builds the new snapshot next to the old one (``<dir>.new``) and
swaps it in with two renames; a failure part-way leaves the old snapshot in
place and removes what it built.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil
import stat
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

MANIFEST = "manifest.json"
FILES = "files"


def check_inputs(path, files):
    """Refuse what cannot be a snapshot: raise NodefixError naming the problem."""
    if not path or not os.path.isabs(path):
        raise NodefixError("path must be an absolute directory path, got %r" % (path,), path=path)
    norm = os.path.normpath(path)
    if norm == "/":
        raise NodefixError("path must not be / (the snapshot directory is replaced as a whole)", path=path)
    seen = set()
    for item in files:
        if not item or not os.path.isabs(item):
            raise NodefixError("files: %r is not an absolute path" % (item,), path=path)
        if item == "/" or os.path.normpath(item) != item:
            raise NodefixError("files: %r is not a normalised path (no //, ./, ../ or trailing /)" % (item,),
                               path=path)
        if item in seen:
            raise NodefixError("files: %s is listed twice" % item, path=path)
        seen.add(item)
        if item == norm or item.startswith(norm + "/") or norm.startswith(item + "/"):
            raise NodefixError("files: %s overlaps the snapshot directory %s" % (item, norm), path=path)


# A regular file whose (device, inode, size, mtime, ctime) are the ones the manifest recorded keeps the checksum it
# recorded: containerd's binaries (~100 MB) are not read again at every run - ~10 s each under emulation. Any write
# moves the ctime (no call sets it back), a package upgrade replaces the inode; a file whose ctime is within
# RACY_SECONDS of the time the recording run first looked at the files is read anyway (changed again in the clock
# tick its ctime shows, the ctime would not move: git's "racily clean" case).
RACY_SECONDS = 2.0


def identity(info):
    """What tells, without reading it, that a regular file is the one a manifest recorded."""
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def known_checksums(manifest):
    """{path: (identity, checksum)} a manifest vouches for (none for one older than identities, or of a racy file)."""
    if not manifest or not isinstance(manifest.get("identity"), dict):
        return {}
    recorded_at = manifest.get("recorded_at")
    if not isinstance(recorded_at, (int, float)):
        return {}
    sums = dict((f.get("path"), f.get("checksum")) for f in manifest["files"] if isinstance(f, dict))
    out = {}
    for path, ident in manifest["identity"].items():
        if (isinstance(ident, list) and len(ident) == 5 and sums.get(path)
                and ident[4] / 1e9 < recorded_at - RACY_SECONDS):
            out[path] = (ident, sums[path])
    return out


def read_state_files(root, paths, known=None):
    """Each node path (under ``root``) as the snapshot records it, read in one pass: ``exists`` (lstat:
    a dangling symlink exists), ``checksum`` (sha256 of a regular file, '' for anything else, as
    ``stat`` without ``follow`` gives; from ``known`` - known_checksums - when the file is the one it names),
    ``ctime`` and ``identity``. NodefixError names a file that exists but cannot be read: an unreadable file is
    never reported as absent or unchanged."""
    known = known or {}
    out = []
    for path in paths:
        entry = {"path": path, "exists": False, "checksum": "", "ctime": 0, "identity": None}
        local = root_path(root, path, follow_last=False)   # lstat: the link itself
        try:
            info = os.lstat(local)
        except OSError:
            out.append(entry)
            continue
        entry["exists"], entry["ctime"] = True, info.st_ctime
        if stat.S_ISREG(info.st_mode):
            entry["identity"] = identity(info)
            if path in known and known[path][0] == entry["identity"]:
                entry["checksum"] = known[path][1]
            else:
                entry["checksum"] = _sha256(local, path)
        out.append(entry)
    return out


def _sha256(local, path):
    digest = hashlib.sha256()
    try:
        with open(local, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except (IOError, OSError) as exc:
        raise NodefixError("cannot read %s for its checksum: %s" % (path, exc), path=path)
    return digest.hexdigest()


def read_manifest(snap_dir):
    """(manifest dict or None, why it is None or '')."""
    name = os.path.join(snap_dir, MANIFEST)
    try:
        with open(name, "rb") as fh:
            raw = fh.read()
    except (IOError, OSError) as exc:
        return None, "no snapshot yet" if not os.path.lexists(name) else "the manifest cannot be read (%s)" % exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        return None, "the manifest is not JSON (%s)" % exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None, "the manifest has no list of files"
    return data, ""


def state_now(entries):
    """The manifest's view of read_state_files' entries (no ctime)."""
    return [{"path": e["path"], "exists": e["exists"], "checksum": e["checksum"]} for e in entries]


def decide(manifest, why_none, entries, daemon_reachable, daemon_started):
    """(record: bool, reason: str) for the files as they are now (``entries`` with ctime)."""
    if manifest is None:
        return True, "first snapshot (%s)" % why_none
    if manifest["files"] == state_now(entries):
        return False, "the files are the ones recorded"
    if not daemon_reachable:
        return False, "containerd does not answer: the files on disk are not known to be good"
    if daemon_started is None:
        return False, "containerd's start time is unknown: the files on disk are not known to be good"
    newest = max([e["ctime"] for e in entries if e["exists"]] or [0])
    if newest >= daemon_started:
        return False, "the files changed after containerd started (a restart is pending)"
    return True, "the files changed and the running containerd started on them"


def manifest_text(manifest):
    return json.dumps(manifest, indent=4, sort_keys=True) + "\n" if manifest is not None else ""


def _copy_entry(src, dest):
    """Copy one file or symlink as ``cp -a`` would (mode, owner, times; a link stays a link)."""
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o700)
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dest)
    else:
        shutil.copy2(src, dest)
    try:
        os.lchown(dest, st.st_uid, st.st_gid)
    except OSError:
        pass
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dest, stat.S_IMODE(st.st_mode))


def _build(new_dir, manifest, root):
    os.makedirs(os.path.join(new_dir, FILES), 0o700)
    os.chmod(new_dir, 0o700)
    for entry in manifest["files"]:
        if entry["exists"]:
            _copy_entry(root_path(root, entry["path"], follow_last=False), os.path.join(new_dir, FILES) + entry["path"])
    name = os.path.join(new_dir, MANIFEST)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(manifest_text(manifest))
        fh.flush()
        os.fsync(fh.fileno())


def _remove(path):
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def record(snap_dir, manifest, root="/"):
    """Write ``manifest`` and copies of its existing files (node paths, under ``root``) as the snapshot
    ``snap_dir`` (a real path).

    Built in ``<snap_dir>.new``, swapped in by renames (the old one goes to ``<snap_dir>.old`` and is
    removed last). On failure the old snapshot is back in place and NodefixError says what failed."""
    new_dir, old_dir = snap_dir + ".new", snap_dir + ".old"
    parent = os.path.dirname(snap_dir)
    try:
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o700)
        _remove(new_dir)
        _remove(old_dir)
        _build(new_dir, manifest, root)
    except (IOError, OSError, shutil.Error) as exc:
        try:
            _remove(new_dir)
        except (IOError, OSError):
            pass
        raise NodefixError("recording the snapshot in %s failed: %s; the previous snapshot is unchanged"
                           % (snap_dir, exc), path=snap_dir)
    moved = False
    try:
        if os.path.lexists(snap_dir):
            os.rename(snap_dir, old_dir)
            moved = True
        os.rename(new_dir, snap_dir)
    except OSError as exc:
        if moved and not os.path.lexists(snap_dir):
            os.rename(old_dir, snap_dir)
        _remove(new_dir)
        raise NodefixError("putting the snapshot in place at %s failed: %s; the previous snapshot is unchanged"
                           % (snap_dir, exc), path=snap_dir)
    _remove(old_dir)


def run(path, files, version=None, binary=None, daemon_reachable=False, daemon_started=None,
        check_mode=False, root="/"):
    """Read the files and the manifest, decide, record unless ``check_mode``.

    Returns the module's result (``changed``, ``recorded``, ``reason``, ``files``, ``manifest``,
    ``previous_version`` and ``diff`` before/after texts). ``root`` is for tests: the files are
    read under it; ``path`` is written as given."""
    check_inputs(path, files)
    real = os.path.realpath(path)
    old, why_none = read_manifest(real)
    looked_at = time.time()   # before the first lstat: a file changed in the same clock tick is never vouched for
    entries = read_state_files(root, files, known_checksums(old))
    do_record, reason = decide(old, why_none, entries, daemon_reachable, daemon_started)
    now = state_now(entries)
    new = old
    if do_record:
        new = {"version": version, "binary": binary, "files": now, "recorded_at": looked_at,
               "identity": dict((e["path"], e["identity"]) for e in entries if e["identity"])}
    result = {
        "changed": do_record,
        "recorded": do_record and not check_mode,
        "reason": reason,
        "path": path,
        "files": now,
        "manifest": new,
        "previous_version": (old or {}).get("version"),
        "diff": {"before": manifest_text(old), "after": manifest_text(new),
                 "before_header": os.path.join(path, MANIFEST), "after_header": os.path.join(path, MANIFEST)},
    }
    if real != path:
        result["real_path"] = real
    if do_record and not check_mode:
        record(real, new, root)
    return result
