# SPDX-License-Identifier: GPL-3.0-or-later
"""A TEST DOUBLE of a node that goes away mid-run: Ansible's local connection, until the kube-apiserver
double's request log (lab/apiserver-double) shows a given PATCH of the node's ``spec.unschedulable`` (its
cordon, or its uncordon); from then on every command fails as an unreachable host does
(AnsibleConnectionFailure: Ansible's own ``unreachable`` result), as a node that crashed or lost its
network after its drain (or after it was given back) would.

Rules come from the environment, NODEFIX_FLAKY: JSON ``{"<inventory host>": {"state": "<the double's
state file>", "node": "<Node name>", "after": "cordon" | "uncordon"}}``; a host without a rule is plain
local. Selected by ``ansible_connection: nodefix_flaky`` (tests/integration/test_13_unreachable_double.py),
found through ANSIBLE_CONNECTION_PLUGINS.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nodefix_flaky
short_description: Local connection that becomes unreachable after a node's cordon or uncordon (test double)
description:
  - The local connection, failing as an unreachable host once the kube-apiserver double logged the named PATCH.
author: nodefix.k8s contributors
options: {}
"""

import json
import os

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection.local import Connection as LocalConnection


class Connection(LocalConnection):
    transport = "nodefix_flaky"

    def _gone(self):
        rules = json.loads(os.environ.get("NODEFIX_FLAKY") or "{}")
        host = self._play_context.remote_addr or ""
        rule = rules.get(host)
        if not rule:
            return
        with open(rule["state"]) as fh:
            log = json.load(fh).get("log") or []
        want = rule["after"] == "cordon"
        if any(e.get("method") == "PATCH" and e.get("path") == "/api/v1/nodes/%s" % rule["node"]
               and (e.get("body") or {}).get("spec", {}).get("unschedulable") is want for e in log):
            raise AnsibleConnectionFailure("nodefix_flaky: %s is gone since its %s (a test double of a node that went "
                                           "down)" % (host, rule["after"]))

    def exec_command(self, cmd, in_data=None, sudoable=True):
        self._gone()
        return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)

    def put_file(self, in_path, out_path):
        self._gone()
        return super(Connection, self).put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._gone()
        return super(Connection, self).fetch_file(in_path, out_path)
