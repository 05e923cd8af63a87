# SPDX-License-Identifier: GPL-3.0-or-later
"""A triage plugin file that cannot be read, through the REAL ``ansible-inventory`` (Ansible's own option conversion
and YAML loading): a password of the wrong type (``{Br4ce$ecret}`` is a YAML mapping) fails naming the option, never
quoting its value; a YAML error read by the plugin names the line, never shows it; and with the setting the
execution environment and the AWX inventory source ship (``ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED``), a file no
plugin parsed - a YAML error Ansible's ``auto`` plugin reports (its own text, which quotes the line: not ours to
change, docs/safety.md), a name that does not end in ``nodefix_triage.yml`` - fails the command instead of an empty
inventory with rc 0. No Prometheus is asked in any of them (the URL is a closed port)."""

import json
import os
import re
import subprocess

import pytest
import yaml

import yaml_tasks

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
HEAD = "plugin: nodefix.k8s.triage\nprometheus_url: http://127.0.0.1:9\nexpected_nodes: list\nnodes: [node-a]\n"


def shipped_env():
    """The ENV lines of execution-environment.yml's final stage that set ANSIBLE_INVENTORY_* (what a job and an
    inventory update run with in the EE)."""
    with open(os.path.join(ROOT, "execution-environment.yml")) as handle:
        steps = yaml.safe_load(handle)["additional_build_steps"]["append_final"]
    env = dict(m.groups() for m in (re.match(r"^ENV (ANSIBLE_INVENTORY_\w+)=(\S+)$", s) for s in steps) if m)
    assert env, "execution-environment.yml sets no ANSIBLE_INVENTORY_* setting"
    return env


def inventory(tmp_path, text, name="fleet.nodefix_triage.yml", env=None, core="newest"):
    """``ansible-inventory --list`` of ``text``; ``core``: the venv's ansible-core (newest) or the oldest the
    collection supports (meta/runtime.yml; scripts/setup.sh builds its venv): their errors are worded apart."""
    path = tmp_path / name
    path.write_text(text)
    environ = dict((k, v) for k, v in os.environ.items() if not k.startswith(("NODEFIX_PROMETHEUS_", "ANSIBLE_INVENTORY_")))
    command = "ansible-inventory"
    if core == "oldest":
        command = os.path.join(ROOT, ".cache", "sanity-venv-oldest", "bin", "ansible-inventory")
        assert os.path.exists(command), "run scripts/setup.sh: it builds the oldest ansible-core's venv"
    return subprocess.run([command, "-i", str(path), "--list"], capture_output=True, text=True,
                          check=False, env=dict(environ, **(env or {})))


def no_hosts(out):
    listed = json.loads(out.stdout or "{}") if out.stdout.strip().startswith("{") else {}
    return not (listed.get("_meta") or {}).get("hostvars")


@pytest.mark.parametrize("extra, option", [
    ("prometheus_password: {Br4ce$ecret}\nprometheus_username: admin\n", "prometheus_password"),
    ("prometheus_password: [Br4ce$ecret]\nprometheus_username: admin\n", "prometheus_password"),
    ("prometheus_headers: ['X-Api-Key Br4ce$ecret']\n", "prometheus_headers"),
], ids=["mapping", "list", "headers-list"])
@pytest.mark.parametrize("core", ["newest", "oldest"])
def test_an_option_of_the_wrong_type_is_named_never_quoted(tmp_path, extra, option, core):
    out = inventory(tmp_path, HEAD + extra, core=core)
    assert out.returncode != 0 and option in out.stderr, out.stderr
    assert "Br4ce" not in out.stdout + out.stderr and no_hosts(out)


@pytest.mark.parametrize("core", ["newest", "oldest"])
def test_a_yaml_error_the_plugin_reads_names_the_line_not_its_text(tmp_path, core):
    # the plugin enabled by name (no auto plugin before it): the plugin's own loading fails
    out = inventory(tmp_path, HEAD + "prometheus_username: admin\nprometheus_password: Col0n: Secret44\n",
                    env={"ANSIBLE_INVENTORY_ENABLED": "nodefix.k8s.triage"}, core=core)
    assert out.returncode != 0 and "not valid YAML at line 6" in out.stderr, out.stderr
    assert "Secret44" not in out.stdout + out.stderr and no_hosts(out)


@pytest.mark.parametrize("name, text", [
    ("fleet.nodefix_triage.yml", HEAD + "prometheus_username: admin\nprometheus_password: Col0n: Secret44\n"),
    ("prod_triage.yml", HEAD),
], ids=["yaml-error", "misnamed"])
def test_a_file_no_plugin_parsed_fails_with_the_shipped_setting(tmp_path, name, text):
    assert inventory(tmp_path, text, name).returncode == 0       # Ansible's default: a warning, rc 0, no host
    out = inventory(tmp_path, text, name, env=shipped_env())
    assert out.returncode != 0 and no_hosts(out), (out.returncode, out.stderr)


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's !unsafe and !vault tags as plain strings."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
_Loader.add_constructor("!vault", lambda loader, node: loader.construct_scalar(node))


def test_the_awx_inventory_source_sets_the_same_setting():
    with open(os.path.join(ROOT, "awx", "configure.yml")) as handle:
        play = yaml.load(handle, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    sources = [t["awx.awx.inventory_source"] for t in yaml_tasks.tasks(play) if "awx.awx.inventory_source" in t]
    scm = [s for s in sources if s.get("source") == "scm"]
    assert scm and all(s.get("source_vars") == shipped_env() for s in scm), scm
