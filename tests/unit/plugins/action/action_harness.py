# SPDX-License-Identifier: GPL-3.0-or-later
"""An action plugin of the collection built as Ansible builds it for one task: a fake task (its args, check mode)
and connection, for its ``run()`` in process."""

from unittest import mock


def action_of(plugin, args, check_mode=False, load_name=None):
    """``plugin.ActionModule`` for a task with ``args``."""
    task = mock.MagicMock()
    task.args = dict(args)
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = plugin.ActionModule(task, connection, mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    if load_name:
        action._load_name = load_name
    return action
