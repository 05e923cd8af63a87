#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight
short_description: Check a playbook's variables and the controller's prerequisites before any node is touched
version_added: 1.2.0
description:
  - Runs on the controller (an action plugin), once, as the first task of C(nodefix.k8s.audit), C(nodefix.k8s.remediate),
    C(nodefix.k8s.npd) and C(nodefix.k8s.merge).
  - Every C(nodefix_*) variable any of O(hosts) has (inventory, group vars, C(-e)) must be one of the playbooks'
    variables - an unknown one is refused naming the closest known name (C(nodefix_rebot) - did you mean
    C(nodefix_reboot)?) - and of the right type, within its choices and range, read as Ansible's own argument spec
    reads values (C(-e nodefix_storm_percent=20) is the whole number 20; C(abc), C(1e3), C(100.5) and C(150) are
    refused, naming C(nodefix_storm_percent)). The spec is the collection's C(playbooks/vars/arguments.yml), the
    same file the docsite's Playbooks page is written from.
  - The collections the playbook runs modules of are installed on the controller in the versions C(galaxy.yml)
    declares (C(remediate) - C(ansible.posix); the API calls need no other collection, only the C(kubernetes) library
    the drain preflight checks when C(nodefix_kubeconfig) is set).
  - A host pattern (O(targets), the playbooks' C(nodefix_targets)) that matches no host of the inventory is refused.
  - Variables of your own that share the prefix are left alone when C(nodefix_preflight_ignore) (or O(ignore))
    names them with shell globs.
author:
  - nodefix.k8s developers (@nodefix)
options:
  playbook:
    description: The playbook whose variables and prerequisites are checked.
    type: str
    required: true
    choices: [audit, remediate, npd, merge]
  hosts:
    description: The hosts whose variables are read (the play's targets, e.g. C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  ignore:
    description: Shell globs of C(nodefix_*) names to leave alone. Unset, the hosts' C(nodefix_preflight_ignore).
    type: list
    elements: str
  targets:
    description:
      - The host pattern the playbook targets (C(nodefix_targets), default C(all)). With O(targets_matched) empty it is
        refused, naming the variable, the inventory's groups and the closest group or host to each name of the pattern
        that is neither (C(k8s_nodez) - did you mean C(k8s_nodes)?); every play of the playbook would otherwise be
        skipped and the run exit 0 with an empty report.
    type: str
    version_added: 1.2.0
  targets_matched:
    description: The inventory's hosts O(targets) matches (C(query('ansible.builtin.inventory_hostnames', pattern))).
    type: list
    elements: str
    default: []
    version_added: 1.2.0
  triage_remediate_clean:
    description:
      - The hosts the triage put in the inventory are judged by their C(nodefix_triage.state) - an orphan (exports to
        Prometheus, not an expected node) is always refused by every playbook that connects to the nodes
        (O(playbook=audit), V(npd), V(remediate); not V(merge)); for O(playbook=remediate) a node found clean
        (the inventory plugin's C(add_clean_hosts)) is refused unless this is true (C(nodefix_triage_remediate_clean)).
        Both are hosts of C(all), the default target pattern.
    type: bool
    default: false
    version_added: 1.2.0
extends_documentation_fragment:
  - nodefix.k8s.attributes
attributes:
  check_mode:
    support: full
    details: Reads only; runs the same way in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
    details: Runs on the controller (an action plugin); reads the hosts' variables, never connects to them.
notes:
  - The check costs no connection to a node; its result names every problem at once.
"""

EXAMPLES = r"""
- name: Check the variables and prerequisites before any node
  nodefix.k8s.preflight:
    playbook: remediate
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
"""

RETURN = r"""
problems:
  description: One message per problem, each naming the variable (or the collection) and the hosts it was set for.
  returned: always
  type: list
  elements: str
  sample: ["nodefix_rebot is not a variable of nodefix.k8s's playbooks - did you mean nodefix_reboot? (set for node-1)"]
checked_hosts:
  description: The number of hosts whose variables were read.
  returned: always
  type: int
  sample: 12
checked_variables:
  description: The C(nodefix_*) names the hosts have.
  returned: always
  type: list
  elements: str
  sample: [nodefix_kubeconfig, nodefix_serial]
collection_version:
  description: The version of nodefix.k8s that runs (the reports say it).
  returned: always
  type: str
  sample: 1.2.0
msg:
  description: What was checked, or every problem.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(playbook=dict(type="str", required=True, choices=["audit", "remediate", "npd", "merge"]),
                           hosts=dict(type="list", elements="str", required=True),
                           ignore=dict(type="list", elements="str"),
                           targets=dict(type="str"),
                           targets_matched=dict(type="list", elements="str", default=[]),
                           triage_remediate_clean=dict(type="bool", default=False)),
        supports_check_mode=True)
    module.fail_json(msg="nodefix.k8s.preflight runs on the controller as an action plugin; it was run as a module")


if __name__ == "__main__":
    main()
