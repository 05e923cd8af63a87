# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Which kernel package would fix this node, from its own package sources (apt or dnf).

Debian and Ubuntu (apt): a kernel is installed through the distribution's meta-package - Debian's
``linux-image-<arch>`` (``linux-image-amd64``; bookworm-backports carries a
newer one), Ubuntu's ``linux-generic`` or an HWE flavour
(``linux-generic-hwe-22.04``) - or a package the user pins. The meta-package's
candidate depends on the versioned image (``linux-image-6.12.95+deb12-amd64``),
whose name after ``linux-image-`` is the release ``uname -r`` will print
(``apt-cache show``'s ``Depends``, as apt resolves it). Before anything is
drained, the plan says which release would be installed and refuses a package
or version the sources do not have, or a kernel that would still be below the
minimum.

EL and Fedora (dnf): the ``kernel`` package (or ELRepo's ``kernel-ml``/``kernel-lt``,
or one the user pins) requires ``kernel-core-uname-r = RELEASE`` and its core package
provides ``kernel-uname-r = RELEASE`` - RELEASE is what ``uname -r`` prints
(``5.14.0-427.13.1.el9_4.x86_64``); ``dnf repoquery --requires``/``--provides`` read
it, as dnf resolves it. Kernels are install-only packages there: a new one is
installed beside the running one, never over it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import release as kernel_release
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel.distro import family_of, os_ids

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_RPM_VERSION_RE = re.compile(r"^(?:[0-9]+:)?[0-9A-Za-z._+~^]+-[0-9A-Za-z._+~^]+$")
_RPM_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_+.-]*$")
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_UNAME_R = re.compile(r"^kernel[A-Za-z0-9_+-]*-uname-r\s*=\s*(\S+)$")
_VERSION_RE = re.compile(r"^[0-9A-Za-z.+~:-]+$")
_RELEASE_OF = re.compile(r"^linux-image-(\d+\.\d+[0-9A-Za-z.+_~-]*)$")
_UNSIGNED = re.compile(r"-unsigned$")
# a version line of apt-cache policy's table: " *** VERSION PRIO" (installed) or "     VERSION PRIO"
_POLICY_VERSION = re.compile(r"^ (?:\*\*\*|   ) (\S+) -?\d+$")


def check_input(name, version, default_release, family="debian", enablerepo=()):
    """NodefixError naming the first argument that cannot be a package name, version, release or repository
    of this node's family (``debian``: apt; ``el``: dnf)."""
    if family == "el":
        if name is not None and not _RPM_NAME_RE.match(name):
            raise NodefixError("package %r is not an RPM package name" % name)
        if version is not None and not _RPM_VERSION_RE.match(version):
            raise NodefixError("version %r is not an RPM version ([EPOCH:]VERSION-RELEASE)" % version)
        if default_release is not None:
            raise NodefixError("default_release is apt's (apt-get -t); this node uses dnf: name the repository "
                               "with enablerepo instead")
        for repo in enablerepo:
            if not _REPO_RE.match(repo):
                raise NodefixError("enablerepo %r is not a repository id (e.g. elrepo-kernel)" % repo)
        return
    if enablerepo:
        raise NodefixError("enablerepo is dnf's; this node uses apt: name the release with default_release instead")
    if name is not None and not _NAME_RE.match(name):
        raise NodefixError("package %r is not a Debian package name" % name)
    if version is not None and not _VERSION_RE.match(version):
        raise NodefixError("version %r is not a Debian package version" % version)
    if default_release is not None and not _NAME_RE.match(default_release):
        raise NodefixError("default_release %r is not a release name (e.g. bookworm-backports)" % default_release)


def default_package(root, arch):
    """The distribution's kernel meta-package for this node."""
    distro, like = os_ids(root)
    fam = family_of(distro, like)
    if distro == "ubuntu":
        return "linux-generic"
    if fam == "debian":
        return "linux-image-%s" % arch
    if fam == "el":
        return "kernel"
    raise NodefixError("no default kernel package for %r nodes (ID_LIKE %r): set the package"
                       % (distro or "unknown", " ".join(like)))


def parse_policy(text):
    """(installed, candidate, [versions]) from ``apt-cache policy NAME``; versions newest first."""
    installed = candidate = None
    versions = []
    in_table = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Installed:"):
            installed = s.split(":", 1)[1].strip()
        elif s.startswith("Candidate:"):
            candidate = s.split(":", 1)[1].strip()
        elif s.startswith("Version table:"):
            in_table = True
        elif in_table:
            m = _POLICY_VERSION.match(line)
            if m:
                versions.append(m.group(1))
    none = ("(none)", "")
    return (None if installed in none else installed), (None if candidate in none else candidate), versions


def release_of(name, depends):
    """The kernel release a package installs: its own name, or the image its Depends names first."""
    m = _RELEASE_OF.match(_UNSIGNED.sub("", name))
    if m:
        return m.group(1)
    for alt in (depends or "").split(","):
        dep = alt.strip().split("|")[0].strip().split(" ")[0]
        m = _RELEASE_OF.match(_UNSIGNED.sub("", dep))
        if m:
            return m.group(1)
    return None


def next_image(depends):
    """(name, version or None) of the first ``linux-image-*`` package a meta-package's Depends names
    (``linux-image-generic (= 5.15.0.91.88)``: that exact version); None when it names none."""
    for alt in (depends or "").split(","):
        first = alt.strip().split("|")[0].strip()
        m = re.match(r"^(linux-image-[a-z0-9][a-z0-9+.-]*)(?:\s*\(\s*=\s*([^)\s]+)\s*\))?", first)
        if m:
            return m.group(1), m.group(2)
    return None


def field(stanza, key):
    for line in stanza.splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


class Apt(object):
    """apt-cache / apt-get through the collection's Runner."""

    FAMILY = "debian"
    # what plan() says when the sources lack the package, or it installs no kernel
    NOT_FOUND = ("package %s is not in this node's package sources (apt-cache policy %s: no candidate; run apt-get "
                 "update, or add the source that has it)")
    NOT_KERNEL = "no linux-image-<release> in its name or Depends"

    # how deep release() follows meta-packages: Ubuntu's linux-generic -> linux-image-generic ->
    # linux-image-<release> is two steps; a longer chain is not a kernel package's
    MAX_DEPTH = 4

    def __init__(self, runner, default_release=None, lists=None):
        self.runner = runner
        self.default_release = default_release
        self.lists = lists

    def _opts(self):
        """apt's options: the target release; with ``lists`` (a private directory - check mode), the
        package lists read from and fetched into it, and no binary cache written anywhere."""
        opts = ["-t", self.default_release] if self.default_release else []
        if self.lists:
            opts += ["-o", "Dir::State::Lists=%s" % self.lists, "-o", "Dir::Cache::pkgcache=",
                     "-o", "Dir::Cache::srcpkgcache="]
        return opts

    def update(self):
        tool = self.runner.bin("apt-get", required=True)
        self.runner.run([tool, "update", "-q"] + self._opts(),
                        msg="apt-get update failed: the package lists could not be refreshed")

    def policy(self, name):
        tool = self.runner.bin("apt-cache", required=True)
        _rc, out, _err = self.runner.run([tool] + self._opts() + ["policy", name],
                                         msg="apt-cache policy %s failed" % name)
        return parse_policy(out)

    def show(self, name, version):
        tool = self.runner.bin("apt-cache", required=True)
        _rc, out, _err = self.runner.run([tool] + self._opts() + ["show", "%s=%s" % (name, version)],
                                         msg="apt-cache show %s=%s failed" % (name, version))
        return out.split("\n\n")[0]

    def install(self, name, version):
        tool = self.runner.bin("apt-get", required=True)
        # --no-remove: a kernel install that would remove a package (a conflict) fails instead
        argv = [tool, "install", "-y", "-q", "--no-install-recommends", "--no-remove",
                "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"] + self._opts() + [
                    "%s=%s" % (name, version)]
        return self.runner.run(argv, msg="apt-get install %s=%s failed" % (name, version))

    def release(self, name, version):
        """The kernel release ``name=version`` installs (None: not a kernel package), following the
        meta-packages' Depends to the ``linux-image-<release>`` package (bounded: MAX_DEPTH)."""
        for _step in range(self.MAX_DEPTH):
            depends = field(self.show(name, version), "Depends")
            found = release_of(name, depends)
            if found is not None:
                return found
            nxt = next_image(depends)
            if nxt is None:
                return None
            name, version = nxt
            if version is None:
                version = self.policy(name)[1]
                if version is None:
                    return None
        return None

    def installed(self, release, root="/"):
        """(True, None) when dpkg says ``linux-image-<release>`` (or its -unsigned build) is fully
        installed; else (False, why)."""
        tool = self.runner.bin("dpkg-query", required=True)
        admin = [] if root in ("/", "", None) else ["--admindir=%s" % root_path(root, "/var/lib/dpkg")]
        names = ["linux-image-%s" % release, "linux-image-%s-unsigned" % release]
        _rc, out, _err = self.runner.run([tool] + admin + ["-W", "-f", "${Package} ${db:Status-Abbrev}\\n"] + names,
                                         check=False)
        states = dict(line.split(None, 1) for line in out.splitlines() if len(line.split(None, 1)) == 2)
        for name in names:
            if states.get(name, "").strip() == "ii":
                return True, None
        seen = ", ".join("%s %s" % (n, states[n].strip()) for n in names if n in states)
        return False, ("dpkg does not have linux-image-%s installed (%s)" % (
            release, "status " + seen if seen else "not known to dpkg"))

    @staticmethod
    def normalise(version):
        return version


def _evr(version):
    """An RPM version as dnf prints ``%{evr}``: no ``0:`` epoch."""
    return version[2:] if version.startswith("0:") else version


def uname_r(lines):
    """The release a ``kernel*-uname-r = RELEASE`` line of dnf repoquery's --requires/--provides names."""
    for line in lines.splitlines():
        m = _UNAME_R.match(line.strip())
        if m:
            return m.group(1)
    return None


class Dnf(object):
    """dnf repoquery / dnf install through the collection's Runner; ``root`` other than / is dnf's
    ``--installroot`` (a node's tree mounted elsewhere)."""

    FAMILY = "el"
    NOT_FOUND = ("package %s is not in this node's enabled repositories (dnf repoquery --available %s: nothing; "
                 "enable the repository that has it with enablerepo)")
    NOT_KERNEL = "no kernel-uname-r in its Requires or Provides"

    def __init__(self, runner, enablerepo=(), root="/", lists=None):
        self.runner = runner
        self.enablerepo = list(enablerepo or ())
        self.root = root
        self.lists = lists

    def _argv(self, *args):
        argv = [self.runner.bin("dnf", required=True), "-q"]
        if self.root not in ("/", "", None):
            argv += ["--installroot=%s" % self.root, "--setopt=reposdir=%s" % root_path(self.root, "/etc/yum.repos.d")]
        if self.lists:  # check mode: metadata fetched into and read from a private cache
            argv += ["--setopt=cachedir=%s" % self.lists]
        return argv + ["--enablerepo=%s" % r for r in self.enablerepo] + list(args)

    def installed(self, release, root="/"):
        """(True, None) when rpm has a package providing ``kernel-uname-r = <release>`` installed
        (kernel-core); else (False, why)."""
        tool = self.runner.bin("rpm", required=True)
        argv = [tool] + ([] if root in ("/", "", None) else ["--root", root])
        # rpm -q --whatprovides takes no version: the installed kernels' provides, read and matched here
        rc, out, err = self.runner.run(argv + ["-q", "--whatprovides", "kernel-uname-r", "--qf",
                                               "[%{PROVIDENAME} %{PROVIDEVERSION}\\n]"], check=False)
        if rc == 0 and "kernel-uname-r %s" % release in [line.strip() for line in out.splitlines()]:
            return True, None
        return False, "rpm has no package providing kernel-uname-r = %s installed (%s)" % (
            release, "rc=%d: %s" % (rc, (err or out).strip()[:200]) if rc else "other kernels only")

    def update(self):
        self.runner.run(self._argv("makecache"),
                        msg="dnf makecache failed: the repository metadata could not be refreshed")

    def _query(self, *args):
        _rc, out, _err = self.runner.run(self._argv("repoquery", *args), msg="dnf repoquery %s failed" % " ".join(args))
        return out

    def policy(self, name):
        """(newest installed, candidate, [available versions]) as apt's policy reads them; ``--latest-limit``
        compares versions as rpm does."""
        # "\n": dnf5's --qf adds no newline (dnf4 adds one more: a blank line, which split() drops)
        installed = self._query("--installed", "--latest-limit", "1", "--qf", "%{evr}\\n", name).split()
        candidate = self._query("--available", "--latest-limit", "1", "--qf", "%{evr}\\n", name).split()
        versions = self._query("--available", "--showduplicates", "--qf", "%{evr}\\n", name).split()
        versions = sorted(set(versions), key=versions.index)  # dnf's order (by text, not by version)
        return (installed[-1] if installed else None), (candidate[-1] if candidate else None), versions

    def release(self, name, version):
        spec = "%s-%s" % (name, _evr(version))
        return uname_r(self._query("--requires", spec)) or uname_r(self._query("--provides", spec))

    normalise = staticmethod(_evr)

    def install(self, name, version):
        spec = "%s-%s" % (name, _evr(version))
        return self.runner.run(self._argv("install", "-y", spec), msg="dnf install %s failed" % spec)


def plan(pm, name, version=None, min_release=None, below=None, running=None, allow_downgrade=False):
    """{package, version, release, installed_version}: what installing ``name`` would bring through the package
    manager ``pm`` (``Apt`` or ``Dnf``); NodefixError when the sources do not have it, its kernel would still be
    below ``min_release`` (``below(release)``), or - unless ``allow_downgrade`` - it is not newer than the
    ``running`` release (in the package manager's order)."""
    installed, candidate, versions = pm.policy(name)
    if not versions and candidate is None:
        raise NodefixError(pm.NOT_FOUND % (name, name))
    if version is not None:
        version = pm.normalise(version)
    want = version or candidate
    if want is None:
        raise NodefixError("package %s has no installable candidate (versions known: %s)" % (name, ", ".join(versions)))
    if version is not None and version not in versions:
        raise NodefixError("package %s has no version %s in this node's sources (available: %s)"
                           % (name, version, ", ".join(versions) or "none"))
    release = pm.release(name, want)
    if release is None:
        raise NodefixError("package %s %s installs no kernel image (%s): not a kernel package"
                           % (name, want, pm.NOT_KERNEL))
    if min_release and below is not None and below(release):
        raise NodefixError("package %s %s installs kernel %s, still below the minimum %s: it would not fix the node"
                           % (name, want, release, min_release))
    # versions only: a move to another flavour of the same version is not an upgrade either
    if running and not allow_downgrade and kernel_release.compare_versions(release, running, pm.FAMILY) <= 0:
        raise NodefixError("package %s %s installs kernel %s, not newer than the running %s: that is a downgrade (or "
                           "the same kernel) - nothing is installed or booted; set allow_downgrade to go back to an "
                           "older kernel on purpose" % (name, want, release, running))
    return {"package": name, "version": want, "release": release, "installed_version": installed}


BOOT_FILES = {"debian": ("/boot/vmlinuz-%s", "/boot/initrd.img-%s"), "el": ("/boot/vmlinuz-%s", "/boot/initramfs-%s.img")}


def installed(pm, root, release):
    """(True, None) when ``release`` is installed: the package manager says so AND its boot files
    (the kernel and its initramfs) are in /boot - a half-configured package, or one whose
    initramfs was never built, is not; else (False, why)."""
    ok, why = pm.installed(release, root)
    if not ok:
        return False, why
    missing = [path % release for path in BOOT_FILES[pm.FAMILY]
               if not os.path.isfile(root_path(root, path % release))]
    if missing:
        return False, "the package is installed but %s %s missing" % (", ".join(missing),
                                                                      "is" if len(missing) == 1 else "are")
    return True, None
