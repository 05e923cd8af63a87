# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared fixtures for nodefix.k8s unit tests.

The collection is imported as ``ansible_collections.nodefix.k8s`` from the
project-local collections path that scripts/setup.sh links
(.cache/collections/ansible_collections/nodefix/k8s -> repository root).

``run_module(module, args, commands=...)`` runs a module's ``main()`` in
process with ``run_command`` replaced by a table of expected commands, the
pattern of community.general's YAML-driven module tests: every command the
module runs must be listed (argv prefix match), in order, with its rc,
stdout and stderr; an unexpected command fails the test.
"""

import hashlib
import json
import os
import stat
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
_link = os.path.join(COLLECTIONS, "ansible_collections", "nodefix", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(ROOT, _link)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

from ansible.module_utils import basic  # noqa: E402
from ansible.module_utils.common.text.converters import to_bytes  # noqa: E402


class ModuleExit(BaseException):
    """Raised instead of sys.exit by exit_json/fail_json."""

    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result = result
        self.failed = failed


class CommandTable:
    """Stands in for AnsibleModule.run_command and records every call."""

    def __init__(self, commands):
        self.expected = list(commands or [])
        self.calls = []

    def __call__(self, module_self, args, **kwargs):
        argv = list(args) if isinstance(args, (list, tuple)) else args.split()
        self.calls.append(argv)
        if not self.expected:
            raise AssertionError("unexpected command: %r" % (argv,))
        spec = self.expected.pop(0)
        want = spec["argv"]
        if argv[: len(want)] != want:
            raise AssertionError("command %r does not match expected %r" % (argv, want))
        if "data" in spec:
            assert kwargs.get("data") == spec["data"], "stdin differs for %r" % (argv,)
        return spec.get("rc", 0), spec.get("out", ""), spec.get("err", "")


ONE_EXIT = os.path.join("module_utils", "_core", "exit.py")


def one_exit():
    """Fail unless AnsibleModule's exit_json/fail_json was called by the collection's one exit (_core/exit.py),
    which redacts the whole result first: a module that leaves any other way fails every test that runs it."""
    caller = sys._getframe(2).f_code.co_filename  # pylint: disable=protected-access
    if not caller.endswith(ONE_EXIT):
        raise AssertionError("a module left through %s, not through %s" % (caller, ONE_EXIT))


@pytest.fixture
def run_module(monkeypatch):
    """Run ``module.main()`` with ``args``; return (result, failed, table)."""

    def _run(module, args, commands=None, check_mode=False, diff=False, bins=None):
        table = CommandTable(commands)
        payload = dict(args)
        payload["_ansible_check_mode"] = check_mode
        payload["_ansible_diff"] = diff
        payload.setdefault("_ansible_remote_tmp", "/tmp")
        payload.setdefault("_ansible_keep_remote_files", False)
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload})))
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)

        def exit_json(self, **kw):
            one_exit()
            kw.setdefault("changed", False)
            raise ModuleExit(kw, False)

        def fail_json(self, msg, **kw):
            one_exit()
            kw["msg"] = msg
            kw["failed"] = True
            raise ModuleExit(kw, True)

        monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
        monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

        def run_command(module_self, args, **kwargs):
            return table(module_self, args, **kwargs)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        if bins is not None:
            def get_bin_path(self, arg, required=False, opt_dirs=None):
                path = bins.get(arg)
                if path is None and required:
                    self.fail_json(msg="Failed to find required executable %s" % arg)
                return path

            monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
        with pytest.raises(ModuleExit) as exc:
            module.main()
        return exc.value.result, exc.value.failed, table

    return _run


def snapshot(base):
    """{relative path: (kind, content sha256 or link target, mode, uid, gid)} of every entry under ``base``.

    Only regular files are opened: a FIFO, socket or device is recorded by its type (opening a FIFO that nobody
    writes waits forever: that hung a worker of the test command when a test snapshotted a tree holding one)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(str(base)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, str(base))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full), st.st_mode, st.st_uid, st.st_gid)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", None, st.st_mode, st.st_uid, st.st_gid)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                out[rel] = ("file", digest, st.st_mode, st.st_uid, st.st_gid)
            else:
                out[rel] = ("special", st.st_rdev, st.st_mode, st.st_uid, st.st_gid)
    return out


def tree(base, files):
    """Create a fake filesystem tree: {relative path: text content or None for a directory}."""
    for rel, content in files.items():
        path = os.path.join(str(base), rel.lstrip("/"))
        if content is None:
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(content)
    return str(base)


@pytest.fixture
def make_tree(tmp_path):
    """Return a function that builds a fake node root under tmp_path."""

    def _make(files):
        return tree(tmp_path / "root", files)

    return _make
