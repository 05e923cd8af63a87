# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""Writes of node configuration files (reads: ``_core/paths.py``).

Every writer of the collection goes through this file so that the same
guarantees hold everywhere (docs/safety.md): ``write_files`` takes a list of
(path, new_text) - or (path, new_text, mode), the mode of that file when it is
new - written all-or-nothing: each file through its symlink (the link stays,
its target changes), temp file in the target's directory + ``atomic_move``,
mode and owner kept (``mode`` for new files), backups next to the target
pruned to the newest ``keep_backups`` once every file is written; a failure part-way puts every file
already written back whole (each replaced file is kept under a hard link until the end), removes every
file already created and every backup made, and names the file that failed (AnsibleModule's own fail_json
during the write is such a failure); new bytes are never visible under a mode wider than their own; the side
files a killed run leaves (``.<name>.nodefix-new|old.<pid>.<random>``) go at the next write of that file.
``make_directories`` and ``set_modes`` make directories and set the mode a file or directory must have,
each returning the steps ``undo`` takes back (and taking back their own on a failure part-way): a caller
that does several of these in one transaction undoes them all when a later one fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import stat

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import FileSafetyError


DEFAULT_KEEP_BACKUPS = 3
# AnsibleModule.backup_local names backups <file>.<pid>.<YYYY-MM-DD@HH:MM:SS>~
_BACKUP_SUFFIX_RE = re.compile(r"^\.[0-9]+\.[0-9]{4}-[0-9]{2}-[0-9]{2}@[0-9]{2}:[0-9]{2}:[0-9]{2}~$")


def backups_of(real):
    """Backups of ``real`` made by AnsibleModule.backup_local, oldest first."""
    directory = os.path.dirname(real) or "."
    base = os.path.basename(real)
    found = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        if name.startswith(base) and _BACKUP_SUFFIX_RE.match(name[len(base):]):
            full = os.path.join(directory, name)
            try:
                found.append((os.lstat(full).st_mtime, name, full))
            except OSError:
                continue
    return [f for _m, _n, f in sorted(found)]


def prune_backups(real, keep):
    """Delete all but the newest ``keep`` backups of ``real``; return the deleted paths."""
    if keep is None or keep < 0:
        return []
    old = backups_of(real)
    doomed = old[:max(0, len(old) - keep)]
    for path in doomed:
        try:
            os.unlink(path)
        except OSError:
            pass
    return doomed


# the temp file of a write and the hard link that keeps a replaced file until every file is written:
# .<name>.nodefix-new.<pid>.<random> / .<name>.nodefix-old.<pid>.<random> next to the target; a run killed
# between making one and removing it (SIGKILL, a timeout) leaves it, and the next write of that file removes
# the ones whose process no longer runs (remove_leftovers). A pid has at most 7 digits (PID_MAX_LIMIT 2^22),
# the random part 8; a name longer than _STEM_MAX bytes is cut, with a checksum of the whole, so that the side
# name stays within NAME_MAX (255)
_LEFTOVER_RE = r"^\.%s\.nodefix-(?:new|old)\.([0-9]{1,7})\.[0-9a-f]{8}\Z"
_STEM_MAX = 200


def _stem(base):
    """``base`` as its side files' names carry it."""
    raw = os.fsencode(base)
    if len(raw) <= _STEM_MAX:
        return base
    import zlib  # pylint: disable=import-outside-toplevel  # writers only: node-side readers skip its import
    return "%s~%08x" % (os.fsdecode(raw[:_STEM_MAX - 20]), zlib.crc32(raw) & 0xffffffff)


def _side_name(real, kind):
    """A free name for a ``kind`` ('new' or 'old') side file of ``real``, in its directory."""
    import binascii  # pylint: disable=import-outside-toplevel  # writers only: node-side readers skip its import
    return os.path.join(os.path.dirname(real) or ".", ".%s.nodefix-%s.%d.%s" % (
        _stem(os.path.basename(real)), kind, os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii")))


def _running(pid):
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno != errno.ESRCH  # EPERM: there, but not ours to signal
    return True


def remove_leftovers(real):
    """Remove the side files of ``real`` (temp files, kept old versions) left by a write whose process no longer
    runs; return their paths. A process id used again since keeps its files until the next write after it ends."""
    directory = os.path.dirname(real) or "."
    pattern = re.compile(_LEFTOVER_RE % re.escape(_stem(os.path.basename(real))))
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        found = pattern.match(name)
        if found and int(found.group(1)) != os.getpid() and not _running(int(found.group(1))):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
            except OSError:
                pass
    return removed


def _keep_old(real):
    """How to put ``real`` back as it is now: None (there is no such file); ("link", a hard link to it, its mode), so
    that one rename puts the very file back (bytes, mode, owner); or, where the filesystem makes no hard link
    (EPERM, EXDEV, EMLINK, ...), ("bytes", its bytes, its mode)."""
    if not os.path.exists(real):
        return None
    old_mode = stat.S_IMODE(os.stat(real).st_mode)
    for _attempt in range(5):
        name = _side_name(real, "old")
        try:
            os.link(real, name)
            return ("link", name, old_mode)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                break
    with open(real, "rb") as fh:
        return ("bytes", fh.read(), old_mode)


def _identity(path):
    """(device, inode) of ``path``, None where there is none: tells whether a move replaced it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _open_temp(real):
    """(fd, path) of a new temp file next to ``real``, 0600, made by this call (O_EXCL)."""
    for _attempt in range(5):
        tmp = _side_name(real, "new")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError("no free temp file name next to %s" % real)


def _write_one(module, real, data, mode, set_mode=False):
    """Temp file next to ``real`` then atomic_move. A new file gets ``mode`` (0644 without one); an existing one
    keeps its mode and owner, or gets ``mode`` with ``set_mode``. The new bytes are never visible under a mode
    wider than theirs: atomic_move gives them the target's mode, so an existing target loses the bits ``mode``
    lacks first (write_files gives the old file its mode back), and a new one is moved under a umask that
    leaves none of them (atomic_move gives it 0666 & ~umask)."""
    fd, tmp = _open_temp(real)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        creating = not os.path.exists(real)
        final = (0o644 if mode is None else mode) if creating else (mode if set_mode else None)
        if not creating:
            st = os.stat(real)
            if final is not None and stat.S_IMODE(st.st_mode) & ~final:
                os.chmod(real, stat.S_IMODE(st.st_mode) & final)
                st = os.stat(real)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except OSError:
                pass
        umask = os.umask(0o777 & ~final) if creating else None
        try:
            module.atomic_move(tmp, real, unsafe_writes=False)
        finally:
            if umask is not None:
                os.umask(umask)
        if final is not None and stat.S_IMODE(os.stat(real).st_mode) != final:
            os.chmod(real, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check_mode_value(mode):
    """Validate a ``mode`` option (int or octal string) -> int or None."""
    if mode is None:
        return None
    if isinstance(mode, bool):
        raise FileSafetyError("mode must be an octal string like '0644', got %r" % (mode,))
    if isinstance(mode, int):
        value = mode
    elif isinstance(mode, str) and re.match(r"^0?[0-7]{3,4}$", mode.strip()):
        value = int(mode.strip(), 8)
    else:
        raise FileSafetyError("mode must be an octal string like '0644', got %r" % (mode,))
    if value < 0 or value > 0o7777:
        raise FileSafetyError("mode %r is out of range (0000-7777)" % (mode,))
    return value


def _checked(changes, mode):
    """``changes`` as (real, bytes, mode), once each, or FileSafetyError before anything is written: a file listed
    twice with one content and mode is written once, with two is refused (the second would undo the first)."""
    mode = check_mode_value(mode)
    changes = [(c[0], c[1], check_mode_value(c[2]) if len(c) > 2 and c[2] is not None else mode) for c in changes]
    for real, text, _mode in changes:
        if not isinstance(text, str):
            raise FileSafetyError("internal error: new content of %s is not text" % real, real)
        if not os.path.isdir(os.path.dirname(real) or "."):
            raise FileSafetyError("directory %s of %s does not exist" % (os.path.dirname(real), real), real)
    encoded = []
    seen = {}
    for real, text, new_mode in changes:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise FileSafetyError("new content of %s cannot be encoded as UTF-8: %s; nothing was written" % (real, exc), real)
        key = os.path.normpath(real)
        if key in seen:
            if seen[key] != (data, new_mode):
                raise FileSafetyError("%s is listed twice, with two contents or modes; nothing was written" % real, real)
            continue
        seen[key] = (data, new_mode)
        encoded.append((real, data, new_mode))
    return encoded


class _ModuleFailed(NodefixError):
    """AnsibleModule's own fail_json during a write (atomic_move and backup_local on ansible-core 2.17/2.18, its
    SELinux steps on every version), raised in its place so that the write is undone before the module fails."""


class _FailJsonRaises(object):
    """``with _FailJsonRaises(module):`` - module.fail_json raises _ModuleFailed (no result printed, no exit)."""

    def __init__(self, module):
        self.module = module
        self.saved = None

    def __enter__(self):
        self.saved = vars(self.module).get("fail_json") if hasattr(self.module, "__dict__") else None

        def refuse(msg="", **_kwargs):
            raise _ModuleFailed(msg)

        self.module.fail_json = refuse
        return self

    def __exit__(self, *exc_info):
        if self.saved is None:
            del self.module.fail_json
        else:
            self.module.fail_json = self.saved
        return False


def write_files(module, changes, backup=True, keep_backups=DEFAULT_KEEP_BACKUPS, mode=None, set_modes_of_existing=False):
    """Write ``changes`` (list of (real_path, new_text) or (real_path, new_text, mode)) all-or-nothing.

    ``real_path`` must come from ``resolve_target``; a change's own ``mode`` (for a new file) wins over
    ``mode``. With ``set_modes_of_existing`` an existing file gets its change's ``mode`` too (its backup keeps the
    old one). Returns ``{real_path: backup_path or None}``. Until every file is written each replaced file is
    kept under a hard link (its bytes only where the filesystem makes none): on failure - AnsibleModule's own
    fail_json included - every file already written (the one that failed too, if it was moved into place) is
    put back whole (bytes, mode, owner), every file created removed and every backup made removed, and the error
    is re-raised as FileSafetyError naming the file.
    """
    encoded = _checked(changes, mode)
    done = []   # (real, how to put it back: None (it was new), ("link", path, mode) or ("bytes", data, mode))
    backups = {}
    current = None
    pending = None   # the file being written: (real, how to put it back, its _identity before)
    with _FailJsonRaises(module):
        try:
            for real, data, new_mode in encoded:
                current = real
                remove_leftovers(real)
                old = _keep_old(real)
                pending = (real, old, _identity(real))
                bfile = None
                if backup and old:
                    bfile = module.backup_local(real)
                    backups[real] = bfile
                _write_one(module, real, data, new_mode, set_mode=set_modes_of_existing)
                done.append((real, old))
                pending = None
                backups[real] = bfile
        except Exception as exc:
            undo_errors = _put_back(module, done, pending, backups)
            msg = "writing %s failed: %s" % (current, getattr(exc, "msg", None) or str(exc))
            if undo_errors:
                msg += "; undo failed for " + ", ".join(undo_errors)
            else:
                msg += "; every file already written was restored"
            failure = FileSafetyError(msg, current)
            failure.undo_failed = bool(undo_errors)
            raise failure
    for _real, old in done:
        if old and old[0] == "link":
            try:
                # the old file, narrowed for the write, keeps its mode under any other name it has
                _give_mode(old[1], old[2])
                os.unlink(old[1])
            except OSError:
                pass  # a side file the next write of it removes
    for real, bfile in backups.items():
        # only once every file is written: a failure part-way leaves the older backups as they were
        if bfile:
            prune_backups(real, keep_backups)
    return backups


def _give_mode(path, mode):
    if stat.S_IMODE(os.stat(path).st_mode) != mode:
        os.chmod(path, mode)


def _put_back(module, done, pending, backups):
    """Undo of ``write_files``: each file written back as it was (newest first) - the one that failed too where it
    was moved into place, else its kept link removed and its old mode given back -, each created one removed and
    every backup this call made removed. Returns "path: error" strings."""
    errors = []
    if pending and _identity(pending[0]) != pending[2]:
        done = done + [pending[:2]]
    elif pending and pending[1]:
        try:
            _give_mode(pending[0], pending[1][2])
            if pending[1][0] == "link":
                os.unlink(pending[1][1])
        except OSError as uexc:
            errors.append("%s: %s" % (pending[0], uexc))
    for real, old in reversed(done):
        try:
            if old is None:
                os.unlink(real)
            elif old[0] == "link":
                os.rename(old[1], real)   # the old file itself: bytes, mode and owner as they were
                _give_mode(real, old[2])
            else:
                _write_one(module, real, old[1], old[2], set_mode=True)
        except Exception as uexc:  # keep undoing the rest
            errors.append("%s: %s" % (real, uexc))
    # the backups this call made are of files now restored (older ones were not pruned yet)
    for bfile in backups.values():
        try:
            if bfile:
                os.unlink(bfile)
        except OSError as uexc:
            errors.append("%s: %s" % (bfile, uexc))
    return errors


def make_directories(directories):
    """Make each of ``directories`` (list of (absolute path, mode)) with its missing parents, each new one with
    that mode (not the umask's), and give an existing one that mode, as ``ansible.builtin.file`` with
    ``state: directory`` does (through a symlink). Returns the steps ``undo`` takes back; on a failure part-way
    the steps already taken are taken back and the error raised as FileSafetyError naming the directory."""
    steps = []
    try:
        for path, mode in directories:
            mode = check_mode_value(mode)
            if not isinstance(path, str) or not path.startswith("/"):
                raise FileSafetyError("directory %r is not an absolute path" % (path,), path)
            missing = []
            head = os.path.normpath(path)
            while not os.path.lexists(head):
                missing.append(head)
                head = os.path.dirname(head)
            if not os.path.isdir(head):
                raise FileSafetyError("%s is not a directory (making %s)" % (head, path), path)
            for new in reversed(missing):
                os.mkdir(new, 0o700)
                steps.append(("rmdir", new))
                os.chmod(new, 0o755 if mode is None else mode)
            if not missing and mode is not None:
                steps.extend(set_modes([(path, mode)]))
    except (OSError, FileSafetyError) as exc:
        raise FileSafetyError("making directories failed: %s%s" % (getattr(exc, "msg", None) or exc, _undone(steps)))
    return steps


def set_modes(paths):
    """Give each of ``paths`` (list of (path, mode)) that mode when it has another (through a symlink). Returns
    the steps ``undo`` takes back; on a failure part-way the modes already set are set back and the error raised
    as FileSafetyError naming the file."""
    steps = []
    try:
        for path, mode in paths:
            mode = check_mode_value(mode)
            old = stat.S_IMODE(os.stat(path).st_mode)
            if mode is not None and old != mode:
                os.chmod(path, mode)
                steps.append(("chmod", path, old))
    except (OSError, FileSafetyError) as exc:
        raise FileSafetyError("setting modes failed: %s%s" % (getattr(exc, "msg", None) or exc, _undone(steps)))
    return steps


def undo(steps):
    """Take back ``steps`` (from make_directories and set_modes), newest first; return what could not be taken
    back, as "path: error" strings (the rest is still taken back)."""
    errors = []
    for step in reversed(steps):
        try:
            if step[0] == "rmdir":
                os.rmdir(step[1])
            else:
                os.chmod(step[1], step[2])
        except OSError as exc:
            errors.append("%s: %s" % (step[1], exc))
    return errors


def _undone(steps):
    """``undo(steps)`` as the tail of an error message."""
    errors = undo(steps)
    if errors:
        return "; undo failed for " + ", ".join(errors)
    return "; every change already made was taken back" if steps else "; nothing was changed"
