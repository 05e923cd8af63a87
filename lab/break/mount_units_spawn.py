# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Create REAL leaked-looking kubelet units inside a lab container (used by
lab/break/mount_units.yml and benchmarks/mount_units/).

    python3 mount_units_spawn.py SPEC.json EXPECT.json

SPEC: {"scopes": [{"unit": "run-r<32 hex>", "description": "...", "group": "dead"}],
       "mounts": [{"target": "/var/lib/kubelet/pods/<uid>/volume-subpaths/...",
                   "fstype": "bind" | "tmpfs", "source": "<dir for bind>", "group": "live"}],
       "parallel": 4, "timeout": 600}

- each scope is what kubelet's ``systemd-run --scope --description "Kubernetes
  transient mount for <target>"`` left behind: a real ``run-*.scope`` held by a
  ``sleep infinity`` started in the background (its own session, no inherited
  pipes, so the caller returns at once);
- each mount is a real bind (or tmpfs) mount, which systemd turns into a
  ``.mount`` unit named after the escaped path.

Already present scopes/mounts are skipped (the script can be re-run). It then
waits until every unit shows in ``systemctl list-units`` and writes EXPECT:
the unit names by group (plus "all"), for tests and the benchmark.
"""

import json
import os
import subprocess
import sys
import time


def escape_path(path):
    """``systemd-escape --path``."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "-"
    out = []
    for i, byte in enumerate(bytearray("/".join(parts).encode("utf-8"))):
        ch = chr(byte)
        if ch == "/":
            out.append("-")
        elif (byte < 128 and ch.isalnum()) or ch in ":_" or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.append("\\x%02x" % byte)
    return "".join(out)


def listed_units():
    out = subprocess.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "--full"],
                         stdout=subprocess.PIPE, check=True).stdout.decode("utf-8", "surrogateescape")
    return dict((line.split()[0], line.split()[2]) for line in out.splitlines() if line.strip())


def mounted():
    points = set()
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            points.add(line.split(" ")[4].replace("\\040", " "))
    return points


def in_scope(pid, unit):
    """True once the process ``pid`` runs in ``unit``'s cgroup (systemd-run moves itself there, then execs)."""
    try:
        with open("/proc/%d/cgroup" % pid) as fh:
            return ("/%s.scope" % unit) in fh.read()
    except (IOError, OSError):
        return False


def spawn_scopes(scopes, parallel, present, timeout=60):
    """systemd-run --scope ... sleep infinity, ``parallel`` at a time.

    Completion is seen in /proc/<pid>/cgroup, not in systemd-run's "Running
    scope as unit" message (systemd 257 no longer prints it when stderr is not
    a terminal).
    """
    pending = [s for s in scopes if present.get(s["unit"] + ".scope") != "active"]
    running = []
    started = 0
    while pending or running:
        while pending and len(running) < parallel:
            s = pending.pop(0)
            p = subprocess.Popen(["systemd-run", "--quiet", "--scope", "--unit", s["unit"], "--description",
                                  s["description"], "sleep", "infinity"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            running.append((s, p, time.time()))
        still = []
        for s, p, t0 in running:
            if in_scope(p.pid, s["unit"]):
                started += 1
            elif p.poll() is not None:
                raise SystemExit("systemd-run for %s failed (rc=%s)" % (s["unit"], p.returncode))
            elif time.time() - t0 > timeout:
                raise SystemExit("systemd-run for %s did not start its scope in %d s" % (s["unit"], timeout))
            else:
                still.append((s, p, t0))
        if len(still) == len(running):
            time.sleep(0.002)
        running = still
    return started


def make_mounts(mounts):
    have = mounted()
    made = 0
    for m in mounts:
        target = m["target"]
        if target in have:
            continue
        os.makedirs(target, exist_ok=True)
        if m.get("fstype", "bind") == "tmpfs":
            argv = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", target]
        else:
            os.makedirs(m["source"], exist_ok=True)
            argv = ["mount", "--bind", m["source"], target]
        subprocess.run(argv, check=True)
        made += 1
    return made


def age_dead_pods(mounts, age=86400):
    """Dead pods died a while ago: their ``pods/<uid>`` directories (made just now for their mounts) get
    a day-old time - a fresh one is a pod kubelet may still be starting, which the cleanup keeps."""
    now = time.time()
    for m in mounts:
        if m.get("group") != "dead" or "/pods/" not in m["target"]:
            continue
        head, rest = m["target"].split("/pods/", 1)
        pod = os.path.join(head + "/pods", rest.split("/", 1)[0])
        for path in (pod, os.path.join(pod, "volumes")):
            if os.path.isdir(path):
                os.utime(path, (now - age, now - age))


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[0]) as fh:
        spec = json.load(fh)
    t0 = time.time()
    scopes = spec.get("scopes", [])
    mounts = spec.get("mounts", [])
    made = make_mounts(mounts)
    age_dead_pods(mounts)
    started = spawn_scopes(scopes, int(spec.get("parallel", 4)), listed_units())
    expect = {"all": []}
    for s in scopes:
        expect.setdefault(s.get("group", "other"), []).append(s["unit"] + ".scope")
        expect["all"].append(s["unit"] + ".scope")
    for m in mounts:
        name = escape_path(m["target"]) + ".mount"
        expect.setdefault(m.get("group", "other"), []).append(name)
        expect["all"].append(name)
    deadline = time.time() + float(spec.get("timeout", 600))
    while True:
        present = listed_units()
        missing = [u for u in expect["all"] if present.get(u) != "active"]
        if not missing:
            break
        if time.time() > deadline:
            raise SystemExit("%d units never became active, e.g. %s" % (len(missing), missing[:3]))
        time.sleep(0.5)
    expect["created"] = {"scopes": started, "mounts": made, "seconds": round(time.time() - t0, 2)}
    with open(argv[1], "w") as fh:
        json.dump(expect, fh, indent=1, sort_keys=True)
    sys.stdout.write(json.dumps(expect["created"]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
