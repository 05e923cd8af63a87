# SPDX-License-Identifier: GPL-3.0-or-later
"""_preflight/targets.py: a nodefix_targets pattern that matched no host, refused with the groups and the closest
name (issue 55 item 1)."""

from ansible_collections.nodefix.k8s.plugins.module_utils._preflight.targets import no_match_problem, pattern_terms


def test_pattern_terms_are_the_plain_names_of_a_pattern():
    assert pattern_terms("k8s_workers:!node3,&eu") == ["k8s_workers", "node3", "eu"]
    assert pattern_terms("web*:~db[0-9]:node[1:3]") == []   # globs, regexes and ranges are not names to correct
    assert pattern_terms("") == []


def test_a_typo_names_the_variable_the_groups_and_the_closest_group():
    msg = no_match_problem("k8s_nodez", ["all", "ungrouped", "k8s_nodes", "etcd"], ["node-1", "node-2"])
    assert msg.startswith("nodefix_targets=k8s_nodez matches no host of the inventory")
    assert "the inventory's groups: etcd, k8s_nodes" in msg and "all," not in msg
    assert "k8s_nodez - did you mean k8s_nodes?" in msg and "nothing was touched" in msg


def test_each_unknown_name_of_a_pattern_gets_its_own_hint_and_known_names_none():
    msg = no_match_problem("k8s_nodes:&eu_wst", ["k8s_nodes", "eu_west"], ["node-1"])
    assert "eu_wst - did you mean eu_west?" in msg and "k8s_nodes - did" not in msg
    # every name known, the intersection empty: no hint, the groups still named
    msg = no_match_problem("k8s_nodes:&eu_west", ["k8s_nodes", "eu_west"], ["node-1"])
    assert msg.endswith("(the inventory's groups: eu_west, k8s_nodes); no node would be audited or fixed, "
                        "nothing was touched")


def test_a_name_like_nothing_and_an_empty_inventory_say_so():
    assert "zzz is neither a group nor a host of the inventory" in no_match_problem("zzz", ["k8s_nodes"], ["node-1"])
    assert "none but all (its 1 host(s) are ungrouped)" in no_match_problem("web", ["all", "ungrouped"], ["node-1"])
    assert "the inventory has no host (check -i)" in no_match_problem("all", ["all", "ungrouped"], [])


def test_the_closest_name_may_be_a_host():
    assert "nod-1 - did you mean node-1?" in no_match_problem("nod-1", ["k8s_nodes"], ["node-1", "other"])


def test_an_empty_pattern_or_a_list_is_refused_for_what_it_is():
    """Review findings: an empty pattern passed the check (Ansible reads it as every host) and then failed the run
    at the plays' empty hosts keyword with no report; a list was refused as a pattern that 'matches no host'."""
    empty = no_match_problem("  ", ["k8s_nodes"], ["node-a"])
    assert empty.startswith("nodefix_targets is empty: give a group or host pattern"), empty
    listed = no_match_problem(["node-a"], ["k8s_nodes"], ["node-a"])
    assert listed.startswith("nodefix_targets must be a host pattern - a string") and "not a list (['node-a'])" in listed, listed
