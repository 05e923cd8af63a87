# SPDX-License-Identifier: GPL-3.0-or-later
"""_audit.evidence: what a disruption would wipe, kept bounded; a missing source is named, never fatal."""

import os
import subprocess
import sys
import textwrap

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

    def run_tail(self, argv, limit):
        rc, out, err = self.run(argv)
        return rc, out[-limit:], err, len(out.encode("utf-8"))


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
    assert why["failed-units"] == "systemctl is not installed"
    assert why["kernel"] == "journalctl did not answer in time; dmesg is not installed"
    assert bundle["states"]["kernel"]["state"] == "unreadable"


def test_no_entries_is_empty_and_the_kernel_log_comes_from_dmesg():
    """journalctl answers rc 0 with '-- No entries --' (no journal of the unit since boot) or 'No journal
    files were found': nothing of that is kept as evidence, each source is named empty, and the kernel's
    log is taken from dmesg --ctime."""
    calls = []
    table = {"-u kubelet": (0, "-- No entries --\n", ""),
             "-u containerd": (1, "", "No journal files were found.\n"),
             "-k -b": (0, "-- No entries --\n", ""),
             "dmesg": (0, "[Fri Nov 27 10:00:00 2026] Linux version 6.1.0\n", ""),
             "systemctl": (0, "", "")}
    bundle = evidence.collect(runner_for=runner(table, calls), now=0)
    assert sorted(bundle["sources"]) == ["kernel"]
    assert bundle["sources"]["kernel"]["argv"] == ["dmesg", "--ctime"]
    assert "Linux version" in bundle["sources"]["kernel"]["text"]
    states = bundle["states"]
    assert states["journal-kubelet"] == {"state": "empty", "why": states["journal-kubelet"]["why"]}
    assert states["journal-kubelet"]["why"].endswith("-- No entries --")
    assert states["journal-containerd"]["state"] == "empty"
    assert states["journal-containerd"]["why"].endswith("No journal files were found")
    assert states["kernel"]["state"] == "kept" and "taken from dmesg --ctime" in states["kernel"]["why"]
    assert states["failed-units"]["state"] == "empty"
    assert sorted(m["source"] for m in bundle["missing"]) == ["failed-units", "journal-containerd", "journal-kubelet"]
    assert "No entries" not in repr(bundle["sources"])
    journal = [c for c in calls if c[0].endswith("journalctl")][0]
    assert journal[journal.index("-o") + 1] == "short-iso" and "--lines" in journal


def test_the_journal_window_since():
    argv = dict(evidence.commands(since="2026-11-27 10:00:00"))["journal-kubelet"]
    assert argv[:3] == ["journalctl", "--since", "2026-11-27 10:00:00"] and "-b" not in argv


def test_sources_and_files_are_redacted(tmp_path):
    (tmp_path / "etc" / "containerd").mkdir(parents=True)
    (tmp_path / "etc" / "containerd" / "config.toml").write_text(
        '[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]\n'
        '  username = "bob"\n  password = "S3cr3t-registry-password"\n')
    bundle = evidence.collect(root=str(tmp_path), files=["/etc/containerd/config.toml"],
                              findings=[{"evidence": {"cmdline": "kubelet --token=leaked-token-1"}}], runner_for=runner({}, []))
    text = bundle["files"]["/etc/containerd/config.toml"]
    assert "S3cr3t" not in text and 'password = "<redacted by nodefix.k8s>"' in text and 'username = "bob"' in text
    assert "leaked-token-1" not in repr(bundle["findings"])
    table = {"-u kubelet": (0, "2026-11-27T10:00:00 kubelet[1]: proxy http://bob:pw-in-journal@proxy:3128\n", "")}
    bundle = evidence.collect(runner_for=runner(table, []))
    assert "pw-in-journal" not in bundle["sources"]["journal-kubelet"]["text"]


FAKE_JOURNALCTL = """#!/bin/sh
# a test double of journalctl: a journal of $NODEFIX_FAKE_JOURNAL_MB MiB on stdout, whatever the arguments
exec head -c $(( NODEFIX_FAKE_JOURNAL_MB * 1048576 )) /dev/zero | tr '\\0' 'j' | fold -w 127
"""

MEASURE = textwrap.dedent("""
    import json, resource, sys
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import evidence
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bundle = evidence.collect(units=["kubelet"], source_bytes=512 * 1024, seconds=120)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    src = bundle["sources"]["journal-kubelet"]
    print(json.dumps({"grew_kib": after - before, "bytes": src["bytes"], "truncated": src["truncated"]}))
""")


def test_a_large_journal_costs_its_bound_not_its_size(tmp_path):
    """A journal of 64 MiB (a test double of journalctl: 64 MiB of 128-byte lines) read for its newest
    512 KiB: the reading process's peak memory grows by a bound independent of the journal's size
    (reading it whole - communicate() - costs more than the journal itself: 64 MiB of bytes and its text; 272 MiB measured with 96 MiB)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "journalctl"
    fake.write_text(FAKE_JOURNALCTL)
    fake.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), NODEFIX_FAKE_JOURNAL_MB="64",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", MEASURE], env=env, capture_output=True, text=True, check=True).stdout
    got = __import__("json").loads(out)
    assert got["truncated"] and 500 * 1024 <= got["bytes"] <= 512 * 1024
    assert got["grew_kib"] < 16 * 1024, got   # the bound (512 KiB) and its text, never the 64 MiB stream
