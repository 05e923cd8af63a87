# SPDX-License-Identifier: GPL-3.0-or-later
"""Test-suite callback (not shipped with the collection): looks up, in the
ansible-playbook process itself, the plugins each task's worker would look up,
so that the forked workers inherit the plugin loaders' caches.

ansible-core forks one worker per task and host; a cache a worker fills dies
with it. Measured on ansible-core 2.19 (docs/test-times.md): every worker
looked up the task's module and action plugin (a walk of every plugin
directory, ~20 ms) and each Jinja filter and test its templates use (~17 ms),
of ~140 ms of CPU a worker spends. Looked up once here, before the first
worker of the task is forked (callbacks run in the main process, and
``v2_playbook_on_task_start`` is sent before the task is queued), the workers
find them in the caches they inherit.

It changes no result: it only calls the loaders' own lookups, and a lookup that
fails is left to the worker, which fails or succeeds as it would have. It
prints nothing. Enabled by tests/integration/conftest.py beside
nodefix_task_times for every Ansible run of the integration layers."""

from __future__ import annotations

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: nodefix_warm_loaders
type: aggregate
short_description: look up each task's plugins before its workers fork
description:
  - Resolves the Jinja filters and tests once a playbook starts and each task's module and action plugin when
    the task starts, in the controller's main process, so that the forked workers inherit the loaders' caches.
requirements:
  - enable in configuration
"""

# the connection plugins the test runs use (the lab's containers, the VM nodes, the controller)
CONNECTIONS = ("local", "ssh", "nodefix_podman")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nodefix_warm_loaders"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._seen = set()

    def v2_playbook_on_start(self, playbook):
        # pylint: disable-next=import-outside-toplevel
        from ansible.plugins.loader import connection_loader, filter_loader, test_loader
        for loader in (filter_loader, test_loader):
            try:
                for _plugin in loader.all():
                    pass
            except Exception:  # pylint: disable=broad-exception-caught  # the worker looks it up as before
                pass
        for name in CONNECTIONS:
            try:
                connection_loader.find_plugin_with_context(name)
            except Exception:  # pylint: disable=broad-exception-caught
                pass

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._warm(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._warm(task)

    def _warm(self, task):
        # pylint: disable-next=import-outside-toplevel
        from ansible.plugins.loader import action_loader, module_loader
        key = (task.action, tuple(task.collections or ()))
        if key in self._seen:
            return
        self._seen.add(key)
        try:
            module_loader.find_plugin_with_context(task.action, collection_list=task.collections)
            action_loader.has_plugin(task.action, collection_list=task.collections)
        except Exception:  # pylint: disable=broad-exception-caught  # the worker looks it up as before
            pass
