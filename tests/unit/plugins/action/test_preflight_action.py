# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/action/preflight.py run in process: each user's mistake of tests/integration/test_09_preflight.py
refused through the action plugin itself (its ``run``, the spec file the playbooks load, _preflight.variables),
with the words the run's error carries. The playbook runs of test_09 keep one end-to-end refusal per playbook
(the report marked failed, no task on a node); the per-value variants are proven here, without a playbook run
each (issue 56: the same behaviours, fewer runs)."""

from unittest import mock

import pytest

from ansible_collections.nodefix.k8s.plugins.action import preflight

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


def run_preflight(playbook, host_vars):
    """The action plugin's run() as the playbooks call it (nodefix.k8s.preflight: playbook, hosts), with the
    hosts' variables as Ansible's hostvars gives them."""
    task = mock.MagicMock()
    task.args = {"playbook": playbook, "hosts": sorted(host_vars)}
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = preflight.ActionModule(task, connection, mock.MagicMock(), loader=None, templar=None,
                                    shared_loader_obj=None)
    return action.run(task_vars={"hostvars": host_vars})


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
