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
    from ansible_collections.nodefix.k8s.plugins.module_utils import _common, _containerd, _kubelet_node, _options
    for mod, name in ((_containerd, "read_runtimes"), (_containerd, "runc_state"), (_containerd, "runc_findings"),
                      (_kubelet_node, "effective"), (_kubelet_node, "cgroup_driver"), (_options, "validate"),
                      (_options, "module_spec"), (_common, "at_or_above"), (_common, "NodefixError"),
                      (_common, "CommandError")):
        assert callable(getattr(mod, name)), "%s.%s" % (mod.__name__, name)
