# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory plugin nodefix.k8s.triage in process (Ansible's own InventoryData and DataLoader): the groups
and host vars of the interface, compose/keyed_groups, the cache, and a failed parse that fails the command.
The options are what Ansible's config would give (the plugin's DOCUMENTATION defaults and the file's keys):
Ansible's plugin loader cannot be set up inside a pytest run that already imported the collection as a
package. The triage's answer is the classifier's over observations given here (what Prometheus would hold);
the plugin through ``ansible-inventory`` with Ansible's own config, against a REAL Prometheus, is in
tests/unit/plugins/modules/test_prometheus_real.py."""

import os
import time

import pytest

from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
import yaml

from ansible_collections.nodefix.k8s.plugins.doc_fragments import triage as triage_fragment
from ansible_collections.nodefix.k8s.plugins.inventory import triage as plugin_module
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify

AT = 1800000000.0

# the defaults of the options the plugin takes from Ansible's fragments (constructed, inventory_cache)
FRAGMENT_DEFAULTS = {"compose": {}, "groups": {}, "keyed_groups": [], "strict": False, "leading_separator": True,
                     "use_extra_vars": False, "cache": False, "cache_plugin": "memory", "cache_timeout": 3600,
                     "cache_connection": None, "cache_prefix": "ansible_inventory_"}


class Plugin(plugin_module.InventoryModule):
    """The plugin with its options as Ansible's config gives them (defaults, then the file's keys) and an
    in-memory cache in place of the cache plugin."""
    shared_cache = {}

    def _read_config_data(self, path):
        try:  # as Ansible's own _read_config_data reads it: ansible-core >= 2.19 trusts the file's templates
            data = self.loader.load_from_file(path, cache="none", trusted_as_template=True)
        except TypeError:  # ansible-core < 2.19: no trust tags
            data = self.loader.load_from_file(path, cache="none")
        docs = dict(yaml.safe_load(plugin_module.DOCUMENTATION)["options"],
                    **yaml.safe_load(triage_fragment.ModuleDocFragment.DOCUMENTATION)["options"])
        self._options = dict(FRAGMENT_DEFAULTS, **dict((k, v.get("default")) for k, v in docs.items()))
        self._options.update(prometheus_timeout=30, prometheus_headers={}, prometheus_validate_certs=True,
                             prometheus_token_file=None, prometheus_username=None, prometheus_password=None,
                             prometheus_ca_path=None)
        self._options.update(data)
        self._cache = Plugin.shared_cache
        return data

    def get_option(self, option, hostvars=None):
        return self._options[option]


FRESH = {"up": 1, "scrape_error": 0, "mtime": AT - 60, "checks_reported": 1, "clock_offset": 0.0}


def answer(unknown=1):
    """The classifier's answer for node-a (a finding), node-b (clean), ``unknown`` stale nodes and an orphan."""
    conf = triage_classify.settings(required_checks=["kubelet"], max_unknown_percent=100)
    expected = {"node-a": {"internal_ip": "10.0.0.1"}, "node-b": {"internal_ip": "10.0.0.2"}}
    observed = {"node-a": dict(FRESH, findings=[{"id": "kubelet.eviction_thresholds", "severity": "high",
                                                 "check": "kubelet", "subject": ""}]),
                "node-b": dict(FRESH)}
    for i in range(unknown):
        expected["node-s%d" % i] = {"internal_ip": None}
        observed["node-s%d" % i] = dict(FRESH, mtime=AT - 9000)
    return triage_classify.classify(conf, expected, observed, {"10.9.9.9"}, AT)


def parse(tmp_path, monkeypatch, text, result, cache=False, calls=None, inventory=None):
    calls = [] if calls is None else calls

    def fake_triage(*args, **kwargs):
        calls.append(kwargs)
        return result
    monkeypatch.setattr(plugin_module.triage_run, "triage", fake_triage)
    path = tmp_path / "fleet.nodefix_triage.yml"
    path.write_text("plugin: nodefix.k8s.triage\nprometheus_url: http://prometheus.test:9090\n" + text)
    inventory = InventoryData() if inventory is None else inventory
    plugin = Plugin()
    assert plugin.verify_file(str(path))
    plugin.parse(inventory, DataLoader(), str(path), cache=cache)
    return inventory


def hosts(inventory, group):
    return sorted(h.name for h in inventory.groups[group].get_hosts())


def test_groups_and_host_vars_of_the_interface(tmp_path, monkeypatch):
    inv = parse(tmp_path, monkeypatch, "max_unknown_percent: 50\nkeyed_groups:\n  - key: nodefix_triage.state\n"
                "    prefix: triage\ncompose:\n  first_id: nodefix_triage.ids[0] | default('')\nstrict: true\n", answer())
    assert hosts(inv, "nodefix_triage_targets") == ["node-a", "node-s0"]
    assert hosts(inv, "nodefix_triage_findings") == ["node-a"] and hosts(inv, "nodefix_triage_unknown") == ["node-s0"]
    assert hosts(inv, "nodefix_triage_orphans") == ["10.9.9.9"] and "nodefix_triage_clean" not in inv.groups
    assert hosts(inv, "nodefix_finding_kubelet_eviction_thresholds") == hosts(inv, "nodefix_severity_high") == ["node-a"]
    assert "node-b" not in inv.hosts  # clean: no host unless add_clean_hosts
    a = inv.get_host("node-a").get_vars()
    assert a["ansible_host"] == "10.0.0.1" and a["first_id"] == "kubelet.eviction_thresholds"
    assert set(a["nodefix_triage"]) == {"state", "ids", "findings", "reasons", "notes", "audit_age_s", "not_counted"}
    assert inv.get_host("node-s0").get_vars()["nodefix_triage"]["reasons"] == ["stale"]
    assert "ansible_host" not in inv.get_host("node-s0").get_vars()  # no address known: the name is the host
    assert hosts(inv, "triage_findings") == ["node-a"] and hosts(inv, "triage_unknown") == ["node-s0"]
    assert inv.groups["all"].get_vars()["nodefix_triage_fleet_size"] == 3
    assert inv.groups["all"].get_vars()["nodefix_triage_summary"]["counts"]["unknown"] == 1


def test_a_site_inventory_before_it_keeps_its_address(tmp_path, monkeypatch):
    # -i site.yml -i fleet.nodefix_triage.yml: the site's ansible_host stays; a host it does not address gets the IP
    site = InventoryData()
    site.add_host("node-a")
    site.set_variable("node-a", "ansible_host", "node-a.site.example")
    site.add_host("node-s0")
    inv = parse(tmp_path, monkeypatch, "max_unknown_percent: 50\n", answer(), inventory=site)
    assert inv.get_host("node-a").get_vars()["ansible_host"] == "node-a.site.example"
    assert "ansible_host" not in inv.get_host("node-s0").get_vars()  # no internal IP known: the site's name


def test_clean_hosts_on_request(tmp_path, monkeypatch):
    calls = []
    inv = parse(tmp_path, monkeypatch, "max_unknown_percent: 50\nadd_clean_hosts: true\n", answer(), calls=calls)
    assert hosts(inv, "nodefix_triage_clean") == ["node-b"]
    assert "node-b" not in hosts(inv, "nodefix_triage_targets")
    assert calls[0]["clean_records"] is True
    # without add_clean_hosts the triage is asked lean: the clean nodes counted, their records never built
    calls = []
    parse(tmp_path, monkeypatch, "max_unknown_percent: 50\n", answer(), calls=calls)
    assert calls[0]["clean_records"] is False


def test_above_max_unknown_percent_the_command_fails(tmp_path, monkeypatch, capsys):
    # 1 of 3 unknown is 33 %: above the default 10 - the command exits 1 (Ansible would make a raised error a warning)
    with pytest.raises(SystemExit) as err:
        parse(tmp_path, monkeypatch, "", answer())
    assert err.value.code == 1
    # with INVENTORY_ANY_UNPARSED_IS_FAILED Ansible fails the command itself: the plugin raises as its API wants
    monkeypatch.setattr(plugin_module.C, "INVENTORY_ANY_UNPARSED_IS_FAILED", True)
    with pytest.raises(AnsibleParserError, match=r"1 of 3 nodes \(33.3%\) are unknown, above max_unknown_percent 10"):
        parse(tmp_path, monkeypatch, "", answer())


def test_a_triage_that_cannot_answer_fails_the_parse(tmp_path, monkeypatch):
    monkeypatch.setattr(plugin_module.C, "INVENTORY_ANY_UNPARSED_IS_FAILED", True)

    def no_answer(*args, **kwargs):
        raise NodefixError("Prometheus at http://prometheus.test:9090/api/v1/query did not answer: refused")
    monkeypatch.setattr(plugin_module.triage_run, "triage", no_answer)
    path = tmp_path / "fleet.nodefix_triage.yml"
    path.write_text("plugin: nodefix.k8s.triage\nprometheus_url: http://prometheus.test:9090\n")
    with pytest.raises(AnsibleParserError, match="did not answer"):
        Plugin().parse(InventoryData(), DataLoader(), str(path), cache=False)
    # and options that cannot work are refused before anything is asked
    path.write_text("plugin: nodefix.k8s.triage\nprometheus_url: http://prometheus.test:9090\nnode_label_regex: '('\n")
    with pytest.raises(AnsibleParserError, match="node_label_regex"):
        Plugin().parse(InventoryData(), DataLoader(), str(path), cache=False)


def evaluated(result, seconds_ago):
    result["summary"]["evaluation_time"] = round(time.time() - seconds_ago, 3)
    return result


@pytest.mark.parametrize("seconds_ago", [5, 1801, -120])
def test_with_cache_every_parse_asks_and_nothing_is_cached(tmp_path, monkeypatch, seconds_ago):
    """Hostile review of 2026-12-07 (D2): a cached triage served a clean verdict after the node broke (its exporter
    down) for up to max_audit_age, with no request to Prometheus. Whatever the cache's age and settings, every parse
    asks; the verdict is the new answer's and nothing is written to the cache."""
    calls = []
    Plugin.shared_cache.clear()
    text = "max_unknown_percent: 50\ncache: true\nadd_clean_hosts: true\n"
    inv = parse(tmp_path, monkeypatch, text, evaluated(answer(), seconds_ago), cache=True, calls=calls)
    assert hosts(inv, "nodefix_triage_clean") == ["node-b"]
    broken = answer()
    broken["nodes"]["node-b"].update(state="unknown", reasons=["exporter_down"])
    inv = parse(tmp_path, monkeypatch, text, evaluated(broken, 1), cache=True, calls=calls)
    assert len(calls) == 2 and hosts(inv, "nodefix_triage_unknown") == ["node-b", "node-s0"]
    assert "nodefix_triage_clean" not in inv.groups or hosts(inv, "nodefix_triage_clean") == []
    assert Plugin.shared_cache == {}


def test_an_expected_node_that_is_the_controller_is_never_a_host_even_clean(tmp_path, monkeypatch):
    """Hostile review of 2026-12-07 (D4): run.refuse_loopback's mark keeps a node out of the inventory, whatever its
    class (a clean one with add_clean_hosts too); the summary names it."""
    result = answer()
    result["nodes"]["localhost"] = dict(result["nodes"]["node-b"])
    result["nodes"]["node-a"]["internal_ip"] = "127.0.0.1"
    plugin_module.triage_run.refuse_loopback(result, {"localhost": {"internal_ip": None},
                                                      "node-a": {"internal_ip": "127.0.0.1"},
                                                      "node-b": {"internal_ip": "10.0.0.2"}})
    assert sorted(result["summary"]["not_hosts"]) == ["localhost", "node-a"] and result["summary"]["targets"] == 1
    inv = parse(tmp_path, monkeypatch, "max_unknown_percent: 50\nadd_clean_hosts: true\n", result)
    assert "localhost" not in inv.hosts and "node-a" not in inv.hosts and inv.localhost is None
    assert hosts(inv, "nodefix_triage_targets") == ["node-s0"] and hosts(inv, "nodefix_triage_clean") == ["node-b"]
    assert sorted(inv.groups["all"].get_vars()["nodefix_triage_summary"]["not_hosts"]) == ["localhost", "node-a"]


@pytest.mark.parametrize("name, refused", [
    ("localhost", True), ("LOCALHOST.", True), ("a.localhost", True), ("localhost.localdomain", True),
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
    ("0.0.0.0", True), ("::", True), ("node-a", False), ("10.0.0.1", False), ("localhost-node", False),
    ("fd00::1", False), (None, False),
])
def test_what_is_the_controller_itself(name, refused):
    assert plugin_module.triage_run.loopback(name) is refused


@pytest.mark.parametrize("name, refused", [
    ("127.1", True), ("0x7f000001", True), ("0X7F000001", True), ("2130706433", True), ("0177.0.0.1", True),
    ("127.000.000.001", True), ("0", True), ("0x7f.1", True), ("127.0.1", True), ("localhost4", True),
    ("localhost4.localdomain4", True), ("localhost6", True), ("localhost6.localdomain6", True),
    ("ip6-loopback", True), ("10.1", False), ("167772161", False), ("0x0a000001", False), ("1.2.3.4.5", False),
    ("08.0.0.1", False), ("0x", False), ("127.0.0.1 x", False), ("node-0", False), ("localhost44", False),
])
def test_what_the_resolver_reads_as_the_controller_is_the_controller(name, refused):
    """Hostile review of 2026-12-07 (L1): the forms inet_aton reads - as the resolver and ssh do (127.1, hex, one
    number, octal, 0 for 0.0.0.0) - and RHEL's /etc/hosts names reach the controller too; other addresses do not."""
    assert plugin_module.triage_run.loopback(name) is refused


def test_the_controllers_own_host_name_and_fqdn_are_the_controller(monkeypatch):
    """Hostile review of 2026-12-07 (L1): a node named as the controller's own host name or FQDN (Debian's /etc/hosts
    maps it to 127.0.1.1; ssh to it reaches the controller's sshd) is never a host - its name or its internal IP;
    no other name is looked up (only the controller's own)."""
    run = plugin_module.triage_run
    monkeypatch.setattr(run.socket, "gethostname", lambda: "Ctl-1")
    monkeypatch.setattr(run.socket, "getfqdn", lambda *a: "ctl-1.example.org.")
    monkeypatch.setattr(run.socket, "gethostbyname", None)   # never a look-up of a node's name
    monkeypatch.setattr(run.socket, "getaddrinfo", None)
    assert run.controller_names() == frozenset(["ctl-1", "ctl-1.example.org"])
    result = answer()
    for name in ("ctl-1", "ctl-1.example.org", "node-c"):
        result["nodes"][name] = dict(result["nodes"]["node-b"])
    run.refuse_loopback(result, {"ctl-1": {"internal_ip": None}, "ctl-1.example.org": {"internal_ip": "10.0.0.9"},
                                 "node-a": {"internal_ip": "CTL-1.example.org."}, "node-b": {"internal_ip": "10.0.0.2"},
                                 "node-c": {"internal_ip": "ctl-2"}})
    assert sorted(result["summary"]["not_hosts"]) == ["ctl-1", "ctl-1.example.org", "node-a"]
    assert "the controller itself" in result["summary"]["not_hosts"]["node-a"]
    assert run.loopback("ctl-1") is False   # only with the controller's names given (refuse_loopback asks them once)


def test_only_its_own_files(tmp_path):
    plugin = Plugin()
    for name in ("fleet.nodefix_triage.yml", "fleet.nodefix_triage.yaml", "hosts.yml"):
        (tmp_path / name).write_text("plugin: nodefix.k8s.triage\n")
    assert plugin.verify_file(str(tmp_path / "fleet.nodefix_triage.yml"))
    assert plugin.verify_file(str(tmp_path / "fleet.nodefix_triage.yaml"))
    assert not plugin.verify_file(str(tmp_path / "hosts.yml"))


@pytest.mark.parametrize("variables, fleet", [
    ({"nodefix_triage_fleet_size": 10000}, 10000),                               # the triage's fleet, not its targets
    ({"nodefix_triage_fleet_size": 10000, "nodefix_fleet_size": 12000}, 12000),  # a sliced run's own size wins
])
def test_the_storm_breaker_counts_against_the_triaged_fleet(variables, fleet):
    """playbooks/tasks/storm.yml's storm_gate task, its fleet_size templated as Ansible templates it."""
    loader = DataLoader()
    path = os.path.join(os.path.dirname(plugin_module.__file__), "..", "..", "playbooks", "tasks", "storm.yml")
    try:
        tasks = loader.load_from_file(path, cache="none", trusted_as_template=True)
    except TypeError:  # ansible-core < 2.19
        tasks = loader.load_from_file(path, cache="none")
    gate = [t for t in tasks if "nodefix.k8s.storm_gate" in t][0]["nodefix.k8s.storm_gate"]
    assert int(Templar(loader=loader, variables=variables).template(gate["fleet_size"])) == fleet


@pytest.mark.parametrize("tenant", ["node", "node-a", "prod"])
def test_a_tenant_header_value_is_data_not_a_secret(tmp_path, monkeypatch, tenant):
    """prometheus_headers is no_log, but only a secret-named header's value is removed from the output: a tenant
    (X-Scope-OrgID) equal to a part of a node's name leaves the hosts and their vars as they are; the API key's
    value is still removed. The triage's answer is redacted as run.triage redacts it (with the plugin's client's
    credential values)."""
    result = answer()
    result["nodes"]["node-a"]["notes"] = ["key ApiKey-63 rejected by a store"]
    real = plugin_module.triage_run.redacted
    path = tmp_path / "fleet.nodefix_triage.yml"
    path.write_text("plugin: nodefix.k8s.triage\nprometheus_url: http://prometheus.test:9090\nmax_unknown_percent: 50\n"
                    "prometheus_headers:\n  X-Scope-OrgID: %s\n  X-Api-Key: ApiKey-63\n" % tenant)
    monkeypatch.setattr(plugin_module.triage_run, "triage",
                        lambda client, *_a, **_kw: real(result, client.secret_values()))
    inv = InventoryData()
    Plugin().parse(inv, DataLoader(), str(path), cache=False)
    assert hosts(inv, "nodefix_triage_findings") == ["node-a"]
    notes = inv.get_host("node-a").get_vars()["nodefix_triage"]["notes"]
    assert notes and "ApiKey-63" not in notes[0] and "rejected by a store" in notes[0]


@pytest.mark.parametrize("orphan", ["localhost", "127.0.0.1", "::1", "127.0.1.1", "127.1", "0x7f000001", "localhost4",
                                    "ctl-1", "ctl-1.example.org"])
def test_an_orphan_named_as_the_controller_never_replaces_ansibles_localhost(tmp_path, monkeypatch, orphan):
    """Prometheus scraping its own node_exporter (localhost:9100): a host named localhost would lose the implicit
    localhost's local connection in every ``hosts: localhost`` play of the run. (L1: the forms the resolver reads as
    the controller, and the controller's own host name and FQDN, too.)"""
    monkeypatch.setattr(plugin_module.triage_run.socket, "gethostname", lambda: "ctl-1")
    monkeypatch.setattr(plugin_module.triage_run.socket, "getfqdn", lambda *a: "ctl-1.example.org")
    result = answer()
    result["orphans"] = {orphan: result["orphans"].popitem()[1] if result["orphans"] else []}
    plugin_module.triage_run.refuse_loopback(result, {})   # as triage_run.triage does to every answer (faked here)
    inv = parse(tmp_path, monkeypatch, "max_unknown_percent: 50\n", result)
    assert orphan not in inv.hosts and inv.localhost is None


def test_two_finding_ids_never_share_a_group():
    names = [plugin_module.group_name("nodefix_finding_", i)
             for i in ("kernel.oom", "kernel-oom", "kernel_oom", "ядро.x", "яяяя.x", "kubelet.a_b", "kubelet_a.b")]
    assert len(set(names)) == len(names)
    # the collection's own ids keep the documented names
    assert plugin_module.group_name("nodefix_finding_", "pids.zombie_leaker") == "nodefix_finding_pids_zombie_leaker"
    assert plugin_module.group_name("nodefix_severity_", "high") == "nodefix_severity_high"


def test_group_names_are_exact_and_the_audits_own_ids_keep_theirs():
    """Second review of 2026-12-07: '$' let a trailing newline through, and audit.* ids got a hash."""
    name = plugin_module.group_name
    assert name("nodefix_finding_", "kubelet.api_qps_low\n") != name("nodefix_finding_", "kubelet.api_qps_low_")
    assert "\n" not in name("nodefix_severity_", "high\n")
    assert name("nodefix_finding_", "audit.not_kubernetes_node") == "nodefix_finding_audit_not_kubernetes_node"
