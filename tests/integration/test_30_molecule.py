# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: the molecule scenarios under molecule/ whose containers touch nothing
outside themselves (create, prepare, check, converge, idempotence, verify,
cleanup, destroy on the lab images). The others are test_31_molecule_lab.py."""

import pytest

from conftest import MOLECULE_ISOLATED, run_molecule


@pytest.mark.lab
@pytest.mark.parametrize("scenario", MOLECULE_ISOLATED)
def test_molecule_scenario(scenario):
    # the pod lock: one at a time, beside the end-to-end lab
    run_molecule(scenario, "NODEFIX_POD_LOCK")
