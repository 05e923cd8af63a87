#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_evidence
short_description: Read what a drain, restart or reboot would destroy - journals, kernel log, failed units, the files a fix changes
version_added: 1.1.0
description:
  - Read-only. Before nodefix.k8s.remediate disrupts a node (a drain, a containerd or kubelet restart, a reboot or a
    kernel boot) it keeps the evidence that explains the failure, which the disruption would wipe; this module reads
    it on the node and returns it as one bundle (RV(evidence)), which the playbook writes to the report directory.
  - The journal of the O(units) since boot and the kernel's (C(journalctl); C(dmesg) when the journal has none), the
    failed units (C(systemctl list-units --state=failed)), the files the fixes of O(roles) will change (read from
    O(audit)'s facts - containerd's config, runsc's shim config, the kubelet's unit, environment, config and drop-in
    files) and the node's findings.
  - Bounded in size and time. Each journal keeps its newest O(source_bytes) bytes, read streaming from C(journalctl)'s
    pipe (C(--lines), C(-o short-iso)), so a journal of any size costs the bound in memory, not its size; each file
    keeps its first (a larger one is named as missing), the bundle O(total_bytes) (sources past it are left out and
    named), and each command has O(timeout) seconds. Each source's state is named in RV(evidence.states) (kept, empty -
    C(-- No entries --), C(No journal files were found) -, unreadable, absent, left out) with the reason; the kernel's
    log is C(dmesg --ctime) when the journal has no kernel entries. A source that is missing is also named in
    RV(evidence.missing); the module never fails because a source is absent.
  - Redacted. Every text (journals, files, the findings) goes through the collection's one redaction layer before it
    leaves the node - registry C(auth), C(password), C(identitytoken), C(registrytoken), a URL's C(user:password@),
    bearer tokens, kubeconfig C(token), C(client-key-data), C(client-certificate-data), bootstrap tokens, variables
    named like C(*TOKEN*), C(*PASSWORD*), C(*SECRET*), C(*_KEY) - the value replaced by C(<redacted by nodefix.k8s>),
    the key kept (docs/safety.md, "Evidence and secrets").
author:
  - nodefix.k8s developers (@nodefix)
options:
  audit:
    description: M(nodefix.k8s.node_audit)'s result read before the remediation (its facts name the files, its findings go in).
    type: dict
    required: true
  roles:
    description: The roles the remediation will run (P(nodefix.k8s.remediation_plan#filter)'s C(fix_roles)).
    type: list
    elements: str
    default: []
  units:
    description: The systemd units whose journal since boot is kept.
    type: list
    elements: str
    default: [kubelet, containerd]
  source_bytes:
    description: The bound of one source, in bytes (a journal keeps its newest bytes).
    type: int
    default: 524288
  total_bytes:
    description: The bound of the whole bundle, in bytes.
    type: int
    default: 4194304
  timeout:
    description: Seconds each command may take.
    type: int
    default: 20
  since:
    description:
      - The journals' window (C(journalctl --since), e.g. C(2026-11-27 10:00:00) or C(-2h)); by default the current
        boot (C(-b)).
    type: str
  root:
    description: Where the node's files are (a node tree mounted elsewhere; commands then do not run).
    type: path
    default: /
extends_documentation_fragment:
  - nodefix.k8s.attributes
attributes:
  check_mode:
    support: full
    details: Reads only, in check mode as in a real run.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: nodefix.k8s.node_audit
"""

EXAMPLES = r"""
- name: Keep the evidence before the drain
  nodefix.k8s.node_evidence:
    audit: "{{ audit_before }}"
    roles: "{{ plan.fix_roles }}"
  register: evidence

- name: Write it to the report directory on the controller
  ansible.builtin.copy:
    content: "{{ evidence.evidence | to_nice_json }}"
    dest: "reports/evidence/{{ inventory_hostname }}.json"
    mode: "0600"
  delegate_to: localhost
"""

RETURN = r"""
evidence:
  description: The bundle.
  returned: always
  type: dict
  contains:
    collected:
      description: When it was read (UTC).
      type: str
    sources:
      description: Each command's output (C(argv), C(text), C(truncated), C(bytes)) by name (C(journal-kubelet), C(kernel), ...).
      type: dict
    files:
      description: Each file's text by path.
      type: dict
    findings:
      description: The node's findings before the remediation.
      type: list
      elements: dict
    missing:
      description: What could not be kept (C(source), C(why)).
      type: list
      elements: dict
    states:
      description:
        - Each source's and file's state by name - C(state) (C(kept), C(empty), C(unreadable), C(absent),
          C(left out)) and C(why).
      type: dict
    bytes:
      description: The bundle's size (sources and files).
      type: int
    truncated:
      description: Whether a source was left out for the total bound.
      type: bool
  sample: {"collected": "2026-11-26T10:00:00Z", "sources": {"failed-units": {"argv": ["systemctl", "list-units"],
           "text": "kubelet.service loaded failed failed kubelet", "truncated": false, "bytes": 44}},
           "files": {"/etc/containerd/config.toml": "version = 2\n"}, "findings": [], "missing": [
           {"source": "kernel", "why": "dmesg --ctime: rc 1, dmesg: read kernel buffer failed: Operation not permitted"}],
           "states": {"kernel": {"state": "unreadable", "why": "journalctl -k -b: -- No entries --; dmesg --ctime: rc 1"}},
           "bytes": 56, "truncated": false}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.evidence import collect, files_to_keep


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            audit=dict(type="dict", required=True),
            roles=dict(type="list", elements="str", default=[]),
            units=dict(type="list", elements="str", default=["kubelet", "containerd"]),
            source_bytes=dict(type="int", default=524288),
            total_bytes=dict(type="int", default=4194304),
            timeout=dict(type="int", default=20),
            since=dict(type="str"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for name in ("source_bytes", "total_bytes", "timeout"):
        if p[name] < 1:
            module.fail_json(msg="%s must be at least 1, got %d" % (name, p[name]))
    findings = p["audit"].get("findings")
    if not isinstance(findings, list):
        module.fail_json(msg="audit is not a node_audit result (no findings list)")
    bundle = collect(root=p["root"], files=files_to_keep(p["audit"], p["roles"]), findings=findings, units=p["units"],
                     source_bytes=p["source_bytes"], total_bytes=p["total_bytes"], seconds=p["timeout"],
                     since=p["since"])
    module.exit_json(changed=False, evidence=bundle)


if __name__ == "__main__":
    main()
