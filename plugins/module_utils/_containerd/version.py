# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""containerd's and runc's versions: parsed and ordered.

Formats parsed here (the real outputs of Debian's containerd 1.4-2.1 and runc
packages are kept as fixtures in tests/unit/fixtures/containerd/):

- ``containerd --version``
  Debian:   ``containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3``
  upstream: ``containerd github.com/containerd/containerd v1.7.0-rc.1 <commit>``
  2.x:      ``containerd github.com/containerd/containerd/v2 2.1.9+unknown `` (trailing space)
- ``runc --version`` first line ``runc version 1.1.5+ds1`` (Debian 11: ``1.0.0~rc93+ds1``).
- ``ctr version``: ``Client:`` and ``Server:`` blocks with ``Version:`` lines.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# runc PR #1651 (rounds systemd CPUQuota up to 10 ms) first shipped in v1.0.0-rc5
# (opencontainers/runc release notes).
RUNC_QUOTA_FIX = "1.0.0-rc5"
_PRE_RE = lazy_compile(r"^(alpha|beta|rc)[.\-_]?(\d*)", re.IGNORECASE)
_SEMVER_RE = lazy_compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(.*)$")
_PRE_RANK = {"alpha": 0, "beta": 1, "rc": 2}
_FINAL_RANK = 3


def parse_semver(text):
    """Split a containerd/runc version string.

    Handles upstream (``v1.7.0-rc.1``), Debian (``1.6.20~ds1``, ``1.0.0~rc93+ds1``,
    ``1.7.0~rc.1``) and Go build suffixes (``2.1.9+unknown``). Returns a dict
    with ``version`` (normalised ``X.Y.Z`` or ``X.Y.Z-<pre>``), ``base``,
    ``major``/``minor``/``patch``, ``prerelease`` (``rc.1``, ``rc93`` or None),
    ``is_prerelease`` and ``key`` (a tuple that orders pre-releases before
    the final release), or None when ``text`` is not a version.
    """
    text = (text or "").strip()
    m = _SEMVER_RE.match(text)
    if not m:
        return None
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    rest = m.group(4) or ""
    build = None
    if "+" in rest:
        rest, build = rest.split("+", 1)
    prerelease = None
    pre_kind, pre_num = None, 0
    # the suffix is a list of parts separated by - ~ . ; the first alpha/beta/rc
    # part marks a pre-release, Debian's ``ds1``/``dfsg`` repack marks are not.
    parts = [p for p in re.split(r"[-~]", rest) if p]
    distro = []
    for part in parts:
        pm = _PRE_RE.match(part.lstrip("."))
        if pm and prerelease is None:
            pre_kind = pm.group(1).lower()
            pre_num = int(pm.group(2)) if pm.group(2) else 0
            prerelease = part.lstrip(".")
            continue
        distro.append(part)
    base = "%d.%d.%d" % (major, minor, patch)
    key = (major, minor, patch, _PRE_RANK[pre_kind] if pre_kind else _FINAL_RANK, pre_num)
    return {
        "raw": text,
        "version": base + ("-" + prerelease if prerelease else ""),
        "base": base,
        "major": major,
        "minor": minor,
        "patch": patch,
        "prerelease": prerelease,
        "is_prerelease": prerelease is not None,
        "distro_suffix": "~".join(distro) or None,
        "build": build,
        "key": key,
    }


def semver_lt(a, b):
    """True when version text ``a`` is older than ``b`` (pre-releases first)."""
    pa, pb = parse_semver(a), parse_semver(b)
    if pa is None or pb is None:
        raise ValueError("not a version: %r / %r" % (a, b))
    return pa["key"] < pb["key"]


def parse_containerd_version(text):
    """Parse ``containerd --version`` (any build); None when unrecognised."""
    for line in (text or "").splitlines():
        tokens = line.split()
        if len(tokens) < 3 or tokens[0] != "containerd":
            continue
        parsed = parse_semver(tokens[2])
        if parsed is None:
            continue
        parsed.update({
            "package": tokens[1],
            "revision": tokens[3] if len(tokens) > 3 else None,
            "line": line.rstrip(),
        })
        return parsed
    return None


def parse_runc_version(text):
    """Parse ``runc --version``; adds ``commit`` and ``spec`` when printed."""
    result = None
    extra = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("runc version"):
            result = parse_semver(line[len("runc version"):].strip())
        elif ":" in line:
            key, value = line.split(":", 1)
            extra[key.strip().lower()] = value.strip()
    if result is None:
        return None
    result["commit"] = extra.get("commit")
    result["spec"] = extra.get("spec")
    return result


def runc_has_quota_bug(info):
    """True when runc (``parse_runc_version``'s result) predates the CPU-quota rounding fix (v1.0.0-rc5)."""
    return info["key"] < parse_semver(RUNC_QUOTA_FIX)["key"]


def parse_ctr_version(text):
    """Parse ``ctr version`` into {'client': ver, 'server': ver, 'server_revision': rev}."""
    section = None
    result = {"client": None, "server": None, "server_revision": None, "uuid": None}
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped in ("Client:", "Server:"):
            section = stripped[:-1].lower()
            continue
        if ":" not in stripped or section is None:
            continue
        key, value = [s.strip() for s in stripped.split(":", 1)]
        if key == "Version":
            result[section] = value
        elif key == "Revision" and section == "server":
            result["server_revision"] = value
        elif key == "UUID" and section == "server":
            result["uuid"] = value
    return result
