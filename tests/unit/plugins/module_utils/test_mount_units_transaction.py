# SPDX-License-Identifier: GPL-3.0-or-later
"""stop_method=transaction: each batch of orphans stopped in ONE systemd transaction (_mount_units.transaction),
against the fake node's ``systemd-run`` double (test_mount_units_fakes.py; the real systemd 247/252 is the
molecule mount_units scenario, the lab's lookalike mount included)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cleanup as mount_units_cleanup
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import detect as mount_units_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import systemd as mount_units_systemd
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import transaction
from test_mount_units_fakes import FakeNode, mount, other, scope, subpath, unquote_words

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
    assert result["transactions"] == result["stop_calls"] == 1 and result["fallbacks"] == 0
    calls = transactions(node)
    assert len(calls) == 1 and node.count("stop") == 1
    # both lists read back (as systemd-run splits them) to exactly the orphans' names
    props = dict(a[len("--property="):].split("=", 1) for a in calls[0] if a.startswith("--property="))
    want = sorted([dead, "run-r%032x.scope" % 1])
    assert sorted(unquote_words(props["Conflicts"])) == want and sorted(unquote_words(props["After"])) == want
    assert dead not in node.names() and lookalike in node.names() and "run-u7.scope" in node.names()
    assert sorted(result["stopped_units"]) == want


def test_the_escaping_is_what_keeps_the_lookalike(tmp_path, monkeypatch):
    # the same run with the backslashes passed as they are: systemd-run reads \x2d as x2d and the
    # transaction stops the lookalike instead - the check above would catch a lost escaping
    monkeypatch.setattr(transaction, "quoted", lambda name: name)
    node, dead, lookalike = _lookalike_node()
    result = _run(node, tmp_path)
    assert lookalike not in node.names() and dead in node.names()
    assert result["failed"] and result["still_active_units"] == [dead]


def test_a_refused_transaction_goes_to_systemctl_stop(tmp_path):
    node, dead, lookalike = _lookalike_node()
    node.refuse_transactions = True
    result = _run(node, tmp_path)
    assert not result["failed"] and result["stopped"] == 2 and result["fallbacks"] == 1 and result["transactions"] == 0
    assert result["stop_calls"] == 2
    stops = [c for c in node.calls if c[1] == "stop"]
    assert len(transactions(node)) == 1 and len(stops) == 1
    assert sorted(stops[0][2:]) == sorted([dead, "run-r%032x.scope" % 1])
    refused = [e for e in result["errors"] if e["cmd"].startswith("systemd-run")]
    assert len(refused) == 1 and refused[0]["ignored"] is True and "destructive" in refused[0]["stderr"]
    assert dead not in node.names() and lookalike in node.names()


def test_a_name_no_unit_can_have_sends_its_batch_to_systemctl_stop(tmp_path):
    # a mount unit listed with a raw "%" (systemd itself escapes it as \x25): not put in a transaction
    path = subpath(DEAD) + "%"
    odd = mount_units_systemd.systemd_escape_path(path).replace("\\x25", "%") + ".mount"
    node = FakeNode([mount(path, name=odd), scope("run-u9.scope", subpath(DEAD, idx=1))], pods=[{"uid": LIVE}])
    result = _run(node, tmp_path, pod_source="list")
    assert not transactions(node) and result["transactions"] == 0 and result["fallbacks"] == 0
    stops = [c for c in node.calls if c[1] == "stop"]
    assert len(stops) == 1 and sorted(stops[0][2:]) == sorted([odd, "run-u9.scope"])
    assert not transaction.eligible(odd) and not transaction.eligible("a'b.scope") and not transaction.eligible("")
    assert transaction.eligible(r"var-lib-kubelet-pods-a\x2db.mount") and transaction.eligible("getty@tty1.service")


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
    assert check["estimate_seconds"] == mount_units_detect.estimate_seconds(check["systemd"]["units_total"], 2, 252)


def test_check_mode_and_query_start_no_transaction(tmp_path):
    node, _dead, _lookalike = _lookalike_node()
    before = node.names()
    for kw in ({"check_mode": True}, {"state": "query"}):
        result = _run(node, tmp_path, **kw)
        assert result["stop_method"] == "transaction" and result["to_stop"] == 2
        assert "one transaction" in result["estimate_basis"]
    assert not transactions(node) and node.names() == before


def test_stop_method_is_checked():
    with pytest.raises(mount_units_detect.MountUnitsError) as exc:
        mount_units_detect.normalize_options({"stop_method": "kill"})
    assert "stop_method must be one of transaction, systemctl" in exc.value.msg


def test_the_transaction_waits_for_every_stop_and_leaves_no_unit_behind():
    argv = transaction.argv(("/usr/bin/systemd-run", "/usr/bin/true"), ["a.scope", r"b\x2dc.mount"], "7-1-0")
    assert argv[0] == "/usr/bin/systemd-run" and argv[-1] == "/usr/bin/true"
    # ONE transaction (Conflicts=), started only after every stop (After=), collected whatever its result,
    # a unique name, waited for (no --no-block), no password prompt in a play
    assert "--property=Conflicts=a.scope b\\\\x2dc.mount" in argv and "--property=After=a.scope b\\\\x2dc.mount" in argv
    assert "--collect" in argv and "--no-ask-password" in argv and "--no-block" not in argv
    assert "--unit=nodefix-mount-units-stop-7-1-0.service" in argv and "--service-type=oneshot" in argv


def test_batches_fit_one_argv_string_each(tmp_path):
    # names with many escapes (each backslash doubled in the list): every list stays under the kernel's
    # 131072 bytes a string however large batch_size is
    names = [mount(subpath(DEAD, vol="v-%d-x-y-z" % i, idx=i))["unit"] for i in range(6000)]
    plan = {"options": {"batch_size": 100000}, "stop_tools": ("/usr/bin/systemd-run", "/usr/bin/true")}
    batches = list(mount_units_cleanup._batches(plan, names))   # pylint: disable=protected-access
    assert sum(len(b) for b in batches) == 6000 and len(batches) > 1
    for b in batches:
        text = " ".join(transaction.quoted(n) for n in b)
        assert len(("--property=Conflicts=" + text).encode()) < 131072
        assert 2 * sum(transaction.weight(n) for n in b) <= mount_units_systemd.argv_budget()
