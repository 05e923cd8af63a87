#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""What one new SSH connection costs the CLIENT (the Ansible controller) in CPU, per key exchange,
with Debian 12's OpenSSH (9.2, this machine's) and Debian 13's (10.0, in the lab's Debian 13
image): the part of benchmarks/fleet/ssh.py's per-node floor that is ssh's own.

    . scripts/env.sh && python benchmarks/fleet/kex.py --connections 40 [--json benchmarks/fleet/kex.json]

Each OpenSSH connects --connections times (`ssh -o ControlMaster=no ... true`, a new connection
and key exchange each time, key authentication) to a real sshd of the same Debian release in an
unprivileged container (Debian 12: localhost/nodefix-sshnode, which ssh.py builds; Debian 13:
localhost/nodefix-sshnode13, its lab image with openssh-server and openssh-client added, built
here once and cached by a recipe label as ssh.py does, the client running in that container too,
keys made per run), once per key exchange the client offers by default:
sntrup761x25519-sha512 (post-quantum hybrid, OpenSSH 9.0's default), mlkem768x25519-sha256
(post-quantum hybrid, OpenSSH 9.9+, 10.0's default) and curve25519-sha256 (classical); --kex
names fewer of them (the test command's smoke run: one not offered by 9.2, one offered by both).
Reported:
the client's user+sys CPU seconds per connection (getrusage of the ssh processes) and the wall.
It takes the project's lab lock (NODEFIX_FLEET_LOCK: the test command's smoke run passes the pod
lock), as ssh.py does.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import ssh  # noqa: E402  pylint: disable=wrong-import-position
from measure import lab_lock, write_json  # noqa: E402  pylint: disable=wrong-import-position

KEXES = ("sntrup761x25519-sha512@openssh.com", "mlkem768x25519-sha256", "curve25519-sha256")
NAME = "nodefix-sshfleet-kex13"
# the client loop, run with the client's Python: argv = connections, address, key, known_hosts
CLIENT = r"""
import json, resource, subprocess, sys, time
n, addr, key, kh = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ver = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()
offered = subprocess.run(["ssh", "-Q", "kex"], capture_output=True, text=True).stdout.split()
out = {"openssh": ver, "kex": {}}
for kex in sys.argv[5:]:
    if kex not in offered:
        out["kex"][kex] = None
        continue
    argv = ["ssh", "-o", "ControlMaster=no", "-o", "BatchMode=yes", "-o", "KexAlgorithms=" + kex, "-o",
            "UserKnownHostsFile=" + kh, "-o", "IdentitiesOnly=yes", "-i", key, "root@" + addr, "true"]
    subprocess.run(argv, check=True)
    b, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    for _ in range(n):
        subprocess.run(argv, check=True)
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["kex"][kex] = {"client_cpu_seconds": round((a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime) / n, 4),
                       "wall_seconds": round((time.time() - t) / n, 4)}
print(json.dumps(out))
"""
DEB13_BASE, DEB13_IMAGE = "localhost/nodefix-debian13", "localhost/nodefix-sshnode13"
DEB13_RECIPE = ("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server "
                "openssh-client >/dev/null && rm -f /etc/ssh/ssh_host_*")
DEB13_SETUP = ("mkdir -p /run/sshd /root/.ssh && ssh-keygen -q -t ed25519 -N '' -f /root/host "
               "&& ssh-keygen -q -t ed25519 -N '' -f /root/client && cp /root/client.pub /root/.ssh/authorized_keys "
               "&& echo \"127.0.0.1 $(cat /root/host.pub)\" > /root/known_hosts "
               "&& /usr/sbin/sshd -o UsePAM=no -o HostKey=/root/host -o ListenAddress=127.0.0.1")


def debian12(n, tmp, kexes=KEXES):
    """This machine's ssh against one localhost/nodefix-sshnode node."""
    os.makedirs(os.path.join(tmp, "node"))
    ssh.node_tar(os.path.join(tmp, "node", "node.tar"))
    with open(os.path.join(tmp, "node", "authorized_keys"), "w") as fh:
        fh.write(ssh.keygen(os.path.join(tmp, "client")) + "\n")
    ssh.build_image()
    nodes = ssh.start_nodes(9000, 1, tmp)
    try:
        ssh.inventory(os.path.join(tmp, "inventory.json"), nodes, tmp)
        out = subprocess.run([sys.executable, "-c", CLIENT, str(n), nodes[0][1], os.path.join(tmp, "client"),
                              os.path.join(tmp, "known_hosts")] + list(kexes), capture_output=True, text=True, check=True)
        return json.loads(out.stdout)
    finally:
        ssh.stop_nodes()


def debian13(n, kexes=KEXES):
    """Debian 13's ssh against its own sshd, both in one container of the lab's Debian 13 image."""
    ssh.build_image(DEB13_BASE, DEB13_IMAGE, DEB13_RECIPE)
    subprocess.run(["podman", "rm", "-f", "-t", "0", NAME], capture_output=True, check=False)
    try:
        ssh.sh(["podman", "run", "-d", "--name", NAME, DEB13_IMAGE, "sleep", "infinity"])
        ssh.sh(["podman", "exec", NAME, "sh", "-c", DEB13_SETUP])
        out = ssh.sh(["podman", "exec", NAME, "python3", "-c", CLIENT, str(n), "127.0.0.1", "/root/client",
                      "/root/known_hosts"] + list(kexes))
        return json.loads(out)
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", NAME], capture_output=True, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=40)
    ap.add_argument("--kex", default=",".join(KEXES),
                    help="comma-separated key exchanges to measure (default: all three, %(default)s)")
    ap.add_argument("--json")
    args = ap.parse_args()
    kexes = [k for k in args.kex.split(",") if k]
    unknown = sorted(set(kexes) - set(KEXES))
    if unknown or not kexes:
        ap.error("--kex: %s not among %s" % (",".join(unknown) or "none given", ",".join(KEXES)))
    # podman containers, and ssh.py's node prefix (its stop_nodes removes every one): one at a time
    _lock = lab_lock()  # held until the run ends
    with tempfile.TemporaryDirectory() as tmp:
        result = {"debian12": debian12(args.connections, tmp, kexes), "debian13": debian13(args.connections, kexes),
                  "connections": args.connections}
    for release in ("debian12", "debian13"):
        for kex, m in result[release]["kex"].items():
            print("%-9s %-22s %-36s %s" % (release, result[release]["openssh"].split(",")[0], kex,
                                           "not offered" if m is None else "client CPU %.4f s  wall %.3f s a connection" % (
                                               m["client_cpu_seconds"], m["wall_seconds"])))
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
