# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: what Galaxy and the Ansible docsite run on the collection, with their own tools.

The tools are the real ones from PyPI, pinned in requirements/publish.txt and installed in
.cache/publish-venv by scripts/setup.sh:
- galaxy-importer (what Galaxy runs on upload, ansible-lint on): no warning at all; the artifact holds only
  tracked files;
- antsibull-docs lint-collection-docs --plugin-docs: rc 0;
- antsibull-changelog lint: rc 0, and CHANGELOG.rst is what the fragments and
  changelogs/changelog.yaml generate;
- the docsite (scripts/docsite.sh: sphinx-init + Sphinx, warnings are errors), whose module,
  role and guide pages are opened in headless Chromium;
- ansible-test sanity and the playbooks' syntax check with the oldest ansible-core the
  collection supports (meta/runtime.yml): the sanity tests that judge the collection against
  that core's API (validate-modules, ansible-doc, import, runtime-metadata, action-plugin-docs);
  the style tests run with the newest core in the static layer (test_20_static.py).
"""

import glob
import html
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

from conftest import ROOT, assert_ok, core_env, pinned_core, project_env, run_logged

VENV = os.path.join(ROOT, ".cache", "publish-venv")


def publish_env():
    env = dict(project_env())
    env["PATH"] = os.path.join(VENV, "bin") + os.pathsep + env["PATH"]
    return env


def galaxy():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("galaxy")
    rc, log = run_logged("publish-build", [os.path.join(VENV, "bin", "ansible-galaxy"), "collection", "build",
                                           "--force", "--output-path", str(out), ROOT], env=publish_env())
    assert_ok("publish-build", rc, log)
    meta = galaxy()
    path = out / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))
    assert path.is_file()
    return path


def test_galaxy_importer_has_no_warnings(tarball, tmp_path):
    cfg = tmp_path / "galaxy-importer.cfg"
    # Galaxy's own settings: ansible-lint on; ansible-test off (it needs a container engine
    # the importer drives itself; sanity runs in the static layer and below).
    cfg.write_text("[galaxy-importer]\nRUN_ANSIBLE_LINT = True\nRUN_ANSIBLE_TEST = False\nLOCAL_IMAGE_DOCKER = False\n")
    env = publish_env()
    env["GALAXY_IMPORTER_CONFIG"] = str(cfg)
    rc, out = run_logged("galaxy-importer", [os.path.join(VENV, "bin", "python"), "-m", "galaxy_importer.main",
                                             str(tarball)], env=env, cwd=str(tmp_path))
    if "Timeout on call to ansible-lint" in out:
        # the importer gives its ansible-lint call 180 s, and a loaded test machine can need more: the same run
        # again with only that clock lifted, so the lint's verdict is read (galaxy_importer_unbounded.py)
        rc, out = run_logged("galaxy-importer-unbounded", [
            os.path.join(VENV, "bin", "python"), os.path.join(os.path.dirname(__file__), "galaxy_importer_unbounded.py"),
            str(tarball)], env=env, cwd=str(tmp_path))
        assert "Timeout on call to ansible-lint" not in out, out[-2000:]
    assert_ok("galaxy-importer", rc, out)
    # It must really have linted (a missing ansible-lint is only a warning to it)...
    assert re.search(r"^Linting collection via ansible-lint ", out, re.M), out[-2000:]
    assert "...ansible-lint run complete" in out
    assert "Importer processing completed successfully" in out
    # ...and said nothing it would show the uploader as a warning or an error.
    bad = [line for line in out.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not bad, "galaxy-importer warnings/errors:\n" + "\n".join(bad)


def test_the_unbounded_importer_still_lifts_the_lint_bound():
    """galaxy_importer_unbounded.py runs only when the importer's lint hit its 180 s: what it patches - the loader's
    own ``Popen`` name, whose ``communicate(timeout=...)`` bounds the lint - must still be there in the pinned
    importer, or the fallback would run bounded again (or fail) the day it is needed."""
    probe = ("import inspect, subprocess\n"
             "from galaxy_importer.loaders import collection\n"
             "assert collection.Popen is subprocess.Popen, collection.Popen\n"
             "assert 'communicate(timeout=' in inspect.getsource(collection)\n")
    proc = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", probe], capture_output=True, text=True,
                          env=publish_env(), check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_galaxy_artifact_ships_only_tracked_files_and_every_one_of_the_collection(tarball):
    """What ``ansible-galaxy collection build`` packs is the working tree less build_ignore: a file the tests or the
    tools leave in the checkout (Hypothesis' example database, .hypothesis/, was 250 of them) would ship. Every file
    of the artifact is a tracked file of the tree, byte for byte (but the two the build writes), and every tracked
    file of the collection's content is in it."""
    with tarfile.open(str(tarball)) as tar:
        shipped = dict((m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile())
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    tracked = set(t for t in listed.stdout.split("\0") if t)
    untracked = sorted(n for n in shipped if n not in tracked and n not in ("MANIFEST.json", "FILES.json"))
    assert not untracked, untracked[:20]
    for name in shipped:
        if name in tracked:
            with open(os.path.join(ROOT, name), "rb") as fh:
                assert fh.read() == shipped[name], name
    content = [t for t in tracked if t.split("/")[0] in ("roles", "playbooks", "plugins", "meta", "docs")]
    assert len(content) > 100 and not [t for t in content if t not in shipped], sorted(set(content) - set(shipped))[:20]


def test_galaxy_artifact_holds_collection_content_only(tarball):
    names = subprocess.run(["tar", "-tzf", str(tarball)], capture_output=True, text=True, check=True).stdout.split()
    tops = {n.split("/")[0] for n in names}
    assert {"plugins", "roles", "playbooks", "meta", "docs", "changelogs", "README.md", "CHANGELOG.rst"} <= tops
    assert not tops & {"awx", "examples", "lab", "scripts", "benchmarks", "requirements", ".cache", ".venv"}


def test_antsibull_docs_lint_collection_docs():
    collection = os.path.join(ROOT, ".cache", "collections", "ansible_collections", "nodefix", "k8s")
    rc, out = run_logged("antsibull-docs-lint", [os.path.join(VENV, "bin", "antsibull-docs"), "lint-collection-docs",
                                                 "--plugin-docs", collection], env=publish_env())
    assert_ok("antsibull-docs-lint", rc, out)
    assert not out.strip(), out


def test_antsibull_changelog_lint_and_changelog_current(tmp_path):
    rc, out = run_logged("changelog-lint", [os.path.join(VENV, "bin", "antsibull-changelog"), "lint"], env=publish_env())
    assert_ok("changelog-lint", rc, out)
    assert not out.strip(), out
    # CHANGELOG.rst is generated, never edited: regenerate it in a copy and compare.
    copy = tmp_path / "c"
    shutil.copytree(os.path.join(ROOT, "changelogs"), copy / "changelogs")
    shutil.copy(os.path.join(ROOT, "galaxy.yml"), copy / "galaxy.yml")
    shutil.copy(os.path.join(ROOT, "CHANGELOG.rst"), copy / "CHANGELOG.rst")
    proc = subprocess.run([os.path.join(VENV, "bin", "antsibull-changelog"), "generate"], cwd=str(copy),
                          env=publish_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(ROOT, "CHANGELOG.rst"), encoding="utf-8") as fh:
        assert (copy / "CHANGELOG.rst").read_text() == fh.read(), "CHANGELOG.rst is stale: antsibull-changelog generate"
    with open(os.path.join(ROOT, "changelogs", "changelog.yaml"), encoding="utf-8") as fh:
        releases = yaml.safe_load(fh)["releases"]
    assert galaxy()["version"] in releases, "galaxy.yml's version is not a release in changelogs/changelog.yaml"


def chromium_dom(path, profile):
    chromium = shutil.which("chromium")
    assert chromium, "chromium is installed by scripts/setup.sh"
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--user-data-dir=%s" % profile, "--dump-dom", "file://%s" % path],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def text_of(dom):
    """The page's visible text, one space between words (tags and scripts dropped)."""
    dom = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", dom)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))


def section(text, heading, first, end):
    """The text of a section: its heading followed by the first words of its body, to ``end``.

    The page's table of contents names the sections too; a heading is only taken where its
    body follows (the permalink sign between them is skipped).
    """
    match = re.search(r"%s\W*%s" % (re.escape(heading), re.escape(first)), text)
    assert match, "no section %r on the page" % heading
    j = text.find(end, match.end())
    return text[match.start():j if j > 0 else None]


@pytest.fixture(scope="module")
def docsite(tmp_path_factory):
    dest = tmp_path_factory.mktemp("docsite") / "site"
    rc, out = run_logged("docsite", ["bash", "scripts/docsite.sh", str(dest)], env=publish_env())
    assert_ok("docsite", rc, out)
    assert not re.search(r"\bWARNING\b", out), "the docsite build warned"
    return dest / "build" / "html"


def ansible_doc(name):
    proc = subprocess.run([os.path.join(VENV, "bin", "ansible-doc"), "-t", "module", "-j", name],
                          env=publish_env(), capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)[name]


def test_docsite_module_page_renders_options_and_return_values(docsite, tmp_path):
    page = docsite / "collections" / "nodefix" / "k8s" / "runsc_info_module.html"
    text = text_of(chromium_dom(page, tmp_path / "chromium"))
    doc = ansible_doc("nodefix.k8s.runsc_info")
    assert "nodefix.k8s.runsc_info module" in text
    params = section(text, "Parameters", "Parameter Comments", "Attribute Support")
    for option in doc["doc"]["options"]:
        assert option in params, "option %s not on the rendered page" % option
    returns = section(text, "Return Values", "Common return values", "Authors")
    for key in doc["return"]:
        assert key in returns, "return value %s not on the rendered page" % key
    assert len(doc["doc"]["options"]) >= 3 and len(doc["return"]) >= 3


def test_docsite_role_page_renders_every_entry_point(docsite, tmp_path):
    page = docsite / "collections" / "nodefix" / "k8s" / "containerd_role.html"
    text = text_of(chromium_dom(page, tmp_path / "chromium"))
    with open(os.path.join(ROOT, "roles", "containerd", "meta", "argument_specs.yml"), encoding="utf-8") as fh:
        specs = yaml.safe_load(fh)["argument_specs"]
    assert set(specs) >= {"main", "snapshot", "restart"}
    for entry, spec in specs.items():
        assert "Entry point %s" % entry in text, "entry point %s not on the rendered page" % entry
        for option in spec.get("options", {}):
            assert option in text, "%s option %s not on the rendered page" % (entry, option)


def test_docsite_guides_and_playbooks_pages(docsite, tmp_path):
    text = text_of(chromium_dom(docsite / "index.html", tmp_path / "chromium"))
    for title in ("Safety on real, messy nodes", "gVisor sandboxes that ignore pod memory limits"):
        assert title in text
    with open(os.path.join(ROOT, "scripts", "docsite.sh"), encoding="utf-8") as fh:
        developer = set(re.search(r"^developer_pages=\(([^)]*)\)", fh.read(), re.M).group(1).split())
    assert {"DEVELOPING", "testing", "test-times"} <= developer
    guides = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    guides = [g for g in guides if g not in developer]
    assert sorted(p.name[:-5] for p in (docsite / "guides").glob("*.html")) == guides
    playbooks = text_of(chromium_dom(docsite / "collections" / "nodefix" / "k8s" / "docsite" / "playbooks.html",
                                     tmp_path / "chromium2"))
    assert "nodefix_max_fail_percentage" in playbooks and "nodefix.k8s.remediate" in playbooks


def test_sanity_with_the_oldest_supported_ansible_core():
    env = dict(project_env())
    env["NODEFIX_SANITY_CORE"] = "oldest"
    rc, out = run_logged("sanity-oldest", ["bash", "scripts/sanity.sh"], timeout=3600, env=env)
    assert_ok("sanity-oldest", rc, out)
    assert "ansible [core %s]" % pinned_core("ansible-core-oldest.txt") in out
    ran = set(re.findall(r'^Running sanity test "([^"]+)"', out, re.M))
    assert ran == {"action-plugin-docs", "ansible-doc", "import", "runtime-metadata", "validate-modules"}, ran


@pytest.mark.parametrize("playbook", ["audit", "remediate", "npd"])
def test_playbooks_parse_with_the_oldest_supported_ansible_core(playbook, tmp_path):
    env = dict(project_env(), **core_env("floor"))   # (it checks that ansible-playbook there is the pinned floor)
    inventory = tmp_path / "hosts"
    inventory.write_text("[k8s_nodes]\nnode1\n")
    proc = subprocess.run(["ansible-playbook", "--syntax-check", "-i", str(inventory), "nodefix.k8s.%s" % playbook],
                          env=env, capture_output=True, text=True, cwd=str(tmp_path), check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
