# SPDX-License-Identifier: GPL-3.0-or-later
"""The import graph of plugins/module_utils, read from the source (ast): one reader for the tests that
hold meta/node_files.yml (test_node_files.py) and the package rules of docs/architecture.md
(test_architecture_doc.py) to the code. Modules are named ``_package.module``."""

import ast
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MU = os.path.join(ROOT, "plugins", "module_utils")
PKG = "ansible_collections.nodefix.k8s.plugins.module_utils"


def modules():
    """{"_pkg.module": path} of every module in module_utils (a sub-package's: "_pkg.sub.module")."""
    out = {}
    for path in glob.glob(os.path.join(MU, "*", "*.py")) + glob.glob(os.path.join(MU, "*", "*", "*.py")):
        parts = os.path.relpath(path, MU).split(os.sep)
        if parts[-1] != "__init__.py":
            out[".".join(parts[:-1] + [parts[-1][:-3]])] = path
    return out


def _package(sub):
    """Whether ``_pkg.sub`` names a sub-package (then ``from PKG._pkg.sub import m`` imports the module m)."""
    return os.path.isdir(os.path.join(MU, *sub.split(".")))


def tree(path):
    with open(path, encoding="utf-8") as fh:
        return ast.parse(fh.read())


def imports(path):
    """[(module, name)] of the collection's module_utils the file ``path`` imports, at any depth of its code
    (lazy imports count); ``name`` is None where a whole module is imported (``from PKG._pkg import module``)."""
    out = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PKG + "."):
            sub = node.module[len(PKG) + 1:]
            for a in node.names:
                out.append((sub, a.name) if "." in sub and not _package(sub) else ("%s.%s" % (sub, a.name), None))
        elif isinstance(node, ast.ImportFrom) and node.module == PKG:
            out.extend((a.name, None) for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend((a.name[len(PKG) + 1:], None) for a in node.names if a.name.startswith(PKG + "."))
    return out


def module_deps(module):
    """The module_utils modules ``module`` imports."""
    return set(dep for dep, _name in imports(modules()[module]))


def closure(start):
    """``start`` and every module_utils module it reaches through its imports."""
    every = modules()
    seen, todo = set(start), list(start)
    while todo:
        for dep, _name in imports(every[todo.pop()]):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def package_files(names):
    """The files of ``names`` as a shipper lists them: each module and its package's ``__init__.py``."""
    files = set()
    for name in names:
        parts = name.split(".")
        files.update("%s/__init__.py" % "/".join(parts[:i]) for i in range(1, len(parts)))
        files.add("%s.py" % "/".join(parts))
    return sorted(files)
