#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: audit_report
short_description: Write a fleet report from nodefix.k8s node_audit results
version_added: 1.0.0
description:
  - Turns the M(nodefix.k8s.node_audit) results of many nodes into a fleet report on the
    machine it runs on (normally the controller, with C(delegate_to=localhost) and C(run_once=true)).
  - Formats are JSON, Markdown, a self-contained HTML page (nodes x findings, coloured by
    severity), JUnit XML for CI systems and the Prometheus text format (C(nodefix.prom), for
    node_exporter's textfile collector on the machine that runs the report, or any tool that reads it).
  - The HTML page reads in a 1280-pixel window and on a phone. The page never scrolls sideways (a table wider than
    the window scrolls in its own box; at 1280 pixels the nodes x findings matrix holds every finding id of the
    collection); finding ids and node names break only after a C(.), C(_) or C(/), headers stay on one line, no word
    is broken inside, and a token too long for a line (a key, a hash) wraps.
  - "Nested values - a kubespray, kubeadm or kOps suggestion with a map value, a changed list or map - are shown in
    every format as one line of YAML (C({memory.available: 500Mi, nodefs.available: 10%})), never as a Python repr."
  - With O(before), the report compares two audits (before and after remediation); with
    O(remediation), it shows each node's remediation outcome.
author:
  - nodefix.k8s developers (@nodefix)
extends_documentation_fragment:
  - nodefix.k8s.attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written; RV(files) says what would change.
  diff_mode:
    support: none
    details: Reports are regenerated as a whole; no diff is returned.
  platform:
    details: Runs where the report is wanted, usually the Ansible controller.
options:
  results:
    description:
      - Node audit results keyed by host name, each the registered result of M(nodefix.k8s.node_audit)
        (a failed or unreachable result is reported as such).
      - The same as JSON text is taken too (Ansible's C(dict) type reads it), which is cheaper to pass for a large
        fleet, whose results ansible-core otherwise copies and visits value by value while templating the argument;
        C(playbooks/report.yml) passes O(results), O(before) and O(remediation) so.
      - Required unless O(merge) is given.
    type: dict
  merge:
    description:
      - Instead of O(results), the C(report.json) files of sliced runs (AWX job slicing, ansible-runner on several
        hosts; each run over a part of the inventory) to merge into one fleet report, equal to the report one run
        over the whole fleet would have written except for C(generated) and the list of slices (RV(slices)).
      - Each slice's waivers were applied by that slice (O(waivers) cannot be given with O(merge)).
      - A host in two slices fails the module before anything is written; a file that is not a nodefix.k8s
        report fails it naming the file.
    type: list
    elements: path
    version_added: 1.1.0
  expected_hosts:
    description:
      - With O(merge), every host of the fleet (the inventory pattern the slices split); required with O(merge), and
        an empty list is refused (an inventory whose targets match nothing would let a slice that never wrote its
        report go unnoticed). A host no slice reported is a node with status C(missing), a host a slice reported
        that is not in this list a node with status C(unexpected) (its findings not counted), in every format; both
        fail any O(fail_on) but V(never).
    type: list
    elements: str
    default: []
    version_added: 1.1.0
  before:
    description: Results of an earlier audit in the same shape (or as JSON text), for a before/after report.
    type: dict
  remediation:
    description:
      - Remediation outcome keyed by host, each a dict with C(status) (V(ok), V(failed), V(skipped)),
        C(msg) and C(roles) (or the same as JSON text).
      - A record may carry C(plan), a dry run's plan for the node (C(nodefix.k8s.remediate --check), the
        C(nodefix.k8s.dry_run_plan) filter); it is kept as the node's C(plan) in C(report.json) and written as a
        "Plan (dry run)" section in the Markdown and HTML reports.
    type: dict
  dest:
    description: Directory to write the report files into; created when missing.
    type: path
    required: true
  formats:
    description: Report formats to write.
    type: list
    elements: str
    choices: [json, markdown, html, junit, prometheus]
    default: [json, markdown, html, junit, prometheus]
  title:
    description:
      - Title of the report.
      - 'The V(prometheus) format carries the series of M(nodefix.k8s.node_audit)''s O(nodefix.k8s.node_audit#module:textfile)
        with a C(node) label, plus C(nodefix_node_audited{node}) (0 when the node could not be audited) and
        C(nodefix_finding_waived{node,check,id,severity,subject}) - a waived finding is left out of C(nodefix_finding)
        (a waiver is a decision not to alert) and listed there. Its bytes depend on the findings only (no timestamp
        series) - an unchanged fleet keeps an unchanged file and C(changed=false); every run (not in check mode) sets
        its modification time to now, the heartbeat a textfile collector exports as C(node_textfile_mtime_seconds).'
    type: str
    default: nodefix.k8s fleet audit
  generated:
    description:
      - Timestamp or other text shown as the time of the report. Unset, the module's own time now, in UTC
        (C(2026-11-27T15:30:00Z)).
      - Unset, and the reports in O(dest) differ from this run's only in that time (the same fleet seen again), they
        are left as they are, with the time they were first written, and C(changed=false); the JSON report must
        be among O(formats) for that time to be read back.
    type: str
  run:
    description:
      - What the report is of, said first in every format (and kept in the JSON as C(run)) - the playbooks pass it.
    type: dict
    version_added: 1.2.0
    suboptions:
      id:
        description: The run's id (remediate's C(_nodefix_run_id); AWX's job id under AWX).
        type: str
      mode:
        description: The playbook that wrote the report.
        type: str
        choices: [audit, remediate, merge]
      check_mode:
        description:
          - The run was a dry run (C(--check)); every format says DRY RUN.
          - The V(prometheus) format is not written for a dry run - its series say what a run did, and a dry run's
            would replace the last real run's file (node_exporter, alerts on the last remediation).
        type: bool
        default: false
      collection_version:
        description: The version of nodefix.k8s that ran.
        type: str
      inventory_size:
        description: The number of hosts in the inventory (the report's nodes are the targeted ones).
        type: int
      status:
        description: V(failed) for a run that failed before it finished; every format says FAILED with O(run.failure).
        type: str
        choices: [complete, failed]
        default: complete
      failure:
        description: Why the run failed.
        type: str
  junit_fail_on:
    description: Findings at this severity or worse are JUnit failures; milder ones pass with the finding in system-out.
    type: str
    default: medium
    choices: [critical, high, medium, low, info]
  table_width:
    description:
      - Width of RV(table) in characters (the console's width; the report play passes C(COLUMNS) when set).
      - One line per node with counts, then the finding ids below it, wrapped to this width; node names longer
        than the space left are cut with C(~). At least 60.
    type: int
    default: 100
  storm:
    description:
      - The storm breaker's verdict, M(nodefix.k8s.storm_gate)'s result (remediate's report play passes it to the
        remediation's report only; an audit run after it in the same C(ansible-playbook) run shows its own sections,
        never the remediation's storm verdict). When the breaker stopped
        the rollout, or was overridden, or a finding is on more than its threshold's share of the fleet, every format
        says so first (a "Storm breaker" section, the lines above the console table; the JSON keeps C(storm)).
      - A value that is not a storm_gate result fails the module; nothing is written. Not with O(merge).
    type: dict
    version_added: 1.1.0
  fail_on:
    description:
      - The fleet's fail policy, computed here once for every playbook (the reports are written first).
      - RV(policy.failed) is true when an open (not waived) finding is at this severity or worse, or a node could not
        be audited; V(never) only reports. The module itself does not fail, so the table is still shown; the
        playbook fails on RV(policy.failed).
    type: str
    default: never
    choices: [never, critical, high, medium, low, info]
  waivers:
    description:
      - Findings accepted on purpose. A finding that matches a waiver is listed apart with the waiver's reason
        (in every format; a skipped test case in JUnit) and does not count in RV(totals), RV(finding_ids) or the
        JUnit failures.
      - A waiver past its O(waivers[].expires) date no longer applies; it is listed in RV(waivers_expired) and
        shown in the reports.
      - A malformed waiver fails the module before anything is written.
    type: list
    elements: dict
    default: []
    suboptions:
      id:
        description: Finding id, or a shell-style glob such as V(gvisor.*).
        type: str
        required: true
      reason:
        description: Why the finding is accepted (shown beside it in the reports).
        type: str
        required: true
      hosts:
        description: Host names or globs the waiver applies to (default every host).
        type: list
        elements: str
      subject:
        description: Glob on the finding's subject (default any).
        type: str
      expires:
        description: Last day the waiver applies, V(YYYY-MM-DD).
        type: str
seealso:
  - module: nodefix.k8s.node_audit
"""

EXAMPLES = r"""
- name: Audit every node
  nodefix.k8s.node_audit:
  register: _nodefix_audit

- name: Write the fleet report on the controller
  nodefix.k8s.audit_report:
    results: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '_nodefix_audit'))) }}"
    dest: "{{ playbook_dir }}/reports"
  delegate_to: localhost
  run_once: true

- name: The same, accepting a known leaker on the batch nodes until the image is fixed
  nodefix.k8s.audit_report:
    results: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '_nodefix_audit'))) }}"
    dest: "{{ playbook_dir }}/reports"
    waivers:
      - id: pids.zombie_leaker
        hosts: ["batch-*"]
        reason: vendor cron image reaps nothing; OPS-1234 tracks the tini rollout
        expires: "2027-01-31"
  delegate_to: localhost
  run_once: true

- name: Merge the reports of three slices into one, naming the hosts no slice reported
  nodefix.k8s.audit_report:
    merge:
      - /shared/nodefix/slices/1/audit/report.json
      - /shared/nodefix/slices/2/audit/report.json
      - /shared/nodefix/slices/3/audit/report.json
    expected_hosts: "{{ query('ansible.builtin.inventory_hostnames', 'k8s_nodes') }}"
    dest: /shared/nodefix/audit
    fail_on: high
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
files:
  description: Path of every report file written, keyed by format.
  returned: always
  type: dict
  sample: {"html": "/tmp/reports/report.html", "json": "/tmp/reports/report.json", "prometheus": "/tmp/reports/nodefix.prom"}
table:
  description:
    - The per-node table as lines of text for the console, none longer than O(table_width) - one line per node
      (audit - findings, worst severity, waived; remediate - before, after, fixed, new, waived, remediation status
      and seconds), the ids below it (C(ids), or C(fixed), C(open), C(new), and C(waived)).
  sample: ["node     before  after  fixed  new  waived  remediation", "-------  ------  -----  -----  ---  ------  -----------",
           "node-1   3       clean  3      0    0       ok 41.2s", "  fixed: gvisor.runsc_outdated, gvisor.sandbox_oversized,",
           "         kubelet.api_qps_low"]
  returned: always
  type: list
  elements: str
totals:
  description: Fleet counts (nodes, nodes with findings, nodes in error, findings by severity, waived findings).
  returned: always
  type: dict
  sample: {"nodes": 3, "nodes_with_findings": 1, "nodes_in_error": 0, "findings": 2, "waived": 1,
           "by_severity": {"critical": 0, "high": 1, "medium": 1, "low": 0, "info": 0}}
policy:
  description: The result of O(fail_on) over the open findings.
  returned: always
  type: dict
  contains:
    fail_on:
      description: The threshold applied.
      type: str
    failed:
      description: Whether the fleet fails the policy.
      type: bool
    failing:
      description: The open findings at the threshold or worse (host, id, severity, subject).
      type: list
      elements: dict
    unaudited:
      description: Hosts that could not be audited (they fail any policy but V(never)).
      type: list
      elements: str
    msg:
      description: One line saying why the policy fails (null when it does not).
      type: str
  sample: {"fail_on": "high", "failed": true, "unaudited": [],
           "failing": [{"host": "node-1", "id": "gvisor.runsc_outdated", "severity": "high", "subject": "/usr/bin/runsc"}],
           "msg": "1 finding(s) at high or worse: gvisor.runsc_outdated on node-1"}
waivers_expired:
  description: Waivers past their expiry date (their findings count again).
  returned: always
  type: list
  elements: dict
  sample: [{"id": "pids.zombie_leaker", "hosts": ["batch-*"], "subject": "*", "reason": "OPS-1234",
            "expires": "2027-01-31"}]
slices:
  description: With O(merge), the slices merged, in the order given (file, its C(generated) time, its node count).
  returned: when O(merge) is given
  type: list
  elements: dict
  sample: [{"name": "/shared/nodefix/slices/1/audit/report.json", "generated": "2026-11-25T10:00:00Z", "nodes": 334}]
finding_ids:
  description: Every finding id found in the fleet with its severity, hosts and fixing role.
  returned: always
  type: list
  elements: dict
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import refresh
from ansible_collections.nodefix.k8s.plugins.module_utils._report.merge import merge_models
from ansible_collections.nodefix.k8s.plugins.module_utils._report.html_page import RENDERERS
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.waivers import WaiverError
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import (
    ReportInputError,
    build_model,
    check_remediation,
    check_results,
    policy,
    run_entry,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._report.console import table_lines


def read_current(module, p):
    """{format: (path, real path, its text or None)} of the report files now in dest, each read once;
    fails on an unsafe dest."""
    dest = p["dest"]
    if os.path.lexists(dest) and not os.path.isdir(dest):
        module.fail_json(msg="dest %s exists and is not a directory; nothing was written" % dest)
    current = {}
    dry_run = bool((p["run"] or {}).get("check_mode"))
    for fmt in p["formats"]:
        if fmt == "prometheus" and dry_run:
            continue  # never written by a dry run (plan_files)
        path = os.path.join(dest, RENDERERS[fmt][0])
        try:
            real = core_paths.resolve_target("/", path, what="report file")
            current[fmt] = (path, real, core_paths.read_utf8(real, max_bytes=64 * core_paths.MAX_CONFIG_BYTES,
                                                             what="report file"))
        except core_paths.FileSafetyError as exc:
            module.fail_json(msg="%s; nothing was written" % exc.msg)
    return current


def plan_files(p, model, current):
    """(changed, {format: path}, [(real path, content)], [real paths unchanged]) of the report files, against
    ``current`` (read_current)."""
    files = {}
    writes = []
    unchanged = []
    dry_run = bool((p["run"] or {}).get("check_mode"))
    for fmt in p["formats"]:
        if fmt == "prometheus" and dry_run:
            # the metrics say what was done (outcomes, reboots, the last remediation's time): a dry run did
            # nothing, and its file would overwrite the last real run's for node_exporter and the alerts
            continue
        render = RENDERERS[fmt][1]
        content = render(model, p["junit_fail_on"]) if fmt == "junit" else render(model)
        path, real, text = current[fmt]
        files[fmt] = path
        if text != content:
            writes.append((real, content))
        elif fmt == "prometheus":
            unchanged.append(real)  # the heartbeat: a new modification time, its bytes kept
    return bool(writes), files, writes, unchanged


def set_generated(model, stamp):
    """Give the model (and its ``run``, when given) the report's time STAMP."""
    model["generated"] = stamp
    if "run" in model:
        model["run"]["generated"] = stamp


def generated_before(current):
    """The time the report.json in dest was generated, or None (no such file, not a report, not asked for)."""
    text = current["json"][2] if "json" in current else None
    try:
        stamp = json.loads(text).get("generated") if text else None
    except (ValueError, AttributeError, RecursionError):
        return None
    return stamp if isinstance(stamp, str) else None


def read_slices(module, paths):
    """[(path, model)] of the slices' report.json files; fails naming a file it cannot read or parse."""
    slices = []
    for path in paths:
        try:
            real = core_paths.resolve_target("/", path, what="slice report")
            text = core_paths.read_utf8(real, max_bytes=256 * core_paths.MAX_CONFIG_BYTES, what="slice report")
        except core_paths.FileSafetyError as exc:
            module.fail_json(msg="%s; nothing was written" % exc.msg)
        if text is None:
            module.fail_json(msg="slice report %s does not exist; nothing was written" % path)
        try:
            slices.append((path, json.loads(text)))
        except (ValueError, RecursionError) as exc:
            module.fail_json(msg="slice report %s is not JSON (%s); nothing was written" % (path, exc))
    return slices


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            results=dict(type="dict"),
            merge=dict(type="list", elements="path"),
            expected_hosts=dict(type="list", elements="str", default=[]),
            before=dict(type="dict"),
            remediation=dict(type="dict"),
            dest=dict(type="path", required=True),
            formats=dict(type="list", elements="str", choices=list(RENDERERS), default=list(RENDERERS)),
            title=dict(type="str", default="nodefix.k8s fleet audit"),
            generated=dict(type="str"),
            run=dict(type="dict", options=dict(
                id=dict(type="str"),
                mode=dict(type="str", choices=["audit", "remediate", "merge"]),
                check_mode=dict(type="bool", default=False),
                collection_version=dict(type="str"),
                inventory_size=dict(type="int"),
                status=dict(type="str", choices=["complete", "failed"], default="complete"),
                failure=dict(type="str"),
            )),
            junit_fail_on=dict(type="str", default="medium", choices=list(SEVERITIES)),
            fail_on=dict(type="str", default="never", choices=["never"] + list(SEVERITIES)),
            table_width=dict(type="int", default=100),
            storm=dict(type="dict"),
            waivers=dict(type="list", elements="dict", default=[], options=dict(
                id=dict(type="str", required=True),
                reason=dict(type="str", required=True),
                hosts=dict(type="list", elements="str"),
                subject=dict(type="str"),
                expires=dict(type="str"),
            )),
        ),
        required_one_of=[["results", "merge"]],
        mutually_exclusive=[["results", "merge"], ["before", "merge"], ["remediation", "merge"], ["waivers", "merge"],
                            ["storm", "merge"]],
        supports_check_mode=True,
    )
    p = module.params
    if p["table_width"] < 60:
        module.fail_json(msg="table_width must be at least 60, got %d; nothing was written" % p["table_width"])
    waivers = [dict((k, v) for k, v in w.items() if v is not None) for w in p["waivers"]]
    stamped = p["generated"] is None
    if stamped:
        p["generated"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        if p["merge"] is not None:
            model = merge_models(read_slices(module, p["merge"]), expected_hosts=p["expected_hosts"],
                                 title=p["title"], generated=p["generated"])
        else:
            check_results(p["results"])
            check_results(p["before"], "before")
            check_remediation(p["remediation"])
            model = build_model(p["results"], before=p["before"], remediation=p["remediation"], title=p["title"],
                                generated=p["generated"], waivers=waivers, storm=p["storm"])
    except ReportInputError as err:
        module.fail_json(msg="bad input: %s; nothing was written" % err)
    except WaiverError as err:
        module.fail_json(msg="bad waiver: %s; nothing was written" % err)
    if p["run"] is not None:
        model["run"] = run_entry(p["run"], model["generated"])
    current = read_current(module, p)
    changed, files, writes, unchanged = plan_files(p, model, current)
    fresh = model["generated"]
    kept = generated_before(current) if stamped and writes else None
    if kept is not None and kept != fresh:
        # the same fleet a second later: reports that would differ from the files only in their time keep
        # the files (and the time the fleet was first reported so) - changed=false, as for nodefix.prom
        set_generated(model, kept)
        again = plan_files(p, model, current)
        if again[2]:
            set_generated(model, fresh)
        else:
            changed, files, writes, unchanged = again
    if not module.check_mode:
        try:
            if writes:
                if not os.path.isdir(p["dest"]):
                    os.makedirs(p["dest"])
                core_fileio.write_files(module, writes, backup=False, mode=0o644)
            for real in unchanged:
                refresh(real)
        except (OSError, core_paths.FileSafetyError) as exc:
            module.fail_json(msg="cannot write the report: %s" % (getattr(exc, "msg", None) or exc))
    for w in model["waivers_expired"]:
        module.warn("waiver for %s on %s expired on %s: its findings count again" % (
            w["id"], ", ".join(w["hosts"]), w["expires"]))
    extra = {"slices": model["slices"]} if "slices" in model else {}
    # Ansible echoes every argument back in ``invocation`` (what -vvv shows): here that is the whole
    # fleet's results (33 MiB at 10,000 nodes, 5 s of the module's time to scrub and encode);
    # the small arguments are echoed, the results are summed up
    echoed = dict((k, v) for k, v in p.items() if k not in ("results", "before", "remediation"))
    for key in ("results", "before", "remediation"):
        echoed[key] = None if p[key] is None else "(%d host(s), not echoed)" % len(p[key])
    extra["invocation"] = {"module_args": echoed}
    module.exit_json(changed=changed, files=files, table=table_lines(model, p["table_width"]), totals=model["totals"],
                     finding_ids=model["finding_ids"], waivers_expired=model["waivers_expired"],
                     policy=policy(model, p["fail_on"]), **extra)


if __name__ == "__main__":
    main()
