# SPDX-License-Identifier: GPL-3.0-or-later
"""audit_report: writes the five formats, idempotent, check mode writes nothing."""

import datetime
import json
import os
import types

from ansible_collections.nodefix.k8s.plugins.modules import audit_report

RESULTS = {"n1": {"findings": [{"id": "pids.zombie_leaker", "severity": "medium", "title": "zombies", "subject": "42",
                                "evidence": {"count": 25}, "remedy": "tini", "fix": {"role": None, "tag": None}}]},
           "n2": {"findings": []}}


def test_writes_all_formats_then_is_idempotent(run_module, tmp_path):
    dest = tmp_path / "out"
    result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)})
    assert not failed and result["changed"]
    assert sorted(os.listdir(dest)) == ["junit.xml", "nodefix.prom", "report.html", "report.json", "report.md"]
    assert result["totals"]["findings"] == 1
    assert result["table"][2].split()[:2] == ["n1", "1"]
    prom = (dest / "nodefix.prom").read_text()
    before = dict((name, (dest / name).read_bytes()) for name in os.listdir(dest))
    os.utime(str(dest / "nodefix.prom"), (1000000000, 1000000000))
    again, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)})
    # the same findings: every file keeps its bytes, not a change; the Prometheus file's
    # modification time is the heartbeat (node_textfile_mtime_seconds)
    assert not failed and again["changed"] is False
    assert dict((name, (dest / name).read_bytes()) for name in os.listdir(dest)) == before
    assert (dest / "nodefix.prom").stat().st_mtime > 1000000000 + 86400
    assert "timestamp" not in prom
    assert 'nodefix_finding{check="",id="pids.zombie_leaker",node="n1",severity="medium",subject="42"} 1' in prom
    fixed = {"n1": {"findings": []}, "n2": {"findings": []}}
    third, failed, _dummy = run_module(audit_report, {"results": fixed, "dest": str(dest)})
    assert not failed and third["changed"] is True and "nodefix_finding{" not in (dest / "nodefix.prom").read_text()


def test_check_mode_writes_nothing(run_module, tmp_path):
    dest = tmp_path / "out"
    result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)}, check_mode=True)
    assert not failed and result["changed"] and not dest.exists()


def test_a_dry_runs_report_leaves_the_last_real_runs_metrics(run_module, tmp_path):
    """Review finding: `remediate --check` wrote nodefix.prom over the real run's (outcomes, reboots, the last
    remediation's time) with nothing saying it was a dry run - node_exporter and the alerts read it as real."""
    dest = tmp_path / "out"
    _result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest),
                                                        "run": {"mode": "remediate"}})
    assert not failed
    real = (dest / "nodefix.prom").read_bytes()
    dry, failed, _dummy = run_module(audit_report, {"results": {"n1": {"findings": []}}, "dest": str(dest),
                                                    "run": {"mode": "remediate", "check_mode": True}})
    assert not failed and "prometheus" not in dry["files"], dry["files"]
    assert (dest / "nodefix.prom").read_bytes() == real
    assert "DRY RUN" in (dest / "report.md").read_text()


def test_bad_result_is_refused(run_module, tmp_path):
    result, failed, _dummy = run_module(audit_report, {"results": {"n1": "oops"}, "dest": str(tmp_path / "o")})
    assert failed and "results[n1]" in result["msg"]
    assert not (tmp_path / "o").exists()


def test_dest_must_be_a_directory(run_module, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(f)})
    assert failed and "not a directory" in result["msg"] and f.read_text() == "x"


def test_waivers_move_findings_apart(run_module, tmp_path):
    dest = tmp_path / "out"
    waivers = [{"id": "pids.*", "hosts": ["n1"], "reason": "planted in the lab", "expires": "2999-12-31"},
               {"id": "kubelet.*", "reason": "expired", "expires": "2000-01-01"}]
    result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest), "waivers": waivers})
    assert not failed, result
    assert result["totals"]["findings"] == 0 and result["totals"]["waived"] == 1
    assert result["finding_ids"] == []
    assert [w["id"] for w in result["waivers_expired"]] == ["kubelet.*"]
    assert "planted in the lab" in (dest / "report.md").read_text()
    assert 'skipped message="waived: planted in the lab"' in (dest / "junit.xml").read_text()


def test_bad_waiver_fails_and_writes_nothing(run_module, tmp_path):
    dest = tmp_path / "out"
    result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest), "waivers": [
        {"id": "pids.zombie_leaker", "reason": "r", "expires": "next week"}]})
    assert failed and "bad waiver" in result["msg"] and "YYYY-MM-DD" in result["msg"]
    assert not dest.exists()
    result, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest), "waivers": [
        {"id": "pids.zombie_leaker"}]})
    assert failed and "reason" in result["msg"] and not dest.exists()


def write_slices(run_module, tmp_path, parts):
    paths = []
    for i, hosts in enumerate(parts, 1):
        dest = tmp_path / "slices" / str(i) / "audit"
        result, failed, _dummy = run_module(audit_report, {"results": {h: RESULTS[h] for h in hosts}, "dest": str(dest)})
        assert not failed, result
        paths.append(str(dest / "report.json"))
    return paths


def test_merge_writes_the_one_run_report(run_module, tmp_path):
    run_module(audit_report, {"results": RESULTS, "dest": str(tmp_path / "one")})
    paths = write_slices(run_module, tmp_path, [["n1"], ["n2"]])
    # one generated time for both merges (each would take its own clock's second: a second apart they differ)
    when = "2026-12-06T10:00:00Z"
    result, failed, _dummy = run_module(audit_report, {"merge": paths, "expected_hosts": ["n1", "n2"], "generated": when,
                                                       "dest": str(tmp_path / "merged"), "fail_on": "high"})
    assert not failed and result["changed"] and not result["policy"]["failed"]
    assert [s["nodes"] for s in result["slices"]] == [1, 1]
    for name in ("junit.xml", "nodefix.prom"):
        assert (tmp_path / "merged" / name).read_text() == (tmp_path / "one" / name).read_text(), name
    again, failed, _dummy = run_module(audit_report, {"merge": paths, "expected_hosts": ["n1", "n2"], "generated": when,
                                                      "dest": str(tmp_path / "merged")})
    assert not failed and again["changed"] is False


def test_merge_names_the_hosts_no_slice_reported(run_module, tmp_path):
    paths = write_slices(run_module, tmp_path, [["n1"]])
    result, failed, _dummy = run_module(audit_report, {"merge": paths, "expected_hosts": ["n1", "n2", "n3"],
                                                       "dest": str(tmp_path / "merged"), "fail_on": "critical"})
    assert not failed and result["policy"]["failed"] and result["policy"]["unaudited"] == ["n2", "n3"]
    assert "not audited: n2, n3" in result["policy"]["msg"]


def test_merge_refuses_bad_slices_and_writes_nothing(run_module, tmp_path):
    paths = write_slices(run_module, tmp_path, [["n1", "n2"], ["n2"]])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for merge, msg in ((paths, "n2 is in two slices"), ([str(bad)], "is not JSON"),
                       ([str(tmp_path / "absent.json")], "does not exist")):
        args = {"merge": merge, "expected_hosts": ["n1", "n2"], "dest": str(tmp_path / "merged")}
        result, failed, _dummy = run_module(audit_report, args)
        assert failed and msg in result["msg"] and "nothing was written" in result["msg"]
        assert not (tmp_path / "merged").exists()
    result, failed, _dummy = run_module(audit_report, {"merge": paths, "results": RESULTS, "dest": str(tmp_path / "m")})
    assert failed and "mutually exclusive" in result["msg"]


def test_a_deeply_nested_slice_report_is_a_clear_error(run_module, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"nodes": ' + "[" * 100000 + "]" * 100000 + "}")
    args = {"merge": [str(deep)], "expected_hosts": ["n1"], "dest": str(tmp_path / "merged")}
    result, failed, _dummy = run_module(audit_report, args)
    assert failed and "is not JSON" in result["msg"] and "nothing was written" in result["msg"], result
    assert not (tmp_path / "merged").exists()


def test_results_as_json_text_give_the_same_report(run_module, tmp_path):
    # playbooks/report.yml passes the fleet's results as JSON text (cheaper to template at fleet size)
    import json
    # one generated time for both (each run would take its own clock's second: the reports could differ by it)
    when = "2026-12-06T10:00:00Z"
    as_dict, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(tmp_path / "a"),
                                                        "before": RESULTS, "generated": when})
    assert not failed
    as_text, failed, _dummy = run_module(audit_report, {"results": json.dumps(RESULTS), "dest": str(tmp_path / "b"),
                                                        "before": json.dumps(RESULTS), "generated": when})
    assert not failed and as_text["table"] == as_dict["table"] and as_text["totals"] == as_dict["totals"]
    assert (tmp_path / "a" / "report.md").read_text() == (tmp_path / "b" / "report.md").read_text()
    bad, failed, _dummy = run_module(audit_report, {"results": "[1, 2]", "dest": str(tmp_path / "c")})
    assert failed and "results" in bad["msg"] and not (tmp_path / "c").exists()


class _DayLater(object):
    """datetime.datetime a day after now (a later run of the same fleet)."""

    @staticmethod
    def now(tz=None):
        return datetime.datetime.now(tz) + datetime.timedelta(days=1)


def test_a_later_run_of_the_same_fleet_keeps_the_reports(run_module, tmp_path, monkeypatch):
    # the reports' only moving part is their time: a later run that finds the same keeps them (changed=false)
    dest = tmp_path / "out"
    first, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)})
    assert not failed and first["changed"]
    before = dict((name, (dest / name).read_bytes()) for name in os.listdir(dest))
    stamp = json.loads(before["report.json"])["generated"]
    monkeypatch.setattr(audit_report, "datetime", types.SimpleNamespace(datetime=_DayLater, timezone=datetime.timezone))
    again, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)})
    assert not failed and again["changed"] is False
    assert dict((name, (dest / name).read_bytes()) for name in os.listdir(dest)) == before
    # a change in the fleet writes every report with the new time
    fixed = {"n1": {"findings": []}, "n2": {"findings": []}}
    third, failed, _dummy = run_module(audit_report, {"results": fixed, "dest": str(dest)})
    later = json.loads((dest / "report.json").read_text())["generated"]
    assert not failed and third["changed"] is True and later != stamp
    assert later in (dest / "report.md").read_text() and later in (dest / "report.html").read_text()
    # a time the caller gives is the caller's: written as given
    given, failed, _dummy = run_module(audit_report, {"results": fixed, "dest": str(dest), "generated": "then"})
    assert not failed and given["changed"] is True
    assert json.loads((dest / "report.json").read_text())["generated"] == "then"


def test_a_later_run_reads_each_report_file_once(run_module, tmp_path, monkeypatch):
    """The same fleet a day later (the time kept, so every file is planned twice): each report file in dest is read
    once - report.json was read again for its time, and every file again for the second plan."""
    dest = tmp_path / "out"
    first, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)})
    assert not failed and first["changed"]
    reads = []
    real_read = audit_report.core_paths.read_utf8

    def counted(path, *args, **kwargs):
        reads.append(os.path.basename(path))
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(audit_report.core_paths, "read_utf8", counted)
    monkeypatch.setattr(audit_report, "datetime", types.SimpleNamespace(datetime=_DayLater, timezone=datetime.timezone))
    again, failed, _dummy = run_module(audit_report, {"results": RESULTS, "dest": str(dest)})
    assert not failed and again["changed"] is False
    assert sorted(reads) == ["junit.xml", "nodefix.prom", "report.html", "report.json", "report.md"], reads


def test_the_run_and_expired_waivers_are_redacted_in_every_file(run_module, tmp_path):
    """Review of issue 61 (2026-12-07): ``run.failure`` (the preflight's failed result), ``run.id`` and an expired
    waiver's reason went into report.md/html/json and JUnit as given."""
    dest = tmp_path / "out"
    result, failed, _dummy = run_module(audit_report, {
        "results": RESULTS, "dest": str(dest),
        "run": {"status": "failed", "id": "run-https://bob:S3cretRunId@mirror/x",
                "failure": "etcdctl --password=S3cretFail1 failed; https://bob:S3cretFail2@mirror/x"},
        "waivers": [{"id": "pids.zombie_leaker", "hosts": ["n1"], "reason": "token=S3cretWaiver1 by ops",
                     "expires": "2000-01-01"}]})
    assert not failed, result
    for name in os.listdir(dest):
        text = (dest / name).read_text()
        assert "S3cret" not in text, (name, text)
    assert "etcdctl --password=" in (dest / "report.md").read_text()     # what failed still shows
