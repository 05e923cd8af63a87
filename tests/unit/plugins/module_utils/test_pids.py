# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _pids.detect (fake /proc trees of v1, v2 and hybrid nodes).

``fake_proc`` and ``stat_line`` are also used by the module test and the
benchmark (benchmarks/pids_info/run.py).
"""

import os

from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect

POD = "db841b6d-ca29-11e7-9644-02306c0cdc4b"
POD_S = POD.replace("-", "_")
POD2 = "5f3e6c1a-7b2d-4e8f-9a0b-1c2d3e4f5a6b"
CID = "b686057013a37c4764b7ecac27e9434164946af5e551075ffb6b7a898f475621"
CID2 = "833b60bb9ff4c669bb413b898a5fd142a57a21695e5dc42684235df907825567"
BTIME = 1763700000
CLK = 100


def stat_line(pid, comm, state, ppid, threads=1, start=0):
    """A /proc/<pid>/stat line as Linux 5.x+ prints it (52 fields, see proc(5))."""
    fields = [str(pid), "(%s)" % comm, state, str(ppid), str(pid), str(pid), "0", "-1", "4194560",
              "100", "0", "0", "0", "5", "3", "0", "0", "20", "0", str(threads), "0", str(start),
              "12345678", "345", "18446744073709551615"] + ["0"] * 27
    return " ".join(fields) + "\n"


def fake_proc(make_tree, procs, pid_max=4194304, threads_max=255782, uptime=1000.0, loadavg=None, extra=None):
    """Build a node root whose /proc holds ``procs``.

    Each process is a dict: pid, comm, state (default S), ppid (default 1),
    threads (1), start (clock ticks after boot, 0), and optionally cmdline
    (a list), cgroup (the /proc/<pid>/cgroup text) and nspid (its pid in
    its own namespace).
    """
    files = {
        "/proc/sys/kernel/pid_max": "%d\n" % pid_max,
        "/proc/sys/kernel/threads-max": "%d\n" % threads_max,
        "/proc/stat": "cpu  10 0 10 1000 0 0 0 0 0 0\nintr 0\nctxt 1\nbtime %d\nprocesses 9\n" % BTIME,
        "/proc/uptime": "%.2f 1900.00\n" % uptime,
        "/proc/self": None,
    }
    if loadavg is not None:
        files["/proc/loadavg"] = "0.10 0.20 0.30 1/%d 4242\n" % loadavg
    for p in procs:
        d = "/proc/%d/" % p["pid"]
        files[d + "stat"] = stat_line(p["pid"], p.get("comm", "sleep"), p.get("state", "S"), p.get("ppid", 1),
                                      p.get("threads", 1), p.get("start", 0))
        if "cmdline" in p:
            files[d + "cmdline"] = "".join(a + "\0" for a in p["cmdline"])
        if "cgroup" in p:
            files[d + "cgroup"] = p["cgroup"]
        if "nspid" in p:
            files[d + "status"] = "Name:\t%s\nState:\tS (sleeping)\nNSpid:\t%d\t%d\n" % (
                p.get("comm", "sleep"), p["pid"], p["nspid"])
    files.update(extra or {})
    return make_tree(files)


def zombies(ppid, first_pid, count, start, comm="curl"):
    return [{"pid": first_pid + i, "comm": comm, "state": "Z", "ppid": ppid, "start": start + i}
            for i in range(count)]


V2_POD_CGROUP = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
                 "cri-containerd-%s.scope\n" % (POD_S, CID))
V1_CGROUPFS_CGROUP = "".join([
    "12:pids:/kubepods/besteffort/pod%s/%s\n" % (POD2, CID2),
    "11:memory:/kubepods/besteffort/pod%s/%s\n" % (POD2, CID2),
    "4:cpu,cpuacct:/kubepods/besteffort/pod%s/%s\n" % (POD2, CID2),
    "1:name=systemd:/kubepods/besteffort/pod%s/%s\n" % (POD2, CID2),
])
# hybrid, cgroupfs driver: the unified hierarchy knows nothing of kubepods
HYBRID_CGROUPFS_CGROUP = "0::/\n" + V1_CGROUPFS_CGROUP.replace("1:name=systemd", "1:name=systemd")
# hybrid, systemd driver, docker: every hierarchy holds the slice
HYBRID_SYSTEMD_CGROUP = "".join([
    "12:memory:/kubepods.slice/kubepods-pod%s.slice/docker-%s.scope\n" % (POD_S, CID),
    "4:cpu,cpuacct:/kubepods.slice/kubepods-pod%s.slice/docker-%s.scope\n" % (POD_S, CID),
    "1:name=systemd:/kubepods.slice/kubepods-pod%s.slice/docker-%s.scope\n" % (POD_S, CID),
    "0::/kubepods.slice/kubepods-pod%s.slice/docker-%s.scope\n" % (POD_S, CID),
])
SERVICE_CGROUP = "0::/system.slice/nodefix-zombie-leaker.service\n"


def _parent(pid, zombies, age, started, comm, ppid, cmdline, ns_pid, cgroup, unit, pod_uid=None, container_id=None,
            runtime=None, qos=None, leaker=False):
    return {"pid": pid, "zombies": zombies, "oldest_age_seconds": age, "oldest_started": started, "comm": comm,
            "ppid": ppid, "cmdline": cmdline, "ns_pid": ns_pid, "cgroup": cgroup, "unit": unit, "pod_uid": pod_uid,
            "container_id": container_id, "runtime": runtime, "qos": qos, "in_kubepods": pod_uid is not None,
            "leaker": leaker, "advice": pids_detect.zombie_advice(ns_pid)}


def test_v2_zombies_grouped_by_parent_with_pod(make_tree):
    procs = [
        {"pid": 1, "comm": "systemd", "cmdline": ["/sbin/init"], "cgroup": "0::/init.scope\n"},
        # supercronic as PID 1 of its container, 12 zombies, the oldest 900 s old
        {"pid": 2841, "comm": "supercronic", "ppid": 2811, "threads": 9, "start": 1000,
         "cmdline": ["/usr/local/bin/supercronic", "-json", "/crontabs/cron"], "cgroup": V2_POD_CGROUP,
         "nspid": 1},
        # a service with 3 zombies: below the threshold
        {"pid": 700, "comm": "python3", "cmdline": ["python3", "/opt/leak.py"], "cgroup": SERVICE_CGROUP,
         "nspid": 700},
        # 15 zombies, but all younger than a minute: it reaps late, not a leaker
        {"pid": 800, "comm": "make", "cmdline": ["make", "-j8"], "cgroup": "0::/user.slice/session-1.scope\n"},
    ]
    procs += zombies(2841, 3000, 12, start=10000)
    procs += zombies(700, 4000, 3, start=20000, comm="sh")
    procs += zombies(800, 5000, 15, start=95000, comm="cc1")
    root = fake_proc(make_tree, procs)
    got = pids_detect.check(None, root=root, clk_tck=CLK)
    assert (got["processes"], got["tasks"], got["zombies"], got["zombie_parents_total"]) == (34, 42, 30, 3)
    pod_cgroup = V2_POD_CGROUP[3:].strip()
    assert got["zombie_parents"] == [
        _parent(800, 15, 50, "2025-11-21T04:55:50Z", "make", 1, "make -j8", None,
                "/user.slice/session-1.scope", "session-1.scope"),
        _parent(2841, 12, 900, "2025-11-21T04:41:40Z", "supercronic", 2811,
                "/usr/local/bin/supercronic -json /crontabs/cron", 1, pod_cgroup, "cri-containerd-%s.scope" % CID,
                POD, CID, "containerd", "burstable", leaker=True),
        _parent(700, 3, 800, "2025-11-21T04:43:20Z", "python3", 1, "python3 /opt/leak.py", 700,
                "/system.slice/nodefix-zombie-leaker.service", "nodefix-zombie-leaker.service"),
    ]
    leakers = [f for f in got["findings"] if f["id"] == "pids.zombie_leaker"]
    assert len(leakers) == 1
    f = leakers[0]
    assert f["severity"] == "high"
    assert f["subject"] == "pid 2841 (supercronic) in pod %s" % POD
    assert f["evidence"] == {"pid": 2841, "cmdline": "/usr/local/bin/supercronic -json /crontabs/cron",
                             "zombies": 12, "oldest_age_seconds": 900, "pid1_of_namespace": True,
                             "cgroup": pod_cgroup, "unit": "cri-containerd-%s.scope" % CID, "pod_uid": POD,
                             "container_id": CID, "threshold": 10,
                             "advice": pids_detect.zombie_advice(1)}
    assert f["evidence"]["advice"].startswith("It is PID 1 of its container")
    assert "tini" in f["remedy"] and "shareProcessNamespace" in f["remedy"]
    assert f["fix"] == {"role": "nodefix.k8s.pids", "tag": "zombies"}
    # the healthy PID space gives no other finding
    assert [x["id"] for x in got["findings"]] == ["pids.zombie_leaker"]


def test_thresholds_are_options(make_tree):
    procs = [{"pid": 700, "comm": "python3", "cmdline": ["python3", "/opt/leak.py"], "cgroup": SERVICE_CGROUP}]
    procs += zombies(700, 4000, 3, start=20000, comm="sh")
    root = fake_proc(make_tree, procs)
    got = pids_detect.check(None, root=root, clk_tck=CLK, zombie_threshold=3, zombie_min_age=800)
    assert [(f["id"], f["subject"]) for f in got["findings"]] == [
        ("pids.zombie_leaker", "pid 700 (python3) in nodefix-zombie-leaker.service")]
    got = pids_detect.check(None, root=root, clk_tck=CLK, zombie_threshold=3, zombie_min_age=801)
    assert got["findings"] == []
    assert got["zombie_parents"][0]["leaker"] is False


def test_v1_cgroupfs_parent_pod_and_container(make_tree):
    procs = [{"pid": 4100, "comm": "bash", "ppid": 4090, "cmdline": ["/bin/bash", "/entry.sh"],
              "cgroup": V1_CGROUPFS_CGROUP, "nspid": 1}]
    procs += zombies(4100, 5000, 25, start=100)
    root = fake_proc(make_tree, procs, extra={"/sys/fs/cgroup/memory": None})
    got = pids_detect.check(None, root=root, clk_tck=CLK)
    cg = "/kubepods/besteffort/pod%s/%s" % (POD2, CID2)
    assert got["zombie_parents"] == [
        _parent(4100, 25, 999, "2025-11-21T04:40:01Z", "bash", 4090, "/bin/bash /entry.sh", 1, cg, None,
                POD2, CID2, None, "besteffort", leaker=True)]
    assert got["findings"][0]["subject"] == "pid 4100 (bash) in pod %s" % POD2


def test_hybrid_cgroupfs_prefers_v1_kubepods_path(make_tree):
    procs = [{"pid": 4100, "comm": "bash", "cmdline": ["/bin/bash"], "cgroup": HYBRID_CGROUPFS_CGROUP}]
    procs += zombies(4100, 5000, 10, start=100)
    root = fake_proc(make_tree, procs, extra={"/sys/fs/cgroup/unified": None})
    parent = pids_detect.check(None, root=root, clk_tck=CLK)["zombie_parents"][0]
    assert (parent["cgroup"], parent["pod_uid"], parent["container_id"], parent["qos"], parent["leaker"]) == (
        "/kubepods/besteffort/pod%s/%s" % (POD2, CID2), POD2, CID2, "besteffort", True)


def test_hybrid_systemd_docker(make_tree):
    procs = [{"pid": 9, "comm": "supercronic", "cmdline": ["/usr/local/bin/supercronic", "/app/crontab"],
              "cgroup": HYBRID_SYSTEMD_CGROUP}]
    procs += zombies(9, 100, 19782 // 1000, start=100)
    root = fake_proc(make_tree, procs)
    parent = pids_detect.check(None, root=root, clk_tck=CLK)["zombie_parents"][0]
    assert (parent["zombies"], parent["pod_uid"], parent["container_id"], parent["runtime"], parent["qos"],
            parent["unit"]) == (19, POD, CID, "docker", "guaranteed", "docker-%s.scope" % CID)


def test_usage_against_pid_max_with_threads(make_tree):
    # 3 processes with 9000 threads each plus one: 27001 tasks of 32768 = 82.4 %
    procs = [{"pid": p, "comm": "java", "threads": 9000} for p in (10, 11, 12)] + [{"pid": 1, "comm": "init"}]
    root = fake_proc(make_tree, procs, pid_max=32768)
    got = pids_detect.check(None, root=root, clk_tck=CLK, pid_max_min=4194304)
    assert (got["tasks"], got["limit"], got["limited_by"], got["usage_percent"]) == (27001, 32768, "kernel.pid_max", 82.4)
    assert [(f["id"], f["severity"]) for f in got["findings"]] == [("pids.usage_high", "high"), ("pids.pid_max_low", "medium")]
    assert got["findings"][0]["evidence"] == {"tasks": 27001, "limit": 32768, "limited_by": "kernel.pid_max",
                                              "usage_percent": 82.4, "threshold_percent": 80, "zombies": 0}
    assert got["findings"][1]["evidence"] == {"pid_max": 32768, "recommended": 4194304}


def test_kernel_count_from_loadavg_and_threads_max_limit(make_tree):
    # /proc shows one namespace only; loadavg counts all of the kernel's tasks
    procs = [{"pid": 1, "comm": "init"}]
    root = fake_proc(make_tree, procs, threads_max=40000, loadavg=39000)
    got = pids_detect.check(None, root=root, clk_tck=CLK, threads_max_min=131072)
    assert (got["tasks_counted"], got["tasks_kernel"], got["tasks"]) == (1, 39000, 39000)
    assert (got["limit"], got["limited_by"]) == (40000, "kernel.threads-max")
    assert [(f["id"], f["severity"], f["subject"]) for f in got["findings"]] == [
        ("pids.usage_high", "critical", "kernel.threads-max"),
        ("pids.threads_max_low", "medium", "kernel.threads-max")]


def test_comm_with_spaces_and_parentheses_and_vanished_process(make_tree):
    procs = [{"pid": 50, "comm": "my (odd) proc", "cmdline": [], "cgroup": "0::/\n"}]
    procs += zombies(50, 60, 10, start=0, comm="a) Z 9 (b")
    # a process that exited between listdir and read leaves an empty directory
    root = fake_proc(make_tree, procs, extra={"/proc/77": None, "/proc/net": None})
    got = pids_detect.check(None, root=root, clk_tck=CLK)
    assert (got["processes"], got["zombies"]) == (11, 10)
    parent = got["zombie_parents"][0]
    assert (parent["pid"], parent["comm"], parent["cmdline"], parent["cgroup"], parent["unit"]) == (
        50, "my (odd) proc", "[my (odd) proc]", "/", None)


def test_max_parents_cuts_the_list_not_the_total(make_tree):
    procs = []
    for i in range(5):
        procs.append({"pid": 100 + i, "comm": "p%d" % i})
        procs += zombies(100 + i, 1000 + 100 * i, i + 1, start=0)
    root = fake_proc(make_tree, procs)
    got = pids_detect.check(None, root=root, clk_tck=CLK, max_parents=2)
    assert [p["pid"] for p in got["zombie_parents"]] == [104, 103]
    assert (got["zombie_parents_total"], got["zombies"]) == (5, 15)


def test_without_uptime_age_comes_from_btime_and_now(make_tree):
    procs = [{"pid": 5, "comm": "x"}] + zombies(5, 10, 1, start=500)
    root = fake_proc(make_tree, procs)
    os.unlink(os.path.join(root, "proc/uptime"))
    got = pids_detect.check(None, root=root, clk_tck=CLK, now=BTIME + 65)
    assert got["zombie_parents"][0]["oldest_age_seconds"] == 60


def test_empty_root_gives_no_numbers(tmp_path):
    got = pids_detect.check(None, root=str(tmp_path))
    assert (got["processes"], got["tasks"], got["pid_max"], got["usage_percent"], got["findings"]) == (0, 0, None, None, [])


def test_registry_shape():
    for fid, entry in pids_detect.FINDINGS.items():
        assert fid.startswith("pids.")
        assert set(entry) == {"severity", "title", "remedy", "role", "tag"}


def test_owner_prefers_a_path_naming_the_unit():
    # hybrid node, podman container: the unified tree stops at the container, name=systemd names the service
    text = ("1:name=systemd:/libpod_parent/libpod-abc/system.slice/nodefix-zombie-leaker.service\n"
            "0::/libpod_parent/libpod-abc\n")
    got = pids_detect.owner(text)
    assert (got["cgroup"], got["unit"], got["in_kubepods"]) == (
        "/libpod_parent/libpod-abc/system.slice/nodefix-zombie-leaker.service", "nodefix-zombie-leaker.service", False)
    assert pids_detect.owner("") == {"cgroup": None, "unit": None, "pod_uid": None, "container_id": None,
                                     "runtime": None, "qos": None, "in_kubepods": False}


# --- persisted kernel.pid_max (sysctl.d) -------------------------------------

def test_persisted_pid_max_low_even_when_live_is_high(make_tree):
    # the node runs with 4194304 now, but 60-nodefix-pid-max.conf (applied after
    # systemd's 50-pid-max.conf) brings it back to 32768 at the next boot
    root = fake_proc(make_tree, [{"pid": 1, "comm": "systemd"}], pid_max=4194304, extra={
        "/usr/lib/sysctl.d/50-pid-max.conf": "# systemd\nkernel.pid_max = 4194304\n",
        "/etc/sysctl.d/60-nodefix-pid-max.conf": "kernel.pid_max=32768\n",
    })
    got = pids_detect.check(None, root=root, clk_tck=CLK, pid_max_min=4194304)
    assert [f["id"] for f in got["findings"]] == ["pids.pid_max_persisted_low"]
    f = got["findings"][0]
    assert f["subject"] == "/etc/sysctl.d/60-nodefix-pid-max.conf"
    assert f["evidence"] == {"persisted": 32768, "source": "/etc/sysctl.d/60-nodefix-pid-max.conf", "live": 4194304,
                             "recommended": 4194304, "assignments": [
                                 {"path": "/usr/lib/sysctl.d/50-pid-max.conf", "value": "4194304"},
                                 {"path": "/etc/sysctl.d/60-nodefix-pid-max.conf", "value": "32768"}]}
    assert f["fix"] == {"role": "nodefix.k8s.pids", "tag": "pids"}


def test_persisted_pid_max_fine_when_the_last_file_is_high(make_tree):
    root = fake_proc(make_tree, [{"pid": 1, "comm": "systemd"}], extra={
        "/etc/sysctl.d/10-old.conf": "kernel.pid_max = 32768\n",
        "/etc/sysctl.d/60-nodefix-pid-max.conf": "kernel.pid_max = 4194304\n",
    })
    got = pids_detect.check(None, root=root, clk_tck=CLK, pid_max_min=4194304)
    assert got["findings"] == []
    assert got["pid_max_persisted"]["value"] == 4194304
    assert got["pid_max_persisted"]["source"] == "/etc/sysctl.d/60-nodefix-pid-max.conf"


def test_no_sysctl_files_no_persisted_value(make_tree):
    got = pids_detect.check(None, root=fake_proc(make_tree, [{"pid": 1}]), clk_tck=CLK)
    assert got["pid_max_persisted"] == {"value": None, "source": None, "assignments": []}
    assert got["findings"] == []


def test_sysctl_order_masking_key_forms_and_sysctl_conf(make_tree):
    root = make_tree({
        # same name in /etc masks /usr/lib; the /usr/lib copy is never read
        "/usr/lib/sysctl.d/50-pid-max.conf": "kernel.pid_max = 1000\n",
        "/etc/sysctl.d/50-pid-max.conf": "; masked by the admin\n",
        # slash form and the ignore-failure prefix
        "/run/sysctl.d/70-run.conf": "-kernel/pid_max = 65536\nkernel.threads-max=1\n",
        "/usr/local/lib/sysctl.d/80-local.conf": "# kernel.pid_max = 1\nnot a key line\n",
        "/etc/sysctl.conf": "kernel.pid_max=99999\n",
        "/etc/sysctl.d/README": "kernel.pid_max = 7\n",   # not *.conf: ignored
    })
    got = pids_detect.persisted_sysctl(root, "kernel.pid_max")
    assert got["assignments"] == [{"path": "/run/sysctl.d/70-run.conf", "value": "65536"},
                                  {"path": "/etc/sysctl.conf", "value": "99999"}]
    assert (got["value"], got["source"]) == ("99999", "/etc/sysctl.conf")
    assert pids_detect.sysctl_files(root) == ["/etc/sysctl.d/50-pid-max.conf", "/run/sysctl.d/70-run.conf",
                                              "/usr/local/lib/sysctl.d/80-local.conf", "/etc/sysctl.conf"]


def test_sysctl_conf_linked_from_sysctl_d_is_read_once(make_tree):
    root = make_tree({"/etc/sysctl.conf": "kernel.pid_max = 40000\n", "/etc/sysctl.d": None})
    os.symlink("../sysctl.conf", os.path.join(root, "etc/sysctl.d/99-sysctl.conf"))
    got = pids_detect.persisted_sysctl(root, "kernel/pid_max")
    assert got["assignments"] == [{"path": "/etc/sysctl.d/99-sysctl.conf", "value": "40000"}]


def test_sysctl_key_forms():
    assert pids_detect.sysctl_key(" -kernel/pid_max ") == "kernel.pid_max"
    assert pids_detect.sysctl_key("net.ipv4.conf.eth0/1.rp_filter") == "net.ipv4.conf.eth0/1.rp_filter"
    assert pids_detect.sysctl_key("net/ipv4/conf/eth0.1/rp_filter") == "net.ipv4.conf.eth0/1.rp_filter"


def test_sysctl_file_reports_what_would_override_it(make_tree):
    # the role writes 60-nodefix-pid-max.conf (not there yet); 90-vendor.conf
    # applies after it and keeps the node low: that is what the role must refuse
    root = fake_proc(make_tree, [{"pid": 1}], extra={
        "/usr/lib/sysctl.d/50-pid-max.conf": "kernel.pid_max = 4194304\n",
        "/etc/sysctl.d/90-vendor.conf": "kernel.pid_max = 65536\n",
    })
    got = pids_detect.check(None, root=root, clk_tck=CLK, pid_max_min=4194304,
                            sysctl_file="/etc/sysctl.d/60-nodefix-pid-max.conf")
    assert got["pid_max_persisted"]["overridden_by"] == [{"path": "/etc/sysctl.d/90-vendor.conf", "value": "65536"}]
    # sorting after the vendor file, the same file would win
    got = pids_detect.check(None, root=root, clk_tck=CLK, pid_max_min=4194304,
                            sysctl_file="/etc/sysctl.d/99-nodefix-pid-max.conf")
    assert got["pid_max_persisted"]["overridden_by"] == []


def test_sysctl_file_masked_by_a_higher_priority_dir_is_overridden_by_everything(make_tree):
    # /run/sysctl.d/60-x.conf would be masked by /etc/sysctl.d/60-x.conf, so
    # writing it changes nothing: every assignment (the /etc one too) wins over it
    root = make_tree({"/etc/sysctl.d/60-x.conf": "kernel.pid_max = 65536\n",
                      "/usr/lib/sysctl.d/50-pid-max.conf": "kernel.pid_max = 4194304\n"})
    got = pids_detect.persisted_sysctl(root, "kernel.pid_max", extra="/run/sysctl.d/60-x.conf")
    assert got["overridden_by"] == got["assignments"] == [
        {"path": "/usr/lib/sysctl.d/50-pid-max.conf", "value": "4194304"},
        {"path": "/etc/sysctl.d/60-x.conf", "value": "65536"}]
    # the same name in /etc masks a /usr/lib file: only later names override it
    got = pids_detect.persisted_sysctl(root, "kernel.pid_max", extra="/etc/sysctl.d/50-pid-max.conf")
    assert pids_detect.sysctl_files(root, "/etc/sysctl.d/50-pid-max.conf")[0] == "/etc/sysctl.d/50-pid-max.conf"
    assert got["overridden_by"] == [{"path": "/etc/sysctl.d/60-x.conf", "value": "65536"}]


def test_zombie_advice_is_written_once_and_depends_on_pid1():
    init = pids_detect.zombie_advice(1)
    other = pids_detect.zombie_advice(4711)
    assert init.startswith("It is PID 1 of its container") and "tini" in init
    assert other.startswith("It is not an init") and "supercronic >= 0.2.33" in other
    assert init.endswith("Restarting it releases its zombies at once.")
