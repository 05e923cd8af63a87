# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/findings.md documents every finding id of every registry, current."""

import os
import re
import subprocess
import sys

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_doc_is_current():
    rc = subprocess.call([sys.executable, os.path.join(ROOT, "scripts", "gen_findings_doc.py"), "--check"])
    assert rc == 0, "docs/findings.md is stale: run python scripts/gen_findings_doc.py"


def test_registry_entries_are_complete():
    ids_re = re.compile(r"^[a-z][a-z0-9_]*\.[a-z0-9_]+$")
    for fid, entry in audit_checks.registries().items():
        assert ids_re.match(fid), fid
        assert entry["severity"] in SEVERITIES, fid
        assert entry["title"] and entry.get("remedy"), fid
        role = entry.get("role")
        if role:
            name = role.split(".")[-1]
            assert os.path.isdir(os.path.join(ROOT, "roles", name)), "%s names a missing role %s" % (fid, role)
