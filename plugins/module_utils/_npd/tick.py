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
  path and a digest of its bytes, and ends with ``end``: a file from another boot, older than half
  the interval, from another config or format, cut short or garbled is ignored and the node read
  again - never trusted;
- is only ever written by a run holding ``<cache_dir>/lock`` (``flock``): a rule that finds the run
  of another in progress waits for it, polling, until its own deadline (the share of the rule's
  timeout the detectors may use: never past node-problem-detector's timeout), then reads what it
  wrote; past the deadline it says Unknown.

The installed entry (a POSIX shell script, ``roles/npd/templates/nodefix-npd.j2``) reads the same
file with shell builtins only - node-problem-detector's pattern is one computing run and five
readers a tick, and a reader that starts no Python costs about a millisecond; whatever it cannot
prove fresh it hands to the Python entry (``main`` here), which reads the file again before it
imports a detector. This module imports nothing beyond the standard library's cheapest modules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time

FORMAT = "1"
MAGIC = "nodefix-npd-tick"
RESULTS, LOCK = "tick", "lock"
# an environment variable, not an argument: a plugin of an older release ignores it (the role's verify
# sets it on the first condition of its run, so that run reads the node as node-problem-detector's next tick will)
FRESH_ENV = "NODEFIX_NPD_FRESH"
POLL = 0.01


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
    """``lines`` and an ``end`` line into ``path``, atomically (a 0600 temporary file of this pid, never through a
    symlink, renamed over it): True when written; a failure leaves the old file and no temporary one."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        try:
            os.unlink(tmp)   # left by a run of the same pid that was killed mid-write
        except OSError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, ("\n".join(lines + ["end", ""])).encode("ascii"))
        finally:
            os.close(fd)
        os.rename(tmp, path)
        return True
    except (OSError, UnicodeError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


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
        import stat  # pylint: disable=import-outside-toplevel
        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022

    def read_all(self, now=None):
        """({condition: (code, message)}, tick start) of a fresh, whole file of this config; ({}, None) otherwise."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                st = os.fstat(fd)
                data = os.read(fd, 65536) if st.st_uid == os.geteuid() else b""
            finally:
                os.close(fd)
            return self._parse(data.decode("ascii"), uptime_cs() if now is None else now)
        except Exception:  # pylint: disable=broad-except  # a garbled file is ignored, never trusted
            return {}, None

    def _parse(self, text, now):
        lines = text.split("\n")
        head = dict(line.split(" ", 1) for line in lines[:6] if " " in line)
        fresh = str(self.fresh_cs) if self.fresh_cs is not None else head.get("fresh", "")
        if lines[0] != "%s %s" % (MAGIC, FORMAT) or "end" not in lines or head.get("boot") != boot_id() \
                or head.get("config") != self.config_path or head.get("key") != self.key \
                or head.get("fresh") != fresh or not fresh.isdigit():
            return {}, None
        at = int(head["at"])
        if not 0 <= now - at < int(fresh):
            return {}, None
        verdicts = {}
        for line in lines[6:lines.index("end")]:
            tag, condition, code, message = line.split(" ", 3)
            if tag != "v" or code not in ("0", "1", "2") or not message:
                return {}, None
            verdicts[condition] = (int(code), message)
        return verdicts, at

    def read(self, condition):
        """(code, message) of ``condition`` from a fresh file, or None."""
        return self.read_all()[0].get(condition)

    def write(self, verdicts, at, aliases=None):
        """Replace the file atomically with ``verdicts`` ({condition: (code, message)}) of the tick that started
        at ``at``; ``aliases`` ({old name: name}) answer too. False when it could not be written."""
        lines = ["%s %s" % (MAGIC, FORMAT), "boot %s" % boot_id(), "at %d" % at, "fresh %d" % self.fresh_cs,
                 "config %s" % self.config_path, "key %s" % self.key]
        for name in sorted(verdicts):
            lines.append("v %s %d %s" % (name, verdicts[name][0], verdicts[name][1]))
        for old, new in sorted((aliases or {}).items()):
            if new in verdicts:
                lines.append("v %s %d %s" % (old, verdicts[new][0], verdicts[new][1]))
        if "\n" in self.config_path or any("\n" in m or not m for _c, m in verdicts.values()):
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
        with open(config_path, "rb") as fh:
            raw = fh.read()
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
