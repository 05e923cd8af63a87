# SPDX-License-Identifier: GPL-3.0-or-later
"""galaxy.yml declares exactly the collections the shipped content uses; the project's own
tooling (lab, molecule, tests, awx/) declares the rest in requirements/collections-dev.yml."""

import os
import re

import ansible_collections
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = ("plugins", "roles", "playbooks")
TOOLING = ("lab", "molecule", "awx", "tests/integration", "benchmarks")
# a module/plugin FQCN at the start of a task key, in a `- role:`/include, or a filter/lookup call
FQCN = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*(?=\s*:|['\"(\s]|$)", re.M)
IGNORED = {"ansible.builtin", "ansible.legacy", "nodefix.k8s"}


def used(dirs, root=ROOT):
    """{collection: the first file using it} over the YAML files under ``dirs`` (comments skipped)."""
    out = {}
    for top in dirs:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ("cache", "__pycache__", "files", "templates")]
            for name in filenames:
                if not name.endswith((".yml", ".yaml")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path) as fh:
                    for line in fh:
                        code = line.split("#", 1)[0]
                        for ns, coll in FQCN.findall(code):
                            fq = "%s.%s" % (ns, coll)
                            if fq not in IGNORED and _is_collection(ns, coll):
                                out.setdefault(fq, os.path.relpath(path, root))
    return out


def _is_collection(ns, coll):
    # a collection installed where this suite finds its collections (the `ansible` package's and the
    # checkout's); anything else the pattern meets (host names, file names) is not a reference
    return any(os.path.isdir(os.path.join(base, ns, coll)) for base in ansible_collections.__path__)


def test_galaxy_yml_declares_exactly_what_the_shipped_content_uses():
    with open(os.path.join(ROOT, "galaxy.yml")) as fh:
        declared = set((yaml.safe_load(fh).get("dependencies") or {}))
    seen = used(SHIPPED)
    assert seen, "no collection use found at all: the scan is broken"
    assert declared == set(seen), "declared %s, used %s" % (sorted(declared), seen)


def test_the_tooling_declares_what_it_uses_beyond_the_collection_dependencies():
    with open(os.path.join(ROOT, "galaxy.yml")) as fh:
        runtime = set((yaml.safe_load(fh).get("dependencies") or {}))
    with open(os.path.join(ROOT, "requirements/collections-dev.yml")) as fh:
        dev = set(c["name"] for c in yaml.safe_load(fh)["collections"])
    assert not dev & runtime, "a runtime dependency is listed again as a dev one: %s" % sorted(dev & runtime)
    extra = dict((k, v) for k, v in used(TOOLING).items() if k not in runtime)
    assert set(extra) == dev, "dev collections declared %s, used beyond galaxy.yml %s" % (sorted(dev), extra)


def test_the_scan_finds_a_planted_use(tmp_path):
    (tmp_path / "roles/x/tasks").mkdir(parents=True)
    text = ("- name: t\n  community.general.ini_file:\n    path: /x\n"
            "# containers.podman.podman_container: only a comment\n")
    (tmp_path / "roles/x/tasks/main.yml").write_text(text)
    assert used(("roles",), root=str(tmp_path)) == {"community.general": "roles/x/tasks/main.yml"}


def test_requires_ansible_is_the_oldest_core_tested():
    # meta/runtime.yml claims what the test command tests: its lower bound is the ansible-core that
    # test_22_publish.py runs sanity with, the newest tested (requirements/dev.txt) is above it, and its
    # ceiling is the line after the newest tested: no release the range admits goes untested.
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as fh:
        requires = yaml.safe_load(fh)["requires_ansible"]
    with open(os.path.join(ROOT, "requirements", "ansible-core-oldest.txt"), encoding="utf-8") as fh:
        oldest = re.search(r"^ansible-core==(\d+)\.(\d+)\.\d+$", fh.read(), re.M).groups()
    with open(os.path.join(ROOT, "requirements", "dev.txt"), encoding="utf-8") as fh:
        newest = re.search(r"^ansible-core==(\d+)\.(\d+)\.\d+$", fh.read(), re.M).groups()
    assert requires == ">=%s.%s.0,<%s.%d.0" % (oldest[0], oldest[1], newest[0], int(newest[1]) + 1), requires
    assert tuple(map(int, newest)) > tuple(map(int, oldest))
