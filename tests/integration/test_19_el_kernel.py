# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel upgrade on EL and Fedora nodes - nodefix.k8s.kernel_package (dnf) and nodefix.k8s.kernel_boot
(GRUB 2 with Boot Loader Specification entries) - run by Ansible on a node tree (the modules' ``root``).

Real tools from the Debian archive: dnf 4.14 (its ``--installroot`` is the tree), rpm 4.18, createrepo_c,
rpmbuild, and GRUB's grub-editenv under Fedora's name for it, grub2-editenv (Fedora builds the same program
with a ``grub2`` prefix). The kernel packages are TEST DOUBLES built here with rpmbuild: EL's ``kernel``
meta-package and ``kernel-core`` with their real names, ``Requires``/``Provides`` (``kernel-core-uname-r``,
``kernel-uname-r``, ``installonlypkg(kernel)``) and files (``/lib/modules/R/vmlinuz``, ``/boot/vmlinuz-R``,
the BLS entry ``kernel-install`` would write) - no EL repository or kernel is reachable from here, and
nothing boots: the reboot itself is the Debian VM's (test_47). Nothing outside pytest's tmp_path is written.
"""

import json
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT, run_logged

OLD = ("5.14.0", "427.13.1.el9_4")
NEW = ("6.12.0", "55.9.1.el10_0")
BAD = ("6.12.0", "1.el10_0")  # older than NEW; its kernel-core-uname-r requirement nothing provides
MID = "0123456789abcdef0123456789abcdef"  # the BLS entries' machine-id prefix


def release(vr):
    return "%s-%s.x86_64" % vr


SPEC = r"""
%%global kver %%{version}-%%{release}.%%{_arch}
Name: kernel
Version: %(version)s
Release: %(release)s
Summary: TEST DOUBLE of EL's kernel meta-package
License: GPL-2.0-only
BuildArch: x86_64
Requires: kernel-core-uname-r = %%{kver}
Requires: kernel-modules-uname-r = %%{kver}
%%description
TEST DOUBLE of EL's kernel meta-package.
%(core)s
%%install
mkdir -p %%{buildroot}/boot/loader/entries %%{buildroot}/lib/modules/%%{kver}
echo not-a-kernel > %%{buildroot}/lib/modules/%%{kver}/vmlinuz
cp %%{buildroot}/lib/modules/%%{kver}/vmlinuz %%{buildroot}/boot/vmlinuz-%%{kver}
echo not-an-initramfs > %%{buildroot}/boot/initramfs-%%{kver}.img
cat > %%{buildroot}/boot/loader/entries/%(mid)s-%%{kver}.conf <<EOF
title Red Hat Enterprise Linux (%%{kver}) 9.4 (Plow)
version %%{kver}
linux /vmlinuz-%%{kver}
initrd /initramfs-%%{kver}.img
options root=/dev/mapper/rhel-root ro crashkernel=1G-4G:192M
grub_users \$grub_users
grub_arg --unrestricted
grub_class rhel
EOF
%%files
%(core_files)s
"""

CORE = r"""
%package core
Summary: TEST DOUBLE of EL's kernel-core
Provides: installonlypkg(kernel)
Provides: kernel-uname-r = %{kver}
Provides: kernel-core-uname-r = %{kver}
Provides: kernel-modules-uname-r = %{kver}
%description core
TEST DOUBLE of EL's kernel-core.
"""

CORE_FILES = """%files core
/boot/vmlinuz-%{kver}
/boot/initramfs-%{kver}.img
/boot/loader/entries/""" + MID + """-%{kver}.conf
/lib/modules/%{kver}/vmlinuz
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A dnf repository (createrepo_c) with the two kernels and one whose core package is missing."""
    base = tmp_path_factory.mktemp("el-repo")
    out = base / "repo"
    out.mkdir()
    for vr, core in ((OLD, True), (NEW, True), (BAD, False)):
        spec = base / ("kernel-%s-%s.spec" % vr)
        spec.write_text(SPEC % {"version": vr[0], "release": vr[1], "mid": MID, "core": CORE if core else "",
                                "core_files": CORE_FILES if core else ""})
        subprocess.run(["rpmbuild", "-bb", "--define", "_topdir %s" % (base / "top"), "--define",
                        "_tmppath %s" % base, "--define", "_unpackaged_files_terminate_build 0", str(spec)],
                       check=True, capture_output=True)
    for rpm in (base / "top" / "RPMS" / "x86_64").iterdir():
        shutil.copy(str(rpm), str(out))
    subprocess.run(["createrepo_c", "-q", str(out)], check=True)
    return out


@pytest.fixture
def node(tmp_path, repo):
    """An EL 9 node's tree: os-release, the repository, the running kernel, GRUB's files as EL installs them."""
    root = tmp_path / "node"
    files = {
        "etc/os-release": 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.4"\n',
        "etc/yum.repos.d/lab.repo": "[lab]\nname=lab\nbaseurl=file://%s\ngpgcheck=0\n" % repo,
        "etc/default/grub": 'GRUB_TIMEOUT=5\nGRUB_DEFAULT=saved\nGRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M"\n'
                            "GRUB_ENABLE_BLSCFG=true\n",
        "proc/sys/kernel/osrelease": release(OLD) + "\n",
        # a plain disk: GRUB can write its environment block there (kernel_boot reads the mount table)
        "proc/self/mountinfo": "25 1 254:1 / / rw,relatime shared:1 - xfs /dev/vda3 rw\n"
                               "26 25 254:2 /boot /boot rw,relatime shared:2 - xfs /dev/vda2 rw\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "boot" / "grub2").mkdir(parents=True)
    subprocess.run(["grub-editenv", str(root / "boot/grub2/grubenv"), "create"], check=True)
    bindir = tmp_path / "bin"  # GRUB's grub-editenv under the name EL's grub2-tools give it
    bindir.mkdir()
    os.symlink(shutil.which("grub-editenv"), str(bindir / "grub2-editenv"))
    return {"root": str(root), "path": "%s:%s" % (bindir, os.environ["PATH"])}


def module(node, mod, label, check=False, **args):
    python = os.path.join(ROOT, ".venv", "bin", "python")
    argv = ["ansible", "localhost", "-c", "local", "-e", "ansible_python_interpreter=%s" % python, "--diff",
            "-m", "nodefix.k8s." + mod, "-a", json.dumps(dict(args, root=node["root"]))] + (["--check"] if check else [])
    rc, out = run_logged("el-kernel-%s" % label, argv, timeout=300, env={"PATH": node["path"]})
    result = yaml.safe_load(out.split("=>", 1)[1]) if "=>" in out else {}
    return rc, result, out


def grubenv(node):
    out = subprocess.run(["grub-editenv", os.path.join(node["root"], "boot/grub2/grubenv"), "list"],
                         check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def installed(node):
    """The kernels rpm's database in the tree holds (Debian's rpm keeps it at ~/.rpmdb: /root/.rpmdb there)."""
    out = subprocess.run(["rpm", "--root", node["root"], "-qa", "--qf", "%{NAME}-%{VERSION}-%{RELEASE}\n"],
                         check=True, capture_output=True, text=True).stdout
    return sorted(out.split())


def entry(node, vr):
    with open(os.path.join(node["root"], "boot/loader/entries/%s-%s.conf" % (MID, release(vr)))) as fh:
        return fh.read()


def test_plan_reads_the_release_dnf_resolves_and_refuses_bad_input(node):
    rc, plan, out = module(node, "kernel_package", "plan", min_release="6.12")
    assert rc == 0, out
    assert (plan["manager"], plan["package"], plan["version"], plan["release"]) == (
        "dnf", "kernel", "-".join(NEW), release(NEW))
    assert plan["installed_version"] is None and plan["kernel_installed"] is False and not plan["changed"]
    for label, args, words in (
            ("no-such-version", {"version": "6.99.0-1.el10"}, "has no version 6.99.0-1.el10 in this node's sources"),
            ("no-such-package", {"name": "kernel-ml"}, "kernel-ml is not in this node's enabled repositories"),
            ("below-minimum", {"min_release": "6.14"}, "installs kernel %s, still below the minimum 6.14" % release(NEW)),
            ("apt-option", {"default_release": "bookworm-backports"}, "default_release is apt's"),
            ("bad-repo", {"enablerepo": ["elrepo kernel"]}, "is not a repository id"),
            ("bad-version", {"version": "6.12; rm -rf /"}, "is not an RPM version")):
        rc, res, out = module(node, "kernel_package", label, state="present", **args)
        assert rc != 0 and words in res["msg"], (label, out)
    # its kernel-core is missing from the repository: dnf itself refuses the install, its words in the error
    rc, res, out = module(node, "kernel_package", "unresolvable", state="present", version="-".join(BAD))
    assert rc != 0 and res["msg"] == "dnf install kernel-%s-%s failed" % BAD, out
    assert "kernel-core-uname-r = %s" % release(BAD) in res["stderr"] + res["stdout"], out
    assert installed(node) == [] and not os.path.exists(os.path.join(node["root"], "boot/vmlinuz-" + release(NEW)))


def test_install_beside_the_running_kernel_check_mode_and_idempotence(node):
    # the running kernel's own package (the tree has none yet): allowed on purpose only
    rc, res, out = module(node, "kernel_package", "old-refused", state="present", version="-".join(OLD))
    assert rc != 0 and "not newer than the running %s: that is a downgrade" % release(OLD) in res["msg"], out
    rc, res, out = module(node, "kernel_package", "old", state="present", version="-".join(OLD), allow_downgrade=True)
    assert rc == 0 and res["changed"] and res["kernel_installed"], out
    rc, res, out = module(node, "kernel_package", "check", check=True, state="present", min_release="6.12")
    assert rc == 0 and res["changed"] and not res["kernel_installed"], out
    assert installed(node) == ["kernel-%s-%s" % OLD, "kernel-core-%s-%s" % OLD]
    rc, res, out = module(node, "kernel_package", "new", state="present", min_release="6.12")
    assert rc == 0 and res["changed"] and res["kernel_installed"], out
    assert res["installed_version"] == "-".join(OLD) and res["release"] == release(NEW)
    # install-only: the new kernel is beside the old one, never over it
    assert installed(node) == sorted(["kernel-%s-%s" % OLD, "kernel-core-%s-%s" % OLD,
                                      "kernel-%s-%s" % NEW, "kernel-core-%s-%s" % NEW])
    rc, res, out = module(node, "kernel_package", "again", state="present", min_release="6.12")
    assert rc == 0 and not res["changed"] and res["installed_version"] == "-".join(NEW), out


def test_a_node_already_on_a_newer_kernel_is_not_downgraded(node):
    with open(os.path.join(node["root"], "proc/sys/kernel/osrelease"), "w") as fh:
        fh.write("6.14.0-1.el10_1.x86_64\n")
    rc, res, out = module(node, "kernel_package", "downgrade", state="present", min_release="6.12")
    assert rc != 0 and "installs kernel %s, not newer than the running 6.14.0-1.el10_1.x86_64" % release(NEW) \
        in res["msg"], out
    assert installed(node) == []


def _installed_both(node):
    """Both kernels installed by dnf itself (the module's install is test_install_...'s)."""
    subprocess.run(["dnf", "-q", "-y", "--installroot=%s" % node["root"], "--setopt=reposdir=%s/etc/yum.repos.d"
                    % node["root"], "install", "kernel-%s-%s" % OLD, "kernel-%s-%s" % NEW], check=True,
                   capture_output=True)


def test_boot_once_then_keep_it(node):
    _installed_both(node)
    old_id, new_id = "%s-%s" % (MID, release(OLD)), "%s-%s" % (MID, release(NEW))
    rc, res, out = module(node, "kernel_boot", "prepare", state="prepare")
    assert rc == 0 and res["changed"] and res["default"] == old_id, out
    assert grubenv(node) == {"saved_entry": old_id}
    before = entry(node, NEW)
    rc, res, out = module(node, "kernel_boot", "once-check", check=True, state="once", release=release(NEW))
    assert rc == 0 and res["changed"] and "+options root=/dev/mapper/rhel-root ro crashkernel=1G-4G:192M panic=10 rd.shell=0 rd.emergency=reboot" in out
    assert entry(node, NEW) == before and grubenv(node) == {"saved_entry": old_id}
    rc, res, out = module(node, "kernel_boot", "once", state="once", release=release(NEW))
    assert rc == 0 and res["changed"] and (res["default"], res["next_entry"]) == (old_id, new_id), out
    assert grubenv(node) == {"saved_entry": old_id, "next_entry": new_id}
    # panic= for a kernel that panics, rd.shell=0 rd.emergency=reboot for dracut's initramfs that
    # cannot mount the root (it would wait at its emergency shell otherwise)
    assert entry(node, NEW) == before.replace("crashkernel=1G-4G:192M\n",
                                              "crashkernel=1G-4G:192M panic=10 rd.shell=0 rd.emergency=reboot\n")
    assert entry(node, OLD).count("panic=") == 0  # only the new kernel's entry
    backups = [n for n in os.listdir(os.path.join(node["root"], "boot/loader/entries")) if n.endswith("~")]
    assert len(backups) == 1 and not backups[0].endswith(".conf"), backups  # GRUB reads *.conf only
    rc, res, out = module(node, "kernel_boot", "once-again", state="once", release=release(NEW))
    assert rc == 0 and not res["changed"], out
    # the node rebooted into the new kernel: GRUB cleared next_entry as it booted it (grub.cfg's 00_header)
    subprocess.run(["grub-editenv", os.path.join(node["root"], "boot/grub2/grubenv"), "unset", "next_entry"], check=True)
    with open(os.path.join(node["root"], "proc/sys/kernel/osrelease"), "w") as fh:
        fh.write(release(NEW) + "\n")
    rc, res, out = module(node, "kernel_boot", "confirm", state="confirm", release=release(NEW))
    assert rc == 0 and res["booted"] and not res["fell_back"] and res["default"] == new_id, out
    assert grubenv(node) == {"saved_entry": new_id}
    rc, res, out = module(node, "kernel_boot", "confirm-again", state="confirm", release=release(NEW))
    assert rc == 0 and not res["changed"], out


def test_a_kernel_that_did_not_boot_is_recorded_and_refused(node):
    _installed_both(node)
    old_id, new_id = "%s-%s" % (MID, release(OLD)), "%s-%s" % (MID, release(NEW))
    rc, _res, out = module(node, "kernel_boot", "once-fail", state="once", release=release(NEW))
    assert rc == 0, out
    # came back on the old kernel (panic=, then GRUB's saved default): next_entry is still set if GRUB never
    # reached it (a power cycle before the menu), which confirm clears
    rc, res, out = module(node, "kernel_boot", "confirm-fail", state="confirm", release=release(NEW))
    assert rc == 0 and res["fell_back"] and not res["booted"] and res["changed"], out
    assert grubenv(node) == {"saved_entry": old_id}
    assert res["record"]["failed"][release(NEW)]["came_back_on"] == release(OLD)
    rc, res, out = module(node, "kernel_boot", "once-refused", state="once", release=release(NEW))
    assert rc != 0 and "failed to boot on this node before" in res["msg"], out
    rc, res, out = module(node, "kernel_package", "plan-refused", min_release="6.12")
    assert rc != 0 and "failed to boot on this node before" in res["msg"], out
    assert new_id not in grubenv(node).values()


def test_refuses_a_grub_that_ignores_saved_entry_and_follows_the_efi_symlink(node):
    _installed_both(node)
    root = node["root"]
    with open(os.path.join(root, "etc/default/grub"), "w") as fh:
        fh.write("GRUB_TIMEOUT=5\nGRUB_DEFAULT=0\n")
    for label, args in (("prepare-default-0", {"state": "prepare"}),
                        ("once-default-0", {"state": "once", "release": release(NEW)})):
        rc, res, out = module(node, "kernel_boot", label, **args)
        assert rc != 0 and "GRUB_DEFAULT is '0' in /etc/default/grub" in res["msg"], out
    assert grubenv(node) == {} and "panic=" not in entry(node, NEW)
    # EL 8 with UEFI: /boot/grub2/grubenv -> ../efi/EFI/redhat/grubenv
    with open(os.path.join(root, "etc/default/grub"), "w") as fh:
        fh.write("GRUB_DEFAULT=saved\n")
    efi = os.path.join(root, "boot/efi/EFI/redhat")
    os.makedirs(efi)
    os.rename(os.path.join(root, "boot/grub2/grubenv"), os.path.join(efi, "grubenv"))
    os.symlink("../efi/EFI/redhat/grubenv", os.path.join(root, "boot/grub2/grubenv"))
    rc, res, out = module(node, "kernel_boot", "once-efi", state="once", release=release(NEW), panic_seconds=0)
    assert rc == 0 and res["changed"], out
    assert os.path.islink(os.path.join(root, "boot/grub2/grubenv"))
    assert grubenv(node)["next_entry"] == "%s-%s" % (MID, release(NEW))
    assert "panic=" not in entry(node, NEW)  # panic_seconds 0: the entry is left alone
