# SPDX-License-Identifier: GPL-3.0-or-later
"""What the _core/fileio tests share: the real AnsibleModule (its atomic_move and backup_local), the side files
of a write, and an atomic_move that fails for one target."""

import json
import os

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes


def real_module(monkeypatch):
    args = {"_ansible_remote_tmp": "/tmp", "_ansible_keep_remote_files": False}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    return basic.AnsibleModule(argument_spec={})


def side_files(directory):
    return sorted(n for n in os.listdir(str(directory)) if ".nodefix-" in n)


def fail_move_of(module, monkeypatch, target, error=None, after=False):
    """module.atomic_move raises ``error`` (ENOSPC by default) for ``target``: before the rename, or with ``after``
    once the file is in place (a failure of what atomic_move does after its rename)."""
    real_move = module.atomic_move
    error = error or OSError(28, "No space left on device")

    def move(src, dest, unsafe_writes=False):
        if dest == str(target) and not after:
            raise error
        real_move(src, dest, unsafe_writes=unsafe_writes)
        if dest == str(target):
            raise error

    monkeypatch.setattr(module, "atomic_move", move)
