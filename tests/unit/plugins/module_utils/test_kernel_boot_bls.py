# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kernel_boot on an EL 9 node tree: BLS entries as kernel-install writes them (a rescue entry
included), /boot/grub2/grubenv, /etc/default/grub; grub2-editenv as a table."""

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot as kernel_boot_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_record as kernel_boot_record
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_bls as kernel_boot_bls
from ansible_collections.nodefix.k8s.plugins.modules import kernel_boot
# the same stand-in for "is this kernel's package installed" (autouse)
from plugins.modules.test_kernel_boot import package_installed  # noqa: F401 pylint: disable=unused-import

MID = "9b1c0e2d4a5f4b6c8d7e6f5a4b3c2d1e"
OLD, NEW = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-503.11.1.el9_5.x86_64"
BINS = {"grub2-editenv": "/usr/bin/grub2-editenv"}


def entry(release, options="root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M resume=/dev/mapper/rl-swap"):
    return ("title Rocky Linux (%s) 9.5 (Blue Onyx)\nversion %s\nlinux /vmlinuz-%s\ninitrd /initramfs-%s.img $tuned_initrd\n"
            "options %s\ngrub_users $grub_users\ngrub_arg --unrestricted\ngrub_class rocky\n"
            % (release, release, release, release, options))


def node(make_tree, running=OLD, default="saved", grubenv="", extra=None):
    files = {"/proc/sys/kernel/osrelease": running + "\n",
             "/etc/os-release": 'ID="rocky"\nID_LIKE="rhel centos fedora"\n',
             "/etc/default/grub": 'GRUB_TIMEOUT=5\nGRUB_DEFAULT=%s\nGRUB_ENABLE_BLSCFG=true\n' % default,
             kernel_boot_bls.GRUBENV: "# GRUB Environment Block\n%s" % grubenv + "#" * 200 + "\n",
             "%s/%s-%s.conf" % (kernel_boot_bls.BLS_DIR, MID, OLD): entry(OLD),
             "%s/%s-%s.conf" % (kernel_boot_bls.BLS_DIR, MID, NEW): entry(NEW),
             "%s/%s-0-rescue.conf" % (kernel_boot_bls.BLS_DIR, MID): entry("0-rescue-" + MID),
             "/boot/vmlinuz-" + OLD: "", "/boot/vmlinuz-" + NEW: "", "/var/lib": None,
             kernel_boot_lib.MOUNTINFO: "25 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"}
    files.update(extra or {})
    return make_tree(files)


def editenv(root, *args):
    return {"argv": [BINS["grub2-editenv"], os.path.join(root, "boot/grub2/grubenv")] + list(args), "rc": 0}


def test_entries_panic_and_grub_default(make_tree):
    root = node(make_tree)
    entries = kernel_boot_bls.read_entries(root)
    assert [(e["release"], e["recovery"]) for e in entries] == [
        ("0-rescue-" + MID, True), (OLD, False), (NEW, False)]
    assert kernel_boot_lib.entry_for(entries, NEW)["path"] == "%s-%s" % (MID, NEW)
    assert kernel_boot_bls.grub_default(root) == "saved"
    assert kernel_boot_bls.with_panic(entry(NEW), 10).count(" panic=10 rd.shell=0 rd.emergency=reboot\n") == 1
    # what the entry sets already keeps its value; only the missing keys are added
    assert kernel_boot_bls.with_panic(entry(NEW, "root=/dev/vda1 panic=30"), 10) == entry(
        NEW, "root=/dev/vda1 panic=30 rd.shell=0 rd.emergency=reboot")
    full = entry(NEW, "root=/dev/vda1 panic=30 rd.shell=1 rd.emergency=halt")
    assert kernel_boot_bls.with_panic(full, 10) == full
    assert kernel_boot_bls.with_panic("title x\nlinux /vmlinuz-1\n", 10) is None
    assert kernel_boot_bls.with_panic(entry(NEW), 0) == entry(NEW)


def test_once_then_confirm(run_module, make_tree):
    root = node(make_tree)
    new_id, old_id = "%s-%s" % (MID, NEW), "%s-%s" % (MID, OLD)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW}, diff=True,
                                       commands=[editenv(root, "set", "saved_entry=" + old_id),
                                                 editenv(root, "set", "next_entry=" + new_id)], bins=BINS)
    assert not failed and result["changed"] and table.expected == [], result
    assert result["diff"][0]["after"].count("panic=10") == 1 and "panic" not in result["diff"][0]["before"]
    with open(os.path.join(root, "boot/loader/entries/%s.conf" % new_id)) as fh:
        assert "resume=/dev/mapper/rl-swap panic=10 rd.shell=0 rd.emergency=reboot\n" in fh.read()
    with open(os.path.join(root, "boot/loader/entries/%s.conf" % old_id)) as fh:
        assert "panic" not in fh.read()
    # booted: the new kernel becomes the default, once
    booted = node(make_tree, running=NEW, grubenv="saved_entry=%s\n" % old_id)
    result, failed, table = run_module(kernel_boot, {"root": booted, "state": "confirm", "release": NEW},
                                       commands=[editenv(booted, "set", "saved_entry=" + new_id)], bins=BINS)
    assert not failed and result["booted"] and result["default"] == new_id and table.expected == []


def test_once_puts_the_entry_back_when_grub2_editenv_fails(run_module, make_tree):
    root = node(make_tree)
    broken = dict(editenv(root, "set", "saved_entry=%s-%s" % (MID, OLD)), rc=1, err="grub2-editenv: error: cannot open")
    result, failed, _t = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW},
                                    commands=[broken], bins=BINS)
    assert failed and "was put back" in result["msg"], result
    with open(os.path.join(root, "boot/loader/entries/%s-%s.conf" % (MID, NEW))) as fh:
        assert fh.read() == entry(NEW)
    assert not os.path.exists(os.path.join(root, kernel_boot_record.RECORD.lstrip("/")))


def test_refuses_grub_default_not_saved_and_a_missing_entry(run_module, make_tree):
    root = node(make_tree, default="0")
    for args in ({"state": "prepare"}, {"state": "once", "release": NEW}):
        result, failed, table = run_module(kernel_boot, dict(args, root=root), commands=[], bins=BINS)
        assert failed and "GRUB_DEFAULT is '0' in /etc/default/grub" in result["msg"] and table.calls == []
    root = node(make_tree, extra={"/boot/vmlinuz-5.14.0-1.el9.x86_64": ""})
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": "5.14.0-1.el9.x86_64"},
                                       commands=[], bins=BINS)
    assert failed and "no BLS entry in /boot/loader/entries boots 5.14.0-1.el9.x86_64" in result["msg"]
