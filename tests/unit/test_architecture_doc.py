# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/architecture.md stays true: its module_utils map names exactly the files that exist."""

import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_module_utils_map_matches_the_files():
    with open(os.path.join(ROOT, "docs", "architecture.md")) as fh:
        text = fh.read()
    mapped = set(re.findall(r"^\| `(_[a-z_]+\.py)` \|", text, re.M))
    present = set(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "plugins", "module_utils", "_*.py")))
    assert mapped == present, "missing from the map: %s; gone: %s" % (sorted(present - mapped), sorted(mapped - present))


def test_named_readers_exist():
    """The functions the page names as the one reader of a fact exist where it says."""
    from ansible_collections.nodefix.k8s.plugins.module_utils import _common, _containerd, _errors, _kubelet_node, _options
    for mod, name in ((_containerd, "read_runtimes"), (_containerd, "runc_state"), (_containerd, "runc_findings"),
                      (_kubelet_node, "effective"), (_kubelet_node, "cgroup_driver"), (_options, "validate"),
                      (_options, "module_spec"), (_common, "at_or_above"), (_errors, "NodefixError"),
                      (_errors, "CommandError")):
        assert callable(getattr(mod, name)), "%s.%s" % (mod.__name__, name)


def test_one_error_root():
    """Every exception class the collection defines derives from NodefixError (issue: one error root)."""
    import ast
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
