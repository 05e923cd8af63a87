# SPDX-License-Identifier: GPL-3.0-or-later
"""_audit.evidence: what a disruption would wipe, kept bounded; a missing source is named, never fatal."""

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import evidence
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import SubprocessRunner

AUDIT = {"findings": [{"id": "kubelet.api_qps_low"}], "checks": {
    "containerd": {"config_path": "/etc/containerd/config.toml"},
    "gvisor": {"shim_config": {"path": "/etc/containerd/runsc.toml"}},
    "kubelet": {"kubelet": {"unit_files": ["/lib/systemd/system/kubelet.service",
                                           "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"],
                            "env_files": ["/var/lib/kubelet/kubeadm-flags.env"], "config_path": "/var/lib/kubelet/config.yaml",
                            "dropins": []}}}}


class FakeRunner(object):
    """Answers each command from a table: {argv[0] + first word: (rc, out, err)}; None: not installed."""

    def __init__(self, table, calls):
        self.table, self.calls = table, calls

    def bin(self, name):
        return None if self.table.get(name, ()) is None else "/usr/bin/" + name

    def run(self, argv, check=False):
        self.calls.append(argv)
        key = " ".join(argv[:4]) if argv[0].endswith("journalctl") else os.path.basename(argv[0])
        for pattern, answer in self.table.items():
            if pattern in key or pattern == os.path.basename(argv[0]):
                if answer is not None:
                    return answer
        return 1, "", "unknown"


def runner(table, calls):
    return lambda: FakeRunner(table, calls)


def test_the_files_to_keep_are_those_the_roles_change():
    assert evidence.files_to_keep(AUDIT, ["nodefix.k8s.gvisor"]) == ["/etc/containerd/config.toml",
                                                                     "/etc/containerd/runsc.toml"]
    assert evidence.files_to_keep(AUDIT, ["nodefix.k8s.kubelet"]) == [
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", "/lib/systemd/system/kubelet.service",
        "/var/lib/kubelet/config.yaml", "/var/lib/kubelet/kubeadm-flags.env"]
    assert evidence.files_to_keep(AUDIT, ["nodefix.k8s.pids"]) == [] and evidence.files_to_keep({}, ["x.kubelet"]) == []


def test_journals_keep_their_newest_bytes_and_a_missing_source_is_named(tmp_path):
    calls = []
    journal = "\n".join("2026-11-26T10:00:%02d kubelet[1]: line %d" % (i % 60, i) for i in range(5000)) + "\n"
    table = {"-u kubelet": (0, journal, ""), "-u containerd": (0, "containerd ok\n", ""),
             "-k -b": (1, "", "No journal files were found."), "dmesg": (1, "", "dmesg: read kernel buffer failed: "
                                                                         "Operation not permitted"),
             "systemctl": (0, "kubelet.service loaded failed failed kubelet\n", "")}
    bundle = evidence.collect(files=[], findings=AUDIT["findings"], source_bytes=4096, runner_for=runner(table, calls),
                              now=0)
    kube = bundle["sources"]["journal-kubelet"]
    assert kube["truncated"] and kube["bytes"] <= 4096 and kube["text"].endswith("line 4999\n")
    assert kube["text"].startswith("2026-11-26T10:00:")   # cut at a line, never mid-line
    assert bundle["sources"]["failed-units"]["text"].startswith("kubelet.service")
    assert [m["source"] for m in bundle["missing"]] == ["kernel"]
    assert "Operation not permitted" in bundle["missing"][0]["why"]
    assert bundle["findings"] == AUDIT["findings"] and bundle["collected"] == "1970-01-01T00:00:00Z"
    assert [c[0] for c in calls].count("/usr/bin/dmesg") == 1   # the kernel's fallback


def test_the_bundle_has_a_total_bound_and_says_what_it_left_out(tmp_path):
    big = "x" * 3000 + "\n"
    table = {"journalctl": (0, big, ""), "systemctl": (0, big, "")}
    bundle = evidence.collect(source_bytes=10000, total_bytes=7000, runner_for=runner(table, []))
    assert bundle["bytes"] <= 7000 and bundle["truncated"]
    assert sorted(bundle["sources"]) == ["journal-containerd", "journal-kubelet"]
    assert [m["source"] for m in bundle["missing"]] == ["kernel", "failed-units"]
    assert all("would pass its bound 7000" in m["why"] for m in bundle["missing"])


def test_files_under_a_node_tree_and_what_cannot_be_read(tmp_path):
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    (tmp_path / "etc" / "containerd" / "config.toml").write_text("version = 2\n")
    (tmp_path / "etc" / "containerd" / "runsc.toml").write_bytes(b"\xff\xfe not utf-8")
    bundle = evidence.collect(root=str(tmp_path), files=evidence.files_to_keep(AUDIT, ["nodefix.k8s.gvisor"]),
                              runner_for=runner({}, []))
    assert bundle["files"] == {"/etc/containerd/config.toml": "version = 2\n"}
    why = dict((m["source"], m["why"]) for m in bundle["missing"])
    assert "UTF-8" in why["/etc/containerd/runsc.toml"] or "utf-8" in why["/etc/containerd/runsc.toml"].lower()
    assert why["commands"].startswith("the node tree at")   # no journal of a tree that is not the running node


def test_a_command_that_hangs_is_named_not_waited_for():
    bundle = evidence.collect(seconds=1, runner_for=runner({"journalctl": (SubprocessRunner.TIMED_OUT, "", ""),
                                                            "systemctl": None, "dmesg": None}, []))
    why = dict((m["source"], m["why"]) for m in bundle["missing"])
    assert why["journal-kubelet"] == "journalctl did not answer in time"
    assert why["failed-units"] == "systemctl is not installed" and why["kernel"] == "dmesg is not installed"
