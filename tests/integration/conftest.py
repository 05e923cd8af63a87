# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the slow test layers (sanity, lint, build, molecule, lab).

Each layer runs as a subprocess with the project's environment
(scripts/env.sh); its full output goes to .cache/test-logs/<name>.log and the
tail is shown when it fails.
"""

import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

from nodefix_layer_times import STEPS  # the step table's one file (the plugin prints it)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGS = os.path.join(ROOT, ".cache", "test-logs")


def project_env():
    """The environment scripts/env.sh sets up, computed once."""
    out = subprocess.run(
        ["bash", "-c", ". scripts/env.sh && env -0"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


ENV = project_env()
# podman run arguments that give a lab node the test run's cache of code compiled from the modules'
# zipped payloads (lab/zip_code_cache.py; the benchmarks' nodes get none)
ZIPCODE_MOUNT = ("-v", "%s:/var/cache/nodefix-lab-zipcode" % ENV["NODEFIX_ZIPCODE_DIR"])


# the test callbacks every Ansible run of these layers enables (NODEFIX_TEST_CALLBACKS: others, to measure them)
CALLBACKS = "nodefix_task_times,nodefix_warm_loaders"


def run_logged(name, argv, timeout=1800, env=None, cwd=ROOT):
    """Run argv, log to .cache/test-logs/<name>.log, return (rc, output).

    The output is read line by line as it comes: each step it announces (a
    molecule action, a VM boot) is timed and recorded with the run's own time
    in .cache/test-logs/steps.jsonl, the table tests/nodefix_layer_times.py
    prints at the end of the session. A run past ``timeout`` is killed and
    raises subprocess.TimeoutExpired, as subprocess.run does."""
    os.makedirs(LOGS, exist_ok=True)
    path = os.path.join(LOGS, name.replace("/", "_") + ".log")
    merged = dict(ENV)
    # every Ansible run records the wall time of each task, and its workers inherit the plugin lookups
    # of the main process (tests/callback_plugins)
    tasks = os.path.join(LOGS, name.replace("/", "_") + ".tasks.jsonl")
    if os.path.exists(tasks):
        os.remove(tasks)
    merged.update({"ANSIBLE_CALLBACK_PLUGINS": os.path.join(ROOT, "tests", "callback_plugins"),
                   "ANSIBLE_CALLBACKS_ENABLED": os.environ.get("NODEFIX_TEST_CALLBACKS", CALLBACKS), "NODEFIX_TASK_TIMES": tasks})
    merged.update(env or {})
    steps = StepClock()
    with open(path, "w") as log:
        proc = subprocess.Popen(argv, cwd=cwd, env=merged, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                log.write(line)
                steps.see(line)
            proc.wait()
        finally:
            timer.cancel()
            proc.stdout.close()
    steps.record(name, tasks)
    if timer.finished.is_set() and proc.returncode < 0:
        raise subprocess.TimeoutExpired(argv, timeout)
    with open(path, errors="replace") as log:
        output = log.read()
    return proc.returncode, output


class StepClock(object):
    """Times the steps a run announces on its output: molecule's actions
    ("<scenario> \u279c converge: Executing" and nothing after it: the testinfra
    verifier's own "verify: Executing Testinfra tests found in ..." is no new step,
    which listed verify twice)."""

    MOLECULE = re.compile(r"\S+ \u279c (\w+): Executing\s*$")
    ANSI = re.compile(r"\x1b\[[0-9;]*m")

    def __init__(self):
        self.start = time.time()
        self.marks = []  # (label, started)

    def see(self, line):
        found = self.MOLECULE.search(self.ANSI.sub("", line))
        if found:
            self.marks.append((found.group(1), time.time()))

    def record(self, name, tasks):
        """Add this run to the step table, with its slowest tasks (when it ran Ansible)."""
        end = time.time()
        steps = []
        for i, (label, started) in enumerate(self.marks):
            stop = self.marks[i + 1][1] if i + 1 < len(self.marks) else end
            steps.append([label, round(stop - started, 1)])
        slowest = []
        if os.path.exists(tasks):
            with open(tasks) as fh:
                slowest = sorted((json.loads(line) for line in fh), key=lambda t: -t["seconds"])[:5]
        entry = {"name": name, "seconds": round(end - self.start, 1), "steps": steps,
                 "slowest_tasks": [[t["task"], t["seconds"], max(t["hosts"], key=t["hosts"].get) if t["hosts"] else ""]
                                   for t in slowest]}
        with open(STEPS, "a") as fh:
            fh.write(json.dumps(entry) + "\n")


def assert_ok(name, rc, output, lines=120):
    """Fail with the tail of the log when rc is not 0."""
    if rc != 0:
        tail = "\n".join(output.splitlines()[-lines:])
        pytest.fail("%s failed (rc=%s); log: .cache/test-logs/%s.log\n%s" % (name, rc, name, tail), pytrace=False)


def podman(*args, check=True, timeout=300, **kw):
    """``podman ARGS`` with the project's environment; its stdout, AssertionError on rc != 0 (``check``)."""
    proc = subprocess.run(["podman"] + list(args), env=ENV, capture_output=True, text=True, timeout=timeout,
                          check=False, **kw)
    if check and proc.returncode != 0:
        raise AssertionError("podman %s: rc=%s\n%s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout


@contextlib.contextmanager
def held(lock_name):
    """Hold the lock file ENV[lock_name] (flock, exclusive) for the block."""
    with open(ENV[lock_name], "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# Molecule scenarios whose containers touch nothing outside themselves: config
# files, the kubelet double, containerd's own daemon and config, systemd units
# inside the container. They take the pod lock (NODEFIX_POD_LOCK), one at a time,
# and may run beside the end-to-end lab (test_30_molecule.py). The others take
# the lab lock (test_31_molecule_lab.py): on this host's cgroup v1 tree a
# container sees every other container's cgroups, and gvisor (real sandboxes
# and /kubepods cgroups), kernel (CPU quota cgroups), npd and pids (every
# detector, host-wide reads) must not run beside the lab's container nodes,
# whose audits must come out exact (and the other way round).
MOLECULE_ISOLATED = ("containerd", "containerd_rollback", "kubelet", "kubelet_rollback",
                     "mount_units", "mount_units_reboot")
MOLECULE_ALL = sorted(os.path.basename(os.path.dirname(p))
                      for p in glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml")))
MOLECULE_LAB = tuple(s for s in MOLECULE_ALL if s not in MOLECULE_ISOLATED)


# ansible-core at both ends of the range the collection declares (meta/runtime.yml requires_ansible): the venv's
# is the newest (requirements/dev.txt), and these layers run on the oldest (requirements/ansible-core-oldest.txt,
# .cache/core-floor-venv: that core alone, over the venv's other packages - scripts/setup.sh). Each role's main
# path runs on the newest in the end-to-end lab (test_40: audit, remediate --check, remediate, again), and on the
# oldest in its molecule scenario below; the scenarios whose failure branches the lab never takes (the rollbacks,
# the reboot of mount_units, the kernel role's plan) stay on the newest, and the kernel VM (test_47) runs on the
# oldest. The floor's core is also ~0.7x the newest's controller CPU for the same playbook (docs/test-times.md).
MOLECULE_FLOOR = ("containerd", "gvisor", "kubelet", "mount_units", "npd", "pids")
FLOOR_VENV = os.path.join(ROOT, ".cache", "core-floor-venv")


def pinned_core(path):
    """The ansible-core release ``requirements/<path>`` pins."""
    with open(os.path.join(ROOT, "requirements", path), encoding="utf-8") as fh:
        return re.search(r"^ansible-core==(\S+)", fh.read(), re.M).group(1)


_CORES = {}


def core_env(core):
    """The environment of an Ansible run on ansible-core's ``newest`` or ``floor`` (the range's two ends):
    PATH puts that core's commands first. Asserts, once a session, that ``ansible-playbook`` there is the
    pinned release - a run said to be on the floor that ran on the newest would prove nothing."""
    if core not in _CORES:
        venv, pin = ((FLOOR_VENV, pinned_core("ansible-core-oldest.txt")) if core == "floor"
                     else (ENV["NODEFIX_VENV"], pinned_core("dev.txt")))
        env = {"PATH": os.path.join(venv, "bin") + os.pathsep + ENV["PATH"]}
        out = subprocess.run(["ansible-playbook", "--version"], env=dict(ENV, **env), capture_output=True,
                             text=True, check=False).stdout
        assert re.search(r"^ansible-playbook \[core %s\]" % re.escape(pin), out, re.M), (core, pin, out)
        _CORES[core] = env
    return dict(_CORES[core])


def run_molecule(scenario, lock_name):
    """`molecule test -s scenario` under the lock file ENV[lock_name], on the ansible-core of MOLECULE_FLOOR's
    choice; fails on rc != 0."""
    name = "molecule-" + scenario
    env = core_env("floor" if scenario in MOLECULE_FLOOR else "newest")
    rc, out = run_logged(name, ["flock", ENV[lock_name], "molecule", "test", "-s", scenario], timeout=2400, env=env)
    assert_ok(name, rc, out, lines=200)
    assert "failed=0" in out


def lab_exclusive():
    """Hold the lab lock (NODEFIX_LAB_LOCK) for a whole test module: no other
    podman job (a molecule scenario, another lab) runs between its steps. The
    container nodes share the host's cgroup v1 tree, so a scenario running
    between two lab phases could leave cgroups a lab detector then reads (and
    the other way round). Commands run inside must not flock it again."""
    return held("NODEFIX_LAB_LOCK")


class ApiServerDouble(object):
    """lab/apiserver-double/apiserver.py run on the controller (a TEST DOUBLE of
    kube-apiserver: no Debian package ships one). ``state()`` reads its state file."""

    def __init__(self, workdir, nodes, pods, configmaps=None, **state):
        self.state_path = os.path.join(str(workdir), "apiserver-state.json")
        self.kubeconfig = os.path.join(str(workdir), "kubeconfig")
        port_file = os.path.join(str(workdir), "apiserver.port")
        with open(self.state_path, "w") as fh:
            # nodes: names (schedulable) or {name: {"unschedulable": bool}}
            states = nodes if isinstance(nodes, dict) else dict((n, {"unschedulable": False}) for n in nodes)
            # configmaps: {"<namespace>/<name>": {key: text}}
            # state: the rest of the state file (e.g. denied: the SelfSubjectAccessReviews it denies)
            json.dump(dict(state, nodes=states, pods=pods, configmaps=configmaps or {}), fh)
        self.record = os.path.join(str(workdir), "apiserver-requests.jsonl")
        self.proc = subprocess.Popen([sys.executable,
                                      os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py"),
                                      "--state", self.state_path, "--port-file", port_file,
                                      "--kubeconfig", self.kubeconfig, "--record", self.record])
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

    def _start(nodes, pods, configmaps=None, **state):
        double = ApiServerDouble(tmp_path, nodes, pods, configmaps, **state)
        started.append(double)
        return double

    yield _start
    for double in started:
        double.stop()


@pytest.fixture(scope="module")
def module_doubles(tmp_path_factory):
    """``apiserver_double`` for a module whose cases share one ansible-playbook run (a host a case): each
    double in its own directory (``label``), stopped after the module."""
    started = []

    def _start(label, nodes, pods, configmaps=None, **state):
        double = ApiServerDouble(tmp_path_factory.mktemp(label), nodes, pods, configmaps, **state)
        started.append(double)
        return double

    yield _start
    for double in started:
        double.stop()


def page_overflow(html, workdir, width=1280):
    """How many CSS pixels the page at ``html`` overflows a ``width``-pixel window horizontally, as headless
    Chromium lays it out (0: it fits). A copy of the page gets one line of script that writes the document's
    scrollWidth into the DOM, and ``--dump-dom`` prints it; the page itself is not changed."""
    probe = os.path.join(str(workdir), "probe-" + os.path.basename(str(html)))
    with open(str(html), encoding="utf-8") as fh:
        page = fh.read()
    script = ("<script>window.addEventListener('load',function(){var d=document.documentElement;"
              "d.setAttribute('data-overflow',String(d.scrollWidth-d.clientWidth));});</script>")
    with open(probe, "w", encoding="utf-8") as fh:
        fh.write(page.replace("</body>", script + "</body>"))
    proc = subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--hide-scrollbars", "--user-data-dir=%s" % os.path.join(str(workdir), "chromium-probe"),
                           "--window-size=%d,900" % width, "--virtual-time-budget=2000", "--dump-dom",
                           "file://%s" % probe], capture_output=True, timeout=120, check=False)
    found = re.search(r'data-overflow="(-?\d+)"', proc.stdout.decode("utf-8", "replace"))
    assert found, "Chromium did not lay out %s: %s" % (html, proc.stderr.decode()[-2000:])
    return int(found.group(1))


def read_k8s(label, kubeconfig, **args):
    """The resources kubernetes.core.k8s_info returns (what kubectl reads), run with the collection's venv."""
    py = os.path.join(ROOT, ".venv", "bin", "python")
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible"), "localhost", "-c", "local", "-e",
            "ansible_python_interpreter=%s" % py, "-m", "kubernetes.core.k8s_info",
            "-a", json.dumps(dict(args, kubeconfig=kubeconfig))]
    rc, out = run_logged("k8s-info-%s" % label, argv, timeout=300,
                         env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    assert rc == 0, out[-3000:]
    return json.loads(out[out.index("{"):])["plays"][0]["tasks"][0]["hosts"]["localhost"]["resources"]


def return_held_node(label, kubeconfig, node):
    """What a person does with a node nodefix left held (docs/safety.md, "A held node"): ``kubectl annotate
    node NODE nodefix.k8s/held-`` and ``kubectl uncordon NODE`` - one merge PATCH through the kubernetes client
    (what kubectl sends), so the API server's log shows it as the operator's, not the run's."""
    py = os.path.join(ROOT, ".venv", "bin", "python")
    code = ("import sys, kubernetes\n"
            "api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(sys.argv[1]))\n"
            "api.patch_node(sys.argv[2], {'metadata': {'annotations': {'nodefix.k8s/held': None}},"
            " 'spec': {'unschedulable': False}}, _request_timeout=30)\n")
    rc, out = run_logged("return-held-%s" % label, [py, "-c", code, kubeconfig, node], timeout=120)
    assert rc == 0, out[-3000:]


def trail_entries(log):
    """The kube-apiserver double's log entries that are a run's trail (its Events, the Node's annotation
    PATCH) or its questions (the drain preflight's SelfSubjectAccessReviews, which change nothing): the rest
    is what the run changed in the cluster."""
    return [e for e in log if e["path"].startswith("/apis/events.k8s.io/")
            or "/selfsubjectaccessreviews" in e["path"]
            or (e["method"] == "PATCH" and set(e.get("body") or {}) == {"metadata"})]
