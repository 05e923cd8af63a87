#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_boot
short_description: Boot a new kernel once through GRUB and keep it only when the node came back healthy on it
version_added: 1.1.0
description:
  - The fallback of a kernel upgrade. V(prepare), before the kernel package is installed, writes the drop-in and
    makes the running kernel GRUB's saved default, so that the C(grub.cfg) the package's own hook writes keeps the
    running kernel the default (the new one is never the default before it booted once, even if the run stops right
    after the install) and V(once) needs no second C(update-grub).
  - V(once) makes the running kernel GRUB's saved default and the new one the
    next boot only (C(grub-reboot)); if the new kernel does not come up, the next boot - after C(panic=N), or a
    power cycle - is the old kernel, by itself.
  - The drop-in C(/etc/default/grub.d/nodefix-k8s.cfg) sets C(GRUB_DEFAULT=saved) (what C(grub-reboot) and
    C(grub-set-default) need) and adds C(panic=N) to the kernel command line, so that a kernel - or Debian's
    initramfs - that cannot mount the root file system reboots instead of waiting at a shell;
    V(once) runs C(update-grub) when the drop-in changed, C(grub.cfg) is older than it, or an entry is missing.
  - V(confirm), after the reboot - running the new kernel and O(healthy) (the reboot path verified the node on it), it
    is kept and the node boots what its distribution would from then on - on Debian and Ubuntu the drop-in is removed
    and C(grub.cfg) regenerated (C(GRUB_DEFAULT) is the node's own again, C(0) by default - the newest kernel, so the
    next kernel the distribution's updates install boots), C(saved_entry) removed (set to the kept kernel only when
    the node's own C(GRUB_DEFAULT) is C(saved)); on EL the kept kernel is the saved default (C(kernel-install)
    moves it on with each new kernel). Running it but not O(healthy), or running another kernel - not kept, recorded
    in C(/var/lib/nodefix-k8s/kernel-boot.json) (with O(problems); the reboot detector of
    M(nodefix.k8s.node_audit) no longer counts it as a reason to reboot, and V(once) refuses it), the old kernel
    stays the saved default (a node on the new kernel is back on the old one at its next boot), and a C(next_entry)
    left over is cleared.
  - A one-shot boot needs GRUB to clear C(next_entry) at boot, which it can only do on a plain disk with a
    non-checksumming file system (the GRUB manual, "Environment block"). V(preflight) - run before the node is
    drained - and V(once) refuse a node whose C(grubenv) is on a device-mapper device (LVM, LUKS), MD RAID, ZFS or
    btrfs, or whose mount table (C(/proc/self/mountinfo)) does not say - there the new kernel would stay the default
    and a kernel that panics would boot again and again.
  - V(once) boots only a kernel that is installed - the package manager says so (dpkg C(ii); rpm) and its kernel and
    initramfs are in C(/boot).
  - V(disarm) - after an upgrade stopped between V(once) and V(confirm) (the run killed, the node lost, V(confirm)
    failed; the C(nodefix.k8s.rollout) action runs it when its record on the Node says so) - on a node running
    another kernel (the armed one never booted) puts GRUB's saved default on the RUNNING kernel, clears a
    C(next_entry) left and the record's C(pending) boot; the kernel is not recorded as failed (it may never have been
    tried). On a node that runs the armed kernel, never confirmed, that kernel is never made the default (V(confirm)
    keeps a kernel only when it booted and is healthy), the saved default is put on the PREVIOUS kernel (the record's
    C(pending.previous), else a saved default naming another kernel), the armed kernel is recorded as not kept
    (failed, C(unconfirmed)), and RV(held) says why a person decides; when the previous kernel cannot be told,
    nothing is changed (GRUB's default stays as it is, the record keeps C(pending)) and RV(held) says so.
    O(release) is the kernel the stopped upgrade armed (the record's C(pending) one first).
  - V(query) reads the entries, C(grubenv) and the record.
  - Debian and Ubuntu nodes (GRUB 2 with C(update-grub), C(grub-reboot), C(grub-set-default)).
  - EL 8+ and Fedora nodes, whose kernels are Boot Loader Specification entries (C(/boot/loader/entries/<id>.conf),
    written by C(kernel-install) when the kernel package is installed; GRUB's entry id is the file name without
    C(.conf)), work the same way without the drop-in and without regenerating C(grub.cfg) - C(GRUB_DEFAULT=saved)
    must be set in C(/etc/default/grub) already (EL's default; the module fails naming it otherwise, before writing
    anything); V(once) adds C(panic=N) to the new kernel's entry only (its C(options) line, kept with a backup; an
    entry with a C(panic=) keeps it) and writes C(saved_entry) and C(next_entry) with
    C(grub2-editenv /boot/grub2/grubenv set), what C(grub2-set-default) and C(grub2-reboot) do (a C(grubenv)
    symlink into the EFI system partition, EL 8 with UEFI, is followed).
  - On EL the kernel package's own C(kernel-install) makes the new kernel the default when
    C(/etc/sysconfig/kernel) says C(UPDATEDEFAULT=yes) (EL's default); V(once), run right after the install,
    makes the running kernel the default again - between the two tasks the new kernel is the default.
author:
  - nodefix.k8s developers (@nodefix)
options:
  state:
    description: V(query) reads; V(preflight) checks, before anything is drained, that a kernel can be booted once here;
      V(prepare) readies GRUB before the install; V(once) boots O(release) once at the next boot; V(confirm) keeps or
      records it; V(disarm) undoes an unconfirmed V(once).
    type: str
    choices: [query, preflight, prepare, once, confirm, disarm]
    default: query
  release:
    description: The new kernel's release (V(6.12.95+deb12-amd64)); required for V(once), V(confirm) and V(disarm).
    type: str
  panic_seconds:
    description:
      - The C(panic=N) the drop-in adds to the kernel command line - on EL and Fedora, to the new kernel's BLS entry,
        with dracut's C(rd.shell=0 rd.emergency=reboot) (an initramfs that cannot mount the root file system reboots
        instead of waiting at dracut's emergency shell; dracut.cmdline(7)); a key the entry has already keeps its value.
      - V(0), none - a kernel that cannot boot then waits until the node is power-cycled.
    type: int
    default: 10
  healthy:
    description: For V(confirm), whether the reboot path verified the node healthy on the new kernel; V(false), the kernel
      is not kept even if it booted.
    type: bool
    default: true
  problems:
    description: For V(confirm) with O(healthy=false), what was wrong (kept in the record).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
  - nodefix.k8s.root
attributes:
  check_mode:
    details: Reads and plans; runs no GRUB command and writes nothing (C(changed) says whether it would).
  diff_mode:
    details: The drop-in (on EL and Fedora, the new kernel's BLS entry) and the record before and after.
  platform:
    details: Debian and Ubuntu nodes booting through GRUB 2; EL 8+ and Fedora nodes booting BLS entries through GRUB 2.
seealso:
  - module: nodefix.k8s.kernel_package
  - name: GNU GRUB manual
    description: The environment block, C(GRUB_DEFAULT=saved), C(grub-reboot) and C(grub-set-default).
    link: https://www.gnu.org/software/grub/manual/grub/grub.html
  - name: Boot Loader Specification
    description: The entry files EL 8+ and Fedora list their kernels in.
    link: https://uapi-group.org/specifications/specs/boot_loader_specification/
"""

EXAMPLES = r"""
- name: Before the install - the running kernel stays the default whatever the package's hook writes
  nodefix.k8s.kernel_boot:
    state: prepare

- name: Boot the new kernel once; the running one stays the default
  nodefix.k8s.kernel_boot:
    state: once
    release: 6.12.95+deb12-amd64

- name: After the reboot - keep it, or record that it did not boot
  nodefix.k8s.kernel_boot:
    state: confirm
    release: 6.12.95+deb12-amd64
  register: boot

- name: An upgrade stopped between its one-time boot and the confirmation - the running kernel the default again
  nodefix.k8s.kernel_boot:
    state: disarm
    release: 6.12.95+deb12-amd64

- name: The same on an EL node (BLS entries; GRUB_DEFAULT=saved is EL's default)
  nodefix.k8s.kernel_boot:
    state: once
    release: 5.14.0-503.11.1.el9_5.x86_64
"""

RETURN = r"""
running_release:
  description: The kernel running now.
  returned: always
  type: str
  sample: 6.1.0-50-amd64
release:
  description: O(release).
  returned: always
  type: str
booted:
  description: For V(confirm), whether the node runs O(release).
  returned: state is confirm
  type: bool
fell_back:
  description: For V(confirm), whether the node came back on another kernel (O(release) failed to boot).
  returned: state is confirm
  type: bool
kept:
  description: For V(confirm), whether O(release) is kept - it booted and O(healthy) was true.
  returned: state is confirm
  type: bool
default:
  description: GRUB's saved default entry after the module (C(saved_entry)).
  returned: always
  type: str
  sample: gnulinux-advanced-9b1c>gnulinux-6.1.0-50-amd64-advanced-9b1c
next_entry:
  description: The entry booted once at the next boot (C(next_entry)), empty when none.
  returned: always
  type: str
entries:
  description: GRUB's boot entries (C(title), C(id), C(path), C(release), C(recovery); on EL and Fedora C(file), the BLS entry).
  returned: always
  type: list
  elements: dict
disarmed:
  description: For V(disarm), whether anything was armed or pending - a C(next_entry), a saved default on another
    kernel than the running one, the record's C(pending) boot - and is undone now (in check mode, would be).
  returned: state is disarm
  type: bool
pending:
  description: For V(disarm), the record's C(pending) boot before it was cleared (C(release), C(previous), C(at)), null
    when there was none.
  returned: state is disarm
  type: dict
unconfirmed:
  description: For V(disarm), whether the node runs the armed kernel and it was never confirmed (it is not kept).
  returned: state is disarm
  type: bool
held:
  description: For V(disarm), why a person decides - the armed kernel runs unconfirmed (not kept, GRUB's default back
    on the previous kernel) or the previous kernel could not be told (nothing changed); empty otherwise.
  returned: state is disarm
  type: str
record:
  description: The record of kernels booted and failed (C(/var/lib/nodefix-k8s/kernel-boot.json)).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot as kernel_boot_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_record as kernel_boot_record
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import package as kernel_package_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import distro as kernel_distro
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import file_diff
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import node_path, resolve_target
from ansible_collections.nodefix.k8s.plugins.module_utils._core.fileio import write_files


def _json(data):
    import json
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _write(module, root, path, text, edit=False, backup=True):
    """Write a file of the module's own (mode 0644, no backup) or, ``edit``, one the node has (a BLS entry:
    its mode and owner kept, a pruned ``backup`` - ``*.conf.<pid>.<time>~``, which GRUB does not read)."""
    real = resolve_target(root, node_path(root, path), what=path)
    parent = os.path.dirname(real)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    write_files(module, [(real, text)], backup=edit and backup, mode=None if edit else "0644")


def _restore_drop_in(module, root, before):
    """Undo a drop-in write: the text it had, or no file when there was none."""
    if before is None:
        os.unlink(resolve_target(root, node_path(root, kernel_boot_lib.DROP_IN)))
    else:
        _write(module, root, kernel_boot_lib.DROP_IN, before)


def _installed(module, runner, root, st, release):
    """(installed, why): the package manager says so and the boot files are there (_kernel.package.installed);
    in check mode (True, None) - the kernel may be one the same run would have installed first."""
    if module.check_mode:
        return True, None
    family = kernel_distro.family(root) or ("el" if st["flavour"] == "bls" else "debian")
    pm = kernel_package_lib.Dnf(runner, root=root) if family == "el" else kernel_package_lib.Apt(runner)
    return kernel_package_lib.installed(pm, root, release)


def _once_bls(module, runner, root, p, st, result, present, why):
    """``once`` on an EL/Fedora node: panic= on the new kernel's BLS entry, saved_entry, next_entry."""
    release = p["release"]
    plan = kernel_boot_lib.plan_once_bls(st, root, release, p["panic_seconds"], present, why)
    record = dict(st["record"], pending={"release": release, "previous": st["running_release"], "at": kernel_boot_lib.stamp()})
    result["changed"] = plan["changed"]
    result["diff"] = [file_diff(plan["entry_file"], plan["entry_before"], plan["entry_after"])]
    result.update(default=plan["fallback"], next_entry=plan["target"])
    if not plan["panic"] and p["panic_seconds"]:
        module.warn("%s has no options line: panic=%d was not added - a kernel that cannot mount its root file system "
                    "waits until the node is power-cycled" % (plan["entry_file"], p["panic_seconds"]))
    if module.check_mode or not plan["changed"]:
        return
    wrote = plan["entry_after"] != plan["entry_before"]
    grub = kernel_boot_lib.tools(runner, st)
    try:
        if wrote:
            _write(module, root, plan["entry_file"], plan["entry_after"], edit=True)
        grub.set_default(plan["fallback"])
        grub.reboot_once(plan["target"])
    except NodefixError as exc:
        if wrote:
            _write(module, root, plan["entry_file"], plan["entry_before"], edit=True, backup=False)
        raise NodefixError("%s; %s was put back" % (getattr(exc, "msg", exc), plan["entry_file"]))
    _write(module, root, kernel_boot_record.RECORD, _json(record))


def _once(module, runner, root, p, st, result):
    release = p["release"]
    present, why = _installed(module, runner, root, st, release)
    if st["flavour"] == "bls":
        return _once_bls(module, runner, root, p, st, result, present, why)
    plan = kernel_boot_lib.plan_once(st, release, p["panic_seconds"], present, why, root)
    record = dict(st["record"], pending={"release": release, "previous": st["running_release"], "at": kernel_boot_lib.stamp()})
    result["changed"] = plan["changed"]
    result["diff"] = [file_diff(kernel_boot_lib.DROP_IN, st["drop_in"] or "", plan["drop_in"])]
    if module.check_mode or not plan["changed"]:
        result.update(default=plan["fallback"], next_entry=plan["target"])
        return
    grub = kernel_boot_lib.Grub(runner)
    before = st["drop_in"]
    try:
        if plan["update_grub"]:
            _write(module, root, kernel_boot_lib.DROP_IN, plan["drop_in"])
            grub.update()
            st = kernel_boot_lib.state(root)
        fallback = kernel_boot_lib._entry_path(st["entries"], st["running_release"], "the running kernel, the fallback")
        target = kernel_boot_lib._entry_path(st["entries"], release, "is linux-image-%s installed?" % release)
        grub.set_default(fallback)
        grub.reboot_once(target)
    except NodefixError as exc:
        if plan["update_grub"]:  # undo: the drop-in as it was, grub.cfg regenerated from it
            _restore_drop_in(module, root, before)
            grub.update()
        raise NodefixError("%s; the drop-in and grub.cfg were put back" % getattr(exc, "msg", exc))
    _write(module, root, kernel_boot_record.RECORD, _json(record))
    result.update(default=fallback, next_entry=target)


def _prepare(module, runner, root, p, st, result):
    plan = kernel_boot_lib.plan_prepare(st, p["panic_seconds"])
    result["changed"] = plan["changed"]
    if plan["drop_in"] is not None:
        result["diff"] = [file_diff(kernel_boot_lib.DROP_IN, st["drop_in"] or "", plan["drop_in"])]
    result["default"] = plan["fallback"] or st["grubenv"].get("saved_entry")
    if module.check_mode or not plan["changed"]:
        return
    # an unchanged drop-in is not rewritten: its mtime would make grub.cfg look stale to `once`
    wrote = plan["drop_in"] is not None and plan["drop_in"] != st["drop_in"]
    if wrote:
        _write(module, root, kernel_boot_lib.DROP_IN, plan["drop_in"])
    try:
        if plan["set_default"] is not None:
            kernel_boot_lib.tools(runner, st).set_default(plan["set_default"])
    except NodefixError as exc:
        if wrote:
            _restore_drop_in(module, root, st["drop_in"])
        raise NodefixError("%s; the drop-in was put back" % getattr(exc, "msg", exc))


def _confirm(module, runner, root, p, st, result):
    """After the reboot. Booted and healthy: kept - the node boots what its distribution would from now on
    (Debian/Ubuntu: plan_keep; EL: the saved default, which kernel-install moves on with each new kernel).
    Booted but not healthy, or not booted: recorded as failed, the old kernel stays the saved default - the
    node is on it at its next boot - and never tried again by itself."""
    release = p["release"]
    running = st["running_release"]
    record = dict(st["record"], pending=None)
    env = st["grubenv"]
    grub = kernel_boot_lib.tools(runner, st)
    booted = running == release
    kept = booted and p["healthy"]
    result.update(booted=booted, fell_back=not booted, kept=kept)
    keep = None
    if kept:
        target = kernel_boot_lib._entry_path(st["entries"], release, "the kernel running", st["source"])
        # a release confirmed before keeps its first time: a second confirm changes nothing
        record["booted"] = dict(record["booted"], **{release: record["booted"].get(release) or {"at": kernel_boot_lib.stamp()}})
        if st["flavour"] == "grub":
            keep = kernel_boot_lib.plan_keep(st, root, target)
            todo = keep["changed"]
            result["default"] = target if keep["own_default"] == "saved" else "GRUB_DEFAULT=%s" % keep["own_default"]
        else:
            todo = env.get("saved_entry") != target
            result["default"] = target
    else:
        failed = record["failed"].get(release)
        why = {"came_back_on": running} if not booted else {
            "came_back_on": running, "unhealthy": list(p["problems"] or ["the node was not verified healthy"])}
        if not failed or any(failed.get(k) != v for k, v in why.items()):
            failed = dict(why, at=kernel_boot_lib.stamp())
        record["failed"] = dict(record["failed"], **{release: failed})
        todo = bool(env.get("next_entry"))
        result["default"] = env.get("saved_entry")
        if booted:
            module.warn("kernel %s booted but the node was not healthy (%s): not kept - GRUB's saved default is still "
                        "the previous kernel, which the node boots at its next reboot; %s is not tried again"
                        % (release, "; ".join(why["unhealthy"]), release))
    new = _json(record)
    old = _json(st["record"]) if st["record"] != {"booted": {}, "failed": {}, "pending": None} else ""
    result["changed"] = todo or new != old
    result["diff"] = [file_diff(kernel_boot_record.RECORD, old, new)]
    if keep is not None and keep["remove_drop_in"]:
        result["diff"].append(file_diff(kernel_boot_lib.DROP_IN, st["drop_in"], ""))
    result["record"] = record
    if module.check_mode or not result["changed"]:
        return
    if keep is not None:
        _keep(module, runner, root, st, keep)
    elif kept and todo:
        grub.set_default(target)
    if not kept and todo:
        grub.unset_next()
    _write(module, root, kernel_boot_record.RECORD, new)


def _keep(module, runner, root, st, keep):
    """plan_keep's changes; the drop-in and grub.cfg put back when a GRUB command fails."""
    grub = kernel_boot_lib.Grub(runner)
    try:
        if keep["remove_drop_in"]:
            os.unlink(resolve_target(root, node_path(root, kernel_boot_lib.DROP_IN)))
            grub.update()
        if keep["set_default"]:
            grub.set_default(keep["set_default"])
        if keep["unset_saved"]:
            grub.unset_saved()
    except (NodefixError, OSError) as exc:
        if keep["remove_drop_in"]:
            _restore_drop_in(module, root, st["drop_in"])
            grub.update()
        raise NodefixError("%s; the drop-in and grub.cfg were put back" % (getattr(exc, "msg", None) or exc))


def _disarm(module, runner, root, p, st, result):
    """An unconfirmed ``once`` undone (``plan_disarm``): the saved default on the running kernel - or, when the node
    runs the armed kernel unconfirmed, on the previous one with the armed kernel recorded as not kept (``held``) -
    ``next_entry`` and the record's ``pending`` cleared. The previous kernel not known: nothing changed (``held``)."""
    plan = kernel_boot_lib.plan_disarm(st, p["release"])
    result.update(unconfirmed=bool(plan["unconfirmed"]), held=plan["held"])
    if plan["held"]:
        module.warn(plan["held"])
    if plan["unconfirmed"] and plan["fallback"] is None:  # fail closed: nothing is changed
        result.update(changed=False, disarmed=False, pending=plan["pending"])
        return
    record = dict(st["record"], pending=None)
    if plan["not_kept"]:
        release = plan["unconfirmed"]
        failed = st["record"]["failed"].get(release)
        if not failed or any(failed.get(k) != v for k, v in plan["not_kept"].items()):
            failed = dict(plan["not_kept"], at=kernel_boot_lib.stamp())
        record["failed"] = dict(st["record"]["failed"], **{release: failed})
    result.update(changed=plan["changed"], disarmed=plan["changed"], pending=plan["pending"], default=plan["fallback"],
                  next_entry="", record=record)
    write = record != st["record"]
    if write:
        result["diff"] = [file_diff(kernel_boot_record.RECORD, _json(st["record"]), _json(record))]
    if module.check_mode or not plan["changed"]:
        if module.check_mode:
            result.update(default=st["grubenv"].get("saved_entry"), next_entry=st["grubenv"].get("next_entry", ""),
                          record=st["record"])
        return
    grub = kernel_boot_lib.tools(runner, st)
    if plan["set_default"]:
        grub.set_default(plan["set_default"])
    if plan["unset_next"]:
        grub.unset_next()
    if write:
        _write(module, root, kernel_boot_record.RECORD, _json(record))


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            state=dict(type="str", choices=["query", "preflight", "prepare", "once", "confirm", "disarm"],
                       default="query"),
            release=dict(type="str"),
            panic_seconds=dict(type="int", default=10),
            healthy=dict(type="bool", default=True),
            problems=dict(type="list", elements="str", default=[]),
            root=dict(type="path", default="/"),
        ),
        required_if=[("state", "once", ["release"]), ("state", "confirm", ["release"]), ("state", "disarm", ["release"])],
        supports_check_mode=True,
    )
    p = module.params
    root = p["root"]
    if p["panic_seconds"] < 0:
        module.fail_json(msg="panic_seconds must be 0 (no panic=) or more, got %d" % p["panic_seconds"])
    if p["release"] is not None and not kernel_boot_lib.RELEASE_RE.match(p["release"]):
        module.fail_json(msg="release %r is not a kernel release (e.g. 6.12.95+deb12-amd64)" % p["release"])
    runner = Runner(module)
    result = {"changed": False, "release": p["release"]}
    try:
        st = kernel_boot_lib.state(root)
        result.update(running_release=st["running_release"], entries=st["entries"], record=st["record"],
                      default=st["grubenv"].get("saved_entry"), next_entry=st["grubenv"].get("next_entry", ""))
        if p["state"] == "preflight":
            kernel_boot_lib.preflight(st, root)
        elif p["state"] == "prepare":
            _prepare(module, runner, root, p, st, result)
        elif p["state"] == "once":
            _once(module, runner, root, p, st, result)
        elif p["state"] == "confirm":
            _confirm(module, runner, root, p, st, result)
        elif p["state"] == "disarm":
            _disarm(module, runner, root, p, st, result)
    except NodefixError as exc:
        kwargs = exc.fail_kwargs() if isinstance(exc, NodefixError) else {"msg": exc.msg}
        module.fail_json(**kwargs)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
