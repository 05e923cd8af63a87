# SPDX-License-Identifier: GPL-3.0-or-later
"""The storm breaker counts what is down already (issue 53.4) and has no holes (issue 54.5):
nodes NotReady / Ready Unknown / cordoned in the API server, targets the controller cannot reach or audit,
the hosts of slices that have not recorded yet; a percent outside 0-100 refused; the merged report keeps
the storm section; the Node listing bounded by a deadline, its failures "could not count"."""

import re
import socket
import threading

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._report import merge as report_merge
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import cluster_nodes
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model as report_model

CLEAN = {"disruptive": [], "findings": []}
DRAIN = {"disruptive": ["drain", "reboot"], "findings": ["kernel.below_minimum"]}


def node(name, ready="True", cordoned=False):
    conditions = [] if ready is None else [{"type": "MemoryPressure", "status": "False"},
                                           {"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": conditions}}


def run(nodes, cluster=None, **kwargs):
    return storm.verdict({"run": storm.record("run", nodes, "t", cluster=cluster)}, kwargs.pop("percent", 20), **kwargs)


# --- nodefix_storm_percent: a whole number from 0 to 100, nothing else -------------------------------------------

@pytest.mark.parametrize("value", [101, 150, "150", "1e3", 1e3, 100.5, "100.5", 20.5, -1, "-1", True, False, None,
                                   "20%", "", "twenty", [20], {"p": 20}, "0x14", "1_0"])
def test_a_percent_outside_0_100_or_not_whole_is_refused_naming_the_variable(value):
    with pytest.raises(storm.StormInputError, match=r"^nodefix_storm_percent must be a whole number from 0 to 100"):
        storm.check_percent(value)
    with pytest.raises(storm.StormInputError, match="nodefix_storm_percent"):
        run({"a": DRAIN, "b": DRAIN}, percent=value)


@pytest.mark.parametrize("value, want", [(0, 0), (20, 20), ("20", 20), (" 20 ", 20), (20.0, 20), ("20.0", 20),
                                         (100, 100), ("100", 100)])
def test_a_whole_percent_is_taken_as_given_and_100_never_stops(value, want):
    assert storm.check_percent(value) == want
    assert run({"a": DRAIN, "b": DRAIN}, percent=value)["stop"] is (want < 100)


# --- the nodes down already count (53.4) --------------------------------------------------------------------------

def test_three_of_five_down_and_unreachable_plus_one_to_reboot_stop_the_rollout():
    """The issue's case: the old breaker left the unreachable nodes out of the count and the fleet (1 of 2: go)."""
    nodes = {"node-a": CLEAN, "node-b": DRAIN,
             "node-c": dict(CLEAN, unreachable="ssh: connection refused"),
             "node-d": dict(CLEAN, unreachable="ssh: connection refused"),
             "node-e": dict(CLEAN, unreachable="ssh: connection refused")}
    listing = [node("node-a"), node("node-b"), node("node-c", "False"), node("node-d", "Unknown"), node("node-e", None)]
    out = run(nodes, cluster_nodes.view(listing))
    assert out["stop"] and out["size"] == 5 and out["affected"] == 4 and out["share"] == 80.0
    assert out["unavailable"] == {"node-c": ["NotReady", storm.UNREACHABLE], "node-d": ["Ready Unknown", storm.UNREACHABLE],
                                  "node-e": ["no Ready condition", storm.UNREACHABLE]}
    assert out["msg"].startswith("storm breaker: 4 of 5 node(s) (80%) are unavailable or would be disrupted: 3 unavailable "
                                 "(node-c: NotReady, unreachable from the controller; ")
    assert "1 need a drain, reboot or restart (drain 1, reboot 1), over nodefix_storm_percent (20%)" in out["msg"]
    assert out["counted"] == "counted the 5 Node(s) the API server lists and every target"


def test_without_a_kubeconfig_the_unreachable_targets_count_and_it_says_what_it_counted():
    nodes = {"node-a": CLEAN, "node-b": DRAIN}
    nodes.update(("node-%s" % c, dict(CLEAN, unreachable="Failed to connect")) for c in "cde")
    out = run(nodes)
    assert out["stop"] and out["size"] == 5 and out["affected"] == 4
    assert out["counted"].startswith("counted only the targets it could reach (no nodefix_kubeconfig")
    assert "; counted only the targets it could reach (no nodefix_kubeconfig: the cluster's other Nodes and their health " \
           "are not known): the rollout stops" in out["msg"]
    calm = run({"node-a": CLEAN, "node-b": DRAIN})
    assert not calm["stop"] and calm["counted"].startswith("counted only the targets it could reach")


def test_nodes_beyond_the_targets_count_cordoned_by_anyone_notready_or_unknown():
    """2 targets, one to drain; the cluster has 10 Nodes, 2 of them down and 1 cordoned by an operator: 4 of 10."""
    listing = [node("n%02d" % i) for i in range(10)]
    listing[5], listing[6], listing[7] = node("n05", "False"), node("n06", "Unknown"), node("n07", cordoned=True)
    out = run({"n00": DRAIN, "n01": CLEAN}, cluster_nodes.view(listing))
    assert out["stop"] and out["size"] == 10 and out["affected"] == 4 and out["share"] == 40.0
    assert out["unavailable"] == {"n05": ["NotReady"], "n06": ["Ready Unknown"], "n07": ["cordoned"]}
    # one node down of ten and one to drain: 2 of 10 = 20 %, within (a strict share, as before)
    listing[6], listing[7] = node("n06"), node("n07")
    assert not run({"n00": DRAIN, "n01": CLEAN}, cluster_nodes.view(listing))["stop"]


def test_a_node_down_and_to_be_drained_counts_once_and_node_names_map_the_hosts():
    listing = [node("ip-10-0-0-1.ec2.internal", "False"), node("ip-10-0-0-2.ec2.internal")] + \
        [node("w%d" % i) for i in range(3)]
    nodes = {"host1": dict(DRAIN, node="ip-10-0-0-1.ec2.internal"), "host2": dict(CLEAN, node="ip-10-0-0-2.ec2.internal")}
    out = run(nodes, cluster_nodes.view(listing))
    assert out["size"] == 5 and out["affected"] == 1 and not out["stop"]


def test_a_rollout_that_disrupts_nothing_never_stops_whatever_is_down():
    listing = [node("n%d" % i, "False") for i in range(8)] + [node("a"), node("b")]
    out = run({"a": CLEAN, "b": CLEAN}, cluster_nodes.view(listing))
    assert not out["stop"] and out["affected"] == 8 and out["msg"] is None


def test_the_selected_pool_is_the_fleet_and_a_target_outside_it_counts_as_unavailable():
    pool = [node("w%d" % i) for i in range(4)]
    out = run({"w0": DRAIN, "gpu-1": CLEAN}, cluster_nodes.view(pool, "pool=workers"))
    assert out["unavailable"] == {"gpu-1": [storm.NOT_LISTED]} and out["size"] == 5 and out["stop"]
    assert out["counted"] == "counted the 4 Node(s) the API server lists selected by pool=workers and every target"


def test_a_target_that_could_not_be_audited_is_possibly_disrupted():
    out = run({"a": CLEAN, "b": dict(CLEAN, unaudited="MODULE FAILURE"), "c": CLEAN, "d": CLEAN, "e": DRAIN})
    assert out["unknown"] == ["b"] and out["affected"] == 2 and out["stop"]
    assert "1 could not be audited, counted as possibly disrupted (b)" in out["msg"]
    # alone it is a possible disruption too: the rolling play audits it again and may drain it
    assert run({"a": CLEAN, "b": dict(CLEAN, unaudited="x"), "c": dict(CLEAN, unreachable="y")})["stop"]


def test_nodes_that_cannot_be_listed_hold_a_disruptive_rollout_and_say_why():
    blind = cluster_nodes.failed_view(None, "listing the Nodes through k failed: ReadTimeoutError: read timed out")
    out = run({"a": DRAIN, **dict(("n%d" % i, CLEAN) for i in range(20))}, blind)
    assert out["stop"] and out["share"] == 4.76   # 1 of 21 targets: within the share, held for not counting
    assert out["msg"].startswith("storm breaker: the unavailable nodes could not be counted - could not count the "
                                 "cluster's Nodes (listing the Nodes through k failed: ReadTimeoutError")
    assert "would disrupt 1 node(s) (a)" in out["msg"] and "nodefix_storm_override=true" in out["msg"]
    assert not run({"a": CLEAN, "b": CLEAN}, blind)["stop"]                   # nothing to disrupt: go
    assert run({"a": DRAIN, "b": CLEAN}, blind, override=True)["overridden"]  # the override proceeds


def test_a_long_list_of_unavailable_nodes_is_cut_in_the_message():
    listing = [node("n%03d" % i, "False") for i in range(50)] + [node("t0"), node("t1")]
    out = run({"t0": DRAIN, "t1": DRAIN}, cluster_nodes.view(listing))
    assert "and 40 more" in out["msg"] and len(out["unavailable"]) == 50


@pytest.mark.parametrize("cluster, words", [
    ({"nodes": []}, "cluster must be a mapping with nodes"),
    ({"nodes": {"a": "NotReady"}}, "cluster node a: reasons must be a list of text"),
    ({"nodes": {}, "error": 3}, "cluster.error must be text or null"),
])
def test_a_cluster_view_of_the_wrong_shape_is_refused(cluster, words):
    with pytest.raises(storm.StormInputError, match=re.escape(words)):
        storm.record("run", {"a": CLEAN}, "t", cluster=cluster)


@pytest.mark.parametrize("entry, words", [
    (dict(CLEAN, unreachable=""), "node x: unreachable must be a non-empty string"),
    (dict(CLEAN, node=5), "node x: node must be a non-empty string"),
])
def test_a_bad_optional_key_is_refused_naming_the_node(entry, words):
    with pytest.raises(storm.StormInputError, match=words):
        storm.record("run", {"x": entry}, "t")


# --- slices: the hosts no record has are possibly disruptive (54.5) ------------------------------------------------

def slice_record(name, total, hit, cluster=None):
    nodes = dict(("%s%02d" % (name, i), DRAIN if i < hit else CLEAN) for i in range(total))
    return storm.record(name, nodes, "t", "r", cluster)


def test_a_slice_that_has_not_seen_every_record_counts_the_unseen_hosts_early_never_late():
    """The issue's case: fleet_size 20, slice a 2 of its 10 to drain, slice b 3 of its 10. The old breaker let
    slice a start (2 of 20, 2 of 10: within 20 %) and stopped only when b had recorded - after a's first batch."""
    records = {"a": slice_record("a", 10, 2)}
    first = storm.verdict(records, 20, fleet_size=20, rollout="r", own_slice="a")
    assert first["stop"] and first["unseen"] == 10 and first["affected"] == 12
    assert ("10 host(s) of nodefix_fleet_size (20) in no slice's record yet, counted as possibly disrupted "
            "(early, never late)") in first["msg"]
    records["b"] = slice_record("b", 10, 3)
    for own in ("a", "b"):
        both = storm.verdict(records, 20, fleet_size=20, rollout="r", own_slice=own)
        assert both["stop"] and both["unseen"] == 0 and both["affected"] == 5 and both["share"] == 25.0
    # once every slice has recorded, a calm fleet goes (2 + 1 of 20)
    records["b"] = slice_record("b", 10, 1)
    assert not storm.verdict(records, 20, fleet_size=20, rollout="r", own_slice="a")["stop"]


def test_a_slice_with_nothing_to_disrupt_goes_without_waiting_for_the_others():
    out = storm.verdict({"a": slice_record("a", 10, 0)}, 20, fleet_size=20, rollout="r", own_slice="a")
    assert not out["over"] and out["unseen"] == 10


def test_unsliced_hosts_beyond_the_run_are_not_unseen():
    out = storm.verdict({"run": slice_record("run", 10, 2)}, 20, fleet_size=20, rollout="r")
    assert out["unseen"] == 0 and not out["stop"]


def test_without_fleet_size_a_slice_says_it_could_not_count_the_unseen():
    out = storm.verdict({"a": slice_record("a", 10, 1)}, 20, rollout="r", own_slice="a")
    assert "nodefix_fleet_size is not set" in out["counted"]


def test_the_slices_views_of_the_cluster_add_up():
    view_a = cluster_nodes.view([node("a00"), node("a01"), node("x", "False")] + [node("b%02d" % i) for i in range(2)])
    failed = cluster_nodes.failed_view(None, "refused")
    records = {"a": slice_record("a", 2, 1, view_a), "b": slice_record("b", 2, 0, failed)}
    out = storm.verdict(records, 20, fleet_size=4, rollout="r", own_slice="b")
    assert out["size"] == 5 and out["unavailable"] == {"x": ["NotReady"]} and out["affected"] == 2 and out["stop"]


class Clock(object):
    def __init__(self):
        self.now, self.slept = 0.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_a_slice_waits_for_the_others_records_then_judges_the_whole_fleet():
    clock, records = Clock(), {"a": slice_record("a", 10, 2)}

    def judge():
        if clock.now >= 4:
            records["b"] = slice_record("b", 10, 0)
        return storm.verdict(dict(records), 20, fleet_size=20, rollout="r", own_slice="a")

    out = storm.wait_for_slices(judge, 60, clock, clock.sleep)
    assert out["unseen"] == 0 and not out["stop"] and clock.slept == [2.0, 2.0]


def test_a_slice_whose_others_never_record_holds_after_its_wait():
    clock = Clock()
    out = storm.wait_for_slices(lambda: storm.verdict({"a": slice_record("a", 10, 2)}, 20, fleet_size=20, rollout="r",
                                                      own_slice="a"), 5, clock, clock.sleep)
    assert out["stop"] and out["unseen"] == 10 and sum(clock.slept) == 5
    # a storm of its own is not waited on
    clock = Clock()
    out = storm.wait_for_slices(lambda: storm.verdict({"a": slice_record("a", 4, 4)}, 20, rollout="r", own_slice="a"),
                                60, clock, clock.sleep)
    assert out["stop"] and clock.slept == []


# --- the merged report keeps the storm section (54.5) -------------------------------------------------------------

def slice_report(name, hosts, verdict):
    results = dict((h, {"failed": True, "msg": "not run: %s" % (verdict["msg"] or "")}) for h in hosts)
    return name, report_model.build_model(results, storm=verdict)


def test_two_stopped_slices_merge_into_a_stopped_fleet_with_its_fleet_wide_findings():
    records = {"a": slice_record("a", 10, 3), "b": slice_record("b", 10, 4)}
    va = storm.verdict({"a": records["a"]}, 20, fleet_size=20, rollout="r", own_slice="a")
    vb = storm.verdict(records, 20, fleet_size=20, rollout="r", own_slice="b")
    merged = report_merge.merge_models([slice_report("/r/slices/a/remediate/report.json", sorted(records["a"]["nodes"]), va),
                                        slice_report("/r/slices/b/remediate/report.json", sorted(records["b"]["nodes"]), vb)],
                                       expected_hosts=sorted(records["a"]["nodes"]) + sorted(records["b"]["nodes"]))
    assert merged["storm"]["stop"] and merged["storm"]["size"] == 20 and merged["storm"]["disruptive"] == 7
    assert merged["storm"]["fleet_wide"] == [{"id": "kernel.below_minimum", "nodes": 7, "share": 35.0}]
    assert [s["slice"] for s in merged["storm"]["slices"]] == ["a", "b"]
    assert merged["storm"]["msg"].startswith("slice a: storm breaker: ") and "; slice b: storm breaker: " in merged["storm"]["msg"]
    text = report_document.to_markdown(merged)
    assert text.index("## Storm breaker") < text.index("## Nodes") and "kernel.below_minimum on 7 (35%)" in text


def test_a_merge_of_slices_without_a_storm_section_has_none_and_an_overridden_one_says_so():
    calm = storm.verdict({"a": slice_record("a", 10, 0)}, 20, rollout="r", own_slice="a")
    merged = report_merge.merge_models([slice_report("a", ["a00"], calm)], expected_hosts=["a00"])
    assert not merged["storm"]["stop"] and not merged["storm"]["over"]
    assert "storm" not in report_merge.merge_models([("a", report_model.build_model({"h": {"failed": True}}))],
                                                    expected_hosts=["h"])
    forced = storm.verdict({"a": slice_record("a", 4, 4)}, 20, override=True, rollout="r", own_slice="a")
    merged = report_merge.merge_models([slice_report("a", ["a00"], forced)], expected_hosts=["a00"])
    assert merged["storm"]["overridden"] and not merged["storm"]["stop"]


def test_a_slice_storm_section_without_its_keys_is_refused():
    with pytest.raises(NodefixError, match="slice a: its report's storm section has no stop"):
        storm.merge([("a", {"storm": {"over": True}})])


# --- the Node listing ----------------------------------------------------------------------------------------------

HELD = {"nodefix.k8s/held": "{}", "nodefix.k8s/cordoned-by": "{}"}


@pytest.mark.parametrize("listed, want", [
    (node("a"), []), (node("a", "False"), ["NotReady"]), (node("a", "Unknown"), ["Ready Unknown"]),
    (node("a", None), ["no Ready condition"]), (node("a", cordoned=True), ["cordoned"]),
    (node("a", "False", cordoned=True), ["NotReady", "cordoned"]), ({"metadata": {"name": "a"}}, ["no Ready condition"]),
    (dict(node("a", cordoned=True), metadata={"name": "a", "annotations": {"nodefix.k8s/cordoned-by": "{}"}}),
     [cluster_nodes.CORDONED_BY_NODEFIX]),
    (dict(node("a", cordoned=True), metadata={"name": "a", "annotations": HELD}),
     [cluster_nodes.HELD_BY_NODEFIX]),
    (dict(node("a"), metadata={"name": "a", "annotations": {"nodefix.k8s/cordoned-by": "{}"}}), []),
])
def test_a_nodes_conditions_say_why_it_is_unavailable(listed, want):
    assert cluster_nodes.reasons(listed) == want


def kubeconfig(tmp_path, port):
    path = tmp_path / "kubeconfig"
    path.write_text('{"apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [{"name": "c", '
                    '"cluster": {"server": "http://127.0.0.1:%d"}}], "users": [{"name": "u", "user": {"token": "t"}}], '
                    '"contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}' % port)
    return str(path)


def test_a_server_that_never_answers_is_a_clear_failure_within_the_deadline(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)   # close() does not wake a blocked accept(): poll
    held = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])   # accepted, never answered
            except socket.timeout:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        with pytest.raises(NodefixError, match="listing the Nodes through .* failed: .*(timed out|Timeout)"):
            cluster_nodes.list_nodes(kubeconfig(tmp_path, listener.getsockname()[1]), timeout=1)
    finally:
        stop.set()
        thread.join()
        listener.close()
        for conn in held:
            conn.close()


def test_a_refused_connection_a_missing_kubeconfig_and_a_bad_timeout_are_clear_failures(tmp_path):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()   # nothing listens there now
    with pytest.raises(NodefixError, match="listing the Nodes selected by 'pool=a' through .* failed: .*(refused|Max)"):
        cluster_nodes.list_nodes(kubeconfig(tmp_path, port), "pool=a", timeout=2)
    with pytest.raises(NodefixError, match="listing the Nodes through /nonexistent/kubeconfig failed"):
        cluster_nodes.list_nodes("/nonexistent/kubeconfig", timeout=2)
    with pytest.raises(NodefixError, match="the API timeout must be a whole number of seconds"):
        cluster_nodes.list_nodes("k", timeout=0)


def test_a_target_a_dead_run_left_cordoned_does_not_hold_the_run_that_gives_it_back():
    """5 Nodes, node-a left cordoned by a killed nodefix run (the run gives it back first), node-b needs a
    restart: 1 of 5 - not a storm. Counted as unavailable, it held every later run and was never given back.
    A node cordoned by a dead run that is NOT a target of this run stays counted (nobody returns it here)."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import cluster_nodes
    from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm as storm_lib
    views = [{"selector": None, "error": None, "nodes": {
        "node-a": [cluster_nodes.CORDONED_BY_NODEFIX], "node-b": [], "node-c": [], "node-d": [],
        "node-x": [cluster_nodes.CORDONED_BY_NODEFIX]}}]
    nodes = {"node-a": {"disruptive": [], "findings": []}, "node-b": {"disruptive": ["restart"], "findings": ["k"]},
             "node-c": {"disruptive": [], "findings": []}}
    seen = storm_lib.count(nodes, views)
    assert "node-a" not in seen["unavailable"] and "node-x" in seen["unavailable"], seen
    assert seen["affected"] == 2 and seen["size"] == 5, seen
