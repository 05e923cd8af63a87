# SPDX-License-Identifier: GPL-3.0-or-later
"""Layer: every benchmark under benchmarks/ at a tiny size (seconds), so that
none can rot unnoticed. The numbers are not looked at (benchmarks are not timed
tests); each run must end well, and each script checks its own result: the dead
units gone and every live one still active (mount_units), the planted zombies
and leakers found (pids_info). The audit benchmark needs the lab up:
tests/integration/test_40_lab.py runs it there."""

import json
import sys

import pytest

from conftest import assert_ok, held, run_logged


def test_pids_info_benchmark(tmp_path):
    rc, out = run_logged("bench-pids-info", [sys.executable, "benchmarks/pids_info/run.py",
                                             "--tasks", "600", "--repeat", "1", "--dir", str(tmp_path)])
    assert_ok("bench-pids-info", rc, out)


@pytest.mark.lab
def test_mount_units_benchmark_every_method(tmp_path):
    # a lab container of its own: the pod lock, beside the lab like the isolated molecule scenarios
    result = tmp_path / "mount-units.json"
    with held("NODEFIX_POD_LOCK"):
        # per_unit first: its cleaner reads every unit left, the live ones each method's leak adds included
        rc, out = run_logged("bench-mount-units", [sys.executable, "benchmarks/mount_units/run.py", "--n", "12",
                                                   "--live", "4", "--batch-size", "5", "--parallel", "2",
                                                   "--methods", "per_unit,raw,module,cli",
                                                   "--name", "nodefix-bench-smoke", "--json", str(result)])
    assert_ok("bench-mount-units", rc, out)
    methods = json.loads(result.read_text())["methods"]
    assert sorted(methods) == ["cli", "module", "per_unit", "raw"], methods
    # the module and the timer's CLI (the files meta/node_files.yml ships) stopped all 12 (three batches)
    assert methods["module"]["stopped"] == 12 and methods["cli"]["stopped"] == 12, methods
    # each after systemd was idle again (stop_helper.py settle), the time that took counted apart
    assert all(set(m).issuperset(("settle_seconds", "seconds_settled")) for m in methods.values()), methods


@pytest.mark.lab
def test_mount_units_curve_and_its_plot(tmp_path):
    result = tmp_path / "curve.json"
    with held("NODEFIX_POD_LOCK"):
        rc, out = run_logged("bench-mount-units-curve", [sys.executable, "benchmarks/mount_units/curve.py",
                                                         "--images", "debian12", "--n", "20", "--live", "4",
                                                         "--batch", "5", "--parallel", "2", "--method", "transaction",
                                                         "--json", str(result)])
    assert_ok("bench-mount-units-curve", rc, out)
    runs = json.loads(result.read_text())["runs"]
    assert len(runs) == 1 and len(runs[0]["points"]) == 4 and runs[0]["method"] == "transaction", runs
    # the fit and the tables (matplotlib, for --png only, is not needed for them)
    rc, out = run_logged("bench-mount-units-plot", [sys.executable, "benchmarks/mount_units/plot.py", str(result)])
    assert_ok("bench-mount-units-plot", rc, out)
    assert "| 252 |" in out, out


def test_report_benchmark_and_the_broken_few_in_a_browser(tmp_path):
    # audit_report's benchmark at a tiny size; then its "12 broken among the fleet" page in headless
    # Chromium: the first rows of "Nodes by state" name exactly the broken nodes
    import os
    import re
    import shutil
    import subprocess
    result = tmp_path / "report.json"
    rc, out = run_logged("bench-report", [sys.executable, "benchmarks/report/run.py", "--sizes", "100,300", "--broken",
                                          "4", "--json", str(result), "--html-dir", str(tmp_path / "html")])
    assert_ok("bench-report", rc, out)
    runs = json.loads(result.read_text())["runs"]
    assert [r["nodes"] for r in runs] == [100, 300, 300] and runs[-1]["broken"] == 4
    dom = subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--user-data-dir=%s" % (tmp_path / "chromium"),
                          "--dump-dom", "file://%s" % (tmp_path / "html" / "broken-report.html")],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    groups = dom[dom.index('id="groups"'):]
    rows = re.findall(r"<tr><td>(\d+)</td>", groups[:groups.index("</table>")])
    assert [int(r) for r in rows][-1] == 296 and sum(int(r) for r in rows[:-1]) == 4, rows
    assert os.path.getsize(tmp_path / "html" / "broken-report.html") < os.path.getsize(tmp_path / "html" / "report.html")


@pytest.mark.lab
def test_fleet_benchmark_smoke(tmp_path):
    # two unprivileged containers with the kubelet double's files, audited through the podman connection
    # (the script checks that the report holds both); one lever run beside the default, both levers in it
    # (pipelining: the lab's pipelined connection; strategy free): each lever's code path once. It takes
    # the pod lock (beside the lab).
    import os
    result = tmp_path / "fleet.json"
    env = {"NODEFIX_FLEET_LOCK": os.environ.get("NODEFIX_POD_LOCK", "/tmp/nodefix-pods.lock")}
    rc, out = run_logged("bench-fleet", [sys.executable, "benchmarks/fleet/run.py", "--sizes", "2", "--forks", "2",
                                         "--levers", "2", "--levers-together-only", "--json", str(result)], env=env)
    assert_ok("bench-fleet", rc, out)
    runs = json.loads(result.read_text())["runs"]
    assert [(r["nodes"], r["env"]) for r in runs] == [(2, {}), (2, {"ANSIBLE_PIPELINING": "1", "ANSIBLE_STRATEGY": "free"})]
    assert all(r["controller_cpu_per_node"] > 0 and r["node_cpu_per_node"] > 0 for r in runs), runs
    assert json.loads(result.read_text())["payload_bytes"] > 10000


@pytest.mark.lab
def test_ssh_fleet_benchmark_smoke(tmp_path):
    # two containers running a real sshd (Debian's openssh-server), reached through Ansible's ssh
    # connection with host key checking on: the floor (raw, ping) and the audit, pipelined, then the
    # audit once with every lever kind at once - the ssh arguments (kex), the ini copy (poll), forks
    # and the collection of HEAD as "before" (a lever with "before" runs the audit only; the other
    # variants run the same code with other settings: --pipelined-only keeps the test command short).
    # It takes the pod lock (beside the lab: its containers touch nothing of the lab's).
    import os
    result = tmp_path / "ssh.json"
    env = {"NODEFIX_FLEET_LOCK": os.environ.get("NODEFIX_POD_LOCK", "/tmp/nodefix-pods.lock")}
    rc, out = run_logged("bench-fleet-ssh", [sys.executable, "benchmarks/fleet/ssh.py", "--sizes", "2", "--forks", "2",
                                             "--pipelined-only", "--levers", "kex+poll+forks+before", "--levers-n", "2",
                                             "--before", "HEAD", "--json", str(result)], env=env)
    assert_ok("bench-fleet-ssh", rc, out)
    data = json.loads(result.read_text())
    kinds = [(r["kind"], r["pipelining"], r["control_path_dir"], r["lever"]) for r in data["runs"]]
    assert kinds == [("raw", True, "default", "default"), ("ping", True, "default", "default"),
                     ("audit", True, "default", "default"), ("audit", True, "default", "kex+poll+forks+before")], kinds
    # every run counted the ControlPersist masters it ended (one a node): their CPU is in the figures
    assert all(r["controlpersist_masters"] == 2 and r["controller_cpu_per_node"] > 0 for r in data["runs"]), data["runs"]
    assert all(r["node_cpu_per_node"] > 0 for r in data["runs"] if r["kind"] != "raw"), data["runs"]
    # the audit over its floor (ping and raw, same nodes and settings): the default's; the lever's has no floor run
    assert [(r["nodes"], r["lever"]) for r in data["audit_over_floor"] if "audit_over_ping" in r] == [(2, "default")]
    assert all(r["main_process_cpu_seconds"] > 0 for r in data["runs"]), data["runs"]


@pytest.mark.lab
def test_ssh_kex_benchmark_smoke(tmp_path):
    # Debian 12's and Debian 13's OpenSSH, each against a real sshd of its release, one connection
    # each (after the unmeasured first), two key exchanges (--kex): ML-KEM, which 9.2 does not offer,
    # and curve25519, which both do (sntrup761, the default's third, runs the same code). The pod lock:
    # containers of its own.
    import os
    result = tmp_path / "kex.json"
    env = {"NODEFIX_FLEET_LOCK": os.environ.get("NODEFIX_POD_LOCK", "/tmp/nodefix-pods.lock")}
    asked = ["mlkem768x25519-sha256", "curve25519-sha256"]
    rc, out = run_logged("bench-kex", [sys.executable, "benchmarks/fleet/kex.py", "--connections", "1",
                                       "--kex", ",".join(asked), "--json", str(result)], env=env)
    assert_ok("bench-kex", rc, out)
    data = json.loads(result.read_text())
    assert data["debian12"]["openssh"].startswith("OpenSSH_9") and data["debian13"]["openssh"].startswith("OpenSSH_10")
    assert [sorted(data[release]["kex"]) for release in ("debian12", "debian13")] == [sorted(asked)] * 2, data
    # 9.2 has no ML-KEM; 10.0 offers both asked; every offered one measured
    assert data["debian12"]["kex"]["mlkem768x25519-sha256"] is None
    assert all(m["client_cpu_seconds"] > 0 for release in ("debian12", "debian13")
               for m in data[release]["kex"].values() if m is not None)
    assert all(m is not None for m in data["debian13"]["kex"].values())


@pytest.mark.lab
def test_lab_connection_benchmark_smoke(tmp_path):
    # the lab connection through podman against its runc fast path, one container, three tasks (a
    # command, a copy - a file transfer -, a stat), one run each way
    import os
    result = tmp_path / "labconn.json"
    env = {"NODEFIX_FLEET_LOCK": os.environ.get("NODEFIX_POD_LOCK", "/tmp/nodefix-pods.lock")}
    rc, out = run_logged("bench-lab-connection", [sys.executable, "benchmarks/lab_connection/run.py", "--nodes", "1",
                                                  "--tasks", "1", "--runs", "1", "--json", str(result)], env=env)
    assert_ok("bench-lab-connection", rc, out)
    data = json.loads(result.read_text())
    assert data["podman"]["cpu_seconds"] > 0 and data["fast"]["cpu_seconds"] > 0


def test_npd_plugin_cost_benchmark(tmp_path):
    # one run per condition and tree (HEAD as "before": a shallow checkout has no older revision)
    result = tmp_path / "npd.json"
    rc, out = run_logged("bench-npd", [sys.executable, "benchmarks/npd/run.py", "--runs", "1", "--before", "HEAD",
                                       "--json", str(result)])
    assert_ok("bench-npd", rc, out)
    data = json.loads(result.read_text())
    assert sorted(data["conditions"]) == sorted(["GVisorMemoryLimitIgnored", "KubeletMountUnitsLeaking",
                                                 "PIDsRisk", "KubeletConfigRisk", "ContainerRuntimeRisk",
                                                 "KernelRisk", "KubeletConfigRisk (kubeadm node)",
                                                 "GVisorMemoryLimitIgnored (kubeadm node)"])
    # every run answered in NPD's protocol (0, 1 or 2), never a crash
    assert all(set(r[k]["exit"]) <= {0, 1, 2} for r in data["conditions"].values() for k in ("before", "now")), data
    # on the kubeadm node's files the kubelet condition READ them: its findings (exit 1), not "could not check"
    assert data["conditions"]["KubeletConfigRisk (kubeadm node)"]["now"]["exit"] == [1], data


def test_cordon_round_trips_benchmark_one_round(tmp_path):
    # old and new once each, in one playbook run on the API server double; the script fails when a round
    # did not cordon the node with the record
    out = tmp_path / "cordon.json"
    rc, text = run_logged("bench-cordon-round-trips", [sys.executable, "benchmarks/cordon_round_trips/run.py",
                                                       "--rounds", "1", "--out", str(out)])
    assert rc == 0, text
    result = json.loads(out.read_text())
    assert result["cordons"] == 2 and result["old"]["module_runs_per_node"] == 4
    assert result["new"]["module_runs_per_node"] == 1


def test_npd_tick_benchmark(tmp_path):
    # NPD's pattern for one tick, each rule reading the node against one look per tick, and that look writing the
    # textfile too (HEAD as "today" and as the tick before the textfile: a shallow checkout has no older revision; the
    # "today" plugin config has no cache, so each of its rules reads the node, the "tick" one no textfile)
    result = tmp_path / "tick.json"
    rc, out = run_logged("bench-npd-tick", [sys.executable, "benchmarks/npd/tick.py", "--ticks", "1", "--before", "HEAD",
                                            "--tick-before", "HEAD", "--json", str(result)])
    assert_ok("bench-npd-tick", rc, out)
    data = json.loads(result.read_text())
    ways = ("today", "tick", "hardened", "textfile")
    # six rules a way, the same answers in NPD's protocol; the tick's look left every condition's verdict behind and
    # the textfile listed every check
    assert [len(data["runs"][w]) for w in ways] == [6, 6, 6, 6] and data["answers_differ"] == []
    assert data["shared_result_conditions"] == sorted([r["condition"] for r in data["runs"]["textfile"]] + ["PIDPressureRisk"])
    assert set(r["rc"] for w in ways for r in data["runs"][w]) <= {0, 1, 2}
    assert set(data["summary"]) == set(ways) and len(data["textfile_checks"]) == 8


def test_triage_benchmark_small(tmp_path):
    # real Prometheus 2.42 scraping a simulated exporter of 40 nodes (one target a node, every injected state at
    # least once): the classifier and ansible-inventory (targets only, every node) once each; the script fails
    # when a node is not classified as injected or the triage's request count differs from Prometheus' own. The
    # SSH audit beside it is benchmarks/fleet/ssh.py's (its own smoke: test_ssh_fleet_benchmark_smoke).
    result = tmp_path / "triage.json"
    rc, out = run_logged("bench-triage", [sys.executable, "benchmarks/triage/run.py", "--sizes", "40", "--ssh-size", "0", "--repeat", "1",
                                          "--json", str(result)])
    assert_ok("bench-triage", rc, out)
    runs = json.loads(result.read_text())["runs"]
    assert [r["kind"] for r in runs] == ["classifier", "inventory_targets", "inventory_full"]
    # 7: Prometheus' clock, kube_node_info with kube-state-metrics' own `up`, and the five observations
    assert [r.get("hosts") for r in runs] == [None, 5, 40] and all(r["requests"] == 7 for r in runs), runs


def test_redact_fast_path_benchmark_small(tmp_path):
    # the redactor with and without its fast path and the one of HEAD's commit, on 200 of each set: every string
    # reads the same with and without the fast path (the script exits 1 otherwise)
    result = tmp_path / "redact.json"
    rc, out = run_logged("bench-redact", [sys.executable, "benchmarks/redact/run.py", "--n", "200", "--repeat", "1",
                                          "--base", "HEAD", "--json", str(result)])
    assert_ok("bench-redact", rc, out)
    data = json.loads(result.read_text())
    assert data["fast_path_differs"] == 0 and sorted(data["sets"]) == ["addresses", "label_values", "node_names",
                                                                       "test_corpus"], data
    assert all(sorted(row["cpu_s"]) == ["base", "new", "new_slow"] for row in data["sets"].values()), data
