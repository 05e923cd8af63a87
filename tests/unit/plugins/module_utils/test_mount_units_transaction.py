# SPDX-License-Identifier: GPL-3.0-or-later
"""stop_method=transaction: each batch of orphans stopped in ONE systemd transaction (_mount_units.transaction),
against the fake node's ``systemd-run`` double (test_mount_units_fakes.py; the real systemd 247/252 is the
molecule mount_units scenario, the lab's lookalike mount included)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cleanup as mount_units_cleanup
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cost as mount_units_cost
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import errors as mount_units_errors
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import survey as mount_units_survey
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import systemd as mount_units_systemd
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import transaction
from test_mount_units_fakes import FakeNode, mount, other, scope, subpath

LIVE = "11111111-2222-3333-4444-555555555555"
DEAD = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def _run(node, tmp_path, state="absent", check_mode=False, **opts):
    opts.setdefault("process_guard", False)
    return mount_units_cleanup.run(node, root=str(tmp_path), state=state, check_mode=check_mode, **opts)


def _lookalike_node():
    """A dead pod's mount unit (``\\x2d`` in its name) and a loaded unit whose name is that one's with the
    backslashes dropped: what a transaction that lost the escaping would stop instead."""
    dead = mount(subpath(DEAD))
    lookalike = dead["unit"].replace("\\", "")
    assert lookalike != dead["unit"] and "\\x2d" in dead["unit"]
    units = [dead, scope("run-r%032x.scope" % 1, subpath(DEAD, idx=1)), scope("run-u7.scope", subpath(LIVE)),
             other(lookalike, "a mount that is not kubelet's", sub="mounted")]
    return FakeNode(units, pods=[{"uid": LIVE}]), dead["unit"], lookalike


def transactions(node):
    return [c for c in node.calls if c[0].endswith("/systemd-run")]


def test_a_transaction_stops_exactly_the_listed_names(tmp_path):
    node, dead, lookalike = _lookalike_node()
    result = _run(node, tmp_path)
    assert not result["failed"] and result["stop_method"] == "transaction"
    # the scope in one transaction; the mount unit (a "\x2d" in its name) with systemctl stop
    assert result["transactions"] == 1 and result["stop_calls"] == 2 and result["fallbacks"] == 0
    calls = transactions(node)
    assert len(calls) == 1 and node.count("stop") == 2
    props = [a[len("--property="):].split("=", 1) for a in calls[0] if a.startswith("--property=")]
    assert props == [["DefaultDependencies", "no"], ["Conflicts", "shutdown.target run-r%032x.scope" % 1],
                     ["After", "run-r%032x.scope" % 1]]
    stops = [c for c in node.calls if c[1] == "stop"]
    assert len(stops) == 1 and stops[0][2:] == [dead]
    assert node.touched() == {dead, "run-r%032x.scope" % 1}
    assert dead not in node.names() and lookalike in node.names() and "run-u7.scope" in node.names()
    assert sorted(result["stopped_units"]) == sorted([dead, "run-r%032x.scope" % 1])


def test_a_backslash_in_a_transaction_would_stop_the_lookalike(tmp_path, monkeypatch):
    # why names with a backslash stay out: systemd-run reads \x2d as x2d and the transaction stops the
    # lookalike instead (the fake unquotes as systemd-run does); the check above would catch it
    monkeypatch.setattr(transaction, "eligible", lambda name: True)
    node, dead, lookalike = _lookalike_node()
    result = _run(node, tmp_path)
    assert lookalike not in node.names() and dead in node.names()
    assert result["failed"] and result["still_active_units"] == [dead]


def test_a_refused_transaction_sends_the_rest_of_the_run_to_systemctl_stop(tmp_path):
    scopes = ["run-r%032x.scope" % i for i in range(3)]
    node = FakeNode([scope(n, subpath(DEAD, idx=i)) for i, n in enumerate(scopes)], pods=[{"uid": LIVE}],
                    refuse_transactions=True)
    result = _run(node, tmp_path, batch_size=1)
    assert not result["failed"] and result["stopped"] == 3 and result["fallbacks"] == 1 and result["transactions"] == 0
    # one refused transaction, then its batch and the two others each one systemctl stop; no second transaction
    assert len(transactions(node)) == 1 and [c[2:] for c in node.calls if c[1] == "stop"] == [[n] for n in scopes]
    assert result["stop_calls"] == 4 and not set(scopes) & node.names()
    refused = [e for e in result["errors"] if e["cmd"].startswith("systemd-run")]
    assert len(refused) == 1 and refused[0]["ignored"] is True and "destructive" in refused[0]["stderr"]


def test_a_transaction_killed_after_its_stops_is_re_read_not_repeated(tmp_path):
    # rc 124: not a refusal - the stops may be queued or done; the batch is re-read and only what is still
    # up goes to systemctl stop (here nothing: no "not loaded" errors), the error is not marked ignored
    node, dead, lookalike = _lookalike_node()
    node.transaction_dies = True
    result = _run(node, tmp_path)
    assert not result["failed"] and result["fallbacks"] == 1
    stops = [c[2:] for c in node.calls if c[1] == "stop"]
    assert stops == [[dead]]          # the mount unit's own batch; the scope's was not stopped twice
    died = [e for e in result["errors"] if e["cmd"].startswith("systemd-run")]
    assert len(died) == 1 and died[0]["ignored"] is False and died[0]["rc"] == 124
    assert [c[1] for c in node.calls].count("list-units") == 3   # survey, the batch's re-read, the final one
    assert lookalike in node.names() and result["stopped"] == 2


@pytest.mark.parametrize("version", [219, 235, None])
def test_an_old_or_unknown_systemd_never_gets_a_transaction(tmp_path, version):
    node, dead, _lookalike = _lookalike_node()
    node.version = version or 252
    if version is None:
        node.fail["systemctl --version"] = (1, "", "no version\n")
    check = _run(node, tmp_path, check_mode=True)
    result = _run(node, tmp_path)
    assert check["stop_method"] == result["stop_method"] == "systemctl" and not transactions(node)
    assert result["fallbacks"] == 0 and not result["errors"] and dead not in node.names()


def test_a_name_no_transaction_may_carry_goes_to_systemctl_stop(tmp_path):
    # a mount unit listed with a raw "%" (systemd itself escapes it as \x25): not put in a transaction
    path = subpath(DEAD) + "%"
    odd = mount_units_systemd.systemd_escape_path(path).replace("\\x25", "%") + ".mount"
    node = FakeNode([mount(path, name=odd), scope("run-u9.scope", subpath(DEAD, idx=1))], pods=[{"uid": LIVE}])
    result = _run(node, tmp_path, pod_source="list")
    assert result["transactions"] == 1 and result["fallbacks"] == 0
    assert [c[2:] for c in node.calls if c[1] == "stop"] == [[odd]]
    for name in (odd, "a'b.scope", "", "x.service", "getty@tty1.scope", r"var-lib-kubelet-pods-a\x2db.mount",
                 "-.mount" + "x" * 250):
        assert not transaction.eligible(name), name
    assert transaction.eligible("run-r%032x.scope" % 5) and transaction.eligible("run-u42.scope")
    with pytest.raises(ValueError):
        transaction.argv(("/usr/bin/systemd-run", "/usr/bin/true"), ["run-u1.scope", odd], "1")


@pytest.mark.parametrize("missing", ["systemd-run", "true"])
def test_without_systemd_run_each_batch_is_one_systemctl_stop(tmp_path, missing):
    node, dead, _lookalike = _lookalike_node()
    node.missing.add(missing)
    check = _run(node, tmp_path, check_mode=True)
    result = _run(node, tmp_path)
    assert check["stop_method"] == result["stop_method"] == "systemctl" and not transactions(node)
    assert result["stop_calls"] == 1 and dead not in node.names()
    # the estimate follows the method that will run
    assert "one transaction" not in check["estimate_basis"]
    assert check["estimate_seconds"] == mount_units_cost.estimate_seconds(check["systemd"]["units_total"], 2, 252)


def test_check_mode_and_query_start_no_transaction(tmp_path):
    node, _dead, _lookalike = _lookalike_node()
    before = node.names()
    for kw in ({"check_mode": True}, {"state": "query"}):
        result = _run(node, tmp_path, **kw)
        assert result["stop_method"] == "transaction" and result["to_stop"] == 2
        assert "one transaction" in result["estimate_basis"]
    assert not transactions(node) and not node.touched() and node.names() == before


def test_stop_method_is_checked():
    with pytest.raises(mount_units_errors.MountUnitsError) as exc:
        mount_units_survey.normalize_options({"stop_method": "kill"})
    assert "stop_method must be one of transaction, systemctl" in exc.value.msg


def test_the_transaction_waits_for_every_stop_and_leaves_no_unit_behind():
    argv = transaction.argv(("/usr/bin/systemd-run", "/usr/bin/true"), ["a.scope", "b.mount"], "7-1-0")
    assert argv[0] == "/usr/bin/systemd-run" and argv[-1] == "/usr/bin/true"
    # ONE transaction (Conflicts=), started only after every stop (After=), refused on a node shutting down,
    # nothing else pulled in, collected whatever its result, a unique name, waited for (no --no-block)
    assert "--property=Conflicts=shutdown.target a.scope b.mount" in argv and "--property=After=a.scope b.mount" in argv
    assert "--property=DefaultDependencies=no" in argv
    assert "--collect" in argv and "--no-ask-password" in argv and "--no-block" not in argv
    assert "--unit=nodefix-mount-units-stop-7-1-0.service" in argv and "--service-type=oneshot" in argv
    assert transaction.refused("Failed to start transient service unit: Transaction for x is destructive")
    assert not transaction.refused("") and not transaction.refused("killed after 30.0 s")


def test_a_bus_timeout_is_not_a_refusal_the_batch_is_re_read(tmp_path):
    # systemd-run died before systemd queued anything (a bus timeout carries the same "Failed to start
    # transient service unit:" prefix as a refusal): re-read, and what is still up stopped with systemctl
    node, dead, lookalike = _lookalike_node()
    node.fail["systemd-run"] = (1, "", "Failed to start transient service unit: Connection timed out\n")
    result = _run(node, tmp_path)
    scope_name = "run-r%032x.scope" % 1
    assert [c[2:] for c in node.calls if c[1] == "stop"] == [[scope_name], [dead]]
    died = [e for e in result["errors"] if e["cmd"].startswith("systemd-run")]
    assert len(died) == 1 and died[0]["ignored"] is False
    assert not result["failed"] and result["stopped"] == 2 and lookalike in node.names()
    assert not transaction.refused("Failed to start transient service unit: Connection timed out")


def test_a_failed_re_read_stops_the_whole_batch_again_and_says_so(tmp_path):
    node, dead, _lookalike = _lookalike_node()
    node.fail["systemd-run"] = (1, "", "Failed to start transient service unit: Connection reset by peer\n")
    calls = {"n": 0}
    listing = node._systemctl_list_units   # pylint: disable=protected-access

    def flaky(args):
        calls["n"] += 1
        return (1, "", "Failed to connect to bus\n") if calls["n"] == 2 else listing(args)
    node._systemctl_list_units = flaky   # pylint: disable=protected-access
    result = _run(node, tmp_path)
    assert [c[2:] for c in node.calls if c[1] == "stop"] == [["run-r%032x.scope" % 1], [dead]]
    assert any(e["cmd"].startswith("systemctl list-units (the failed") for e in result["errors"])
    assert not result["failed"] and result["stopped"] == 2


def test_an_unread_after_state_is_not_reported_stopped(tmp_path):
    node, _dead, _lookalike = _lookalike_node()
    node.fail["systemctl list-units"] = (1, "", "Failed to connect to bus\n")
    plan = mount_units_survey.survey(_lookalike_node()[0], root=str(tmp_path), process_guard=False)
    record = mount_units_cleanup.apply(node, plan)
    assert record["verified"] is False and record["stopped"] == [] and record["still_active"] == []


def test_a_command_the_runner_did_not_start_leaves_its_batch(tmp_path):
    # the timer's deadline (SubprocessRunner answers 124 "not run: ..." without starting anything): the
    # batch is not counted, not reported stopped, and it is in ``left`` for the next run
    node, dead, _lookalike = _lookalike_node()
    node.fail["systemd-run"] = (124, "", "not run: no time left before the deadline")
    node.fail["systemctl stop"] = (124, "", "not run: no time left before the deadline")
    result = _run(node, tmp_path)
    assert result["stop_calls"] == 0 and result["stopped"] == 0 and result["fallbacks"] == 0
    assert result["left"] == 2 and sorted(result["left_units"]) == sorted([dead, "run-r%032x.scope" % 1])
    assert dead in node.names()


def test_batches_fit_one_argv_string_each(tmp_path):
    names = ["run-r%032x.scope" % i for i in range(9000)] + ["var-lib-x\\x2dy-%d.mount" % i for i in range(3)]
    plan = {"options": {"batch_size": 100000}, "stop_tools": ("/usr/bin/systemd-run", "/usr/bin/true")}
    batches = list(mount_units_cleanup._batches(plan, names))   # pylint: disable=protected-access
    tx = [b for way, b in batches if way == "transaction"]
    assert sum(len(b) for b in tx) == 9000 and len(tx) > 1
    assert [b for way, b in batches if way == "systemctl"] == [names[9000:]]
    for b in tx:
        argv = transaction.argv(plan["stop_tools"], b, "1-2-3")
        assert max(len(a.encode()) for a in argv) < 131072               # one argv string (MAX_ARG_STRLEN)
        assert sum(len(a.encode()) + 9 for a in argv) <= mount_units_systemd.argv_budget()   # the whole argv
