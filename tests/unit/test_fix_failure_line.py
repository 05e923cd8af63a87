# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Review R7: playbooks/tasks/fix.yml's rescue line "Say which task failed the fixes" printed
ansible_failed_result.msg - Ansible hands the rescue the UNCENSORED result of a no_log task - at default verbosity.
A no_log task's message is hidden. The task's templates rendered with Jinja2 and Ansible's own ``bool`` filter (the
collection's redact filter stood in by the identity: what is tested is what reaches it)."""

import os

import jinja2
import pytest
import yaml

from ansible.plugins.filter.core import to_bool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "playbooks", "tasks", "fix.yml")


def _line(task, result):
    with open(FIX) as handle:
        rescue = yaml.safe_load(handle)[0]["rescue"][0]
    env = jinja2.Environment()
    env.filters["bool"] = to_bool
    env.filters["nodefix.k8s.redact"] = lambda text: text
    given = {"ansible_failed_task": task, "ansible_failed_result": result}
    for name in ("_hidden", "_said"):       # the task's vars, in the order they read each other
        if name in (rescue.get("vars") or {}):
            given[name] = env.from_string(rescue["vars"][name]).render(**given).strip()
    return env.from_string(rescue["ansible.builtin.debug"]["msg"]).render(**given)


SECRET = {"failed": True, "msg": "login failed for token=abc123"}


@pytest.mark.parametrize("task, result", [
    ({"name": "Log in", "no_log": True}, SECRET),
    ({"name": "Log in", "no_log": "{{ hide }}"}, SECRET),                 # an expression the rescue cannot judge
    ({"name": "Log in", "no_log": None}, dict(SECRET, _ansible_no_log=True)),
])
def test_a_no_log_tasks_message_is_hidden(task, result):
    assert _line(task, result) == "Log in: (hidden: no_log)"


@pytest.mark.parametrize("no_log", [None, False, "false"])
def test_any_other_tasks_message_is_said(no_log):
    assert _line({"name": "Restart containerd", "no_log": no_log}, {"failed": True, "msg": "unit failed"}) \
        == "Restart containerd: unit failed"
