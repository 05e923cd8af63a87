# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Boot a new kernel once, keep it only when the node is healthy on it (GRUB 2).

How GRUB does it (https://www.gnu.org/software/grub/manual/grub/grub.html,
"Environment block" and ``grub-reboot``): with ``GRUB_DEFAULT=saved`` GRUB boots
``saved_entry`` from ``/boot/grub/grubenv``; ``grub-reboot ENTRY`` sets
``next_entry``, which GRUB's own ``grub.cfg`` (``00_header``) boots once and
clears before booting it. So:

0. ``prepare``, before the kernel package is installed: a drop-in
   ``/etc/default/grub.d/nodefix-k8s.cfg`` sets ``GRUB_DEFAULT=saved`` and
   ``panic=N`` on the kernel command line (a kernel, or Debian's initramfs, that
   cannot mount the root file system reboots after N seconds instead of waiting
   at a shell; initramfs-tools' ``panic()`` honours ``panic=``), and
   ``grub-set-default`` the running kernel's entry. The package's own hook
   (``/etc/kernel/postinst.d/zz-update-grub``) then writes a ``grub.cfg`` that
   keeps the running kernel the default - the new one is never the default
   before it was booted once, even if the run stops right after the install -
   and ``once`` needs no second ``update-grub``;
1. ``once``: the same drop-in; ``update-grub`` when ``grub.cfg`` is older than
   the drop-in or lacks an entry; ``grub-set-default`` the running kernel's
   entry (the fallback); ``grub-reboot`` the new kernel's entry;
2. the node reboots (the reboot role): GRUB boots the new kernel once. If it
   does not come up, the next boot - by ``panic=``, or a power cycle - is the
   saved default: the old kernel;
3. ``confirm``: running the new kernel -> ``grub-set-default`` it (it is now the
   default); running anything else -> the new kernel failed: recorded in
   ``/var/lib/nodefix-k8s/kernel-boot.json`` (the reboot detector no longer
   counts it as a reason to reboot) and never tried again by itself.

Debian and Ubuntu (``update-grub``, ``grub-reboot``). EL 8+ and Fedora list their
kernels as Boot Loader Specification entries instead: the same steps there are in
``_kernel.boot_bls`` (no drop-in and no ``grub.cfg`` regeneration; ``panic=`` on
the new kernel's entry; ``saved_entry``/``next_entry`` through ``grub2-editenv``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_bls as kernel_boot_bls
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import mountinfo_entries
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import node_path, read_text, resolve_target, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel.detect import read_running_release
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel.boot_record import RECORD, read_record

GRUB_CFG = "/boot/grub/grub.cfg"
GRUBENV = "/boot/grub/grubenv"
DROP_IN = "/etc/default/grub.d/nodefix-k8s.cfg"

_ENTRY_RE = re.compile(r"^\s*(menuentry|submenu)\s+'((?:[^']|'\\'')*)'(.*?)\{\s*$")
_ID_RE = re.compile(r"\$menuentry_id_option\s+'([^']+)'")
_LINUX_RE = re.compile(r"^\s*linux(?:efi)?\s+\S*/vmlinuz-(\S+)")


def parse_grub_cfg(text):
    """The boot entries of a ``grub.cfg``: [{title, id, path, release, recovery}], in file order.

    ``path`` is what ``grub-reboot``/``grub-set-default`` take: the entry's id, prefixed
    by its submenu's id and ``>`` when it is inside one (Debian's "Advanced options").
    """
    entries = []
    stack = []  # open blocks: ("submenu", id) or ("menuentry", entry) or ("other", None)
    for line in (text or "").splitlines():
        m = _ENTRY_RE.match(line)
        if m:
            kind, title, rest = m.group(1), m.group(2).replace("'\\''", "'"), m.group(3)
            ident = _ID_RE.search(rest)
            ident = ident.group(1) if ident else title
            if kind == "submenu":
                stack.append(("submenu", ident))
            else:
                parents = [v for k, v in stack if k == "submenu"]
                entry = {"title": title, "id": ident, "path": ">".join(parents + [ident]), "release": None,
                         "recovery": "recovery mode" in title}
                entries.append(entry)
                stack.append(("menuentry", entry))
            continue
        stripped = line.strip()
        if stripped.endswith("{") and not stripped.startswith("#"):
            stack.append(("other", None))
            continue
        if stripped == "}" and stack:
            stack.pop()
            continue
        lm = _LINUX_RE.match(line)
        if lm and stack and stack[-1][0] == "menuentry" and stack[-1][1]["release"] is None:
            stack[-1][1]["release"] = lm.group(1)
    return entries


def entry_for(entries, release):
    """The normal (not recovery) entry booting ``release``; None when grub.cfg has none.

    An entry of the "Advanced options" submenu first: it names one kernel for good, where
    Debian's first, plain entry boots whichever kernel is newest - as a saved default, it
    would move to the next kernel installed, before anyone verified it."""
    normal = [e for e in entries if e["release"] == release and not e["recovery"]]
    pinned = [e for e in normal if ">" in e["path"]]
    return (pinned or normal or [None])[0]


def node_grub_default(root):
    """GRUB_DEFAULT as the node sets it without the collection's drop-in: the last assignment in
    /etc/default/grub and /etc/default/grub.d/*.cfg (in the order grub-mkconfig sources them);
    ``0`` (GRUB's own default: the first entry, the newest kernel on Debian and Ubuntu) when none."""
    try:
        parts = ["/etc/default/grub.d/" + n for n in sorted(os.listdir(root_path(root, "/etc/default/grub.d")))
                 if n.endswith(".cfg") and "/etc/default/grub.d/" + n != DROP_IN]
    except OSError:
        parts = []
    value = kernel_boot_bls.grub_default(root, [kernel_boot_bls.DEFAULT_GRUB] + parts)
    return "0" if value is None else value


def plan_keep(st, root, target):
    """What ``confirm`` does for a kernel that booted and was verified healthy on a Debian/Ubuntu node:
    give the node back the boot its distribution would make - the drop-in removed (GRUB_DEFAULT is the
    node's own again: on Debian and Ubuntu ``0``, the newest kernel - never pinned to the one confirmed,
    so the next kernel the distribution's updates install boots), ``update-grub``, and ``saved_entry``
    set to the confirmed kernel only when the node's own GRUB_DEFAULT is ``saved`` (else removed).
    {remove_drop_in, own_default, set_default, unset_saved, changed}."""
    own = node_grub_default(root)
    saved = st["grubenv"].get("saved_entry")
    set_default = target if own == "saved" and saved != target else None
    unset_saved = own != "saved" and saved is not None
    remove = st["drop_in"] is not None
    return {"remove_drop_in": remove, "own_default": own, "set_default": set_default, "unset_saved": unset_saved,
            "changed": bool(remove or set_default or unset_saved)}


MOUNTINFO = "/proc/self/mountinfo"
# Where GRUB cannot write its environment block (the GRUB manual, "Environment block": only a plain
# disk - no LVM or RAID - and a non-checksumming file system - no ZFS; copy-on-write btrfs is the
# same case for GRUB 2.06/2.12): next_entry is never cleared there, so a one-shot boot repeats.
ENV_UNWRITABLE_FS = ("zfs", "btrfs")


def mount_of(root, path):
    """(mount point, fs type, source) of the mount holding ``path`` on the node, from its
    /proc/self/mountinfo (the longest mount point that is a prefix); None when it cannot be read."""
    best = None
    for point, fstype, source in mountinfo_entries(read_text(root_path(root, MOUNTINFO))):
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if fstype and source and inside and (best is None or len(point) >= len(best[0])):
            best = (point, fstype, source)
    return best


def env_block_problem(root, path):
    """Why GRUB could not clear ``next_entry`` in the environment block at ``path`` (None: it can):
    a copy-on-write or checksumming file system, a device-mapper device (LVM, LUKS) or MD RAID - or
    a mount table that cannot be read (nothing can be told: refused too)."""
    mount = mount_of(root, path)
    if mount is None:
        return "the mount holding %s cannot be found in %s: whether GRUB can write it cannot be told" % (path, MOUNTINFO)
    point, fstype, source = mount
    if fstype in ENV_UNWRITABLE_FS:
        return "%s is on a %s file system (%s)" % (path, fstype, point)
    if source.startswith(("/dev/mapper/", "/dev/dm-")):
        return "%s is on the device-mapper device %s (LVM or LUKS)" % (path, source)
    if re.match(r"^/dev/md[0-9_a-z/]*$", source):
        return "%s is on the MD RAID device %s" % (path, source)
    return None


def read_grubenv(text):
    """{key: value} of a GRUB environment block (``key=value`` lines, ``#`` padding)."""
    env = {}
    for line in (text or "").splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        env[key] = value
    return env


def drop_in_text(panic_seconds):
    """The drop-in's bytes: GRUB_DEFAULT=saved, and panic=N added to the command line (0: not added)."""
    lines = ["# nodefix.k8s.kernel: boot a new kernel once (grub-reboot) and keep the last one verified",
             "# healthy as the default (grub-set-default); see the kernel role's README.",
             "GRUB_DEFAULT=saved"]
    if panic_seconds:
        lines.append('GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX panic=%d"' % panic_seconds)
    return "\n".join(lines) + "\n"


def state(root="/"):
    """Everything the boot plan reads: the running kernel, grub.cfg's entries, grubenv, the drop-in, the record."""
    cfg = read_text(root_path(root, GRUB_CFG))
    if cfg is None and kernel_boot_bls.is_bls(root):
        return bls_state(root)
    if cfg is None:
        raise NodefixError("%s is missing and there is no %s with /boot/grub2: this node does not boot through GRUB 2 "
                           "as Debian and Ubuntu (grub.cfg) or EL and Fedora (BLS entries) install it"
                           % (GRUB_CFG, kernel_boot_bls.BLS_DIR))
    return {
        "flavour": "grub",
        "source": GRUB_CFG,
        "running_release": read_running_release(root),
        "entries": parse_grub_cfg(cfg),
        "grubenv": read_grubenv(read_text(root_path(root, GRUBENV))),
        "drop_in": read_text(root_path(root, DROP_IN)),
        "record": read_record(root),
        # grub.cfg older than the drop-in: written before it, without its settings
        "cfg_stale": _mtime(root, GRUB_CFG) < (_mtime(root, DROP_IN) or 0),
    }


def bls_state(root):
    """``state`` of an EL/Fedora node: BLS entries, ``/boot/grub2/grubenv`` (symlink followed), GRUB_DEFAULT."""
    grubenv = resolve_target(root, node_path(root, kernel_boot_bls.GRUBENV), what=kernel_boot_bls.GRUBENV)
    return {
        "flavour": "bls",
        "source": kernel_boot_bls.BLS_DIR,
        "running_release": read_running_release(root),
        "entries": kernel_boot_bls.read_entries(root),
        "grubenv": read_grubenv(read_text(grubenv)),
        "grubenv_path": grubenv,
        "grub_default": kernel_boot_bls.grub_default(root),
        "drop_in": None,
        "record": read_record(root),
        "cfg_stale": False,
    }


def tools(runner, st):
    """The commands that set ``saved_entry``/``next_entry`` on this node's flavour of GRUB 2."""
    return kernel_boot_bls.Grub2(runner, st["grubenv_path"]) if st["flavour"] == "bls" else Grub(runner)


def _mtime(root, path):
    try:
        return os.stat(root_path(root, path)).st_mtime_ns
    except OSError:
        return None


def stamp(clock=time.time):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


class Grub(object):
    """The GRUB commands, through the collection's Runner (argv lists, C locale)."""

    def __init__(self, runner):
        self.runner = runner

    def _bin(self, name):
        path = self.runner.bin(name)
        if path is None:
            raise NodefixError("%s was not found: this node does not boot through GRUB 2 as Debian and Ubuntu install "
                               "it (grub2-common)" % name)
        return path

    def update(self):
        tool = self.runner.bin("update-grub")
        argv = [tool] if tool else [self._bin("grub-mkconfig"), "-o", GRUB_CFG]
        self.runner.run(argv, msg="%s failed: grub.cfg was not regenerated" % " ".join(argv))

    def set_default(self, path):
        self.runner.run([self._bin("grub-set-default"), path], msg="grub-set-default %s failed" % path)

    def reboot_once(self, path):
        self.runner.run([self._bin("grub-reboot"), path], msg="grub-reboot %s failed" % path)

    def unset_next(self):
        self.runner.run([self._bin("grub-editenv"), GRUBENV, "unset", "next_entry"],
                        msg="grub-editenv unset next_entry failed")

    def unset_saved(self):
        self.runner.run([self._bin("grub-editenv"), GRUBENV, "unset", "saved_entry"],
                        msg="grub-editenv unset saved_entry failed")


def _entry_path(entries, release, what, source=GRUB_CFG):
    entry = entry_for(entries, release)
    if entry is None:
        raise NodefixError("no GRUB entry in %s boots %s (%s)" % (source, release, what))
    return entry["path"]


def _check_once(st, release, kernel_present, why=None):
    running = st["running_release"]
    if not kernel_present:
        raise NodefixError("kernel %s is not installed (%s): install it first - a kernel is booted once only when its "
                           "package is installed and its boot files are there"
                           % (release, why or "/boot/vmlinuz-%s is missing" % release))
    if release == running:
        raise NodefixError("kernel %s is the one running: there is nothing to boot once" % release)
    if release in st["record"]["failed"]:
        raise NodefixError("kernel %s failed to boot on this node before (%s, %s): it is not tried again; remove its "
                           "entry from %s to try once more" % (release, st["record"]["failed"][release].get("at"),
                                                               RECORD, RECORD))


def check_env_block(root, path):
    """NodefixError when GRUB cannot clear ``next_entry`` after a one-shot boot (env_block_problem):
    there, ``grub-reboot``'s entry would stay the default and a new kernel that panics would boot
    again and again - the one-shot path is refused before anything is drained or written."""
    problem = env_block_problem(root, path)
    if problem:
        raise NodefixError("a kernel cannot be booted once here: %s, where GRUB cannot write its environment block "
                           "(the GRUB manual, \"Environment block\": a plain disk and a non-checksumming file system "
                           "only), so next_entry would never be cleared and a kernel that fails would boot again and "
                           "again. Upgrade this node's kernel by hand, with console access" % problem)


def env_path(st, root):
    """The environment block's path on the node (BLS: the file ``/boot/grub2/grubenv`` resolves to)."""
    if st["flavour"] != "bls":
        return GRUBENV
    return st["grubenv_path"] if root in ("/", "") else "/" + os.path.relpath(st["grubenv_path"], root)


def preflight(st, root):
    """Whether a kernel can be booted once on this node, checked before anything is drained or
    written: GRUB can clear ``next_entry`` (check_env_block) and, on BLS nodes, boots saved entries."""
    if st["flavour"] == "bls":
        kernel_boot_bls.check_saved(st["grub_default"])
    check_env_block(root, env_path(st, root))


def plan_once(st, release, panic_seconds, kernel_present, why=None, root="/"):
    """What ``once`` changes: {drop_in, update_grub, fallback, target, changed} (entry paths as grub.cfg has
    them now: None for one only ``update-grub`` will add)."""
    _check_once(st, release, kernel_present, why)
    check_env_block(root, env_path(st, root))
    running = st["running_release"]
    drop_in = drop_in_text(panic_seconds)
    fallback = entry_for(st["entries"], running)
    target = entry_for(st["entries"], release)
    update = drop_in != st["drop_in"] or st["cfg_stale"] or fallback is None or target is None
    env = st["grubenv"]
    return {
        "drop_in": drop_in,
        "update_grub": update,
        "fallback": fallback["path"] if fallback else None,
        "target": target["path"] if target else None,
        "changed": bool(update or env.get("saved_entry") != fallback["path"] or env.get("next_entry") != target["path"]),
    }


def plan_once_bls(st, root, release, panic_seconds, kernel_present, why=None):
    """What ``once`` changes on a BLS node: {entry_file, entry_before, entry_after, panic, fallback, target,
    changed}; ``entry_after`` is the new kernel's entry with ``panic=N`` (None: no ``options`` line to add it to)."""
    _check_once(st, release, kernel_present, why)
    kernel_boot_bls.check_saved(st["grub_default"])
    check_env_block(root, env_path(st, root))
    fallback = _entry_path(st["entries"], st["running_release"], "the running kernel: it would be the fallback",
                           kernel_boot_bls.BLS_DIR)
    target = entry_for(st["entries"], release)
    if target is None:
        raise NodefixError("no BLS entry in %s boots %s: the kernel package's kernel-install did not write one "
                           "(kernel-install add %s /lib/modules/%s/vmlinuz writes it)"
                           % (kernel_boot_bls.BLS_DIR, release, release, release))
    before = read_text(root_path(root, target["file"])) or ""
    after = kernel_boot_bls.with_panic(before, panic_seconds)
    env = st["grubenv"]
    return {
        "entry_file": target["file"],
        "entry_before": before,
        "entry_after": after if after is not None else before,
        "panic": after is not None and bool(panic_seconds),
        "fallback": fallback,
        "target": target["path"],
        "changed": bool((after is not None and after != before) or env.get("saved_entry") != fallback
                        or env.get("next_entry") != target["path"]),
    }


def plan_prepare(st, panic_seconds):
    """What ``prepare`` changes: {drop_in, fallback, set_default, changed}: the drop-in, and the running kernel's
    entry as the saved default (``fallback``; None when grub.cfg has none yet: ``once`` sets it after its
    ``update-grub``), ``set_default`` that entry when it is not the saved one already (else None)."""
    if st["flavour"] == "bls":
        kernel_boot_bls.check_saved(st["grub_default"])
    drop_in = drop_in_text(panic_seconds) if st["flavour"] == "grub" else None  # BLS: no drop-in
    fallback = entry_for(st["entries"], st["running_release"])
    fallback = fallback["path"] if fallback else None
    set_default = fallback if fallback is not None and st["grubenv"].get("saved_entry") != fallback else None
    return {
        "drop_in": drop_in,
        "fallback": fallback,
        "set_default": set_default,
        "changed": drop_in != st["drop_in"] or set_default is not None,
    }


def _previous_entry(st, armed, pending):
    """(path, "") of the kernel that was GRUB's default before ``armed`` was armed - the record's pending boot's
    ``previous`` (the kernel ``once`` ran on), else GRUB's saved default when it names another kernel's entry (``once``
    put it there) - or (None, why) when it cannot be told."""
    previous = (pending or {}).get("previous")
    if previous and previous != armed:
        entry = entry_for(st["entries"], previous)
        if entry is None:
            return None, "the previous kernel %s has no GRUB entry in %s" % (previous, st["source"])
        return entry["path"], ""
    saved = st["grubenv"].get("saved_entry")
    for entry in st["entries"]:
        if saved and saved in (entry["path"], entry.get("id")) and entry["release"] not in (None, armed) \
                and not entry["recovery"]:
            return entry["path"], ""
    return None, ("neither the record's pending boot nor GRUB's saved default (%s) names the kernel that was the "
                  "default before it was armed" % (saved or "none"))


def plan_disarm(st, release=None):
    """What ``disarm`` changes - after a kernel upgrade stopped between arming its one-time boot (``once``) and its
    confirmation (the run killed, the node lost, ``confirm`` failed): {fallback, set_default, unset_next, pending,
    unconfirmed, not_kept, held, changed}. The armed kernel is the record's ``pending`` one (else ``release``).

    - the node runs another kernel (the armed one never booted): GRUB's saved default is put on the RUNNING kernel
      (``fallback``; ``set_default`` when it is not the saved one already), a ``next_entry`` left is cleared
      (``unset_next``), the record's ``pending`` boot cleared (``pending``: what it was); the armed kernel is not
      recorded as failed (it may never have been tried);
    - the node runs the armed kernel, never confirmed (``unconfirmed``: its release): it booted but its health was
      never checked, so it is never made the default (``confirm`` keeps a kernel only when it booted AND is healthy):
      the saved default is put on the PREVIOUS kernel (``_previous_entry``), the armed one recorded as not kept
      (``not_kept``: the record's ``failed`` entry, as ``confirm`` records a kernel that failed) and ``held`` says why
      a person decides. When the previous kernel cannot be told, nothing is changed (fail closed: GRUB's default is
      not touched, the record keeps ``pending``) and ``held`` says so.

    NodefixError when no entry boots the running kernel in the first case (nothing is changed then)."""
    env = st["grubenv"]
    record = st["record"] or {}
    pending = record.get("pending")
    armed = (pending or {}).get("release") or release
    running = st["running_release"]
    unset_next = bool(env.get("next_entry"))
    if armed and running == armed and armed not in (record.get("booted") or {}):
        fallback, why = _previous_entry(st, armed, pending)
        plan = {"fallback": fallback, "unset_next": unset_next, "pending": pending, "unconfirmed": armed,
                "not_kept": None, "set_default": None, "changed": False}
        if fallback is None:
            plan["held"] = ("kernel %s booted but was never confirmed healthy, and %s: GRUB's default was left as it is "
                            "(%s) - a person chooses the kernel to keep (nodefix.k8s.kernel_boot state=confirm, or "
                            "grub-set-default by hand)" % (armed, why, env.get("saved_entry") or "none"))
            return plan
        plan.update(
            set_default=fallback if env.get("saved_entry") != fallback else None,
            not_kept={"came_back_on": running, "unconfirmed": True,
                      "unhealthy": ["booted, but its health was never confirmed: the upgrade stopped before "
                                    "kernel_boot state=confirm"]},
            held=("kernel %s booted but was never confirmed healthy: not kept (recorded as failed in %s), GRUB's "
                  "default is back on the previous kernel (%s) - the node runs %s until its next reboot; a person "
                  "checks it and reboots it onto the previous kernel, or keeps %s by hand (kernel_boot state=confirm)"
                  % (armed, RECORD, fallback, armed, armed)),
            changed=True)
        return plan
    fallback = _entry_path(st["entries"], running, "the running kernel: GRUB's default cannot be put back on it",
                           st["source"])
    set_default = fallback if env.get("saved_entry") != fallback else None
    return {"fallback": fallback, "set_default": set_default, "unset_next": unset_next, "pending": pending,
            "unconfirmed": None, "not_kept": None, "held": "", "changed": bool(set_default or unset_next or pending)}


# a kernel release as uname -r prints it: no path separators, no spaces, no shell words
RELEASE_RE = re.compile(r"^[0-9]+\.[0-9]+[0-9A-Za-z.+_~-]*$")
