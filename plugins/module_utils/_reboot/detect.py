# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Reboot detector: does this node ask for a reboot, and why.

The reasons the node's own tooling gives, read the way kured reads them
(https://kured.dev/docs/configuration/: a sentinel file, or a command):

- Debian/Ubuntu: ``/var/run/reboot-required`` (written by a package's
  maintainer script; ``/var/run/reboot-required.pkgs`` names the packages);
- EL (dnf/yum): ``needs-restarting -r`` exits 1 when core libraries or the
  kernel were updated since boot;
- a kernel installed under ``/boot`` newer than the running one, of the same
  flavour, in the package manager's order (``_kernel.release``: dpkg's on
  Debian and Ubuntu, rpm's on EL - a ``-cloud-amd64`` or ``+debug`` kernel
  beside an ``-amd64`` one is not newer; what the ``kernel`` role installs;
  Debian writes no sentinel for it). A kernel that
  failed to boot once (recorded by ``nodefix.k8s.kernel_boot`` in
  ``/var/lib/nodefix-k8s/kernel-boot.json``) is not a reason: booting it
  again would fail again. It is reported in the facts.

Also the boot's identity (``boot_id``), the running kernel and systemd's
state, which the reboot path reads before and after a reboot to prove the
node came back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_record as kernel_boot_record
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import distro as kernel_distro
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import release as kernel_release
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel.detect import read_running_release
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

REQUIRED_FILE = "/var/run/reboot-required"
REQUIRED_PKGS = "/var/run/reboot-required.pkgs"

FINDINGS = {
    "reboot.required": {
        "severity": "medium",
        "title": "The node asks for a reboot: updates it installed take effect only after one",
        "remedy": ("Reboot the node drained, in a maintenance window: nodefix.k8s.remediate with "
                   "nodefix_reboot_enabled (lock, window, blocking pods and alerts as kured has them)."),
        "role": "nodefix.k8s.reboot",
        "tag": "reboot",
    },
    "reboot.kernel_not_running": {
        "severity": "medium",
        "title": "A newer kernel is installed than the one running: its fixes are not in effect until a reboot",
        "remedy": ("Reboot the node drained (nodefix.k8s.remediate with nodefix_reboot_enabled); the kernel role "
                   "boots a new kernel once and keeps it only when the node comes back healthy on it."),
        "role": "nodefix.k8s.reboot",
        "tag": "reboot",
    },
}

OPTIONS = {}

_SPLIT = lazy_compile(r"(\d+)")


def release_key(release):
    """A sort key for kernel releases: numbers compare as numbers (6.1.0-30 > 6.1.0-9)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _SPLIT.split(release or "") if part)


def installed_kernels(root):
    """Releases with a ``/boot/vmlinuz-<release>``, oldest first."""
    try:
        names = os.listdir(root_path(root, "/boot"))
    except OSError:
        return []
    return sorted((n[len("vmlinuz-"):] for n in names if n.startswith("vmlinuz-") and len(n) > len("vmlinuz-")),
                  key=release_key)


def failed_boots(root):
    """{release: record} of kernels that failed to boot (``_kernel.boot``'s record); {} when none, or when the
    record cannot be read (the kernel_boot module reports that itself)."""
    try:
        return dict(kernel_boot_record.read_record(root)["failed"])
    except NodefixError:
        return {}


def systemd_state(runner):
    """``systemctl is-system-running``: running, degraded, starting, ... (None without systemctl). A fact, no
    finding's: a runner that reads findings only (``findings_only``, the node-problem-detector plugin's) does not
    start systemctl for it."""
    if getattr(runner, "findings_only", False):
        return None
    systemctl = runner.bin("systemctl")
    if systemctl is None:
        return None
    _rc, out, _err = runner.run([systemctl, "is-system-running"], check=False)
    return out.strip() or None


def needs_restarting(runner):
    """(reason or None, error or None) from EL's ``needs-restarting -r`` (absent: (None, None))."""
    tool = runner.bin("needs-restarting")
    if tool is None:
        return None, None
    rc, out, err = runner.run([tool, "-r"], check=False)
    if rc == 0:
        return None, None
    if rc == 1:
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        return " ".join(lines[-2:]) or "needs-restarting -r: reboot is required", None
    return None, "needs-restarting -r failed (rc=%d): %s" % (rc, (err or out).strip()[:300])


def state(runner, root="/"):
    """Everything the reboot path reads about the node, reasons included."""
    running = read_running_release(root)
    boot_id = (read_text(root_path(root, "/proc/sys/kernel/random/boot_id")) or "").strip() or None
    kernels = installed_kernels(root)
    failed = failed_boots(root)
    bootable = [k for k in kernels if k not in failed]
    fam = kernel_distro.family(root) or "debian"
    newest = kernel_release.newest(bootable, running, fam) if running else None
    reasons = []
    errors = []
    required = os.path.exists(root_path(root, REQUIRED_FILE))
    pkgs = [p.strip() for p in (read_text(root_path(root, REQUIRED_PKGS)) or "").splitlines() if p.strip()]
    if required:
        reasons.append({"id": "reboot.required", "check": "reboot", "reason": "%s exists%s" % (
            REQUIRED_FILE, " (packages: %s)" % ", ".join(sorted(set(pkgs))) if pkgs else "")})
    el_reason, el_error = needs_restarting(runner)
    if el_reason:
        reasons.append({"id": "reboot.required", "check": "reboot", "reason": "needs-restarting -r: %s" % el_reason})
    if el_error:
        errors.append(el_error)
    if running and newest and kernel_release.compare(newest, running, fam) == 1:
        reasons.append({"id": "reboot.kernel_not_running", "check": "reboot",
                        "reason": "kernel %s is installed, %s is running" % (newest, running)})
    return {
        "boot_id": boot_id,
        "running_release": running,
        "installed_kernels": kernels,
        "newest_kernel": newest,
        "failed_kernels": failed,
        "reboot_required_file": required,
        "reboot_required_pkgs": sorted(set(pkgs)),
        "systemd_state": systemd_state(runner),
        "reasons": reasons,
        "errors": errors,
        "pending": bool(reasons),
    }


def check(runner, root="/"):
    """The detector (node_audit's ``reboot`` check): one finding per reason."""
    out = state(runner, root=root)
    findings = []
    seen = set()
    for reason in out["reasons"]:
        if reason["id"] in seen:
            findings[-1]["evidence"]["reasons"].append(reason["reason"])
            continue
        seen.add(reason["id"])
        findings.append(finding_from(FINDINGS, reason["id"], subject=out["running_release"] or "node",
                                     evidence={"reasons": [reason["reason"]], "running_release": out["running_release"],
                                               "newest_kernel": out["newest_kernel"],
                                               "packages": out["reboot_required_pkgs"]}))
    if out["errors"]:
        # what could not be read is not reported as "no reboot needed"
        exc = NodefixError("; ".join(out["errors"]))
        exc.findings = findings
        raise exc
    out["findings"] = findings
    return out


def reasons_after(audit, reasons):
    """Which of the reboot's ``reasons`` ({id, check, ...}) are still there in ``audit`` (node_audit's
    result read after the boot): {"open": ids the detectors reported again, "unchecked": checks that
    could not run (an error, an ``audit.check_failed`` finding, or absent)}. A reason is gone only
    when its detector ran and did not report it: a detector that could not look proves nothing."""
    if not isinstance(audit, dict):
        raise NodefixError("the audit after the reboot is not a node_audit result: %s" % type(audit).__name__)
    if not isinstance(reasons, (list, tuple)) or not all(isinstance(r, dict) and r.get("id") for r in reasons):
        raise NodefixError("the reboot's reasons must be a list of {id, check}, got %r" % (reasons,))
    checks = audit.get("checks") if isinstance(audit.get("checks"), dict) else {}
    findings = [f for f in audit.get("findings") or [] if isinstance(f, dict)]
    failed = set(f.get("subject") for f in findings if f.get("id") == "audit.check_failed")
    ran = set(name for name, out in checks.items()
              if isinstance(out, dict) and "error" not in out and name not in failed)
    ids = [r["id"] for r in reasons]
    wanted = []
    for reason in reasons:
        name = reason.get("check") or reason["id"].split(".", 1)[0]
        if name not in wanted:
            wanted.append(name)
    return {"open": sorted(set(f.get("id") for f in findings if f.get("id") in ids)),
            "unchecked": [name for name in wanted if name not in ran]}
