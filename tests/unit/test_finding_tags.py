# SPDX-License-Identifier: GPL-3.0-or-later
"""Every tag a report names runs that fix.

A finding's ``fix`` names the role that fixes it and the tag that selects the fix
(``ansible-playbook nodefix.k8s.remediate --tags <tag>``; the reports print it). A tag only selects
tasks it reaches: ``remediate.yml`` includes each role with ``include_role`` (in ``tasks/fix.yml``, which it imports
statically: its tasks keep their own tags), a task that runs only when
one of ITS OWN tags is selected, so each include must carry every tag its role's findings name, and the
role must have a task (not only ``always`` ones) under that tag. ``--tags zombies`` ran nothing before
this was held here.
"""

import glob
import os

import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _tags(task):
    tags = task.get("tags") or []
    return {tags} if isinstance(tags, str) else set(tags)


def include_tags():
    """{role: set of the tags on remediate.yml's include_role tasks of it (``always`` left out): the rolling play's
    and those of the task files it imports statically (an ``include_tasks`` would need the tags itself)."""
    with open(os.path.join(ROOT, "playbooks", "remediate.yml")) as fh:
        plays = yaml.safe_load(fh)
    tasks = []
    for play in plays:
        for task in _tasks(play.get("tasks")):
            tasks.append(task)
            imported = task.get("ansible.builtin.import_tasks")
            if isinstance(imported, str) and not task.get("tags"):
                with open(os.path.join(ROOT, "playbooks", imported)) as fh:
                    tasks.extend(_tasks(yaml.safe_load(fh)))
    out = {}
    for task in tasks:
        inc = task.get("ansible.builtin.include_role")
        if isinstance(inc, dict):
            out.setdefault(inc["name"], set()).update(_tags(task) - {"always"})
    return out


def role_tags(role):
    """Every tag on a task of the role's task files (``always`` left out)."""
    name = role.split(".")[-1]
    found = set()
    for path in glob.glob(os.path.join(ROOT, "roles", name, "tasks", "*.yml")):
        with open(path) as fh:
            for task in _tasks(yaml.safe_load(fh)):
                found |= _tags(task)
                apply = (task.get("ansible.builtin.include_tasks") or {})
                if isinstance(apply, dict):
                    found |= set((apply.get("apply") or {}).get("tags") or [])
    return found - {"always"}


def named():
    """{(role, tag): [finding ids]} for every finding whose fix names a tag."""
    out = {}
    for fid, entry in sorted(checks.registries().items()):
        if entry.get("tag"):
            out.setdefault((entry["role"], entry["tag"]), []).append(fid)
    return out


def test_every_named_tag_is_in_its_role():
    missing = ["%s: %s has no task tagged %s" % (ids, role, tag) for (role, tag), ids in named().items()
               if tag not in role_tags(role)]
    assert missing == []


def test_remediate_reaches_every_named_tag():
    includes = include_tags()
    missing = ["%s: remediate's include of %s is not tagged %s" % (ids, role, tag) for (role, tag), ids in named().items()
               if tag not in includes.get(role, set())]
    assert missing == []


def test_a_finding_without_a_role_names_no_tag():
    assert [fid for fid, e in checks.registries().items() if e.get("tag") and not e.get("role")] == []
