#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: containerd_snapshot
short_description: Record containerd's last known-good files (binaries, config, unit drop-in) for rollback
version_added: "1.0.0"
description:
  - Keeps the snapshot the C(nodefix.k8s.containerd) role rolls back to when an upgrade, a config change or a
    restart fails; in one call it reads every state file, reads the current manifest, decides and records.
  - The snapshot directory holds C(manifest.json) (the containerd version and binary, and for each of O(files)
    whether it exists and its sha256) and under C(files/) a copy of each file that exists, at its absolute path,
    with mode, owner and times kept (a symlink is copied as the link, as C(cp -a) does).
  - The first snapshot is taken whatever the state (there is nothing better to go back to; the same when the
    manifest cannot be read). Afterwards a snapshot is recorded only when the files differ from the manifest
    B(and) they are the ones the healthy running daemon started with - O(daemon_reachable) and no file changed
    (ctime) at or after O(daemon_started). A change still waiting for its restart is therefore never recorded as
    good; RV(reason) says why nothing was recorded.
  - The new snapshot is built beside the old one (C(<path>.new)) and swapped in with two renames; a failure
    part-way leaves the previous snapshot in place. The directory and its manifest are created private
    (C(0700)/C(0600)). A symlinked O(path) is followed (the link stays).
  - Every file is read before anything is written; a file that exists but cannot be read fails the module with
    its name and nothing written (an unreadable file is never recorded as absent or unchanged).
author:
  - nodefix.k8s developers (@nodefix)
options:
  path:
    description: The snapshot directory (replaced as a whole when a new snapshot is recorded).
    type: path
    required: true
  files:
    description:
      - Absolute node paths that make up containerd's state (binaries, config, unit drop-in), normalised, each
        once, none of them inside O(path). A path that does not exist is recorded as absent (a rollback removes it).
    type: list
    elements: path
    required: true
  version:
    description: The containerd version these files are (recorded in the manifest; see M(nodefix.k8s.containerd_info)).
    type: str
  binary:
    description: The containerd binary these files run (recorded in the manifest).
    type: str
  daemon_reachable:
    description: Whether containerd answers on its socket now (C(socket.reachable) of M(nodefix.k8s.containerd_info)).
    type: bool
    default: false
  daemon_started:
    description:
      - When the running containerd started, in seconds since the epoch (C(daemon.started) of
        M(nodefix.k8s.containerd_info)); unset when it does not run.
    type: float
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Reads and decides, records nothing; C(changed) says whether a snapshot would be recorded.
  diff_mode:
    details: The manifest before and after.
  platform:
    details: Linux nodes running containerd.
seealso:
  - module: nodefix.k8s.containerd_info
  - module: nodefix.k8s.containerd_config
"""

EXAMPLES = r"""
- name: Read containerd (its version, socket and start time)
  nodefix.k8s.containerd_info:
  register: ctrd

- name: Record the last known-good state before changing containerd's files
  nodefix.k8s.containerd_snapshot:
    path: /var/lib/nodefix/containerd/last-good
    files:
      - /usr/bin/containerd
      - /usr/bin/ctr
      - /usr/bin/containerd-shim-runc-v2
      - /etc/containerd/config.toml
      - /etc/systemd/system/containerd.service.d/10-nodefix-binary.conf
    version: "{{ ctrd.version }}"
    binary: "{{ ctrd.binary }}"
    daemon_reachable: "{{ ctrd.socket.reachable | default(false) }}"
    daemon_started: "{{ ctrd.daemon.started }}"
  register: snap

- name: Say why nothing was recorded
  ansible.builtin.debug:
    msg: "{{ snap.reason }}"
  when: not snap.changed
"""

RETURN = r"""
recorded:
  description: A new snapshot was written (never in check mode; C(changed) says it would be).
  returned: always
  type: bool
  sample: true
reason:
  description: Why a snapshot was (or would be) recorded, or why not.
  returned: always
  type: str
  sample: the files changed after containerd started (a restart is pending)
path:
  description: O(path) as given.
  returned: always
  type: str
  sample: /var/lib/nodefix/containerd/last-good
real_path:
  description: The directory really written when O(path) is a symlink.
  returned: when O(path) is a symlink
  type: str
  sample: /srv/nodefix/last-good
files:
  description: Each of O(files) as it is now, in order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The node path.
      type: str
      sample: /usr/bin/containerd
    exists:
      description: It exists (lstat; a dangling symlink exists).
      type: bool
      sample: true
    checksum:
      description: sha256 of a regular file, empty for anything else.
      type: str
      sample: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
previous_version:
  description: The containerd version of the snapshot found (null when there was none).
  returned: always
  type: str
  sample: 1.6.20~ds1
manifest:
  description:
    - The snapshot's manifest after the call (the new one when recorded, or would be in check mode; otherwise the
      one kept; null when there is none and none was taken).
  returned: always
  type: dict
  contains:
    version:
      description: The containerd version.
      type: str
    binary:
      description: The containerd binary.
      type: str
    files:
      description: As RV(files) at the time of the snapshot.
      type: list
      elements: dict
    recorded_at:
      description:
        - When the recording run first looked at the files (seconds since the epoch); absent from a manifest written
          by an earlier version.
      type: float
    identity:
      description:
        - Per regular file, C([device, inode, size, mtime_ns, ctime_ns]) when it was recorded. A later run takes the
          recorded checksum of a file whose identity is the same (any write moves the ctime, an upgrade replaces the
          inode) instead of reading it again; a file changed within 2 seconds before the recording is always read.
      type: dict
diff:
  description: The manifest's text before and after (with C(--diff)).
  returned: diff mode
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import snapshot as containerd_snapshot_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            path=dict(type="path", required=True),
            files=dict(type="list", elements="path", required=True),
            version=dict(type="str"),
            binary=dict(type="str"),
            daemon_reachable=dict(type="bool", default=False),
            daemon_started=dict(type="float"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = containerd_snapshot_lib.run(p["path"], p["files"], version=p["version"], binary=p["binary"],
                                             daemon_reachable=p["daemon_reachable"], daemon_started=p["daemon_started"],
                                             check_mode=module.check_mode)
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
