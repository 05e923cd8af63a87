# SPDX-License-Identifier: GPL-3.0-or-later
"""Every command the docs show a user names what exists (issue 60 item 3).

Each ``ansible-playbook``, ``ansible-runner run`` and ``ansible-navigator run`` command in README.md, docs/*.md,
the role READMEs and the examples is read as a shell would split it (continuation lines joined), and:
- the playbook it names exists (``nodefix.k8s.X`` -> playbooks/X.yml, a path -> that file);
- every ``-e name=value`` names a variable something reads: a playbook setting (playbooks/vars/arguments.yml),
  a role option (roles/*/meta/argument_specs.yml), the lab's, AWX's set-up (awx/vars.yml) or Ansible's own;
- every playbook setting so given passes the playbooks' own preflight (plugins/module_utils/_preflight:
  type, choices, range), as the run would check it before any node;
- every ``--tags`` value is a tag of the collection's playbooks or roles.
The commands themselves are run by the layers that own them (the lab: test_40; sliced runs and merge:
test_16; ansible-runner: test_50; AWX: tests/unit/test_awx_config.py); this test makes a renamed playbook,
variable or tag in the docs fail at once, before any of those runs.
"""

import functools
import glob
import os
import re
import shlex

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._preflight import variables as preflight_vars

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# docs/test-times.md is the test runs' log (developers'), not a page a user follows
DOCS = ([os.path.join(ROOT, "README.md")]
        + sorted(p for p in glob.glob(os.path.join(ROOT, "docs", "*.md")) if not p.endswith("test-times.md"))
        + sorted(glob.glob(os.path.join(ROOT, "roles", "*", "README.md")))
        + sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.md"), recursive=True)))
TOOLS = ("ansible-playbook", "ansible-runner", "ansible-navigator")
FENCE = re.compile(r"^[ \t]*(```|~~~)[\w+.-]*[ \t]*\n(.*?)^[ \t]*\1", re.M | re.S)
# what may stand before a command on its line: a prompt, sudo, environment assignments, a lock, a chain, a quote
PREFIX = re.compile(r"""^(?:.*(?:&&|;)\s*|.*["']|\$\s*|#\s*)?(?:sudo\s+(?:-\S+\s+)*)?"""
                    r"""(?:flock\s+\S+\s+)?(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*$""")
INLINE = re.compile(r"`((?:%s) [^`]+)`" % "|".join(TOOLS))
PLACEHOLDER = re.compile(r"[<>]|\.\.\.|\bX\b")


def _load(path):
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@functools.lru_cache(maxsize=None)
def _spec():
    return preflight_vars.check_spec(_load(os.path.join(ROOT, "playbooks", "vars", "arguments.yml")))


@functools.lru_cache(maxsize=None)
def _role_options():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        for entry in (_load(path).get("argument_specs") or {}).values():
            names |= set(entry.get("options") or {})
    return names


@functools.lru_cache(maxsize=None)
def _other_known():
    names = set()
    for path in (os.path.join(ROOT, "awx", "vars.yml"),):
        names |= set(_load(path) or {})
    for path in glob.glob(os.path.join(ROOT, "lab", "**", "*.yml"), recursive=True):
        with open(path, encoding="utf-8") as fh:
            names |= set(re.findall(r"\b(nodefix_lab_[a-z_]+)", fh.read()))
    return names


@functools.lru_cache(maxsize=None)
def _tags():
    tags = set()
    for path in [p for top in ("playbooks", "roles", "awx", "lab")
                 for p in glob.glob(os.path.join(ROOT, top, "**", "*.yml"), recursive=True)]:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for block in re.findall(r"^\s*-?\s*tags:\s*(\[[^\]]*\]|[^\n]+)", text, re.M):
            tags |= set(t.strip().strip("'\"") for t in block.strip("[]").split(",") if t.strip())
        for block in re.findall(r"^\s*-?\s*tags:\s*\n((?:\s+- [^\n]+\n)+)", text, re.M):
            tags |= set(t.strip()[2:].strip("'\"") for t in block.splitlines())
    return tags


def commands():
    """(doc, line text, argv) for every command a doc shows."""
    found = []
    for doc in DOCS:
        with open(doc, encoding="utf-8") as fh:
            text = fh.read()
        blocks = [b.replace("\\\n", " ") for _fence, b in FENCE.findall(text)]
        lines = [line for b in blocks for line in b.splitlines()]
        lines += INLINE.findall(FENCE.sub("", text))
        for line in lines:
            line = line.split(" #", 1)[0].strip()
            start = min([line.find(t) for t in TOOLS if line.find(t) >= 0] or [-1])
            if start < 0 or not PREFIX.match(line[:start]):
                continue
            quote = line[:start].rstrip()[-1:] if line[:start].rstrip()[-1:] in ("'", '"') else ""
            line = line[start:].split(quote, 1)[0] if quote else line[start:]
            line = line.split("|", 1)[0].split("&&", 1)[0]
            try:
                argv = shlex.split(line)
            except ValueError:  # prose after the command: "... (the reboot role's window ...)"
                try:
                    argv = shlex.split(line.split(" (", 1)[0])
                except ValueError:
                    continue
            if argv[0] in TOOLS and len(argv) > 1 and not argv[1].startswith("-") or argv[0] == "ansible-playbook":
                found.append((os.path.relpath(doc, ROOT), line, argv))
    return found


def _extra_vars(value):
    """The variables one -e gives: key=value words, or a JSON/YAML mapping (``-e '{"k": v}'``); none for @file."""
    if value.startswith("@"):
        return {}
    if value.lstrip().startswith("{") or ("=" not in value and ":" in value):
        try:
            loaded = yaml.safe_load(value)
        except yaml.YAMLError:
            loaded = None
        if isinstance(loaded, dict):
            return dict((str(k), v) for k, v in loaded.items())  # typed, as Ansible reads a JSON/YAML -e
    return dict(p.split("=", 1) for p in shlex.split(value) if "=" in p)


def _playbook_and_vars(argv):
    """The playbook an argv names (or None) and its -e variables ({name: value-string})."""
    playbook, extra, tags = None, {}, []
    args = list(argv[1:])
    if argv[0] in ("ansible-runner", "ansible-navigator"):
        args = args[1:]  # 'run'
        if argv[0] == "ansible-runner":
            args = args[1:]  # the private data dir
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-e", "--extra-vars") or arg.startswith(("--extra-vars=", "-e")) and len(arg) > 2 and arg != "-e":
            if arg in ("-e", "--extra-vars"):
                i += 1
            else:
                value = arg.split("=", 1)[1] if arg.startswith("--extra-vars=") else arg[2:]
            extra.update(_extra_vars(value))
        elif arg == "--cmdline":  # ansible-runner hands these to ansible-playbook
            i += 1
            args[i + 1:i + 1] = shlex.split(value)
        elif arg in ("--tags", "-t"):
            i += 1
            tags += value.split(",")
        elif arg in ("-p", "--playbook") and argv[0] == "ansible-runner":
            i += 1
            playbook = value
        elif arg.startswith("-"):
            if arg in ("-i", "--limit", "-l", "--cmdline", "--eei", "--inventory", "-f", "--forks", "--become-user",
                       "-u", "--user", "--skip-tags", "--vault-password-file", "-m", "--mode", "--ee", "--container-engine"):
                i += 1
        elif playbook is None and argv[0] != "ansible-runner":
            playbook = arg
        i += 1
    return playbook, extra, tags


DOC_COMMANDS = commands()


def test_the_docs_show_commands():
    """The reader finds the commands (a parser that finds none would pass everything below)."""
    names = set(os.path.basename(c[0]) for c in DOC_COMMANDS)
    assert {"README.md", "ansible-runner.md", "awx.md", "monitoring.md", "triage.md"} <= names, sorted(names)
    assert any("--cmdline" in c[2] for c in DOC_COMMANDS) and any("--tags" in c[2] for c in DOC_COMMANDS)
    assert len(DOC_COMMANDS) >= 15, DOC_COMMANDS


@pytest.mark.parametrize("doc,line,argv", DOC_COMMANDS, ids=["%s:%s" % (c[0], c[1][:60]) for c in DOC_COMMANDS])
def test_a_documented_command_names_what_exists(doc, line, argv):
    playbook, extra, tags = _playbook_and_vars(argv)
    if playbook and not PLACEHOLDER.search(playbook):
        if playbook.startswith("nodefix.k8s."):
            path = os.path.join(ROOT, "playbooks", playbook.split(".", 2)[2] + ".yml")
        elif argv[0] == "ansible-runner":
            path = os.path.join(ROOT, "examples", "runner", "project", playbook)
        else:
            path = os.path.join(ROOT, playbook)
        assert os.path.isfile(path) or os.path.isfile(os.path.join(ROOT, "lab", playbook)), (doc, line, path)
    spec = _spec()
    known = set(spec) | _role_options() | _other_known()
    settings = {}
    for name, value in extra.items():
        if PLACEHOLDER.search(name):
            continue
        assert name in known or name.startswith("ansible_"), "%s: %s names %s, which nothing reads" % (doc, line, name)
        if name in spec and not (isinstance(value, str) and (PLACEHOLDER.search(value) or "$" in value or "~" in value)):
            settings[name] = value
    if settings:
        kind = playbook.split(".")[-1] if playbook and playbook.startswith("nodefix.k8s.") else "remediate"
        kind = kind if kind in preflight_vars.PLAYBOOKS else "remediate"
        problems = preflight_vars.problems(spec, {"node": settings}, kind, [])
        assert not problems, (doc, line, problems)
    if tags:
        all_tags = _tags()
        for tag in tags:
            assert tag in all_tags, "%s: %s names the tag %s, which no play or role has" % (doc, line, tag)


def test_a_renamed_variable_in_a_doc_fails():
    """The check above catches what it is for: a documented -e that names no variable, a playbook that
    does not exist, a value the preflight refuses."""
    argv = shlex.split("ansible-playbook nodefix.k8s.remediate -i inv -e nodefix_rebot=true --tags gvisor")
    playbook, extra, tags = _playbook_and_vars(argv)
    assert playbook == "nodefix.k8s.remediate" and extra == {"nodefix_rebot": "true"} and tags == ["gvisor"]
    for form in ("-e nodefix_rebot=true", "--extra-vars=nodefix_rebot=true", """-e '{"nodefix_rebot": true}'""",
                 "--extra-vars 'nodefix_rebot: true'", "-enodefix_rebot=true"):
        argv = shlex.split("ansible-playbook nodefix.k8s.audit %s" % form)
        assert _playbook_and_vars(argv)[1] in ({"nodefix_rebot": "true"}, {"nodefix_rebot": True}), form
    assert _playbook_and_vars(shlex.split("ansible-playbook x.yml -e @vars.yml"))[1] == {}
    text = ("```shell-session\n$ sudo ANSIBLE_CONFIG=a.cfg ansible-playbook nodefix.k8s.audit -e nodefix_x=1\n```\n"
            "~~~\nansible-playbook nodefix.k8s.npd\n~~~\n"
            '  description: "ansible-playbook nodefix.k8s.remediate -e nodefix_y=2 (a note)"\n')
    found = [line for _f, b in FENCE.findall(text) for line in b.splitlines()]
    assert len(found) == 2 and PREFIX.match("$ sudo ANSIBLE_CONFIG=a.cfg ") and PREFIX.match('  description: "')
    argv = shlex.split("ansible-runner run examples/runner -p nodefix.k8s.audit --cmdline '--check --tags kubelett'")
    assert _playbook_and_vars(argv) == ("nodefix.k8s.audit", {}, ["kubelett"])
    assert "kubelett" not in _tags() and "kubelet" in _tags()
    assert "nodefix_rebot" not in set(_spec()) | _role_options() | _other_known()
    assert preflight_vars.problems(_spec(), {"node": {"nodefix_storm_percent": "150"}}, "remediate", [])
    assert not os.path.isfile(os.path.join(ROOT, "playbooks", "remediat.yml"))
