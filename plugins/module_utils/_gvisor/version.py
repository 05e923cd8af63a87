# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""runsc's version: read (``runsc --version``), parsed (upstream tags, untagged builds, Debian packages) and
compared with the releases that matter (the google/gvisor#9580 fix, the systemd cgroup driver)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# First release with the #9580 fix (google/gvisor PR #9631).
FIXED_RELEASE = "20231106.0"
# First release with the systemd cgroup driver (google/gvisor PR #7287).
SYSTEMD_CGROUP_RELEASE = "20220321.0"

# runsc version output (upstream release builds, git builds and Debian packages):
#   runsc version release-20231009.0            (tagged upstream)
#   runsc version release-20201216.0-72-gbf343394d498   (untagged build)
#   runsc version 0.0~20221219.0                (Debian package)
_UPSTREAM_RE = lazy_compile(r"release-(\d{8})(?:\.(\d+))?(?:-(\d+)-g([0-9a-f]+))?")
_DEBIAN_RE = lazy_compile(r"^\d+(?:\.\d+)*~(?:git)?(\d{8})(?:\.(\d+))?")
_BARE_RE = lazy_compile(r"^(\d{8})(?:\.(\d+))?$")
_VERSION_LINE_RE = lazy_compile(r"runsc version\s+(\S+)")


def parse_release(text):
    """Parse one runsc version string into a dict, or None.

    Accepts ``release-20231009.0``, ``release-20201216.0-72-gbf343394d498``,
    ``0.0~20221219.0`` and a bare ``20231106.0``. ``key`` orders versions:
    (date, patch, commits after the tag).
    """
    if not text:
        return None
    text = text.strip()
    m = _UPSTREAM_RE.search(text)
    flavor = "upstream"
    if not m:
        m = _DEBIAN_RE.match(text)
        flavor = "debian"
    if not m:
        m = _BARE_RE.match(text)
        flavor = "release"
    if not m:
        return None
    date = int(m.group(1))
    patch = int(m.group(2) or 0)
    commits = int(m.group(3)) if flavor == "upstream" and m.group(3) else 0
    commit = m.group(4) if flavor == "upstream" and m.group(4) else None
    return {
        "version": text,
        "release": "%d.%d" % (date, patch),
        "date": date,
        "patch": patch,
        "commits_after_tag": commits,
        "commit": commit,
        "untagged": bool(commit),
        "flavor": flavor,
        "key": [date, patch, commits],
    }


def parse_runsc_version(output):
    """Parse the output of ``runsc --version`` (two lines); None if unknown."""
    m = _VERSION_LINE_RE.search(output or "")
    if not m:
        return None
    return parse_release(m.group(1))


def release_ge(parsed, minimum):
    """True when the parsed version is at or after release ``minimum``."""
    want = parse_release(minimum)
    if parsed is None or want is None:
        return False
    return list(parsed["key"]) >= [want["date"], want["patch"], 0]


def runsc_version(runner, path):
    """(parsed or None, raw output) of ``<path> --version``."""
    rc, out, err = runner.run([path, "--version"], check=False)
    text = (out or "") + (err or "")
    return (parse_runsc_version(text) if rc == 0 else None), text.strip()
