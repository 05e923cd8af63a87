# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: the molecule scenarios under molecule/ that must not run beside the
end-to-end lab (conftest.MOLECULE_ISOLATED says why); a module of their own so
that the worker that ran the lab picks them up when it ends, while the other
worker is still on the isolated scenarios (test_30_molecule.py)."""

import pytest

from conftest import MOLECULE_LAB, run_molecule


@pytest.mark.lab
@pytest.mark.parametrize("scenario", MOLECULE_LAB)
def test_molecule_scenario(scenario):
    # the lab lock: never beside the lab or another of these
    run_molecule(scenario, "NODEFIX_LAB_LOCK")
