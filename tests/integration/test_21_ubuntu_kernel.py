# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.kernel_package on an Ubuntu node, with the REAL apt-get, apt-cache, dpkg-deb and dpkg-query of
this machine: Ubuntu's kernel meta-package chain (``linux-generic`` -> ``linux-image-generic`` ->
``linux-image-<release>``), the installed check (dpkg's status and the boot files) and check mode's private
package lists.

The kernel packages are TEST DOUBLES built here with dpkg-deb, with Ubuntu's real names, versions and Depends
(no Ubuntu archive is reachable from here), served over HTTP on 127.0.0.1. apt runs with a private configuration (``APT_CONFIG``: its own
sources, lists, cache and dpkg status under pytest's tmp_path): nothing of this machine's apt state is read
or written, and nothing is installed."""

import functools
import json
import os
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from conftest import ROOT, run_logged

RELEASE = "5.15.0-91-generic"
NEWER = "5.15.0-92-generic"
FLAT_REPO = os.path.join(ROOT, "lab", "vm", "flat_repo.py")


def deb(repo, name, version, depends=None, files=()):
    """A binary package built with dpkg-deb: control fields as Ubuntu's, ``files`` empty under their paths."""
    tree = repo.parent / ("build-%s-%s" % (name, version))
    (tree / "DEBIAN").mkdir(parents=True)
    control = ["Package: %s" % name, "Version: %s" % version, "Architecture: amd64", "Maintainer: test double",
               "Description: TEST DOUBLE of Ubuntu's %s" % name]
    if depends:
        control.insert(3, "Depends: %s" % depends)
    (tree / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    for path in files:
        (tree / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tree / path.lstrip("/")).write_text("")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(repo / ("%s_%s_amd64.deb" % (name, version)))],
                   check=True, capture_output=True)


def kernel(repo, abi, meta_version):
    release = "5.15.0-%s-generic" % abi
    deb(repo, "linux-image-%s" % release, "5.15.0-%s.%s" % (abi, int(abi) + 10),
        files=("/boot/vmlinuz-%s" % release,))
    deb(repo, "linux-image-generic", meta_version,
        "linux-image-%s, linux-modules-extra-%s" % (release, release))
    deb(repo, "linux-generic", meta_version,
        "linux-image-generic (= %s), linux-headers-generic (= %s)" % (meta_version, meta_version))
    subprocess.run(["python3", FLAT_REPO, str(repo)], check=True)


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def ubuntu(tmp_path):
    """A private apt (its config in APT_CONFIG), a flat repository with the 91 kernel served over HTTP on
    127.0.0.1 (apt copies what it fetches into its lists, as from a mirror), an Ubuntu node tree."""
    repo = tmp_path / "repo"
    repo.mkdir()
    kernel(repo, "91", "5.15.0.91.88")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(repo)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    apt = tmp_path / "apt"
    for sub in ("state/lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d",
                "etc/apt.conf.d"):
        (apt / sub).mkdir(parents=True)
    (apt / "status").write_text("")
    (apt / "etc" / "sources.list").write_text("deb [trusted=yes] http://127.0.0.1:%d/ ./\n" % server.server_address[1])
    conf = apt / "apt.conf"
    conf.write_text("\n".join([
        'Dir::State "%s/state";' % apt, 'Dir::State::status "%s/status";' % apt, 'Dir::Cache "%s/cache";' % apt,
        'Dir::Etc "%s/etc";' % apt, 'Dir::Etc::Parts "%s/etc/apt.conf.d";' % apt, 'APT::Architecture "amd64";',
        'APT::Architectures { "amd64"; };', 'Acquire::Languages "none";', 'Debug::NoLocking "true";', ""]))
    env = {"APT_CONFIG": str(conf)}
    subprocess.run(["apt-get", "update", "-q"], env=dict(os.environ, **env), check=True, capture_output=True)
    root = tmp_path / "node"
    for path, text in (("etc/os-release", 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n'),
                       ("proc/sys/kernel/osrelease", "5.15.0-88-generic\n"), ("var/lib/dpkg/status", "")):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "boot").mkdir()
    yield {"root": root, "repo": repo, "env": env, "lists": apt / "state" / "lists"}
    server.shutdown()


def module(node, label, check=False, **args):
    python = os.path.join(ROOT, ".venv", "bin", "python")
    argv = ["ansible", "localhost", "-c", "local", "-e", "ansible_python_interpreter=%s" % python,
            "-m", "nodefix.k8s.kernel_package", "-a", json.dumps(dict(args, root=str(node["root"])))]
    rc, out = run_logged("ubuntu-kernel-%s" % label, argv + (["--check"] if check else []), timeout=300, env=node["env"])
    return rc, (yaml.safe_load(out.split("=>", 1)[1]) if "=>" in out else {}), out


def test_the_meta_package_chain_is_followed_to_the_image(ubuntu):
    rc, plan, out = module(ubuntu, "plan", min_release="5.15")
    assert rc == 0, out
    assert (plan["package"], plan["version"], plan["release"]) == ("linux-generic", "5.15.0.91.88", RELEASE), plan
    assert plan["kernel_installed"] is False and "not known to dpkg" in plan["not_installed_because"]


def test_check_mode_plans_from_fresh_lists_without_touching_the_nodes(ubuntu):
    kernel(ubuntu["repo"], "92", "5.15.0.92.89")          # published after the node's last apt-get update
    before = sorted((p.name, p.stat().st_mtime_ns) for p in ubuntu["lists"].iterdir())
    rc, plan, out = module(ubuntu, "check", check=True, update_cache=True)
    assert rc == 0 and plan["release"] == NEWER and plan["lists"] == "refreshed privately (check mode)", out
    assert sorted((p.name, p.stat().st_mtime_ns) for p in ubuntu["lists"].iterdir()) == before
    rc, plan, out = module(ubuntu, "stale")                # the node's own lists: still the 91 kernel
    assert rc == 0 and plan["release"] == RELEASE and plan["lists"] == "as the node had them", out


@pytest.mark.parametrize("status, files, why", [
    ("install ok half-configured", ("vmlinuz", "initrd.img"), "status linux-image-%s iF" % RELEASE),
    ("install ok installed", ("vmlinuz",), "/boot/initrd.img-%s is missing" % RELEASE),
])
def test_installed_means_dpkg_says_so_and_the_boot_files_are_there(ubuntu, status, files, why):
    (ubuntu["root"] / "var/lib/dpkg/status").write_text(
        "Package: linux-image-%s\nStatus: %s\nVersion: 5.15.0-91.101\nArchitecture: amd64\n\n" % (RELEASE, status))
    for name in files:
        (ubuntu["root"] / "boot" / ("%s-%s" % (name, RELEASE))).write_text("")
    rc, plan, out = module(ubuntu, "half")
    assert rc == 0 and plan["kernel_installed"] is False and why in plan["not_installed_because"], out
    (ubuntu["root"] / "var/lib/dpkg/status").write_text(
        "Package: linux-image-%s\nStatus: install ok installed\nVersion: 5.15.0-91.101\nArchitecture: amd64\n\n" % RELEASE)
    (ubuntu["root"] / "boot" / ("initrd.img-%s" % RELEASE)).write_text("")
    rc, plan, out = module(ubuntu, "whole")
    assert rc == 0 and plan["kernel_installed"] is True and plan["not_installed_because"] is None, out
