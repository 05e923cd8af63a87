#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write docs/findings.md from the finding registries in plugins/module_utils.

The registries (FINDINGS in each detector's module_utils file) are the source
of truth; tests/unit/test_findings_doc.py fails when the document is stale.
Usage: python scripts/gen_findings_doc.py [--check]
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema

HEADER = """# Finding ids

Every finding the collection reports, generated from the registries in
`plugins/module_utils/_*.py` by `scripts/gen_findings_doc.py` (a unit test
fails when this file is stale). Ids are stable: automation may match on them.

Each finding carries `id`, `severity`, `title`, `subject` (what it is about,
when one id can be reported several times), `evidence` (the values that prove
it), `remedy` and `fix` (the role and tag of this collection that fix it;
`manual` when only people can). `nodefix.k8s.node_audit` returns them all in
one module call; `nodefix.k8s.remediate` runs the fixing roles of what it found.
"""


def render():
    registries = [("audit", audit_checks.FINDINGS)] + [(name, getattr(mod, "FINDINGS", {})) for name, mod in audit_checks.DETECTORS]
    out = [HEADER]
    seen = set()
    for check, registry in registries:
        ids = [fid for fid in sorted(registry) if fid not in seen]
        if not ids:
            continue
        out.append("## Detector `%s`\n" % check)
        out.append("| id | severity | fixed by | title | remedy |")
        out.append("|---|---|---|---|---|")
        for fid in ids:
            seen.add(fid)
            e = registry[fid]
            fix = e.get("role") or "manual"
            if e.get("tag"):
                fix += " (tag `%s`)" % e["tag"]
            cells = [("`%s`" % fid), e["severity"], fix, e["title"], e.get("remedy") or ""]
            out.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        out.append("")
    out.append(render_floor())
    return "\n".join(out)


FLOOR_HEADER = """## The kubelet rate-limit floor

The floor the `nodefix.k8s.kubelet` role writes (`kubelet_config` option
`profile`) and below which the kubelet detector reports a limit, set in one
place: `RATE_LIMIT_FLOOR` in `plugins/module_utils/_kubelet/schema.py`. A kubelet
version default that is higher wins (kubelet 1.27 raised the API and event
defaults, kubernetes PR #116121); a higher value in effect is never lowered.
"""


def render_floor():
    """The floor table, from the one place that sets it."""
    out = [FLOOR_HEADER, "| field | floor | default before 1.27 | default since 1.27 |", "|---|---|---|---|"]
    old, new = kubelet_schema.version_defaults((1, 26)), kubelet_schema.version_defaults((1, 27))
    for field, floor in kubelet_schema.RATE_LIMIT_FLOOR.items():
        out.append("| `%s` | %d | %d | %d |" % (field, floor, old[field], new[field]))
    out.append("")
    return "\n".join(out)


def main():
    path = os.path.join(ROOT, "docs", "findings.md")
    text = render()
    if "--check" in sys.argv:
        with open(path) as fh:
            sys.exit(0 if fh.read() == text else 1)
    with open(path, "w") as fh:
        fh.write(text)
    print("wrote %s" % path)


if __name__ == "__main__":
    main()
