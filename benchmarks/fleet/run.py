#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet benchmark: what one controller spends per node on nodefix.k8s.audit, and the levers.

    . scripts/env.sh && python benchmarks/fleet/run.py --sizes 10,50,100,200 --forks 20 \\
        --sweep-forks 5,10,20,40 --sweep-n 100 --levers 50 \\
        --json benchmarks/fleet/podman.json [--png benchmarks/fleet/podman.png]

The nodes are containers of the lab's Debian 12 image (localhost/nodefix-debian12, scripts/setup.sh
builds it), unprivileged, running `sleep infinity` (not systemd: each systemd takes inotify
instances, and the kernel's default of 128 per user stops the ~26th container from booting; the
benchmark does not change the machine's limits), reached through the containers.podman.podman
connection plugin (a real connection: every module round trip is a `podman exec`). Each has the
kubelet test double's kubeadm layout planted (lab/kubelet-double: unit, drop-in, config.yaml,
flags file, the double as /usr/bin/kubelet), so the kubelet detector reads a real config; with no
systemd, containerd or runsc, the detectors that ask systemd or those binaries report that they
could not, quickly - the node-side seconds are a lower bound of a real node's, the controller's
cost per node (what this measures) is the same. The audit is the collection's playbook, unchanged.

Per run: wall seconds; controller CPU seconds (user+sys of ansible-playbook and every process it
started - the podman CLI of each exec included - per node); node-side CPU seconds (the
containers' own cgroups, cpuacct.usage, per node); the peak RSS of the largest controller
process; the report play's time (its audit_report task). Levers, each against the default at the
same size in the same run: pipelining, strategy free (each alone and both together;
--levers-together-only: together only), forks. Pipelining is measured through the
lab's nodefix_podman connection (lab/connection_plugins: containers.podman.podman with
`podman exec -i`): containers.podman.podman itself has pipelining off whatever ANSIBLE_PIPELINING
says, so setting the variable alone measures nothing. The node_audit payload (AnsiballZ
file) size is read from a node. It needs the machine to itself (one podman job at a time: it
takes the project's lab lock). Numbers, not assertions: it checks its own result only (every
node in the report, no node unreachable).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from measure import lab_lock, write_json  # noqa: E402  pylint: disable=wrong-import-position
IMAGE = "localhost/nodefix-debian12"
PREFIX = "nodefix-fleet-"
KUBEADM_FILES = ["lib/systemd/system/kubelet.service", "etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
                 "var/lib/kubelet/config.yaml", "var/lib/kubelet/kubeadm-flags.env", "etc/default/kubelet"]


def sh(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def node_tar(path):
    """The kubelet double (as /usr/bin/kubelet), its version and the kubeadm layout's files."""
    src = os.path.join(ROOT, "lab", "kubelet-double")
    with tarfile.open(path, "w") as tar:
        for rel in KUBEADM_FILES:
            tar.add(os.path.join(src, "layouts", "kubeadm", rel), arcname=rel)
        with open(os.path.join(src, "kubelet"), "rb") as fh:
            double = b"#!/usr/bin/python3\n" + fh.read()
        for name, data, mode in (("usr/bin/kubelet", double, 0o755), ("etc/kubelet-double/version", b"1.29.3\n", 0o644)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, fileobj=_Bytes(data))


class _Bytes:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def read(self, n=-1):
        out = self.data[self.pos:] if n < 0 else self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out


def start_nodes(first, n, tar):
    """Lightweight nodes: the lab image running `sleep infinity` (no systemd: systemd in a container
    takes inotify instances, and 128 per user - the kernel default here - stop the ~26th from
    booting), with the kubelet double's unit, drop-in, config and flags planted."""
    names = ["%s%04d" % (PREFIX, i) for i in range(first, first + n)]
    with open(tar, "rb") as fh:
        data = fh.read()
    for name in names:
        sh(["podman", "run", "-d", "--name", name, "--hostname", name, IMAGE, "sleep", "infinity"])
        subprocess.run(["podman", "exec", "-i", name, "tar", "-xf", "-", "-C", "/"], input=data, check=True,
                       capture_output=True)
    return names


def stop_nodes(prefix=PREFIX):
    """Remove every container whose name starts with PREFIX (this benchmark's, or ssh.py's)."""
    names = sh(["podman", "ps", "-a", "--format", "{{.Names}}"]).split()
    fleet = [n for n in names if n.startswith(prefix)]
    if fleet:
        subprocess.run(["podman", "rm", "-f", "-t", "0"] + fleet, capture_output=True, check=False)


def cgroup_paths(names):
    """{name: cgroup path} of the containers, one `podman inspect`."""
    out = sh(["podman", "inspect", "--format", "{{.Name}} {{.State.CgroupPath}}"] + list(names))
    return dict(line.split(None, 1) for line in out.splitlines())


def cgroup_seconds(paths):
    """CPU seconds the cgroups at PATHS ({name: path}) have used (cgroup v1 cpuacct or v2 cpu.stat)."""
    total = 0.0
    for name, path in paths.items():
        v1 = [p for p in ("/sys/fs/cgroup/%s%s/cpuacct.usage" % (c, path) for c in ("cpu,cpuacct", "cpuacct"))
              if os.path.exists(p)]
        v2 = "/sys/fs/cgroup%s/cpu.stat" % path
        if v1:
            with open(v1[0]) as fh:
                total += int(fh.read()) / 1e9
        elif os.path.exists(v2):
            with open(v2) as fh:
                total += int(dict(line.split() for line in fh)["usage_usec"]) / 1e6
        else:
            raise SystemExit("no CPU accounting file for %s (cgroup %s)" % (name, path))
    return total


def cgroup_cpu(names):
    return cgroup_seconds(cgroup_paths(names))


def inventory(path, names, connection="containers.podman.podman"):
    hosts = dict((n, {"ansible_connection": connection, "ansible_python_interpreter": "/usr/bin/python3",
                      "ansible_remote_tmp": "/root/.ansible/tmp", "nodefix_become": False}) for n in names)
    with open(path, "w") as fh:
        json.dump({"all": {"children": {"k8s_nodes": {"hosts": hosts}}}}, fh)


def audit(inv, names, forks, env_extra, tmp):
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "tests", "callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED="nodefix_task_times", NODEFIX_TASK_TIMES=os.path.join(tmp, "tasks.jsonl"),
               ANSIBLE_NOCOLOR="1")
    env.update(env_extra)
    connection = "nodefix_podman" if env_extra.get("ANSIBLE_PIPELINING") else "containers.podman.podman"
    inventory(inv, names, connection)
    if os.path.exists(env["NODEFIX_TASK_TIMES"]):
        os.unlink(env["NODEFIX_TASK_TIMES"])
    reports = os.path.join(tmp, "reports")
    node0 = cgroup_cpu(names)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    extra = json.dumps({"nodefix_report_dir": reports, "nodefix_targets": "k8s_nodes"})
    proc = subprocess.run(["ansible-playbook", "-i", inv, "-e", extra, "nodefix.k8s.audit"], env=env,
                          capture_output=True, text=True, check=False)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    node1 = cgroup_cpu(names)
    if proc.returncode != 0:
        raise SystemExit("audit failed (rc %s):\n%s" % (proc.returncode, proc.stdout[-3000:]))
    with open(os.path.join(reports, "audit", "report.json")) as fh:
        report = json.load(fh)
    if report["totals"]["nodes"] != len(names) or report["totals"]["nodes_in_error"]:
        raise SystemExit("the report has %s nodes, %s in error (expected %d, 0)" % (
            report["totals"]["nodes"], report["totals"]["nodes_in_error"], len(names)))
    report_task = 0.0
    with open(env["NODEFIX_TASK_TIMES"]) as fh:
        for line in fh:
            entry = json.loads(line)
            if entry["task"].startswith("Write JSON, Markdown"):
                report_task = entry["seconds"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"nodes": len(names), "forks": forks, "env": env_extra, "wall_seconds": round(wall, 2),
            "controller_cpu_seconds": round(cpu, 2), "controller_cpu_per_node": round(cpu / len(names), 3),
            "node_cpu_per_node": round((node1 - node0) / len(names), 3),
            "peak_controller_rss_mib": round(after.ru_maxrss / 1024.0, 1), "report_task_seconds": report_task,
            "nodes_per_minute": round(60.0 * len(names) / wall, 1)}


def payload_size(name, tmp):
    """The AnsiballZ file of node_audit as it lands on a node: its own inventory through
    containers.podman.podman (no pipelining, so the file is written and KEEP_REMOTE_FILES keeps it)."""
    inv = os.path.join(tmp, "payload-inventory.json")
    inventory(inv, [name], "containers.podman.podman")
    env = dict(os.environ, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_PIPELINING="0")
    subprocess.run(["ansible", "-i", inv, name, "-m", "nodefix.k8s.node_audit"], env=env, capture_output=True,
                   check=False)
    out = subprocess.run(["podman", "exec", name, "sh", "-c",
                          "find /root/.ansible/tmp -name 'AnsiballZ_node_audit.py' -printf '%s\\n' | head -1"],
                         capture_output=True, text=True, check=False).stdout.strip()
    subprocess.run(["podman", "exec", name, "rm", "-rf", "/root/.ansible/tmp"], capture_output=True, check=False)
    return int(out) if out else None


def line(r):
    levers = ",".join("%s=%s" % (k.replace("ANSIBLE_", "").lower(), v) for k, v in sorted(r["env"].items())) or "default"
    return ("%4d nodes forks %3d %-22s wall %7.1f s  %6.1f nodes/min  controller %.2f s/node  node %.2f s/node  "
            "peak RSS %5.0f MiB  report task %5.1f s" % (
                r["nodes"], r["forks"], levers, r["wall_seconds"], r["nodes_per_minute"], r["controller_cpu_per_node"],
                r["node_cpu_per_node"], r["peak_controller_rss_mib"], r["report_task_seconds"]))


# the levers at --levers nodes, each against the default: pipelining (the lab's nodefix_podman connection),
# strategy free, both together (--levers-together-only: the last alone)
LEVER_SETS = ({"ANSIBLE_PIPELINING": "1"}, {"ANSIBLE_STRATEGY": "free"},
              {"ANSIBLE_PIPELINING": "1", "ANSIBLE_STRATEGY": "free"})


def fleet_args(doc, sizes, sweep_help):
    """The options both fleet benchmarks take (this one and ssh.py): sizes, forks and their sweep,
    the result file, the plot and a re-plot from an earlier result."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=sizes)
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--sweep-forks", default="", help=sweep_help)
    ap.add_argument("--sweep-n", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--replot", metavar="JSON", help="only draw --png from an earlier run's --json")
    return ap


def main():
    ap = fleet_args(__doc__, "10,50,100", "forks values to try at --sweep-n nodes")
    ap.add_argument("--levers", type=int, default=0, help="at this many nodes: pipelining, strategy free")
    ap.add_argument("--levers-together-only", action="store_true",
                    help="at --levers nodes only pipelining and strategy free together beside the default, not each "
                    "alone (the test command's smoke run: each lever's code path in one run)")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as fh:
            plot(json.load(fh)["runs"], args.png, args.forks)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    runs = []
    _lock = lab_lock()  # held until the run ends
    with tempfile.TemporaryDirectory() as tmp:
        tar = os.path.join(tmp, "node.tar")
        node_tar(tar)
        inv = os.path.join(tmp, "inventory.json")
        stop_nodes()
        try:
            names = []
            plan = sorted(set(sizes + ([args.sweep_n] if args.sweep_n else []) + ([args.levers] if args.levers else [])))
            for n in plan:
                t0 = time.time()
                names += start_nodes(len(names), n - len(names), tar) if n > len(names) else []
                nodes = names[:n]
                print("%d nodes up in %.0f s" % (n, time.time() - t0), flush=True)
                if n in sizes:
                    runs.append(audit(inv, nodes, args.forks, {}, tmp))
                    print(line(runs[-1]), flush=True)
                if n == args.sweep_n:
                    for forks in [int(f) for f in args.sweep_forks.split(",") if f]:
                        if forks != args.forks or n not in sizes:
                            runs.append(audit(inv, nodes, forks, {}, tmp))
                            print(line(runs[-1]), flush=True)
                if n == args.levers:
                    for extra in LEVER_SETS[-1:] if args.levers_together_only else LEVER_SETS:
                        if n not in sizes:
                            runs.append(audit(inv, nodes, args.forks, {}, tmp))
                            print(line(runs[-1]), flush=True)
                        runs.append(audit(inv, nodes, args.forks, extra, tmp))
                        print(line(runs[-1]), flush=True)
            payload = payload_size(names[0], tmp) if names else None
            print("node_audit payload (AnsiballZ): %s bytes" % payload)
        finally:
            stop_nodes()
    result = {"runs": runs, "payload_bytes": payload, "cores": os.cpu_count(), "image": IMAGE}
    if args.json:
        write_json(args.json, result)
    if args.png:
        plot(runs, args.png, args.forks)
    return 0


def plot(runs, png, forks):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from plotting import pyplot, save  # pylint: disable=import-outside-toplevel
    base = [r for r in runs if not r["env"] and r["forks"] == forks]
    fig, (ax1, ax2) = pyplot().subplots(1, 2, figsize=(10, 4))
    xs = [r["nodes"] for r in base]
    ax1.plot(xs, [r["wall_seconds"] for r in base], "o-", label="wall (forks %d)" % forks)
    ax1.plot(xs, [r["controller_cpu_seconds"] for r in base], "s--", label="controller CPU")
    ax1.set_xlabel("nodes")
    ax1.set_ylabel("seconds")
    ax1.legend()
    ax1.grid(alpha=0.3)
    sweep = sorted((r for r in runs if not r["env"] and r["nodes"] == max(r2["nodes"] for r2 in runs if r2["forks"] != forks)),
                   key=lambda r: r["forks"]) if any(r["forks"] != forks for r in runs) else []
    if sweep:
        ax2.plot([r["forks"] for r in sweep], [r["wall_seconds"] for r in sweep], "o-")
        ax2.set_xlabel("forks (%d nodes)" % sweep[0]["nodes"])
        ax2.set_ylabel("wall seconds")
        ax2.grid(alpha=0.3)
    fig.suptitle("nodefix.k8s.audit on one 2-core controller (podman connection)")
    save(fig, png)


if __name__ == "__main__":
    sys.exit(main())
