# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest plugin (pytest.ini: -p nodefix_lab_chain): the lab chain on one worker.

The test modules that take the lab lock (NODEFIX_LAB_LOCK: the end-to-end lab,
the molecule scenarios that must not run beside it, the reboot and budget labs)
cannot overlap one another, so their sum is the test command's critical path.
scripts/test.sh runs two pytest-xdist workers with ``--dist loadfile``; this
plugin makes those modules ONE unit of work (scope), the end-to-end lab first:
one worker runs the chain from the start, back to back, while the other runs
every other layer (unit, bad input, build, sanity, lint, and the molecule
scenarios that take the pod lock and may run beside the lab). Without it, the
worker that ends first picks the next module in collection order, and a
lab-locked module could wait behind the lab on the worker that was meant to
run the pod-locked scenarios beside it.
(loadfile, not loadgroup: pytest-xdist 3.8's xdist_group renames
item._nodeid, which pytest 9 no longer reads, so groups are silently split.)
"""

import pytest

# in this order, one after the other
LAB_CHAIN = ("tests/integration/test_40_lab.py", "tests/integration/test_31_molecule_lab.py",
             "tests/integration/test_45_reboot_lab.py", "tests/integration/test_46_budget_lab.py",
             "tests/integration/test_48_npd_daemonset.py", "tests/integration/test_47_kernel_vm.py")


def module_of(nodeid):
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(session, config, items):
    """The chain's modules first, in LAB_CHAIN's order; the rest as collected."""
    rank = dict((path, i) for i, path in enumerate(LAB_CHAIN))
    items.sort(key=lambda item: rank.get(module_of(item.nodeid), len(LAB_CHAIN)))  # stable


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LabChainScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            scope = LoadFileScheduling._split_scope(self, nodeid)
            return LAB_CHAIN[0] if scope in LAB_CHAIN else scope

    return LabChainScheduling(config, log)
