# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""One look at the node per node-problem-detector tick, shared by the plugin's six rules.

node-problem-detector runs every rule of a custom plugin monitor once per ``invoke_interval``
(``pkg/custompluginmonitor/plugin/plugin.go``: each tick, ``concurrency`` rules at a time): six
processes that read the same node within seconds. The first of a tick runs every condition's
detectors and writes all six verdicts here, in ``<cache_dir>/tick``; the others print their own
verdict from it. The file:

- is written atomically (a temporary file in the same directory, mode 0600, then ``rename``), in a
  directory the plugin made (mode 0700) and owns - anything else (a symlink, another owner, group or
  other write) turns the cache off for that run, which then reads the node itself;
- names its format, the boot (``/proc/sys/kernel/random/boot_id``), the tick's start (the uptime
  when its run began, in centiseconds), how long it stays fresh (half the interval), the config's
  path and a digest of its bytes (length and CRC-32), a copy of the config's bytes (``c`` lines, when
  they are printable ASCII and at most ``MAX_COPY`` bytes: the shell entry, which cannot compute a
  digest, compares them; the Python reader compares the copy too when there is one, the digest when
  there is none), the verdicts (``v`` lines), and ends with ``end``. One grammar for both readers
  (``parse``; the shell entry ``nodefix-npd.j2`` checks the same; ``test_npd_readers.py`` holds the two together): at most ``MAX_BYTES``,
  printable ASCII and newlines only (no NUL), the six header lines in their place, each once, then
  the copy, then the verdicts (each condition once), then ``end`` and nothing after it. A file from
  another boot, older than half the interval, from another config or format, cut short, oversized
  or garbled is ignored and the node read again - never trusted;
- is only ever written by a run holding ``<cache_dir>/lock`` (``flock``): a rule that finds the run
  of another in progress waits for it, polling, until its own deadline (the share of the rule's
  timeout the detectors may use: never past node-problem-detector's timeout), then reads what it
  wrote; past the deadline it says Unknown.

The installed entry (a bash script, ``roles/npd/templates/nodefix-npd.j2``) reads the same
file with bash builtins only - node-problem-detector's pattern is one computing run and five
readers a tick, and a reader that starts no Python costs a few milliseconds; whatever it cannot
prove fresh it hands to the Python entry (``main`` here), which reads the file again before it
imports a detector. This module imports nothing beyond the standard library's cheapest modules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import sys
import time

FORMAT = "2"
MAGIC = "nodefix-npd-tick"
RESULTS, LOCK = "tick", "lock"
# an environment variable, not an argument: a plugin of an older release ignores it (the role's verify
# sets it on the first condition of its run, so that run reads the node as node-problem-detector's next tick will)
FRESH_ENV = "NODEFIX_NPD_FRESH"
POLL = 0.01
# the readers' bounds: a whole file (a real one is under 2 KiB: six header lines, the config's copy, seven verdicts
# of at most max_output_length characters) and the config's copy (a larger config is keyed by its digest only)
MAX_BYTES = 65536
MAX_COPY = 16384
# the bytes a line may hold: printable ASCII (what the shell entry's [[:print:]] is in the C locale)
PRINTABLE = bytes(range(0x20, 0x7f))


def uptime_cs(path="/proc/uptime"):
    """The uptime in centiseconds, from /proc/uptime (what the shell entry reads too)."""
    with open(path) as fh:
        whole, _dot, frac = fh.read().split()[0].partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def boot_id(path="/proc/sys/kernel/random/boot_id"):
    with open(path) as fh:
        return fh.read().strip()


def digest(data):
    """The config's key: its length and CRC-32 (zlib, built in: hashlib would load OpenSSL, ~20 ms a run). It tells
    a changed config from the one a result was looked up with; it is no guard against an adversary, who would need
    to write the root-owned 0700 directory anyway."""
    import zlib  # pylint: disable=import-outside-toplevel
    return "%d-%08x" % (len(data), zlib.crc32(data) & 0xffffffff)


def write_lines(path, lines):
    """``lines`` and an ``end`` line into ``path``, atomically, mode 0600 (``write_bytes``): True when written."""
    try:
        data = ("\n".join(lines + ["end", ""])).encode("ascii")
    except UnicodeError:
        return False
    return write_bytes(path, data, 0o600)


def write_bytes(path, data, mode):
    """``data`` into ``path``, atomically (a temporary file of this pid beside it, whose name does not end like
    ``path``'s, never through a symlink, given ``mode``, renamed over it): True when written; a failure leaves the
    old file and no temporary one."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        try:
            os.unlink(tmp)   # left by a run of the same pid that was killed mid-write
        except OSError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
        try:
            os.fchmod(fd, mode)   # whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def printable_line(line):
    """True for a line of printable ASCII only (no control character, no NUL, nothing else)."""
    try:
        return not line.encode("ascii").translate(None, PRINTABLE)
    except UnicodeError:
        return False


def config_copy(config_bytes):
    """The config's bytes as the ``c`` lines' texts (split at newlines: ``b"{}\\n"`` is ``["{}", ""]``), or [] when
    they cannot be copied (not printable ASCII and newlines, or over MAX_COPY): then only the digest keys them."""
    if config_bytes is None or len(config_bytes) > MAX_COPY or config_bytes.translate(None, PRINTABLE + b"\n"):
        return []
    return config_bytes.decode("ascii").split("\n")


def _number(text):
    """True for a decimal number as the writer writes it (digits, no leading zero, at most 18: the shell's arithmetic
    is 64-bit)."""
    return 0 < len(text) <= 18 and text.isdigit() and (text == "0" or text[0] != "0")


def parse(data, boot, config_path):
    """(header {name: value}, the config copy's bytes or None, {condition: (code, message)}) of a tick file's bytes
    that follow the grammar (see the file's docstring) for this boot and ``config_path``; None otherwise. Freshness,
    the digest and the copy are the caller's (TickCache._parse)."""
    if len(data) > MAX_BYTES or data.translate(None, PRINTABLE + b"\n") or not data.endswith(b"\nend\n"):
        return None
    lines = data.decode("ascii").split("\n")[:-2]
    names = ("boot", "at", "fresh", "config", "key")
    if len(lines) < 6 or lines[0] != "%s %s" % (MAGIC, FORMAT):
        return None
    head = {}
    for name, line in zip(names, lines[1:6]):
        if not line.startswith(name + " "):
            return None
        head[name] = line[len(name) + 1:]
    if head["boot"] != boot or head["config"] != config_path or not _number(head["at"]) \
            or not _number(head["fresh"]) or head["fresh"] == "0":
        return None
    body = lines[6:]
    copies = [line[2:] for line in body if line.startswith("c ")]
    verdicts = {}
    for line in body[len(copies):]:
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != "v" or parts[2] not in ("0", "1", "2") or not parts[3] \
                or parts[1] in verdicts:
            return None
        verdicts[parts[1]] = (int(parts[2]), parts[3])
    if body[:len(copies)] != ["c " + c for c in copies]:
        return None
    return head, ("\n".join(copies).encode("ascii") if copies else None), verdicts


def read_regular(path, limit):
    """The bytes of the regular file ``path`` (opened without blocking: a FIFO is refused, never waited on), at most
    ``limit`` of them; ValueError otherwise."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise ValueError("%s is not a regular file of at most %d bytes" % (path, limit))
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError("%s is over %d bytes" % (path, limit))
    return data


class TickCache(object):
    """The tick's result file and lock in ``directory``, for the config at ``config_path`` whose bytes are
    ``config_bytes``, fresh for half of ``interval`` seconds."""

    def __init__(self, directory, interval, config_path, config_bytes):
        """``interval`` None: how long a result stays fresh is read from the file (the Python entry's read, which
        parses no JSON: the config's bytes, in the key, hold the interval the result was written for)."""
        self.directory = directory
        self.path = os.path.join(directory, RESULTS)
        self.fresh_cs = None if interval is None else int(interval * 100) // 2
        self.config_path = config_path
        self.config_bytes = config_bytes
        self.key = digest(config_bytes)

    def usable(self):
        """True when the directory is the plugin's own (made now if missing: /run is emptied at boot)."""
        try:
            try:
                os.mkdir(self.directory, 0o700)
            except OSError:
                pass
            st = os.lstat(self.directory)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022

    def read_all(self, now=None):
        """({condition: (code, message)}, tick start) of a fresh, whole file of this config; ({}, None) otherwise.
        Opened without blocking and without following a link (a FIFO planted at the path is refused, never waited
        on), read only from a regular file of this user in a directory of this user, at most MAX_BYTES."""
        try:
            st = os.lstat(self.directory)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                return {}, None
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_BYTES:
                    return {}, None
                data = os.read(fd, MAX_BYTES + 1)
            finally:
                os.close(fd)
            return self._parse(data, uptime_cs() if now is None else now)
        except Exception:  # pylint: disable=broad-except  # a garbled file is ignored, never trusted
            return {}, None

    def _parse(self, data, now):
        parsed = parse(data, boot_id(), self.config_path)
        if parsed is None:
            return {}, None
        head, copy, verdicts = parsed
        fresh = str(self.fresh_cs) if self.fresh_cs is not None else head["fresh"]
        if head["fresh"] != fresh:
            return {}, None
        # the copy when there is one (what the shell entry compares), else the digest
        if copy is not None:
            if self.config_bytes is None or copy != self.config_bytes:
                return {}, None
        elif head["key"] != self.key:
            return {}, None
        at = int(head["at"])
        if not 0 <= now - at < int(fresh):
            return {}, None
        return verdicts, at

    def read(self, condition):
        """(code, message) of ``condition`` from a fresh file, or None."""
        return self.read_all()[0].get(condition)

    def write(self, verdicts, at, aliases=None):
        """Replace the file atomically with ``verdicts`` ({condition: (code, message)}) of the tick that started
        at ``at``; ``aliases`` ({old name: name}) answer too. False when it could not be written."""
        lines = ["%s %s" % (MAGIC, FORMAT), "boot %s" % boot_id(), "at %d" % at, "fresh %d" % self.fresh_cs,
                 "config %s" % self.config_path, "key %s" % self.key]
        lines += ["c %s" % line for line in config_copy(self.config_bytes)]
        for name in sorted(verdicts):
            lines.append("v %s %d %s" % (name, verdicts[name][0], verdicts[name][1]))
        for old, new in sorted((aliases or {}).items()):
            if new in verdicts:
                lines.append("v %s %d %s" % (old, verdicts[new][0], verdicts[new][1]))
        if not all(printable_line(line) for line in lines) or len("\n".join(lines + ["end", ""])) > MAX_BYTES:
            return False
        return write_lines(self.path, lines)

    def lock(self, deadline, clock=time.monotonic, sleep=time.sleep):
        """The tick's lock (an open fd; close it to release), waited for until ``deadline``; None past it."""
        import fcntl  # pylint: disable=import-outside-toplevel
        fd = os.open(os.path.join(self.directory, LOCK), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except (IOError, OSError):
                if clock() >= deadline:
                    os.close(fd)
                    return None
                sleep(min(POLL, max(0.0, deadline - clock())))


def cache_for(config, config_path, config_bytes):
    """The TickCache a checked plugin config asks for (``cache_dir`` and ``interval``), None when it asks for none or
    the directory is not the plugin's own."""
    if not config.get("cache_dir") or not config.get("interval") or not config_path:
        return None
    cache = TickCache(config["cache_dir"], config["interval"], config_path, config_bytes)
    return cache if cache.usable() else None


def _args(argv):
    """(condition, config path) of the usual ``--config F --condition C`` (either order, ``=`` forms); None otherwise."""
    found, rest = {}, list(argv)
    while rest:
        name, sep, value = rest.pop(0).partition("=")
        if name not in ("--config", "--condition") or name in found:
            return None
        if not sep:
            if not rest:
                return None
            value = rest.pop(0)
        found[name] = value
    if "--config" not in found or "--condition" not in found:
        return None
    return found["--condition"], found["--config"]


def cached(argv, directory, environ=None):
    """(code, message) of the rule ``argv`` from a fresh result file of this tick in ``directory`` (the role's
    ``npd_cache_dir``), read before any detector - or json, whose regular expressions cost more than the read - is
    imported; None whenever that is not proven (the plugin then answers in full)."""
    environ = os.environ if environ is None else environ
    args = _args(argv)
    if not directory or args is None or environ.get(FRESH_ENV):
        return None
    condition, config_path = args
    try:
        raw = read_regular(config_path, MAX_BYTES)
        return TickCache(directory, None, config_path, raw).read(condition)
    except Exception:  # pylint: disable=broad-except  # anything odd: the full plugin answers
        return None


class SiteOnDemand(object):
    """The entry runs with -S: the site module (a third of the interpreter's start) is imported only when an import
    finds nothing on the standard library's path - the detectors' optional parsers (tomlkit on a Python without
    tomllib, a YAML library for a kubelet config the strict reader leaves) live in site-packages. Last on
    ``sys.meta_path``: asked only after every other finder failed; then ``site.main()`` and the others asked again."""

    def __init__(self):
        self.done = False

    def find_spec(self, fullname, path=None, target=None):
        if path is not None or self.done:
            return None
        self.done = True
        import site  # pylint: disable=import-outside-toplevel
        site.main()
        for finder in [f for f in sys.meta_path if f is not self]:
            spec = finder.find_spec(fullname, None, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                return spec
        return None


def main(argv, out, directory=None):
    """The Python entry: a fresh verdict of this tick in ``directory`` if there is one, else the plugin itself
    (``_npd.plugin.cli``, which reads the node or waits for the run that does)."""
    verdict = cached(argv, directory)
    if verdict is not None:
        out.write(verdict[1] + "\n")
        out.flush()
        return verdict[0]
    if sys.flags.no_site:
        sys.meta_path.append(SiteOnDemand())
    from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin  # pylint: disable=import-outside-toplevel
    return plugin.cli(argv, out=out)
