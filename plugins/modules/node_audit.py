#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_audit
short_description: Run every nodefix.k8s detector on a Kubernetes node in one module call
version_added: 1.0.0
description:
  - Runs the detectors of the collection (containerd, gVisor, kubelet, leaked mount units,
    PIDs and zombies, kernel, CPU quota, pending reboot) in a single module invocation and returns their
    findings, each with a stable id, a severity, evidence and the role and tag that fix it.
  - The detectors are the same code the per-problem modules run
    (M(nodefix.k8s.containerd_info), M(nodefix.k8s.runsc_info), M(nodefix.k8s.kubelet_config),
    M(nodefix.k8s.kubelet_mount_units), M(nodefix.k8s.pids_info), M(nodefix.k8s.kernel_info),
    M(nodefix.k8s.cpu_quota_info)); C(reboot) reads whether the node asks for a reboot
    (C(/var/run/reboot-required), EL's C(needs-restarting -r), a newer kernel installed than the one running).
  - Read-only, except that with O(textfile) it writes the findings in the Prometheus text format
    for node_exporter's textfile collector. A detector that fails does not stop the others; it is
    reported as the finding C(audit.check_failed).
  - Every finding id is documented in C(docs/findings.md) of the collection.
author:
  - nodefix.k8s developers (@nodefix)
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.root
attributes:
  check_mode:
    support: full
    details: The detectors run the same way; O(textfile) is not written (RV(textfile.changed) says whether it would be).
  diff_mode:
    support: none
    details: The detectors change nothing; O(textfile) is generated as a whole, so there is no diff.
  platform:
    details: Linux Kubernetes nodes.
options:
  checks:
    description:
      - Detectors to run. Default is all of them.
    type: list
    elements: str
    choices: [containerd, gvisor, kubelet, mount_units, pids, kernel, cpu_quota, reboot]
  options:
    description:
      - Options per detector, keyed by detector name, passed to that detector
        (the same names, types and defaults as the per-problem module's options).
      - Validated before any detector runs, against the same spec as the per-problem module
        (C(containerd) - M(nodefix.k8s.containerd_info), C(gvisor) - M(nodefix.k8s.runsc_info),
        C(kubelet) - O(nodefix.k8s.kubelet_config#module:unit) and O(nodefix.k8s.kubelet_config#module:kubelet_version),
        C(mount_units) - the query options of M(nodefix.k8s.kubelet_mount_units) plus C(near_limit_ratio) and C(reboot_over_seconds),
        C(pids) - M(nodefix.k8s.pids_info), C(kernel) - M(nodefix.k8s.kernel_info),
        C(cpu_quota) - M(nodefix.k8s.cpu_quota_info); C(reboot) takes none). An unknown key, a wrong type or a bad value fails
        the task with a message naming the detector and the key; nothing is checked then.
      - 'For example C({"pids": {"zombie_threshold": 10}}).'
    type: dict
    default: {}
  fail_on:
    description:
      - Fail the task when a finding of this severity or worse is present.
      - V(never) only reports.
    type: str
    default: never
    choices: [never, critical, high, medium, low, info]
  textfile:
    description:
      - Write the node's findings to this file in the Prometheus text exposition format, for
        node_exporter's textfile collector (U(https://github.com/prometheus/node_exporter#textfile-collector)),
        for example C(/var/lib/prometheus/node-exporter/nodefix.prom) (Debian's prometheus-node-exporter
        reads that directory).
      - Series, all gauges - C(nodefix_finding{check,id,severity,subject}) 1 per open finding (gone when fixed);
        C(nodefix_findings{severity}) the count per severity (0 included); C(nodefix_audit_check_failed{check})
        1 when a detector could not run. Waivers are a fleet decision and are applied in
        M(nodefix.k8s.audit_report)'s C(prometheus) format, not here.
      - The file's name must be C(nodefix.prom) (the triage reads that file; the npd role's
        O(nodefix.k8s.npd#role:main:npd_textfile) is the same file) and its directory must exist. node_exporter
        exports a series that two files carry from one of them only, so the collection writes one file of the
        C(nodefix_*) series on a node, never a second name beside it. Written atomically (a temporary file in the
        same directory whose name does not end in C(.prom), then a rename), mode 0644 for a new file, no backup.
        The file itself being a symbolic link fails the module - a link in the textfile directory (which
        node_exporter's user can often write) is never followed.
      - The file's bytes depend on the findings only (no timestamp series) - it is rewritten, and the task is
        changed, only when they differ, so repeated audits of an unchanged node stay C(changed=false) with the
        same bytes. Every run (not in check mode) sets the file's modification time to now, its bytes untouched -
        the audit's heartbeat, which node_exporter exports as C(node_textfile_mtime_seconds{file}) - alert on that
        for a stale audit.
    type: path
seealso:
  - module: nodefix.k8s.audit_report
"""

EXAMPLES = r"""
- name: Audit the node
  nodefix.k8s.node_audit:
  register: audit

- name: Only the gVisor and kubelet detectors, fail on critical findings
  nodefix.k8s.node_audit:
    checks: [gvisor, kubelet]
    fail_on: critical

- name: Audit and publish the findings to node_exporter's textfile collector
  nodefix.k8s.node_audit:
    textfile: /var/lib/prometheus/node-exporter/nodefix.prom

- name: Tune a detector
  nodefix.k8s.node_audit:
    options:
      pids:
        zombie_threshold: 20
"""

RETURN = r"""
findings:
  description: Every finding of the selected detectors.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Stable finding id, documented in docs/findings.md.
      type: str
      sample: gvisor.sandbox_oversized
    check:
      description: The detector that reported it.
      type: str
      sample: gvisor
    severity:
      description: One of critical, high, medium, low, info.
      type: str
      sample: critical
    title:
      description: One line for people.
      type: str
    subject:
      description: What the finding is about when one id can be reported several times (a sandbox, a unit, a cgroup).
      type: str
    evidence:
      description: The values that prove it.
      type: dict
    remedy:
      description: What fixes it.
      type: str
    fix:
      description: The role and tag of this collection that fix it (null when only people can).
      type: dict
      sample: {"role": "nodefix.k8s.gvisor", "tag": "gvisor"}
checks:
  description: The facts each detector gathered, keyed by detector name.
  returned: always
  type: dict
summary:
  description: Counts of the findings.
  returned: always
  type: dict
  contains:
    total:
      description: Number of findings.
      type: int
    by_severity:
      description: Number of findings per severity.
      type: dict
    worst:
      description: The most severe level found, null when there is none.
      type: str
    fix_roles:
      description: Roles that fix the findings.
      type: list
      elements: str
    ids:
      description: Distinct finding ids.
      type: list
      elements: str
    kubernetes_node:
      description:
        - Whether the host is a Kubernetes node - V(false) when the kubelet and containerd detectors both ran and
          found neither a kubelet nor a container runtime (then the finding C(audit.not_kubernetes_node) says so
          with what was looked for, and C(nodefix.k8s.remediate) leaves the host alone); V(null) when either did not
          run or failed.
      type: bool
timings:
  description: Seconds each detector took.
  returned: always
  type: dict
euid:
  description:
    - The effective user id the audit ran as on the node. C(nodefix.k8s.remediate) refuses a node where it is not
      V(0) (root) before changing anything - become is off or did not take - and says so.
  returned: always
  type: int
  sample: 0
textfile:
  description: What happened to O(textfile).
  returned: when O(textfile) is set
  type: dict
  contains:
    path:
      description: The file written.
      type: str
      sample: /var/lib/prometheus/node-exporter/nodefix.prom
    changed:
      description: Whether the file's bytes changed (its findings differ from the file's).
      type: bool
    written:
      description: Whether the file was rewritten (false in check mode, and when its bytes were already right - then
        only its modification time was refreshed).
      type: bool
    series:
      description: Number of C(nodefix_finding) series (open findings, one per id and subject).
      type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options
from ansible_collections.nodefix.k8s.plugins.module_utils._report import prometheus as report_prometheus
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import (
    FileSafetyError,
    node_path,
    read_utf8,
    resolve_target,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._core.fileio import write_files
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.checks import CHECK_NAMES, detector, run_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES, TEXTFILE, findings_at_or_above
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError


def build_module():
    return redacting(AnsibleModule)(
        argument_spec=dict(
            checks=dict(type="list", elements="str", choices=list(CHECK_NAMES)),
            options=dict(type="dict", default={}),
            root=dict(type="path", default="/"),
            fail_on=dict(type="str", default="never", choices=["never"] + list(SEVERITIES)),
            textfile=dict(type="path"),
        ),
        supports_check_mode=True,
    )


def textfile_target(root, path):
    """The real file behind ``textfile``: ``nodefix.prom`` in an existing directory."""
    if not path.endswith(".prom"):
        raise FileSafetyError("textfile %s must end in .prom (node_exporter's textfile collector reads only "
                              "*.prom files)" % path, path)
    # the one file of the nodefix_* series: node_exporter exports a series two files carry from one of them only
    # (the first by name), so a second name beside the tick's nodefix.prom could hide what that one says
    if os.path.basename(path) != TEXTFILE:
        raise FileSafetyError("textfile %s must be named %s (the node's one file of the nodefix_* series: the npd "
                              "role's tick writes the same; two files with the same series hide one another)"
                              % (path, TEXTFILE), path)
    # node_exporter's user can often write the textfile directory: a link planted there would turn this
    # root-owned write into a write of whatever file it names - never followed
    if os.path.islink(node_path(root, path)):
        raise FileSafetyError("textfile %s is a symbolic link (to %s): a link in the textfile directory is never "
                              "followed - remove it (the audit writes a regular file there)"
                              % (path, os.readlink(node_path(root, path))), path)
    real = resolve_target(root, node_path(root, path), what="textfile")
    if not os.path.isdir(os.path.dirname(real)):
        raise FileSafetyError("textfile directory %s does not exist (is node_exporter's textfile collector set up? "
                              "create it or point textfile elsewhere)" % os.path.dirname(real), path)
    return real


def write_textfile(module, real, result):
    """Render and (not in check mode) write the textfile atomically when its bytes change
    (changed); an unchanged one keeps its bytes and gets a new modification time, the
    audit's heartbeat (node_exporter's node_textfile_mtime_seconds)."""
    text = report_prometheus.node_textfile(result)
    try:
        old = read_utf8(real, what="textfile")
    except FileSafetyError:
        old = None  # unreadable or not text: rewritten as a whole
    changed = old != text
    info = {"path": real, "changed": changed, "written": False,
            "series": sum(1 for line in text.splitlines() if line.startswith("nodefix_finding{"))}
    if module.check_mode:
        return info
    if changed:
        # the collection's one atomic writer: temp file beside it (its name does not end in .prom, so the
        # collector never reads a half-written file), atomic_move, mode/owner kept, 0644 when new
        write_files(module, [(real, text)], backup=False, mode=0o644)
        info["written"] = True
    else:
        report_prometheus.refresh(real)
    return info


@redacted_main
def main():
    module = build_module()
    unknown = sorted(set(module.params["options"]) - set(CHECK_NAMES))
    if unknown:
        module.fail_json(msg="options names unknown detectors: %s (known: %s)" % (", ".join(unknown), ", ".join(CHECK_NAMES)))
    options, problems = {}, []
    for name in sorted(module.params["options"]):
        try:
            options[name] = core_options.validate(name, detector(name), module.params["options"][name])
        except NodefixError as exc:
            problems.append(exc.msg)
    textfile = None
    if module.params["textfile"] is not None:
        try:
            textfile = textfile_target(module.params["root"], module.params["textfile"])
        except FileSafetyError as exc:
            problems.append(str(exc))
    if problems:
        module.fail_json(msg="; ".join(problems) + "; nothing was checked")
    result = run_checks(Runner(module), root=module.params["root"], checks=module.params["checks"], options=options)
    result["changed"] = False
    # who ran the audit on the node: remediate refuses a node where it is not root before changing anything
    result["euid"] = os.geteuid()
    if textfile:
        try:
            result["textfile"] = write_textfile(module, textfile, result)
        except (FileSafetyError, OSError) as exc:
            module.fail_json(msg="textfile %s: %s (the audit ran; its findings are in this result)" % (textfile, exc),
                             **result)
        result["changed"] = result["textfile"]["changed"]
    fail_on = module.params["fail_on"]
    if fail_on != "never":
        bad = findings_at_or_above(result["findings"], fail_on)
        if bad:
            result["msg"] = "%d finding(s) at severity %s or worse: %s" % (
                len(bad), fail_on, ", ".join(sorted(set(f["id"] for f in bad))))
            module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
