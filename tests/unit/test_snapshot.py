# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/unit/conftest.snapshot, the 'nothing changed' check of the bad-input layer and the npd_files tests: it
tells a content, mode or link change, and a tree holding a FIFO (another test's, a node's) is read without opening
it - open() on a FIFO nobody writes waits forever, and once held a worker of the test command until CI's limit."""

import os
import threading

from ansible_collections.nodefix.k8s.tests.unit import conftest as unit


def snapshot_within(base, seconds=30):
    box = []
    worker = threading.Thread(target=lambda: box.append(unit.snapshot(base)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, "snapshot(%s) did not return within %d s" % (base, seconds)
    return box[0]


def test_a_fifo_is_recorded_by_type_never_opened(tmp_path):
    os.mkfifo(str(tmp_path / "pipe"))
    (tmp_path / "file").write_text("x")
    shot = snapshot_within(tmp_path)
    assert shot["pipe"][0] == "special" and shot["file"][0] == "file"


def test_content_mode_and_link_target_changes_show(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("a")
    os.symlink("f", str(tmp_path / "d" / "l"))
    before = snapshot_within(tmp_path)
    assert snapshot_within(tmp_path) == before
    (tmp_path / "d" / "f").write_text("b")
    assert snapshot_within(tmp_path) != before
    (tmp_path / "d" / "f").write_text("a")
    os.chmod(str(tmp_path / "d" / "f"), 0o600)
    assert snapshot_within(tmp_path) != before
    os.chmod(str(tmp_path / "d" / "f"), before["d/f"][2] & 0o7777)
    assert snapshot_within(tmp_path) == before
    os.remove(str(tmp_path / "d" / "l"))
    os.symlink("g", str(tmp_path / "d" / "l"))
    assert snapshot_within(tmp_path) != before
