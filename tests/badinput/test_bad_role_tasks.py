# SPDX-License-Identifier: GPL-3.0-or-later
"""Every file a role writes with copy/template (or the collection's own writer npd_files) is written through a symlink, never over it.

A node file that is a symlink (config management often links /etc/containerd/config.toml or a
kubelet flags file into a managed tree) must keep its link: ``follow: true`` makes copy/template
write the link's target, as the collection's own modules do (module_utils/_core/fileio.py).
"""

import glob
import importlib
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRITERS = ("ansible.builtin.copy", "ansible.builtin.template")
# the collection's own writers of role files: they always write through a symlink (no option turns it off;
# tests/unit/plugins/module_utils/test_npd_install.py holds it), so a task of theirs needs no follow: true
OWN_WRITERS = ("nodefix.k8s.npd_files",)


def tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        if any(k in node for k in WRITERS + OWN_WRITERS):
            yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            if key in node:
                yield from tasks(node[key])


FILES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")) +
               glob.glob(os.path.join(ROOT, "roles", "*", "handlers", "*.yml")) +
               glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))


def writer_tasks():
    out = []
    for path in FILES:
        with open(path) as fh:
            for task in tasks(yaml.safe_load(fh)):
                out.append((os.path.relpath(path, ROOT), task))
    return out


WRITER_TASKS = writer_tasks()


def test_the_scan_finds_the_writers():
    # (11 at 2a87c29: mount_units' five package markers became one touch, npd's writes one npd_files task)
    assert len(WRITER_TASKS) >= 11
    assert any(k in task for _rel, task in WRITER_TASKS for k in OWN_WRITERS)


@pytest.mark.parametrize("rel,task", WRITER_TASKS, ids=["%s:%s" % (r, t.get("name")) for r, t in WRITER_TASKS])
def test_copy_and_template_follow_symlinks(rel, task):
    module = [k for k in WRITERS + OWN_WRITERS if k in task][0]
    if module in OWN_WRITERS:
        # its documentation says so, and it has no option that would write over the link
        doc = yaml.safe_load(importlib.import_module(
            "ansible_collections.nodefix.k8s.plugins.modules." + module.split(".")[-1]).DOCUMENTATION)
        said = doc["options"]["files"]["suboptions"]["path"]["description"]
        assert "a symlink is followed" in (" ".join(said) if isinstance(said, list) else said)
        assert "follow" not in doc["options"] and "follow" not in doc["options"]["files"]["suboptions"]
        return
    assert task[module].get("follow") is True, "%s: task %r writes without follow: true" % (rel, task.get("name"))


def module_calls():
    """(rel, module) of every task of the role files: every module key a task names (blocks walked)."""
    out = []
    for path in FILES:
        with open(path) as fh:
            doc = yaml.safe_load(fh)
        stack = [doc]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, dict):
                out.extend((os.path.relpath(path, ROOT), str(k)) for k in node if "." in str(k))
                stack.extend(v for k, v in node.items() if k in ("block", "rescue", "always", "tasks"))
    return out


def test_pods_are_listed_only_by_a_module_that_keeps_no_pod_spec():
    """Pod specs carry environment values and secrets' names; AWX keeps every task result in its job events. Until
    issue 61 item 3 the gVisor role listed pods with kubernetes.core.k8s_info under no_log; now the only pod listing
    of the roles is nodefix.k8s.pod_recreate's, whose result holds names, UIDs and results only
    (tests/unit/plugins/modules/test_pod_recreate.py checks that no spec or env value reaches it)."""
    calls = module_calls()
    assert len(calls) > 100, len(calls)     # the scan reads the roles' tasks
    assert not [c for c in calls if c[1].startswith("kubernetes.core.")], calls
    assert ("roles/gvisor/tasks/evict.yml", "nodefix.k8s.pod_recreate") in calls
