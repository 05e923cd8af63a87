# SPDX-License-Identifier: GPL-3.0-or-later
"""Merging the reports of sliced runs (_report.merge) into the one-run report."""

import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._report import console as report_console
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model as report_model
from ansible_collections.nodefix.k8s.plugins.module_utils._report import html_page as report_html_page
from ansible_collections.nodefix.k8s.plugins.module_utils._report.prometheus import fleet_textfile
from ansible_collections.nodefix.k8s.plugins.module_utils._report.merge import MISSING, merge_models


def finding(fid, severity, subject=None):
    return {"id": fid, "severity": severity, "title": "title of " + fid, "subject": subject, "check": fid.split(".")[0],
            "remedy": "do it", "fix": {"role": "nodefix.k8s.gvisor", "tag": "gvisor"}}


RESULTS = {
    "node-%02d" % i: ({"unreachable": True, "msg": "ssh: timed out"} if i == 7 else
                      {"findings": [finding("kernel.no_psi", "medium")] + (
                          [finding("gvisor.sandbox_oversized", "critical", "sb%d" % i)] if i % 3 == 0 else [])})
    for i in range(1, 11)
}
WAIVERS = [{"id": "kernel.no_psi", "reason": "OPS-1", "hosts": ["node-0[12]"]},
           {"id": "pids.*", "reason": "old", "expires": "2020-01-01"}]


def json_model(model):
    """What report.json holds (and a slice's file gives back)."""
    return json.loads(report_model.to_json(model))


def sliced(hosts_per_slice, generated="t"):
    return [("slice-%d" % i, json_model(report_model.build_model({h: RESULTS[h] for h in hosts}, waivers=WAIVERS,
                                                                 generated=generated)))
            for i, hosts in enumerate(hosts_per_slice, 1)]


def split(n):
    hosts = sorted(RESULTS)
    return [hosts[i::n] for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 10])
def test_merged_slices_equal_the_single_run(n):
    single = json_model(report_model.build_model(RESULTS, waivers=WAIVERS, generated="one run"))
    merged = json_model(merge_models(sliced(split(n)), expected_hosts=sorted(RESULTS), generated="merge"))
    assert [s["name"] for s in merged.pop("slices")] == ["slice-%d" % i for i in range(1, n + 1)]
    assert merged.pop("generated") == "merge" and single.pop("generated") == "one run"
    assert merged == single
    # and so is every format but the lines naming the slices
    assert report_document.to_junit(merged) == report_document.to_junit(single)
    assert fleet_textfile(merged) == fleet_textfile(single)
    assert report_console.table_lines(merged) == report_console.table_lines(single)


def test_a_missing_slice_is_missing_nodes_and_fails_the_policy():
    three = split(3)
    merged = merge_models(sliced(three[:2]), expected_hosts=sorted(RESULTS))
    missing = [n for n in merged["nodes"] if n["status"] == "missing"]
    assert [n["host"] for n in missing] == sorted(three[2])
    assert all(n["error"] == MISSING for n in missing)
    assert merged["totals"]["nodes"] == 10 and merged["totals"]["nodes_in_error"] == len(missing) + 1
    verdict = report_model.policy(merged, "critical")
    assert verdict["failed"] and set(three[2]) <= set(verdict["unaudited"])
    assert "not audited: " in verdict["msg"] and three[2][0] in verdict["msg"]
    # the formats say it too
    assert "missing" in report_document.to_markdown(merged) and three[2][0] in report_html_page.to_html(merged)
    assert 'nodefix_node_audited{node="%s"} 0' % three[2][0] in fleet_textfile(merged)
    # without expected hosts nothing is invented, and a policy of never passes
    assert not report_model.policy(merged, "never")["failed"]


def test_no_slice_at_all_is_never_a_clean_fleet():
    merged = merge_models([], expected_hosts=["a", "b"])
    assert [n["status"] for n in merged["nodes"]] == ["missing", "missing"]
    assert report_model.policy(merged, "info")["failed"]


@pytest.mark.parametrize("expected", [None, [], (), "node-01", [""], [None]])
def test_an_empty_expected_set_is_refused(expected):
    """An inventory whose targets match nothing: a slice that never wrote its report would pass."""
    with pytest.raises(report_model.ReportInputError, match="expected_hosts must list every host"):
        merge_models(sliced(split(2)), expected_hosts=expected)


def test_a_host_nobody_expected_is_reported_as_such_and_fails_the_policy():
    slices = sliced(split(2))
    expected = sorted(RESULTS)[1:]                  # the inventory does not know node 0
    stranger = sorted(RESULTS)[0]
    merged = merge_models(slices, expected_hosts=expected)
    node = [n for n in merged["nodes"] if n["host"] == stranger][0]
    assert node["status"] == "unexpected" and "not one of the hosts this fleet run expects" in node["error"]
    assert node["findings"] == [] and stranger not in [h for i in merged["finding_ids"] for h in i["hosts"]]
    verdict = report_model.policy(merged, "critical")
    assert verdict["failed"] and stranger in verdict["unaudited"]
    assert "UNEXPECTED" in report_document.to_markdown(merged) or "unexpected" in report_document.to_markdown(merged)
    assert 'nodefix_node_audited{node="%s"} 0' % stranger in fleet_textfile(merged)


def test_a_host_in_two_slices_is_refused():
    slices = sliced([["node-01", "node-02"], ["node-02", "node-03"]])
    with pytest.raises(report_model.ReportInputError, match="node-02 is in two slices .slice-1 and slice-2."):
        merge_models(slices, expected_hosts=["node-01", "node-02", "node-03"])


@pytest.mark.parametrize("model, msg", [
    ([], "must be a JSON object"),
    ({"title": "x"}, "no nodes list"),
    ({"nodes": [{"host": "a"}]}, r"nodes\[0\] \(a\) has unknown status None"),
    ({"nodes": [{"host": "", "status": "ok"}]}, "has no host"),
    ({"nodes": [dict(json_model(report_model.build_model(RESULTS))["nodes"][0], findings="x")]}, "findings must be a list"),
    ({"nodes": [dict(json_model(report_model.build_model(RESULTS))["nodes"][0],
                     findings=[{"id": "x", "severity": "urgent"}])]}, "unknown severity"),
    ({"nodes": [dict(json_model(report_model.build_model(RESULTS))["nodes"][0], counts={"high": "1"})]}, "counts"),
    ({"nodes": [], "slices": []}, "itself a merged report"),
])
def test_what_is_not_a_slice_report_is_refused_naming_the_slice(model, msg):
    with pytest.raises(report_model.ReportInputError, match="slice s1") as err:
        merge_models([("s1", model)], expected_hosts=["a"])
    assert err.match(msg)


def test_merged_markdown_and_html_name_the_slices():
    merged = merge_models(sliced(split(2), generated="2026-11-25T10:00Z"), expected_hosts=sorted(RESULTS))
    md, page = report_document.to_markdown(merged), report_html_page.to_html(merged)
    assert "Merged from 2 slice(s): slice-1 (5 node(s), 2026-11-25T10:00Z); slice-2" in md
    assert 'id="slices"' in page and "slice-2 (5 node(s)" in page


def test_a_finding_id_lists_each_host_once_in_node_order():
    # assemble() keeps a set beside each id's host list (no scan of the list: linear in the fleet)
    results = {"n%03d" % i: {"findings": [finding("kernel.no_psi", "medium", "a"), finding("kernel.no_psi", "medium", "b")]}
               for i in range(300)}
    model = report_model.build_model(results)
    assert model["finding_ids"][0]["hosts"] == sorted(results)
