# SPDX-License-Identifier: GPL-3.0-or-later
"""One look at the node per node-problem-detector tick (module_utils/_npd/tick.py, the npd role's shell entry):
the first rule of a tick reads the node for all six conditions, the others answer from the shared result while it
is fresh; a stale, corrupt, partial, foreign or other-config file is never trusted; a rule that finds another's
run in progress waits within its budget, then says Unknown; a blind node is Unknown as before."""

import fcntl
import io
import json
import os
import shlex
import subprocess
import sys
import threading

import jinja2
import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ALL = sorted(npd_plugin.CONDITIONS)


def fake(monkeypatch, behaviours=None):
    """Every detector replaced by one that records its call and returns ``behaviours[name]`` (findings; an
    exception there is raised, as a detector that fails)."""
    calls = []
    for name, mod in audit_checks.DETECTORS:
        def check(runner, root="/", _name=name, **opts):
            calls.append(_name)
            found = (behaviours or {}).get(_name, [])
            if isinstance(found, Exception):
                raise found
            return {"findings": [dict(f) for f in found]}
        monkeypatch.setattr(mod, "check", check)
    return calls


def zombie():
    return {"id": "pids.zombie_leaker", "severity": "high", "subject": "1234", "title": "t", "evidence": {}, "remedy": "r"}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A plugin config with the role's tick settings (interval 300 s, the cache in tmp_path); the test never
    writes under the machine's /run."""
    monkeypatch.delenv(npd_tick.FRESH_ENV, raising=False)
    cache_dir = tmp_path / "run" / "nodefix-npd"
    cache_dir.parent.mkdir()
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps({"interval": 300, "cache_dir": str(cache_dir), "timeout": 5}))
    return {"config": str(cfg), "dir": str(cache_dir), "file": str(cache_dir / "tick"), "tmp": tmp_path}


def rule(setup, condition):
    out = io.StringIO()
    code = npd_plugin.cli(["--config", setup["config"], "--condition", condition], out=out)
    return code, out.getvalue().strip()


def cache_of(setup, interval=300):
    with open(setup["config"], "rb") as fh:
        return npd_tick.TickCache(setup["dir"], interval, setup["config"], fh.read())


def plant(setup, verdicts=None, at=None, **changes):
    """A result file as the plugin writes it (verdicts default: every condition 'planted'), then ``changes``
    applied to its text (old -> new), to make it stale, foreign, cut short..."""
    os.makedirs(setup["dir"], mode=0o700, exist_ok=True)
    cache = cache_of(setup)
    assert cache.write(verdicts or dict((c, (1, "planted")) for c in ALL),
                       npd_tick.uptime_cs() if at is None else at, aliases=npd_plugin.LEGACY_NAMES)
    with open(setup["file"]) as fh:
        text = fh.read()
    for old, new in changes.items():
        text = text.replace(old.replace("_", " "), new)
    with open(setup["file"], "w") as fh:
        fh.write(text)


# -- one look per tick -------------------------------------------------------------------------------------

def test_the_first_rule_of_a_tick_reads_the_node_once_for_all_six_and_the_others_read_its_result(setup, monkeypatch):
    calls = fake(monkeypatch, {"pids": [zombie()]})
    answers = [rule(setup, c) for c in ALL]
    # every detector ran exactly once, in the first rule's run; the five others read the node not at all
    assert sorted(calls) == sorted(n for n, _m in audit_checks.DETECTORS)
    assert dict(zip(ALL, answers))["PIDsRisk"] == (npd_plugin.NONOK, "1 finding(s): pids.zombie_leaker")
    # the same answers as each rule reading the node itself (today's way)
    no_cache = setup["tmp"] / "plain.json"
    no_cache.write_text(json.dumps({"timeout": 5}))
    del calls[:]
    assert answers == [rule(dict(setup, config=str(no_cache)), c) for c in ALL]
    assert len(calls) == len(audit_checks.DETECTORS)    # each rule its own detectors: 8 detectors in 6 runs
    # the file: the plugin's own, 0600 in a 0700 directory; the 1.0 name answers from it too
    assert os.stat(setup["file"]).st_mode & 0o777 == 0o600 and os.stat(setup["dir"]).st_mode & 0o077 == 0
    del calls[:]
    assert rule(setup, "PIDPressureRisk") == (npd_plugin.NONOK, "1 finding(s): pids.zombie_leaker") and calls == []


def test_a_fresh_result_is_read_and_a_stale_one_is_not(setup, monkeypatch):
    calls = fake(monkeypatch)
    fresh_cs = 300 * 100 // 2
    plant(setup, at=npd_tick.uptime_cs() - fresh_cs + 500)            # 5 s before it turns stale
    assert rule(setup, "KernelRisk") == (1, "planted") and calls == []
    plant(setup, at=npd_tick.uptime_cs() - fresh_cs - 1)               # half the interval old
    assert rule(setup, "KernelRisk") == (npd_plugin.OK, npd_plugin.CONDITIONS["KernelRisk"]["ok_message"])
    assert "kernel" in calls
    # and the run that read the node replaced it: the next rule reads that one
    del calls[:]
    assert rule(setup, "PIDsRisk")[0] == npd_plugin.OK and calls == []


@pytest.mark.parametrize("change", [
    {"end": "", "v_PIDsRisk": "v PIDsRisk"},                                   # cut short: no "end"
    {"nodefix-npd-tick 2": "nodefix-npd-tick 3"},                              # another format
    {"boot ": "boot 0"},                                                       # another boot
    {"\"timeout\": 5": "\"timeout\": 6"},                                  # another config's result (its copy)
    {"fresh 15000": "fresh 99999999"},                                         # another interval's result
    {"v_KernelRisk_1": "v KernelRisk 7"},                                      # garbled verdict
    {"at ": "at x"},                                                           # garbled tick start
])
def test_a_corrupt_partial_or_foreign_result_is_ignored_and_the_node_read_again(setup, monkeypatch, change):
    plant(setup, **change)
    calls = fake(monkeypatch)
    assert rule(setup, "KernelRisk") == (npd_plugin.OK, npd_plugin.CONDITIONS["KernelRisk"]["ok_message"])
    assert "kernel" in calls


def test_a_result_of_another_config_is_not_read_after_the_config_changed(setup, monkeypatch):
    plant(setup)
    with open(setup["config"]) as fh:
        cfg = json.load(fh)
    with open(setup["config"], "w") as fh:
        json.dump(dict(cfg, ignore=["pids.*"]), fh)
    calls = fake(monkeypatch, {"pids": [zombie()]})
    assert rule(setup, "PIDsRisk")[0] == npd_plugin.OK and "pids" in calls


def test_a_symlinked_result_or_a_directory_open_to_others_is_never_used(setup, monkeypatch):
    elsewhere = setup["tmp"] / "elsewhere"
    elsewhere.mkdir()
    plant(dict(setup, dir=str(elsewhere), file=str(elsewhere / "tick")))
    os.makedirs(setup["dir"], mode=0o700)
    os.symlink(str(elsewhere / "tick"), setup["file"])
    calls = fake(monkeypatch)
    assert rule(setup, "KernelRisk")[1] != "planted" and "kernel" in calls
    os.unlink(setup["file"])
    plant(setup)
    os.chmod(setup["dir"], 0o777)
    del calls[:]
    assert rule(setup, "KernelRisk")[1] != "planted" and "kernel" in calls
    # and such a directory is not written either
    assert open(setup["file"]).read().count("planted") == len(ALL) + 1


# -- a run in progress -------------------------------------------------------------------------------------

def hold_lock(setup):
    os.makedirs(setup["dir"], mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(setup["dir"], "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_rule_that_finds_another_run_in_progress_waits_for_it_and_reads_its_result(setup, monkeypatch):
    calls = fake(monkeypatch)
    fd = hold_lock(setup)
    reading = threading.Event()
    real_lock = npd_tick.TickCache.lock

    def lock(self, deadline, **kw):
        reading.set()     # the rule is waiting now: the other run finishes
        return real_lock(self, deadline, **kw)
    monkeypatch.setattr(npd_tick.TickCache, "lock", lock)

    def other_run():
        reading.wait(10)
        plant(setup)
        os.close(fd)      # the other run releases the lock after writing
    thread = threading.Thread(target=other_run)
    thread.start()
    try:
        assert rule(setup, "KernelRisk") == (1, "planted")
    finally:
        thread.join(10)
    assert calls == []


def test_past_its_budget_the_waiting_rule_says_unknown_and_never_reads_the_node(setup, monkeypatch):
    calls = fake(monkeypatch)
    with open(setup["config"]) as fh:
        cfg = json.load(fh)
    with open(setup["config"], "w") as fh:
        json.dump(dict(cfg, timeout=1), fh)     # the budget: 60 % of the rule's timeout
    fd = hold_lock(setup)
    try:
        code, text = rule(setup, "KernelRisk")
    finally:
        os.close(fd)
    assert code == npd_plugin.UNKNOWN and "another run of the plugin still reads the node" in text, text
    assert len(text) <= 80 and calls == []


def test_the_wait_ends_at_the_deadline_it_is_given(setup):
    """TickCache.lock with a clock: it polls until the deadline, never past it (no real time asserted)."""
    fd = hold_lock(setup)
    now, sleeps = [100.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds
    try:
        assert cache_of(setup).lock(100.05, clock=lambda: now[0], sleep=sleep) is None
    finally:
        os.close(fd)
    assert sleeps and all(0 <= s <= npd_tick.POLL for s in sleeps) and now[0] <= 100.05 + 1e-9  # not-timed: a fake clock
    got = cache_of(setup).lock(100.05, clock=lambda: now[0], sleep=sleep)
    assert got is not None
    os.close(got)


def test_a_condition_finished_past_the_deadline_is_answered_but_not_kept_for_the_others(setup, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(npd_plugin.time, "monotonic", lambda: clock[0])
    calls = fake(monkeypatch)
    slow = dict(audit_checks.DETECTORS)["containerd"]
    real = slow.check

    def check(runner, root="/", **opts):
        clock[0] += 10.0          # past 60 % of the 5 s timeout
        return real(runner, root=root, **opts)
    monkeypatch.setattr(slow, "check", check)
    assert rule(setup, "KernelRisk")[0] == npd_plugin.OK
    kept = cache_of(setup).read_all()[0]
    # KernelRisk (first) finished in time; ContainerRuntimeRisk passed the deadline; none was started after it
    assert "KernelRisk" in kept and "ContainerRuntimeRisk" not in kept and set(kept) <= {"KernelRisk"}
    assert "containerd" in calls and "gvisor" not in calls


def test_on_a_slow_node_the_others_are_left_to_their_own_rules(setup, monkeypatch):
    """A condition that took 1.6 s of the 3 s budget (5 s x 60 %): twice that does not fit in what is left, so this
    rule reads no other condition (it would near node-problem-detector's timeout); the next rule reads its own."""
    clock = [1000.0]
    monkeypatch.setattr(npd_plugin.time, "monotonic", lambda: clock[0])
    calls = fake(monkeypatch)
    kernel = dict(audit_checks.DETECTORS)["kernel"]
    real = kernel.check

    def check(runner, root="/", **opts):
        clock[0] += 1.6
        return real(runner, root=root, **opts)
    monkeypatch.setattr(kernel, "check", check)
    assert rule(setup, "KernelRisk")[0] == npd_plugin.OK
    assert sorted(calls) == ["kernel", "reboot"] and set(cache_of(setup).read_all()[0]) == {"KernelRisk"}
    del calls[:]
    assert rule(setup, "PIDsRisk")[0] == npd_plugin.OK and "pids" in calls
    # the second run kept what the first had: both verdicts answer now
    assert {"KernelRisk", "PIDsRisk"} <= set(cache_of(setup).read_all()[0])


def test_a_blind_node_is_unknown_for_every_rule_as_before(setup, monkeypatch):
    calls = fake(monkeypatch)
    with open(setup["config"]) as fh:
        cfg = json.load(fh)
    with open(setup["config"], "w") as fh:
        json.dump(dict(cfg, root=str(setup["tmp"] / "host")), fh)   # a DaemonSet whose /host mount is missing
    for condition in ALL:
        code, text = rule(setup, condition)
        assert code == npd_plugin.UNKNOWN and "cannot see the node at root" in text, (condition, text)
    assert calls == []


# -- the entries: the shell script and the Python entry ----------------------------------------------------

def render(tmp_path, python):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", "npd", "templates")),
                             keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    env.filters["to_json"] = json.dumps
    variables = {"npd_python": python, "npd_lib_dir": str(tmp_path / "lib"), "npd_plugin_name": "nodefix-npd",
                 "npd_cache_dir": str(tmp_path / "run" / "nodefix-npd"), "ansible_managed": "test"}
    (tmp_path / "lib").mkdir()
    for src, dest in (("nodefix-npd.j2", "nodefix-npd"), ("nodefix-npd.py.j2", "nodefix-npd.py")):
        path = tmp_path / "lib" / dest
        path.write_text(env.get_template(src).render(**variables))
        path.chmod(0o755)
    return str(tmp_path / "lib" / "nodefix-npd")


def shell(entry, setup, condition, *extra, **env):
    proc = subprocess.run([entry, "--config", setup["config"], "--condition", condition] + list(extra),
                          capture_output=True, text=True, timeout=30, env=dict(os.environ, **env), check=False)
    return proc.returncode, proc.stdout.strip()


def test_the_shell_entry_answers_a_fresh_result_itself_and_hands_any_doubt_to_python(setup):
    # Python here is a path that does not exist: whatever the shell does not answer itself exits 127
    entry = render(setup["tmp"], "/nonexistent/python3")
    os.utime(setup["config"], (1, 1))               # the config written before the result
    plant(setup, verdicts=dict((c, (i % 3, "verdict %d" % i)) for i, c in enumerate(ALL)))
    for i, condition in enumerate(ALL):
        assert shell(entry, setup, condition) == (i % 3, "verdict %d" % i)
    assert shell(entry, setup, "PIDPressureRisk") == shell(entry, setup, "PIDsRisk")
    assert shell(entry, setup, "PIDsRisk".replace("s", "S"))[0] == 127           # no verdict of that name
    assert shell(entry, setup, "KernelRisk", "--frobnicate")[0] == 127            # an argument it does not know
    assert shell(entry, setup, "KernelRisk", **{npd_tick.FRESH_ENV: "1"})[0] == 127
    os.utime(setup["config"], None)                  # touched: its bytes are still the result's
    assert shell(entry, setup, "KernelRisk") == (2, "verdict 2")
    with open(setup["config"], "a") as fh:           # rewritten, its time set back: another config
        fh.write(" ")
    os.utime(setup["config"], (1, 1))
    assert shell(entry, setup, "KernelRisk")[0] == 127


@pytest.mark.parametrize("change", [
    {"end": ""}, {"nodefix-npd-tick 2": "nodefix-npd-tick 3"}, {"boot ": "boot 0"}, {"at ": "at 1"},
    {"at ": "at 9"}, {"fresh 15000": "fresh 0"}, {"config ": "config /etc"}, {"v_KernelRisk_1": "v KernelRisk 5"},
])
def test_the_shell_entry_never_answers_from_a_stale_foreign_or_cut_file(setup, change):
    entry = render(setup["tmp"], "/nonexistent/python3")
    os.utime(setup["config"], (1, 1))
    plant(setup, **change)
    assert shell(entry, setup, "KernelRisk")[0] == 127, open(setup["file"]).read()


def test_the_python_entry_reads_a_fresh_result_before_importing_a_detector(setup):
    """What the Python entry imports when the result is fresh (``python3 -X importtime`` measures the same):
    no detector, no json or re, no subprocess - the interpreter's start and the read."""
    entry = render(setup["tmp"], sys.executable)
    os.makedirs(str(setup["tmp"] / "lib" / "ansible_collections" / "nodefix" / "k8s"))
    os.symlink(os.path.join(ROOT, "plugins"), str(setup["tmp"] / "lib" / "ansible_collections" / "nodefix" / "k8s" / "plugins"))
    plant(setup)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-I", "-S", entry + ".py", "--config", setup["config"],
                           "--condition", "KernelRisk"], capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout.strip()) == (1, "planted"), proc.stderr
    loaded = set(line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:"))
    assert "ansible_collections.nodefix.k8s.plugins.module_utils._npd.tick" in loaded
    heavy = [m for m in loaded if m.endswith(".detect") or m.endswith("_npd.plugin")
             or m in ("json", "re", "subprocess", "hashlib", "site")]
    assert heavy == [], heavy


def test_under_s_the_site_packages_are_added_only_when_an_import_needs_them(tmp_path):
    """The Python entry runs -S: a module only site-packages has (here one planted in a site directory of a
    private prefix) is still found, through SiteOnDemand - and site is not imported before that."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\n"
        "sys.path.insert(0, %r)\n"
        "from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick\n"
        "sys.meta_path.append(tick.SiteOnDemand())\n"
        "import json\n"
        "before = 'site' in sys.modules\n"
        "import yaml\n"
        "print(before, 'site' in sys.modules, yaml.__name__)\n" % os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([sys.executable, "-S", str(probe)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.split() == ["False", "True", "yaml"], proc.stderr
