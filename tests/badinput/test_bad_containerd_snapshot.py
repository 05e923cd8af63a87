# SPDX-License-Identifier: GPL-3.0-or-later
"""containerd_snapshot under hostile input: a clear error naming the problem, the tree unchanged."""

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import containerd_snapshot
from ansible_collections.nodefix.k8s.tests.badinput.conftest import refused


@pytest.fixture
def node(tmp_path):
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/containerd").write_bytes(b"containerd\n")
    (tmp_path / "state/last-good").mkdir(parents=True)
    (tmp_path / "state/last-good/manifest.json").write_text('{"version": "1.6.20", "files": []}\n')
    return tmp_path


def cases(base):
    ok = str(base / "usr/bin/containerd")
    snap = str(base / "state/last-good")
    return [
        ({"path": "state/last-good", "files": [ok]}, ["path must be an absolute directory path", "'state/last-good'"]),
        ({"path": "/", "files": [ok]}, ["path must not be /"]),
        ({"path": snap, "files": ["usr/bin/containerd"]}, ["files: 'usr/bin/containerd' is not an absolute path"]),
        ({"path": snap, "files": [""]}, ["files: '' is not an absolute path"]),
        ({"path": snap, "files": [ok, ok]}, ["files: %s is listed twice" % ok]),
        ({"path": snap, "files": [str(base / "usr/bin/../bin/containerd")]}, ["is not a normalised path"]),
        ({"path": snap, "files": [ok + "/"]}, ["is not a normalised path"]),
        ({"path": snap, "files": ["/"]}, ["files: '/' is not a normalised path"]),
        ({"path": snap, "files": [snap + "/manifest.json"]}, ["overlaps the snapshot directory"]),
        ({"path": snap, "files": [str(base / "state")]}, ["overlaps the snapshot directory"]),
        ({"path": snap, "files": [ok], "daemon_started": "yesterday"}, ["daemon_started"]),
        ({"path": snap, "files": ok + ",relative"}, ["files: 'relative' is not an absolute path"]),
    ]


@pytest.mark.parametrize("index", range(12))
def test_bad_input_is_refused(run_module, node, index):
    args, words = cases(node)[index]
    refused(run_module, containerd_snapshot, dict(args, daemon_reachable=True), node, words)
