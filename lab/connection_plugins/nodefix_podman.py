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

from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    """containers.podman.podman, with `podman exec -i` when there is stdin to send."""

    transport = "nodefix_podman"
    has_pipelining = True

    def _podman(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        if in_data is not None and isinstance(cmd, list) and cmd[:1] == ["exec"]:
            cmd = ["exec", "--interactive"] + cmd[1:]
        return super()._podman(cmd, cmd_args, in_data, use_container_id)
