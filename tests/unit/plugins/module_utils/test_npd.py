# SPDX-License-Identifier: GPL-3.0-or-later
"""The node-problem-detector plugin: exit codes, bounded messages, the monitor config NPD accepts."""

import io
import json
import re

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils import _audit, _npd
from ansible_collections.nodefix.k8s.plugins.module_utils._common import CommandError


def fake(monkeypatch, behaviours):
    calls = []
    for name, mod in _audit.DETECTORS:
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
    code = _npd.cli(argv, out=out)
    return code, out.getvalue()


def test_broken_node_is_nonok_with_a_bounded_message_and_runs_only_its_detector(monkeypatch):
    calls = fake(monkeypatch, {"gvisor": [f("gvisor.sandbox_oversized", "critical", "sb%d" % i) for i in range(30)]
                               + [f("gvisor.runsc_outdated", "high")]})
    code, text = run_cli(["--condition", "GVisorMemoryLimitIgnored"])
    assert code == _npd.NONOK and calls == ["gvisor"]
    assert text.endswith("\n") and len(text.rstrip("\n")) <= 80
    # worst first, counted
    assert text.startswith("31 finding(s): gvisor.sandbox_oversized (30), gvisor.runsc_outdated")


def test_fixed_node_is_ok(monkeypatch):
    fake(monkeypatch, {"pids": [f("pids.zombies_some", "info")]})
    code, text = run_cli(["--condition", "PIDPressureRisk"])
    assert code == _npd.OK and text.strip() == _npd.CONDITIONS["PIDPressureRisk"]["ok_message"]


def test_findings_of_other_detectors_do_not_raise_the_condition(monkeypatch):
    fake(monkeypatch, {"kernel": [f("kernel.old", "critical")]})
    assert run_cli(["--condition", "KubeletMountUnitsLeaking"])[0] == _npd.OK


def test_detector_failure_is_unknown(monkeypatch):
    fake(monkeypatch, {"cpu_quota": "error"})
    code, text = run_cli(["--condition", "ContainerRuntimeRisk"])
    assert code == _npd.UNKNOWN and "cpu_quota" in text and len(text.strip()) <= 80


def test_min_severity_and_ignore_from_the_config(monkeypatch, tmp_path):
    fake(monkeypatch, {"kubelet": [f("kubelet.api_qps_low", "high"), f("kubelet.serialize_pulls", "low")]})
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps({"min_severity": "low", "ignore": ["kubelet.api_*"]}))
    code, text = run_cli(["--condition", "KubeletConfigRisk", "--config", str(cfg)])
    assert code == _npd.NONOK and text.strip() == "1 finding(s): kubelet.serialize_pulls"
    cfg.write_text(json.dumps({"min_severity": "high", "ignore": ["kubelet.api_*"]}))
    assert run_cli(["--condition", "KubeletConfigRisk", "--config", str(cfg)])[0] == _npd.OK


@pytest.mark.parametrize("config,needle", [
    ({"min_severity": "urgent"}, "min_severity"),
    ({"typo": 1}, "unknown config keys: typo"),
    ({"options": {"nope": {}}}, "options must be keyed"),
])
def test_bad_config_is_unknown_and_says_why(monkeypatch, tmp_path, config, needle):
    calls = fake(monkeypatch, {})
    cfg = tmp_path / "npd.json"
    cfg.write_text(json.dumps(config))
    code, text = run_cli(["--condition", "KernelRisk", "--config", str(cfg)])
    assert code == _npd.UNKNOWN and needle in text and calls == []


def test_monitor_config_passes_npds_own_validation_rules():
    cfg = _npd.monitor_config("/usr/local/lib/nodefix/nodefix-npd", "/etc/nodefix/npd.json")
    # pkg/custompluginmonitor/types/config.go: plugin "custom", a rule's timeout <= the global timeout,
    # every permanent rule's condition has a default condition
    assert cfg["plugin"] == "custom"

    def seconds(text):
        return int(re.match(r"^(\d+)s$", text).group(1))
    assert all(seconds(r["timeout"]) <= seconds(cfg["pluginConfig"]["timeout"]) for r in cfg["rules"])
    defaults = set(c["type"] for c in cfg["conditions"])
    assert all(r["type"] == "permanent" and r["condition"] in defaults for r in cfg["rules"])
    assert set(defaults) == set(_npd.CONDITIONS)
    assert cfg["pluginConfig"]["max_output_length"] == 80
    # each rule checks only its own condition
    assert [r["args"][-1] for r in cfg["rules"]] == [r["condition"] for r in cfg["rules"]]
    # every detector backs exactly one condition
    owners = [c for spec in _npd.CONDITIONS.values() for c in spec["checks"]]
    assert sorted(owners) == sorted(_audit.CHECK_NAMES)


def test_fleet_waivers_apply_by_host_subject_and_expiry(monkeypatch, tmp_path):
    fake(monkeypatch, {"pids": [f("pids.zombie_leaker", "high", "1234")]})
    cfg = tmp_path / "npd.json"

    def code(waivers, host="batch-1"):
        cfg.write_text(json.dumps({"waivers": waivers, "host": host}))
        return run_cli(["--condition", "PIDPressureRisk", "--config", str(cfg)])[0]
    waiver = {"id": "pids.*", "reason": "OPS-1", "hosts": ["batch-*"]}
    assert code([]) == _npd.NONOK
    assert code([waiver]) == _npd.OK
    assert code([waiver], host="web-1") == _npd.NONOK
    assert code([dict(waiver, subject="99")]) == _npd.NONOK
    assert code([dict(waiver, expires="2000-01-01")]) == _npd.NONOK
    # a malformed waiver is a bad config (Unknown), never a silent OK
    assert code([{"id": "pids.*"}]) == _npd.UNKNOWN


def test_the_plugins_own_failure_is_unknown_never_a_problem(monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(_npd, "run_checks", boom)
    code, text = run_cli(["--condition", "KernelRisk"])
    assert code == _npd.UNKNOWN and text.strip() == "RuntimeError: disk on fire"
