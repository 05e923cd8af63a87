#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet benchmark over SSH: what one controller spends per node on nodefix.k8s.audit, beside
Ansible's own floor (ansible.builtin.ping and ansible.builtin.raw) on the same nodes, connection
and forks, in the same run.

    . scripts/env.sh && python benchmarks/fleet/ssh.py --sizes 10,50,200 --forks 20 \\
        --sweep-forks 5,10,40 --sweep-n 50 --json benchmarks/fleet/results.json \\
        [--png benchmarks/fleet/scaling.png]

The nodes: unprivileged containers of the lab's Debian 12 image with Debian's openssh-server added
(localhost/nodefix-sshnode, built here from localhost/nodefix-debian12 and cached by a recipe
label), each running a real `sshd -D` as its main process at its own address on podman's bridge
network (nothing leaves the machine: the controller connects from this host to the bridge). Keys
are made per run: one client key, one host key per node, and a known_hosts file holding each
node's - host key checking stays ON, as on a real fleet. Each node has the kubelet test double's
kubeadm layout planted (as benchmarks/fleet/run.py does), so the kubelet detector reads a real
config; with no systemd, containerd or runsc in these nodes the detectors that ask them report
that they could not, quickly: the node-side seconds are a lower bound of a real node's; the
controller's cost per node, what this measures, is the same. The audit is the collection's
playbook, unchanged, through Ansible's own ssh connection plugin with its default ssh_args
(-C -o ControlMaster=auto -o ControlPersist=60s).

Each run is measured by benchmarks/measure.py, a child subreaper (PR_SET_CHILD_SUBREAPER): the
ControlPersist masters that ssh leaves behind are reparented to it, ended and reaped when the
playbook returns, so the controller CPU seconds are ansible-playbook's, every ssh client's AND
every master's (user + sys); the peak RSS is the largest of those processes in that run; and the
main process's own CPU seconds (callback_plugins/nodefix_main_cpu.py): the strategy's single
process, which bounds a run however many cores the controller has. Node-side
CPU is the containers' own cgroups (sshd, the module's Python). The same nodes serve every run of
a size; the masters of one run are gone before the next starts.

Per size, side by side: raw, ping and the audit, each with pipelining off (Ansible's default) and
on, and with ControlPersist's socket directory as Ansible sets it (ANSIBLE_HOME/cp, on disk) and
on tmpfs (/dev/shm); forks swept at one size. The ratio audit/ping (same settings) is the audit's
cost over the floor. Numbers, not assertions: it checks its own result only (every node in the
report, none unreachable or failed). It needs the machine to itself (the project's lab lock).
"""

import configparser
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import ROOT, cgroup_seconds, fleet_args, node_tar, stop_nodes as run_stop_nodes  # noqa: E402  pylint: disable=wrong-import-position
from measure import lab_lock, write_json  # noqa: E402  pylint: disable=wrong-import-position

BASE = "localhost/nodefix-debian12"
IMAGE = "localhost/nodefix-sshnode"
PREFIX = "nodefix-sshfleet-"
FLOOR = os.path.join(HERE, "floor.yml")
MEASURE = os.path.join(os.path.dirname(HERE), "measure.py")
IMAGE_RECIPE = ("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server "
                ">/dev/null && rm -f /etc/ssh/ssh_host_*")
# the node: its files from the mounted tar, the run's keys, then sshd in the foreground as PID 1's
# only child (no PAM: pam_loginuid cannot write the loginuid in an unprivileged container)
NODE_CMD = ("tar -xf /nodefix/node.tar -C / && mkdir -p /run/sshd /root/.ssh && "
            "cp /nodefix/authorized_keys /root/.ssh/authorized_keys && chmod 700 /root/.ssh && "
            "chmod 600 /root/.ssh/authorized_keys && exec /usr/sbin/sshd -D -e -o UsePAM=no "
            "-o HostKey=/nodefix-host/key -o PermitRootLogin=prohibit-password -o MaxStartups=200")


def sh(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


# --- the node image ---------------------------------------------------------------------------

def build_image(base=BASE, image=IMAGE, recipe=IMAGE_RECIPE):
    """localhost/nodefix-sshnode: the lab's Debian 12 image with Debian's openssh-server (no host
    keys: each node gets its own per run); rebuilt when the base image or the recipe changes (IMAGE
    made from BASE by the shell command RECIPE, kex.py's Debian 13 one too)."""
    base_id = sh(["podman", "image", "inspect", "--format", "{{.Id}}", base]).strip()
    want = hashlib.sha256((base_id + recipe).encode()).hexdigest()[:16]
    have = subprocess.run(["podman", "image", "inspect", "--format", '{{index .Labels "nodefix.recipe"}}', image],
                          capture_output=True, text=True, check=False).stdout.strip()
    if have == want:
        return
    name = PREFIX + "image-build"
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, check=False)
    try:
        sh(["podman", "run", "--name", name, base, "sh", "-c", recipe])
        sh(["podman", "commit", "-q", "--change", "CMD [\"/usr/sbin/sshd\", \"-D\"]",
            "--change", "LABEL nodefix.recipe=" + want, name, image])
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True, check=False)


# --- the nodes ----------------------------------------------------------------------------------

def keygen(path):
    sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", path])
    with open(path + ".pub") as fh:
        return fh.read().strip()


def start_nodes(first, n, tmp):
    """N containers, each a real sshd at its own address with its own host key. Returns
    [(name, address, cgroup path, host public key)]."""
    names = ["%s%04d" % (PREFIX, i) for i in range(first, first + n)]
    pubs = {}
    for name in names:
        keydir = os.path.join(tmp, "hostkeys", name)
        os.makedirs(keydir)
        pubs[name] = keygen(os.path.join(keydir, "key"))
        sh(["podman", "run", "-d", "--name", name, "--hostname", name,
            "-v", "%s:/nodefix:ro" % os.path.join(tmp, "node"), "-v", "%s:/nodefix-host:ro" % keydir,
            IMAGE, "sh", "-c", NODE_CMD])
    fmt = "{{.Name}} {{.NetworkSettings.IPAddress}} {{.State.CgroupPath}}"
    rows = dict((line.split()[0], line.split()[1:]) for line in sh(["podman", "inspect", "--format", fmt] + names).splitlines())
    nodes = [(name, rows[name][0], rows[name][1], pubs[name]) for name in names]
    for name, addr, _cg, _pub in nodes:
        wait_port(name, addr)
    return nodes


def wait_port(name, addr, timeout=60):
    end = time.time() + timeout
    while True:
        try:
            with socket.create_connection((addr, 22), timeout=2) as conn:
                if conn.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.time() > end:
            logs = subprocess.run(["podman", "logs", name], capture_output=True, text=True, check=False)
            raise SystemExit("sshd of %s (%s) did not answer in %d s:\n%s%s" % (name, addr, timeout, logs.stdout, logs.stderr))
        time.sleep(0.2)


def stop_nodes():
    run_stop_nodes(PREFIX)


def cgroup_cpu(nodes):
    """CPU seconds the nodes' cgroups have used, read directly (their paths looked up at start)."""
    return cgroup_seconds(dict((name, path) for name, _addr, path, _pub in nodes))


def inventory(path, nodes, tmp):
    common = "-o UserKnownHostsFile=%s -o IdentitiesOnly=yes" % os.path.join(tmp, "known_hosts")
    hosts = dict((name, {"ansible_host": addr, "ansible_user": "root", "ansible_connection": "ansible.builtin.ssh",
                         "ansible_ssh_private_key_file": os.path.join(tmp, "client"),
                         "ansible_ssh_common_args": common, "ansible_python_interpreter": "/usr/bin/python3",
                         "nodefix_become": False})
                 for name, addr, _cg, _pub in nodes)
    with open(path, "w") as fh:
        json.dump({"all": {"children": {"k8s_nodes": {"hosts": hosts}}}}, fh)
    with open(os.path.join(tmp, "known_hosts"), "w") as fh:
        fh.writelines("%s %s\n" % (addr, pub) for _name, addr, _cg, pub in nodes)


# --- one measured run ---------------------------------------------------------------------------

def run_one(kind, nodes, forks, pipelining, cpdir, tmp, lever=None):
    """One playbook over NODES: kind audit (nodefix.k8s.audit), ping or raw (floor.yml); LEVER one
    of LEVERS, or None for Ansible's defaults."""
    inv = os.path.join(tmp, "inventory.json")
    inventory(inv, nodes, tmp)
    reports, times = os.path.join(tmp, "reports"), os.path.join(tmp, "tasks.jsonl")
    shutil.rmtree(reports, ignore_errors=True)
    if os.path.exists(times):
        os.unlink(times)
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_PIPELINING=str(int(pipelining)), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOST_KEY_CHECKING="True",
               ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "tests", "callback_plugins") + ":" + os.path.join(HERE, "callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED="nodefix_task_times,nodefix_main_cpu", NODEFIX_TASK_TIMES=times,
               NODEFIX_MAIN_CPU=os.path.join(tmp, "main-cpu.json"))
    if os.path.exists(env["NODEFIX_MAIN_CPU"]):
        os.unlink(env["NODEFIX_MAIN_CPU"])
    if cpdir == "tmpfs":
        env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = tempfile.mkdtemp(prefix="nodefix-cp-", dir="/dev/shm")
    env.update(lever_env(lever, tmp))
    extra = json.dumps({"nodefix_report_dir": reports, "nodefix_targets": "k8s_nodes"})
    argv = ["ansible-playbook", "-i", inv, "-e", extra]
    argv += ["nodefix.k8s.audit"] if kind == "audit" else ["--tags", kind, FLOOR]
    out = os.path.join(tmp, "measure.json")
    node0 = cgroup_cpu(nodes)
    subprocess.run([sys.executable, MEASURE, out, "--"] + argv, env=env, check=True)
    node1 = cgroup_cpu(nodes)
    if cpdir == "tmpfs":
        shutil.rmtree(env["ANSIBLE_SSH_CONTROL_PATH_DIR"], ignore_errors=True)
    with open(out) as fh:
        m = json.load(fh)
    with open(out + ".log") as fh:
        log = fh.read()
    check(kind, m, log, reports, len(nodes))
    report_task = 0.0
    if os.path.exists(times):
        with open(times) as fh:
            report_task = sum(t["seconds"] for t in map(json.loads, fh) if t["task"].startswith("Write JSON, Markdown"))
    with open(env["NODEFIX_MAIN_CPU"]) as fh:
        main = json.load(fh)
    n = len(nodes)
    return {"nodes": n, "kind": kind, "forks": forks, "pipelining": pipelining, "control_path_dir": cpdir,
            "lever": lever or "default",
            "wall_seconds": round(m["wall"], 2), "controller_cpu_seconds": round(m["cpu"], 2),
            "controller_cpu_per_node": round(m["cpu"] / n, 4),
            "main_process_cpu_seconds": round(main["user"] + main["sys"], 2), "node_cpu_per_node": round((node1 - node0) / n, 4),
            "peak_controller_rss_mib": round(m["maxrss_kib"] / 1024.0, 1), "controlpersist_masters": m["daemons"],
            "report_task_seconds": round(report_task, 2), "nodes_per_minute": round(60.0 * n / m["wall"], 1)}


# Ansible and OpenSSH settings a user can change, measured one at a time (a+b: together) against
# the defaults:
#   kex      ssh's key exchange curve25519-sha256 (classical) instead of OpenSSH 9.x's default
#            sntrup761x25519-sha512 (post-quantum hybrid), whose key generation on the controller
#            is the larger part of setting up each node's ControlPersist master
#   poll     internal_poll_interval 0.01 (Ansible's 0.001: how often the strategy's main loop wakes
#            for results while the workers run; an ini-only setting)
#   nocomp   ssh_args without -C (Ansible's default asks ssh for zlib compression)
#   forks    forks = the nodes of the run (one batch: the linear strategy's main loop no longer
#            waits for a free worker, which it does by polling every 0.1 ms)
#   before   the audit with the collection as it was at --before REV (a git archive of it first on
#            the collections path): a change to the collection measured before/after in one run
SSH_ARGS_DEFAULT = ["-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s"]
LEVERS = {"kex": ({}, ["-o", "KexAlgorithms=curve25519-sha256,curve25519-sha256@libssh.org"]),
          "poll": ({"internal_poll_interval": "0.01"}, []),
          "nocomp": ({}, None), "forks": ({}, []), "before": ({}, [])}


def lever_env(lever, tmp):
    """The environment of LEVER: ssh_args through ANSIBLE_SSH_ARGS, ini settings through a copy of
    the project's ansible.cfg."""
    if not lever:
        return {}
    env, ini, ssh_args = {}, {}, list(SSH_ARGS_DEFAULT)
    if "before" in lever.split("+"):
        before = os.path.join(tmp, "before")
        if not os.path.isdir(before):
            raise SystemExit("the lever 'before' needs --before REV")
        env["ANSIBLE_COLLECTIONS_PATH"] = before + ":" + os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")
    for name in lever.split("+"):
        settings, args = LEVERS[name]
        ini.update(settings)
        if args is None:
            ssh_args.remove("-C")
        else:
            ssh_args += args
    if ssh_args != SSH_ARGS_DEFAULT:
        env["ANSIBLE_SSH_ARGS"] = " ".join(ssh_args)
    if ini:
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read(os.environ.get("ANSIBLE_CONFIG") or os.path.join(ROOT, "ansible.cfg"))
        cfg["defaults"].update(ini)
        for key in ("collections_path", "roles_path", "connection_plugins", "inventory"):
            if key in cfg["defaults"]:
                cfg["defaults"][key] = ":".join(os.path.join(ROOT, p) for p in cfg["defaults"][key].split(":"))
        path = os.path.join(tmp, "ansible-%s.cfg" % lever)
        with open(path, "w") as fh:
            cfg.write(fh)
        env["ANSIBLE_CONFIG"] = path
    return env


def check(kind, m, log, reports, n):
    """Every node answered: the recap's lines (floor) or the report (audit)."""
    if m["rc"] != 0:
        raise SystemExit("%s failed (rc %s):\n%s" % (kind, m["rc"], log[-3000:]))
    ok = len(re.findall(r"^%s\S*\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0" % PREFIX, log, re.M))
    if ok != n:
        raise SystemExit("%s: %d of %d nodes ok in the recap:\n%s" % (kind, ok, n, log[-3000:]))
    if kind == "audit":
        with open(os.path.join(reports, "audit", "report.json")) as fh:
            totals = json.load(fh)["totals"]
        if totals["nodes"] != n or totals["nodes_in_error"]:
            raise SystemExit("the report has %s nodes, %s in error (expected %d, 0)" % (
                totals["nodes"], totals["nodes_in_error"], n))


def line(r):
    return ("%4d nodes %-5s %-16s forks %3d pipelining %-3s cp %-7s wall %7.1f s %7.1f nodes/min  controller %.3f s/node "
            "(main process %.1f s)  node %.3f s/node  peak RSS %4.0f MiB  masters %d" % (
                r["nodes"], r["kind"], r["lever"], r["forks"], "on" if r["pipelining"] else "off", r["control_path_dir"],
                r["wall_seconds"], r["nodes_per_minute"], r["controller_cpu_per_node"], r["main_process_cpu_seconds"],
                r["node_cpu_per_node"], r["peak_controller_rss_mib"], r["controlpersist_masters"]))


# --- the plan -------------------------------------------------------------------------------------

# per size: the floor and the audit, pipelining off (Ansible's default) and on, the socket directory
# as Ansible sets it; then pipelining on with the socket directory on tmpfs
VARIANTS = [(kind, pipe, "default") for pipe in (False, True) for kind in ("raw", "ping", "audit")] + \
    [(kind, True, "tmpfs") for kind in ("ping", "audit")]


def ratios(runs):
    """audit / ping and audit / raw controller CPU per node, per size and settings (the floor of the
    same run, the same nodes and settings)."""
    keys = ("nodes", "forks", "pipelining", "control_path_dir", "lever")
    out = []
    for r in runs:
        if r["kind"] != "audit":
            continue
        row = dict((k, r[k]) for k in keys)
        row["audit_cpu_per_node"] = r["controller_cpu_per_node"]
        for kind in ("ping", "raw"):
            floor = [f for f in runs if f["kind"] == kind and all(f[k] == r[k] for k in keys)]
            if floor:
                row["%s_cpu_per_node" % kind] = floor[0]["controller_cpu_per_node"]
                row["audit_over_%s" % kind] = round(r["controller_cpu_per_node"] / floor[0]["controller_cpu_per_node"], 2)
        out.append(row)
    return out


def main():
    ap = fleet_args(__doc__, "10,50,200", "forks values to try at --sweep-n nodes (audit and ping, pipelining on)")
    ap.add_argument("--kinds", default="raw,ping,audit", help="which of raw, ping, audit to run")
    ap.add_argument("--pipelined-only", action="store_true",
                    help="per size only the pipelined runs with the default socket directory (the test command's smoke run)")
    ap.add_argument("--levers", default="", help="comma-separated LEVERS (a+b: together) to run at --levers-n nodes, "
                    "ping and audit, pipelining on, beside the defaults")
    ap.add_argument("--levers-n", type=int, default=0)
    ap.add_argument("--before", metavar="REV", help="the collection at this git revision, for the lever 'before'")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as fh:
            plot(json.load(fh), args.png)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    kinds = args.kinds.split(",")
    _lock = lab_lock()  # held until the run ends
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "node"))
        node_tar(os.path.join(tmp, "node", "node.tar"))
        with open(os.path.join(tmp, "node", "authorized_keys"), "w") as fh:
            fh.write(keygen(os.path.join(tmp, "client")) + "\n")
        if args.before:
            dest = os.path.join(tmp, "before", "ansible_collections", "nodefix", "k8s")
            os.makedirs(dest)
            archive = subprocess.run(["git", "-C", ROOT, "archive", args.before], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
        t0 = time.time()
        build_image()
        print("node image ready in %.0f s" % (time.time() - t0), flush=True)
        stop_nodes()
        try:
            nodes = []
            for n in sorted(set(sizes + [m for m in (args.sweep_n, args.levers_n) if m])):
                t0 = time.time()
                nodes += start_nodes(len(nodes), n - len(nodes), tmp) if n > len(nodes) else []
                print("%d nodes up in %.0f s" % (n, time.time() - t0), flush=True)
                todo = [v for v in VARIANTS if v[0] in kinds and (not args.pipelined_only or v[1:3] == (True, "default"))] \
                    if n in sizes else []
                todo += [(kind, True, "default", f) for f in map(int, filter(None, args.sweep_forks.split(",")))
                         for kind in ("ping", "audit") if kind in kinds] if n == args.sweep_n else []
                todo += [(kind, True, "default", args.forks, lever) for lever in ([None] if n not in sizes else []) +
                         list(filter(None, args.levers.split(","))) for kind in ("raw", "ping", "audit") if kind in kinds
                         and (kind == "audit" or "before" not in (lever or "").split("+"))] \
                    if n == args.levers_n else []
                for variant in todo:
                    kind, pipe, cpdir = variant[:3]
                    lever = variant[4] if len(variant) > 4 else None
                    forks = n if "forks" in (lever or "").split("+") else variant[3] if len(variant) > 3 else args.forks
                    runs.append(run_one(kind, nodes[:n], forks, pipe, cpdir, tmp, lever))
                    print(line(runs[-1]), flush=True)
        finally:
            stop_nodes()
    result = {"connection": "ansible.builtin.ssh", "runs": runs, "audit_over_floor": ratios(runs),
              "before": args.before, "after": sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip(),
              "cores": os.cpu_count(), "image": IMAGE,
              "ansible_core": sh(["ansible", "--version"]).splitlines()[0],
              "openssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()}
    for r in result["audit_over_floor"]:
        print("%4d nodes forks %3d pipelining %-3s cp %-7s %-16s audit/ping %s  audit/raw %s" % (
            r["nodes"], r["forks"], "on" if r["pipelining"] else "off", r["control_path_dir"], r["lever"],
            r.get("audit_over_ping", "-"), r.get("audit_over_raw", "-")))
    if args.json:
        write_json(args.json, result)
    if args.png:
        plot(result, args.png)
    return 0


def plot(result, png):
    sys.path.insert(0, os.path.dirname(HERE))
    from plotting import pyplot, save  # pylint: disable=import-outside-toplevel
    runs = [r for r in result["runs"] if r["control_path_dir"] == "default"]
    forks = max(set(r["forks"] for r in runs), key=[r["forks"] for r in runs].count)
    fig, (ax1, ax2, ax3) = pyplot().subplots(1, 3, figsize=(15, 4.2))
    for kind, pipe, style in (("audit", False, "o-"), ("audit", True, "o--"), ("ping", False, "s-"),
                              ("ping", True, "s--"), ("raw", False, "^-"), ("raw", True, "^--")):
        pts = sorted((r["nodes"], r["controller_cpu_per_node"]) for r in runs if r["kind"] == kind and
                     r["pipelining"] == pipe and r["lever"] == "default" and r["forks"] == forks)
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], style,
                     label="%s, pipelining %s" % (kind, "on" if pipe else "off"))
    ax1.axhline(0.12, color="grey", lw=0.8, ls=":", label="goal 0.12 s")
    ax1.set_xscale("log")
    ax1.set_xlabel("nodes (forks %d, Ansible's settings)" % forks)
    ax1.set_ylabel("controller CPU seconds a node")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    # the settings side by side at the largest size: the floor and the audit
    big = max(r["nodes"] for r in runs)
    levers = [lv for lv in dict.fromkeys(r["lever"] for r in runs if r["nodes"] == big and r["pipelining"])
              if "before" not in lv]
    for i, kind in enumerate(("raw", "ping", "audit")):
        ys = [next((r["controller_cpu_per_node"] for r in runs if r["nodes"] == big and r["pipelining"]
                    and r["lever"] == lv and r["kind"] == kind), 0) for lv in levers]
        ax2.bar([j + (i - 1) * 0.27 for j in range(len(levers))], ys, 0.27, label=kind)
    ax2.axhline(0.12, color="grey", lw=0.8, ls=":")
    ax2.set_xticks(range(len(levers)))
    ax2.set_xticklabels([lv.replace("+", "+\n") for lv in levers], fontsize=7)
    ax2.set_ylabel("controller CPU seconds a node")
    ax2.set_xlabel("%d nodes, pipelining on: settings" % big)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3, axis="y")
    sweep = [r for r in runs if r["forks"] != forks and r["lever"] == "default"]
    if sweep:
        n = sweep[0]["nodes"]
        for kind, style in (("audit", "o-"), ("ping", "s-")):
            pts = sorted((r["forks"], r["controller_cpu_per_node"]) for r in runs if r["kind"] == kind and r["nodes"] == n
                         and r["pipelining"] and r["lever"] == "default")
            ax3.plot([p[0] for p in pts], [p[1] for p in pts], style, label=kind)
        ax3.set_xlabel("forks (%d nodes, pipelining on)" % n)
        ax3.set_ylabel("controller CPU seconds a node")
        ax3.legend(fontsize=7)
        ax3.grid(alpha=0.3)
    fig.suptitle("nodefix.k8s.audit over SSH beside Ansible's floor (raw, ping), one %d-core controller" % result["cores"])
    save(fig, png)


if __name__ == "__main__":
    sys.exit(main())
