# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/action/preflight.py run in process: each user's mistake of tests/integration/test_09_preflight.py
refused through the action plugin itself (its ``run``, the spec file the playbooks load, _preflight.variables),
with the words the run's error carries. The playbook runs of test_09 keep one end-to-end refusal per playbook
(the report marked failed, no task on a node); the per-value variants are proven here, without a playbook run
each (issue 56: the same behaviours, fewer runs)."""


import pytest

from ansible_collections.nodefix.k8s.plugins.action import preflight
from plugins.action.action_harness import action_of

# (playbook, the variables a user set, words the refusal must carry) - the cases test_09 ran one playbook run each
CASES = [
    ("audit", {"nodefix_rebot": True}, ["nodefix_rebot is not a variable", "did you mean nodefix_reboot?"]),
    ("audit", {"nodefix_fail_onn": "medium"}, ["did you mean nodefix_fail_on?"]),
    ("audit", {"nodefix_fail_on": "hgh"}, ["nodefix_fail_on must be one of", "did you mean high?"]),
    ("remediate", {"nodefix_storm_percent": "abc"}, ["nodefix_storm_percent must be a whole number"]),
    ("remediate", {"nodefix_storm_percent": 150}, ["nodefix_storm_percent must be at most 100"]),
    ("remediate", {"nodefix_storm_percent": "100.5"}, ["nodefix_storm_percent must be a whole number"]),
    ("remediate", {"nodefix_serial": 0, "nodefix_drain_timeout": "ten"},
     ["nodefix_serial must be at least 1 node", "nodefix_drain_timeout must be a whole number"]),
    ("npd", {"nodefix_audit_checks": "kernel,kubelett"}, ['nodefix_audit_checks has "kubelett"', "did you mean kubelet?"]),
]


def run_action(playbook, hosts, task_vars, **args):
    """The action plugin's run() as the playbooks call it (nodefix.k8s.preflight: playbook, hosts)."""
    return action_of(preflight, dict(args, playbook=playbook, hosts=hosts)).run(task_vars=task_vars)


def run_preflight(playbook, host_vars, **args):
    """With the hosts' variables as Ansible's hostvars gives them."""
    return run_action(playbook, sorted(host_vars), {"hostvars": host_vars}, **args)


@pytest.mark.parametrize("playbook,extra,words", CASES, ids=["%s-%s" % (c[0], "-".join(c[1])) for c in CASES])
def test_a_mistake_is_refused_by_the_action_plugin(playbook, extra, words):
    result = run_preflight(playbook, {"node-a": dict(extra, nodefix_report_dir="/tmp/reports", nodefix_become=False)})
    assert result.get("failed") is True, result
    assert result["msg"].startswith("nodefix.k8s %s refused before any node: " % playbook), result["msg"]
    for word in words:
        assert word in result["msg"], (word, result["msg"])
    assert result["checked_hosts"] == 1 and result["changed"] is False


def test_well_formed_variables_pass_the_action_plugin():
    """The control: the same call with nothing wrong is not refused (so the refusals above are the values')."""
    for playbook in ("audit", "remediate", "npd"):
        result = run_preflight(playbook, {"node-a": {"nodefix_report_dir": "/tmp/reports", "nodefix_become": False}})
        assert not result.get("failed"), result
        assert result["problems"] == [] and "every nodefix_* variable known and well-formed" in result["msg"]


def _real_hostvars(inventory_vars, extra_vars=None):
    """Ansible's own HostVars over a real VariableManager and InventoryManager (one host, node-a), as a play
    sees them: ``inventory_vars`` as host vars, ``extra_vars`` as ``-e``."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[])
    inventory.add_host("node-a", group="all")
    for name, value in inventory_vars.items():
        inventory.get_host("node-a").set_variable(name, value)
    manager = VariableManager(loader=loader, inventory=inventory)
    manager._extra_vars = dict(extra_vars or {})  # what load_extra_vars made of -e
    return manager, HostVars(inventory=inventory, variable_manager=manager, loader=loader)


def _run_with_hostvars(playbook, hostvars):
    return run_action(playbook, ["node-a"], {"hostvars": hostvars})


def test_registered_results_and_facts_are_not_settings():
    """A play's registered results and facts (register, set_fact, set_fact cacheable, gathered facts) named
    nodefix_* - the lab's own nodefix_boot, the facts a remediate earlier in the same run set, a team's
    wrapper - never refuse a run: the preflight judges what a user configured (issue 60)."""
    manager, hostvars = _real_hostvars({"nodefix_report_dir": "/tmp/reports", "nodefix_become": False})
    manager.set_nonpersistent_facts("node-a", {"nodefix_boot": {"changed": False, "elapsed": 3},
                                               "nodefix_remediation": {"status": "ok"}})
    manager.set_host_facts("node-a", {"nodefix_wrapper_cached": 1})
    result = _run_with_hostvars("audit", hostvars)
    assert not result.get("failed"), result
    assert result["checked_variables"] == ["nodefix_become", "nodefix_report_dir"], result


def test_a_mistyped_setting_is_refused_beside_registered_results():
    """The control, in the same shape: the same registered results plus a typo in the inventory and one as
    -e (which outranks a fact of its name: a setting, judged) are refused, naming the closest settings."""
    manager, hostvars = _real_hostvars({"nodefix_report_dir": "/tmp/reports", "nodefix_fail_onn": "high"},
                                       extra_vars={"nodefix_rebot": True})
    manager.set_nonpersistent_facts("node-a", {"nodefix_boot": {"elapsed": 3}, "nodefix_rebot": "registered"})
    result = _run_with_hostvars("audit", hostvars)
    assert result.get("failed") is True, result
    for word in ("nodefix_rebot is not a variable", "did you mean nodefix_reboot?", "did you mean nodefix_fail_on?"):
        assert word in result["msg"], (word, result["msg"])
    assert "nodefix_boot" not in result["msg"], result["msg"]


def _run_with_task_vars(playbook, hostvars, task_vars):
    return run_action(playbook, ["node-a"], dict(task_vars, hostvars=hostvars))


def test_a_known_setting_a_play_computed_is_still_judged():
    """set_fact of a real setting with a bad value (the value the run would use: facts outrank inventory) is
    refused; only the typo check is for what a user configured (review of issue 60)."""
    manager, hostvars = _real_hostvars({"nodefix_report_dir": "/tmp/reports"})
    manager.set_nonpersistent_facts("node-a", {"nodefix_drain_timeout": -5, "nodefix_boot": {"elapsed": 1}})
    result = _run_with_hostvars("remediate", hostvars)
    assert result.get("failed") is True and "nodefix_drain_timeout" in result["msg"], result
    assert "nodefix_boot" not in result["msg"], result["msg"]


def test_the_plays_own_vars_are_judged_as_settings():
    """vars: on the play or on an import_playbook (a site playbook's wrapper) reach the preflight's task vars, not
    hostvars: a typo or a bad value there is refused, named as the play's; the collection's own vars files'
    computed names (nodefix_report_base) and the host's own variables are not judged twice."""
    manager, hostvars = _real_hostvars({"nodefix_report_dir": "/tmp/reports"})
    manager.set_nonpersistent_facts("node-a", {"nodefix_boot": {"elapsed": 1}})
    task_vars = {"inventory_hostname": "node-a", "nodefix_report_dir": "/tmp/reports", "nodefix_boot": {},
                 "nodefix_report_base": "/tmp/reports", "nodefix_drain_timout": 5, "nodefix_reboot": "maybe"}
    result = _run_with_task_vars("remediate", hostvars, task_vars)
    assert result.get("failed") is True, result
    for word in ("nodefix_drain_timout is not a variable", "did you mean nodefix_drain_timeout?", "the play's vars",
                 "nodefix_reboot"):
        assert word in result["msg"], (word, result["msg"])
    for name in ("nodefix_boot", "nodefix_report_base", "nodefix_report_dir"):
        assert name not in result["msg"], (name, result["msg"])
    # the control: the same play with well-formed vars passes
    task_vars.update(nodefix_reboot=True)
    del task_vars["nodefix_drain_timout"]
    assert not _run_with_task_vars("remediate", hostvars, task_vars).get("failed")


def triaged(state, **extra):
    return dict(extra, nodefix_report_dir="/tmp/reports", nodefix_become=False,
                nodefix_triage={"state": state, "ids": [], "findings": [], "reasons": [], "audit_age_s": 60.0})


def test_remediate_refuses_the_triages_orphans_always_and_its_clean_nodes_unless_asked():
    """Review L3: orphans and clean hosts (add_clean_hosts) are in all, and remediate runs on nodefix_targets |
    default('all'): a forgotten -e nodefix_targets=nodefix_triage_targets would remediate them. The preflight refuses
    an orphan always, a clean node unless nodefix_triage_remediate_clean is true; findings and unknown pass."""
    fleet = {"node-f": triaged("findings"), "node-u": triaged("unknown"), "node-c": triaged("clean"),
             "stray": triaged("orphan")}
    result = run_preflight("remediate", fleet)
    assert result.get("failed") is True, result
    assert "1 host(s) are the triage's orphans" in result["msg"] and ": stray;" in result["msg"], result["msg"]
    assert "1 host(s) the triage found clean are among the targets: node-c;" in result["msg"], result["msg"]
    assert "node-f" not in result["msg"] and "node-u" not in result["msg"]
    # asked: the clean node passes, the orphan never
    # (tasks/preflight.yml passes nodefix_triage_remediate_clean as triage_remediate_clean)
    result = run_preflight("remediate", fleet, triage_remediate_clean=True)
    assert result.get("failed") is True and "found clean" not in result["msg"] and "stray" in result["msg"], result
    del fleet["stray"]
    assert not run_preflight("remediate", fleet, triage_remediate_clean="true").get("failed")
    assert run_preflight("remediate", fleet, triage_remediate_clean=False).get("failed")
    # the targets alone pass
    assert not run_preflight("remediate", {"node-f": triaged("findings"), "node-u": triaged("unknown")}).get("failed")


@pytest.mark.parametrize("playbook", ["audit", "npd", "remediate"])
def test_every_playbook_that_connects_refuses_the_triages_orphans(playbook):
    """Hostile review of 2026-12-07 (D5): orphans are hosts of all, and only remediate refused them - an audit (become
    over SSH, writes the textfile) or npd (installs units) of the triage inventory without -e nodefix_targets touched a
    recycled IP or another cluster's node. Every playbook that connects refuses them; a clean node only remediate."""
    fleet = {"node-f": triaged("findings"), "node-u": triaged("unknown"), "stray": triaged("orphan")}
    result = run_preflight(playbook, fleet, triage_remediate_clean=True)
    assert result.get("failed") is True, result
    assert result["msg"].startswith("nodefix.k8s %s refused before any node: " % playbook), result["msg"]
    assert "1 host(s) are the triage's orphans" in result["msg"] and ": stray;" in result["msg"], result["msg"]
    assert "run %s on the triage's targets" % playbook in result["msg"] and "node-f" not in result["msg"]
    del fleet["stray"]
    fleet["node-c"] = triaged("clean")
    assert not run_preflight(playbook, fleet, triage_remediate_clean=True).get("failed")
    # a clean node: refused by remediate unless asked, audited or given npd
    assert bool(run_preflight(playbook, fleet).get("failed")) is (playbook == "remediate")


def test_merge_connects_to_no_node_and_refuses_no_orphan():
    """merge reads the slices' reports on the controller (its one play is on localhost): an orphan in its host list
    (expected in the merged report) is no host it connects to."""
    result = run_preflight("merge", {"node-f": triaged("findings"), "stray": triaged("orphan")})
    assert not result.get("failed"), result
