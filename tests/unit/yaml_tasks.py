# SPDX-License-Identifier: GPL-3.0-or-later
"""The tasks of a loaded playbook or task file, blocks and plays walked (the unit tests that read the YAML the
collection ships: the roles' requests, AWX's configuration)."""


def tasks(node):
    """Every mapping of ``node`` (a play list, a task list) and of its ``tasks``, ``block``, ``rescue`` and
    ``always``, in order."""
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("tasks", "block", "rescue", "always"):
            yield from tasks(node.get(key))
