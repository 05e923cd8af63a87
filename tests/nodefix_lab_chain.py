# SPDX-License-Identifier: GPL-3.0-or-later
"""pytest plugin (pytest.ini: -p nodefix_lab_chain): the lab chain on one worker,
the kernel VM and the rest balanced on the other.

The test modules that take the lab lock (NODEFIX_LAB_LOCK: the end-to-end lab,
the molecule scenarios that must not run beside it, the reboot and budget labs,
the NPD DaemonSet) cannot overlap one another. scripts/test.sh runs two
pytest-xdist workers with ``--dist loadfile``; this plugin makes those modules
ONE unit of work (scope), the budget lab and the end-to-end lab first: one worker runs the chain
from the start, back to back. Without it, the worker that ends first picks the
next module in collection order, and a lab-locked module could wait behind the
lab on the worker that was meant to run the pod-locked scenarios beside it.

The other worker takes everything else in this order: the quick layers (unit,
bad input, the doubles, ...), then the kernel VM (test_47: a QEMU VM and the
apiserver double, no podman: it takes only the VM lock, NODEFIX_VM_LOCK, which
the end-to-end lab holds while its own VM is up - two emulated VMs never run at
once; the quick layers outlast the lab, so the VM starts as soon as they end),
then the pod-locked molecule scenarios, which the chain's worker takes instead
when it frees up first, then LATE: layers that either worker takes when it
frees up. Each worker then ends near the other. Measured in CI at 2191d9c: the
kernel VM, queued after the molecule scenarios, started at ~1350 s and ended the
run ~400 s after the chain's worker had run out of work (docs/test-times.md).

pytest-xdist hands a worker its next scope when it has two tests or fewer
left, in queue order, so the order below is the plan and the locks are what
makes it safe whatever the timing.
(loadfile, not loadgroup: pytest-xdist 3.8's xdist_group renames
item._nodeid, which pytest 9 no longer reads, so groups are silently split.)
"""

import pytest

# in this order, one after the other, on one worker
# (the budget lab first: it times systemd's stops against the cost model, and must not overlap the
# kernel VM, whose emulation at nice -10 takes the CPU first; the kernel VM cannot start before the
# end-to-end lab releases the VM lock, so ahead of the lab the budget lab never meets it)
LAB_CHAIN = ("tests/integration/test_46_budget_lab.py", "tests/integration/test_40_lab.py",
             "tests/integration/test_41_secrets_lab.py",
             "tests/integration/test_31_molecule_lab.py", "tests/integration/test_45_reboot_lab.py",
             "tests/integration/test_48_npd_daemonset.py")
# queued after everything else, in this order
QUEUE_TAIL = ("tests/integration/test_47_kernel_vm.py", "tests/integration/test_30_molecule.py")
LATE = ("tests/integration/test_20_static.py", "tests/integration/test_22_publish.py",
        "tests/integration/test_13_rollout_double.py", "tests/integration/test_19_el_kernel.py")


def module_of(nodeid):
    return nodeid.split("::", 1)[0]


def queue_rank(module):
    """Where MODULE's tests go in the queue: the chain, the quick layers (as collected), QUEUE_TAIL, LATE."""
    if module in LAB_CHAIN:
        return (0, LAB_CHAIN.index(module))
    if module in QUEUE_TAIL:
        return (2, QUEUE_TAIL.index(module))
    if module in LATE:
        return (3, LATE.index(module))
    return (1, 0)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: queue_rank(module_of(item.nodeid)))  # stable


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
