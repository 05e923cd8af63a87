# SPDX-License-Identifier: GPL-3.0-or-later
"""The docsite's Playbooks page (docs/docsite/rst/playbooks.rst) against the playbooks.

Every variable a user can set on the playbooks (read with a default) is on the page,
and every variable the page names is read by a playbook: the page is the contract.
"""

import glob
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "docsite", "rst", "playbooks.rst")
# Set by the playbooks themselves for the report play they import; not for users.
INTERNAL = {"nodefix_report_kind", "nodefix_report_fail_on", "nodefix_report_merge"}


def playbook_text():
    """The playbooks, their task files and their vars files (the rollout's options: vars/rollout.yml), not the spec."""
    files = sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) +
                   glob.glob(os.path.join(ROOT, "playbooks", "tasks", "*.yml")) +
                   [f for f in glob.glob(os.path.join(ROOT, "playbooks", "vars", "*.yml"))
                    if os.path.basename(f) != "arguments.yml"])
    return "\n".join(open(f, encoding="utf-8").read() for f in files)


def user_variables(text):
    return set(re.findall(r"\b(nodefix_[a-z_]+)\s*\|\s*(?:d|default)\(", text)) - INTERNAL


def page_variables():
    with open(PAGE, encoding="utf-8") as fh:
        rows = re.findall(r"^   \* - (.*)$", fh.read(), re.M)
    return {v for row in rows for v in re.findall(r"``(nodefix_[a-z_]+)``", row)}


def test_every_user_variable_is_on_the_page():
    missing = user_variables(playbook_text()) - page_variables()
    assert not missing, "read by the playbooks with a default, not on playbooks.rst: %s" % sorted(missing)


def test_every_variable_on_the_page_is_read_by_a_playbook():
    text = playbook_text()
    stale = {v for v in page_variables() if not re.search(r"\b%s\b" % v, text)}
    assert not stale, "on playbooks.rst, read by no playbook: %s" % sorted(stale)


def test_the_scan_sees_a_planted_variable():
    # the check above would pass on an empty scan: prove it finds a default()-read variable
    assert user_variables("x: '{{ nodefix_planted_knob | default(3) }}'") == {"nodefix_planted_knob"}
    assert "nodefix_serial" in page_variables()


def spec_variables():
    with open(os.path.join(ROOT, "playbooks", "vars", "arguments.yml"), encoding="utf-8") as fh:
        return set(yaml.safe_load(fh)["arguments"])


def test_the_page_is_written_from_the_preflight_spec():
    rc = subprocess.call([sys.executable, os.path.join(ROOT, "scripts", "gen_playbooks_doc.py"), "--check"])
    assert rc == 0, "docs/docsite/rst/playbooks.rst is stale: run python scripts/gen_playbooks_doc.py"
    assert page_variables() == spec_variables()


def test_the_preflight_spec_is_every_variable_the_playbooks_read():
    missing = user_variables(playbook_text()) - spec_variables()
    assert not missing, "read by the playbooks with a default, not in playbooks/vars/arguments.yml: %s" % sorted(missing)
    text = playbook_text()
    unread = {v for v in spec_variables() if not re.search(r"\b%s\b" % v, text)} - {"nodefix_preflight_ignore"}
    assert not unread, "in playbooks/vars/arguments.yml, read by no playbook: %s" % sorted(unread)


def test_extra_docs_lists_the_page():
    with open(os.path.join(ROOT, "docs", "docsite", "extra-docs.yml"), encoding="utf-8") as fh:
        sections = yaml.safe_load(fh)["sections"]
    assert any("playbooks" in s["toctree"] for s in sections)
