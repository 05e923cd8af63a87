# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs INSIDE the lab container (copied there by run.py's install): stop the units named in a file, and
wait until systemd is idle again.

    python3 stop_helper.py systemctl NAMES_FILE     one `systemctl stop <names>`
    python3 stop_helper.py transaction NAMES_FILE   one systemd transaction (the module's own argv:
                                                    _mount_units.transaction, from /opt/nodefix)
    python3 stop_helper.py settle                   only wait until systemd is idle

Prints one JSON line: ``returned`` (seconds until the command returned), ``settled`` (seconds until
systemd - PID 1 - was idle again: below 10 % of a CPU over 0.3 s), ``rc``, ``systemd_cpu`` (PID 1's CPU
seconds over the whole). A transaction returns once every stop job is done, but systemd does part of the
work of the units that left (the cgroup masks of the slice's remaining members) after that; the next stop
pays for it when it comes at once. ``settled`` counts it; ``returned`` does not.
"""

import json
import os
import shutil
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
WINDOW, IDLE_SHARE, LIMIT = 0.3, 0.10, 600.0


def pid1_cpu():
    fields = open("/proc/1/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(TICK)


def settle(start):
    """The instant (time.time()) at which PID 1 went idle, waiting at most LIMIT seconds."""
    prev, t_prev = pid1_cpu(), time.time()
    while t_prev - start < LIMIT:
        time.sleep(WINDOW)
        now, t_now = pid1_cpu(), time.time()
        if now - prev < IDLE_SHARE * (t_now - t_prev):
            return t_prev
        prev, t_prev = now, t_now
    return t_prev


def main():
    mode = sys.argv[1]
    names = open(sys.argv[2]).read().split() if len(sys.argv) > 2 else []
    cpu0, t = pid1_cpu(), time.time()
    rc = 0
    if mode == "systemctl":
        rc = subprocess.call(["systemctl", "stop"] + names)
    elif mode == "transaction":
        sys.path.insert(0, "/opt/nodefix")
        from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import transaction
        found = (shutil.which("systemd-run"), shutil.which("true"))
        rc = subprocess.call(transaction.argv(found, names, "bench-%d" % (t * 1000)))
    elif mode != "settle":
        raise SystemExit("mode: systemctl, transaction or settle")
    returned = time.time()
    settled = settle(returned)
    print(json.dumps({"returned": round(returned - t, 3), "settled": round(max(settled, returned) - t, 3), "rc": rc,
                      "systemd_cpu": round(pid1_cpu() - cpu0, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
