# SPDX-License-Identifier: GPL-3.0-or-later
"""The tick file's two readers fed the same hostile files: the shell entry (roles/npd/templates/nodefix-npd.j2,
rendered by Ansible's own templating as the role's template task renders it) answers exactly what the Python reader
(module_utils/_npd/tick.py: ``cached``, the Python entry's read before any detector) answers, or hands the rule to
Python - never a verdict Python would not give. The Python reader never blocks (a FIFO at a path is refused).

The shell entry here runs a Python path that does not exist: whatever it hands on exits 127. The node's /proc is a
directory of this test (the template's ``npd_proc_dir``; the role leaves it at /proc), so that uptime and boot id can
be hostile too; the Python reader reads the same two files (its ``uptime_cs``/``boot_id`` pointed at them)."""

import json
import os
import subprocess
import threading

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick

try:  # ansible-core 2.19 templates only what is marked trusted (a role's template file is)
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older cores trust every string
    def trust_as_template(text):
        return text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HANDED_ON = (127, "")
BOOT = "0b1f0a39-4b8e-4a7e-9d55-2f5d2a6c1e01"
UPTIME_CS = 1234567            # 12345.67 s
CONDITION = "KernelRisk"


def render_like_the_role(tmp_path, variables):
    """roles/npd/templates/nodefix-npd.j2 through Ansible's Templar with the template action's settings
    (trim_blocks, backslashes not escaped, ansible_managed)."""
    with open(os.path.join(ROOT, "roles", "npd", "templates", "nodefix-npd.j2"), encoding="utf-8") as fh:
        source = fh.read()
    templar = Templar(loader=DataLoader(), variables=dict(variables, ansible_managed="Ansible managed"))
    text = templar.template(trust_as_template(source), escape_backslashes=False, preserve_trailing_newlines=True,
                            overrides={"trim_blocks": True, "lstrip_blocks": False})
    path = tmp_path / "nodefix-npd"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A plugin config, the plugin's cache directory, a /proc of this test and the shell entry rendered for them."""
    monkeypatch.delenv(npd_tick.FRESH_ENV, raising=False)
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel" / "random").mkdir(parents=True)
    (proc / "uptime").write_text("%d.%02d 4321.00\n" % divmod(UPTIME_CS, 100))
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text(BOOT + "\n")
    cache_dir = tmp_path / "run" / "nodefix-npd"
    cache_dir.parent.mkdir()
    cache_dir.mkdir(mode=0o700)
    config = tmp_path / "npd.json"
    config.write_text(json.dumps({"interval": 300, "cache_dir": str(cache_dir), "timeout": 5}, indent=2) + "\n")
    entry = render_like_the_role(tmp_path, {"npd_python": "/nonexistent/python3", "npd_lib_dir": str(tmp_path),
                                            "npd_plugin_name": "nodefix-npd", "npd_cache_dir": str(cache_dir),
                                            "npd_proc_dir": str(proc)})
    uptime_cs, boot_id = npd_tick.uptime_cs, npd_tick.boot_id
    monkeypatch.setattr(npd_tick, "uptime_cs", lambda path=None: uptime_cs(str(proc / "uptime")))
    monkeypatch.setattr(npd_tick, "boot_id", lambda path=None: boot_id(str(proc / "sys" / "kernel" / "random" / "boot_id")))
    return {"entry": entry, "dir": str(cache_dir), "file": str(cache_dir / "tick"), "config": str(config),
            "proc": proc, "tmp": tmp_path}


def write(node, verdicts=None, at=None):
    """The tick file as the plugin writes it."""
    with open(node["config"], "rb") as fh:
        cache = npd_tick.TickCache(node["dir"], 300, node["config"], fh.read())
    assert cache.write(verdicts or {CONDITION: (1, "1 finding(s): kernel.known_bad"), "PIDsRisk": (0, "ok")},
                       UPTIME_CS - 100 if at is None else at, aliases=npd_plugin.LEGACY_NAMES)


def edit(path, old, new, count=1):
    with open(path, "rb") as fh:
        data = fh.read()
    assert data.count(old) >= count, (old, data)
    with open(path, "wb") as fh:
        fh.write(data.replace(old, new, count))


def python_reader(node):
    """What the Python entry answers before any detector (None: it reads the node), in a thread: a reader that
    blocked (on a FIFO) fails the test instead of hanging it."""
    answer = {}
    worker = threading.Thread(target=lambda: answer.setdefault("v", npd_tick.cached(
        ["--config", node["config"], "--condition", CONDITION], node["dir"])), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the Python reader blocked"
    return answer["v"]


def shell_reader(node):
    proc = subprocess.run([node["entry"], "--config", node["config"], "--condition", CONDITION], capture_output=True,
                          text=True, timeout=20, check=False, env=dict(os.environ, LC_ALL="C.UTF-8"))
    return proc.returncode, proc.stdout.strip()


def both(node):
    """(Python's answer, the shell's), after holding the shell to Python's: the same answer, or handed on."""
    python, shell = python_reader(node), shell_reader(node)
    if python is None:
        assert shell == HANDED_ON, (shell, open(node["file"], "rb").read() if os.path.isfile(node["file"]) else None)
    else:
        assert shell in (tuple(python), HANDED_ON), (python, shell)
    return python, shell


def test_a_well_formed_fresh_file_is_answered_by_both_alike(node):
    write(node)
    assert both(node) == ((1, "1 finding(s): kernel.known_bad"), (1, "1 finding(s): kernel.known_bad"))
    # what the shell reads is what Python reads: a file at the size bound, padded with other conditions' verdicts
    pad = os.path.getsize(node["file"])
    verdicts = {CONDITION: (2, "cannot check")}
    width = 60
    for i in range((npd_tick.MAX_BYTES - pad) // len("v Pad00000 0 %s\n" % ("x" * width))):
        verdicts["Pad%05d" % i] = (0, "x" * width)
    write(node, verdicts)
    size = os.path.getsize(node["file"])
    assert npd_tick.MAX_BYTES - 200 < size <= npd_tick.MAX_BYTES, size
    assert both(node) == ((2, "cannot check"), (2, "cannot check"))


def fifo(node, path):
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path, 0o600)


def rewrite_config_same_mtime(node, new_bytes):
    st = os.stat(node["config"])
    with open(node["config"], "wb") as fh:
        fh.write(new_bytes)
    os.utime(node["config"], ns=(st.st_atime_ns, st.st_mtime_ns))


def other_owner(path):
    os.chown(path, 65534, 65534)


HOSTILE = {
    # a FIFO at the tick path: never opened to wait on (Python: O_NONBLOCK and a regular file only)
    "fifo at the tick path": lambda node: fifo(node, node["file"]),
    "fifo at the config path": lambda node: fifo(node, node["config"]),
    # the config rewritten with its old modification time: its bytes are not the result's
    "config rewritten, same mtime": lambda node: rewrite_config_same_mtime(
        node, open(node["config"], "rb").read().replace(b'"timeout": 5', b'"timeout": 6')),
    "config rewritten with a NUL, same mtime": lambda node: rewrite_config_same_mtime(
        node, open(node["config"], "rb").read().replace(b'"timeout"', b'"time\0out"')),
    "config grown past the copy's bound, same mtime": lambda node: rewrite_config_same_mtime(
        node, open(node["config"], "rb").read() + b" " * npd_tick.MAX_COPY),
    # stray and repeated header lines
    "a boot line among the verdicts": lambda node: edit(node["file"], b"\nend\n", b"\nboot %s\nend\n" % BOOT.encode()),
    "a repeated at line": lambda node: edit(node["file"], b"\nfresh ", b"\nat %d\nfresh " % (UPTIME_CS - 100)),
    "a repeated config line": lambda node: edit(node["file"], b"\nkey ", b"\nconfig %s\nkey " % node["config"].encode()),
    "header lines swapped": lambda node: edit(node["file"], b"\nat %d\nfresh 15000\n" % (UPTIME_CS - 100),
                                              b"\nfresh 15000\nat %d\n" % (UPTIME_CS - 100)),
    "the condition's verdict twice": lambda node: edit(node["file"], b"\nend\n", b"\nv KernelRisk 0 all fine\nend\n"),
    "a verdict before the config's copy": lambda node: edit(node["file"], b"\nc {", b"\nv Other 0 x\nc {"),
    "a copy line after a verdict of no name": lambda node: edit(node["file"], b"\nend\n", b"\nv  0 x\nc \nend\n"),
    "an empty line in the header": lambda node: edit(node["file"], b"\nboot ", b"\n\nboot "),
    "a copy line too many": lambda node: edit(node["file"], b"\nv ", b"\nc \nv "),
    "a copy line too few": lambda node: edit(node["file"], b"\nc \n", b"\n"),
    "an empty line": lambda node: edit(node["file"], b"\nend\n", b"\n\nend\n"),
    "a line after end": lambda node: edit(node["file"], b"\nend\n", b"\nend\nv Other 0 x\n"),
    "no newline after end": lambda node: edit(node["file"], b"\nend\n", b"\nend"),
    "an unknown line": lambda node: edit(node["file"], b"\nend\n", b"\nx KernelRisk 0 fine\nend\n"),
    # size
    "oversized": lambda node: edit(node["file"], b"\nend\n", b"".join(
        b"\nv Pad%05d 0 %s" % (i, b"x" * 60) for i in range(1100)) + b"\nend\n"),
    # NUL bytes and other bytes the grammar has not
    "a NUL in the verdict": lambda node: edit(node["file"], b"kernel.known_bad", b"kernel.\0known_bad"),
    "a NUL replacing a byte": lambda node: edit(node["file"], b"kernel.known_bad", b"kernel\0known_bad"),
    "a NUL after end": lambda node: edit(node["file"], b"\nend\n", b"\nend\n\0"),
    "a carriage return": lambda node: edit(node["file"], b"known_bad\n", b"known_bad\r\n"),
    "a non-ASCII byte": lambda node: edit(node["file"], b"known_bad", "known_b\u00e4d".encode("utf-8")),
    # whose files
    "the cache directory another user's": lambda node: other_owner(node["dir"]),
    "the tick file another user's": lambda node: other_owner(node["file"]),
    "the tick file a symlink": lambda node: (os.rename(node["file"], node["file"] + ".real"),
                                             os.symlink(node["file"] + ".real", node["file"])),
    "the cache directory a symlink": lambda node: (os.rename(node["dir"], node["dir"] + ".real"),
                                                   os.symlink(node["dir"] + ".real", node["dir"])),
    # /proc: an uptime without its point (Python reads 12345 as 1234500 cs; the file's tick began 5 cs later: not
    # fresh for Python - the shell that read it as 1234512 answered), and other odd uptimes and boot ids
    "uptime without a decimal point": lambda node: (
        (node["proc"] / "uptime").write_text("12345 4321.00\n"), write(node, at=1234505)),
    "uptime with two points": lambda node: (node["proc"] / "uptime").write_text("12345.6.7 4321.00\n"),
    "uptime with a leading zero": lambda node: (node["proc"] / "uptime").write_text("012345.67 4321.00\n"),
    "another boot": lambda node: (node["proc"] / "sys" / "kernel" / "random" / "boot_id").write_text(
        BOOT.replace("0b", "0c") + "\n"),
    "boot id with a second line": lambda node: (node["proc"] / "sys" / "kernel" / "random" / "boot_id").write_text(
        BOOT + "\nmore\n"),
    "boot id with a NUL": lambda node: (node["proc"] / "sys" / "kernel" / "random" / "boot_id").write_text(
        BOOT + "\0\n"),
    # freshness
    "stale": lambda node: write(node, at=UPTIME_CS - 15000),
    "from the future": lambda node: write(node, at=UPTIME_CS + 1),
    "fresh 0": lambda node: edit(node["file"], b"\nfresh 15000\n", b"\nfresh 0\n"),
    "an at with a leading zero": lambda node: edit(node["file"], b"\nat 1", b"\nat 01"),
    "an at of 19 digits": lambda node: edit(node["file"], b"\nat %d\n" % (UPTIME_CS - 100), b"\nat 1%018d\n" % 0),
    # a key that is not the config's: the copy decides for both (the shell cannot compute a digest)
    "a key of another config, the copy this one's": lambda node: edit(node["file"], b"\nkey ", b"\nkey 9"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_gets_the_same_answer_from_both_readers_or_goes_to_python(node, name):
    if "another user" in name and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    write(node)
    HOSTILE[name](node)
    python, shell = both(node)
    # the expectation for each case besides the parity: which ones neither reader may answer
    answered = {"uptime with a leading zero", "a key of another config, the copy this one's"}
    if name in answered:
        assert python == (1, "1 finding(s): kernel.known_bad"), python
    else:
        assert python is None and shell == HANDED_ON, (python, shell)
