# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The triage's options, one text for the inventory plugin nodefix.k8s.triage and the module triage_info
(module_utils/_triage: how they are used; docs/triage.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  max_audit_age:
    description:
      - Seconds after which a node's audit is stale (its node is unknown). The audit is refreshed on every
        node-problem-detector tick or timer run; the default (30 minutes) leaves room for several missed ticks and
        scrapes.
    type: int
    default: 1800
  max_clock_skew:
    description:
      - Seconds the clocks may disagree. The evaluation time is Prometheus' own clock (its PromQL function C(time),
        asked first); the triage fails when the controller's clock differs from it by more (a cached verdict's age is
        judged by the controller's). A node whose audit is stamped ahead of Prometheus' clock by more is unknown
        (C(clock_skew)) - its clock is wrong, so the audit's age cannot be known.
    type: int
    default: 60
  require_node_clock:
    description:
      - A node whose exporter exports no C(node_time_seconds) (node_exporter's time collector, on by default, is off) is
        unknown (C(no_clock)) - its clock cannot be checked, and a clock running ahead makes a stopped audit look
        fresh. Set V(false) only where the time collector is off and the nodes' clocks are watched otherwise.
    type: bool
    default: true
  require_gathering_counter:
    description:
      - A node whose exporter is up but whose gathering-error counter
        (C(promhttp_metric_handler_errors_total{cause="gathering"}), node_exporter's own) has fewer than two samples in
        Prometheus in the last 15 minutes is unknown (C(no_gathering_counter)) - a series two textfiles carry
        (C(duplicate_series)) shows only there. The counter is missing where a C(metric_relabel_configs) rule drops
        C(promhttp_.*) or an allowlist keeps only some series (add C(promhttp_metric_handler_errors_total) to it); two
        samples are missing where the scrape interval is 7.5 minutes or more, and for a target's first scrape.
        Set V(false) only where duplicate textfiles are ruled out otherwise.
    type: bool
    default: true
  expected_nodes:
    description:
      - Where the fleet's nodes come from - V(kube_state_metrics) (C(kube_node_info) at the evaluation time, through
        the same Prometheus), V(kubernetes) (the API server's Node list, O(kubeconfig)) or V(list) (O(nodes)).
    type: str
    choices: [kube_state_metrics, kubernetes, list]
    default: kube_state_metrics
  nodes:
    description: The node names, for O(expected_nodes=list).
    type: list
    elements: str
    default: []
  kubeconfig:
    description: The kubeconfig for O(expected_nodes=kubernetes) (the client's default when unset).
    type: path
  context:
    description: The kubeconfig context for O(expected_nodes=kubernetes).
    type: str
  exporter_job:
    description:
      - A regular expression (PromQL C(=~), anchored) of the C(job) label of node_exporter's targets. Other jobs' C(up)
        (the kubelet's, which carries the same address) must not stand in for the exporter's.
    type: str
    default: node|.*node[-_]exporter.*
  selector:
    description:
      - Extra PromQL label matchers added to every query - C(kube_node_info) and kube-state-metrics' C(up) too - as
        V(cluster="prod") or V(cluster="prod", region=~"eu-.*") (C(=), C(!=), C(=~), C(!~); no C(__name__)).
      - On a Prometheus, Thanos or Mimir that holds several clusters it scopes the triage to one - without it the
        same-named nodes of two clusters are one node (merged as replicas are, the lowest C(up), the newest stamp).
        It also leaves out exporters that are not the fleet's (an orphan that exports findings fails the triage).
    type: str
  kube_state_metrics_job:
    description:
      - A regular expression (PromQL C(=~), anchored) of the C(job) label of kube-state-metrics' own targets, for
        O(expected_nodes=kube_state_metrics). Every target of it must be up (C(up == 1)) - a shard or a replica down
        may drop nodes from C(kube_node_info) - and at least one must be scraped, or the triage fails.
    type: str
    default: kube-state-metrics|.*kube-state-metrics.*
  node_label:
    description: The label of node_exporter's series that names the node.
    type: str
    default: instance
  node_label_regex:
    description:
      - A regular expression applied to O(node_label)'s value; its group C(node) (or its first group) is the node's
        name or internal IP (both are looked up). The default takes the host of C(host:port) and C([IPv6]:port).
      - A value it does not match is never read as a node's name (V(node-a) under V(^(.+\):9100$)) - its series make
        an orphan named C(unmapped_<value>), never an expected node's name, and an expected node is never an orphan.
    type: str
    default: ^\[?(?P<node>[^\[\]]+?)\]?(?::[0-9]+)?$
  max_unknown_percent:
    description:
      - The most of the fleet (in percent) that may be unknown. Above it the parse fails, naming the reasons, instead of
        handing thousands of nodes on to be audited blind.
    type: float
    default: 10.0
  min_severity:
    description: Findings below this severity do not count (a node with only those is clean).
    type: str
    choices: [critical, high, medium, low, info]
    default: info
  include_ids:
    description: Only findings whose id matches one of these globs count (every id when empty).
    type: list
    elements: str
    default: []
  exclude_ids:
    description: Findings whose id matches one of these globs do not count.
    type: list
    elements: str
    default: []
  required_checks:
    description:
      - The detectors a node's textfile must report as run; one missing or that could not look makes the node unknown.
        Every detector of the collection when unset.
    type: list
    elements: str
  waivers:
    description:
      - Waivers as the reports take them (C(id), C(reason), C(hosts), C(subject), C(expires)); a waived finding does
        not count. Bad waivers fail the parse.
    type: list
    elements: dict
    default: []
"""
