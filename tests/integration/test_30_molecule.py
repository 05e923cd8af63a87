# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: every molecule scenario under molecule/ (create, prepare, check,
converge, idempotence, verify, cleanup, destroy on the lab images)."""

import glob
import os

import pytest

from conftest import ROOT, assert_ok, run_logged

SCENARIOS = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "molecule/*/molecule.yml")))


@pytest.mark.lab
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario, lab_lock):
    name = "molecule-" + scenario
    rc, out = run_logged(name, lab_lock + ["molecule", "test", "-s", scenario], timeout=2400)
    assert_ok(name, rc, out, lines=200)
    assert "failed=0" in out
