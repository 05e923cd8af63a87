# SPDX-License-Identifier: GPL-3.0-or-later
"""The containerd role's meta/argument_specs.yml rejects bad variables before any task runs.

Runs ansible-playbook on localhost with the role and bad values, in check
mode with the upgrade and the package install switched off, so nothing on
this machine can change even if validation let a value through.
"""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  check_mode: true
  roles:
    - role: nodefix.k8s.containerd
      vars: %s
"""


def run_play(tmp_path, variables):
    play = tmp_path / "play.yml"
    variables = dict(variables, containerd_install_python_deps=False)
    variables.setdefault("containerd_upgrade_enabled", False)
    play.write_text(PLAY % json.dumps(variables))
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, ".cache", "collections"),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_HOME": str(tmp_path / "home"),
        "ANSIBLE_NOCOLOR": "1",
    })
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return subprocess.run([exe, "-i", "localhost,", "-e", "ansible_python_interpreter=%s" % sys.executable, str(play)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env, check=False,
                          cwd=str(tmp_path))


@pytest.mark.parametrize("variables, message", [
    ({"containerd_install_method": "curl"}, "containerd_install_method"),
    ({"containerd_restart_timeout": "soon"}, "containerd_restart_timeout"),
    ({"containerd_upgrade_enabled": "maybe"}, "containerd_upgrade_enabled"),
    ({"containerd_archive_validate_certs": "sometimes"}, "containerd_archive_validate_certs"),
])
def test_bad_variables_rejected(tmp_path, variables, message):
    proc = run_play(tmp_path, variables)
    assert proc.returncode != 0, proc.stdout
    assert "Validating arguments against arg spec" in proc.stdout
    assert message in proc.stdout
    # validation is the first task: nothing else ran
    assert "Install the Python library" not in proc.stdout
