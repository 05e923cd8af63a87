# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the slow test layers (sanity, lint, build, molecule, lab).

Each layer runs as a subprocess with the project's environment
(scripts/env.sh); its full output goes to .cache/test-logs/<name>.log and the
tail is shown when it fails.
"""

import json
import os
import subprocess
import sys
import time

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


class ApiServerDouble(object):
    """lab/apiserver-double/apiserver.py run on the controller (a TEST DOUBLE of
    kube-apiserver: no Debian package ships one). ``state()`` reads its state file."""

    def __init__(self, workdir, nodes, pods, configmaps=None):
        self.state_path = os.path.join(str(workdir), "apiserver-state.json")
        self.kubeconfig = os.path.join(str(workdir), "kubeconfig")
        port_file = os.path.join(str(workdir), "apiserver.port")
        with open(self.state_path, "w") as fh:
            # nodes: names (schedulable) or {name: {"unschedulable": bool}}
            states = nodes if isinstance(nodes, dict) else dict((n, {"unschedulable": False}) for n in nodes)
            # configmaps: {"<namespace>/<name>": {key: text}}
            json.dump({"nodes": states, "pods": pods, "configmaps": configmaps or {}}, fh)
        self.proc = subprocess.Popen([sys.executable,
                                      os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py"),
                                      "--state", self.state_path, "--port-file", port_file,
                                      "--kubeconfig", self.kubeconfig])
        for _dummy in range(100):
            if os.path.exists(port_file):
                break
            if self.proc.poll() is not None:
                raise RuntimeError("the apiserver double exited with %s" % self.proc.returncode)
            time.sleep(0.1)
        else:
            raise RuntimeError("the apiserver double did not start")

    def state(self):
        with open(self.state_path) as fh:
            return json.load(fh)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def apiserver_double(tmp_path):
    """Start the double with ``nodes`` and ``pods``; stopped after the test."""
    started = []

    def _start(nodes, pods, configmaps=None):
        double = ApiServerDouble(tmp_path, nodes, pods, configmaps)
        started.append(double)
        return double

    yield _start
    for double in started:
        double.stop()
