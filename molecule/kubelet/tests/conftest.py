# SPDX-License-Identifier: GPL-3.0-or-later
"""One scenario, one node per kubelet layout: each test module's checks are about the nodes it
names in NODES, a test marked ``@pytest.mark.nodes(...)`` about those. molecule hands testinfra every
node (--hosts, which wins over testinfra_hosts), so the checks parametrized for another node are
deselected here - not run, and not counted as skipped."""


def pytest_configure(config):
    config.addinivalue_line("markers", "nodes(*names): the nodes a check is about (the others are deselected)")


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("nodes")
        nodes = marker.args if marker is not None else getattr(item.module, "NODES", None)
        host = getattr(item, "callspec", None) and item.callspec.params.get("_testinfra_host")
        name = host.backend.hostname if host is not None else None
        (drop if nodes is not None and name not in nodes else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
