# SPDX-License-Identifier: GPL-3.0-or-later
"""The node-problem-detector plugin: exit codes, bounded messages, the monitor config NPD accepts."""

import io
import json
import re

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import CommandError


def fake(monkeypatch, behaviours):
    calls = []
    for name, mod in audit_checks.DETECTORS:
        def check(runner, root="/", _name=name, **opts):
            calls.append(_name)
            b = behaviours.get(_name, [])
            if b == "error":
                raise CommandError("systemctl: connection refused", rc=1)
            return {"findings": [dict(f) for f in b]}
        monkeypatch.setattr(mod, "check", check)
    return calls


def f(fid, severity, subject=None):
    return {"id": fid, "severity": severity, "subject": subject, "title": "t", "evidence": {}, "remedy": "r"}


def run_cli(argv):
    out = io.StringIO()
    code = npd_plugin.cli(argv, out=out)
    return code, out.getvalue()


def test_broken_node_is_nonok_with_a_bounded_message_and_runs_only_its_detector(monkeypatch):
    calls = fake(monkeypatch, {"gvisor": [f("gvisor.sandbox_oversized", "critical", "sb%d" % i) for i in range(30)]
                               + [f("gvisor.runsc_outdated", "high")]})
    code, text = run_cli(["--condition", "GVisorMemoryLimitIgnored"])
    assert code == npd_plugin.NONOK and calls == ["gvisor"]
    assert text.endswith("\n") and len(text.rstrip("\n")) <= 80
    # worst first, counted
    assert text.startswith("31 finding(s): gvisor.sandbox_oversized (30), gvisor.runsc_outdated")


def test_fixed_node_is_ok(monkeypatch):
    fake(monkeypatch, {"pids": [f("pids.zombies_some", "info")]})
    code, text = run_cli(["--condition", "PIDsRisk"])
    assert code == npd_plugin.OK and text.strip() == npd_plugin.CONDITIONS["PIDsRisk"]["ok_message"]


def test_findings_of_other_detectors_do_not_raise_the_condition(monkeypatch):
    fake(monkeypatch, {"kernel": [f("kernel.old", "critical")]})
    assert run_cli(["--condition", "KubeletMountUnitsLeaking"])[0] == npd_plugin.OK


def test_detector_failure_is_unknown(monkeypatch):
    fake(monkeypatch, {"cpu_quota": "error"})
    code, text = run_cli(["--condition", "ContainerRuntimeRisk"])
    assert code == npd_plugin.UNKNOWN and "cpu_quota" in text and len(text.strip()) <= 80


def test_min_severity_and_ignore_from_the_config(monkeypatch, tmp_path):
    fake(monkeypatch, {"kubelet": [f("kubelet.api_qps_low", "high"), f("kubelet.serialize_pulls", "low")]})
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps({"min_severity": "low", "ignore": ["kubelet.api_*"]}))
    code, text = run_cli(["--condition", "KubeletConfigRisk", "--config", str(cfg)])
    assert code == npd_plugin.NONOK and text.strip() == "1 finding(s): kubelet.serialize_pulls"
    cfg.write_text(json.dumps({"min_severity": "high", "ignore": ["kubelet.api_*"]}))
    assert run_cli(["--condition", "KubeletConfigRisk", "--config", str(cfg)])[0] == npd_plugin.OK


@pytest.mark.parametrize("config,needle", [
    ({"min_severity": "urgent"}, "min_severity"),
    ({"typo": 1}, "unknown config keys: typo"),
    ({"options": {"nope": {}}}, "options must be a dict keyed"),
])
def test_bad_config_is_unknown_and_says_why(monkeypatch, tmp_path, config, needle):
    calls = fake(monkeypatch, {})
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps(config))
    code, text = run_cli(["--condition", "KernelRisk", "--config", str(cfg)])
    assert code == npd_plugin.UNKNOWN and needle in text and calls == []


def test_monitor_config_passes_npds_own_validation_rules():
    cfg = npd_plugin.monitor_config("/usr/local/lib/nodefix/nodefix-npd", "/etc/nodefix/npd.json")
    # pkg/custompluginmonitor/types/config.go: plugin "custom", a rule's timeout <= the global timeout,
    # every permanent rule's condition has a default condition
    assert cfg["plugin"] == "custom"

    def seconds(text):
        return int(re.match(r"^(\d+)s$", text).group(1))
    assert all(seconds(r["timeout"]) <= seconds(cfg["pluginConfig"]["timeout"]) for r in cfg["rules"])
    defaults = set(c["type"] for c in cfg["conditions"])
    assert all(r["type"] == "permanent" and r["condition"] in defaults for r in cfg["rules"])
    assert set(defaults) == set(npd_plugin.CONDITIONS)
    assert cfg["pluginConfig"]["max_output_length"] == 80
    # each rule checks only its own condition
    assert [r["args"][-1] for r in cfg["rules"]] == [r["condition"] for r in cfg["rules"]]
    # every detector backs exactly one condition
    owners = [c for spec in npd_plugin.CONDITIONS.values() for c in spec["checks"]]
    assert sorted(owners) == sorted(audit_checks.CHECK_NAMES)


def test_a_1_0_condition_name_still_answers_as_its_new_one(monkeypatch):
    """1.0 published the pids condition as PIDPressureRisk: a monitor config written then (or kept with
    npd_legacy_condition_names) still runs the pids detector under that name, with the same answer."""
    fake(monkeypatch, {"pids": [f("pids.zombie_leaker", "high", "1234")]})
    assert npd_plugin.LEGACY_NAMES == {"PIDPressureRisk": "PIDsRisk"}
    old, new = run_cli(["--condition", "PIDPressureRisk"]), run_cli(["--condition", "PIDsRisk"])
    assert old == new and old[0] == npd_plugin.NONOK and "pids.zombie_leaker" in old[1]
    # only the renamed condition has an old name: a typo is still refused
    code, text = run_cli(["--condition", "PIDPressure"])
    assert code == npd_plugin.UNKNOWN and "--condition must be one of" in text


def test_legacy_names_publish_the_1_0_condition_type_and_nothing_else_changes():
    new = npd_plugin.monitor_config("/p", "/c")
    old = npd_plugin.monitor_config("/p", "/c", legacy_names=True)
    assert "PIDsRisk" in [c["type"] for c in new["conditions"]]
    assert [c["type"] for c in old["conditions"]] == [
        "PIDPressureRisk" if c["type"] == "PIDsRisk" else c["type"] for c in new["conditions"]]
    rule = [r for r in old["rules"] if r["condition"] == "PIDPressureRisk"]
    assert len(rule) == 1 and rule[0]["args"][-1] == "PIDPressureRisk" and rule[0]["reason"] == "PIDPressureRisk"
    assert [r for r in old["rules"] if r["condition"] != "PIDPressureRisk"] == [
        r for r in new["rules"] if r["condition"] != "PIDsRisk"]
    assert npd_plugin.monitor_config_errors(old) == []


def test_fleet_waivers_apply_by_host_subject_and_expiry(monkeypatch, tmp_path):
    fake(monkeypatch, {"pids": [f("pids.zombie_leaker", "high", "1234")]})
    cfg = tmp_path / "npd.json"

    def code(waivers, host="batch-1"):
        cfg.write_text(json.dumps({"waivers": waivers, "host": host}))
        return run_cli(["--condition", "PIDsRisk", "--config", str(cfg)])[0]
    waiver = {"id": "pids.*", "reason": "OPS-1", "hosts": ["batch-*"]}
    assert code([]) == npd_plugin.NONOK
    assert code([waiver]) == npd_plugin.OK
    assert code([waiver], host="web-1") == npd_plugin.NONOK
    assert code([dict(waiver, subject="99")]) == npd_plugin.NONOK
    assert code([dict(waiver, expires="2000-01-01")]) == npd_plugin.NONOK
    # a malformed waiver is a bad config (Unknown), never a silent OK
    assert code([{"id": "pids.*"}]) == npd_plugin.UNKNOWN


def test_the_plugins_own_failure_is_unknown_never_a_problem(monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(npd_plugin.audit_detect, "run_detectors", boom)
    code, text = run_cli(["--condition", "KernelRisk"])
    assert code == npd_plugin.UNKNOWN and text.strip() == "RuntimeError: disk on fire"


# -- issue: a condition is Unknown whenever the plugin could not look ------------------------------

def test_a_finding_that_says_the_detector_could_not_see_is_unknown_whatever_its_severity(monkeypatch):
    fake(monkeypatch, {"mount_units": [f("mount_units.runtime_unavailable", "low", "crictl")]})
    code, text = run_cli(["--condition", "KubeletMountUnitsLeaking"])
    assert code == npd_plugin.UNKNOWN and "cannot check: mount_units.runtime_unavailable" in text
    # a real problem beside it is still a problem
    fake(monkeypatch, {"mount_units": [f("mount_units.runtime_unavailable", "low"), f("mount_units.leaked_scopes", "high")]})
    assert run_cli(["--condition", "KubeletMountUnitsLeaking"])[0] == npd_plugin.NONOK


def test_a_root_that_does_not_show_the_node_is_unknown(monkeypatch, tmp_path):
    calls = fake(monkeypatch, {})
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps({"root": str(tmp_path / "host")}))   # a DaemonSet whose /host mount is missing
    for condition in sorted(npd_plugin.CONDITIONS):
        code, text = run_cli(["--condition", condition, "--config", str(cfg)])
        assert code == npd_plugin.UNKNOWN and "cannot see the node at root" in text, (condition, text)
    assert calls == []


@pytest.mark.parametrize("config, needle", [
    ({"waivers": 3}, "waivers must be a list"),
    ({"host": ["a"]}, "host must be a string"),
    ({"options": {"pids": 3}}, "options must be a dict keyed"),
    ({"timeout": "5s"}, "timeout must be a number"),
    ({"min_severity": ["high"]}, "min_severity"),
])
def test_every_wrong_type_in_a_hand_edited_config_is_unknown_never_a_problem(monkeypatch, tmp_path, config, needle):
    fake(monkeypatch, {})
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps(config))
    code, text = run_cli(["--condition", "PIDsRisk", "--config", str(cfg)])
    assert code == npd_plugin.UNKNOWN and needle in text, text


def test_messages_are_always_writable_ascii_within_the_limit(monkeypatch, tmp_path):
    fake(monkeypatch, {"pids": [f(u"pids.zombie_leaker\u00e9\udcff\x07", "high")]})

    class Ascii(io.StringIO):
        def write(self, text):
            text.encode("ascii")        # a C-locale stdout: anything else would raise here
            return io.StringIO.write(self, text)
    for limit in (80, 30):
        cfg = tmp_path / "npd.json"
        cfg.write_text(json.dumps({"max_output_length": limit}))
        out = Ascii()
        code = npd_plugin.cli(["--condition", "PIDsRisk", "--config", str(cfg)], out=out)
        line = out.getvalue().rstrip("\n")
        assert code == npd_plugin.NONOK and len(line) <= limit and ("\\" in line or limit < 40), line


def test_an_unwritable_stdout_is_unknown():
    class Closed(io.StringIO):
        def write(self, text):
            raise IOError("broken pipe")
    assert npd_plugin.cli(["--condition", "PIDsRisk"], out=Closed()) == npd_plugin.UNKNOWN


def test_the_condition_imports_only_its_own_detectors():
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    code = ("import sys; from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin; "
            "plugin.detectors(['pids']); "
            "import json; print(json.dumps([m[len(plugin.PACKAGE) + 1:] for m in sys.modules "
            "if m.startswith(plugin.PACKAGE + '.')]))")
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": ":".join(sys.path)}, check=True,
                         capture_output=True, text=True).stdout
    loaded = set(json.loads(out))
    assert "_pids.detect" in loaded, loaded
    # no other problem's package, no report, no fixer: the PIDs condition's detector and the core
    assert set(m.split(".")[0] for m in loaded) <= {"_npd", "_pids", "_core", "_audit"}, loaded
    assert loaded & {"_audit.checks", "_audit.remediation", "_core.fileio"} == set(), loaded


def test_the_detector_map_is_the_audits():
    assert dict((n, ".".join(m.__name__.rsplit(".", 2)[1:])) for n, m in audit_checks.DETECTORS) == npd_plugin.DETECTOR_MODULES


def test_a_hung_containerd_is_reported_before_npd_kills_the_plugin(tmp_path):
    """ctr that never answers (a hung containerd): the plugin, run as node-problem-detector runs it
    (its own process, the rule's 5 s timeout), gives ctr a --timeout inside its own budget (a share of the
    rule's timeout), kills it at its deadline and reports the runtime as unreachable - exit 1 with
    containerd.socket_unreachable - instead of being killed itself (Unknown). Shape, not speed: the
    deadline it sets is checked, not the seconds it took (no test asserts a duration); a plugin that waited
    for ctr (an hour) would hit the hang guard of this test's subprocess call."""
    import os  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    root = tmp_path / "node"
    for d in ("proc/1", "sys/fs/cgroup", "run/containerd"):
        (root / d).mkdir(parents=True)
    (root / "run/containerd/containerd.sock").write_text("")
    bins = tmp_path / "bin"
    bins.mkdir()
    argv_file = tmp_path / "ctr.argv"
    for name, body in (("containerd", "echo 'containerd github.com/containerd/containerd v1.7.24 88bf19b'"),
                       ("runc", "echo 'runc version 1.1.12'"), ("ctr", "echo \"$@\" >> %s; exec sleep 3600" % argv_file)):
        (bins / name).write_text("#!/bin/sh\n%s\n" % body)
        (bins / name).chmod(0o755)
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps({"root": str(root), "timeout": 5}))
    code = ("import sys; from ansible_collections.nodefix.k8s.plugins.module_utils._npd.plugin import cli; "
            "sys.exit(cli())")
    env = dict(os.environ, PYTHONPATH=":".join(sys.path), PATH="%s:%s" % (bins, os.environ["PATH"]))
    proc = subprocess.run([sys.executable, "-c", code, "--config", str(cfg), "--condition", "ContainerRuntimeRisk"],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == npd_plugin.NONOK and "containerd.socket_unreachable" in proc.stdout, (proc.stdout, proc.stderr)
    # every ctr call got a --timeout inside the plugin's budget, itself inside the rule's 5 s
    calls = argv_file.read_text().splitlines()
    assert calls, "ctr was never called"
    for call in calls:
        args = call.split()
        assert "--timeout" in args, call
        timeout_ms = int(args[args.index("--timeout") + 1].rstrip("ms"))
        assert 0 < timeout_ms <= 5000 * npd_plugin.BUDGET_SHARE, call


def npd_would_refuse(cfg):
    """node-problem-detector's own checks, written here apart from the collection's code:
    pkg/custompluginmonitor/types/config.go - ApplyConfiguration parses "timeout" and "invoke_interval"
    with time.ParseDuration; Validate: Plugin must be "custom"; each rule's Timeout must not be greater
    than the global Timeout; each rule's Path must exist (os.Stat - checked on the node by the role's
    verify, not here); each "permanent" rule's Condition must be the Type of a DefaultCondition.
    plugin/plugin.go - each tick runs every rule through a semaphore of Concurrency slots and waits for
    all of them (sync.WaitGroup) before the next tick: ceil(rules / concurrency) x timeout must fit in
    invoke_interval, or ticks are dropped."""
    def seconds(text):
        m = re.match(r"^(\d+)s$", text)
        return int(m.group(1)) if m else None
    glob = cfg["pluginConfig"]
    timeout, interval = seconds(glob["timeout"]), seconds(glob["invoke_interval"])
    problems = []
    if cfg["plugin"] != "custom":
        problems.append("plugin")
    if any(seconds(r["timeout"]) > timeout for r in cfg["rules"]):
        problems.append("rule timeout")
    defaults = set(c["type"] for c in cfg["conditions"])
    if any(r["type"] == "permanent" and r["condition"] not in defaults for r in cfg["rules"]):
        problems.append("default condition")
    if -(-len(cfg["rules"]) // glob["concurrency"]) * timeout > interval:
        problems.append("ticks dropped")
    return problems


def test_the_role_accepts_exactly_the_settings_npd_runs_without_dropping_ticks():
    """The role's defaults, and every interval/timeout/concurrency its argument spec allows (whole
    seconds; sampled densely where the boundary is): the filter the role validates with accepts a
    setting exactly when node-problem-detector would accept it and keep every tick."""
    from ansible.errors import AnsibleFilterError  # pylint: disable=import-outside-toplevel
    from ansible_collections.nodefix.k8s.plugins.filter.audit import npd_monitor_config
    plugin, config = "/usr/local/lib/nodefix-npd/nodefix-npd", "/etc/nodefix/npd.json"
    defaults = npd_monitor_config(plugin, config)   # 300s, 5s, concurrency 1
    assert npd_would_refuse(defaults) == []
    checked = refused = 0
    for interval in list(range(1, 61)) + [90, 120, 300, 600, 3600]:
        for timeout in list(range(1, 31)) + [60, 120]:
            for concurrency in range(1, 8):
                args = ("%ds" % interval, "%ds" % timeout, "nodefix-k8s", concurrency)
                try:
                    cfg = npd_monitor_config(plugin, config, *args)
                except AnsibleFilterError as exc:
                    refused += 1
                    assert npd_would_refuse(npd_plugin.monitor_config(plugin, config, *args)), (args, str(exc))
                    assert "interval" in str(exc) and "raise the interval to at least" in str(exc)
                    continue
                checked += 1
                assert npd_would_refuse(cfg) == [], args
    assert checked > 1000 and refused > 1000
    # the settings the old rule (timeout <= interval) let through, which dropped ticks
    with pytest.raises(AnsibleFilterError, match="take up to 180s per tick"):
        npd_monitor_config(plugin, config, "30s", "30s")
    # the role passes npd_legacy_condition_names | bool; anything else is refused, not read as true
    legacy = npd_monitor_config(plugin, config, "300s", "5s", "nodefix-k8s", 1, True)
    assert "PIDPressureRisk" in [c["type"] for c in legacy["conditions"]] and npd_would_refuse(legacy) == []
    with pytest.raises(AnsibleFilterError, match="legacy_condition_names must be true or false"):
        npd_monitor_config(plugin, config, legacy_condition_names="no")


@pytest.mark.parametrize("argv, needle", [
    ([], "--condition must be one of"), (["--condition", "Nope"], "--condition must be one of"),
    (["--condition"], "--condition needs a value"), (["--frobnicate"], "unknown argument"),
])
def test_bad_arguments_are_unknown_never_a_problem(argv, needle):
    code, text = run_cli(argv)
    assert code == npd_plugin.UNKNOWN and text.startswith("bad arguments: ") and needle in text, text
    code, _text = run_cli(["--condition=PIDsRisk", "--config=/nonexistent/npd.json"])
    assert code == npd_plugin.UNKNOWN
