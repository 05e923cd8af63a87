# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Which of two kernel releases is newer, in the order the node's package manager uses.

A release (what ``uname -r`` prints) is a version and a flavour: Debian's
``6.1.0-28-cloud-amd64`` is version ``6.1.0-28`` of flavour ``cloud-amd64``, Ubuntu's
``5.15.0-91-generic`` version ``5.15.0-91`` of ``generic``, EL's
``5.14.0-427.13.1.el9_4.x86_64+debug`` version ``5.14.0-427.13.1.el9_4.x86_64`` of
``+debug``. Kernels of different flavours are not newer or older than each other (a
``-cloud-amd64`` kernel installed beside an ``-amd64`` one is not an upgrade of it);
versions of one flavour compare as the package manager compares package versions:
dpkg's order on Debian and Ubuntu (``deb-version(7)``: ``~`` before anything, letters
before other characters, digit runs as numbers) and rpm's on EL and Fedora
(``rpmvercmp``: alphanumeric segments, numbers above letters, ``~`` before and ``^``
after the end).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile


_DIGITS = lazy_compile(r"\d+")
_RPM_SEGMENT = lazy_compile(r"~|\^|\d+|[A-Za-z]+")
_PLUS_FLAVOUR = lazy_compile(r"^(.*?)(\+[A-Za-z][A-Za-z0-9_]*)$")


def split_flavour(release):
    """(version, flavour) of a kernel release (see the file's docstring)."""
    release = release or ""
    m = _PLUS_FLAVOUR.match(release)
    if m and "-" in m.group(1):  # EL's "+debug", "+rt"; not Debian's "6.12.95+deb12-amd64"
        return m.group(1), m.group(2)
    parts = release.split("-")
    for i, part in enumerate(parts[1:], 1):
        if part[:1].isalpha():
            return "-".join(parts[:i]), "-".join(parts[i:])
    return release, ""


def _dpkg_order(char):
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _dpkg_parts(version):
    """(epoch, upstream, revision) as dpkg parses a version: the epoch before the first ``:``,
    the revision after the last ``-``."""
    epoch, _sep, rest = version.partition(":") if ":" in version else ("0", "", version)
    upstream, _sep, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch) if epoch.isdigit() else 0, upstream, revision


def dpkg_compare(a, b):
    """-1, 0 or 1: ``a`` against ``b`` in dpkg's version order (dpkg_version_compare of
    lib/dpkg/version.c: epoch, then upstream, then revision, each by verrevcmp)."""
    (ea, ua, ra), (eb, ub, rb) = _dpkg_parts(a), _dpkg_parts(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _verrevcmp(ua, ub) or _verrevcmp(ra, rb)


def _verrevcmp(a, b):
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ca = _dpkg_order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            cb = _dpkg_order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ca != cb:
                return -1 if ca < cb else 1
            i += 1
            j += 1
        ma = _DIGITS.match(a, i)
        mb = _DIGITS.match(b, j)
        na = int(ma.group()) if ma else 0
        nb = int(mb.group()) if mb else 0
        if na != nb:
            return -1 if na < nb else 1
        i = ma.end() if ma else i
        j = mb.end() if mb else j
    return 0


def rpm_compare(a, b):
    """-1, 0 or 1: ``a`` against ``b`` in rpm's version order (rpmvercmp)."""
    sa, sb = _RPM_SEGMENT.findall(a), _RPM_SEGMENT.findall(b)
    for x, y in zip(sa, sb):
        if x != y and "~" in (x, y):
            return -1 if x == "~" else 1
        if x != y and "^" in (x, y):   # "1.0^x" is after "1.0" but before "1.0.1"
            return -1 if x == "^" else 1
        if x.isdigit() != y.isdigit():
            return 1 if x.isdigit() else -1
        if x.isdigit():
            x, y = int(x), int(y)
        if x != y:
            return -1 if x < y else 1
    if len(sa) == len(sb):
        return 0
    rest, sign = (sa[len(sb)], 1) if len(sa) > len(sb) else (sb[len(sa)], -1)
    if rest == "~":
        return -sign       # "1.0~rc1" is older than "1.0"
    if rest == "^":
        return sign        # "1.0^post" is newer than "1.0"
    return sign


def compare_versions(a, b, family="debian"):
    """-1, 0 or 1: the version of release ``a`` against ``b``'s, their flavours aside.
    ``family``: ``debian`` (dpkg's order) or ``el`` (rpm's)."""
    return (rpm_compare if family == "el" else dpkg_compare)(split_flavour(a)[0], split_flavour(b)[0])


def compare(a, b, family="debian"):
    """-1, 0 or 1: release ``a`` against ``b``; None when they are of different flavours
    (neither is an upgrade of the other)."""
    if split_flavour(a)[1] != split_flavour(b)[1]:
        return None
    return compare_versions(a, b, family)


def newest(releases, like, family="debian"):
    """The newest of ``releases`` of the same flavour as ``like`` (None when there is none)."""
    best = None
    for release in releases:
        if compare(release, like, family) is None:
            continue
        if best is None or compare(release, best, family) > 0:
            best = release
    return best
