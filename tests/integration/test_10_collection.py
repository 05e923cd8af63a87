# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: the collection builds, installs into an empty path and documents itself."""

import glob
import os
import re
import sys

import yaml

from conftest import ROOT, assert_ok, run_logged


def test_build_install_and_list_modules(tmp_path):
    rc, out = run_logged("galaxy-build", ["ansible-galaxy", "collection", "build", "--force",
                                          "--output-path", str(tmp_path), ROOT])
    assert_ok("galaxy-build", rc, out)
    with open(os.path.join(ROOT, "galaxy.yml")) as fh:
        version = re.search(r"^version:\s*(\S+)", fh.read(), re.M).group(1)
    tarball = tmp_path / ("nodefix-k8s-%s.tar.gz" % version)
    assert tarball.exists(), out
    dest = tmp_path / "installed"
    # an empty path: the development link must not satisfy the install
    rc, out = run_logged("galaxy-install", ["ansible-galaxy", "collection", "install", "--no-deps", "--force",
                                            "-p", str(dest), str(tarball)], env={"ANSIBLE_COLLECTIONS_PATH": str(dest)})
    assert_ok("galaxy-install", rc, out)
    assert (dest / "ansible_collections" / "nodefix" / "k8s" / "MANIFEST.json").exists(), out
    # Only the freshly installed copy may be visible to ansible-doc.
    rc, out = run_logged("ansible-doc-list", ["ansible-doc", "-t", "module", "-l", "nodefix.k8s"],
                         env={"ANSIBLE_COLLECTIONS_PATH": str(dest)})
    assert_ok("ansible-doc-list", rc, out)
    modules = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins/modules/*.py")))
    assert modules, "no modules in plugins/modules"
    for name in modules:
        assert "nodefix.k8s.%s" % name in out, "ansible-doc -l does not list %s:\n%s" % (name, out)
    # nothing of the development tree leaks into the artifact
    rc, listing = run_logged("tar-list", ["tar", "-tzf", str(tarball)])
    assert_ok("tar-list", rc, listing)
    for banned in (".venv/", ".cache/", "tests/output/", ".git/"):
        assert banned not in listing, "%s found in the built collection" % banned


def test_every_module_renders_in_ansible_doc():
    modules = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins/modules/*.py")))
    rc, out = run_logged("ansible-doc-render", ["ansible-doc", "-t", "module"] + ["nodefix.k8s.%s" % m for m in modules])
    assert_ok("ansible-doc-render", rc, out)
    for name in modules:
        assert "nodefix.k8s.%s" % name in out
    # a module meta/runtime.yml deprecates (without a redirect) renders with its deprecation: ansible-doc warns
    # once for it, and adds the hint how to silence such warnings; no other warning or error
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as fh:
        routing = yaml.safe_load(fh)["plugin_routing"]["modules"]
    deprecated = sorted(n for n, r in routing.items() if "deprecation" in r and "redirect" not in r and n in modules)
    expected = ["[DEPRECATION WARNING]: nodefix.k8s.%s has been deprecated." % n for n in deprecated]
    warned = [line for line in out.splitlines() if line.startswith(("[WARNING]", "[DEPRECATION WARNING]"))]
    hint = "[WARNING]: Deprecation warnings can be disabled"
    # each warning one of the expected ones (named by its prefix), each expected one there once
    said = [next((e for e in expected if w.startswith(e)), w) for w in warned if not w.startswith(hint)]
    assert sorted(said) == sorted(expected), warned
    assert "ERROR" not in out and out.count("DEPRECATED:") == len(deprecated), out[-3000:]


def test_an_old_module_name_still_works_through_its_redirect():
    """1.0.0's process_health is pids_info since 1.1.0 (meta/runtime.yml plugin_routing): the old name runs
    the same module, with a deprecation warning naming the new one."""
    rc, out = run_logged("redirect-process-health", [
        "ansible", "localhost", "-i", "localhost,", "-c", "local", "-m", "nodefix.k8s.process_health",
        "-e", "ansible_python_interpreter=%s" % sys.executable, "-a", "zombie_threshold=100000"],
        env={"ANSIBLE_DEPRECATION_WARNINGS": "true"})
    assert_ok("redirect-process-health", rc, out)
    assert "localhost | SUCCESS" in out and "limited_by:" in out and "pid_max:" in out, out[-2000:]  # pids_info's result
    said = " ".join(out.split())
    assert "nodefix.k8s.process_health has been deprecated" in said and "nodefix.k8s.pids_info" in said, said[-2000:]


def test_the_old_pid_limits_role_runs_pids_with_its_1_0_variables(tmp_path):
    """1.0's role nodefix.k8s.pid_limits is nodefix.k8s.pids since 1.1.0: the old name still runs it, and every
    pid_limits_* variable still means what it did - above all pid_limits_apply_live: false, which keeps a
    privileged container from writing the host's kernel.pid_max. Check mode on this machine with the
    collection's file redirected into tmp_path: nothing is written, live or on disk."""
    sysctl_file = tmp_path / "60-nodefix-pid-max.conf"
    playbook = tmp_path / "old-role.yml"
    playbook.write_text("""
- hosts: localhost
  gather_facts: false
  roles:
    - role: nodefix.k8s.pid_limits
      vars:
        pid_limits_sysctl_file: %s
        pid_limits_pid_max: 123456
        pid_limits_never_lower: false
        pid_limits_apply_live: false
        pid_limits_zombie_threshold: 100000
  post_tasks:
    - name: The 1.0 facts are set
      ansible.builtin.assert:
        that:
          - pid_limits_zombie_leakers == []
          - pids_target | int == 123456
""" % sysctl_file)
    rc, out = run_logged("old-pid-limits-role", [
        "ansible-playbook", "-i", "localhost,", "-c", "local", "--check", "--diff", str(playbook),
        "-e", "ansible_python_interpreter=%s" % sys.executable],
        env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_DEPRECATION_WARNINGS": "true"})
    assert_ok("old-pid-limits-role", rc, out)
    import json  # pylint: disable=import-outside-toplevel
    report = json.loads(out[out.index("{"):])
    tasks = dict((t["task"]["name"].split(" : ")[-1], t["hosts"]["localhost"])
                 for play in report["plays"] for t in play["tasks"])
    assert "nodefix.k8s.pids" in tasks["Say that this role is now nodefix.k8s.pids"]["msg"]
    persisted = tasks["Persist kernel.pid_max in the collection's sysctl.d file"]
    args = persisted["invocation"]["module_args"]
    # the old names reached the new role: its file, its value, and never the live kernel.pid_max
    assert args["sysctl_file"] == str(sysctl_file) and str(args["value"]) == "123456", args
    assert args["sysctl_set"] is False and args["reload"] is False, args
    assert persisted["changed"] is True and not sysctl_file.exists()   # check mode: reported, not written
    assert report["stats"]["localhost"]["failures"] == 0
