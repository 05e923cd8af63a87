# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kernel_package: apt-cache's real output shapes (Debian 12 with bookworm-backports), the
commands as a table."""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import package as kernel_package_lib
from ansible_collections.nodefix.k8s.plugins.modules import kernel_package

BINS = {"apt-cache": "/usr/bin/apt-cache", "apt-get": "/usr/bin/apt-get", "dpkg": "/usr/bin/dpkg",
        "dpkg-query": "/usr/bin/dpkg-query"}
RELEASE = "6.12.95+deb12-amd64"
POLICY = """linux-image-amd64:
  Installed: 6.1.176-1
  Candidate: 6.12.95-1~bpo12+1
  Version table:
     6.12.95-1~bpo12+1 500
        500 file:/srv/nodefix-lab-mirror ./ Packages
 *** 6.1.176-1 100
        100 /var/lib/dpkg/status
"""
SHOW = """Package: linux-image-amd64
Source: linux-signed-amd64 (6.12.95+1~bpo12+1)
Version: 6.12.95-1~bpo12+1
Architecture: amd64
Depends: linux-image-6.12.95+deb12-amd64 (= 6.12.95-1~bpo12+1)
Description: Linux for 64-bit PCs (meta-package)

"""
NONE = "N: Unable to locate package linux-image-foo\n"


def cmds(*extra):
    return [{"argv": [BINS["apt-cache"], "policy", "linux-image-amd64"], "rc": 0, "out": POLICY},
            {"argv": [BINS["apt-cache"], "show", "linux-image-amd64=6.12.95-1~bpo12+1"], "rc": 0, "out": SHOW}] + list(extra)


def dq(status=None):
    """dpkg-query -W's answer for the planned image: ``ii`` installed, another status, or unknown (rc 1)."""
    names = ["linux-image-%s" % RELEASE, "linux-image-%s-unsigned" % RELEASE]
    if status is None:
        return {"argv": [BINS["dpkg-query"]], "rc": 1, "out": "", "err": "dpkg-query: no packages found matching"}
    return {"argv": [BINS["dpkg-query"]], "rc": 0, "out": "%s %s\n" % (names[0], status)}


def test_parse_policy_and_release_of():
    assert kernel_package_lib.parse_policy(POLICY) == ("6.1.176-1", "6.12.95-1~bpo12+1", ["6.12.95-1~bpo12+1", "6.1.176-1"])
    assert kernel_package_lib.parse_policy(NONE) == (None, None, [])
    assert kernel_package_lib.release_of("linux-image-amd64", "linux-image-6.12.95+deb12-amd64 (= 6.12.95-1~bpo12+1)") == \
        "6.12.95+deb12-amd64"
    assert kernel_package_lib.release_of("linux-image-6.1.0-28-amd64-unsigned", None) == "6.1.0-28-amd64"
    assert kernel_package_lib.release_of("linux-generic", "linux-image-generic (= 6.8.0.49.49), linux-headers-generic") is None


def test_query_plans_the_backports_kernel(run_module, make_tree):
    root = make_tree({"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n', "/boot": None})
    result, failed, table = run_module(kernel_package, {"root": root, "name": "linux-image-amd64",
                                                        "min_release": "6.12"}, commands=cmds(dq()), bins=BINS)
    assert not failed and not result["changed"], result
    assert (result["package"], result["version"], result["release"]) == (
        "linux-image-amd64", "6.12.95-1~bpo12+1", "6.12.95+deb12-amd64")
    assert result["installed_version"] == "6.1.176-1" and result["kernel_installed"] is False


def test_default_package_from_os_release(run_module, make_tree):
    root = make_tree({"/etc/os-release": 'ID=debian\nVERSION_ID="12"\n', "/boot": None})
    arch = [{"argv": [BINS["dpkg"], "--print-architecture"], "rc": 0, "out": "amd64\n"}]
    result, failed, _t = run_module(kernel_package, {"root": root}, commands=arch + cmds(dq()), bins=BINS)
    assert not failed and result["package"] == "linux-image-amd64"


def test_present_installs_and_reads_boot(run_module, make_tree, tmp_path):
    root = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None})
    boot = tmp_path / "root" / "boot"

    install = {"argv": [BINS["apt-get"], "install", "-y", "-q", "--no-install-recommends", "--no-remove"], "rc": 0,
               "out": "Setting up ...\n"}
    # apt-get "installs" it: the table's command is followed by the files appearing
    orig = kernel_package_lib.Apt.install

    def install_and_place(self, name, version):
        out = orig(self, name, version)
        (boot / ("vmlinuz-" + RELEASE)).write_text("")
        (boot / ("initrd.img-" + RELEASE)).write_text("")
        return out
    kernel_package_lib.Apt.install = install_and_place
    try:
        result, failed, table = run_module(kernel_package, {"root": root, "state": "present", "name": "linux-image-amd64",
                                                            "min_release": "6.12"},
                                           commands=cmds(dq(), install, dq("ii")), bins=BINS)
    finally:
        kernel_package_lib.Apt.install = orig
    assert not failed and result["changed"] and result["kernel_installed"], result
    assert "linux-image-amd64=6.12.95-1~bpo12+1" in table.calls[-2]
    # already there: nothing to do
    result, failed, table = run_module(kernel_package, {"root": root, "state": "present", "name": "linux-image-amd64"},
                                       commands=cmds(dq("ii")), bins=BINS)
    assert not failed and not result["changed"] and table.expected == []


@pytest.mark.parametrize("status, files, why", [
    ("iF", ("vmlinuz", "initrd.img"), "status linux-image-6.12.95+deb12-amd64 iF"),     # half-configured
    ("ii", ("vmlinuz",), "/boot/initrd.img-6.12.95+deb12-amd64 is missing"),           # no initramfs
    (None, ("vmlinuz", "initrd.img"), "not known to dpkg"),                            # a stray file
])
def test_installed_means_dpkg_says_so_and_the_boot_files_are_there(run_module, make_tree, status, files, why):
    root = make_tree(dict([("/etc/os-release", "ID=debian\n")] + [("/boot/%s-%s" % (f, RELEASE), "") for f in files]))
    result, failed, table = run_module(kernel_package, {"root": root, "name": "linux-image-amd64"},
                                       commands=cmds(dq(status)), bins=BINS)
    assert not failed and result["kernel_installed"] is False and why in result["not_installed_because"], result
    # and present installs it - what apt installs must then pass the same test, or the module fails
    install = {"argv": [BINS["apt-get"], "install"], "rc": 0}
    result, failed, table = run_module(kernel_package, {"root": root, "state": "present", "name": "linux-image-amd64"},
                                       commands=cmds(dq(status), install, dq(status)), bins=BINS)
    assert failed and "is not installed" in result["msg"] and why in result["msg"]


@pytest.mark.parametrize("running, allowed", [
    ("6.12.95+deb12-amd64", False),      # the same kernel
    ("6.14.3+deb13-amd64", False),       # a newer one runs: a downgrade
    ("6.12.95+deb12-cloud-amd64", False),  # another flavour of the same version is no upgrade
    ("6.1.0-28-amd64", True),
])
def test_a_kernel_not_newer_than_the_running_one_is_refused(run_module, make_tree, running, allowed):
    root = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None, "/proc/sys/kernel/osrelease": running + "\n"})
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-amd64"},
                                    commands=cmds(dq()), bins=BINS)
    assert failed is not allowed, result
    if not allowed:
        assert "not newer than the running %s: that is a downgrade" % running in result["msg"]
        result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-amd64",
                                                         "allow_downgrade": True}, commands=cmds(dq()), bins=BINS)
        assert not failed and result["release"] == RELEASE


def test_check_mode_installs_nothing(run_module, make_tree):
    root = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None})
    result, failed, table = run_module(kernel_package, {"root": root, "state": "present", "name": "linux-image-amd64"},
                                       commands=cmds(dq()), bins=BINS, check_mode=True)
    assert not failed and result["changed"] and not result["kernel_installed"] and table.expected == []


def test_bad_input_is_refused_before_anything(run_module, make_tree):
    root = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None})
    missing = [{"argv": [BINS["apt-cache"], "policy", "linux-image-foo"], "rc": 0, "out": NONE}]
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-foo"}, commands=missing, bins=BINS)
    assert failed and "is not in this node's package sources" in result["msg"]
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-amd64", "version": "9.9-1"},
                                    commands=cmds()[:1], bins=BINS)
    assert failed and "has no version 9.9-1" in result["msg"] and "6.12.95-1~bpo12+1" in result["msg"]
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-amd64", "min_release": "6.13"},
                                    commands=cmds(), bins=BINS)
    assert failed and "still below the minimum 6.13" in result["msg"]
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux image; rm"}, bins=BINS)
    assert failed and "is not a Debian package name" in result["msg"]
    result, failed, _t = run_module(kernel_package, {"root": root, "min_release": "latest"}, bins=BINS)
    assert failed and "is not a kernel version" in result["msg"]


def test_a_kernel_that_failed_to_boot_here_is_refused_before_the_drain(run_module, make_tree):
    record = '{"failed": {"6.12.95+deb12-amd64": {"at": "2026-11-25T03:00:00Z", "came_back_on": "6.1.0-50-amd64"}}}'
    root = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None, "/var/lib/nodefix-k8s/kernel-boot.json": record})
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-amd64"}, commands=cmds(),
                                    bins=BINS)
    assert failed and "failed to boot on this node before" in result["msg"]
    assert "came back on 6.1.0-50-amd64" in result["msg"]


def test_update_cache_refreshes_the_lists_first_but_privately_in_check_mode(run_module, make_tree):
    root = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None})
    update = {"argv": [BINS["apt-get"], "update", "-q"], "rc": 0}
    result, failed, table = run_module(kernel_package, {"root": root, "name": "linux-image-amd64", "update_cache": True},
                                       commands=[update] + cmds(dq()), bins=BINS)
    assert not failed and table.calls[0] == [BINS["apt-get"], "update", "-q"] and table.expected == []
    assert result["lists"] == "refreshed"
    # check mode: every apt command reads and fetches a private lists directory, no binary cache
    private = [{"argv": [BINS["apt-get"], "update", "-q", "-o"], "rc": 0},
               {"argv": [BINS["apt-cache"], "-o"], "rc": 0, "out": POLICY},
               {"argv": [BINS["apt-cache"], "-o"], "rc": 0, "out": SHOW}, dq()]
    result, failed, table = run_module(kernel_package, {"root": root, "name": "linux-image-amd64", "update_cache": True},
                                       commands=private, bins=BINS, check_mode=True)
    assert not failed and table.expected == [] and result["lists"] == "refreshed privately (check mode)", result
    lists = [a for a in table.calls[0] if a.startswith("Dir::State::Lists=")]
    assert len(lists) == 1 and "nodefix-lists-" in lists[0]
    for call in table.calls[:3]:
        assert lists[0] in call and "Dir::Cache::pkgcache=" in call, call
    assert not os.path.exists(lists[0].split("=", 1)[1])      # removed afterwards
    broken = dict(update, rc=100, err="E: The repository 'file:/srv/mirror ./ Release' does not have a Release file.")
    result, failed, _t = run_module(kernel_package, {"root": root, "name": "linux-image-amd64", "update_cache": True},
                                    commands=[broken], bins=BINS)
    assert failed and "apt-get update failed" in result["msg"] and result["rc"] == 100


def test_ubuntu_meta_packages_are_followed_to_the_image():
    chain = {("linux-generic", "5.15.0.91.88"): "Depends: linux-image-generic (= 5.15.0.91.88), linux-headers-generic",
             ("linux-image-generic", "5.15.0.91.88"): "Depends: linux-image-5.15.0-91-generic, linux-modules-extra-x",
             ("linux-loop", "1"): "Depends: linux-image-loop (= 1)", ("linux-image-loop", "1"): "Depends: linux-image-loop (= 1)"}

    class Show(kernel_package_lib.Apt):
        def show(self, name, version):
            return chain[(name, version)]
    apt = Show(None)
    assert apt.release("linux-generic", "5.15.0.91.88") == "5.15.0-91-generic"
    assert apt.release("linux-loop", "1") is None        # a cycle ends after MAX_DEPTH steps


# EL 9 with dnf: repoquery's real output shapes (dnf 4.14 against a repository of EL-shaped kernel packages)
DNF = {"dnf": "/usr/bin/dnf", "rpm": "/usr/bin/rpm"}
REQUIRES = "kernel-core-uname-r = 5.14.0-503.11.1.el9_5.x86_64\nkernel-modules-uname-r = 5.14.0-503.11.1.el9_5.x86_64\n"
EL9 = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n'


def dnf_cmds(installed="", *extra):
    q = [DNF["dnf"], "-q", "repoquery"]
    return [{"argv": q + ["--installed", "--latest-limit", "1", "--qf", "%{evr}\\n", "kernel"], "rc": 0, "out": installed},
            {"argv": q + ["--available", "--latest-limit", "1", "--qf", "%{evr}\\n", "kernel"], "rc": 0,
             "out": "5.14.0-503.11.1.el9_5\n"},
            {"argv": q + ["--available", "--showduplicates", "--qf", "%{evr}\\n", "kernel"], "rc": 0,
             "out": "5.14.0-427.13.1.el9_4\n5.14.0-503.11.1.el9_5\n"},
            {"argv": q + ["--requires", "kernel-5.14.0-503.11.1.el9_5"], "rc": 0, "out": REQUIRES}] + list(extra)


def test_el_family_default_package_and_uname_r():
    assert kernel_package_lib.uname_r(REQUIRES) == "5.14.0-503.11.1.el9_5.x86_64"
    assert kernel_package_lib.uname_r("kernel-ml-core-uname-r = 6.12.1-1.el9.elrepo.x86_64\n") == "6.12.1-1.el9.elrepo.x86_64"
    assert kernel_package_lib.uname_r("kernel-core = 5.14.0\nkmod\n") is None
    kernel_package_lib.check_input("kernel-ml", "1:6.12.1-1.el9.elrepo", None, "el", ["elrepo-kernel"])


def test_el_node_plans_and_installs_with_dnf(run_module, make_tree, tmp_path):
    root = make_tree({"/etc/os-release": EL9, "/boot": None})
    # the root is not "/": dnf works on the tree (--installroot, its own repos)
    argv_root = ["--installroot=%s" % root, "--setopt=reposdir=%s/etc/yum.repos.d" % root]

    def rooted(cmds):
        return [dict(c, argv=c["argv"][:2] + argv_root + c["argv"][2:]) for c in cmds]
    rpm_q = {"argv": [DNF["rpm"], "--root", root, "-q", "--whatprovides", "kernel-uname-r"],
             "rc": 1, "out": "no package provides kernel-uname-r\n"}
    result, failed, table = run_module(kernel_package, {"root": root, "min_release": "5.14"},
                                       commands=rooted(dnf_cmds("5.14.0-427.13.1.el9_4\n")) + [rpm_q], bins=DNF)
    assert not failed and (result["manager"], result["package"], result["release"]) == (
        "dnf", "kernel", "5.14.0-503.11.1.el9_5.x86_64"), result
    assert result["installed_version"] == "5.14.0-427.13.1.el9_4" and table.expected == []
    install = {"argv": [DNF["dnf"], "-q"] + argv_root + ["install", "-y", "kernel-5.14.0-503.11.1.el9_5"], "rc": 1,
               "out": "", "err": "Error: Unable to find a match"}
    result, failed, table = run_module(kernel_package, {"root": root, "state": "present"},
                                       commands=rooted(dnf_cmds()) + [rpm_q, install], bins=DNF)
    assert failed and result["msg"] == "dnf install kernel-5.14.0-503.11.1.el9_5 failed" and result["rc"] == 1


def test_el_bad_input_names_the_manager(run_module, make_tree):
    root = make_tree({"/etc/os-release": EL9, "/boot": None})
    for args, words in (({"default_release": "bookworm-backports"}, "default_release is apt's"),
                        ({"version": "5.14 0"}, "is not an RPM version"),
                        ({"enablerepo": ["a b"]}, "is not a repository id")):
        result, failed, table = run_module(kernel_package, dict(args, root=root), bins=DNF)
        assert failed and words in result["msg"] and table.calls == [], result
    deb = make_tree({"/etc/os-release": "ID=debian\n", "/boot": None})
    result, failed, _t = run_module(kernel_package, {"root": deb, "enablerepo": ["elrepo-kernel"]}, bins=BINS)
    assert failed and "enablerepo is dnf's" in result["msg"]
    other = make_tree({"/etc/os-release": "ID=alpine\n", "/boot": None})
    result, failed, _t = run_module(kernel_package, {"root": other}, bins={})
    assert failed and "neither apt-cache nor dnf was found" in result["msg"]
