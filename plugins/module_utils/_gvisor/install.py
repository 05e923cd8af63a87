# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Install runsc (and containerd-shim-runsc-v1) from a gVisor release mirror: the fixer behind
the ``runsc_install`` module. Nothing here is imported by a detector.

Mirror layouts (gVisor's release bucket, https://gvisor.dev/docs/user_guide/install/), under
``<base>/<release>/<arch>/``:

- ``loose``: ``runsc`` + ``runsc.sha512`` (and ``containerd-shim-runsc-v1`` + ``.sha512``);
- ``tarball``: ``gvisor.tar.bz2`` + ``gvisor.tar.bz2.sha512`` (runsc, the shim, ``gvisor-bin/``).

Order, so that nothing on the node changes before everything is proven: every file is
downloaded and its sha512 compared with the pinned or published one before anything is
extracted or run; the tarball is unpacked member by member (regular files and directories
only, no absolute or ``..`` names); the new runsc must answer ``--version`` at or after the
minimum; only then are the old binaries copied aside (``<path>.nodefix-<old version>``, kept
for the operator) and in memory of this run, and the new ones moved in atomically. The runsc
now installed is read again and must be the downloaded one; any failure after the first
replacement puts the old files back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import shutil
import tarfile
import tempfile

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.node_config import SHIM_NAME
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor.version import (
    parse_release,
    release_ge,
    runsc_version,
)

RELEASE_RE = re.compile(r"^(latest|(release-)?[0-9]{8}(\.[0-9]+)?)$")
SHA512_RE = re.compile(r"^[0-9a-fA-F]{128}$")
ARCHES = ("x86_64", "aarch64")
TARBALL = "gvisor.tar.bz2"
BINDIR = "gvisor-bin"
# a runsc release is ~60 MB; a mirror that sends more than this is not serving gVisor
MAX_DOWNLOAD_BYTES = 1 << 30
MAX_SUM_BYTES = 4096
CHUNK = 1 << 20


class InstallError(NodefixError):
    """The install cannot go on; ``msg`` says why and what was left as it was."""


def release_dir(release):
    """``release-20240729.0`` -> ``20240729.0`` (the mirror's directory); ``latest`` stays."""
    return release[len("release-"):] if release.startswith("release-") else release


def files_for(layout, install_shim):
    """The files to download, in order."""
    if layout == "tarball":
        return [TARBALL]
    return ["runsc"] + ([SHIM_NAME] if install_shim else [])


def input_errors(p):
    """What is wrong with the install options, one message each (before any download)."""
    errors = []
    if not RELEASE_RE.match(p["release"] or ""):
        errors.append("release %s is not a gVisor release (latest, YYYYMMDD or YYYYMMDD.N)" % _quote(p["release"]))
    scheme = (p["base_url"] or "").split(":", 1)[0].lower() if ":" in (p["base_url"] or "") else ""
    files = files_for(p["layout"], p["install_shim"])
    bad_sums = sorted(k for k, v in p["checksums"].items() if not SHA512_RE.match(str(v)))
    unknown = sorted(set(p["checksums"]) - set(files))
    if scheme not in ("https", "http"):
        errors.append("base_url must be an https:// URL (got %s)" % p["base_url"])
    elif scheme == "http" and not p["allow_insecure"]:
        errors.append("base_url %s is plain HTTP: use HTTPS, or set allow_insecure (and pin every checksum in "
                      "checksums)" % p["base_url"])
    elif scheme == "http" and [f for f in files if f not in p["checksums"]]:
        errors.append("a checksum fetched from the same plain-HTTP mirror proves nothing: pin %s in checksums"
                      % ", ".join(f for f in files if f not in p["checksums"]))
    if bad_sums:
        errors.append("checksums values must be sha512 hex digests (128 hex characters): %s" % ", ".join(bad_sums))
    if unknown:
        errors.append("checksums names %s, which the %s layout does not download (%s)"
                      % (", ".join(unknown), p["layout"], ", ".join(files)))
    if p["arch"] and p["arch"] not in ARCHES:
        errors.append("gVisor publishes x86_64 and aarch64 builds only, not %s" % p["arch"])
    if p["minimum_release"] and parse_release(p["minimum_release"]) is None:
        errors.append("minimum_release %s is not a runsc release (expected e.g. 20231106.0)"
                      % _quote(p["minimum_release"]))
    for key in ("dest", "shim_dest"):
        if p[key] and not os.path.isabs(p[key]):
            errors.append("%s must be an absolute path, got %s" % (key, p[key]))
    return errors


def _quote(text):
    return '"%s"' % text if text is not None else "null"


def download(fetch, url, dest):
    """Stream ``url`` into ``dest`` (mode 0600); return its sha512 hex digest.

    ``fetch(url)`` -> (response or None, info) as Ansible's ``fetch_url`` returns them."""
    resp, info = fetch(url)
    if resp is None or info.get("status") != 200:
        raise InstallError("download of %s failed: HTTP %s %s" % (url, info.get("status"), info.get("msg", "")),
                           url=url, status=info.get("status"))
    digest = hashlib.sha512()
    size = 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        while True:
            chunk = resp.read(CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_DOWNLOAD_BYTES:
                raise InstallError("%s is larger than %d bytes: not a gVisor release file" % (url, MAX_DOWNLOAD_BYTES),
                                   url=url)
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def published_sum(fetch, url, workdir, name):
    """The first word of ``<url>.sha512`` (sha512sum's format), lower case; '' when there is none."""
    path = os.path.join(workdir, name + ".sha512")
    download(fetch, url + ".sha512", path)
    if os.path.getsize(path) > MAX_SUM_BYTES:
        raise InstallError("%s.sha512 is over %d bytes: not a checksum file" % (url, MAX_SUM_BYTES), url=url + ".sha512")
    with open(path, "rb") as fh:
        words = fh.read().decode("utf-8", "replace").split()
    return words[0].lower() if words else ""


def verify(fetch, url, workdir, files, pinned, old):
    """Download ``files`` from ``url`` into ``workdir`` and check each sha512; return [{name, sha512, source}].

    ``old``: what the node runs now, for the message (nothing is replaced on a mismatch)."""
    out = []
    for name in files:
        got = download(fetch, "%s/%s" % (url, name), os.path.join(workdir, name))
        source = "checksums (pinned)" if name in pinned else "%s.sha512 on the mirror" % name
        want = pinned[name].lower() if name in pinned else published_sum(fetch, "%s/%s" % (url, name), workdir, name)
        if want != got:
            raise InstallError("Checksum mismatch for %s/%s: %s says %s but the downloaded file hashes to %s (sha512). "
                               "Nothing was replaced: %s." % (url, name, source, want or "nothing", got, old),
                               file=name, expected=want, actual=got)
        out.append({"name": name, "sha512": got, "source": "pinned" if name in pinned else "mirror"})
    return out


def _member_ok(member):
    name = member.name
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return (member.isfile() or member.isdir()) and not name.startswith("/") and ".." not in parts and parts


def unpack(tar_path, workdir):
    """Extract the tarball's regular files and directories into ``workdir/x``; return
    (runsc, shim or None, gvisor-bin dir or None) as paths there."""
    xdir = os.path.join(workdir, "x")
    os.mkdir(xdir, 0o700)
    found = {}
    try:
        with tarfile.open(tar_path, mode="r:bz2") as tar:
            for member in tar:
                if not _member_ok(member):
                    continue
                rel = "/".join(p for p in member.name.split("/") if p not in ("", "."))
                path = os.path.join(xdir, rel)
                if member.isdir():
                    if not os.path.isdir(path):
                        os.makedirs(path, 0o755)
                else:
                    _extract_file(tar, member, path)
                base = rel.rsplit("/", 1)[-1]
                if base in ("runsc", SHIM_NAME, BINDIR):
                    found.setdefault(base, []).append(path)
    except (tarfile.TarError, EOFError, IOError, OSError) as exc:
        raise InstallError("%s is not a readable bzip2 tarball: %s" % (TARBALL, exc))
    pick = dict((k, sorted(v)[0]) for k, v in found.items())
    return pick.get("runsc"), pick.get(SHIM_NAME), pick.get(BINDIR) if os.path.isdir(pick.get(BINDIR) or "") else None


def _extract_file(tar, member, path):
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    src = tar.extractfile(member)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, (member.mode & 0o755) | 0o600)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(src, out, CHUNK)


def check_new_runsc(runner, path, url, minimum):
    """Run the downloaded runsc (after its checksum passed): it must be a release at or after ``minimum``."""
    os.chmod(path, 0o755)
    parsed, raw = runsc_version(runner, path)
    if parsed is None or not release_ge(parsed, minimum):
        raise InstallError("The mirror's runsc (%s) reports %s, not a release at or after %s; nothing was replaced."
                           % (url, raw or "nothing", minimum), version_output=raw)
    return parsed


def sha512_of(path):
    digest = hashlib.sha512()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def copy_tree(src, dest):
    """Copy the directory ``src`` into ``dest`` (created when missing; files replaced, modes kept)."""
    for dirpath, _dirs, files in os.walk(src):
        target = os.path.join(dest, os.path.relpath(dirpath, src))
        if not os.path.isdir(target):
            os.makedirs(target, 0o755)
        for name in files:
            shutil.copy2(os.path.join(dirpath, name), os.path.join(target, name))


class Installer(object):
    """Replace binaries with undo: ``replace`` keeps an exact copy of each file it replaces (in the
    run's work directory) and ``undo`` puts them back; ``backup`` makes the operator's lasting copy."""

    def __init__(self, module, workdir):
        self.module = module
        self.workdir = workdir
        self.saved = []      # (real path, saved copy or None when the file did not exist)
        self.backups = []

    def backup(self, path, suffix):
        """``<path>.nodefix-<suffix>`` as a copy of the current file, unless one is already there."""
        real = os.path.realpath(path)
        dest = "%s.nodefix-%s" % (path, suffix)
        if os.path.isfile(real) and not os.path.lexists(dest):
            shutil.copy2(real, dest)
            self.backups.append(dest)

    def replace(self, new, path):
        """Move a copy of ``new`` over ``path`` (through a symlink) atomically, mode 0755, root-owned."""
        real = os.path.realpath(path)
        saved = None
        if os.path.isfile(real):
            saved = os.path.join(self.workdir, "saved-%d" % len(self.saved))
            shutil.copy2(real, saved)
        self.saved.append((real, saved))
        fd, tmp = tempfile.mkstemp(prefix=".nodefix-new-", dir=os.path.dirname(real))
        os.close(fd)
        shutil.copyfile(new, tmp)
        self.module.atomic_move(tmp, real)
        os.chmod(real, 0o755)
        if os.geteuid() == 0:
            os.chown(real, 0, 0)

    def undo(self):
        """Put back every file ``replace`` changed, newest first; a file that was not there is removed."""
        for real, saved in reversed(self.saved):
            if saved is None:
                if os.path.lexists(real):
                    os.unlink(real)
                continue
            fd, tmp = tempfile.mkstemp(prefix=".nodefix-undo-", dir=os.path.dirname(real))
            os.close(fd)
            shutil.copy2(saved, tmp)
            os.rename(tmp, real)
        self.saved = []
