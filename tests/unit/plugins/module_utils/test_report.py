# SPDX-License-Identifier: GPL-3.0-or-later
"""Report rendering: model, table, Markdown, HTML, JUnit (parsed by junitparser)."""

import json
from html.parser import HTMLParser

import pytest
from junitparser import JUnitXml

from ansible_collections.nodefix.k8s.plugins.module_utils._report import console as report_console
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model as report_model
from ansible_collections.nodefix.k8s.plugins.module_utils._report import html_page as report_html_page
from ansible_collections.nodefix.k8s.plugins.module_utils._audit import waivers as audit_waivers


class _Cells(HTMLParser):
    """Counts matrix rows and checks tables are closed."""

    def __init__(self):
        super().__init__()
        self.open_tables = 0
        self.in_matrix = False
        self.in_body = False
        self.rows_in_matrix = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.open_tables += 1
            self.in_matrix = dict(attrs).get("id") == "matrix"
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_matrix and self.in_body:
            self.rows_in_matrix += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self.open_tables -= 1
            self.in_matrix = False
        elif tag == "tbody":
            self.in_body = False


def finding(fid, severity, subject=None, check="gvisor"):
    return {"id": fid, "severity": severity, "title": "title of " + fid, "subject": subject, "check": check,
            "evidence": {"total_memory": 25769803776, "limit": 268435456}, "remedy": "do it",
            "fix": {"role": "nodefix.k8s.gvisor", "tag": "gvisor"}}


RESULTS = {
    "node-b": {"findings": [finding("gvisor.sandbox_oversized", "critical", "sb1"),
                            finding("pids.zombie_leaker", "medium", "1234", check="pids")]},
    "node-a": {"findings": []},
    "node-c": {"unreachable": True, "msg": "ssh: connect timed out"},
}


def test_model_totals_and_order():
    model = report_model.build_model(RESULTS)
    assert [n["host"] for n in model["nodes"]] == ["node-a", "node-b", "node-c"]
    assert model["totals"] == {"nodes": 3, "nodes_with_findings": 1, "nodes_in_error": 1, "findings": 2,
                               "by_severity": {"critical": 1, "high": 0, "medium": 1, "low": 0, "info": 0},
                               "waived": 0}
    assert [e["id"] for e in model["finding_ids"]] == ["gvisor.sandbox_oversized", "pids.zombie_leaker"]
    assert model["nodes"][2]["status"] == "unreachable"


def test_before_after_and_remediation():
    before = {"node-a": {"findings": [finding("kubelet.api_qps_low", "high", check="kubelet")]},
              "node-b": {"findings": [finding("gvisor.sandbox_oversized", "critical", "sb1")]}}
    rem = {"node-a": {"status": "ok", "roles": ["nodefix.k8s.kubelet"]},
           "node-b": {"status": "failed", "msg": "restart containerd: rolled back"},
           "node-c": {"unreachable": True, "msg": "no result"}}
    model = report_model.build_model(RESULTS, before=before, remediation=rem)
    a, b, c = model["nodes"]
    assert a["fixed"] == ["kubelet.api_qps_low"] and a["new"] == []
    assert b["fixed"] == [] and b["new"] == ["pids.zombie_leaker"]
    assert c["remediation"] == {"status": "not run", "msg": "no result"}
    lines = report_console.table_lines(model)
    assert lines[0].split() == ["node", "before", "after", "fixed", "new", "waived", "remediation"]
    assert lines[2].split() == ["node-a", "1", "clean", "1", "0", "0", "ok"]
    assert lines[3] == "  fixed: kubelet.api_qps_low"
    node_b = lines.index([line for line in lines if line.startswith("node-b")][0])
    row = lines[node_b].split()
    assert row[:2] == ["node-b", "1"] and row[3:] == ["0", "1", "0", "failed"]
    assert lines[node_b + 1:node_b + 3] == ["  open: gvisor.sandbox_oversized", "  new: pids.zombie_leaker"]
    assert "  failed: restart containerd: rolled back" in lines


def test_markdown_lists_every_finding_and_error():
    text = report_document.to_markdown(report_model.build_model(RESULTS))
    assert "| `gvisor.sandbox_oversized` | critical | node-b | nodefix.k8s.gvisor (tag `gvisor`) |" in text
    assert "**unreachable**: ssh: connect timed out" in text
    # a clean node is one name in one list, not a section of its own (a fleet of 10,000 stays readable)
    assert "## Nodes with no open findings (1)\n\nnode-a\n" in text and "## node-a" not in text


def test_html_is_self_contained_and_escaped():
    results = {"n<1>": {"findings": [finding("x.y", "high", "<script>alert(1)</script>")]}}
    html = report_html_page.to_html(report_model.build_model(results))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html.replace("<wbr>", "")  # the break opportunities aside
    assert html.count("<script>") == 1  # the filter box's own, inline
    assert "http://" not in html and "https://" not in html and "<link" not in html
    assert 'class="cell s-high"' in html
    parser = _Cells()
    parser.feed(html)
    assert parser.rows_in_matrix == 1 and parser.open_tables == 0


def test_junit_parses_and_counts(tmp_path):
    xml = report_document.to_junit(report_model.build_model(RESULTS), fail_on="medium")
    path = tmp_path / "junit.xml"
    path.write_text(xml)
    suites = {s.name: s for s in JUnitXml.fromfile(str(path))}
    assert set(suites) == {"node-a", "node-b", "node-c"}
    assert (suites["node-b"].tests, suites["node-b"].failures, suites["node-b"].errors) == (3, 2, 0)
    assert (suites["node-a"].tests, suites["node-a"].failures) == (1, 0)
    assert suites["node-c"].errors == 1


def test_junit_mild_findings_pass(tmp_path):
    xml = report_document.to_junit(report_model.build_model(RESULTS), fail_on="critical")
    path = tmp_path / "j.xml"
    path.write_text(xml)
    suites = {s.name: s for s in JUnitXml.fromfile(str(path))}
    assert suites["node-b"].failures == 1


def test_json_round_trips():
    model = report_model.build_model(RESULTS)
    assert json.loads(report_model.to_json(model)) == json.loads(json.dumps(model))


# --- waivers ------------------------------------------------------------------

import datetime  # noqa: E402

import pytest  # noqa: E402

TODAY = datetime.date(2026, 11, 21)
WAIVERS = [
    {"id": "pids.zombie_leaker", "hosts": ["node-b"], "reason": "vendor cron image, ticket OPS-1"},
    {"id": "gvisor.*", "subject": "sb9*", "reason": "never matches sb1"},
]


def test_waived_findings_are_listed_apart_and_do_not_count():
    model = report_model.build_model(RESULTS, waivers=WAIVERS, today=TODAY)
    b = model["nodes"][1]
    assert b["ids"] == ["gvisor.sandbox_oversized"]
    assert b["waived_ids"] == ["pids.zombie_leaker"]
    assert b["waived"][0]["waiver"] == {"reason": "vendor cron image, ticket OPS-1", "expires": None,
                                        "id": "pids.zombie_leaker"}
    assert model["totals"]["findings"] == 1 and model["totals"]["waived"] == 1
    assert [e["id"] for e in model["finding_ids"]] == ["gvisor.sandbox_oversized"]


def test_only_waived_findings_make_a_clean_node_and_are_not_fixed():
    results = {"n": {"findings": [finding("pids.zombie_leaker", "high", "1234", check="pids")]}}
    before = {"n": {"findings": [finding("pids.zombie_leaker", "high", "1234", check="pids"),
                                 finding("pids.pid_max_low", "medium", check="pids")]}}
    model = report_model.build_model(results, before=before, waivers=[{"id": "pids.zombie_leaker", "reason": "r"}],
                                     today=TODAY)
    n = model["nodes"][0]
    assert n["findings"] == [] and n["fixed"] == ["pids.pid_max_low"]
    lines = report_console.table_lines(model)
    assert lines[2].split() == ["n", "2", "clean", "1", "0", "1"]
    assert lines[3:] == ["  fixed: pids.pid_max_low", "  waived: pids.zombie_leaker"]
    md = report_document.to_markdown(model)
    assert "- waived high `pids.zombie_leaker` (1234)" in md and "  - waiver: r" in md
    html = report_html_page.to_html(model)
    assert 'class="cell s-ok">clean (1 waived)<' in html and "s-waived" in html


def test_expired_waiver_no_longer_applies_and_is_reported():
    waivers = [{"id": "pids.zombie_leaker", "reason": "until the image is fixed", "expires": "2026-11-20"}]
    model = report_model.build_model(RESULTS, waivers=waivers, today=TODAY)
    assert model["nodes"][1]["ids"] == ["gvisor.sandbox_oversized", "pids.zombie_leaker"]
    assert model["waivers_expired"][0]["expires"] == "2026-11-20"
    assert "**Expired waiver**" in report_document.to_markdown(model)
    assert "expired waiver" in report_html_page.to_html(model)
    # on its last day it still applies
    model = report_model.build_model(RESULTS, waivers=waivers, today=datetime.date(2026, 11, 20))
    assert model["nodes"][1]["waived_ids"] == ["pids.zombie_leaker"]


def test_junit_waived_findings_are_skipped(tmp_path):
    path = tmp_path / "w.xml"
    path.write_text(report_document.to_junit(report_model.build_model(RESULTS, waivers=WAIVERS, today=TODAY), fail_on="medium"))
    suite = {s.name: s for s in JUnitXml.fromfile(str(path))}["node-b"]
    assert (suite.tests, suite.failures, suite.skipped) == (3, 1, 1)
    skipped = [c for c in suite if c.result and c.result[0]._tag == "skipped"]
    assert skipped[0].result[0].message == "waived: vendor cron image, ticket OPS-1"


@pytest.mark.parametrize("bad, msg", [
    ({"id": "x"}, "needs a non-empty reason"),
    ({"reason": "r"}, "needs a non-empty id"),
    ({"id": "x", "reason": " "}, "needs a non-empty reason"),
    ({"id": "x", "reason": "r", "expires": "21.11.2026"}, "must be a date YYYY-MM-DD"),
    ({"id": "x", "reason": "r", "host": "n"}, "unknown key(s) host"),
    ({"id": "x", "reason": "r", "hosts": [1]}, "list of host names"),
    ("pids.zombie_leaker", "must be a dict"),
])
def test_bad_waivers_are_refused(bad, msg):
    with pytest.raises(audit_waivers.WaiverError) as err:
        audit_waivers.check_waivers([bad], TODAY)
    assert msg in str(err.value)


# ---------------------------------------------------------------- fail policy (the one severity ladder)

from ansible_collections.nodefix.k8s.plugins.module_utils._core import findings as core_findings


def test_severity_ladder():
    assert core_findings.at_or_above("critical") == ("critical",)
    assert core_findings.at_or_above("medium") == ("critical", "high", "medium")
    assert core_findings.at_or_above("info") == core_findings.SEVERITIES
    assert core_findings.at_or_above("never") == () and core_findings.at_or_above("none") == ()
    with pytest.raises(ValueError):
        core_findings.at_or_above("severe")
    found = [finding("a.x", "high"), finding("b.y", "low"), finding("c.z", "critical")]
    assert [f["id"] for f in core_findings.findings_at_or_above(found, "high")] == ["a.x", "c.z"]
    assert [f["id"] for f in core_findings.findings_at_or_above(found, "high", ignore=("c.z",))] == ["a.x"]


@pytest.mark.parametrize("fail_on, failed, failing", [
    ("never", False, []),
    ("critical", True, [("node-b", "gvisor.sandbox_oversized")]),
    ("medium", True, [("node-b", "gvisor.sandbox_oversized")]),  # the medium one is waived
    ("info", True, [("node-b", "gvisor.sandbox_oversized")]),
])
def test_policy_counts_open_findings_and_unaudited_nodes(fail_on, failed, failing):
    model = report_model.build_model(RESULTS, waivers=WAIVERS, today=TODAY)
    got = report_model.policy(model, fail_on)
    assert got["failed"] is failed
    assert [(f["host"], f["id"]) for f in got["failing"]] == failing
    # node-c could not be audited: it fails any policy but never
    assert got["unaudited"] == ([] if fail_on == "never" else ["node-c"])
    if failed:
        assert "not audited: node-c" in got["msg"] and "gvisor.sandbox_oversized on node-b" in got["msg"]
    else:
        assert got["msg"] is None


def test_policy_on_a_clean_fleet_passes():
    model = report_model.build_model({"node-a": {"findings": [finding("pids.zombie_leaker", "low", "1", check="pids")]}})
    assert report_model.policy(model, "medium")["failed"] is False
    assert report_model.policy(model, "low")["failed"] is True


@pytest.mark.parametrize("fail_on", ["critical", "medium", "info"])
def test_an_empty_report_is_never_a_clean_fleet(fail_on):
    # no node audited: any policy fails, and every format says why
    model = report_model.build_model({})
    got = report_model.policy(model, fail_on)
    assert got["failed"] is True and "no node was audited" in got["msg"]
    assert report_model.policy(model, "never")["failed"] is False
    assert any("no node was audited" in line for line in report_console.table_lines(model))
    assert "no node was audited" in report_document.to_markdown(model)


def test_junit_uses_the_same_ladder(tmp_path):
    model = report_model.build_model(RESULTS)
    for fail_on, failures in (("critical", 1), ("medium", 2), ("info", 2)):
        xml = JUnitXml.fromstring(report_document.to_junit(model, fail_on))
        assert sum(s.failures for s in xml) == failures


@pytest.mark.parametrize("width", [60, 80, 100, 132])
def test_console_table_fits_the_terminal_and_keeps_every_id(width):
    ids = ["gvisor.sandbox_oversized", "gvisor.runsc_outdated", "kubelet.api_qps_low", "pids.zombie_leaker"]
    ids += ["mount_units.leaked_scope_%02d" % i for i in range(30)]
    results = {"nodefix-lab-debian12": {"findings": [finding(i, "high") for i in ids[:3]]},
               "a-very-long-node-name-" + "x" * 90: {"unreachable": True, "msg": "ssh: connect timed out " * 10},
               "node-v2": {"findings": []}}
    before = {"node-v2": {"findings": [finding(i, "low") for i in ids]},
              "nodefix-lab-debian12": {"findings": []}}
    rem = {"node-v2": {"status": "ok", "seconds": 73.4}, "nodefix-lab-debian12": {"status": "failed", "msg": "x " * 400}}
    for model in (report_model.build_model(results), report_model.build_model(results, before=before, remediation=rem)):
        lines = report_console.table_lines(model, width)
        assert max(len(line) for line in lines) <= width, "\n".join(lines)
        rows = [line for line in lines if not line.startswith(" ")]
        # one line per node (+ header and rule), the ids below them
        assert len(rows) == 2 + len(results)
        text = " ".join(line.strip() for line in lines)
        for fid in (ids if "before" in model["nodes"][0] else ids[:3]):
            assert fid in text
    rows = report_console.table_lines(report_model.build_model(results, before=before, remediation=rem))
    assert [line for line in rows if line.startswith("node-v2")][0].endswith("ok 73.4s")


def test_remediation_html_tells_before_and_after_per_node():
    before = {"node-a": {"findings": [finding("kubelet.api_qps_low", "high", check="kubelet"),
                                      finding("gvisor.runsc_outdated", "high")]},
              "node-b": {"findings": [finding("gvisor.sandbox_oversized", "critical", "sb1")]}}
    after = {"node-a": {"findings": [finding("gvisor.runsc_outdated", "high")]},
             "node-b": {"findings": [finding("pids.zombie_leaker", "medium", "9", check="pids")]}}
    rem = {"node-a": {"status": "ok", "roles": ["nodefix.k8s.kubelet", "nodefix.k8s.gvisor"], "seconds": 41.5},
           "node-b": {"status": "failed", "msg": "restart containerd: rolled back", "roles": [], "seconds": 9}}
    model = report_model.build_model(after, before=before, remediation=rem)
    a, b = model["nodes"]
    assert (a["fixed"], a["still_open"], a["new"]) == (["kubelet.api_qps_low"], ["gvisor.runsc_outdated"], [])
    assert (b["fixed"], b["still_open"], b["new"]) == (["gvisor.sandbox_oversized"], [], ["pids.zombie_leaker"])
    html = report_html_page.to_html(model).replace("<wbr>", "")  # the text, its break opportunities aside
    section = html[html.index('<table id="before-after">'):]
    section = section[:section.index("</table>")]
    rows = section.split("<tr data-search=")[1:]
    assert len(rows) == 2
    assert '<code class="fixed">kubelet.api_qps_low</code>' in rows[0]
    assert '<code class="open">gvisor.runsc_outdated</code>' in rows[0]
    assert "ok in 41.5s" in rows[0] and "nodefix.k8s.kubelet, nodefix.k8s.gvisor" in rows[0]
    assert '<code class="new">pids.zombie_leaker</code>' in rows[1]
    assert "failed in 9s" in rows[1] and "restart containerd: rolled back" in rows[1]
    # an audit (no before) has no such section
    assert 'id="before-after"' not in report_html_page.to_html(report_model.build_model(after))


def test_what_changed_is_read_from_the_two_audits_facts():
    before_checks = {"gvisor": {"runsc": {"version": "0.0~20221219.0"}, "shim_config": {"systemd_cgroup": False}},
                     "kubelet": {"kubelet": {"effective": {"kubeAPIQPS": {"value": 5}, "maxPods": {"value": 110}}}},
                     "containerd": {"version": "1.6.20", "daemon": {"started": 1795400000.0}},
                     "mount_units": {"mount_units": {"scopes": 120, "orphaned_scopes": 120}}}
    after_checks = {"gvisor": {"runsc": {"version": "0.0~20240729.0"}, "shim_config": {"systemd_cgroup": True},
                               "plan": {"recreate": {"pods": ["uid-1"]}}},
                    "kubelet": {"kubelet": {"effective": {"kubeAPIQPS": {"value": 50}, "maxPods": {"value": 110}}}},
                    "containerd": {"version": "1.6.20", "daemon": {"started": 1795403897.6}},
                    "mount_units": {"mount_units": {"scopes": 0, "orphaned_scopes": 0}}}
    before = {"n": {"checks": before_checks, "findings": [finding("gvisor.runsc_outdated", "high")]}}
    after = {"n": {"checks": after_checks, "findings": []}}
    model = report_model.build_model(after, before=before, remediation={"n": {"status": "ok", "seconds": 12.5}})
    n = model["nodes"][0]
    got = dict((c["what"], (c["before"], c["after"])) for c in n["changes"])
    assert got["runsc"] == ("0.0~20221219.0", "0.0~20240729.0")
    assert got["runsc.toml systemd-cgroup"] == ("False", "True")
    assert got["kubelet kubeAPIQPS"] == ("5", "50")
    assert got["leaked kubelet scopes"] == ("120", "0")
    assert got["containerd restarted (start time)"] == ("02:13:20 UTC", "03:18:17 UTC")
    # unchanged facts are not listed
    assert "containerd" not in got and "kubelet maxPods" not in got
    assert n["pods_to_recreate"] == ["uid-1"]
    text = " ".join(" ".join(report_console.table_lines(model)).split())
    assert "runsc 0.0~20221219.0 -> 0.0~20240729.0" in text and "pods to recreate: uid-1" in text
    assert ("<td>runsc</td><td>0.0~20221219.0</td><td>0.0~20240729.0</td><td></td>"
            in report_html_page.to_html(model).replace("<wbr>", ""))
    assert "| kubelet kubeAPIQPS | 5 | 50 | yes |" in report_document.to_markdown(model)
    assert "| runsc | 0.0~20221219.0 | 0.0~20240729.0 |  |" in report_document.to_markdown(model)


def test_mount_unit_labels_say_what_their_facts_count():
    # the lab's Debian 11 node: 6 live pods' scopes and 6 leaked ones (+ 2 leaked mounts) before,
    # the live ones only after. The facts come from kubelet_mount_units' own summary.
    from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import summary as mount_units_summary
    from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import survey as mount_units_survey

    def facts(units):
        opts = mount_units_survey.normalize_options({})
        plan = {"options": opts, "units": units, "systemd_version": 247, "units_total": len(units) + 50,
                "pods_dirs": ["/var/lib/kubelet/pods"], "runtime": {}, "show_calls": 1, "timings": {},
                "stop_method": "transaction"}
        summary = mount_units_summary.summarize(plan, mount_units_summary.empty_record(), check_mode=True)
        return {"mount_units": {"mount_units": summary}}

    def unit(name, kind, status):
        return {"unit": name, "kind": kind, "status": status, "action": "stop" if status == "orphaned" else None,
                "pod_uid": "uid-" + name, "active": "active", "sub": "running", "path": None,
                "reason": "live pod" if status == "live" else "pod not live"}

    live = [unit("live-%d.scope" % i, "scope", "live") for i in range(6)]
    leaked = [unit("dead-%d.scope" % i, "scope", "orphaned") for i in range(6)]
    mounts = [unit("dead-%d.mount" % i, "mount", "orphaned") for i in range(2)]
    before = {"n": {"checks": facts(live + leaked + mounts), "findings": [finding("mount_units.orphaned", "medium")]}}
    after = {"n": {"checks": facts(live), "findings": []}}
    model = report_model.build_model(after, before=before, remediation={"n": {"status": "ok", "seconds": 1}})
    got = dict((c["what"], (c["before"], c["after"])) for c in model["nodes"][0]["changes"])
    assert got["leaked kubelet scopes"] == ("6", "0")
    assert got["leaked kubelet units (scopes and mounts)"] == ("8", "0")
    assert got["kubelet scopes (live and leaked)"] == ("12", "6")
    # no label claims to count leaks while it counts live units too
    for label, check, path in report_model.CHANGE_FACTS:
        if "leaked" in label and "live" not in label:
            assert path.rsplit(".", maxsplit=1)[-1].startswith("orphaned"), (label, path)


def test_settings_that_will_not_survive_are_one_row_each_with_their_place():
    # a kubespray node: thirteen settings, each with the inventory variable that makes it durable, as
    # rows of one table (setting | before | after | durable) - not thirteen sentences
    fields = ["kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst", "registryPullQPS", "registryBurst",
              "serializeImagePulls", "maxParallelImagePulls", "podPidsLimit", "evictionHard", "systemReserved",
              "kubeReserved", "maxPods"]
    lost = [{"setting": f, "where": "the kubespray inventory variable kubelet_%s (%s: 1)" % (f.lower(), f)}
            for f in fields]
    b_checks = {"kubelet": {"kubelet": {"effective": {"kubeAPIQPS": {"value": 5}}}}}
    a_checks = {"kubelet": {"kubelet": {"effective": {"kubeAPIQPS": {"value": 50}}}}}
    before = {"n": {"checks": b_checks, "findings": [finding("kubelet.api_qps_low", "medium")]}}
    model = report_model.build_model({"n": {"checks": a_checks, "findings": []}}, before=before,
                                     remediation={"n": {"status": "ok", "not_durable": lost}})
    # one row: the one setting that changed; the twelve this run did not change are notes, not
    # "unchanged -> unchanged" rows
    rows = report_model.change_rows(model["nodes"][0])
    assert rows == [{"setting": "kubelet kubeAPIQPS", "before": "5", "after": "50", "durable": lost[0]["where"]}]
    notes = report_model.not_durable_notes(model["nodes"][0])
    assert [n["setting"] for n in notes] == sorted(fields[1:]) and notes[0]["where"].startswith("the kubespray")
    md = report_document.to_markdown(model)
    assert "| kubelet kubeAPIQPS | 5 | 50 | %s |" % lost[0]["where"] in md and "unchanged" not in md.replace(
        "unchanged by this run", "")
    assert md.count("- not durable (unchanged by this run): ") == 12
    page = report_html_page.to_html(model)
    assert page.count('<tr class="change">') == 2 and page.count("<b>no</b>: the kubespray inventory variable") == 1
    assert page.count("not durable (unchanged by this run): ") == 12
    console = " ".join(" ".join(report_console.table_lines(model, 200)).split())
    assert console.count("not durable:") == 1 and "kubelet maxPods" in console
    assert "kubespray inventory variable" not in console  # the places are in the files, not the console


def test_the_reboot_path_is_reported_as_an_action():
    did = "rebooted (drained) instead of stopping 12000 leaked kubelet units (cleanup estimated 5400 s)"
    before = {"n": {"findings": [finding("mount_units.leaked_scopes", "high")]}}
    model = report_model.build_model({"n": {"findings": []}}, before=before,
                                     remediation={"n": {"status": "ok", "actions": [did]}})
    assert did in " ".join(" ".join(report_console.table_lines(model, 200)).split())
    assert "- %s" % did in report_document.to_markdown(model)
    assert did in report_html_page.to_html(model)
    # no action, no line
    model = report_model.build_model({"n": {"findings": []}}, before=before, remediation={"n": {"status": "ok"}})
    assert "actions" not in " ".join(report_console.table_lines(model, 200))


def test_a_node_not_run_is_neither_ok_nor_unreachable():
    model = report_model.build_model({"n1": {"not_run": True, "msg": "not run: the rollout stopped"}, "n2": {"findings": []}},
                                     remediation={"n1": {"not_run": True, "msg": "not run: the rollout stopped"}})
    node = model["nodes"][0]
    assert node["status"] == "not run" and node["error"] == "not run: the rollout stopped"
    assert node["remediation"] == {"status": "not run", "msg": "not run: the rollout stopped"}
    assert model["totals"]["nodes_in_error"] == 1
    assert report_model.policy(model, "info")["unaudited"] == ["n1"]


def test_a_large_clean_fleet_is_one_line_of_the_console_table():
    results = dict(("n%03d" % i, {"findings": [finding("kernel.no_psi", "low", check="kernel")] if i == 7 else []})
                   for i in range(200))
    lines = report_console.table_lines(report_model.build_model(results), 100)
    assert len(lines) < 10 and any(line.startswith("n007") for line in lines)
    assert "199 node(s) with no findings" in " ".join(lines)
    small = dict(("n%d" % i, {"findings": []}) for i in range(5))
    assert len(report_console.table_lines(report_model.build_model(small))) == 7  # a small fleet: a row each


def test_the_html_groups_nodes_by_state_worst_first():
    results = dict(("n%04d" % i, {"findings": [finding("gvisor.sandbox_oversized", "critical", "sb")] if i % 500 == 3
                                  else []}) for i in range(2000))
    results["n0009"] = {"unreachable": True, "msg": "timed out"}
    page = report_html_page.to_html(report_model.build_model(results))
    groups = page[page.index('<table id="groups">'):]
    groups = groups[:groups.index("</table>")]
    rows = groups.split("<tr><td>")[1:]
    assert [r.split("<")[0] for r in rows] == ["1", "4", "1995"]  # unreachable, the 4 broken, the clean rest
    assert "n0003, n0503, n1003, n1503" in rows[1] and "and 1983 more" in rows[2]
    assert page.count("<tr data-search=") == 5  # the matrix only has the nodes that are not clean


def test_waived_only_nodes_are_listed_by_waiver_not_one_by_one():
    results = dict(("n%03d" % i, {"findings": [finding("pids.zombie_leaker", "medium", "1", check="pids")]})
                   for i in range(50))
    results["n007"]["findings"].append(finding("gvisor.sandbox_oversized", "critical", "sb"))
    model = report_model.build_model(results, waivers=[{"id": "pids.*", "reason": "OPS-1", "expires": "2999-01-01"}])
    groups = report_console.waived_groups(model)
    assert len(groups) == 1 and groups[0]["reason"] == "OPS-1" and len(groups[0]["hosts"]) == 50
    md = report_document.to_markdown(model)
    assert "| `pids.zombie_leaker` | OPS-1 | 2999-01-01 | 50: n000, n001" in md
    assert md.count("\n## n0") == 1  # only the node with an open finding has a section
    page = report_html_page.to_html(model)
    assert '<table id="waived">' in page and "and 38 more" in page
    assert page.count("<details open") == 1


HOSTILE = u"zombie \x07\x00\x1b[31mred\x1b[0m \ud800 \ufffe tab\tcr\r end"


def deep(levels):
    value = "bottom"
    for _dummy in range(levels):
        value = {"inner": [value]}
    return value


def test_every_format_stays_valid_on_any_string():
    """A pod names its own processes: a zombie finding's subject can hold any character."""
    import xml.etree.ElementTree as ET  # pylint: disable=import-outside-toplevel
    from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import fleet_textfile, node_textfile

    bad = dict(finding("pids.zombie_leaker", "high", subject=HOSTILE, check="pids"),
               evidence={"comm": HOSTILE, "deep": deep(3000)}, title=HOSTILE)
    results = {u"node-\x01": {"findings": [bad], "checks": {"pids": {}}}, "node-2": {"findings": [bad]}}
    model = report_model.build_model(results, title=u"fleet \x1b[2J")
    text = report_model.to_json(model)
    assert json.loads(text)["nodes"][0]["findings"][0]["subject"].startswith("zombie \\x07\\x00\\x1b[31mred")
    root = ET.fromstring(report_document.to_junit(model, fail_on="high").encode("utf-8"))
    assert root.find("testsuite/testcase/failure") is not None
    JUnitXml.fromstring(report_document.to_junit(model, fail_on="high").encode("utf-8"))
    for rendered in (text, report_document.to_markdown(model), report_html_page.to_html(model), report_document.to_junit(model),
                     fleet_textfile(model), node_textfile(results["node-2"])):
        rendered.encode("utf-8")                             # no lone surrogate
        assert not [c for c in rendered if (ord(c) < 0x20 and c not in "\t\n") or c in u"\x7f\ufffe"], rendered[:300]
    assert "(nested more than 32 levels deep: left out)" in text


def storm_verdict(**over):
    from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm  # pylint: disable=import-outside-toplevel
    nodes = dict(("n%d" % i, {"disruptive": ["drain"] if i < 3 else [], "findings": ["gvisor.runsc_outdated"]
                              if i < 3 else []}) for i in range(10))
    return storm.verdict({"run": storm.record("run", nodes, "t")}, 20, **over)


def test_a_storm_stop_is_said_first_in_every_format():
    model = report_model.build_model(RESULTS, storm=storm_verdict())
    assert model["storm"]["stop"] and model["storm"]["disruptive"] == 3
    assert model["storm"]["fleet_wide"] == [{"id": "gvisor.runsc_outdated", "nodes": 3, "share": 30.0}]
    md = report_document.to_markdown(model)
    head = md.split("## Nodes", 1)[0]
    assert "## Storm breaker" in head and "3 of 10 node(s) (30%) need a drain" in head
    assert "Fleet-wide (on more than 20% of the 10 node(s)): gvisor.runsc_outdated on 3 (30%)" in head
    html = report_html_page.to_html(model)
    assert html.index("<h2>Storm breaker</h2>") < html.index("<h2>Nodes by state</h2>")
    lines = report_console.table_lines(model, 80)
    assert lines[0].startswith("storm breaker: 3 of 10") and all(len(line) <= 80 for line in lines)
    assert json.loads(report_model.to_json(model))["storm"]["stop"] is True


def test_a_calm_fleet_says_nothing_of_the_storm_and_an_overridden_one_says_so():
    calm = storm_verdict(override=False)
    calm.update(over=False, stop=False, msg=None, fleet_wide=[])
    model = report_model.build_model(RESULTS, storm=calm)
    assert "Storm breaker" not in report_document.to_markdown(model) and "storm" not in report_console.table_lines(model)[0]
    forced = report_model.build_model(RESULTS, storm=storm_verdict(override=True))
    assert "proceeding: nodefix_storm_override is set" in report_document.to_markdown(forced)


@pytest.mark.parametrize("storm, words", [
    ("stop", "storm must be the storm_gate result"),
    ({"stop": "yes"}, "storm: stop is missing or of the wrong type"),
    (dict(storm_verdict(), size=True), "storm: size is missing or of the wrong type"),
    (dict(storm_verdict(), disruptive="n1"), "disruptive must be a list of host names"),
    (dict(storm_verdict(), fleet_wide=[{"id": 1}]), "fleet_wide must be a list"),
])
def test_a_storm_that_is_not_a_verdict_is_refused(storm, words):
    with pytest.raises(report_model.ReportInputError, match=words):
        report_model.build_model(RESULTS, storm=storm)


def test_a_map_setting_shows_the_keys_that_changed_and_an_explicit_default_says_so():
    """evictionHard as the keys that changed, never the whole dict twice; a value only made explicit
    (the kubelet's default before, the same value set now) is a row that says so, with the value."""
    b_eff = {"evictionHard": {"value": {"memory.available": "100Mi", "nodefs.available": "10%",
                                        "imagefs.available": "15%"}, "source": "default"},
             "eventBurst": {"value": 100, "source": "default"},
             "maxPods": {"value": 110, "source": "config"}}
    a_eff = {"evictionHard": {"value": {"memory.available": "500Mi", "nodefs.available": "10%",
                                        "pid.available": "10%"}, "source": "config"},
             "eventBurst": {"value": 100, "source": "config"},
             "maxPods": {"value": 110, "source": "config"}}
    got = report_model.changes({"kubelet": {"kubelet": {"effective": b_eff}}}, {"kubelet": {"kubelet": {"effective": a_eff}}})
    assert got == [
        {"what": "kubelet eventBurst", "before": "100 (default)", "after": "100 (made explicit: config)"},
        {"what": "kubelet evictionHard.imagefs.available", "before": "15%", "after": "(unset)"},
        {"what": "kubelet evictionHard.memory.available", "before": "100Mi", "after": "500Mi"},
        {"what": "kubelet evictionHard.pid.available", "before": "(unset)", "after": "10%"}]
    assert not any("{" in c["before"] + c["after"] for c in got)   # no Python repr of a dict


def test_empty_sections_are_left_out_of_a_clean_fleet_page():
    model = report_model.build_model({"a": {"findings": []}, "b": {"findings": []}})
    page = report_html_page.to_html(model)
    assert "<h2>Nodes x findings</h2>" not in page and "<h2>Nodes</h2>" not in page
    assert '<table id="matrix">' not in page and "<h2>Nodes by state</h2>" in page


def test_the_evidence_kept_is_named_in_every_format():
    kept = {"path": "/r/remediate/evidence/node-b/4711.json", "bytes": 5000, "before": ["drain", "reboot"],
            "missing": ["kernel"]}
    model = report_model.build_model(RESULTS, before=RESULTS, remediation={"node-b": {"status": "ok", "evidence": kept}})
    line = "evidence kept before the drain, reboot: /r/remediate/evidence/node-b/4711.json (5000 bytes; missing: kernel)"
    assert report_model.evidence_line(model["nodes"][1]) == line
    assert "- " + line in report_document.to_markdown(model)
    assert report_html_page._esc(line) in report_html_page.to_html(model).replace("<wbr>", "")
    console = " ".join(" ".join(report_console.table_lines(model, 200)).split())
    assert "evidence: /r/remediate/evidence/node-b/4711.json" in console


def test_a_list_of_named_items_shows_the_item_that_changed_never_two_identical_cells():
    """runsc's runtime entry gaining its ConfigPath read '1 item(s) -> 1 item(s)': now the key that changed."""
    before = {"gvisor": {"containerd": {"runsc_runtimes": [{"name": "runsc", "runtime_type": "io.containerd.runsc.v1",
                                                            "config_path": None}]}}}
    after = {"gvisor": {"containerd": {"runsc_runtimes": [{"name": "runsc", "runtime_type": "io.containerd.runsc.v1",
                                                           "config_path": "/etc/containerd/runsc.toml"}]}}}
    rows = report_model.changes(before, after)
    assert rows == [{"what": "runsc runtimes in containerd[runsc].config_path", "before": "(unset)",
                     "after": "/etc/containerd/runsc.toml"}]
    assert report_model.change_check(rows[0]["what"]) == "gvisor"
    added = {"gvisor": {"containerd": {"runsc_runtimes": after["gvisor"]["containerd"]["runsc_runtimes"]
                                       + [{"name": "runsc-debug", "runtime_type": "x"}]}}}
    assert report_model.changes(after, added) == [{"what": "runsc runtimes in containerd[runsc-debug]",
                                                   "before": "(unset)", "after": "added"}]
    # a list without names whose summaries match shows the values themselves
    many_b = {"mount_units": {"mount_units": {"orphaned": ["unit-%d.scope" % i for i in range(20)]}}}
    many_a = {"mount_units": {"mount_units": {"orphaned": ["unit-%d.scope" % i for i in range(1, 21)]}}}
    (row,) = report_model.changes(many_b, many_a)
    assert row["before"] != row["after"] and row["before"].startswith("[unit-0.scope, ")  # YAML
    assert report_model.change_check("kubelet scopes (live and leaked)") == "mount_units"
    assert report_model.change_check("kubelet evictionHard.memory.available") == "kubelet"
