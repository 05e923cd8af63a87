# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test helper: every task result of a run, one JSON line each, as AWX keeps them as job events
(its callback receives the same ``result._result``, after Ansible's no_log censoring). Enabled by
tests/integration/test_41_secrets_lab.py (NODEFIX_JOB_EVENTS: the file to append to)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nodefix_job_events
type: notification
short_description: every task result as a JSON line (test helper)
description:
  - Appends each task result (ok, failed, skipped, unreachable, each loop item, each diff) to the file in
    E(NODEFIX_JOB_EVENTS), as AWX records job events.
requirements:
  - enabled in callbacks_enabled
"""

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "nodefix_job_events"
    CALLBACK_NEEDS_ENABLED = True

    def _event(self, kind, result):
        path = os.environ.get("NODEFIX_JOB_EVENTS")
        if not path:
            return
        with open(path, "a") as fh:
            fh.write(json.dumps({"event": kind, "host": result._host.get_name(), "task": result._task.get_name(),
                                 "result": result._result}, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._event("runner_on_ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._event("runner_on_failed", result)

    def v2_runner_on_skipped(self, result):
        self._event("runner_on_skipped", result)

    def v2_runner_on_unreachable(self, result):
        self._event("runner_on_unreachable", result)

    def v2_runner_item_on_ok(self, result):
        self._event("runner_item_on_ok", result)

    def v2_runner_item_on_failed(self, result):
        self._event("runner_item_on_failed", result)

    def v2_on_file_diff(self, result):
        self._event("on_file_diff", result)
