# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for nodefix.k8s.runsc_info: main() against fake node trees and a command table."""


from ansible_collections.nodefix.k8s.plugins.modules import runsc_info

POD = "6a1f0c2e-0000-4000-8000-00000000a001"
CID = "a" * 64
OK_CID = "b" * 64
HOST_RAM = 25276510208
UNLIMITED = "9223372036854771712\n"

CTD = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
  runtime_type = "io.containerd.runsc.v1"
"""


def cmdline(cid, total):
    return "\0".join(["runsc-sandbox", "--root=/var/run/runsc", "--network=none", "boot", "--bundle=/b",
                      "--cpu-num", "2", "--total-memory", str(total), "--spec-fd=7", cid]) + "\0"


def lab_tree(make_tree):
    pod = "/kubepods/burstable/pod%s" % POD
    ok_pod = "/kubepods/burstable/pod%s" % POD.replace("a001", "b002")
    return make_tree({
        "/sys/fs/cgroup/unified": None,
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": UNLIMITED,
        "/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % pod: "268435456\n",
        "/sys/fs/cgroup/memory%s/%s/memory.limit_in_bytes" % (pod, CID): UNLIMITED,
        "/sys/fs/cgroup/memory%s/memory.limit_in_bytes" % ok_pod: "268435456\n",
        "/sys/fs/cgroup/memory%s/%s/memory.limit_in_bytes" % (ok_pod, OK_CID): "268435456\n",
        "/proc/129/cmdline": cmdline(CID, HOST_RAM),
        "/proc/129/cgroup": "4:memory:%s/%s\n0::/\n" % (pod, CID),
        "/proc/201/cmdline": cmdline(OK_CID, 268435456),
        "/proc/201/cgroup": "4:memory:%s/%s\n0::/\n" % (ok_pod, OK_CID),
        "/proc/self/mountinfo": "",
        "/etc/containerd/config.toml": CTD,
    })


def test_lab_node_reports_oversized_sandbox_with_both_numbers(run_module, make_tree):
    root = lab_tree(make_tree)
    result, failed, table = run_module(
        runsc_info, {"root": root}, check_mode=True, bins={"runsc": "/usr/bin/runsc"},
        commands=[{"argv": ["/usr/bin/runsc", "--version"], "out": "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n"}])
    assert not failed and result["changed"] is False
    over = [f for f in result["findings"] if f["id"] == "gvisor.sandbox_oversized"]
    assert len(over) == 1 and over[0]["subject"] == CID
    assert over[0]["evidence"]["total_memory"] == HOST_RAM
    assert over[0]["evidence"]["memory_limit"] == 268435456
    assert all(f["subject"] != OK_CID for f in result["findings"])
    assert result["runsc"]["version"] == "0.0~20221219.0" and result["runsc"]["has_9580_fix"] is False
    assert result["pods_to_recreate"] == [POD]
    assert table.calls == [["/usr/bin/runsc", "--version"]]


def test_runsc_path_given_for_a_new_download(run_module, make_tree, tmp_path):
    binary = tmp_path / "runsc.new"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    result, failed, _table = run_module(
        runsc_info, {"root": make_tree({"/proc/1/cmdline": "init\0"}), "runsc_path": str(binary),
                     "inspect_sandboxes": False},
        bins={},
        commands=[{"argv": [str(binary), "--version"], "out": "runsc version 0.0~20240729.0\nspec: 1.1.0\n"}])
    assert not failed
    assert result["runsc"]["release"] == "20240729.0" and result["runsc"]["has_9580_fix"] is True
    assert result["findings"] == [] and result["sandboxes"] == []


def test_missing_runsc_path_is_a_clear_error(run_module, tmp_path):
    result, failed, _table = run_module(runsc_info, {"runsc_path": str(tmp_path / "nope")})
    assert failed and "does not exist" in result["msg"]


def test_non_executable_runsc_path_is_a_clear_error(run_module, tmp_path):
    # a binary fresh from a download is mode 0644: say so instead of "not installed"
    binary = tmp_path / "runsc.new"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o644)
    result, failed, table = run_module(runsc_info, {"runsc_path": str(binary), "inspect_sandboxes": False}, bins={})
    assert failed, result
    assert "not executable (mode 0644)" in result["msg"] and "chmod 0755" in result["msg"]
    assert result["path"] == str(binary) and table.calls == []


def test_directory_as_runsc_path_is_a_clear_error(run_module, tmp_path):
    result, failed, _table = run_module(runsc_info, {"runsc_path": str(tmp_path), "inspect_sandboxes": False}, bins={})
    assert failed and "is not a regular file" in result["msg"]


def test_bad_minimum_release(run_module):
    result, failed, _table = run_module(runsc_info, {"minimum_release": "latest"})
    assert failed and "not a runsc release" in result["msg"]


def test_failing_version_command_is_unknown(run_module, make_tree):
    root = make_tree({"/proc/1/cmdline": "init\0", "/sys/fs/cgroup/cgroup.controllers": "memory\n"})
    result, failed, _table = run_module(
        runsc_info, {"root": root}, bins={"runsc": "/usr/bin/runsc"},
        commands=[{"argv": ["/usr/bin/runsc", "--version"], "rc": 1, "err": "exec format error"}])
    assert not failed
    assert [f["id"] for f in result["findings"]] == ["gvisor.runsc_version_unknown"]
    assert result["findings"][0]["evidence"]["output"] == "exec format error"
