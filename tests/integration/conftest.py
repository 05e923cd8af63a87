# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the slow test layers (sanity, lint, build, molecule, lab).

Each layer runs as a subprocess with the project's environment
(scripts/env.sh); its full output goes to .cache/test-logs/<name>.log and the
tail is shown when it fails.
"""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGS = os.path.join(ROOT, ".cache", "test-logs")


def project_env():
    """The environment scripts/env.sh sets up, computed once."""
    out = subprocess.run(
        ["bash", "-c", ". scripts/env.sh && env -0"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


ENV = project_env()


def run_logged(name, argv, timeout=1800, env=None, cwd=ROOT):
    """Run argv, log to .cache/test-logs/<name>.log, return (rc, output)."""
    os.makedirs(LOGS, exist_ok=True)
    path = os.path.join(LOGS, name.replace("/", "_") + ".log")
    merged = dict(ENV)
    merged.update(env or {})
    with open(path, "w") as log:
        proc = subprocess.run(argv, cwd=cwd, env=merged, stdout=log, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    with open(path, errors="replace") as log:
        output = log.read()
    return proc.returncode, output


def assert_ok(name, rc, output, lines=120):
    """Fail with the tail of the log when rc is not 0."""
    if rc != 0:
        tail = "\n".join(output.splitlines()[-lines:])
        pytest.fail("%s failed (rc=%s); log: .cache/test-logs/%s.log\n%s" % (name, rc, name, tail), pytrace=False)


@pytest.fixture
def lab_lock():
    """argv prefix that serialises podman-heavy jobs (2-core machines)."""
    return ["flock", ENV["NODEFIX_LAB_LOCK"]]
