# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md stays true: its module_utils map is one row per package and names each module
of it, and the package rules it states hold (a detector never imports fixer code; every import names
the module that defines the name; the packages' __init__.py are empty)."""

import ast
import glob
import importlib
import os
import re
import sys

from ansible_collections.nodefix.k8s.tests.unit.module_utils_graph import MU, PKG, ROOT, closure, imports, modules, tree
# the modules that change a node, or decide a change (docs/architecture.md)
FIXERS = {"_containerd.edit", "_containerd.snapshot", "_gvisor.install", "_gvisor.runsc_toml", "_kubelet.plan",
          "_kubelet.flag_edit", "_kernel.boot", "_kernel.boot_bls", "_kernel.package", "_mount_units.cleanup",
          "_core.fileio", "_npd.install", "_audit.remediation"}


def defined(path):
    """Names a module defines at its top level (under if/try too: optional imports set flags there)."""
    names = set()

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            names.add(leaf.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))
    visit(tree(path).body)
    return names


def test_the_map_is_one_row_per_package_naming_its_modules():
    with open(os.path.join(ROOT, "docs", "architecture.md")) as fh:
        text = fh.read()
    rows = dict(re.findall(r"^\| `(_[a-z0-9_]+)/` \| (.*) \|$", text, re.M))
    packages = {}
    for name in modules():
        packages.setdefault(name.split(".")[0], set()).add(name.split(".")[1])
    assert set(rows) == set(packages), "map: %s; packages: %s" % (sorted(rows), sorted(packages))
    for package, names in packages.items():
        said = set(re.findall(r"(?:^|; )`([a-z_]+)`: ", rows[package]))
        assert said == names, "%s: the map names %s, the package has %s" % (package, sorted(said), sorted(names))
    # nothing flat is left beside the packages
    assert [p for p in glob.glob(os.path.join(MU, "*.py")) if os.path.basename(p) != "__init__.py"] == []


def test_no_detector_imports_fixer_code():
    every = modules()
    detectors = [m for m in every if m.endswith(".detect")]
    assert len(detectors) >= 9
    for det in detectors:
        reached = closure([det]) & FIXERS
        assert not reached, "%s reaches fixer code: %s" % (det, sorted(reached))
    # and what the node-problem-detector plugin runs (everything it can import by name)
    assert not closure(["_npd.plugin"] + detectors) & FIXERS
    assert FIXERS <= set(every), sorted(FIXERS - set(every))


def test_the_rule_would_see_a_detector_importing_a_fixer():
    """The closure follows both import forms, so the rule above can fail."""
    assert "_kubelet.flag_edit" in closure(["_kubelet.plan"])         # from PKG._kubelet import flag_edit
    assert "_kernel.boot_record" in closure(["_kernel.boot"])         # from PKG._kernel.boot_record import ...
    assert "_kernel.boot_bls" in closure(["_kernel.boot"])            # from PKG._kernel import boot_bls


def test_every_import_names_the_module_that_defines_the_name():
    every = modules()
    files = glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "benchmarks", "**", "*.py"), recursive=True)
    own = {}
    for name, path in every.items():
        t = tree(path)
        imported = set()
        for node in t.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imported.update(a.asname or a.name for a in node.names)
        own[name] = defined(path) - imported
    bad = []
    for path in files:
        for module, name in imports(path):
            assert module in every, "%s imports %s, which does not exist" % (os.path.relpath(path, ROOT), module)
            if name is not None and name not in own[module]:
                bad.append("%s: %s from %s, which does not define it" % (os.path.relpath(path, ROOT), name, module))
    assert bad == []


def test_package_markers_are_empty():
    for path in glob.glob(os.path.join(MU, "*", "__init__.py")):
        assert os.path.getsize(path) == 0, path


def test_named_readers_exist():
    """The functions the page names as the one reader of a fact exist where it says."""
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    for where in ("_containerd.config.read_runtimes", "_containerd.node.runc_state", "_containerd.detect.runc_findings",
                  "_kubelet.node.effective", "_kubelet.node.cgroup_driver", "_core.options.validate",
                  "_core.options.module_spec", "_core.findings.at_or_above", "_core.errors.NodefixError",
                  "_core.errors.CommandError"):
        module, name = where.rsplit(".", 1)
        assert callable(getattr(importlib.import_module("%s.%s" % (PKG, module)), name)), where


def test_one_error_root():
    """Every exception class the collection defines derives from NodefixError (issue: one error root)."""
    classes = {}
    for path in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                classes[node.name] = (bases, os.path.relpath(path, ROOT))

    def derives(name, seen=()):
        if name == "NodefixError":
            return True
        bases = classes.get(name, ([], None))[0]
        return any(b not in seen and derives(b, seen + (name,)) for b in bases)

    errors = [n for n, (bases, _p) in classes.items()
              if n.endswith(("Error", "Exception")) or any(b.endswith(("Error", "Exception")) for b in bases)]
    assert len(errors) >= 15
    stray = sorted("%s (%s)" % (n, classes[n][1]) for n in errors if not derives(n))
    assert not stray, "exceptions outside the NodefixError root: %s" % stray
