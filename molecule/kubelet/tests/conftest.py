# SPDX-License-Identifier: GPL-3.0-or-later
"""One scenario, one node per kubelet layout: each test module's checks are about the nodes it
names in NODES. molecule hands testinfra every node (--hosts, which wins over testinfra_hosts), so
the checks parametrized for another node are deselected here - not run, and not counted as skipped."""


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        nodes = getattr(item.module, "NODES", None)
        host = getattr(item, "callspec", None) and item.callspec.params.get("_testinfra_host")
        name = host.backend.hostname if host is not None else None
        (drop if nodes is not None and name not in nodes else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
