# SPDX-License-Identifier: GPL-3.0-or-later
"""_preflight.variables: the playbooks' variables checked before any node (names, types, choices, ranges)."""

import os

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._preflight import variables as pv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(ROOT, "playbooks", "vars", "arguments.yml")) as _fh:
    ARGS = pv.check_spec(yaml.safe_load(_fh))


def check(values, playbook="remediate", ignore=()):
    return pv.problems(ARGS, {"node-1": values}, playbook, ignore)


@pytest.mark.parametrize("typo,meant", [("nodefix_rebot", "nodefix_reboot"), ("nodefix_fail_onn", "nodefix_fail_on"),
                                        ("nodefix_kubconfig", "nodefix_kubeconfig"),
                                        ("nodefix_storm_precent", "nodefix_storm_percent")])
def test_an_unknown_variable_is_refused_naming_the_closest(typo, meant):
    out = check({typo: "x"})
    assert len(out) == 1 and typo in out[0] and "did you mean %s?" % meant in out[0] and "node-1" in out[0]


def test_an_unknown_name_with_nothing_close_says_how_to_keep_it():
    out = check({"nodefix_my_own_thing": 1})
    assert "nodefix_preflight_ignore" in out[0]
    assert check({"nodefix_my_own_thing": 1, "nodefix_lab_x": 2}, ignore=["nodefix_my_*", "nodefix_lab_*"]) == []


@pytest.mark.parametrize("value", ["abc", "1e3", "100.5", 101, 150, "150", -1, 100.5, 100.0, True, [20], None])
def test_storm_percent_outside_0_100_or_not_whole_is_refused(value):
    out = check({"nodefix_storm_percent": value})
    assert len(out) == 1 and out[0].startswith("nodefix_storm_percent "), out


@pytest.mark.parametrize("value", [0, "0", 20, "20", " 20 ", 100, "100"])
def test_storm_percent_whole_0_to_100_passes(value):
    assert check({"nodefix_storm_percent": value}) == []


@pytest.mark.parametrize("name,value,words", [
    ("nodefix_fail_on", "hgh", "did you mean high?"),
    ("nodefix_become", "maybe", "true or false"),
    ("nodefix_serial", 0, "at least 1 node"),
    ("nodefix_serial", "120%", "share"),
    ("nodefix_audit_checks", ["kernel", "kubelett"], "not one of"),
    ("nodefix_audit_options", "pids=1", "mapping"),
    ("nodefix_waivers", ["pids.zombie_leaker"], "list of mappings"),
    ("nodefix_kubelet_guard_rails", "sometimes", "true, false or auto"),
    ("nodefix_slice", "../x", "must be a plain name"),
    ("nodefix_drain_timeout", 0, "at least 1"),
    ("nodefix_max_fail_percentage", 101, "at most 100"),
    ("nodefix_kernel_min_release", "six", "must be a release such as 6.12"),
    ("nodefix_kubeconfig", "", "must not be empty"),
    ("nodefix_node_name", " ", "must not be empty"),
])
def test_bad_values_are_refused_naming_the_variable(name, value, words):
    out = check({name: value})
    assert len(out) == 1 and out[0].startswith(name + " ") and words in out[0], out


@pytest.mark.parametrize("name,value", [
    ("nodefix_become", "no"), ("nodefix_become", False), ("nodefix_serial", "30%"), ("nodefix_serial", "3"),
    ("nodefix_audit_checks", "kernel,pids"), ("nodefix_audit_checks", ["reboot"]),
    ("nodefix_audit_options", '{"pids": {"zombie_threshold": 20}}'), ("nodefix_kubelet_guard_rails", "auto"),
    ("nodefix_kubelet_guard_rails", "true"), ("nodefix_slice", "slice-1"), ("nodefix_kernel_min_release", "6.12"),
    ("nodefix_kernel_min_release", 6.12), ("nodefix_run", 4711), ("nodefix_fail_on", "never"),
])
def test_good_values_pass_as_ansible_reads_them(name, value):
    assert check({name: value}) == []


def test_problems_are_grouped_with_their_hosts():
    out = pv.problems(ARGS, dict(("n%d" % i, {"nodefix_rebot": True}) for i in range(8)), "audit")
    assert out == ["nodefix_rebot is not a variable of nodefix.k8s's playbooks - did you mean nodefix_reboot? "
                   "(set for n0, n1, n2, n3, n4 and 3 more)"]


def test_the_spec_itself_is_checked():
    with pytest.raises(pv.SpecError):
        pv.check_spec({"arguments": {"nodefix_x": {"type": "number", "description": "d"}}})
    with pytest.raises(pv.SpecError):
        pv.check_spec({"arguments": {"other": {"type": "str", "description": "d"}}})
    with pytest.raises(pv.SpecError):
        pv.problems(ARGS, {}, "destroy")


@pytest.mark.parametrize("value,ok", [("6h", True), ("1h30m", True), (21600, True), ("0", True), (0, True),
                                      ("6 hours", False), (-1, False), ("1.5h", False), (True, False)])
def test_durations(value, ok):
    assert (check({"nodefix_reboot_backoff": value}) == []) is ok
