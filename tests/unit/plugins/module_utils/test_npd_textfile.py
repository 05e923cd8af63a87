# SPDX-License-Identifier: GPL-3.0-or-later
"""node-problem-detector's tick also writes node_exporter's textfile (module_utils/_npd/textfile.py): the heartbeat,
the collection's version, every check looked at (1 when it could not look), the findings; parsed here with the
official parser (prometheus_client). A tick that looks at some checks keeps the others' last look and the heartbeat
of the oldest; a textfile that cannot be written changes no verdict; ``--tick`` (the role's timer) looks at all."""

import io
import json
import os
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.nodefix.k8s.plugins.module_utils._npd import plugin as npd_plugin
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import textfile as npd_textfile
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import tick as npd_tick

from test_npd_tick import fake  # the detectors replaced, as in the tick's tests

ALL = sorted(npd_plugin.CONDITIONS)
CHECKS = sorted(npd_plugin.DETECTOR_MODULES)


def zombie(subject="1234"):
    return {"id": "pids.zombie_leaker", "severity": "high", "subject": subject, "title": "t", "evidence": {}, "remedy": "r"}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.delenv(npd_tick.FRESH_ENV, raising=False)
    cache_dir = tmp_path / "run" / "nodefix-npd"
    cache_dir.parent.mkdir()
    textdir = tmp_path / "node-exporter"
    textdir.mkdir()
    cfg = tmp_path / "npd.json"
    config = {"interval": 300, "cache_dir": str(cache_dir), "timeout": 5, "textfile": str(textdir / "nodefix.prom"),
              "version": "9.8.7"}
    cfg.write_text(json.dumps(config))
    return {"config": str(cfg), "dir": str(cache_dir), "prom": str(textdir / "nodefix.prom"), "tmp": tmp_path,
            "settings": config}


def rule(setup, *argv):
    out = io.StringIO()
    code = npd_plugin.cli(["--config", setup["config"]] + list(argv), out=out)
    return code, out.getvalue().strip()


def series(path):
    """{(name, frozenset(labels)): value} of a textfile, through the official parser."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return dict(((s.name, frozenset(s.labels.items())), s.value)
                for family in text_string_to_metric_families(text) for s in family.samples)


def failed_checks(found):
    return dict((dict(labels)["check"], value) for (name, labels), value in found.items()
                if name == "nodefix_audit_check_failed")


def test_the_tick_writes_heartbeat_version_checks_and_findings(setup, monkeypatch):
    fake(monkeypatch, {"pids": [zombie(), zombie("99")],
                       "kernel": [{"id": "kernel.unknown_release", "severity": "info", "subject": "6.1", "title": "t"}],
                       "gvisor": RuntimeError("runsc exploded")})
    # the wall clock the plugin reads for its look, fixed: the heartbeat is that look's time
    monkeypatch.setattr(npd_plugin.time, "time", lambda: 1765000000.75)
    assert rule(setup, "--condition", "PIDsRisk") == (npd_plugin.NONOK, "2 finding(s): pids.zombie_leaker (2)")
    found = series(setup["prom"])
    assert int(found[("nodefix_audit_timestamp_seconds", frozenset())]) == 1765000000
    assert found[("nodefix_build_info", frozenset({("version", "9.8.7")}))] == 1
    # every check looked at: 0 it looked, 1 it could not (a detector that failed, a finding that says it is blind)
    assert failed_checks(found) == dict((c, 1 if c in ("gvisor", "kernel") else 0) for c in CHECKS)
    labels = frozenset({("id", "pids.zombie_leaker"), ("severity", "high"), ("check", "pids"), ("subject", "99")})
    assert found[("nodefix_finding", labels)] == 1
    assert found[("nodefix_findings", frozenset({("severity", "high")}))] == 2
    # node_exporter may read it: 0644, and nothing half-written left beside it
    assert os.stat(setup["prom"]).st_mode & 0o777 == 0o644
    assert os.listdir(os.path.dirname(setup["prom"])) == ["nodefix.prom"]


def test_a_tick_that_looks_at_some_checks_keeps_the_others_last_look_and_the_oldest_heartbeat(setup, monkeypatch):
    calls = fake(monkeypatch, {"pids": [zombie()]})
    assert rule(setup, "--condition", "PIDsRisk")[0] == npd_plugin.NONOK
    first = series(setup["prom"])[("nodefix_audit_timestamp_seconds", frozenset())]
    # the next tick: the zombie is gone, and this run looks at PIDsRisk only (the others' shares left to their rules)
    fake(monkeypatch, {})
    os.unlink(os.path.join(setup["dir"], "tick"))
    monkeypatch.setattr(npd_plugin, "CONDITIONS", {"PIDsRisk": npd_plugin.CONDITIONS["PIDsRisk"]})
    monkeypatch.setattr(time, "time", lambda: first + 300.0)
    assert rule(setup, "--condition", "PIDsRisk")[0] == npd_plugin.OK
    found = series(setup["prom"])
    assert [k for k in found if k[0] == "nodefix_finding"] == []
    assert sorted(failed_checks(found)) == CHECKS                       # the other checks: their last look
    assert found[("nodefix_audit_timestamp_seconds", frozenset())] == first   # the oldest look it holds
    assert calls


def test_a_textfile_that_cannot_be_written_changes_no_verdict(setup, monkeypatch):
    fake(monkeypatch, {"pids": [zombie()]})
    os.rmdir(os.path.dirname(setup["prom"]))             # node_exporter's directory is gone
    assert [rule(setup, "--condition", c)[0] for c in ALL] == [1 if c == "PIDsRisk" else 0 for c in ALL]
    assert not os.path.exists(setup["prom"])


def test_a_link_at_the_textfile_path_is_replaced_never_followed(setup, monkeypatch):
    fake(monkeypatch)
    target = setup["tmp"] / "elsewhere"
    target.write_text("untouched")
    os.symlink(str(target), setup["prom"])
    rule(setup, "--condition", "KernelRisk")
    assert target.read_text() == "untouched" and not os.path.islink(setup["prom"])
    assert failed_checks(series(setup["prom"]))["kernel"] == 0


def test_a_blind_node_could_not_look_at_any_check(setup, monkeypatch):
    calls = fake(monkeypatch)
    with open(setup["config"], "w") as fh:
        json.dump(dict(setup["settings"], root=str(setup["tmp"] / "host")), fh)
    assert rule(setup, "--condition", "KernelRisk")[0] == npd_plugin.UNKNOWN
    assert failed_checks(series(setup["prom"])) == dict((c, 1) for c in CHECKS) and calls == []


def test_the_timers_tick_looks_at_every_check_and_writes_the_textfile(setup, monkeypatch):
    calls = fake(monkeypatch, {"pids": [zombie()]})
    code, text = rule(setup, "--tick")
    assert code == npd_plugin.OK and "looked at 8 of 8 checks" in text and "wrote " + setup["prom"] in text, text
    assert sorted(calls) == CHECKS and sorted(failed_checks(series(setup["prom"]))) == CHECKS
    # and the rules of node-problem-detector, if it runs too, answer from the tick it wrote
    del calls[:]
    assert rule(setup, "--condition", "PIDsRisk")[0] == npd_plugin.NONOK and calls == []


@pytest.mark.parametrize("change, why", [
    ({"textfile": ""}, "--tick needs textfile"),
    ({"cache_dir": "", "textfile": ""}, "--tick needs textfile"),
])
def test_the_timers_tick_without_a_textfile_says_why(setup, monkeypatch, change, why):
    fake(monkeypatch)
    with open(setup["config"], "w") as fh:
        json.dump(dict(setup["settings"], **change), fh)
    code, text = rule(setup, "--tick")
    assert code == npd_plugin.UNKNOWN and why in text, text


@pytest.mark.parametrize("change", [{"textfile": "relative.prom"}, {"textfile": "/x/nodefix.txt"},
                                    {"textfile": "/x/nodefix-npd.prom"}, {"textfile": "/x/other-nodefix.prom"},
                                    {"cache_dir": ""}, {"interval": 0}, {"version": 1}])
def test_a_bad_textfile_setting_is_a_config_error(setup, change):
    with pytest.raises(npd_plugin.NpdConfigError):
        npd_plugin.check_config(dict(setup["settings"], **change))


@pytest.mark.parametrize("garble", [b"", b"nodefix-npd-looks 1\nboot x\n{}\nend\n", b"garbage",
                                    b"nodefix-npd-looks 1\nboot %s\n{\"pids\": {\"failed\": 7}}\nend\n"])
def test_a_garbled_looks_file_is_dropped_whole(setup, garble):
    os.makedirs(setup["dir"], mode=0o700)
    with open(os.path.join(setup["dir"], npd_textfile.LOOKS), "wb") as fh:
        fh.write(garble.replace(b"%s", npd_tick.boot_id().encode()))
    assert npd_textfile.load(setup["dir"]) == {}


def test_the_looks_are_read_back_as_written(setup):
    os.makedirs(setup["dir"], mode=0o700)
    looks = npd_textfile.looks_of(["pids", "kernel"], [zombie(), {"id": "audit.check_failed", "check": "kernel",
                                                                  "severity": "info", "subject": "kernel"}], ())
    assert npd_textfile.publish(setup["dir"], setup["prom"], "1.2.3", looks, 1000.5)
    kept = npd_textfile.load(setup["dir"])
    assert kept["kernel"]["failed"] == 1 and kept["pids"]["failed"] == 0 and kept["pids"]["at"] == 1000.5
    assert series(setup["prom"])[("nodefix_audit_timestamp_seconds", frozenset())] == 1000
