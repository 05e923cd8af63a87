# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/docsite_inventory.py: the docsite build (scripts/docsite.sh, run by test_22_publish with warnings as
errors) resolves every module or plugin of another collection the docs name through this inventory. A doc that
named one it did not list (npd_files' M(ansible.builtin.copy) and seealso) failed that build, in the long layer
only; the labels now come from the docs themselves."""

import os
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import docsite_inventory  # noqa: E402  pylint: disable=wrong-import-position


def inventory_lines():
    raw = docsite_inventory.inventory()
    body = raw.split(b"compressed using zlib.\n", 1)[1]
    return zlib.decompress(body).decode().splitlines()


def test_every_module_of_another_collection_the_docs_name_has_a_label():
    refs = docsite_inventory.module_references()
    assert ("ansible", "builtin", "copy", "module") in refs         # npd_files: M() and seealso
    assert ("ansible", "builtin", "template", "module") in refs     # npd_files: seealso
    assert ("ansible", "posix", "sysctl", "module") in refs         # roles/pids' argument spec
    assert not [r for r in refs if r[:2] == ("nodefix", "k8s")]
    labels = {line.split(" ", 1)[0] for line in inventory_lines()}
    for namespace, collection, name, kind in refs:
        assert "ansible_collections.%s.%s.%s_%s" % (namespace, collection, name, kind) in labels


def test_a_reference_a_new_doc_adds_gets_its_label_and_address(tmp_path):
    module = tmp_path / "plugins" / "modules" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text('DOCUMENTATION = r"""\ndescription:\n  - Like M(community.general.ini_file) or '
                      'P(community.general.merge_variables#lookup), not M(nodefix.k8s.npd_files).\nseealso:\n'
                      '  - module: community.crypto.x509_certificate\n"""\n')
    refs = docsite_inventory.module_references(str(tmp_path))
    assert refs == {("community", "general", "ini_file", "module"), ("community", "general", "merge_variables", "lookup"),
                    ("community", "crypto", "x509_certificate", "module")}
    labels = docsite_inventory.labels(str(tmp_path))
    assert labels["ansible_collections.community.general.merge_variables_lookup"][0] == \
        "collections/community/general/merge_variables_lookup.html"
