# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: every molecule scenario under molecule/ (create, prepare, check,
converge, idempotence, verify, cleanup, destroy on the lab images)."""

import glob
import os

import pytest

from conftest import ENV, ROOT, assert_ok, run_logged

# Scenarios whose containers touch nothing outside themselves: config files, the
# kubelet double, containerd's own daemon and config, systemd units inside the
# container. They take the pod lock (NODEFIX_POD_LOCK), one at a time, and may run
# beside the end-to-end lab. The others take the lab lock: on this host's cgroup
# v1 tree a container sees every other container's cgroups, and gvisor (real
# sandboxes and /kubepods cgroups), kernel (CPU quota cgroups), npd and
# pid_limits (every detector, host-wide reads) must not run beside the lab's
# container nodes, whose audits must come out exact (and the other way round).
ISOLATED = {"containerd", "containerd_rollback", "kubelet_kubeadm", "kubelet_kubespray", "kubelet_rollback",
            "mount_units", "mount_units_reboot"}
# the isolated ones first: they can run while the lab holds the lab lock
SCENARIOS = sorted((os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "molecule/*/molecule.yml"))),
                   key=lambda name: (name not in ISOLATED, name))


@pytest.mark.lab
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario, lab_lock):
    name = "molecule-" + scenario
    lock = ["flock", ENV["NODEFIX_POD_LOCK"]] if scenario in ISOLATED else lab_lock
    rc, out = run_logged(name, lock + ["molecule", "test", "-s", scenario], timeout=2400)
    assert_ok(name, rc, out, lines=200)
    assert "failed=0" in out
