# SPDX-License-Identifier: GPL-3.0-or-later
"""The mount_units role's ``max_seconds`` budget on a lab node with REAL leaked kubelet scopes (Debian 12,
systemd 252), at a scale that fits the suite: 2,000 scopes of dead pods plus 20 of live pods (the pods
known to the crictl TEST DOUBLE), created by the benchmark's own harness (benchmarks/mount_units/run.py).

The role runs with a budget far below the whole cleanup: it must stop batches only while the budget
lasts (the module's own stop time within the budget plus one batch, one batch timed right after with a
raw ``systemctl stop`` at the same load), say how far it got (``stopped N/M, K left``), leave exactly
what it reports as left, never touch a live pod's unit; a second run without a budget finishes the job.
The same check at 10,000 units is ``benchmarks/mount_units/curve.py --budget`` (~5 min a run: not here).
"""

import fcntl
import json
import os
import re
import sys

import pytest

from conftest import ENV, ROOT, assert_ok, run_logged

sys.path.insert(0, os.path.join(ROOT, "benchmarks", "mount_units"))
import curve  # noqa: E402  pylint: disable=wrong-import-position
import run as bench  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.lab

NAME = "nodefix-budget-debian12"
IMAGE = "localhost/nodefix-debian12"
N, LIVE = 2000, 20
BATCH = 100
BUDGET = 0.5      # seconds: a few batches of 100 at ~2,000 loaded units (~2-3 ms a stop on systemd 252)


def role_run(work, name, budget=None):
    results = work / ("%s.json" % name)
    extra = {"results_file": str(results), "mount_units_batch_size": BATCH, "mount_units_list_limit": 5,
             "mount_units_max_seconds": budget or 0, "ansible_python_interpreter": "/usr/bin/python3"}
    rc, out = run_logged("budget-lab-" + name, [
        "ansible-playbook", "-i", "%s," % NAME, "-c", "nodefix_podman", "-e", json.dumps(extra),
        os.path.join(ROOT, "tests", "integration", "playbooks", "mount_units_budget.yml")], timeout=900)
    assert_ok("budget-lab-" + name, rc, out)
    return json.loads(results.read_text()), out


def loaded(expect):
    now = bench.listed(NAME)
    return {"dead": [u for u in expect["dead"] if u in now],
            "live_not_active": [u for u in expect["live"] if now.get(u) != "active"]}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("budget-lab")
    # timed against a budget: no other podman job at all, the isolated ones included
    with open(ENV["NODEFIX_LAB_LOCK"], "a") as lock, open(ENV["NODEFIX_POD_LOCK"], "a") as pods:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fcntl.flock(pods, fcntl.LOCK_EX)
        try:
            bench.start_container(NAME, IMAGE)
            bench.install(NAME)
            expect, created = bench.leak(NAME, N, LIVE, 1, 4)
            estimate, _secs = bench.module_call(NAME, {"state": "absent", "batch_size": BATCH, "list_limit": 1},
                                                check=True)
            first, first_out = role_run(work, "first", BUDGET)
            after_first = loaded(expect)
            # one batch, raw, at the load the budgeted run stopped at
            one_batch = curve.stop_batch(NAME, after_first["dead"][:BATCH])
            second, second_out = role_run(work, "second")
            yield {"expect": expect, "created": created, "estimate": estimate, "first": first,
                   "first_out": first_out, "after_first": after_first, "one_batch": one_batch,
                   "second": second, "second_out": second_out, "after_second": loaded(expect)}
        finally:
            bench.sh(["podman", "rm", "-f", "-t", "0", NAME], check=False)


def test_the_leak_is_real_and_the_estimate_sees_it(run):
    assert len(run["expect"]["dead"]) == N and len(run["expect"]["live"]) == LIVE
    assert run["estimate"]["to_stop"] == N and run["estimate"]["kept_live"] == LIVE
    assert run["estimate"]["stopped"] == 0 and run["estimate"]["systemd"]["version"] == 252
    assert run["estimate"]["estimate_seconds"] > 0


def test_the_budgeted_run_stops_at_a_batch_boundary_once_its_budget_is_spent(run):
    """Shape and direction, not speed (no test asserts a duration: test_no_timed_assertions): the module
    checks its budget before each batch, so it stopped whole batches, some but not all, and only after its
    own clock had passed the budget (a lower bound, which load cannot break). How close to the budget it
    stops on a quiet node is measured by benchmarks/mount_units/curve.py --budget."""
    first = run["first"]
    assert 0 < first["stopped"] < N and first["left"] == N - first["stopped"], first
    assert first["stop_calls"] == -(-first["stopped"] // BATCH)  # whole batches, then it stopped
    assert first["timings"]["stop_s"] >= BUDGET, first["timings"]


def test_the_budgeted_run_leaves_what_it_says_and_no_live_unit_stopped(run):
    first = run["first"]
    assert len(run["after_first"]["dead"]) == first["left"]
    assert run["after_first"]["live_not_active"] == []
    assert set(first["left_units"]) <= set(run["after_first"]["dead"])
    m = re.search(r"the budget \((\S+) s\) is spent: stopped (\d+)/(\d+), (\d+) left \(~(\d+) s\)", run["first_out"])
    assert m, run["first_out"][-3000:]
    assert float(m.group(1)) == BUDGET
    assert (int(m.group(2)), int(m.group(3)), int(m.group(4))) == (first["stopped"], N, first["left"])
    assert int(m.group(5)) == int(first["estimate_left_seconds"])


def test_the_estimate_follows_what_is_left(run):
    """The cost model's direction on real units (its accuracy against measured cleanups is checked on the
    benchmark's recorded runs: tests/unit/plugins/modules/test_kubelet_mount_units.py): the estimate of what
    the budgeted run left is positive and below the estimate of the whole leak, and both are the model's
    figures for this node's systemd (252)."""
    whole, left = run["estimate"]["estimate_seconds"], run["first"]["estimate_left_seconds"]
    assert 0 < left < whole, (left, whole)
    assert run["estimate"]["estimate_basis"].startswith("systemd 252 curve"), run["estimate"]
    assert run["second"]["estimate_left_seconds"] == 0, run["second"]


def test_a_second_run_finishes_the_job(run):
    second = run["second"]
    assert second["left"] == 0
    assert run["first"]["stopped"] + BATCH + second["stopped"] == N  # the raw batch took BATCH of them
    assert run["after_second"] == {"dead": [], "live_not_active": []}
    assert "is spent" not in run["second_out"]
