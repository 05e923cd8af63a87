#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the Sphinx inventory the docsite build resolves Ansible's own labels with.

The pages antsibull-docs generates link to labels of the Ansible docsite (the
common return values, the configuration settings, the pages of the modules of
other collections this collection's docs name). Sphinx's intersphinx fetches the
docsite's objects.inv for that; this machine's CI has no route to
docs.ansible.com, so the build uses this inventory of exactly those labels,
pointing at their real addresses, in Sphinx's inventory format (version 2).
The modules and plugins of other collections are found in the docs themselves
(module_references: M(ns.coll.name), P(ns.coll.name#type) and seealso's
``module: ns.coll.name`` in the plugins and the roles' argument specs), so a
reference a new doc adds resolves without an edit here.

Usage: docsite_inventory.py OUTPUT
"""

import glob
import os
import re
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWN = ("nodefix", "k8s")
_NAME = r"([a-z0-9_]+)\.([a-z0-9_]+)\.([a-z0-9_]+)"
_REFERENCES = (
    (re.compile(r"\bM\(%s\)" % _NAME), None),
    (re.compile(r"\bP\(%s#([a-z_]+)\)" % _NAME), 3),
    (re.compile(r"^[ \t]*-?[ \t]*module:[ \t]*%s[ \t]*$" % _NAME, re.M), None),
)

# label -> (path under https://docs.ansible.com/projects/ansible/devel/, title)
LABELS = {
    "common_return_values": ("reference_appendices/common_return_values.html", "Return Values"),
    "ansible_configuration_settings": ("reference_appendices/config.html", "Ansible Configuration Settings"),
    "ansible_collections.ansible.posix.sysctl_module": (
        "collections/ansible/posix/sysctl_module.html", "ansible.posix.sysctl module"),
    "ansible_collections.kubernetes.core.k8s_module": (
        "collections/kubernetes/core/k8s_module.html", "kubernetes.core.k8s module"),
    "ansible_collections.kubernetes.core.k8s_drain_module": (
        "collections/kubernetes/core/k8s_drain_module.html", "kubernetes.core.k8s_drain module"),
    "ansible_collections.kubernetes.core.k8s_info_module": (
        "collections/kubernetes/core/k8s_info_module.html", "kubernetes.core.k8s_info module"),
    # a module with an action plugin: antsibull-docs links its note to the guide's action plugins section
    "action_plugins": ("plugins/action.html", "Action plugins"),
}
# the configuration settings' environment variables the inventory_cache fragment names (nodefix.k8s.triage)
ENVVARS = ("ANSIBLE_CACHE_PLUGIN", "ANSIBLE_CACHE_PLUGIN_CONNECTION", "ANSIBLE_CACHE_PLUGIN_PREFIX",
           "ANSIBLE_CACHE_PLUGIN_TIMEOUT")


def module_references(root=ROOT):
    """{(namespace, collection, name, plugin type)} of every module or plugin of another collection that the
    collection's docs name (its plugins' DOCUMENTATION, EXAMPLES and RETURN, its roles' argument specs)."""
    files = sorted(glob.glob(os.path.join(root, "plugins", "*", "*.py")) +
                   glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml")))
    found = set()
    for path in files:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for pattern, type_group in _REFERENCES:
            for match in pattern.finditer(text):
                namespace, collection, name = match.group(1, 2, 3)
                if (namespace, collection) != OWN:
                    found.add((namespace, collection, name, match.group(type_group + 1) if type_group else "module"))
    return found


def labels(root=ROOT):
    """LABELS and the label of each module or plugin of another collection the docs name."""
    out = dict(LABELS)
    for namespace, collection, name, kind in module_references(root):
        out["ansible_collections.%s.%s.%s_%s" % (namespace, collection, name, kind)] = (
            "collections/%s/%s/%s_%s.html" % (namespace, collection, name, kind),
            "%s.%s.%s %s" % (namespace, collection, name, kind))
    return out


def inventory():
    header = (
        "# Sphinx inventory version 2\n"
        "# Project: Ansible\n"
        "# Version: devel\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    lines = []
    for label, (path, title) in sorted(labels().items()):
        anchor = label.replace("_", "-").replace(".", "-")
        lines.append("%s std:label -1 %s#%s %s\n" % (label, path, anchor, title))
    for name in ENVVARS:
        lines.append("%s std:envvar -1 reference_appendices/config.html#envvar-%s %s\n" % (name, name, name))
    return header.encode() + zlib.compress("".join(lines).encode())


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: docsite_inventory.py OUTPUT\n")
        return 2
    with open(argv[1], "wb") as fh:
        fh.write(inventory())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
