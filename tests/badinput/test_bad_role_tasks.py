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


def pod_listings():
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
                info = node.get("kubernetes.core.k8s_info")
                if isinstance(info, dict) and info.get("kind") == "Pod":
                    out.append((os.path.relpath(path, ROOT), node))
                stack.extend(v for k, v in node.items() if k in ("block", "rescue", "always", "tasks"))
    return out


POD_LISTINGS = pod_listings()


def test_the_scan_finds_the_pod_listings():
    assert len(POD_LISTINGS) >= 2


@pytest.mark.parametrize("rel,task", POD_LISTINGS, ids=["%s:%s" % (r, t.get("name")) for r, t in POD_LISTINGS])
def test_pod_listings_are_not_logged(rel, task):
    """Pod specs carry environment values; AWX keeps every task result in its job events."""
    assert task.get("no_log") is True, "%s: %r registers full pods without no_log" % (rel, task.get("name"))
