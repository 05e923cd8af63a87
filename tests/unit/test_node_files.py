# SPDX-License-Identifier: GPL-3.0-or-later
"""meta/node_files.yml: the module_utils files each node-side entry point needs,
held to the entry point's imports (closure), and read by every shipper."""

import os

import yaml

from ansible_collections.nodefix.k8s.tests.unit.module_utils_graph import closure as graph_closure, module_deps, package_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def manifest():
    with open(os.path.join(ROOT, "meta", "node_files.yml")) as fh:
        return yaml.safe_load(fh)


def closure(entry, by_name=()):
    """The files ``entry`` needs: its imports, and (``by_name``) the modules it imports by name
    (importlib: the npd plugin loads a condition's detectors only when the condition runs), with
    the ``__init__.py`` of each package they are in."""
    return package_files(graph_closure([entry] + list(by_name)))


def test_each_list_is_the_closure_of_its_entry_point():
    for name, spec in manifest().items():
        want = closure(spec["entry"], spec.get("by_name", ()))
        assert spec["module_utils"] == want, (
            "meta/node_files.yml %s: the files %s imports are %s" % (name, spec["entry"], want))


def test_the_modules_the_plugin_imports_by_name_are_listed():
    import sys  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
    assert sorted(manifest()["npd_plugin"]["by_name"]) == sorted(npd_plugin.DETECTOR_MODULES.values())


def test_the_reader_sees_both_import_forms():
    # `from <pkg>._x.y import name` and `from <pkg>._x import y` (both in _mount_units/cleanup.py)
    assert {"_core.runner", "_mount_units.systemd", "_mount_units.survey"} <= module_deps("_mount_units.cleanup")


def test_every_shipper_reads_the_manifest_and_keeps_no_list_of_its_own():
    shippers = {
        "roles/npd/tasks/install.yml": "npd_plugin",
        "roles/mount_units/tasks/schedule.yml": "mount_units_cli",
        "benchmarks/mount_units/run.py": "mount_units_cli",
    }
    for rel, key in shippers.items():
        with open(os.path.join(ROOT, rel)) as fh:
            text = fh.read()
        assert "node_files.yml" in text and key in text, rel
        # no hand-kept file name of module_utils left in the shipper
        for name in manifest()[key]["module_utils"]:
            assert "'%s'" % name not in text and '"%s"' % name not in text and " %s," % name not in text, (rel, name)
