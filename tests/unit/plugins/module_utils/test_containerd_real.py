# SPDX-License-Identifier: GPL-3.0-or-later
"""Edited configs loaded by the REAL containerd binaries of Debian 11, 12, 13 and sid.

The binaries come from tests/unit/fixtures/containerd/fetch-debs.sh (unpacked
under lab/cache/containerd/, not committed); these tests skip when they are
absent. For each containerd: its own `config default` output, edited to
register runsc (ConfigPath) and set runc SystemdCgroup = true, must load with
`containerd --config <file> config dump`, and the dump must show both.
"""

import glob
import os
import subprocess

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import edit as containerd_edit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
FIX = os.path.join(REPO, "tests", "unit", "fixtures", "containerd")
CACHE = os.path.join(REPO, "lab", "cache", "containerd")

RUNSC = {
    "runsc": {
        "runtime_type": "io.containerd.runsc.v1",
        "options": {"TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"},
    }
}


def binary(version):
    found = glob.glob(os.path.join(CACHE, "containerd_%s~ds1-*" % version, "usr", "bin", "containerd"))
    found += glob.glob(os.path.join(CACHE, "containerd_%s+ds1-*" % version, "usr", "bin", "containerd"))
    if not found:
        pytest.skip("real containerd %s not unpacked (run tests/unit/fixtures/containerd/fetch-debs.sh)" % version)
    return found[0]


def run(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, check=False)


@pytest.mark.parametrize("version, config", [
    ("1.4.13", "config-default-1.4.13.toml"),
    ("1.4.13", "config-v1-handwritten.toml"),
    ("1.6.20", "config-default-1.6.20.toml"),
    ("1.6.20", "debian-shipped-config.toml"),
    ("1.7.24", "config-default-1.7.24.toml"),
    ("2.1.9", "config-default-2.1.9.toml"),
    ("2.1.9", "config-default-1.6.20.toml"),
])
def test_real_binary_loads_edited_default_config(tmp_path, version, config):
    exe = binary(version)
    with open(os.path.join(FIX, config)) as fh:
        before = fh.read()
    after, _schema, changes = containerd_edit.edit_config(before, RUNSC, True)
    assert changes
    path = tmp_path / "config.toml"
    path.write_text(after)
    proc = run([exe, "--config", str(path), "config", "dump"])
    assert proc.returncode == 0, proc.stderr
    assert containerd_edit.dump_has(proc.stdout, RUNSC, True) == []
    dumped = containerd_cfg.parse_config(proc.stdout)
    schema = containerd_cfg.schema_version(dumped)
    names = [r["name"] for r in containerd_cfg.list_runtimes(dumped, schema)]
    assert "runsc" in names and "runc" in names


@pytest.mark.parametrize("version", ["1.4.13", "1.6.20", "1.7.24", "2.1.9"])
def test_fixture_is_the_real_output(version):
    exe = binary(version)
    assert run([exe, "config", "default"]).stdout == open(os.path.join(FIX, "config-default-%s.toml" % version)).read()
    assert run([exe, "--version"]).stdout == open(os.path.join(FIX, "containerd-version-%s.txt" % version)).read()


def test_v1_config_is_ignored_by_containerd_2(tmp_path):
    """Why containerd_config validates the dump: 2.x loads a v1 file but drops plugins.cri."""
    exe = binary("2.1.9")
    with open(os.path.join(FIX, "config-v1-handwritten.toml")) as fh:
        after, _s, _c = containerd_edit.edit_config(fh.read(), RUNSC, True)
    path = tmp_path / "config.toml"
    path.write_text(after)
    proc = run([exe, "--config", str(path), "config", "dump"])
    assert proc.returncode == 0
    assert containerd_edit.dump_has(proc.stdout, RUNSC, None) == ["runtime runsc missing from config dump"]
