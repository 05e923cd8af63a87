# SPDX-License-Identifier: GPL-3.0-or-later
"""The reboot role's last check, as roles/reboot/tasks/verify.yml runs it: its two tasks - "the node is Ready in the
API server" (nodefix.k8s.node_ready) and "what the node is now" (the verdict, reboot_outcome) - taken from the file
as they are and run by ansible-playbook on localhost against the kube-apiserver TEST DOUBLE (lab/apiserver-double),
with what the node-side tasks before them registered given as a node that came back well. A Ready node is back with
no problem; a NotReady one is "not Ready"; a Node the API server does not know, an API server that does not answer
and a module that could not run (no kubernetes library in the controller's Python - the test's own: this Python
behind a sitecustomize that hides the library, whatever the machine's Pythons have) are "could not be read", with
the reason - never back. Nothing but the double and the test's directory is touched."""

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.nodefix.k8s.tests.unit.plugins.modules.test_node_ready import (  # pylint: disable=unused-import
    double, free_port, kubeconfig)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERIFY = os.path.join(ROOT, "roles", "reboot", "tasks", "verify.yml")
# what verify.yml's node-side tasks registered for a node that came back well
CAME_BACK = {
    "_reboot_after": {"checks": {"reboot": {"systemd_state": "running", "boot_id": "b2", "running_release": "6.1"}},
                      "findings": []},
    "_reboot_services": {"stdout_lines": ["active", "active"], "stdout": "active\nactive", "rc": 0},
    "_reboot_healthz": {"status": 200},
    "reboot_why": [], "reboot_node_name": "node-a", "reboot_settle_timeout": 1,
    "reboot_result": {"elapsed": 42}, "reboot_gate": {"lock": {"slot": "nodefix-reboot-0"}},
}


def verify_tasks():
    """verify.yml's Ready check and verdict, as they are."""
    with open(VERIFY) as fh:
        tasks = yaml.safe_load(fh)
    names = ["Reboot | the node is Ready in the API server", "Reboot | what the node is now"]
    return [next(t for t in tasks if t.get("name") == name) for name in names]


HIDE = """import sys


class NoKubernetes(object):
    \"\"\"The test's controller Python has no kubernetes library (tests/unit/test_reboot_ready_verdict.py).\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name == "kubernetes" or name.startswith("kubernetes."):
            raise ModuleNotFoundError("No module named %r (hidden by the test)" % name, name=name)
        return None


sys.meta_path.insert(0, NoKubernetes())
"""


def python_without_kubernetes(tmp_path):
    """An interpreter the test controls: this Python, started with a sitecustomize on its path that makes importing
    ``kubernetes`` fail - the library hidden whatever is installed (checked)."""
    hide = tmp_path / "hide-kubernetes"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE)
    wrapper = tmp_path / "python-without-kubernetes"
    wrapper.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (hide, sys.executable))
    wrapper.chmod(0o755)
    probe = subprocess.run([str(wrapper), "-c", "import kubernetes"], capture_output=True, text=True, check=False)
    assert probe.returncode != 0 and "hidden by the test" in probe.stderr, probe.stderr
    assert subprocess.run([str(wrapper), "-c", "import ansible"], check=False).returncode == 0
    return str(wrapper)


def outcomes(tmp_path, cases):
    """{case: reboot_outcome} of one ansible-playbook run, a play a case ({case: extra vars})."""
    plays = []
    with open(os.path.join(ROOT, "roles", "reboot", "defaults", "main.yml")) as fh:
        defaults = yaml.safe_load(fh)
    for case, extra in cases.items():
        out = str(tmp_path / ("%s.json" % case))
        plays.append({"name": case, "hosts": "localhost", "gather_facts": False,
                      "vars": dict(dict(defaults, ansible_python_interpreter=sys.executable, **CAME_BACK), **extra),
                      "tasks": verify_tasks() + [{"name": "keep the verdict", "ansible.builtin.copy": {
                          "content": "{{ reboot_outcome | to_json }}", "dest": out, "mode": "0600"}}]})
    play = tmp_path / "verify.yml"
    play.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict((k, v) for k, v in os.environ.items() if not k.lower().endswith("_proxy"))
    env.update({"ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
                "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
                "ANSIBLE_HOME": str(tmp_path / "home"), "ANSIBLE_NOCOLOR": "1"})
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([exe, "-i", "localhost,", "-c", "local", str(play)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return dict((case, json.loads((tmp_path / ("%s.json" % case)).read_text())) for case in cases), proc.stdout


def test_only_a_node_read_ready_is_back_and_an_unread_one_is_said_so(tmp_path, double):
    api = double({"nodes": {"node-a": {}, "node-b": {"ready": "False"}}})
    token = tmp_path / "token"
    token.write_text("Verify-Token-61\n")
    cases = {"ready": {"reboot_kubeconfig": kubeconfig(tmp_path, api.port, token)},
             "not_ready": {"reboot_kubeconfig": api.kubeconfig, "reboot_node_name": "node-b"},
             "missing": {"reboot_kubeconfig": api.kubeconfig, "reboot_node_name": "node-gone"},
             "unreachable": {"reboot_kubeconfig": kubeconfig(tmp_path, free_port(), token)},
             "no_kubeconfig": {"reboot_kubeconfig": ""},
             # the controller's Python without the library: the module fails, the node is not proven back
             "no_library": {"reboot_kubeconfig": api.kubeconfig,
                            "ansible_python_interpreter": python_without_kubernetes(tmp_path)}}
    seen, text = outcomes(tmp_path, cases)
    assert "Verify-Token-61" not in text + json.dumps(seen)
    assert seen["ready"]["back"] is True and seen["ready"]["problems"] == [] and seen["ready"]["status"] == "verified"
    assert seen["no_kubeconfig"]["back"] is True and seen["no_kubeconfig"]["problems"] == []
    assert seen["not_ready"]["back"] is False and seen["not_ready"]["status"] == "not fixed"
    assert seen["not_ready"]["problems"] == [
        "the node is not Ready in the API server (Node node-b is not Ready after %d s: Ready=False (KubeletNotReady))"
        % int(seen["not_ready"]["problems"][0].split("after ")[1].split(" s")[0])]
    for case in ("missing", "unreachable", "no_library"):
        assert seen[case]["back"] is False and len(seen[case]["problems"]) == 1, (case, seen[case])
        problem = seen[case]["problems"][0]
        assert problem.startswith("the node could not be read in the API server, so it is not proven Ready ("), problem
    assert "node-gone is not in the API server" in seen["missing"]["problems"][0]
    assert "no answer from the API server" in seen["unreachable"]["problems"][0]
    assert "kubernetes" in seen["no_library"]["problems"][0]
