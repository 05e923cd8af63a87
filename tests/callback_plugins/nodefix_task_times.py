# SPDX-License-Identifier: GPL-3.0-or-later
"""Test-suite callback (not shipped with the collection): the wall time of
every task, written as JSON lines to the file NODEFIX_TASK_TIMES names, so
the test command can say which tasks the time of a lab run or a molecule
scenario went to (tests/nodefix_layer_times.py prints the slowest).

Enabled by tests/integration/conftest.py for every Ansible run of the
integration layers; it prints nothing, so no run's output changes."""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: nodefix_task_times
type: aggregate
short_description: the wall time of each task, to a JSON-lines file
description:
  - Writes one line per task to the file in the environment variable E(NODEFIX_TASK_TIMES).
requirements:
  - enable in configuration
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nodefix_task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("NODEFIX_TASK_TIMES")
        self._task = None
        self._play = ""

    def _close(self):
        if self._task and self._path:
            name, started, hosts = self._task
            entry = {"play": self._play, "task": name, "seconds": round(time.time() - started, 2),
                     "hosts": hosts}
            with open(self._path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")
        self._task = None

    def v2_playbook_on_play_start(self, play):
        self._close()
        self._play = play.get_name()

    def _start(self, task):
        self._close()
        self._task = (task.get_name(), time.time(), {})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def _host(self, result):
        """When each host finished the task, in seconds from its start."""
        if self._task:
            self._task[2][result._host.get_name()] = round(time.time() - self._task[1], 2)

    def v2_runner_on_ok(self, result):
        self._host(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._host(result)

    def v2_runner_on_unreachable(self, result):
        self._host(result)

    def v2_runner_on_skipped(self, result):
        self._host(result)

    def v2_playbook_on_stats(self, stats):
        self._close()
