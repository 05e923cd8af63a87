# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's podman connection: containers.podman.podman with pipelining.

containers.podman.podman (what molecule's podman driver and the lab inventory
would use) runs every module as four `podman exec` calls: make a temporary
directory, chmod the uploaded AnsiballZ file, run it, remove the directory.
Each `podman exec` starts conmon and a runc exec (~0.15 s of CPU here), so on
the lab's 2-core machine the per-task round trips, not the modules, were most
of every lab and molecule run. That plugin disables pipelining because
`podman exec` without `-i` gives the command no stdin. This subclass passes
`-i` when Ansible sends data on stdin and enables pipelining: one
`podman exec` per module (measured: 10 `command` tasks 10.9 s -> 4.2 s).
Nothing else changes: the same container, user, mount-based file transfer.
The modules under test run exactly as they do over SSH with pipelining
(the lab's VM nodes have `ansible_pipelining: true`), which is how most
fleets run them.

Each task is a new connection, and containers.podman.podman starts every one
with a `podman mount` and runs the module with a `podman exec`: two podman
CLIs a task (each ~0.1-0.15 s of CPU: the Go binary, its configuration, the
storage and database locks; the exec also starts conmon). The fast path: the
container's ID, init PID (and its start time) and mount point are looked up
once (`podman inspect`, `podman mount`) and kept in a small file per container
(NODEFIX_PODMAN_CACHE, /run/nodefix-podman); a task whose container still has
that init process runs its command with `runc exec` on the container podman
made (runc's own state under /run/runc: the process spec podman gave the
container - environment, user, capabilities, cgroup, namespaces - is the one
runc exec starts the command with, as `podman exec` does through conmon).
Anything else - a container podman cannot inspect, a recreated container (the
entry is looked up again), a remote user, runc refusing (its own error,
before the command started) - goes through podman as before;
NODEFIX_PODMAN_FAST=0 turns the fast path off. Measured in
`benchmarks/lab_connection/run.py`.
Selected by `ansible_connection: nodefix_podman` (lab/inventory/lab.yml,
.config/molecule/config.yml); found through ANSIBLE_CONNECTION_PLUGINS
(scripts/env.sh) or ansible.cfg's `connection_plugins`.
"""

DOCUMENTATION = r"""
name: nodefix_podman
short_description: Run tasks in podman containers, pipelined (nodefix.k8s lab)
description:
  - containers.podman.podman with pipelining on - one C(podman exec -i) per module instead of four
    C(podman exec) calls.
author: nodefix.k8s contributors
options:
  remote_addr:
    description: The ID or name of the container to connect to.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: User specified via name or UID which is used to execute commands inside the container.
    vars:
      - name: ansible_user
  podman_executable:
    description: Executable for podman command.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  podman_extra_args:
    description: Extra arguments to pass to the podman command line.
    default: ''
    vars:
      - name: ansible_podman_extra_args
    env:
      - name: ANSIBLE_PODMAN_EXTRA_ARGS
  pipelining:
    description: Send the module on stdin to one C(podman exec -i) (the point of this plugin).
    type: boolean
    default: true
    vars:
      - name: ansible_pipelining
    env:
      - name: ANSIBLE_PIPELINING
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

display = Display()

CACHE_DIR = os.environ.get("NODEFIX_PODMAN_CACHE", "/run/nodefix-podman")
RUNC_ROOT = os.environ.get("NODEFIX_RUNC_ROOT", "/run/runc")
RUNC = shutil.which("runc") or shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin")
# NODEFIX_PODMAN_FAST=0: every task through podman, as containers.podman.podman (the benchmark's "before")
FAST = os.environ.get("NODEFIX_PODMAN_FAST", "1") != "0"
NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# how runc 1.x reports its own failure (logrus to stderr), e.g.
# time="..." level=error msg="exec failed: container does not exist"
RUNC_ERROR = re.compile(rb'^time="[^"]*" level=(error|fatal) msg=', re.M)


def proc_start(pid):
    """The start time (clock ticks since boot) of process PID, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def runc_state(cid):
    """Whether runc has the state of container CID (podman made it with runc, and it runs)."""
    return os.path.exists(os.path.join(RUNC_ROOT, cid, "state.json"))


class Connection(PodmanConnection):
    """containers.podman.podman, with `podman exec -i` when there is stdin to send, and `runc exec`
    on a container whose podman facts are cached."""

    transport = "nodefix_podman"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._fast = None

    # -- the container's facts, cached per container -------------------------------------------

    def _cache_path(self):
        name = to_native(self._container_id)
        return os.path.join(CACHE_DIR, name + ".json") if NAME_OK.match(name) else None

    def _cached(self):
        """The cached facts while the container still runs the init process they name, else None."""
        path = self._cache_path()
        try:
            with open(path) as fh:
                info = json.load(fh)
        except (OSError, ValueError):
            return None
        if proc_start(info.get("pid", 0)) != info.get("start") or not runc_state(info.get("id", "-")):
            return None
        return info

    def _lookup(self):
        """podman inspect + podman mount, once; the facts written for the next tasks (atomic)."""
        rc, out, _err = PodmanConnection._podman(self, ["inspect", "--format", "{{.Id}} {{.State.Pid}}"])
        fields = out.split()
        if rc != 0 or len(fields) != 2 or not fields[1].isdigit() or int(fields[1]) <= 0:
            return None
        info = {"id": to_native(fields[0]), "pid": int(fields[1])}
        info["start"] = proc_start(info["pid"])
        rc, mount, _err = PodmanConnection._podman(self, "mount")
        mount = to_native(mount).strip()
        info["mount"] = mount if rc == 0 and mount and os.path.isdir(mount) and os.listdir(mount) else None
        # runc's state of the container: podman made it with runc (lab/containers.conf); without it
        # (another OCI runtime) the commands go through podman exec, the mount is used all the same
        info["runc"] = info["start"] is not None and runc_state(info["id"])
        if info["runc"]:
            os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=CACHE_DIR, prefix=".tmp-")
            with os.fdopen(fd, "w") as fh:
                json.dump(info, fh)
            os.rename(tmp, self._cache_path())
        return info

    def _connect(self):
        if self._connected:
            return self
        if self.user or not RUNC or not FAST or self._cache_path() is None:
            return super()._connect()
        info = self._cached() or self._lookup()
        if info is None:
            return super()._connect()
        ConnectionBase._connect(self)
        # (bytes, as the parent keeps podman mount's answer: put_file/fetch_file append the path to it)
        self._fast, self._connected = (info if info.get("runc") else None), True
        self._mount_point = to_bytes(info["mount"]) if info["mount"] else None
        return self

    # -- running a command ----------------------------------------------------------------------

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if not self._connected:
            self._connect()
        if self._fast is None:
            return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = [RUNC, "--root", RUNC_ROOT, "exec", self._fast["id"]] + shlex.split(to_native(cmd))
        display.vvv("RUN %s" % (argv,), host=self._container_id)
        proc = subprocess.Popen([to_bytes(a) for a in argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        stdout, stderr = proc.communicate(input=in_data)
        if proc.returncode != 0 and not stdout and RUNC_ERROR.search(stderr):
            # runc's own error, before the command started: forget the facts, go through podman
            display.vvv("runc exec refused (%s): through podman" % to_native(stderr).strip(), host=self._container_id)
            try:
                os.unlink(self._cache_path())
            except OSError:
                pass
            self._fast = None
            return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return proc.returncode, stdout, stderr

    def _podman(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        if in_data is not None and isinstance(cmd, list) and cmd[:1] == ["exec"]:
            cmd = ["exec", "--interactive"] + cmd[1:]
        return super()._podman(cmd, cmd_args, in_data, use_container_id)
