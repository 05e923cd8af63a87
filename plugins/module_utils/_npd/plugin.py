# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The detectors as node-problem-detector custom plugins, without Ansible.

node-problem-detector (NPD, https://github.com/kubernetes/node-problem-detector)
runs a "custom plugin" per rule of a custom plugin monitor config
(``pkg/custompluginmonitor``) every ``invoke_interval`` and turns its exit
code into a NodeCondition (``plugin/plugin.go``): 0 OK (condition False), 1
NonOK (condition True, the problem is there), anything else Unknown. The first
``max_output_length`` bytes of stdout (80 by default) become the condition's
message; the plugin is killed after the rule's ``timeout``.

One condition per group of findings, each backed by the detectors that own
those findings (``CONDITIONS``). The exit code says what is known:

- 1 only for a real finding: one of the condition's detectors reports a finding
  at ``min_severity`` or worse that no ``ignore`` glob and no active waiver of
  the fleet (``waivers`` for ``host``, the same rules and code as the fleet
  report) matches;
- 2 (Unknown, with the reason) whenever the plugin could not look: a detector
  that could not run (``audit.check_failed``), a finding that says a detector
  could not see everything (``CANNOT_CHECK``, whatever its severity), a root
  that does not show the node's ``/proc`` and ``/sys``, a bad configuration,
  or any error of the plugin's own;
- 0 only when every detector ran and found nothing at ``min_severity``.

It is cheap: the six rules of a tick share one look at the node (``cached_run``,
``_npd/tick.py``: the first reads every condition, the others answer from its result; without
``interval`` and ``cache_dir`` a condition imports and runs only its own detectors,
``DETECTOR_MODULES``), and every command it runs is killed at a deadline well
inside the rule's ``timeout`` (``SubprocessRunner``): a hung container runtime
is reported as such (``containerd.socket_unreachable``), the plugin is never
the one NPD kills. The role ``nodefix.k8s.npd`` installs this file's ``cli``
as the plugin and writes the monitor config that ``monitor_config`` returns
(``monitor_config_errors`` holds it to NPD's own rules).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import json
import os
import sys
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import detect as audit_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES, TEXTFILE, findings_at_or_above
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import SubprocessRunner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import printable
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._audit.waivers import WaiverError, check_waivers, waiver_for
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import textfile as npd_textfile
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick
from ansible_collections.nodefix.k8s.plugins.module_utils._npd.versions import VersionCache

OK, NONOK, UNKNOWN = 0, 1, 2

# condition type -> the detectors whose findings raise it, and the reason shown while it is False
CONDITIONS = {
    "GVisorMemoryLimitIgnored": {"checks": ["gvisor"], "ok_reason": "GVisorSandboxesWithinLimits",
                                 "ok_message": "gVisor sandboxes are sized to their pod's memory limit"},
    "KubeletMountUnitsLeaking": {"checks": ["mount_units"], "ok_reason": "NoLeakedMountUnits",
                                 "ok_message": "no leaked kubelet mount units"},
    "PIDsRisk": {"checks": ["pids"], "ok_reason": "PIDHeadroomOK",
                 "ok_message": "PID limits and zombies within bounds"},
    "KubeletConfigRisk": {"checks": ["kubelet"], "ok_reason": "KubeletConfigOK",
                          "ok_message": "kubelet rate limits and image pulls as required"},
    "ContainerRuntimeRisk": {"checks": ["containerd", "cpu_quota"], "ok_reason": "ContainerRuntimeOK",
                             "ok_message": "containerd, runc and CPU quotas as required"},
    "KernelRisk": {"checks": ["kernel", "reboot"], "ok_reason": "KernelOK",
                   "ok_message": "kernel without known node killers, no reboot pending"},
}

# 1.0 condition type -> its name now (one name per problem: the pids detector's condition is PIDsRisk).
# The plugin still answers to the old name, and monitor_config(legacy_names=True) publishes it, for clusters
# whose alerts read the old type (deprecated, removed in 2.0.0).
LEGACY_NAMES = {"PIDPressureRisk": "PIDsRisk"}

# detector -> the module_utils module whose check() runs it (as _audit/checks.py's DETECTORS has them; a
# unit test holds the two together). Imported by name: a condition loads only its own detectors.
DETECTOR_MODULES = {"containerd": "_containerd.detect", "gvisor": "_gvisor.detect", "kubelet": "_kubelet.detect",
                    "mount_units": "_mount_units.detect", "pids": "_pids.detect", "kernel": "_kernel.detect",
                    "cpu_quota": "_cpu_quota.detect", "reboot": "_reboot.detect"}
PACKAGE = "ansible_collections.nodefix.k8s.plugins.module_utils"

# Findings that say a detector could not see everything: the condition is Unknown, not OK,
# whatever their severity (below min_severity they would otherwise read as "clean").
CANNOT_CHECK = ("mount_units.runtime_unavailable", "kubelet.config_unreadable", "gvisor.runsc_version_unknown",
                "kernel.unknown_release")

# interval and cache_dir: the tick's shared result file (_npd/tick.py); without them each rule reads the node itself.
# textfile: where the tick also writes the node's findings for node_exporter (_npd/textfile.py; "" none), version: the
# collection's, for its nodefix_build_info
DEFAULTS = {"min_severity": "medium", "ignore": [], "waivers": [], "host": "", "options": {}, "root": "/",
            "timeout": 5, "max_output_length": 80, "interval": 0, "cache_dir": "", "textfile": "", "version": ""}
MAX_OUTPUT = 80
# the share of the rule's timeout the detectors may use; the rest is the interpreter's start and margin
BUDGET_SHARE = 0.6


class NpdConfigError(NodefixError, ValueError):
    """A bad plugin configuration (the plugin then exits Unknown with this message)."""


class NpdArgumentError(NodefixError, ValueError):
    """Bad command-line arguments (exit Unknown, the message saying so)."""


def _type_error(key, want, value):
    return NpdConfigError("%s must be %s, got %s" % (key, want, type(value).__name__))


def check_config(config):
    """The plugin configuration with defaults; NpdConfigError names the bad key (every key's type
    is checked: a hand-edited file is read on every node every few minutes)."""
    if not isinstance(config, dict):
        raise NpdConfigError("config must be a JSON object")
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise NpdConfigError("unknown config keys: %s" % ", ".join(unknown))
    out = dict(DEFAULTS, **config)
    if out["min_severity"] not in SEVERITIES:
        raise NpdConfigError("min_severity %r is not one of %s" % (out["min_severity"], ", ".join(SEVERITIES)))
    if not isinstance(out["ignore"], list) or not all(isinstance(i, str) for i in out["ignore"]):
        raise NpdConfigError("ignore must be a list of finding id globs")
    if not isinstance(out["waivers"], list):
        raise _type_error("waivers", "a list", out["waivers"])
    for key in ("host", "root", "cache_dir", "textfile", "version"):
        if not isinstance(out[key], str):
            raise _type_error(key, "a string", out[key])
    if not isinstance(out["options"], dict) or set(out["options"]) - set(DETECTOR_MODULES) or \
            not all(isinstance(v, dict) for v in out["options"].values()):
        raise NpdConfigError("options must be a dict keyed by detector (%s), each a dict of options"
                             % ", ".join(sorted(DETECTOR_MODULES)))
    for key, low in (("timeout", 1), ("max_output_length", 20)):
        if isinstance(out[key], bool) or not isinstance(out[key], (int, float)) or out[key] < low:
            raise NpdConfigError("%s must be a number of at least %d, got %r" % (key, low, out[key]))
    if isinstance(out["interval"], bool) or not isinstance(out["interval"], (int, float)) or out["interval"] < 0:
        raise NpdConfigError("interval must be a number of seconds (0: no shared result per tick), got %r"
                             % (out["interval"],))
    if out["cache_dir"] and not out["cache_dir"].startswith("/"):
        raise NpdConfigError("cache_dir must be an absolute path, got %r" % out["cache_dir"])
    # TEXTFILE: the node's one file of the nodefix_* series (node_audit writes the same; node_exporter exports a
    # series two files carry from one of them only)
    if out["textfile"] and (not out["textfile"].startswith("/") or out["textfile"].rsplit("/", 1)[-1] != TEXTFILE
                            or not out["cache_dir"] or not out["interval"]):
        raise NpdConfigError("textfile must be an absolute path of a file named %s (the node's one file of the "
                             "nodefix_* series), with cache_dir and interval set (the tick writes it), got %r"
                             % (TEXTFILE, out["textfile"]))
    # the fleet report's waivers, applied the same way (host and subject globs, expiry checked on every run)
    try:
        check_waivers(out["waivers"])
    except WaiverError as exc:
        raise NpdConfigError(str(exc))
    return out


def say(text, limit=MAX_OUTPUT):
    """One line NPD can take: printable ASCII (anything else escaped), cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    if not _plain_ascii(line):     # printable ASCII is left as it is by both: no pattern to compile for it
        line = printable(line).encode("ascii", "backslashreplace").decode("ascii")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _plain_ascii(line):
    try:
        line.encode("ascii")
    except UnicodeError:
        return False
    return line.isprintable()


def message(findings, limit=MAX_OUTPUT):
    """``<n> finding(s): id (count), ...`` worst first, cut to ``limit`` characters."""
    counts, worst = {}, {}
    for f in findings:
        counts[f["id"]] = counts.get(f["id"], 0) + 1
        worst[f["id"]] = min(worst.get(f["id"], len(SEVERITIES)), SEVERITIES.index(f["severity"]))
    order = sorted(counts, key=lambda i: (worst[i], i))
    return say("%d finding(s): %s" % (len(findings), ", ".join(
        "%s (%d)" % (i, counts[i]) if counts[i] > 1 else i for i in order)), limit)


def ignored(finding_id, globs):
    """True when one of the ``ignore`` globs matches ``finding_id`` (fnmatch imported only for a config that has some:
    its import was a millisecond of every tick's first rule)."""
    if not globs:
        return False
    import fnmatch  # pylint: disable=import-outside-toplevel
    return any(fnmatch.fnmatchcase(finding_id, glob) for glob in globs)


def evaluate(condition, result, config, limit=MAX_OUTPUT):
    """(exit code, message) of one condition from a run_detectors result (see the file's docstring)."""
    spec = CONDITIONS[condition]
    active, _expired = check_waivers(config["waivers"])
    mine = [f for f in result["findings"] if f.get("check") in spec["checks"]]
    failed = [f for f in mine if f["id"] == "audit.check_failed"]
    blind = [f for f in mine if f["id"] in CANNOT_CHECK]
    counted = [f for f in mine if f["id"] != "audit.check_failed"
               and not ignored(f["id"], config["ignore"]) and not waiver_for(active, config["host"], f)]
    bad = findings_at_or_above([f for f in counted if f["id"] not in CANNOT_CHECK], config["min_severity"])
    if bad:
        return NONOK, message(bad, limit)
    if failed or blind:
        why = ["%s: %s" % (f["subject"], (f.get("evidence") or {}).get("msg", "failed")) for f in failed]
        why += [f["id"] for f in blind]
        return UNKNOWN, say("cannot check: %s" % "; ".join(why), limit)
    return OK, say(spec["ok_message"], limit)


def node_visible(root):
    """None when ``root`` shows a node (its /proc with PID 1, its /sys/fs/cgroup); else why not - a
    DaemonSet whose host mount is missing must say so, never report a clean node."""
    missing = [p for p in ("/proc/1", "/sys/fs/cgroup") if not os.path.isdir(root_path(root, p))]
    if missing:
        return "cannot see the node at root %s (no %s)" % (root, ", ".join(missing))
    return None


def detectors(names):
    """[(name, module)] of the detectors ``names``, imported now (and only these)."""
    return [(name, importlib.import_module("%s.%s" % (PACKAGE, DETECTOR_MODULES[name]))) for name in names]


def run(condition, config, runner=None, started=None, looks=None):
    """Run the condition's detectors once; (exit code, message). Every command is killed at a
    deadline of BUDGET_SHARE of the rule's timeout from ``started``; containerd's ``ctr`` gets half of
    that as its own ``--timeout`` (unless the options set one), so that a hung runtime answers.
    ``looks`` (a dict): what each of its checks found, for the textfile (_npd/textfile.py)."""
    spec = CONDITIONS[condition]
    limit = int(config["max_output_length"])
    blind = node_visible(config["root"])
    if blind:
        if looks is not None:
            looks.update(npd_textfile.blind(spec["checks"]))
        return UNKNOWN, say(blind, limit)
    budget = float(config["timeout"]) * BUDGET_SHARE
    start = started if started is not None else time.monotonic()
    options = dict((name, dict(config["options"].get(name) or {})) for name in spec["checks"])
    if "containerd" in options and "timeout" not in options["containerd"]:
        options["containerd"]["timeout"] = "%dms" % max(200, int(budget * 500))
    runner = runner or SubprocessRunner(deadline=start + budget)
    result = audit_detect.run_detectors(runner, detectors(spec["checks"]), root=config["root"], options=options)
    if looks is not None:
        looks.update(npd_textfile.looks_of(spec["checks"], result["findings"], CANNOT_CHECK))
    return evaluate(condition, result, config, limit)


class TickRunner(SubprocessRunner):
    """SubprocessRunner whose answers to the same argv are shared by the detectors of one tick: every command the
    detectors run only reads (the plugin detects, never changes), and two of them ask systemd for the kubelet's unit.
    With ``versions`` (an ``_npd.versions.VersionCache``) a binary's ``--version`` answer is kept between ticks
    while the binary is the same file."""

    # what the detectors read for one of them holds for the others of the same look (_kubelet.node.discover)
    read_only = True
    # the plugin reads the detectors' findings, never their facts: a command that fills a fact alone is not run
    # (_reboot.detect.systemd_state)
    findings_only = True

    def __init__(self, deadline=None, versions=None):
        SubprocessRunner.__init__(self, deadline=deadline)
        self.versions = versions

    def _answer(self, argv):
        kept, binary = self.versions.lookup(argv) if self.versions is not None else (None, None)
        if kept is not None:
            return kept
        answer = SubprocessRunner.run(self, argv, check=False)
        if binary is not None:
            self.versions.keep(argv, binary, answer)   # an answer in full only (exit 0, before the deadline)
        return answer

    def run(self, argv, check=True, data=None, msg=None):
        if data is not None:
            return SubprocessRunner.run(self, argv, check=check, data=data, msg=msg)
        key = ("npd.run",) + tuple(argv)
        if key not in self.memo:
            self.memo[key] = self._answer(argv)
        rc, out, err = self.memo[key]
        if check and rc != 0:
            raise self.error(msg or "Command failed: %s" % " ".join(argv), cmd=argv, rc=rc, stdout=out, stderr=err)
        return rc, out, err


def run_tick(condition, config, done=None, started=None, versions=None, looks=None, every=False):
    """Every condition's verdict in one look at the node: ``condition`` first, then the others not in ``done``
    (verdicts already fresh this tick), each while twice the slowest so far fits in the first half of the budget
    (BUDGET_SHARE of the rule's timeout from ``started``; commands are killed at its end). Returns (this
    condition's (code, message), {condition: verdict} fit to keep): a verdict finished past the deadline may hold
    a command killed by it and is not kept for the other rules. ``looks`` (a dict) gets what the checks of the kept
    verdicts found; ``every`` (the timer's ``--tick``): all conditions, each with a rule's budget."""
    start = started if started is not None else time.monotonic()
    budget = float(config["timeout"]) * BUDGET_SHARE * (len(CONDITIONS) if every else 1)
    deadline = start + budget
    runner = TickRunner(deadline=deadline, versions=versions)
    verdicts, keep, slowest = {}, {}, 0.0
    for name in [condition] + [c for c in sorted(CONDITIONS) if c != condition and c not in (done or {})]:
        begun = time.monotonic()
        # another condition only while twice the slowest so far fits in the first half of the budget: on a slow
        # node (an emulated VM) the rest is left to their own rules, as before, and this rule's run stays as far
        # inside node-problem-detector's timeout as one condition's
        if name != condition and not every and begun + 2 * slowest > start + budget / 2:
            break
        found = {}
        verdicts[name] = run(name, config, runner=runner, started=start, looks=found)
        ended = time.monotonic()
        slowest = max(slowest, ended - begun)
        if ended < deadline:
            keep[name] = verdicts[name]
            if looks is not None:
                looks.update(found)
    return verdicts[condition], keep


def cached_run(condition, config, cache, started):
    """(code, message) of ``condition`` through the tick's result file ``cache`` (_npd/tick.py): a fresh verdict is
    read; else, under the tick's lock (waited for until the deadline, Unknown past it), read again or looked up
    for every condition and written for the other rules."""
    fresh = bool(os.environ.get(npd_tick.FRESH_ENV))
    if not fresh:
        verdict = cache.read(condition)
        if verdict is not None:
            return verdict
    deadline = started + float(config["timeout"]) * BUDGET_SHARE
    lock = cache.lock(deadline)
    if lock is None:
        return UNKNOWN, say("another run of the plugin still reads the node (lock %s held past %.1fs)"
                            % (cache.directory, float(config["timeout"]) * BUDGET_SHARE), int(config["max_output_length"]))
    try:
        done, at = cache.read_all() if not fresh else ({}, None)
        if condition in done:
            return done[condition]
        tick_start, wall = npd_tick.uptime_cs(), time.time()
        versions = VersionCache(cache.directory)
        looks = {} if config["textfile"] else None
        verdict, keep = run_tick(condition, config, done=done, started=started, versions=versions, looks=looks)
        done.update(keep)
        cache.write(done, tick_start if at is None else min(at, tick_start), aliases=LEGACY_NAMES)
        versions.save()
        if looks:
            npd_textfile.publish(cache.directory, config["textfile"], config["version"], looks, wall)
        return verdict
    finally:
        os.close(lock)


def whole_tick(config, cache, started):
    """``--tick`` (the npd role's timer, where node-problem-detector is not deployed): every condition read now under
    the tick's lock, the tick file and the textfile written. (0, message) when the textfile was written; (2, why not)
    otherwise."""
    limit = int(config["max_output_length"])
    if cache is None or not config["textfile"]:
        return UNKNOWN, say("--tick needs textfile, cache_dir and interval in the config (cache_dir the plugin's own)",
                            limit)
    deadline = started + float(config["timeout"]) * BUDGET_SHARE * len(CONDITIONS)
    lock = cache.lock(deadline)
    if lock is None:
        return UNKNOWN, say("another run of the plugin still reads the node (lock %s)" % cache.directory, limit)
    try:
        tick_start, wall, looks = npd_tick.uptime_cs(), time.time(), {}
        versions = VersionCache(cache.directory)
        first = sorted(CONDITIONS)[0]
        _verdict, keep = run_tick(first, config, started=started, versions=versions, looks=looks, every=True)
        cache.write(keep, tick_start, aliases=LEGACY_NAMES)
        versions.save()
        written = npd_textfile.publish(cache.directory, config["textfile"], config["version"], looks, wall)
    finally:
        os.close(lock)
    failed = sorted(c for c in looks if looks[c]["failed"])
    text = "looked at %d of %d checks (could not look: %s); %s %s" % (
        len(looks), len(DETECTOR_MODULES), ", ".join(failed) or "none",
        "wrote" if written else "could not write", config["textfile"])
    return (OK if written else UNKNOWN), say(text, max(limit, 200))


def _seconds(text):
    """Whole seconds of a Go duration like ``300s``/``5m``/``1h`` (what this collection writes); None otherwise."""
    units = {"s": 1, "m": 60, "h": 3600}
    text = str(text or "")
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        return None
    return int(text[:-1]) * units[text[-1]]


def published_names(legacy_names=False):
    """{condition: the type published on the Node} - the 1.0 name where ``legacy_names`` asks for it."""
    old = dict((new, old) for old, new in LEGACY_NAMES.items()) if legacy_names else {}
    return dict((name, old.get(name, name)) for name in CONDITIONS)


def monitor_config(plugin_path, config_path, invoke_interval="300s", timeout="5s", source="nodefix-k8s",
                   concurrency=1, legacy_names=False):
    """NPD's custom plugin monitor config: one permanent rule per condition, running ``plugin_path``;
    ``legacy_names`` publishes the 1.0 condition types (LEGACY_NAMES)."""
    types = published_names(legacy_names)
    return {
        "plugin": "custom",
        "pluginConfig": {"invoke_interval": invoke_interval, "timeout": timeout, "max_output_length": MAX_OUTPUT,
                         "concurrency": concurrency, "enable_message_change_based_condition_update": False},
        "source": source,
        "metricsReporting": True,
        "conditions": [{"type": types[name], "reason": spec["ok_reason"], "message": spec["ok_message"]}
                       for name, spec in sorted(CONDITIONS.items())],
        "rules": [{"type": "permanent", "condition": types[name], "reason": types[name], "path": plugin_path,
                   "args": ["--config", config_path, "--condition", types[name]], "timeout": timeout}
                  for name in sorted(CONDITIONS)],
    }


def monitor_config_errors(cfg, path_exists=None):
    """What node-problem-detector would refuse in a custom plugin monitor config, or silently get
    wrong; [] when none. NPD's own rules (pkg/custompluginmonitor/types/config.go: ApplyConfiguration
    parses the durations; Validate wants plugin "custom", every rule's timeout at most the global
    one, every rule's path existing, every permanent rule's condition among the default conditions),
    and the schedule (plugin/plugin.go: each tick runs every rule, ``concurrency`` at a time, and
    the next tick waits for the batch): ceil(rules / concurrency) x timeout must fit in the
    interval, or conditions refresh less often than the interval says."""
    errors = []
    if cfg.get("plugin") != "custom":
        errors.append("plugin must be \"custom\", got %r" % cfg.get("plugin"))
    glob = cfg.get("pluginConfig") or {}
    interval, timeout = _seconds(glob.get("invoke_interval", "30s")), _seconds(glob.get("timeout", "5s"))
    if interval is None or interval < 1:
        errors.append("invoke_interval %r is not a duration of at least 1s" % glob.get("invoke_interval"))
    if timeout is None or timeout < 1:
        errors.append("timeout %r is not a duration of at least 1s" % glob.get("timeout"))
    concurrency = glob.get("concurrency", 3)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        errors.append("concurrency must be a whole number of at least 1, got %r" % (concurrency,))
        concurrency = 1
    defaults = set(c.get("type") for c in cfg.get("conditions") or [])
    rules = cfg.get("rules") or []
    for rule in rules:
        rule_timeout = _seconds(rule.get("timeout", glob.get("timeout", "5s")))
        if rule_timeout is None:
            errors.append("rule %s: timeout %r is not a duration" % (rule.get("condition"), rule.get("timeout")))
        elif timeout is not None and rule_timeout > timeout:
            errors.append("rule %s: timeout %s is greater than the global timeout %s"
                          % (rule.get("condition"), rule.get("timeout"), glob.get("timeout")))
        if path_exists is not None and not path_exists(rule.get("path")):
            errors.append("rule %s: path %s does not exist" % (rule.get("condition"), rule.get("path")))
        if rule.get("type") == "permanent" and rule.get("condition") not in defaults:
            errors.append("permanent rule %s has no preset default condition" % rule.get("condition"))
    if interval and timeout and rules:
        batches = -(-len(rules) // concurrency)
        if batches * timeout > interval:
            errors.append("%d rules, %d at a time, each up to %ds, take up to %ds per tick: more than the %ds "
                          "interval (node-problem-detector waits for the whole batch, so conditions would refresh "
                          "every %ds): raise the interval to at least %ds or lower the timeout"
                          % (len(rules), concurrency, timeout, batches * timeout, interval, batches * timeout,
                             batches * timeout))
    return errors


def _read_config(path):
    """(checked config, its bytes) of ``path`` (the defaults and b"" without one)."""
    if not path:
        return check_config({}), b""
    with open(path, "rb") as fh:
        raw = fh.read()
    return check_config(json.loads(raw.decode("utf-8"))), raw


USAGE = ("usage: nodefix-npd --condition {%s} [--config FILE] | --tick --config FILE\n"
         "nodefix.k8s detectors as a node-problem-detector custom plugin. --config: JSON with min_severity, ignore "
         "(finding id globs), waivers and host (the fleet report's waivers), options (per detector), root, timeout "
         "(the rule's, seconds), max_output_length, interval (node-problem-detector's, seconds) and cache_dir (where the "
         "rules of a tick share one look at the node; both unset: each rule looks itself), textfile (the tick also writes "
         "the findings there for node_exporter) and version. Exit 0 OK, 1 problem, 2 unknown; one line on stdout. "
         "--tick: every condition now, the textfile written (exit 0), or not (exit 2, why).\n"
         % ",".join(sorted(CONDITIONS)))


def parse_args(argv):
    """{condition, config} of ``--condition NAME [--config FILE]`` (also ``--opt=value``); NpdArgumentError
    otherwise. Hand-rolled: argparse's import was a tenth of a run's CPU."""
    args, rest = {"condition": None, "config": None, "tick": False}, list(argv)
    while rest:
        word = rest.pop(0)
        if word in ("-h", "--help"):
            raise NpdArgumentError(USAGE)
        if word == "--tick":
            args["tick"] = True
            continue
        name, sep, value = word.partition("=")
        if name not in ("--condition", "--config"):
            raise NpdArgumentError("unknown argument %s" % word)
        if not sep:
            if not rest:
                raise NpdArgumentError("%s needs a value" % name)
            value = rest.pop(0)
        args[name[2:]] = value
    if args["tick"]:
        if args["condition"] is not None or not args["config"]:
            raise NpdArgumentError("--tick takes --config and no --condition")
        return args
    args["condition"] = LEGACY_NAMES.get(args["condition"], args["condition"])
    if args["condition"] not in CONDITIONS:
        raise NpdArgumentError("--condition must be one of %s, got %s" % (", ".join(sorted(CONDITIONS)), args["condition"]))
    return args


def cli(argv=None, out=None):
    """``--condition NAME [--config FILE]``: print one message line, exit 0/1/2 (NPD's plugin protocol).
    Whatever goes wrong in the plugin itself is exit 2 (Unknown) with the reason, never 1."""
    started = time.monotonic()
    out = out or sys.stdout
    limit = MAX_OUTPUT
    try:
        try:
            args = parse_args(sys.argv[1:] if argv is None else argv)
            config, raw = _read_config(args["config"])
        except NpdArgumentError as exc:
            code, text = UNKNOWN, say("bad arguments: %s" % exc, limit)
        except (IOError, OSError, ValueError, RecursionError) as exc:
            code, text = UNKNOWN, say("bad config: %s" % exc, limit)
        else:
            limit = int(config["max_output_length"])
            cache = npd_tick.cache_for(config, args["config"], raw)
            if args["tick"]:
                code, text = whole_tick(config, cache, started)
            elif cache is None:
                code, text = run(args["condition"], config, started=started)
            else:
                code, text = cached_run(args["condition"], config, cache, started)
    # never exit 1 (NPD's "problem") for the plugin's own failure
    except Exception as exc:  # pylint: disable=broad-except
        code, text = UNKNOWN, say("%s: %s" % (type(exc).__name__, exc), limit)
    try:
        out.write(text + "\n")
        out.flush()
    except Exception:  # pylint: disable=broad-except
        return UNKNOWN
    return code
