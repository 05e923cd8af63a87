# SPDX-License-Identifier: GPL-3.0-or-later
"""Kernel releases in the package manager's order: dpkg's (checked against the real
``dpkg --compare-versions`` of this Debian machine) and rpm's (rpmvercmp's documented cases, and
the real ``rpmdev-vercmp``/python3-rpm when present is not relied on)."""

import itertools
import shutil
import subprocess

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import release as kernel_release

DEB_VERSIONS = ["6.1.0-9", "6.1.0-10", "6.1.0-28", "6.12.95+deb12", "6.12.95+deb12~bpo", "6.12.9", "6.1", "1.0~rc1",
                "1.0", "1.0a", "1.0+b1", "1.0-1", "5.15.0-91", "5.15.0-101", "2.6.32-5", "0006.1"]


def test_dpkg_order_is_dpkgs_own():
    dpkg = shutil.which("dpkg")
    assert dpkg, "dpkg is on every Debian machine the test command runs on"
    for a, b in itertools.permutations(DEB_VERSIONS, 2):
        lt = subprocess.run([dpkg, "--compare-versions", a, "lt", b], check=False).returncode == 0
        gt = subprocess.run([dpkg, "--compare-versions", a, "gt", b], check=False).returncode == 0
        want = -1 if lt else (1 if gt else 0)
        assert kernel_release.dpkg_compare(a, b) == want, (a, b)


@pytest.mark.parametrize("a, b, want", [
    ("1.0", "1.0", 0), ("1.0", "1.1", -1), ("1.10", "1.9", 1), ("1.0a", "1.0", 1), ("1.0", "1.0.1", -1),
    ("1.0~rc1", "1.0", -1), ("1.0~rc1", "1.0~rc2", -1), ("1.0^post1", "1.0", 1), ("1.0^post1", "1.0.1", -1),
    ("1.a", "1.1", -1), ("2.0.1", "2.0.1a", -1), ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.el9.x86_64", 1),
    ("5.14.0-503.el9.x86_64", "5.14.0-427.13.1.el9_4.x86_64", 1), ("1_0", "1.0", 0),
])
def test_rpm_order(a, b, want):
    first, second = b, a
    assert kernel_release.rpm_compare(a, b) == want
    assert kernel_release.rpm_compare(first, second) == -want   # and the other way round


@pytest.mark.parametrize("release, version, flavour", [
    ("6.1.0-28-amd64", "6.1.0-28", "amd64"), ("6.1.0-28-cloud-amd64", "6.1.0-28", "cloud-amd64"),
    ("6.12.95+deb12-amd64", "6.12.95+deb12", "amd64"), ("6.1.0-28-rt-amd64", "6.1.0-28", "rt-amd64"),
    ("5.15.0-91-generic", "5.15.0-91", "generic"), ("6.8.0-1012-aws", "6.8.0-1012", "aws"),
    ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.1.el9_4.x86_64", ""),
    ("5.14.0-427.13.1.el9_4.x86_64+debug", "5.14.0-427.13.1.el9_4.x86_64", "+debug"),
    ("6.11.5-1.el9.elrepo.x86_64", "6.11.5-1.el9.elrepo.x86_64", ""),
])
def test_a_release_is_a_version_and_a_flavour(release, version, flavour):
    assert kernel_release.split_flavour(release) == (version, flavour)


def test_other_flavours_are_never_newer():
    running = "6.1.0-28-amd64"
    assert kernel_release.newest(["6.1.0-28-amd64", "6.1.0-28-cloud-amd64", "6.1.0-28-rt-amd64"], running) == running
    assert kernel_release.newest(["5.15.0-91-generic", "5.15.0-91-lowlatency", "5.15.0-101-generic"], "5.15.0-91-generic") \
        == "5.15.0-101-generic"
    el = "5.14.0-427.13.1.el9_4.x86_64"
    assert kernel_release.newest([el, el + "+debug", "5.14.0-503.el9.x86_64+debug"], el, "el") == el
    assert kernel_release.compare("6.1.0-28-cloud-amd64", "6.1.0-28-amd64") is None
    assert kernel_release.compare("6.12.95+deb12-amd64", "6.1.0-28-amd64") == 1
