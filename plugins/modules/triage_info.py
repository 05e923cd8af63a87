#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: triage_info
short_description: Triage the fleet from Prometheus - the nodes with findings or an unknown state, without SSH
version_added: 1.2.0
description:
  - The triage of the inventory plugin P(nodefix.k8s.triage#inventory) as a module, for playbooks that add the targets with
    C(ansible.builtin.add_host) (the C(nodefix.k8s.triage) playbook does). The same classifier, options and classes
    (docs/triage.md) - every expected node in exactly one of C(findings), C(unknown) (with reasons) and C(clean),
    and the nodes that export but are not expected as orphans.
  - Fails, naming why, when Prometheus does not answer, answers something that is not the HTTP API's, the source of
    expected nodes names none, or more than O(max_unknown_percent) of the fleet is unknown - never an empty answer.
  - Runs on the controller (a play on C(localhost), or C(delegate_to=localhost)); reads only.
author: nodefix.k8s developers (@nodefix)
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.prometheus
  - nodefix.k8s.triage
attributes:
  check_mode:
    support: full
    details: Reads only; the same answer in check mode.
  diff_mode:
    support: none
    details: Changes nothing.
  platform:
    platforms: posix
options:
  prometheus_url:
    description:
      - The Prometheus HTTP API (or a Thanos, Cortex or Mimir querier's); its credentials in O(prometheus_username)
        and O(prometheus_password) or O(prometheus_token_file).
      - A URL that carries user information (V(https://user:pass@prometheus)) works - split at the last C(@),
        percent-decoded, sent as basic auth unless the credential options are set - but warns, naming the options, and
        is requested and shown without it.
    type: str
    required: true
  prometheus_timeout:
    description: Seconds to wait for each answer.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Triage the fleet from Prometheus
  nodefix.k8s.triage_info:
    prometheus_url: https://prometheus.example.com
    prometheus_token_file: /var/run/secrets/prometheus/token
  register: triage

- name: Hand the targets on
  ansible.builtin.add_host:
    name: "{{ item.key }}"
    groups: [nodefix_triage_targets]
    nodefix_triage: "{{ item.value }}"
  loop: "{{ triage.targets | dict2items }}"
"""

RETURN = r"""
targets:
  description:
    - The nodes with findings or an unknown state, by name - each the inventory plugin's C(nodefix_triage).
    - Never a node whose name or internal IP is the controller itself (C(localhost), C(127.0.0.1), C(::1), any
      loopback or unspecified address - also in the forms the resolver reads, such as C(127.1) or C(0x7f000001) -,
      C(localhost4), C(localhost6), the controller's own host name or FQDN) - it is listed in RV(summary.not_hosts)
      instead.
  returned: success
  type: dict
  sample: {"node-7": {"state": "unknown", "ids": [], "findings": [], "reasons": ["stale"],
                      "notes": ["the audit is 4000 s old (max_audit_age 1800 s)"], "audit_age_s": 4000.0,
                      "not_counted": [], "internal_ip": "10.0.0.7"}}
clean:
  description: The names of the clean nodes.
  returned: success
  type: list
  elements: str
orphans:
  description:
    - The nodes that export to Prometheus but are not expected, by name (reported, never targets).
    - One whose name is the controller itself (a loopback name or address, the controller's own host name -
      Prometheus scraping the controller's own node_exporter) carries C(not_a_host), why it is never a host.
  returned: success
  type: dict
summary:
  description: The fleet's counts.
  returned: success
  type: dict
  contains:
    fleet_size:
      description: The expected nodes.
      type: int
    counts:
      description: Nodes per class (C(findings), C(unknown), C(clean), C(orphan)).
      type: dict
    targets:
      description: The findings and unknown nodes, but those of RV(summary.not_hosts).
      type: int
    not_hosts:
      description:
        - Expected nodes that are never targets, by name, with why - their name or internal IP is the controller
          itself (a loopback or unspecified address, C(localhost), the controller's own host name);
          C(ansible.builtin.add_host) would make the next
          play connect to the controller. Each keeps its class in RV(summary.counts).
      type: dict
    unknown_percent:
      description: The unknown share of the fleet, in percent.
      type: float
    unknown_by_reason:
      description: Unknown nodes per reason.
      type: dict
    reasons:
      description: What each reason of RV(summary.unknown_by_reason) means.
      type: dict
    evaluation_time:
      description: The one instant every query was asked at (Unix seconds) - Prometheus' own clock.
      type: float
    controller_time:
      description: The controller's clock at the evaluation (Unix seconds).
      type: float
    clock_skew_s:
      description: The controller's clock minus Prometheus' (seconds), at most O(max_clock_skew) either way.
      type: float
    requests:
      description: HTTP requests made to Prometheus.
      type: int
    warnings:
      description: Warnings of the answers (a querier's partial answer).
      type: list
      elements: str
    prometheus:
      description: The server asked (no user information).
      type: str
    expected_nodes:
      description: The source of expected nodes.
      type: str
    max_audit_age:
      description: The staleness bound used, in seconds.
      type: int
    required_checks:
      description: The checks every node must report.
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import names as audit_names
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import transport as prometheus_transport
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import run as triage_run


def argument_spec():
    spec = prometheus_client.argument_spec()
    spec.update(kube.argument_spec())
    spec.update(
        prometheus_url=dict(type="str", required=True),
        prometheus_timeout=dict(type="int", default=30),
        max_audit_age=dict(type="int", default=1800),
        max_clock_skew=dict(type="int", default=60),
        require_node_clock=dict(type="bool", default=True),
        require_gathering_counter=dict(type="bool", default=True),
        expected_nodes=dict(type="str", choices=["kube_state_metrics", "kubernetes", "list"], default="kube_state_metrics"),
        nodes=dict(type="list", elements="str", default=[]),
        exporter_job=dict(type="str", default="node|.*node[-_]exporter.*"),
        selector=dict(type="str"),
        kube_state_metrics_job=dict(type="str", default="kube-state-metrics|.*kube-state-metrics.*"),
        node_label=dict(type="str", default="instance"),
        node_label_regex=dict(type="str", default=triage_classify.DEFAULT_NODE_REGEX),
        max_unknown_percent=dict(type="float", default=10.0),
        min_severity=dict(type="str", choices=["critical", "high", "medium", "low", "info"], default="info"),
        include_ids=dict(type="list", elements="str", default=[]),
        exclude_ids=dict(type="list", elements="str", default=[]),
        required_checks=dict(type="list", elements="str"),
        waivers=dict(type="list", elements="dict", default=[]),
    )
    return spec


def run(p):
    """The module's answer for params ``p`` (NodefixError for anything that could not be asked or decided)."""
    conf = triage_classify.settings(
        max_audit_age=p["max_audit_age"], node_label=p["node_label"], node_label_regex=p["node_label_regex"],
        min_severity=p["min_severity"], include_ids=p["include_ids"], exclude_ids=p["exclude_ids"],
        required_checks=list(audit_names.CHECK_NAMES) if p["required_checks"] is None else p["required_checks"],
        waivers=p["waivers"], exporter_job=p["exporter_job"], max_unknown_percent=p["max_unknown_percent"],
        max_clock_skew=p["max_clock_skew"], require_node_clock=p["require_node_clock"], selector=p["selector"],
        require_gathering_counter=p["require_gathering_counter"],
        kube_state_metrics_job=p["kube_state_metrics_job"])
    client = prometheus_client.from_params(prometheus_transport.OpenUrl(), p)  # one TLS context
    result = triage_run.triage(client, conf, p["expected_nodes"], nodes=p["nodes"], kubeconfig=p["kubeconfig"],
                               context=p["context"])
    triage_classify.check_unknown_budget(conf, result)
    nodes = result["nodes"]
    return {"changed": False, "summary": result["summary"], "orphans": result["orphans"], "warnings": client.warnings,
            # a node whose name or internal IP is the controller itself: reported (summary.not_hosts), never a target
            "targets": dict((n, r) for n, r in nodes.items() if r["state"] != "clean" and not r.get("not_a_host")),
            "clean": sorted(n for n, r in nodes.items() if r["state"] == "clean")}


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    try:
        module.exit_json(**run(module.params))
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())


if __name__ == "__main__":
    main()
