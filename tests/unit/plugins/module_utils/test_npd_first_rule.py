# SPDX-License-Identifier: GPL-3.0-or-later
"""What the first rule of a node-problem-detector tick does less of, each giving the answers it gave before: a
symlink loop under a node root found when the walk repeats (_core/paths.py), /proc read through one directory
descriptor (_core/procfs.py), commands started without subprocess (_core/spawn.py), patterns compiled at their first
use (_core/lazy_re.py), the kubelet discovered once per look, the memory hierarchy counted without os.walk's lists,
no systemctl started for a fact no finding reads, and none of subprocess, fnmatch or copy imported."""

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._core import lazy_re
from ansible_collections.nodefix.k8s.plugins.module_utils._core import paths as core_paths
from ansible_collections.nodefix.k8s.plugins.module_utils._core import procfs
from ansible_collections.nodefix.k8s.plugins.module_utils._core import runner as core_runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core import spawn
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import printable
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import detect as kernel_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import detect as reboot_detect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


# -- _core/paths.py: a loop found when the walk repeats ---------------------------------------------------------

def test_a_symlink_loop_under_a_root_is_the_same_error_without_forty_links(tmp_path, monkeypatch):
    """A tree whose /proc is a symlink to /proc (the benchmark's node: this machine's /proc linked in) loops under
    chroot semantics; the walk now stops when it comes back to where it was - the same FileSafetyError, and
    root_path's plain join after it - instead of following the link 40 times for every /proc path."""
    root = tmp_path / "node"
    root.mkdir()
    os.symlink("/proc", str(root / "proc"))
    os.symlink("b", str(root / "a"))
    os.symlink("/a", str(root / "b"))
    links = []
    real_readlink = os.readlink
    monkeypatch.setattr(core_paths.os, "readlink", lambda p: links.append(p) or real_readlink(p))
    for path in ("/proc/1/stat", "/a/x"):
        del links[:]
        with pytest.raises(core_paths.FileSafetyError) as exc:
            core_paths.in_root(str(root), path)
        assert str(exc.value) == "%s: more than %d symlinks on the way (a symlink loop?)" % (path, core_paths.MAX_SYMLINKS)
        assert len(links) <= 3, links
    assert core_paths.root_path(str(root), "/proc/1/stat") == os.path.join(str(root), "proc/1/stat")
    # a long chain that is no loop still resolves, and one of more than 40 links is still refused
    for i in range(45):
        os.symlink("/l%d" % (i + 1), str(root / ("l%d" % i)))
    (root / "l45").write_text("end")
    assert core_paths.in_root(str(root), "/l5") == str(root / "l45")
    with pytest.raises(core_paths.FileSafetyError):
        core_paths.in_root(str(root), "/l0")


# -- _core/procfs.py ---------------------------------------------------------------------------------------------

def test_pid_files_reads_each_process_file_as_read_text_does_lowest_pid_first(tmp_path):
    proc = tmp_path / "proc"
    for pid, text in ((100, "containerd\n"), (2, u"a\0b\udcff\0"), (30, None)):
        (proc / str(pid)).mkdir(parents=True)
        if text is not None:
            (proc / str(pid) / "comm").write_bytes(text.encode("utf-8", "surrogateescape"))
    (proc / "self").mkdir()
    (proc / "uptime").write_text("1.0 1.0\n")
    got = list(procfs.pid_files(str(proc), "comm"))
    assert got == [(pid, core_paths.read_text(str(proc / str(pid) / "comm"))) for pid in (2, 30, 100)]
    assert got[1] == (30, None)
    assert list(procfs.pid_files(str(tmp_path / "missing"), "comm")) == []


# -- _core/spawn.py: Popen's answers without subprocess ----------------------------------------------------------

COMMANDS = [
    ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
    ["/bin/sh", "-c", "kill -9 $$"],
    ["/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; head -c 200000 /dev/zero | tr '\\0' y >&2"],
    ["/bin/sh", "-c", "cat; echo stdin-was-empty"],
    ["/bin/sh", "-c", "yes | head -1; echo $?"],                    # SIGPIPE back to its default in the child
    ["/bin/sh", "-c", "ls /proc/self/fd | wc -l"],                   # no descriptor but 0, 1, 2 (and ls's own)
]


@pytest.mark.parametrize("argv", COMMANDS, ids=range(len(COMMANDS)))
def test_spawn_answers_as_popen_does(argv):
    leak = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leak, True)          # Popen's close_fds closes it in the child; so must spawn
    try:
        env = dict(os.environ, **core_runner.C_LOCALE)
        for timeout in (None, 30):
            assert spawn.available(argv)
            got = spawn.run(argv, env, timeout)
            want = core_runner.SubprocessRunner._popen(argv, env, None, timeout)
            assert got == want, (got[:3], want[:3])
    finally:
        os.close(leak)


def test_at_the_deadline_spawn_kills_the_command_and_what_it_started(tmp_path):
    marker = tmp_path / "grandchild.pid"
    argv = ["/bin/sh", "-c", "echo started; sleep 60 & echo $! > %s; wait" % marker]
    rc, out, err = core_runner.SubprocessRunner(deadline=time.monotonic() + 0.5).run(argv, check=False)
    assert (rc, out) == (core_runner.SubprocessRunner.TIMED_OUT, "started\n")
    assert "sh: killed after" in err and "(no answer before the deadline)" in err
    grandchild = int(marker.read_text())
    for _i in range(200):        # killed with its group: gone, or a zombie until its new parent reaps it
        try:
            with open("/proc/%d/stat" % grandchild) as fh:
                state = fh.read().rsplit(") ", 1)[1][0]
        except OSError:
            state = "gone"
        if state in ("gone", "Z"):
            break
        time.sleep(0.05)
    else:
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail("the command's own child was left running")


def test_a_command_that_cannot_start_raises_what_popen_raises():
    for argv in (["/nonexistent/binary", "--version"], ["/etc/hostname"]):
        with pytest.raises(OSError) as got:
            core_runner.SubprocessRunner(deadline=time.monotonic() + 5).run(argv)
        with pytest.raises(OSError) as want:
            subprocess.Popen(argv)
        assert (type(got.value), str(got.value)) == (type(want.value), str(want.value))


def test_the_runner_starts_commands_without_importing_subprocess():
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import SubprocessRunner\n"
            "print(SubprocessRunner(deadline=time.monotonic() + 30).run(['/bin/echo', 'hi'])[1].strip(), "
            "sorted(m for m in ('subprocess', 'selectors', 'threading', 'signal') if m in sys.modules))\n"
            % os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.split() == ["hi", "[]"], proc.stderr


# -- _core/lazy_re.py --------------------------------------------------------------------------------------------

def test_a_lazy_pattern_compiles_at_its_first_use_and_answers_as_the_compiled_one(monkeypatch):
    compiled = []
    real = re.compile
    monkeypatch.setattr(lazy_re.re, "compile", lambda *a: compiled.append(a) or real(*a))
    pattern = lazy_re.lazy_compile(r"^(\d+)\.(\d+)$", re.IGNORECASE)
    copy.deepcopy(pattern)
    repr(pattern)
    assert compiled == []
    want = re.compile(r"^(\d+)\.(\d+)$", re.IGNORECASE)
    assert pattern.match("5.15").groups() == want.match("5.15").groups() and pattern.match("x") is None
    assert pattern.sub("v", "1.2") == "v" and (pattern.pattern, pattern.flags) == (want.pattern, want.flags)
    assert pattern.match("6.1").groups() == ("6", "1")


def test_the_plugins_modules_compile_no_pattern_at_import():
    """Every module-level pattern of the modules the node-problem-detector plugin imports is a lazy one (before:
    43 compiled at every start of the plugin, most unused)."""
    names = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, yaml; print(json.dumps(yaml.safe_load(open(%r))['npd_plugin']['module_utils']))"
         % os.path.join(ROOT, "meta", "node_files.yml")], capture_output=True, text=True, check=True).stdout)
    modules = [n[:-3].replace("/", ".") for n in names if not n.endswith("__init__.py") and n != "_core/redact.py"]
    code = ("import importlib, json, re, sys; sys.path.insert(0, %r)\n"
            "P = 'ansible_collections.nodefix.k8s.plugins.module_utils.'\n"
            "mods = [importlib.import_module(P + m) for m in %r]\n"
            "print(json.dumps(sorted('%%s.%%s' %% (m.__name__, k) for m in mods for k, v in vars(m).items()\n"
            "                        if isinstance(v, re.Pattern) or (k.endswith('_RE') and 'match' in vars(v)))))\n"
            % (os.path.join(ROOT, ".cache", "collections"), modules))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


# -- the kubelet discovered once per look ------------------------------------------------------------------------

def test_a_read_only_runner_discovers_the_kubelet_once_and_each_caller_gets_its_own_node(tmp_path, monkeypatch):
    import shutil
    root = str(tmp_path / "node")
    shutil.copytree(os.path.join(ROOT, "lab", "kubelet-double", "layouts", "kubeadm"), root, symlinks=True)
    reads = []
    real = kubelet_node._unit_files
    monkeypatch.setattr(kubelet_node, "_unit_files", lambda *a: reads.append(a[1]) or real(*a))
    look = npd_plugin.TickRunner(deadline=time.monotonic() + 30)
    first, second = kubelet_node.discover(look, root), kubelet_node.discover(look, root)
    assert len(reads) == 1 and first is not second and first.__dict__ == second.__dict__
    first.version = (1, 29, 3)
    assert second.version is None
    plain = core_runner.SubprocessRunner(deadline=time.monotonic() + 30)    # a module's runner: reads every time
    again = kubelet_node.discover(plain, root)
    kubelet_node.discover(plain, root)
    assert len(reads) == 3 and again.__dict__ == second.__dict__


# -- the memory hierarchy counted as os.walk counts it -------------------------------------------------------------

def test_the_memory_cgroup_directories_are_counted_as_os_walk_visits_them(tmp_path):
    top = tmp_path / "memory"
    for d in ("kubepods/pod1/c1", "kubepods/pod1/c2", "kubepods/pod2", "system.slice/a.service"):
        (top / d).mkdir(parents=True)
        (top / d / "memory.stat").write_text("")
    os.symlink(str(top / "kubepods"), str(top / "linked"))         # a symlinked directory: not walked into
    os.symlink(str(top / "kubepods" / "pod2" / "memory.stat"), str(top / "file-link"))
    assert kernel_detect._count_dirs(str(top)) == sum(1 for _w in os.walk(str(top))) == 8
    assert kernel_detect._count_dirs(str(tmp_path / "missing")) == sum(1 for _w in os.walk(str(tmp_path / "missing"))) == 0


# -- messages, facts, imports ------------------------------------------------------------------------------------

def test_a_message_is_what_it_was_with_or_without_the_fast_path():
    for text in ("containerd, runc and CPU quotas as required", "4 finding(s): kubelet.api_qps_low", "a\tb\n c",
                 u"caf\u00e9", u"bell\x07 and \x1b[31m", u"lone \udcff", "x" * 200, "", u"\x85next\u2028line"):
        for limit in (80, 20):
            line = printable(" ".join(text.split())).encode("ascii", "backslashreplace").decode("ascii")
            assert npd_plugin.say(text, limit) == (line if len(line) <= limit else line[:limit - 3] + "...")


def test_the_plugins_runner_starts_no_systemctl_for_the_reboot_detectors_fact(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(core_runner.SubprocessRunner, "run", lambda self, argv, check=True, data=None, msg=None:
                        started.append(argv) or (0, "running\n", ""))
    root = tmp_path / "node"
    (root / "proc" / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text("6.1.0-27-amd64\n")
    look = reboot_detect.check(npd_plugin.TickRunner(deadline=time.monotonic() + 30), root=str(root))
    audit = reboot_detect.check(core_runner.SubprocessRunner(deadline=time.monotonic() + 30), root=str(root))
    assert look["findings"] == audit["findings"]
    assert (look["systemd_state"], audit["systemd_state"]) == (None, "running")
    assert [a[1:] for a in started if a[-1] == "is-system-running"] == [["is-system-running"]]


def test_the_first_rule_of_a_tick_imports_no_subprocess_fnmatch_or_copy(tmp_path):
    """The Python entry reading the node for all six conditions (a node tree without a kubelet, this machine's
    commands): the modules it imports by statement (``python3 -X importtime``) hold none of the three."""
    root = tmp_path / "node"
    for d in ("proc/1", "sys/fs/cgroup"):
        (root / d).mkdir(parents=True)
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps({"root": str(root), "timeout": 30, "interval": 300, "cache_dir": str(tmp_path / "cache")}))
    lib, cache = os.path.join(ROOT, ".cache", "collections"), str(tmp_path / "cache")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick\n"
            "sys.exit(tick.main(sys.argv[1:], sys.stdout, %r))\n" % (lib, cache))
    proc = subprocess.run([sys.executable, "-X", "importtime", "-I", "-c", code, "--config", str(cfg),
                           "--condition", "KernelRisk"], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, NODEFIX_NPD_FRESH="1"))
    assert proc.returncode in (0, 1, 2) and proc.stdout.strip(), proc.stderr[-2000:]
    loaded = set(line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:"))
    assert "ansible_collections.nodefix.k8s.plugins.module_utils._npd.plugin" in loaded
    assert sorted(loaded & {"subprocess", "fnmatch", "copy", "selectors", "threading"}) == []
    with open(str(tmp_path / "cache" / "tick")) as fh:
        assert sum(1 for line in fh if line.startswith("v ")) == len(npd_plugin.CONDITIONS) + len(npd_plugin.LEGACY_NAMES)


def test_a_c_library_without_posix_spawn_setsid_falls_back_to_popen(monkeypatch):
    """glibc before 2.26 has no POSIX_SPAWN_SETSID: os.posix_spawn(setsid=True) raises NotImplementedError before
    it starts anything; the runner then runs the command through Popen, with the same answer."""
    def no_setsid(*_args, **_kwargs):
        raise NotImplementedError("setsid is not supported here")

    monkeypatch.setattr(spawn, "run", no_setsid)
    rc, out, _err = core_runner.SubprocessRunner(deadline=time.monotonic() + 30).run(["/bin/echo", "still", "answered"])
    assert rc == 0 and out.strip() == "still answered"


def test_a_command_that_closes_its_output_and_runs_on_is_killed_at_the_deadline():
    """Review finding: the spawn path waited for the exit without a deadline once both pipes were closed (Popen's
    communicate(timeout=) waits with it): `exec >/dev/null 2>&1; sleep 600` held the caller for 600 s."""
    for run in (lambda argv, left: spawn.run(argv, os.environ, left),
                lambda argv, left: core_runner.SubprocessRunner._popen(argv, os.environ, None, left)):
        # (before: the spawn path waited out the 600 s and answered rc 0, not killed)
        rc, out, err, killed = run(["/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 600"], 0.5)
        assert killed and rc == -signal.SIGKILL and (out, err) == (b"", b"")


def test_a_descendant_that_left_the_group_and_holds_the_pipes_does_not_hold_the_caller(tmp_path):
    marker = tmp_path / "daemon.pid"
    argv = ["/bin/sh", "-c", "setsid sh -c 'echo $$ > %s; exec sleep 600' & echo started; sleep 600" % marker]
    try:
        rc, out, _err, killed = spawn.run(argv, os.environ, 0.5)
        assert killed and rc == -signal.SIGKILL and out == b"started\n"
    finally:
        for _i in range(100):
            if marker.exists() and marker.read_text().strip():
                os.kill(int(marker.read_text()), signal.SIGKILL)
                break
            time.sleep(0.05)


def test_spawn_is_not_used_where_it_cannot_answer_as_popen(monkeypatch):
    assert spawn.available(["/bin/true"])
    monkeypatch.setattr(spawn._signals, "getsignal", lambda _s: signal.SIG_IGN)
    assert not spawn.available(["/bin/true"])   # SIGCHLD ignored: no exit code to wait for
