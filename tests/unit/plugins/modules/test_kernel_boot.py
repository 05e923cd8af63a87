# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kernel_boot over a fake node tree with a Debian 12 grub.cfg (two kernels, the
"Advanced options" submenu, recovery entries) and the GRUB commands as a table."""

import json
import os

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot as kernel_boot_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_record as kernel_boot_record
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import package as kernel_package_lib
from ansible_collections.nodefix.k8s.plugins.modules import kernel_boot

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "grub", "debian12-two-kernels.cfg")
OLD, NEW = "6.1.0-50-amd64", "6.12.95+deb12-amd64"
ADV = "gnulinux-advanced-3f1e2d4c-5b6a-4978-8c9d-0e1f2a3b4c5d"
OLD_PATH = "%s>gnulinux-%s-advanced-3f1e2d4c-5b6a-4978-8c9d-0e1f2a3b4c5d" % (ADV, OLD)
NEW_PATH = "%s>gnulinux-%s-advanced-3f1e2d4c-5b6a-4978-8c9d-0e1f2a3b4c5d" % (ADV, NEW)
BINS = {"update-grub": "/usr/sbin/update-grub", "grub-set-default": "/usr/sbin/grub-set-default",
        "grub-reboot": "/usr/sbin/grub-reboot", "grub-editenv": "/usr/bin/grub-editenv"}


@pytest.fixture(autouse=True)
def package_installed(monkeypatch, request):
    """A kernel counts as installed when its /boot/vmlinuz is in the tree (the package manager's word is
    _kernel.package.installed, tested in test_kernel_package and below); a test marked ``real_installed``
    asks dpkg/rpm for real."""
    if "real_installed" not in request.keywords:
        monkeypatch.setattr(kernel_package_lib, "installed", lambda pm, root, release: (
            os.path.exists(os.path.join(root, "boot", "vmlinuz-" + release)), "/boot/vmlinuz-%s is missing" % release))


def grub_cfg():
    with open(FIXTURE) as fh:
        return fh.read()


def node(make_tree, running=OLD, grubenv="# GRUB Environment Block\n" + "#" * 100 + "\n", extra=None):
    files = {"/proc/sys/kernel/osrelease": running + "\n", kernel_boot_lib.GRUB_CFG: grub_cfg(), kernel_boot_lib.GRUBENV: grubenv,
             "/boot/vmlinuz-" + OLD: "", "/boot/vmlinuz-" + NEW: "", "/etc/default/grub.d": None,
             "/var/lib": None,
             kernel_boot_lib.MOUNTINFO: "25 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"}
    files.update(extra or {})
    return make_tree(files)


def test_parse_prefers_the_advanced_entry_and_skips_recovery():
    entries = kernel_boot_lib.parse_grub_cfg(grub_cfg())
    assert [e["release"] for e in entries if e["release"]] == [NEW, NEW, NEW, OLD, OLD]
    assert kernel_boot_lib.entry_for(entries, NEW)["path"] == NEW_PATH       # not the plain "newest kernel" entry
    assert kernel_boot_lib.entry_for(entries, OLD)["path"] == OLD_PATH
    assert kernel_boot_lib.entry_for(entries, "5.10.0-1-amd64") is None
    assert [e["title"] for e in entries if e["recovery"]] == [
        "Debian GNU/Linux, with Linux %s (recovery mode)" % NEW, "Debian GNU/Linux, with Linux %s (recovery mode)" % OLD]


def test_once_keeps_the_running_kernel_as_default_and_boots_the_new_one_next(run_module, make_tree):
    root = node(make_tree)
    commands = [{"argv": [BINS["update-grub"]], "rc": 0, "out": "", "err": "Generating grub configuration file"},
                {"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 0},
                {"argv": [BINS["grub-reboot"], NEW_PATH], "rc": 0}]
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW},
                                       commands=commands, bins=BINS, diff=True)
    assert not failed and result["changed"], result
    assert result["default"] == OLD_PATH and result["next_entry"] == NEW_PATH
    assert table.expected == []
    with open(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/"))) as fh:
        assert fh.read() == kernel_boot_lib.drop_in_text(10)
    assert "GRUB_DEFAULT=saved" in result["diff"][0]["after"] and result["diff"][0]["before"] == ""
    with open(os.path.join(root, kernel_boot_record.RECORD.lstrip("/"))) as fh:
        assert json.load(fh)["pending"]["release"] == NEW


def test_once_in_check_mode_runs_and_writes_nothing(run_module, make_tree):
    root = node(make_tree)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW},
                                       commands=[], bins=BINS, check_mode=True)
    assert not failed and result["changed"] and table.calls == []
    assert not os.path.exists(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/")))
    assert not os.path.exists(os.path.join(root, kernel_boot_record.RECORD.lstrip("/")))


def test_once_undoes_the_drop_in_when_grub_refuses(run_module, make_tree):
    root = node(make_tree)
    commands = [{"argv": [BINS["update-grub"]], "rc": 0},
                {"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 1, "err": "grubenv: read-only file system"},
                {"argv": [BINS["update-grub"]], "rc": 0}]
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW},
                                       commands=commands, bins=BINS)
    assert failed and "grub-set-default" in result["msg"] and "put back" in result["msg"]
    assert table.expected == []
    assert not os.path.exists(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/")))


def test_once_refuses_what_cannot_work(run_module, make_tree):
    root = node(make_tree)
    result, failed, _t = run_module(kernel_boot, {"root": root, "state": "once", "release": OLD}, bins=BINS)
    assert failed and "is the one running" in result["msg"]
    result, failed, _t = run_module(kernel_boot, {"root": root, "state": "once", "release": "6.13.0-1-amd64"},
                                    bins=BINS)
    assert failed and "is not installed" in result["msg"]
    result, failed, _t = run_module(kernel_boot, {"root": root, "state": "once", "release": "6.12; reboot"},
                                    bins=BINS)
    assert failed and "is not a kernel release" in result["msg"]
    failed_before = {kernel_boot_record.RECORD: json.dumps({"failed": {NEW: {"at": "2026-11-24T03:00:00Z"}}})}
    result, failed, _t = run_module(kernel_boot, {"root": node(make_tree, extra=failed_before), "state": "once",
                                                  "release": NEW}, bins=BINS)
    assert failed and "failed to boot on this node before" in result["msg"]


def test_confirm_keeps_a_kernel_that_booted_and_unpins_the_node(run_module, make_tree):
    """Kept: the node boots what Debian would from now on - the drop-in gone (GRUB_DEFAULT=0: the first
    entry, the newest kernel), saved_entry removed - so the next kernel Debian's updates install boots,
    instead of the node staying on this one while the reboot detector asks for the newer one forever."""
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH
    root = node(make_tree, running=NEW, grubenv=env, extra={kernel_boot_lib.DROP_IN: kernel_boot_lib.drop_in_text(10)})
    unset = {"argv": [BINS["grub-editenv"], kernel_boot_lib.GRUBENV, "unset", "saved_entry"], "rc": 0}
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW}, diff=True,
                                       commands=[{"argv": [BINS["update-grub"]], "rc": 0}, unset], bins=BINS)
    assert not failed and result["booted"] and result["kept"] and not result["fell_back"], result
    assert result["default"] == "GRUB_DEFAULT=0" and table.expected == []
    assert not os.path.exists(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/")))
    assert result["diff"][1]["before"] == kernel_boot_lib.drop_in_text(10) and result["diff"][1]["after"] == ""
    with open(os.path.join(root, kernel_boot_record.RECORD.lstrip("/"))) as fh:
        assert list(json.load(fh)["booted"]) == [NEW]


def test_confirm_on_a_node_whose_own_default_is_saved_saves_the_kernel(run_module, make_tree):
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH
    root = node(make_tree, running=NEW, grubenv=env, extra={"/etc/default/grub": "GRUB_DEFAULT=saved\n"})
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW},
                                       commands=[{"argv": [BINS["grub-set-default"], NEW_PATH], "rc": 0}], bins=BINS)
    assert not failed and result["kept"] and result["default"] == NEW_PATH and table.expected == [], result


def test_confirm_puts_the_drop_in_back_when_update_grub_fails(run_module, make_tree):
    root = node(make_tree, running=NEW, extra={kernel_boot_lib.DROP_IN: kernel_boot_lib.drop_in_text(10)})
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW},
                                       commands=[{"argv": [BINS["update-grub"]], "rc": 1, "err": "no space"},
                                                 {"argv": [BINS["update-grub"]], "rc": 0}], bins=BINS)
    assert failed and "put back" in result["msg"] and table.expected == []
    with open(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/"))) as fh:
        assert fh.read() == kernel_boot_lib.drop_in_text(10)


def test_a_kernel_that_booted_on_an_unhealthy_node_is_not_kept(run_module, make_tree):
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH
    root = node(make_tree, running=NEW, grubenv=env, extra={kernel_boot_lib.DROP_IN: kernel_boot_lib.drop_in_text(10)})
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW, "healthy": False,
                                                     "problems": ["the node is not Ready in the API server"]},
                                       commands=[], bins=BINS)
    assert not failed and result["booted"] and not result["kept"] and table.calls == [], result
    assert result["default"] == OLD_PATH                    # the old kernel boots at the next reboot
    assert os.path.exists(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/")))
    with open(os.path.join(root, kernel_boot_record.RECORD.lstrip("/"))) as fh:
        failed_record = json.load(fh)["failed"][NEW]
    assert failed_record["unhealthy"] == ["the node is not Ready in the API server"] and failed_record["came_back_on"] == NEW


def test_confirm_records_a_kernel_that_did_not_boot(run_module, make_tree):
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH
    root = node(make_tree, running=OLD, grubenv=env)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW},
                                       commands=[], bins=BINS)
    assert not failed and result["fell_back"] and not result["booted"] and result["default"] == OLD_PATH
    assert result["changed"] and table.calls == []   # GRUB consumed next_entry itself
    with open(os.path.join(root, kernel_boot_record.RECORD.lstrip("/"))) as fh:
        assert json.load(fh)["failed"][NEW]["came_back_on"] == OLD
    # and a next_entry left over (the node never tried it) is cleared
    root2 = node(make_tree, running=OLD, grubenv=env + "next_entry=%s\n" % NEW_PATH)
    result, failed, table = run_module(kernel_boot, {"root": root2, "state": "confirm", "release": NEW},
                                       commands=[{"argv": [BINS["grub-editenv"], kernel_boot_lib.GRUBENV, "unset", "next_entry"],
                                                  "rc": 0}], bins=BINS)
    assert not failed and table.expected == []


def test_a_node_without_grub_says_so(run_module, make_tree):
    root = make_tree({"/proc/sys/kernel/osrelease": OLD + "\n"})
    result, failed, _t = run_module(kernel_boot, {"root": root}, bins=BINS)
    assert failed and "does not boot through GRUB 2" in result["msg"]


def _age(root, path, seconds):
    """Make ``path`` ``seconds`` older than now (mtime)."""
    full = os.path.join(root, path.lstrip("/"))
    st = os.stat(full)
    os.utime(full, (st.st_atime - seconds, st.st_mtime - seconds))


def test_prepare_writes_the_drop_in_and_keeps_the_running_kernel_the_default(run_module, make_tree):
    # and runs no update-grub: the kernel package's own hook does
    root = node(make_tree)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "prepare", "panic_seconds": 5},
                                       commands=[{"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 0}],
                                       bins=BINS, diff=True)
    assert not failed and result["changed"] and result["default"] == OLD_PATH, result
    assert table.expected == [] and [c[0] for c in table.calls] == [BINS["grub-set-default"]]  # no update-grub
    with open(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/"))) as fh:
        assert fh.read() == kernel_boot_lib.drop_in_text(5)
    assert "panic=5" in result["diff"][0]["after"]
    assert not os.path.exists(os.path.join(root, kernel_boot_record.RECORD.lstrip("/")))   # nothing pending yet
    # again, with the default saved: nothing to do
    with open(os.path.join(root, kernel_boot_lib.GRUBENV.lstrip("/")), "w") as fh:
        fh.write("# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "prepare", "panic_seconds": 5},
                                       commands=[], bins=BINS)
    assert not failed and not result["changed"] and table.calls == []


def test_prepare_in_check_mode_runs_and_writes_nothing(run_module, make_tree):
    root = node(make_tree)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "prepare"}, commands=[], bins=BINS,
                                       check_mode=True)
    assert not failed and result["changed"] and table.calls == []
    assert not os.path.exists(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/")))


def test_prepare_puts_the_drop_in_back_when_grub_refuses(run_module, make_tree):
    root = node(make_tree, extra={kernel_boot_lib.DROP_IN: "GRUB_TIMEOUT=3\n"})
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "prepare"},
                                       commands=[{"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 1,
                                                  "err": "grubenv: read-only file system"}], bins=BINS)
    assert failed and "grub-set-default" in result["msg"] and "put back" in result["msg"], result
    with open(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/"))) as fh:
        assert fh.read() == "GRUB_TIMEOUT=3\n"


def test_once_after_prepare_and_the_package_hook_runs_no_second_update_grub(run_module, make_tree):
    # the drop-in as prepare wrote it, then the package's hook regenerated grub.cfg (newer)
    root = node(make_tree, extra={kernel_boot_lib.DROP_IN: kernel_boot_lib.drop_in_text(10)})
    _age(root, kernel_boot_lib.DROP_IN, 60)
    commands = [{"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 0},
                {"argv": [BINS["grub-reboot"], NEW_PATH], "rc": 0}]
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW},
                                       commands=commands, bins=BINS)
    assert not failed and result["changed"] and table.expected == [], result
    assert BINS["update-grub"] not in [c[0] for c in table.calls]


def test_once_regenerates_a_grub_cfg_older_than_the_drop_in(run_module, make_tree):
    # the drop-in is right, but grub.cfg was written before it (no hook ran since): update-grub
    root = node(make_tree, extra={kernel_boot_lib.DROP_IN: kernel_boot_lib.drop_in_text(10)})
    _age(root, kernel_boot_lib.GRUB_CFG, 60)
    commands = [{"argv": [BINS["update-grub"]], "rc": 0},
                {"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 0},
                {"argv": [BINS["grub-reboot"], NEW_PATH], "rc": 0}]
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "once", "release": NEW},
                                       commands=commands, bins=BINS)
    assert not failed and result["changed"] and table.expected == [], result


def test_prepare_leaves_an_unchanged_drop_in_alone(run_module, make_tree):
    # the drop-in is right, only the saved default moved: set it, and do not touch the drop-in (a new mtime
    # would make grub.cfg look stale to `once` and cost an update-grub)
    root = node(make_tree, extra={kernel_boot_lib.DROP_IN: kernel_boot_lib.drop_in_text(10)})
    _age(root, kernel_boot_lib.DROP_IN, 60)
    before = os.stat(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/"))).st_mtime_ns
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "prepare"},
                                       commands=[{"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 0}], bins=BINS)
    assert not failed and result["changed"] and table.expected == [], result
    assert os.stat(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/"))).st_mtime_ns == before


def test_confirm_again_changes_nothing(run_module, make_tree, monkeypatch):
    """A second confirm keeps the record's first time (no 'changed' from a new time stamp)."""
    clock = iter(range(1000))
    monkeypatch.setattr(kernel_boot_lib, "stamp", lambda: "2026-11-26T00:00:%02dZ" % next(clock))  # every call a new second
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH
    unset = {"argv": [BINS["grub-editenv"], kernel_boot_lib.GRUBENV, "unset", "saved_entry"], "rc": 0}
    for running, grub in ((NEW, [unset]), (OLD, [])):
        root = node(make_tree, running=running, grubenv=env)
        result, failed, _t = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW},
                                        commands=grub, bins=BINS)
        assert not failed and result["changed"], result
        with open(os.path.join(root, kernel_boot_lib.GRUBENV.lstrip("/")), "w") as fh:
            fh.write("# GRUB Environment Block\n%s" % ("" if running == NEW else "saved_entry=%s\n" % OLD_PATH))
        again, failed, table = run_module(kernel_boot, {"root": root, "state": "confirm", "release": NEW},
                                          commands=[], bins=BINS)
        assert not failed and not again["changed"] and table.calls == [] and again["record"] == result["record"]


@pytest.mark.parametrize("mounts, words", [
    ("25 1 254:1 / / rw - ext4 /dev/vda1 rw\n26 25 253:0 / /boot rw - ext4 /dev/mapper/vg0-boot rw\n",
     "is on the device-mapper device /dev/mapper/vg0-boot"),
    ("25 1 9:0 / / rw - ext4 /dev/md0 rw\n", "is on the MD RAID device /dev/md0"),
    ("25 1 0:30 / / rw - zfs rpool/ROOT/debian rw\n", "is on a zfs file system"),
    ("25 1 0:30 / / rw - btrfs /dev/vda2 rw\n", "is on a btrfs file system"),
    ("", "cannot be found in /proc/self/mountinfo"),
])
def test_no_one_shot_boot_where_grub_cannot_clear_next_entry(run_module, make_tree, mounts, words):
    root = node(make_tree, extra={kernel_boot_lib.MOUNTINFO: mounts})
    for state in ("preflight", "once"):
        args = {"root": root, "state": state, "release": NEW}
        result, failed, table = run_module(kernel_boot, args, commands=[], bins=BINS)
        assert failed and words in result["msg"] and "cannot be booted once here" in result["msg"], result
        assert table.calls == []
    assert not os.path.exists(os.path.join(root, kernel_boot_lib.DROP_IN.lstrip("/")))
    # a plain disk (a /boot mount of its own included): allowed
    plain = node(make_tree, extra={kernel_boot_lib.MOUNTINFO: "25 1 254:1 / / rw - ext4 /dev/vda1 rw\n"
                                   "26 25 254:2 / /boot rw - ext2 /dev/vda2 rw\n"})
    result, failed, _t = run_module(kernel_boot, {"root": plain, "state": "preflight"}, bins=BINS)
    assert not failed, result


def _pending(release=NEW):
    pending = {"release": release, "previous": OLD, "at": "2026-12-06T07:00:00Z"}
    return json.dumps({"booted": {}, "failed": {}, "pending": pending})


def _record(root):
    with open(os.path.join(root, kernel_boot_record.RECORD.lstrip("/"))) as fh:
        return json.load(fh)


def test_disarm_clears_an_unconfirmed_one_time_boot_and_keeps_the_running_kernel_the_default(run_module, make_tree):
    # a run killed between `once` and `confirm`: the new kernel still armed for whoever reboots the node next
    env = "# GRUB Environment Block\nsaved_entry=%s\nnext_entry=%s\n" % (OLD_PATH, NEW_PATH)
    root = node(make_tree, running=OLD, grubenv=env, extra={kernel_boot_record.RECORD: _pending()})
    unset = {"argv": [BINS["grub-editenv"], kernel_boot_lib.GRUBENV, "unset", "next_entry"], "rc": 0}
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "disarm", "release": NEW},
                                       commands=[unset], bins=BINS, diff=True)
    assert not failed and result["changed"] and result["disarmed"], result
    assert table.expected == [] and result["default"] == OLD_PATH and result["pending"]["release"] == NEW
    record = _record(root)
    assert record["pending"] is None and NEW not in record["failed"]       # never tried: not recorded as failed
    assert '"pending": null' in result["diff"][0]["after"]


@pytest.mark.parametrize("saved", [OLD_PATH, NEW_PATH], ids=["saved-default-old", "saved-default-new"])
def test_disarm_on_a_node_that_booted_the_new_kernel_unconfirmed_never_keeps_it(run_module, make_tree, saved):
    # the node rebooted into the armed kernel and `confirm` never ran (the run died, or confirm failed): that kernel's
    # health was never checked - GRUB's default is the PREVIOUS kernel (the record's pending.previous), the new one is
    # recorded as not kept (the reboot detector and `once` see it), and `held` says why a person decides
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % saved
    root = node(make_tree, running=NEW, grubenv=env, extra={kernel_boot_record.RECORD: _pending()})
    commands = [{"argv": [BINS["grub-set-default"], OLD_PATH], "rc": 0}] if saved == NEW_PATH else []
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "disarm", "release": NEW},
                                       commands=commands, bins=BINS)
    assert not failed and result["disarmed"] and result["unconfirmed"], result
    assert result["default"] == OLD_PATH and table.expected == [], result
    assert "never confirmed healthy: not kept" in result["held"]
    record = _record(root)
    assert record["pending"] is None and record["failed"][NEW]["unconfirmed"] is True
    assert record["failed"][NEW]["came_back_on"] == NEW and NEW not in record["booted"]


def test_disarm_of_an_unconfirmed_kernel_whose_previous_cannot_be_told_changes_nothing_and_holds(run_module, make_tree):
    # fail closed: no pending.previous, and GRUB's saved default names the new kernel itself - nothing says which
    # kernel was the default before the arm, so GRUB's default and the record are left as they are
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % NEW_PATH
    text = json.dumps({"booted": {}, "failed": {}, "pending": {"release": NEW, "at": "2026-12-06T07:00:00Z"}})
    root = node(make_tree, running=NEW, grubenv=env, extra={kernel_boot_record.RECORD: text})
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "disarm", "release": NEW},
                                       commands=[], bins=BINS)
    assert not failed and not result["changed"] and not result["disarmed"] and table.calls == [], result
    assert "GRUB's default was left as it is" in result["held"] and result["default"] == NEW_PATH
    assert _record(root)["pending"]["release"] == NEW


def test_plan_disarm_never_puts_the_default_on_an_unconfirmed_running_kernel():
    # the plan alone (the review's reproducer): the armed kernel running, the record's pending boot not confirmed
    entries = kernel_boot_lib.parse_grub_cfg(grub_cfg())
    st = {"entries": entries, "running_release": NEW, "source": kernel_boot_lib.GRUB_CFG,
          "grubenv": {"saved_entry": OLD_PATH},
          "record": {"booted": {}, "failed": {}, "pending": {"release": NEW, "previous": OLD, "at": "x"}}}
    plan = kernel_boot_lib.plan_disarm(st)
    assert plan["fallback"] == OLD_PATH and plan["set_default"] is None and plan["unconfirmed"] == NEW, plan
    # the previous kernel from GRUB's saved default when the record does not name it; none at all: nothing to set
    st["record"]["pending"] = {"release": NEW}
    assert kernel_boot_lib.plan_disarm(st)["fallback"] == OLD_PATH
    st["grubenv"] = {"saved_entry": NEW_PATH}
    plan = kernel_boot_lib.plan_disarm(st)
    assert plan["fallback"] is None and plan["set_default"] is None and not plan["changed"] and plan["held"]
    # a kernel confirmed (kept) before is the node's own: disarm leaves it the default
    st["record"] = {"booted": {NEW: {"at": "x"}}, "failed": {}, "pending": None}
    assert kernel_boot_lib.plan_disarm(st, NEW)["fallback"] == NEW_PATH


def test_disarm_with_nothing_armed_changes_nothing_and_in_check_mode_writes_nothing(run_module, make_tree):
    env = "# GRUB Environment Block\nsaved_entry=%s\n" % OLD_PATH
    root = node(make_tree, running=OLD, grubenv=env)
    result, failed, table = run_module(kernel_boot, {"root": root, "state": "disarm", "release": NEW},
                                       commands=[], bins=BINS)
    assert not failed and not result["changed"] and not result["disarmed"] and table.calls == []
    armed = "# GRUB Environment Block\nsaved_entry=%s\nnext_entry=%s\n" % (OLD_PATH, NEW_PATH)
    root2 = node(make_tree, running=OLD, grubenv=armed, extra={kernel_boot_record.RECORD: _pending()})
    result, failed, table = run_module(kernel_boot, {"root": root2, "state": "disarm", "release": NEW},
                                       commands=[], bins=BINS, check_mode=True)
    assert not failed and result["changed"] and result["disarmed"] and table.calls == []
    assert _record(root2)["pending"]["release"] == NEW and result["next_entry"] == NEW_PATH
