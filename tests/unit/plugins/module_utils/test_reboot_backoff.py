# SPDX-License-Identifier: GPL-3.0-or-later
"""_reboot.backoff (a node rebooted lately for a reason still open is held) and the reboot_backoff
module's check/record over a fake clock and a fake Node store; a Node that cannot be read (a refused
connection, a timeout) is held with the reason, never a traceback."""

import datetime
import json

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import backoff
from ansible_collections.nodefix.k8s.plugins.modules import reboot_backoff as module

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
PENDING = {"id": "reboot.required", "check": "reboot", "reason": "/var/run/reboot-required exists"}
MEMCGS = {"id": "kernel.dying_memcgs", "check": "kernel", "reason": "5000 dying memory cgroups"}
SIX_HOURS = 6 * 3600


def rebooted(hours_ago, reasons=(PENDING,), run="run-1"):
    """The Node's annotations after a reboot ``hours_ago`` for ``reasons``, as the record step writes them."""
    return {backoff.ANNOTATION: backoff.record(NOW - datetime.timedelta(hours=hours_ago), run, list(reasons)),
            "other.example/annotation": "kept"}


@pytest.mark.parametrize("value, seconds", [
    (0, 0), ("0", 0), (21600, 21600), ("21600", 21600), ("6h", 21600), ("90m", 5400), ("1h30m", 5400),
    ("1d", 86400), ("2w", 1209600), ("45s", 45), (" 6H ", 21600), ("1d6h", 108000),
])
def test_durations_in_seconds_or_units(value, seconds):
    assert backoff.parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["6 hours", "-1", -5, "1.5h", "h", "", None, True, "6y", "PT6H"])
def test_a_duration_that_is_not_one_names_the_problem(value):
    with pytest.raises(NodefixError) as exc:
        backoff.parse_duration(value)
    assert "nodefix_reboot_backoff" in exc.value.msg


def test_within_the_backoff_a_reason_still_open_is_held_needing_a_person():
    d = backoff.decide(rebooted(2), [PENDING], NOW, SIX_HOURS, node="node-a")
    assert d["held"] and d["open_again"] == ["reboot.required"]
    (why,) = d["held_by"]
    assert why.startswith("rebooted at 2026-11-27T10:00:00Z for /var/run/reboot-required exists, still open: "
                          "needs a person (the reboot backoff of 6h holds another reboot for it until 2026-11-27T16:00:00Z")
    assert "kubectl annotate node node-a nodefix.k8s/last-reboot-" in why
    assert d["last"] == {"time": "2026-11-27T10:00:00Z", "run": "run-1", "boot_id": None, "earlier": [],
                         "reasons": [{"id": "reboot.required", "reason": "/var/run/reboot-required exists"}]}


def test_after_the_backoff_the_reboot_goes_on():
    d = backoff.decide(rebooted(6), [PENDING], NOW, SIX_HOURS)
    assert not d["held"] and d["held_by"] == [] and d["last"]["time"] == "2026-11-27T06:00:00Z"
    assert backoff.decide(rebooted(5.99), [PENDING], NOW, SIX_HOURS)["held"]


def test_a_reason_that_is_closed_does_not_hold_another():
    # rebooted for the pending-reboot flag (gone now); dying cgroups are a new reason
    d = backoff.decide(rebooted(1), [MEMCGS], NOW, SIX_HOURS)
    assert not d["held"] and d["open_again"] == []
    # both open now: the one that survived the reboot holds it
    d = backoff.decide(rebooted(1, (PENDING, MEMCGS)), [MEMCGS, PENDING], NOW, SIX_HOURS)
    assert d["held"] and d["open_again"] == ["reboot.required", "kernel.dying_memcgs"]
    assert "for /var/run/reboot-required exists; 5000 dying memory cgroups, still open" in d["held_by"][0]


def test_no_record_or_the_backoff_off_holds_nothing():
    assert not backoff.decide(None, [PENDING], NOW, SIX_HOURS)["held"]
    assert not backoff.decide({"other": "x"}, [PENDING], NOW, SIX_HOURS)["held"]
    assert not backoff.decide(rebooted(0), [PENDING], NOW, 0)["held"]
    assert not backoff.decide({backoff.ANNOTATION: "garbage"}, [PENDING], NOW, 0)["held"]


def test_a_reboot_recorded_in_the_future_counts_as_just_now():
    d = backoff.decide(rebooted(-1), [PENDING], NOW, SIX_HOURS)
    assert d["held"] and "later than this controller's clock: counted as just now" in d["held_by"][0]
    assert "until 2026-11-27T19:00:00Z" in d["held_by"][0]


@pytest.mark.parametrize("text, why", [
    ("garbage", "not JSON"),
    ("[]", "not a JSON object"),
    ("null", "not a JSON object"),
    ('{"time": "yesterday", "reasons": [{"id": "reboot.required"}]}', "its time \"yesterday\" is not a UTC time"),
    ('{"time": 1764244800, "reasons": [{"id": "reboot.required"}]}', "is not a UTC time"),
    ('{"reasons": [{"id": "reboot.required"}]}', "its time null is not a UTC time"),
    ('{"time": "2026-11-27T10:00:00Z"}', "its reasons are not a list"),
    ('{"time": "2026-11-27T10:00:00Z", "reasons": []}', "its reasons are not a list"),
    ('{"time": "2026-11-27T10:00:00Z", "reasons": ["reboot.required"]}', "its reasons are not a list"),
    ('{"time": "2026-11-27T10:00:00Z", "reasons": [{"id": 7}]}', "its reasons are not a list"),
    ("[" * 100000, "not JSON"),
])
def test_an_annotation_that_cannot_be_read_holds_the_reboot(text, why):
    d = backoff.decide({backoff.ANNOTATION: text}, [PENDING], NOW, SIX_HOURS, node="node-a")
    assert d["held"] and d["last"] is None
    assert d["held_by"][0].startswith("the nodefix.k8s/last-reboot annotation on node-a cannot be read (")
    assert why in d["held_by"][0] and "held, as if rebooted just now - needs a person" in d["held_by"][0]


def test_a_node_that_cannot_be_read_holds_the_reboot():
    d = backoff.decide(None, [PENDING], NOW, SIX_HOURS, node="node-a", read_error="reading Node node-a: timed out")
    assert d["held"] and "could not read node-a's nodefix.k8s/last-reboot annotation (reading Node node-a: timed out)" \
        in d["held_by"][0]


def test_the_record_is_bounded_and_reads_back():
    many = [{"id": "reboot.r%d" % i, "reason": "x" * 500} for i in range(30)]
    body = json.loads(backoff.record(NOW, "run-7", many))
    assert body["truncated"] and len(body["reasons"]) == 20 and all(len(r["reason"]) == 200 for r in body["reasons"])
    back = backoff.read_record(backoff.record(NOW, "run-7", [PENDING]))
    assert back == {"time": NOW, "run": "run-7", "boot_id": None, "earlier": [],
                    "reasons": [{"id": "reboot.required", "reason": "/var/run/reboot-required exists"}]}
    with pytest.raises(NodefixError):
        backoff.record(NOW, "run-7", [{"reason": "no id"}])


# -- the module ------------------------------------------------------------------------------------

class FakeNodes(object):
    """NodeAnnotations over a dict of Nodes; ``fail`` makes every call fail as the client does."""

    def __init__(self, nodes, fail=None, boots=None):
        self.nodes = nodes
        self.fail = fail
        self.patches = []
        self.boots = boots or {}   # node -> its status.nodeInfo.bootID (None: the Node reports none)

    def __call__(self, kubeconfig, context=None, timeout=10):
        self.timeout = timeout
        return self

    def read(self, node):
        if self.fail:
            raise NodefixError("reading Node %s: %s" % (node, self.fail))
        return dict(self.nodes[node]), self.boots.get(node)

    def patch(self, node, annotations):
        if self.fail:
            raise NodefixError("annotating Node %s: %s" % (node, self.fail))
        self.patches.append((node, annotations))
        self.nodes[node].update(annotations)


def params(**kw):
    return dict({"state": "check", "kubeconfig": "/k", "context": None, "node": "node-a", "reasons": [PENDING],
                 "backoff": "6h", "run_id": "run-9", "timeout": 10, "max_reboots": 2}, **kw)


def test_module_records_then_holds_the_next_reboot(monkeypatch):
    nodes = FakeNodes({"node-a": {}})
    monkeypatch.setattr(node_api, "NodeAnnotations", nodes)
    assert not module.check(params(), NOW)["held"]
    rec = module.record(params(state="record"), NOW, check_mode=False)
    assert rec["changed"] and nodes.patches == [("node-a", rec["annotation"])]
    later = module.check(params(), NOW + datetime.timedelta(hours=1))
    assert later["held"] and later["backoff_seconds"] == SIX_HOURS and nodes.timeout == 10
    assert later["held_by"][0].startswith("rebooted at 2026-11-27T12:00:00Z for /var/run/reboot-required exists")
    assert not module.check(params(backoff="30m"), NOW + datetime.timedelta(hours=1))["held"]


def test_module_in_check_mode_or_off_writes_nothing(monkeypatch):
    nodes = FakeNodes({"node-a": {}})
    monkeypatch.setattr(node_api, "NodeAnnotations", nodes)
    assert module.record(params(state="record"), NOW, check_mode=True)["changed"]
    off = module.record(params(state="record", backoff="0"), NOW, check_mode=False)
    assert not off["changed"] and off["annotation"] == {} and nodes.patches == []


@pytest.mark.parametrize("failure", ["MaxRetryError: Connection refused", "ReadTimeoutError: read timed out",
                                     "the API server answered 403 Forbidden"])
def test_module_holds_when_the_node_cannot_be_read_and_fails_a_record_it_cannot_write(monkeypatch, failure):
    monkeypatch.setattr(node_api, "NodeAnnotations", FakeNodes({"node-a": {}}, fail=failure))
    held = module.check(params(), NOW)
    assert held["held"] and failure in held["held_by"][0] and not held["changed"]
    with pytest.raises(NodefixError) as exc:
        module.record(params(state="record"), NOW, check_mode=False)
    assert failure in exc.value.msg


def test_module_refuses_a_bad_backoff_before_any_request(monkeypatch):
    nodes = FakeNodes({}, fail="must not be called")
    monkeypatch.setattr(node_api, "NodeAnnotations", nodes)
    with pytest.raises(NodefixError) as exc:
        module.check(params(backoff="6 hours"), NOW)
    assert "reboot backoff (nodefix_reboot_backoff) '6 hours' is not a duration" in exc.value.msg


# -- a recorded reboot that never happened (the run killed between the record and the reboot) ---------

BOOT_1, BOOT_2 = "7f0c1d2e-0000-4000-8000-000000000001", "7f0c1d2e-0000-4000-8000-000000000002"


def test_a_record_of_a_reboot_that_did_not_happen_does_not_hold_the_next():
    """Issue 53 (a known limit until now): the record is written before the node goes down, so a run killed in
    between - or a reboot command that never took the node down - left a 6 h hold on a reboot that did not happen.
    The record keeps the Node's bootID; the same bootID later means the same boot: not counted, and said so."""
    notes = {backoff.ANNOTATION: backoff.record(NOW - datetime.timedelta(hours=1), "run-1", [PENDING], BOOT_1)}
    same = backoff.decide(notes, [PENDING], NOW, SIX_HOURS, node="node-a", boot_id=BOOT_1)
    assert not same["held"] and same["last"]["boot_id"] == BOOT_1, same
    assert same["not_rebooted"].startswith("the reboot recorded at 2026-11-27T11:00:00Z (run run-1) did not happen")
    # a new boot: the reboot happened, the reason is open again - held as before
    new = backoff.decide(notes, [PENDING], NOW, SIX_HOURS, node="node-a", boot_id=BOOT_2)
    assert new["held"] and not new["not_rebooted"], new
    # the Node reports no boot, or the record has none (written before this field): counted as a reboot
    assert backoff.decide(notes, [PENDING], NOW, SIX_HOURS, boot_id=None)["held"]
    assert backoff.decide(rebooted(1), [PENDING], NOW, SIX_HOURS, boot_id=BOOT_1)["held"]


@pytest.mark.parametrize("boot", [7, "", ["x"], {"a": 1}])
def test_a_record_whose_boot_id_is_not_one_holds_the_reboot(boot):
    body = json.loads(backoff.record(NOW, "run-1", [PENDING]))
    body["bootID"] = boot
    held = backoff.decide({backoff.ANNOTATION: json.dumps(body)}, [PENDING], NOW, SIX_HOURS, boot_id=BOOT_1)
    assert held["held"] and "is not a boot ID" in held["held_by"][0], held


def test_module_records_the_boot_and_a_reboot_that_did_not_happen_is_not_counted(monkeypatch):
    nodes = FakeNodes({"node-a": {}}, boots={"node-a": BOOT_1})
    monkeypatch.setattr(node_api, "NodeAnnotations", nodes)
    rec = module.record(params(state="record"), NOW, check_mode=False)
    assert json.loads(rec["annotation"][backoff.ANNOTATION])["bootID"] == BOOT_1
    # killed before the reboot: the Node still reports BOOT_1
    later = module.check(params(), NOW + datetime.timedelta(minutes=30))
    assert not later["held"] and "did not happen" in later["not_rebooted"], later
    # the node did go down and came back (a new boot reported): held
    nodes.boots["node-a"] = BOOT_2
    assert module.check(params(), NOW + datetime.timedelta(minutes=30))["held"]


# -- issue 62, the rollout review: the backoff forgot every reboot but the last -------------------------


def test_two_reasons_taking_turns_are_held_by_the_reboots_kept_inside_the_backoff(monkeypatch):
    """Reboot 1 for the pending-reboot flag, reboot 2 (an hour later) for dying cgroups: the second record used to
    overwrite the first, so the flag coming back rebooted the node a third time. Every reboot inside the backoff is
    kept; the flag open again is held after reboot 1, and the bound holds the node whatever the reason."""
    nodes = FakeNodes({"node-a": {}}, boots={"node-a": BOOT_1})
    monkeypatch.setattr(node_api, "NodeAnnotations", nodes)
    module.record(params(state="record", reasons=[PENDING]), NOW, check_mode=False)
    nodes.boots["node-a"] = BOOT_2
    later = NOW + datetime.timedelta(hours=1)
    assert not module.check(params(reasons=[MEMCGS], max_reboots=0), later)["held"]   # a new reason goes on
    module.record(params(state="record", reasons=[MEMCGS]), later, check_mode=False)
    body = json.loads(nodes.nodes["node-a"][backoff.ANNOTATION])
    assert body["earlier"] == [{"time": "2026-11-27T12:00:00Z", "run": "run-9", "ids": ["reboot.required"],
                                "bootID": BOOT_1}]
    nodes.boots["node-a"] = "boot-3"
    again = module.check(params(reasons=[PENDING], max_reboots=0), later + datetime.timedelta(hours=1))
    assert again["held"] and again["open_again"] == ["reboot.required"], again
    assert again["held_by"][0].startswith("rebooted at 2026-11-27T12:00:00Z for reboot.required, still open")
    bound = module.check(params(reasons=[{"id": "reboot.other", "reason": "new"}]), later + datetime.timedelta(hours=1))
    assert bound["held"] and bound["held_by"][0].startswith(
        "rebooted 2 times within the reboot backoff of 6h (at 2026-11-27T12:00:00Z, 2026-11-27T13:00:00Z), whatever "
        "the reason: needs a person")


def test_reboots_outside_the_backoff_and_one_that_did_not_happen_are_not_kept():
    old = backoff.read_record(backoff.record(NOW - datetime.timedelta(hours=7), "run-0", [PENDING], BOOT_1))
    body = json.loads(backoff.record(NOW, "run-1", [MEMCGS], BOOT_2, last=old, backoff_seconds=SIX_HOURS))
    assert "earlier" not in body
    same_boot = backoff.read_record(backoff.record(NOW - datetime.timedelta(hours=1), "run-0", [PENDING], BOOT_2))
    body = json.loads(backoff.record(NOW, "run-1", [MEMCGS], BOOT_2, last=same_boot, backoff_seconds=SIX_HOURS))
    assert "earlier" not in body
    assert not backoff.decide({backoff.ANNOTATION: backoff.record(NOW - datetime.timedelta(hours=1), "r", [PENDING])},
                              [MEMCGS], NOW, SIX_HOURS)["held"]   # one reboot, another reason: below the bound


@pytest.mark.parametrize("earlier", ['"x"', '[{"time": "soon", "ids": ["a"]}]', '[{"time": "2026-11-27T10:00:00Z"}]'])
def test_earlier_reboots_that_cannot_be_read_hold_the_reboot(earlier):
    text = '{"time": "2026-11-27T10:00:00Z", "reasons": [{"id": "reboot.required"}], "earlier": %s}' % earlier
    assert backoff.decide({backoff.ANNOTATION: text}, [PENDING], NOW, SIX_HOURS)["held"]
