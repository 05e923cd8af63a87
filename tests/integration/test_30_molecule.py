# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: the molecule scenarios under molecule/ whose containers touch nothing
outside themselves (create, prepare, check, converge, idempotence, verify,
cleanup, destroy on the lab images). The others are test_31_molecule_lab.py."""

import json
import os

import pytest

from conftest import ENV, MOLECULE_ISOLATED, ROOT, assert_ok, held, podman, run_logged, run_molecule


@pytest.mark.lab
@pytest.mark.parametrize("scenario", MOLECULE_ISOLATED)
def test_molecule_scenario(scenario):
    # the pod lock: one at a time, beside the end-to-end lab
    run_molecule(scenario, "NODEFIX_POD_LOCK")


def _driver(tmp_path, step, platforms, env):
    """molecule/shared/driver/<step>.yml run as molecule runs it: localhost, molecule_yml given."""
    extra = tmp_path / "molecule_yml.json"
    extra.write_text(json.dumps({"molecule_yml": {"platforms": platforms},
                                 "ansible_python_interpreter": os.path.join(ENV["NODEFIX_VENV"], "bin", "python")}))
    return run_logged("molecule-driver-" + step, ["ansible-playbook", "-i", "localhost,", "-c", "local",
                                                  "-e", "@%s" % extra,
                                                  os.path.join(ROOT, "molecule", "shared", "driver", step + ".yml")],
                      timeout=300, env=env)


def _mounts(name):
    mounts = json.loads(podman("inspect", "--format", "{{json .Mounts}}", name))
    return dict((m["Destination"], m["Source"]) for m in mounts)


@pytest.mark.lab
def test_molecule_driver_mounts_the_code_cache_only_when_it_is_set(tmp_path):
    # the project's create/destroy (molecule/shared/driver/): the test run's compiled-code cache
    # (lab/zip_code_cache.py) goes into every node when NODEFIX_ZIPCODE_DIR is set, into none when not
    # (nodes as real nodes run modules); an unknown platform key fails create before a container starts
    node = {"name": "nodefix-drv-node", "image": "localhost/nodefix-debian12", "pre_build_image": True,
            "command": "sleep 300"}
    unset = {"NODEFIX_ZIPCODE_DIR": ""}        # run_logged merges into the project's environment
    with held("NODEFIX_POD_LOCK"):
        try:
            for env, mounted in ((None, True), (unset, False)):
                rc, out = _driver(tmp_path, "create", [node], env)
                assert_ok("molecule-driver-create", rc, out)
                got = _mounts(node["name"])
                if mounted:
                    assert got.get("/var/cache/nodefix-lab-zipcode") == ENV["NODEFIX_ZIPCODE_DIR"], got
                else:
                    assert "/var/cache/nodefix-lab-zipcode" not in got, got
                rc, out = _driver(tmp_path, "destroy", [node], env)
                assert_ok("molecule-driver-destroy", rc, out)
                assert podman("ps", "-a", "--filter", "name=^%s$" % node["name"], "--format", "{{.Names}}") == ""
            rc, out = _driver(tmp_path, "create", [dict(node, published_ports=["8080:80"])], None)
            assert rc != 0 and "not published_ports" in " ".join(out.split()), out[-2000:]
            assert podman("ps", "-a", "--filter", "name=^%s$" % node["name"], "--format", "{{.Names}}") == ""
        finally:
            podman("rm", "-f", "-t", "0", node["name"], check=False)
