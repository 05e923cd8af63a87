# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: triage
short_description: The fleet's nodes with findings or an unknown state, from Prometheus, without SSH
version_added: 1.2.0
description:
  - Asks Prometheus, at one pinned evaluation time, what every node's own audit wrote into the collection's textfile
    (C(nodefix.prom), exported by node_exporter's textfile collector) and puts every expected node in exactly one
    class - C(findings), C(unknown) (with reasons), C(clean) (only when no reason holds) - and the nodes that export
    but are not expected in C(orphans). The targets (findings and unknown) are the hosts to audit or remediate over
    SSH; the healthy majority costs no connection.
  - A node is unknown, never clean, when its name or internal IP is another expected node's too (its series cannot
    be told apart), Prometheus has no series of its exporter, the exporter is down, node_exporter
    could not read a textfile (C(node_textfile_scrape_error)), it exports no C(nodefix.prom), the audit is older than
    O(max_audit_age) (C(node_textfile_mtime_seconds) of C(nodefix.prom), and C(nodefix_audit_timestamp_seconds) where
    the file carries it), a required detector could not look (C(nodefix_audit_check_failed)) or is missing, or an
    answer came with warnings. The reasons are listed in docs/triage.md.
  - Any failure to answer - Prometheus unreachable, an HTTP error, an answer that is not the API's, no expected node -
    fails the inventory parse, and so does more than O(max_unknown_percent) of the fleet unknown. The command
    (C(ansible-inventory), C(ansible-playbook), an AWX inventory update) exits non-zero whatever
    C(INVENTORY_ANY_UNPARSED_IS_FAILED) says - Ansible would otherwise turn the failure into a warning and an empty
    inventory. Never a warning with an empty inventory.
  - Every failure of the parse - an option Ansible cannot convert or the plugin refuses, an answer of an odd shape -
    fails it the same way. Every message and the whole triage (a finding's labels, Prometheus' warnings) are redacted,
    the client's own credential values (the password, header values, the token read from the token file) removed,
    before anything is shown, cached or put into the inventory.
  - The evaluation time is Prometheus' own clock (its PromQL function C(time)); the parse fails when the controller's
    clock differs from it by more than O(max_clock_skew). A node whose audit is stamped ahead of it by more, or whose
    own clock (node_exporter's C(node_time_seconds) against its scrape's time) is off by more, is unknown
    (C(clock_skew)); one whose clock cannot be read (no C(node_time_seconds)) is unknown too (C(no_clock)) unless
    O(require_node_clock=false).
  - A node whose gathering-error counter Prometheus does not hold in two samples of the last 15 minutes (a rule that
    drops C(promhttp_.*)) is unknown (C(no_gathering_counter)) unless O(require_gathering_counter=false); one whose
    exporter exports C(nodefix_*) series labelled for another node (C(node="...") - the fleet file of
    M(nodefix.k8s.audit_report) in its textfile directory) is unknown (C(foreign_series)).
  - The triage is never served from Ansible's inventory cache, nor written to it - every parse asks Prometheus. A
    cached triage would call a node clean that Prometheus no longer does (its exporter down, a corrupt textfile, a new
    finding) and miss a new Node and the fleet size the storm breaker counts against. The O(cache) options are
    accepted and ignored; O(cache=true) warns.
  - An expected node whose name or internal IP is the controller itself (C(localhost), C(127.0.0.1), C(::1), any
    loopback or unspecified address - also in the forms the resolver reads, C(127.1), C(0x7f000001), C(2130706433),
    C(0177.0.0.1), C(0) -, C(*.localhost), C(localhost4), C(localhost6) and their C(.localdomain4)/C(6), the
    controller's own host name or FQDN) is classified and counted but never a host - a host so named
    or with that C(ansible_host) would run the next play on the controller; C(nodefix_triage_summary.not_hosts)
    names it, with why.
  - Needs a file whose name ends in C(nodefix_triage.yml) or C(nodefix_triage.yaml).
author: nodefix.k8s developers (@nodefix)
extends_documentation_fragment:
  - constructed
  - inventory_cache
  - nodefix.k8s.prometheus.plugin
  - nodefix.k8s.triage
options:
  plugin:
    description: The name of this plugin; it must be V(nodefix.k8s.triage).
    type: str
    required: true
    choices: [nodefix.k8s.triage]
  prometheus_url:
    description:
      - The Prometheus HTTP API (V(http://prometheus.monitoring:9090)), or a Thanos, Cortex or Mimir querier's; its
        credentials in O(prometheus_username) and O(prometheus_password) or O(prometheus_token_file).
      - A URL that carries user information (V(https://user:pass@prometheus)) works - split at the last C(@),
        percent-decoded, sent as basic auth unless the credential options are set - but warns, naming the options, and
        is requested and shown without it.
    type: str
    required: true
    env:
      - name: NODEFIX_PROMETHEUS_URL
  add_clean_hosts:
    description: Add the clean nodes too, in group C(nodefix_triage_clean) (not by default - they need nothing).
    type: bool
    default: false
notes:
  - Host vars - C(nodefix_triage) (C(state), C(ids), C(findings), C(reasons), C(notes), C(audit_age_s), C(not_counted))
    and C(ansible_host) from the node's internal IP when the source knows it. C(all) vars - C(nodefix_triage_summary)
    (counts, unknown by reason, evaluation time, requests, C(not_hosts)) and C(nodefix_triage_fleet_size).
  - Groups - C(nodefix_triage_targets) (children C(nodefix_triage_findings) and C(nodefix_triage_unknown)),
    C(nodefix_triage_orphans), C(nodefix_triage_clean) (O(add_clean_hosts)), C(nodefix_finding_<id>) (dots as
    underscores; an id not of the collection's own C(<check>.<name>) shape gets a short hash of itself after it, so
    that two ids never share a group) and C(nodefix_severity_<level>). An orphan named C(localhost), C(127.0.0.1)
    or any other loopback name or address, or the controller's own host name (Prometheus scraping its own
    node_exporter) is counted, never made a host.
  - How it decides, how stale is stale and how to alert on unknown - docs/triage.md.
seealso:
  - name: The triage, its classes and reasons
    description: docs/triage.md in the collection.
    link: https://github.com/nodefix/nodefix.k8s/blob/main/docs/triage.md
"""

EXAMPLES = r"""
# inventory/prod.nodefix_triage.yml
plugin: nodefix.k8s.triage
prometheus_url: https://prometheus.example.com
prometheus_token_file: /var/run/secrets/prometheus/token
max_unknown_percent: 5
exclude_ids: ["reboot.*"]
keyed_groups:
  - key: nodefix_triage.state
    prefix: triage

# Another file - a static fleet, basic auth from the environment (NODEFIX_PROMETHEUS_USERNAME/PASSWORD):
# inventory/lab.nodefix_triage.yml
# plugin: nodefix.k8s.triage
# prometheus_url: http://127.0.0.1:9090
# expected_nodes: list
# nodes: [node-a, node-b]
"""

import hashlib
import re

from ansible import constants as C
from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.display import Display
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import names as audit_names
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_values
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import transport as prometheus_transport
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import run as triage_run

display = Display()
TARGETS = "nodefix_triage_targets"
FINDINGS = "nodefix_triage_findings"
UNKNOWN = "nodefix_triage_unknown"
ORPHANS = "nodefix_triage_orphans"
CLEAN = "nodefix_triage_clean"


def fail(msg):
    """A failed parse that fails the command. Ansible turns an inventory plugin's exception into a warning and an
    empty inventory unless INVENTORY_ANY_UNPARSED_IS_FAILED is set: a triage that could not answer must never
    look like a fleet with nothing to do, so without that setting the command exits 1 here."""
    if C.INVENTORY_ANY_UNPARSED_IS_FAILED:
        raise AnsibleParserError(msg)
    display.error(msg)
    raise SystemExit(1)


def config_error(exc, names):
    """What a plugin file's error says, never quoting its text: Ansible's own option conversion error quotes the
    value (``prometheus_password: {Br4ce$ecret}`` read as a mapping), a YAML error the line - a password in either.
    The option named (one of ``names``), or where the YAML error is."""
    text = "%s" % exc
    if isinstance(exc, AnsibleParserError) or "yaml" in type(exc).__name__.lower() or "YAML" in text:
        # the position: ansible-core 2.19 keeps it as the error's origin (path:line:column), older ones in the text
        # (Ansible's _read_config_data raises a new error from the loader's: its cause holds the origin)
        chain = [exc, exc.__cause__, exc.__context__]
        origins = " ".join("%s" % getattr(e, "obj", None) for e in chain if e)
        # 2.17/2.18: "... line 4, column 27" in the text (after a JSON attempt's "line 1 column 1"); 2.19: path:4:27
        where = re.search(r"line (\d+), column", text) or re.search(r":(\d+):\d+", origins)
        line = where.group(1) if where else None
        return "the file is not valid YAML%s (the line is not shown: it may hold a credential)" % (
            " at line %s" % line if line else "")
    for name in sorted(names, key=len, reverse=True):
        if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(name), text):
            kind = re.search(r"provided for '(\w+)'|to (?:an? )?(\w+)\b", text)
            return "option %s has an invalid value%s (the value is not shown: it may be a credential)" % (
                name, " (it must be a %s)" % (kind.group(1) or kind.group(2)) if kind else "")
    return "the file's options are not valid (%s; its text is not shown: it may quote a value)" % type(exc).__name__


def group_name(prefix, value):
    """``nodefix_finding_gvisor_runsc_outdated``: what is not a letter, digit or _ becomes _. An id of the
    collection's own shape (``<check>.<name>``, the check one of the collection's, the name letters, digits and _)
    keeps that name; any other id (``kernel-oom``, a node's own ``kernel_oom``, a non-ASCII id) gets a short hash of
    itself after it, so that two ids never share a group."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", value)
    check, dot, rest = value.partition(".")
    if not dot or check not in audit_names.CHECK_NAMES + ("audit",) or not re.fullmatch(r"[a-z0-9_]+", rest):
        if prefix == "nodefix_severity_" and re.fullmatch(r"[a-z]+", value):
            return prefix + value
        return "%s%s_%s" % (prefix, name, hashlib.sha256(value.encode("utf-8")).hexdigest()[:8])
    return prefix + name


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):

    NAME = "nodefix.k8s.triage"

    def verify_file(self, path):
        return super(InventoryModule, self).verify_file(path) and path.endswith(
            ("nodefix_triage.yml", "nodefix_triage.yaml"))

    def _conf(self):
        required = self.get_option("required_checks")  # by default every detector (their names, not their code)
        return triage_classify.settings(
            max_audit_age=self.get_option("max_audit_age"), node_label=self.get_option("node_label"),
            node_label_regex=self.get_option("node_label_regex"), min_severity=self.get_option("min_severity"),
            include_ids=self.get_option("include_ids"), exclude_ids=self.get_option("exclude_ids"),
            required_checks=list(audit_names.CHECK_NAMES) if required is None else required,
            waivers=self.get_option("waivers"), exporter_job=self.get_option("exporter_job"),
            max_unknown_percent=self.get_option("max_unknown_percent"), max_clock_skew=self.get_option("max_clock_skew"),
            require_node_clock=self.get_option("require_node_clock"),
            require_gathering_counter=self.get_option("require_gathering_counter"),
            selector=self.get_option("selector"), kube_state_metrics_job=self.get_option("kube_state_metrics_job"))

    def _client(self):
        # one TLS context for the triage's requests (open_url builds one a request: more CPU than the classes)
        client = prometheus_client.from_params(prometheus_transport.OpenUrl(), dict(
            (name, self.get_option(name)) for name in ["prometheus_url", "prometheus_timeout"]
            + list(prometheus_client.argument_spec())))
        self._client_made = client
        for warning in client.warnings:
            display.warning("nodefix.k8s.triage: %s" % self._scrub(warning))
        return client

    def _secrets(self):
        """The credential values of this parse (the plugin's own no_log values): the password and header values
        of its options, and whatever the client sent (the token read from the token file)."""
        values = set()
        for name in ("prometheus_password", "prometheus_headers"):
            try:
                value = self.get_option(name)
            except Exception:  # pylint: disable=broad-except  # options not read (a config error): none to hide
                continue
            # a header's value only under a secret's name (never a tenant's X-Scope-OrgID: a node's name holds it)
            values.update(secret_values.of_mapping(value) if isinstance(value, dict) else [value])
        client = getattr(self, "_client_made", None)
        if client is not None:
            values.update(client.secret_values())
        return set(v for v in values if isinstance(v, str) and v)

    def _scrub(self, text):
        return prometheus_client.scrub(text, self._secrets())

    def parse(self, inventory, loader, path, cache=True):
        super(InventoryModule, self).parse(inventory, loader, path, cache=cache)
        self._client_made = None
        # EVERYTHING of the parse fails it (the config's own errors, an answer of an odd shape, a bug): Ansible
        # would make any exception a warning and an empty inventory (fail()); every message redacted
        try:
            self._parse(path)
            return
        except NodefixError as exc:
            msg = exc.msg
        except Exception as exc:  # pylint: disable=broad-except
            msg = "%s: %s" % (type(exc).__name__, exc)
        fail(self._scrub("nodefix.k8s.triage: %s (source %s)" % (msg, path)))

    def _option_names(self):
        try:
            return list(C.config.get_configuration_definitions("inventory", self._load_name) or ())
        except Exception:  # pylint: disable=broad-except  # no definitions known: the error names no option
            return []

    def _parse(self, path):
        try:
            self._read_config_data(path)
        except Exception as exc:  # pylint: disable=broad-except  # Ansible's text quotes the value: never shown
            raise NodefixError(config_error(exc, self._option_names()))
        conf = self._conf()
        if self.get_option("cache"):
            display.warning("nodefix.k8s.triage: cache is ignored - every parse asks Prometheus: a cached verdict "
                            "would hide a node that broke since (docs/triage.md)")
        # never from a cache, never written to one: a cached triage would call a node clean that Prometheus says is
        # not now (an exporter down, a new finding) and miss a new Node and the fleet size the storm breaker uses.
        # The clean nodes' records only when they become hosts: counted either way, none built or redacted else.
        # triage_run.triage redacts the answer with the client's credential values (this parse's: the options'
        # password and headers, the token it read) before it is populated
        result = triage_run.triage(self._client(), conf, self.get_option("expected_nodes"),
                                   nodes=self.get_option("nodes"), kubeconfig=self.get_option("kubeconfig"),
                                   context=self.get_option("context"),
                                   clean_records=bool(self.get_option("add_clean_hosts")))
        triage_classify.check_unknown_budget(conf, result)
        self._populate(result)

    def _add(self, name, record, group):
        self.inventory.add_host(name, group=group)
        # label values come from the nodes: never templates (ansible-core 2.19 marks them so itself)
        self.inventory.set_variable(name, "nodefix_triage", wrap_var(dict(
            (k, record[k]) for k in ("state", "ids", "findings", "reasons", "notes", "audit_age_s", "not_counted"))))
        # a site inventory parsed before this one keeps its own address for the host (its connection variables win)
        if record.get("internal_ip") and "ansible_host" not in self.inventory.get_host(name).vars:
            self.inventory.set_variable(name, "ansible_host", wrap_var(record["internal_ip"]))

    def _populate(self, result):
        for group in (TARGETS, FINDINGS, UNKNOWN, ORPHANS):
            self.inventory.add_group(group)
        self.inventory.add_child(TARGETS, FINDINGS)
        self.inventory.add_child(TARGETS, UNKNOWN)
        add_clean = self.get_option("add_clean_hosts")
        if add_clean:
            self.inventory.add_group(CLEAN)
        strict = self.get_option("strict")
        # no compose, groups or keyed_groups: nothing to template (each host's vars would cost a copy)
        strict = strict if any(self.get_option(o) for o in ("compose", "groups", "keyed_groups")) else None
        for name, record in sorted(result["nodes"].items()):
            state = record["state"]
            if (state == "clean" and not add_clean) or record.get("not_a_host"):
                # a name or internal IP that is the controller itself (run.refuse_loopback): a host so named or with
                # that address would run the next play on the controller; summary.not_hosts names it, with why
                continue
            self._add(name, record, {"findings": FINDINGS, "unknown": UNKNOWN, "clean": CLEAN}[state])
            if state == "findings":
                for fid in record["ids"]:
                    self.inventory.add_child(self.inventory.add_group(group_name("nodefix_finding_", fid)), name)
                for level in sorted(set(f["severity"] for f in record["findings"])):
                    self.inventory.add_child(self.inventory.add_group(group_name("nodefix_severity_", level)), name)
            self._construct(name, strict)
        for name, record in sorted(result["orphans"].items()):
            if record.get("not_a_host"):
                # Prometheus scraping its own node_exporter (localhost:9100; run.refuse_loopback): a host named so would
                # take the place of Ansible's implicit localhost (its local connection) in every play of the run;
                # counted in the summary
                continue
            self._add(name, record, ORPHANS)
            self._construct(name, strict)
        # what Prometheus answered (warnings, the node names of not_hosts) and the URL are never templates; the rest is
        # the triage's own numbers, codes and texts (every host of --list carries all's vars: marking those costs a
        # copy a host)
        summary = result["summary"]
        self.inventory.set_variable("all", "nodefix_triage_summary", dict(summary, **dict(
            (k, wrap_var(summary[k])) for k in ("warnings", "prometheus", "not_hosts") if k in summary)))
        self.inventory.set_variable("all", "nodefix_triage_fleet_size", result["summary"]["fleet_size"])

    def _construct(self, name, strict):
        """Ansible's constructed options on one host (``strict`` None: none is set, nothing to do)."""
        if strict is None:
            return
        hostvars = self.inventory.get_host(name).get_vars()
        self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
        self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)
