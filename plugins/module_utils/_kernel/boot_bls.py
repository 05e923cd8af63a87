# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Boot a new kernel once on EL and Fedora: GRUB 2 with Boot Loader Specification entries.

EL 8+ and Fedora do not list kernels in ``grub.cfg``: each kernel has a file
``/boot/loader/entries/<id>.conf`` (the Boot Loader Specification,
https://uapi-group.org/specifications/specs/boot_loader_specification/ - keys
``title``, ``version``, ``linux``, ``initrd``, ``options``), written by
``kernel-install`` when the kernel package is installed, and GRUB's ``blscfg``
command makes a menu entry of each, whose id is the file name without ``.conf``.
GRUB's environment block is ``/boot/grub2/grubenv`` (on EL 8 with UEFI a symlink
into the EFI system partition: it is followed). With ``GRUB_DEFAULT=saved`` (EL's
``/etc/default/grub`` ships it) GRUB boots ``saved_entry`` and, once,
``next_entry`` - what ``grub2-set-default``/``grubby --set-default`` and
``grub2-reboot`` write through ``grub2-editenv``; this module writes the same two
keys with ``grub2-editenv FILE set``, on the file it resolved itself.

``panic=N rd.shell=0 rd.emergency=reboot`` are added to the new kernel's entry only
(its ``options`` line), so that a kernel that panics, or a dracut initramfs that
cannot mount the root file system, reboots into the saved default instead of waiting
at dracut's emergency shell (``panic=`` alone does not: dracut drops to the shell
unless ``rd.shell=0 rd.emergency=reboot`` are given); a key the entry has already
keeps its value.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

BLS_DIR = "/boot/loader/entries"
GRUBENV = "/boot/grub2/grubenv"
DEFAULT_GRUB = "/etc/default/grub"

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+~@:-]*$")


def is_bls(root):
    """This node lists its kernels as BLS entries for GRUB 2 (EL 8+, Fedora)."""
    return os.path.isdir(root_path(root, BLS_DIR)) and os.path.isdir(root_path(root, "/boot/grub2"))


def parse_entry(text):
    """{key: [values]} of one BLS entry file (``key value`` lines; ``#`` comments)."""
    keys = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        keys.setdefault(parts[0], []).append(parts[1] if len(parts) > 1 else "")
    return keys


def _release(keys):
    for linux in keys.get("linux", []):
        name = linux.rsplit("/", 1)[-1]
        if name.startswith("vmlinuz-"):
            return name[len("vmlinuz-"):]
    return (keys.get("version") or [None])[0]


def read_entries(root):
    """The BLS entries, by file name: [{title, id, path, release, recovery, file}] (``path``: the GRUB
    entry id, what ``saved_entry``/``next_entry`` hold)."""
    directory = root_path(root, BLS_DIR)
    entries = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".conf") or not _ID_RE.match(name[:-5]):
            continue
        keys = parse_entry(read_text(os.path.join(directory, name)))
        ident = name[:-5]
        release = _release(keys)
        title = (keys.get("title") or [ident])[0]
        entries.append({"title": title, "id": ident, "path": ident, "release": release,
                        "recovery": "rescue" in ident or "rescue" in (release or ""),
                        "file": "%s/%s" % (BLS_DIR, name)})
    return entries


def grub_default(root, paths=(DEFAULT_GRUB,)):
    """GRUB_DEFAULT (quotes removed) as the last of ``paths`` that sets it says (default
    ``/etc/default/grub``); None when none does. The one reader of GRUB_DEFAULT."""
    value = None
    for path in paths:
        for line in (read_text(root_path(root, path)) or "").splitlines():
            line = line.strip()
            if line.startswith("GRUB_DEFAULT="):
                value = line.split("=", 1)[1].strip().strip("\"'")
    return value


def check_saved(value):
    """NodefixError unless GRUB boots ``saved_entry``/``next_entry`` (``value``, GRUB_DEFAULT, is ``saved``)."""
    if value != "saved":
        raise NodefixError("GRUB_DEFAULT is %s in %s: GRUB ignores saved_entry and next_entry, so a kernel cannot be "
                           "booted once with a fallback; set GRUB_DEFAULT=saved (EL's default) and regenerate "
                           "grub.cfg (grub2-mkconfig) first" % ("missing" if value is None else repr(value), DEFAULT_GRUB))


def fallback_options(seconds):
    """What the one-shot entry needs to come back by itself: ``panic=N`` (a kernel that panics
    reboots after N seconds) and dracut's ``rd.shell=0 rd.emergency=reboot`` - an initramfs that
    cannot mount the root file system otherwise drops to an emergency shell and waits
    (dracut.cmdline(7): rd.emergency=reboot acts on a critical failure, rd.shell=0 must be given
    with it). [(key, token)]; none for 0 seconds."""
    if not seconds:
        return []
    return [("panic=", "panic=%d" % seconds), ("rd.shell=", "rd.shell=0"), ("rd.emergency=", "rd.emergency=reboot")]


def with_panic(text, seconds):
    """The entry's text with what ``fallback_options`` asks for on its (last) ``options`` line, each
    token only when the line has no value for its key already: unchanged when ``seconds`` is 0 or
    nothing is missing; None when it has no ``options`` line (the entry's options come from
    elsewhere - nothing is added)."""
    lines = (text or "").splitlines()
    options = [i for i, line in enumerate(lines) if line.strip().split(None, 1)[:1] == ["options"]]
    wanted = fallback_options(seconds)
    if not wanted:
        return text
    if not options:
        return None
    have = [tok for i in options for tok in lines[i].split()[1:]]
    missing = [token for key, token in wanted if not any(t.startswith(key) for t in have)]
    if not missing:
        return text
    last = options[-1]
    lines[last] = lines[last].rstrip() + " " + " ".join(missing)
    return "\n".join(lines) + "\n"


class Grub2(object):
    """``saved_entry``/``next_entry`` through ``grub2-editenv`` on the environment block ``grubenv``
    (the real path, any symlink resolved by the caller)."""

    def __init__(self, runner, grubenv):
        self.runner = runner
        self.grubenv = grubenv

    def _editenv(self, *args):
        tool = self.runner.bin("grub2-editenv")
        if tool is None:
            raise NodefixError("grub2-editenv was not found: this node's GRUB 2 tools (grub2-tools) are missing")
        self.runner.run([tool, self.grubenv] + list(args), msg="grub2-editenv %s %s failed" % (
            self.grubenv, " ".join(args)))

    def set_default(self, path):
        self._editenv("set", "saved_entry=%s" % path)

    def reboot_once(self, path):
        self._editenv("set", "next_entry=%s" % path)

    def unset_next(self):
        self._editenv("unset", "next_entry")
