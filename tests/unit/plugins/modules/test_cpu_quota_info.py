# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.cpu_quota_info over the incident's cgroup tree, with runc --version from a command table."""


from ansible_collections.nodefix.k8s.plugins.modules import cpu_quota_info
from ansible_collections.nodefix.k8s.tests.unit.plugins.module_utils.test_cpu_quota import (
    CID, OK_CTR, POD, INCIDENT_CTR, INCIDENT_V1, v1_tree)


RUNC_RC4 = "runc version 1.0.0-rc4\ncommit: 3f2f8b84a77f73d38244dd690525642a72156c64\nspec: 1.0.0\n"
RUNC_DEB12 = "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n"


def test_incident_node_with_old_runc(run_module, make_tree):
    root = v1_tree(make_tree, INCIDENT_V1)
    result, failed, table = run_module(
        cpu_quota_info, {"root": root}, bins={"runc": "/usr/bin/runc"},
        commands=[{"argv": ["/usr/bin/runc", "--version"], "out": RUNC_RC4}])
    assert not failed and result["changed"] is False
    assert table.calls == [["/usr/bin/runc", "--version"]]
    assert [(f["id"], f["subject"]) for f in result["findings"]] == [
        ("cpu_quota.not_whole_percent", OK_CTR),
        ("cpu_quota.child_exceeds_parent", INCIDENT_CTR),
        ("cpu_quota.not_whole_percent", INCIDENT_CTR),
        ("runc.cpu_quota_rounding_bug", "/usr/bin/runc"),
    ]
    assert result["findings"][3]["evidence"] == {"version": "1.0.0-rc4", "fixed_in": "1.0.0-rc5",
                                                 "systemd_driver_limits": True}
    assert result["violations"][0]["pod_uid"] == POD and result["violations"][0]["container_id"] == CID


def test_check_mode_and_current_runc(run_module, make_tree):
    root = v1_tree(make_tree, {"/": (-1, 100000)})
    result, failed, _t = run_module(
        cpu_quota_info, {"root": root}, check_mode=True, bins={"runc": "/usr/sbin/runc"},
        commands=[{"argv": ["/usr/sbin/runc", "--version"], "out": RUNC_DEB12}])
    assert not failed and result["changed"] is False and result["findings"] == []
    assert result["runc"] == {"binary": "/usr/sbin/runc", "version": "1.1.5", "cpu_quota_rounding_bug": False}


def test_check_runc_false_runs_nothing(run_module, make_tree):
    root = v1_tree(make_tree, INCIDENT_V1)
    result, failed, table = run_module(cpu_quota_info, {"root": root, "check_runc": False}, bins={})
    assert not failed and table.calls == []
    assert result["runc"]["binary"] is None
    assert [f["id"] for f in result["findings"]].count("cpu_quota.child_exceeds_parent") == 1
