# SPDX-License-Identifier: GPL-3.0-or-later
"""node_evidence: read-only, in check mode as in a real run; bad bounds are refused."""

from ansible_collections.nodefix.k8s.plugins.modules import node_evidence


def test_reads_the_files_under_a_node_tree_and_changes_nothing(run_module, tmp_path):
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    (tmp_path / "etc" / "containerd" / "config.toml").write_text("version = 2\n")
    audit = {"findings": [{"id": "containerd.x"}], "checks": {"containerd": {"config_path": "/etc/containerd/config.toml"}}}
    for check in (False, True):
        result, failed, _dummy = run_module(node_evidence, {"audit": audit, "roles": ["nodefix.k8s.containerd"],
                                                            "root": str(tmp_path)}, check_mode=check)
        assert not failed and result["changed"] is False
        assert result["evidence"]["files"] == {"/etc/containerd/config.toml": "version = 2\n"}
        assert result["evidence"]["findings"] == audit["findings"]


def test_bad_bounds_and_audits_are_refused(run_module, tmp_path):
    result, failed, _dummy = run_module(node_evidence, {"audit": {"findings": []}, "total_bytes": 0})
    assert failed and "total_bytes must be at least 1" in result["msg"]
    result, failed, _dummy = run_module(node_evidence, {"audit": {"findings": "x"}})
    assert failed and "not a node_audit result" in result["msg"]
