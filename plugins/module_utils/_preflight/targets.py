# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""A host pattern (``nodefix_targets``) that matches no host of the inventory, refused before any node.

Without this a typo (``-e nodefix_targets=k8s_nodez``) leaves every play of the playbook with no host: Ansible
skips them ("no hosts matched") and the run exits 0 with an empty report. ``no_match_problem`` words the
refusal: the variable, the pattern, the inventory's groups and, for each name of the pattern that is neither
a group nor a host, the closest one (Ansible's pattern syntax: terms split on ``:`` and ``,``, each maybe
prefixed with ``!`` or ``&``; https://docs.ansible.com/ansible/latest/inventory_guide/intro_patterns.html).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

# groups every inventory has, not worth naming
_IMPLICIT = ("all", "ungrouped")
# a term with a glob, a regex (~...) or a host range/slice is not a plain name to correct
_NOT_A_NAME = re.compile(r"[*?\[\]~]")


def pattern_terms(pattern):
    """The plain names of a host pattern (``k8s_workers:!node3,&eu`` -> [k8s_workers, node3, eu])."""
    terms = []
    for term in re.split(r"[:,]", str(pattern or "")):
        term = term.strip().lstrip("!&").strip()
        if term and not _NOT_A_NAME.search(term):
            terms.append(term)
    return terms


def _listed(names, limit=12):
    names = sorted(names)
    return ", ".join(names[:limit]) + (" and %d more" % (len(names) - limit) if len(names) > limit else "")


def no_match_problem(pattern, groups, hosts, variable="nodefix_targets"):
    """The refusal of ``pattern`` (which matched no host): names the variable, the inventory's groups and the
    closest group or host for each unknown name of the pattern. ``groups``: the inventory's group names;
    ``hosts``: its host names."""
    if not isinstance(pattern, str):
        kind = ("a list" if isinstance(pattern, (list, tuple)) else "a mapping" if isinstance(pattern, dict)
                else "a %s" % type(pattern).__name__)
        return ("%s must be a host pattern - a string such as k8s_nodes or node1,node2 - not %s (%s); nothing was "
                "touched" % (variable, kind, str(list(pattern) if isinstance(pattern, (list, tuple)) else pattern)[:80]))
    if not pattern.strip():
        return ("%s is empty: give a group or host pattern (e.g. k8s_nodes), or leave it unset for every host of "
                "the inventory; nothing was touched" % variable)
    groups = sorted(set(str(g) for g in groups or []) - set(_IMPLICIT))
    hosts = sorted(set(str(h) for h in hosts or []))
    known = set(groups) | set(hosts) | set(_IMPLICIT)
    hints = []
    for term in pattern_terms(pattern):
        if term in known:
            continue
        close = difflib.get_close_matches(term, groups + hosts, n=1, cutoff=0.6)
        if close:
            hints.append("%s - did you mean %s?" % (term, close[0]))
        else:
            hints.append("%s is neither a group nor a host of the inventory" % term)
    if not hosts:
        where = "the inventory has no host (check -i)"
    else:
        where = "the inventory's groups: %s" % (_listed(groups) or "none but all (its %d host(s) are ungrouped)"
                                                % len(hosts))
    return "%s=%s matches no host of the inventory (%s)%s; no node would be audited or fixed, nothing was touched" % (
        variable, pattern, where, ("; " + "; ".join(hints)) if hints else "")


# the playbooks that connect to the nodes (merge reads the slices' reports on the controller): a triage orphan is
# never one of their hosts
CONNECTING = ("audit", "npd", "remediate")


def triage_problems(values, playbook="remediate", allow_clean=False):
    """Refusals for the hosts of ``playbook`` that the triage says are not to be acted on: ``values`` is {host: its
    nodefix_* variables}. An orphan (``nodefix_triage.state`` ``orphan``: exports to Prometheus but is not an expected
    node - a recycled IP, another cluster's node) is never a host of a playbook that connects to the nodes
    (``CONNECTING``: audit runs become over SSH and writes the textfile, npd installs units, remediate fixes); a clean
    node (``clean``, in the inventory with ``add_clean_hosts``) is never remediated unless asked (``allow_clean``:
    ``nodefix_triage_remediate_clean``). Both are hosts of ``all``, so a forgotten
    ``-e nodefix_targets=nodefix_triage_targets`` would act on them (docs/triage.md)."""
    if playbook not in CONNECTING:
        return []
    states = {}
    for host, host_vars in sorted(values.items()):
        record = (host_vars or {}).get("nodefix_triage")
        state = record.get("state") if isinstance(record, dict) else None
        if state == "orphan" or (state == "clean" and playbook == "remediate" and not allow_clean):
            states.setdefault(state, []).append(host)
    out = []
    if states.get("orphan"):
        hosts = states["orphan"]
        out.append("%d host(s) are the triage's orphans - they export to Prometheus but are not expected nodes, and are "
                   "never audited, given npd or remediated: %s%s; run %s on the triage's targets "
                   "(-e nodefix_targets=nodefix_triage_targets) or leave them out of nodefix_targets" % (
                       len(hosts), ", ".join(hosts[:10]), " ..." if len(hosts) > 10 else "", playbook))
    if states.get("clean"):
        hosts = states["clean"]
        out.append("%d host(s) the triage found clean are among the targets: %s%s; remediate the triage's targets "
                   "(-e nodefix_targets=nodefix_triage_targets), or set nodefix_triage_remediate_clean=true to audit and "
                   "remediate them too" % (len(hosts), ", ".join(hosts[:10]), " ..." if len(hosts) > 10 else ""))
    return out
