# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for nodefix.k8s.containerd_info (fake node trees, recorded real outputs)."""

import os


from ansible_collections.nodefix.k8s.plugins.modules import containerd_info

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "containerd")
BINS = {"containerd": "/usr/bin/containerd", "ctr": "/usr/bin/ctr", "runc": "/usr/sbin/runc"}


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def ctr_out(version):
    return "Client:\n  Version:  %s\n  Revision: x\n\nServer:\n  Version:  %s\n  Revision: x\n  UUID: 1\n" % (version, version)


def cmds(version_out, runc_out, ctr=None, ctr_rc=0, ctr_err=""):
    table = [
        {"argv": ["/usr/bin/containerd", "--version"], "out": version_out},
        {"argv": ["/usr/sbin/runc", "--version"], "out": runc_out},
    ]
    if ctr is not None or ctr_rc:
        table.append({"argv": ["/usr/bin/ctr", "--address", "/run/containerd/containerd.sock", "--timeout", "5s", "version"],
                      "out": ctr or "Client:\n  Version:  1.6.20~ds1\n", "rc": ctr_rc, "err": ctr_err})
    return table


def test_debian12_node_is_healthy(run_module, make_tree):
    root = make_tree({"/etc/containerd/config.toml": fixture("config-default-1.6.20.toml"), "/run/containerd/containerd.sock": ""})
    result, failed, table = run_module(containerd_info, {"root": root},
                                       commands=cmds(fixture("containerd-version-1.6.20.txt"), fixture("runc-version-1.1.5.txt"), ctr_out("1.6.20~ds1")),
                                       bins=BINS)
    assert not failed and not result["changed"]
    assert result["version"] == "1.6.20" and result["prerelease"] is False
    assert result["schema_version"] == 2 and result["runc_systemd_cgroup"] is False
    assert result["runtimes"][0]["name"] == "runc"
    assert result["runc"]["version"] == "1.1.5" and result["runc"]["cpu_quota_rounding_bug"] is False
    assert result["socket"]["reachable"] is True and result["socket"]["server_version"] == "1.6.20~ds1"
    assert result["findings"] == []


def test_release_candidate_node(run_module, make_tree):
    """A production node found running containerd v1.7.0-rc.1."""
    root = make_tree({"/etc/containerd/config.toml": fixture("config-default-1.7.24.toml"), "/run/containerd/containerd.sock": ""})
    version = "containerd github.com/containerd/containerd v1.7.0-rc.1 8c1ebe0b0a8a1e4f0d8f2f2e6c52d1b4e0a49c60\n"
    result, failed, dummy = run_module(containerd_info, {"root": root},
                                       commands=cmds(version, fixture("runc-version-1.1.5.txt"), ctr_out("v1.7.0-rc.1")), bins=BINS)
    assert not failed
    assert result["prerelease"] is True and result["version"] == "1.7.0-rc.1"
    (finding,) = result["findings"]
    assert finding["id"] == "containerd.prerelease" and finding["severity"] == "high"
    assert finding["evidence"]["version"] == "1.7.0-rc.1"
    assert finding["fix"]["role"] == "nodefix.k8s.containerd"


def test_debian11_node_below_minimum_and_socket_down(run_module, make_tree):
    root = make_tree({"/etc/containerd/config.toml": fixture("config-default-1.4.13.toml"), "/run/containerd/containerd.sock": ""})
    result, failed, dummy = run_module(containerd_info, {"root": root, "minimum_version": "1.6.0"},
                                       commands=cmds(fixture("containerd-version-1.4.13.txt"), fixture("runc-version-1.0.0-rc93.txt"),
                                                     ctr_rc=1, ctr_err='ctr: failed to dial "/run/containerd/containerd.sock": context deadline exceeded'),
                                       bins=BINS)
    assert not failed
    ids = sorted(f["id"] for f in result["findings"])
    assert ids == ["containerd.socket_unreachable", "containerd.version_below_minimum"]
    assert "context deadline exceeded" in result["socket"]["error"]
    assert result["runc"]["version"] == "1.0.0-rc93" and result["runc"]["cpu_quota_rounding_bug"] is False


def test_old_runc_from_binaryname(run_module, make_tree):
    config = fixture("config-default-2.1.9.toml").replace("BinaryName = ''", "BinaryName = '/opt/runc-old/runc'")
    root = make_tree({"/etc/containerd/config.toml": config, "/opt/runc-old/runc": "#!/bin/sh\n"})
    runc = os.path.join(root, "opt/runc-old/runc")
    os.chmod(runc, 0o755)
    commands = [
        {"argv": ["/usr/bin/containerd", "--version"], "out": fixture("containerd-version-2.1.9.txt")},
        {"argv": [runc, "--version"], "out": "runc version 1.0.0-rc4\ncommit: 3f2f8b84\nspec: 1.0.0\n"},
    ]
    result, failed, dummy = run_module(containerd_info, {"root": root}, commands=commands, bins=BINS)
    assert not failed, result
    assert result["schema_version"] == 3
    assert [f["id"] for f in result["findings"]] == ["runc.cpu_quota_rounding_bug", "containerd.socket_unreachable"]
    assert result["runc"]["binary"] == runc
    assert result["socket"]["error"].startswith("socket /run/containerd/containerd.sock does not exist")


def test_not_installed(run_module, make_tree):
    root = make_tree({"/etc/hostname": "node\n"})
    result, failed, table = run_module(containerd_info, {"root": root}, bins={})
    assert not failed and result["installed"] is False and result["findings"] == [] and table.calls == []
    assert result["config_exists"] is False


def test_bad_minimum_version(run_module, make_tree):
    result, failed, dummy = run_module(containerd_info, {"root": make_tree({}), "minimum_version": "latest"}, bins={})
    assert failed and "not a version" in result["msg"]
