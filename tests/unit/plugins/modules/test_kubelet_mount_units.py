# SPDX-License-Identifier: GPL-3.0-or-later
"""Module tests for kubelet_mount_units: every command it runs, in order."""

import json
import os


from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cost as mount_units_cost
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import survey as mount_units_survey
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import systemd as mount_units_systemd
from ansible_collections.nodefix.k8s.plugins.modules import kubelet_mount_units

LIVE = "11111111-2222-3333-4444-555555555555"
DEAD = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
PODS = "/var/lib/kubelet/pods"
BINS = {"systemctl": "/usr/bin/systemctl", "crictl": "/usr/local/bin/crictl", "docker": "/usr/bin/docker"}
SC = "/usr/bin/systemctl"
CRICTL = "/usr/local/bin/crictl"

DEAD_MOUNT = mount_units_systemd.systemd_escape_path("%s/%s/volume-subpaths/cfg/app/0" % (PODS, DEAD)) + ".mount"
LIVE_MOUNT = mount_units_systemd.systemd_escape_path("%s/%s/volume-subpaths/cfg/app/0" % (PODS, LIVE)) + ".mount"
LISTING = "\n".join([
    "run-r%s.scope loaded active running Kubernetes transient mount for %s/%s/volume-subpaths/cfg/app/0"
    % ("a" * 32, PODS, DEAD),
    "run-u7.scope loaded active running Kubernetes transient mount for %s/%s/volume-subpaths/cfg/app/0" % (PODS, LIVE),
    "%s loaded active mounted %s/%s/volume-subpaths/cfg/app/0" % (DEAD_MOUNT, PODS, DEAD),
    "%s loaded active mounted %s/%s/volume-subpaths/cfg/app/0" % (LIVE_MOUNT, PODS, LIVE),
    "cron.service loaded active running Regular background program processing daemon",
]) + "\n"
AFTER = "\n".join(line for line in LISTING.splitlines() if DEAD not in line) + "\n"
PODS_JSON = json.dumps({"items": [{"id": "f" * 64, "metadata": {"name": "web-0", "uid": LIVE, "namespace": "default",
                                                                "attempt": 0}, "state": "SANDBOX_READY"}]})
PS_JSON = json.dumps({"containers": []})


def survey_commands():
    return [
        {"argv": [SC, "--version"], "out": "systemd 252 (252.39-1~deb12u2)\n"},
        {"argv": [SC, "list-units", "--all", "--plain", "--no-legend", "--full"], "out": LISTING},
        {"argv": [CRICTL, "pods", "-o", "json"], "out": PODS_JSON},
        {"argv": [CRICTL, "ps", "-a", "-o", "json"], "out": PS_JSON},
    ]


def test_absent_stops_dead_pod_units_only(run_module, tmp_path):
    commands = survey_commands() + [
        {"argv": [SC, "stop", "run-r%s.scope" % ("a" * 32), DEAD_MOUNT]},
        {"argv": [SC, "list-units", "--all", "--plain", "--no-legend", "--full"], "out": AFTER},
    ]
    result, failed, table = run_module(kubelet_mount_units, {"state": "absent", "root": str(tmp_path)},
                                       commands=commands, bins=BINS, diff=True)
    assert not failed, result
    assert result["changed"] is True
    assert (result["total"], result["orphaned"], result["stopped"], result["kept_live"], result["unattributable"]) == \
        (4, 2, 2, 2, 0)
    assert result["stopped_units"] == sorted(["run-r%s.scope" % ("a" * 32), DEAD_MOUNT])
    assert result["systemd"]["has_fix"] is True and result["systemd"]["version"] == 252
    assert result["diff"]["before"].count("\n") == 2 and result["diff"]["after"] == ""
    assert not table.expected


def test_absent_with_systemd_run_stops_the_scope_in_one_transaction(run_module, tmp_path):
    # the default stop_method on a node with systemd-run: the dead pod's scope in ONE transaction, its mount
    # unit (a "\x2d" in its name: never in a transaction) with systemctl stop; the live pod's units untouched
    bins = dict(BINS, **{"systemd-run": "/usr/bin/systemd-run", "true": "/usr/bin/true"})
    scope = "run-r%s.scope" % ("a" * 32)
    commands = survey_commands() + [
        {"argv": ["/usr/bin/systemd-run"]},
        {"argv": [SC, "stop", DEAD_MOUNT]},
        {"argv": [SC, "list-units", "--all", "--plain", "--no-legend", "--full"], "out": AFTER},
    ]
    result, failed, table = run_module(kubelet_mount_units, {"state": "absent", "root": str(tmp_path)},
                                       commands=commands, bins=bins)
    assert not failed, result
    assert not table.expected and result["stop_method"] == "transaction"
    assert (result["transactions"], result["stop_calls"], result["fallbacks"], result["stopped"]) == (1, 2, 0, 2)
    run = table.calls[4]
    assert "--property=Conflicts=shutdown.target %s" % scope in run and "--property=After=%s" % scope in run
    assert not any(LIVE_MOUNT in a or "run-u7.scope" in a for c in table.calls for a in c)
    assert result["estimate_basis"].startswith("systemd 252 curve, one transaction a batch")


def test_check_mode_runs_no_stop(run_module, tmp_path):
    result, failed, table = run_module(kubelet_mount_units, {"state": "absent", "root": str(tmp_path)},
                                       commands=survey_commands(), bins=BINS, check_mode=True)
    assert not failed
    assert result["changed"] is True and result["to_stop"] == 2 and result["stopped"] == 0
    assert result["to_stop_units"] == sorted(["run-r%s.scope" % ("a" * 32), DEAD_MOUNT])
    assert all(c[1] != "stop" for c in table.calls)


def test_query_is_default_and_changes_nothing(run_module, tmp_path):
    result, failed, table = run_module(kubelet_mount_units, {"root": str(tmp_path)}, commands=survey_commands(),
                                       bins=BINS)
    assert not failed and result["changed"] is False and result["state"] == "query" and result["to_stop"] == 2


def test_runtime_failure_fails_before_any_stop(run_module, tmp_path):
    commands = survey_commands()[:2] + [
        {"argv": [CRICTL, "pods", "-o", "json"], "rc": 1,
         "err": 'time="2026-01-01T00:00:00Z" level=fatal msg="listing pod sandboxes: rpc error: code = Unavailable"'},
    ]
    result, failed, table = run_module(kubelet_mount_units, {"state": "absent", "root": str(tmp_path)},
                                       commands=commands, bins=BINS)
    assert failed and result["changed"] is False
    assert "nothing stopped" in result["msg"] and result["rc"] == 1 and "Unavailable" in result["stderr"]
    assert all(c[1] != "stop" for c in table.calls)


def test_runtime_endpoint_and_batches(run_module, tmp_path):
    commands = [
        {"argv": [SC, "--version"], "out": "systemd 252\n"},
        {"argv": [SC, "list-units"], "out": LISTING},
        {"argv": [CRICTL, "--runtime-endpoint", "unix:///run/crio/crio.sock", "pods", "-o", "json"], "out": PODS_JSON},
        {"argv": [CRICTL, "--runtime-endpoint", "unix:///run/crio/crio.sock", "ps", "-a", "-o", "json"],
         "out": PS_JSON},
        {"argv": [SC, "stop", "run-r%s.scope" % ("a" * 32)]},
        {"argv": [SC, "stop", DEAD_MOUNT]},
        {"argv": [SC, "list-units"], "out": AFTER},
    ]
    result, failed, table = run_module(kubelet_mount_units, {
        "state": "absent", "root": str(tmp_path), "batch_size": 1,
        "runtime_endpoint": "unix:///run/crio/crio.sock"}, commands=commands, bins=BINS)
    assert not failed and result["stop_calls"] == 2 and not table.expected


def test_stop_that_leaves_units_up_fails(run_module, tmp_path):
    commands = survey_commands() + [
        {"argv": [SC, "stop"], "rc": 1, "err": "Job for %s failed.\n" % DEAD_MOUNT},
        {"argv": [SC, "list-units"], "out": LISTING},
    ]
    result, failed, table = run_module(kubelet_mount_units, {"state": "absent", "root": str(tmp_path)},
                                       commands=commands, bins=BINS)
    assert failed and "still active" in result["msg"]
    assert result["still_active"] == 2


def test_list_source_needs_no_runtime(run_module, tmp_path):
    commands = [
        {"argv": [SC, "--version"], "out": "systemd 229\n"},
        {"argv": [SC, "list-units"], "out": LISTING},
    ]
    result, failed, table = run_module(kubelet_mount_units, {
        "state": "query", "root": str(tmp_path), "pod_source": "list", "live_pod_uids": [LIVE, DEAD]},
        commands=commands, bins={"systemctl": SC})
    assert not failed and result["orphaned"] == 0 and result["kept_live"] == 4
    assert result["systemd"]["has_fix"] is False


def test_bad_live_uid_is_rejected(run_module, tmp_path):
    result, failed, table = run_module(kubelet_mount_units, {
        "root": str(tmp_path), "pod_source": "list", "live_pod_uids": ["web-0"]}, commands=[], bins=BINS)
    assert failed and "not pod UIDs" in result["msg"] and table.calls == []


def test_budget_stops_what_fits_and_a_second_run_finishes(run_module, tmp_path):
    scope = "run-r%s.scope" % ("a" * 32)
    half = "\n".join(line for line in LISTING.splitlines() if not line.startswith(scope)) + "\n"
    first = survey_commands() + [
        {"argv": [SC, "stop", scope]},
        # the budget is spent after the first batch: the second is left, not attempted
        {"argv": [SC, "list-units", "--all", "--plain", "--no-legend", "--full"], "out": half},
    ]
    args = {"state": "absent", "root": str(tmp_path), "batch_size": 1, "max_seconds": 0.000001}
    result, failed, table = run_module(kubelet_mount_units, args, commands=first, bins=BINS)
    assert not failed, result
    assert (result["stopped"], result["left"], result["stop_calls"]) == (1, 1, 1)
    assert result["left_units"] == [DEAD_MOUNT] and result["changed"] is True
    assert not table.expected
    # the live pod's units were never touched: no stop names them
    assert not [c for c in table.calls if c[:2] == [SC, "stop"] and any(LIVE in a or "run-u7" in a for a in c)]
    second = [
        {"argv": [SC, "--version"], "out": "systemd 252\n"},
        {"argv": [SC, "list-units", "--all", "--plain", "--no-legend", "--full"], "out": half},
        {"argv": [CRICTL, "pods", "-o", "json"], "out": PODS_JSON},
        {"argv": [CRICTL, "ps", "-a", "-o", "json"], "out": PS_JSON},
        {"argv": [SC, "stop", DEAD_MOUNT]},
        {"argv": [SC, "list-units", "--all", "--plain", "--no-legend", "--full"], "out": AFTER},
    ]
    result, failed, table = run_module(kubelet_mount_units, args, commands=second, bins=BINS)
    assert not failed and (result["stopped"], result["left"]) == (1, 0) and not table.expected


CURVES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "benchmarks", "mount_units", "curve.json")


def measured_runs():
    with open(CURVES) as fh:
        return json.load(fh)["runs"]


def test_estimate_follows_the_measured_curves(run_module, tmp_path):
    # benchmarks/mount_units/curve.json: every measured version has its curve for each stop method, and the
    # model predicts each run's whole stop (its batches, plus the module's overhead) within 30 %
    runs = [r for r in measured_runs() if r["order"] == "forward" and len(r["points"]) >= 5]
    assert set(r.get("method", "systemctl") for r in runs) == set(mount_units_survey.STOP_METHODS)
    for r in runs:
        version, method = int(r["systemd"].split()[1]), r.get("method", "systemctl")
        assert mount_units_cost.cost_version(version, method) == version, \
            "systemd %d measured (%s) but not in its cost table" % (version, method)
        loaded = r["points"][0]["loaded"]
        est = mount_units_cost.estimate_seconds(loaded, r["n"], version, method)
        want = r["stop_seconds"] * mount_units_cost.MODULE_OVERHEAD
        assert abs(est - want) / want < 0.30, (version, method, est, want)
    # the acceptance check: at 5,000 leaked units the check-mode estimate against the module's measured cleanup
    # (runs whose recorded estimate is what the current model computes for their node: the model they checked)
    checked = [r["accuracy"] for r in measured_runs() if r.get("accuracy") and r["accuracy"]["estimate_seconds"]
               == mount_units_cost.estimate_seconds(r["accuracy"]["units_total"], r["accuracy"]["to_stop"],
                                                    int(r["systemd"].split()[1]), r.get("method", "systemctl"))]
    assert set(r.get("method", "systemctl") for r in measured_runs() if r.get("accuracy") in checked) == \
        set(mount_units_survey.STOP_METHODS), "an accuracy run made with the current model for each method"
    for acc in checked:
        assert acc["n"] == 5000 and acc["stopped"] == acc["to_stop"] >= 5000
        assert abs(acc["estimate_seconds"] - acc["module_wall_seconds"]) / acc["module_wall_seconds"] <= 0.30, acc  # not-timed: recorded runs
    # it grows faster than linearly: the incident's 131,072 units take far longer than 13 x 10,000
    assert mount_units_cost.estimate_seconds(131072, 131072, 252) > 13 * mount_units_cost.estimate_seconds(10000, 10000, 252)
    assert mount_units_cost.estimate_seconds(5000, 0) == 0.0
    result, failed, _table = run_module(kubelet_mount_units, {"state": "absent", "root": str(tmp_path)},
                                        commands=survey_commands(), bins=BINS, check_mode=True)
    assert not failed and result["estimate_seconds"] == mount_units_cost.estimate_seconds(5, 2, 252) and result["to_stop"] == 2
    assert result["estimate_basis"].startswith("systemd 252 curve")


def test_reboot_recommended_only_above_the_threshold(run_module, tmp_path):
    # the module reports, never reboots; the detector's cleanup_slow and the module share the decision
    dead = ["run-u%d.scope loaded active running Kubernetes transient mount for %s/%s/volume-subpaths/cfg/app/%d"
            % (100 + i, PODS, DEAD, i) for i in range(800)]
    commands = survey_commands()
    commands[1] = dict(commands[1], out=LISTING + "\n".join(dead) + "\n")
    args = {"state": "query", "root": str(tmp_path)}
    est = mount_units_cost.estimate_seconds(len(dead) + 5, len(dead) + 2)
    assert est > 1
    for over, want in ((est / 2, True), (est * 2, False), (0, False)):
        result, failed, table = run_module(kubelet_mount_units, dict(args, reboot_over_seconds=over),
                                           commands=[dict(c) for c in commands], bins=BINS)
        assert not failed, result
        assert result["estimate_seconds"] == est and result["to_stop"] == len(dead) + 2
        assert result["reboot_recommended"] is want, over
        assert result["reboot_recommended"] is mount_units_cost.reboot_faster(result["estimate_seconds"], over)
        # query: nothing stopped, whatever the verdict
        assert not [c for c in table.calls if c[:2] == [SC, "stop"]]


def test_each_node_is_estimated_on_the_nearest_measured_curve():
    measured = sorted(mount_units_cost.STOP_COST_MS)
    for v in measured:
        assert mount_units_cost.cost_version(v) == v
        assert mount_units_cost.estimate_basis(v).startswith("systemd %d curve" % v) and "nearest" not in mount_units_cost.estimate_basis(v)
        a, b, c = mount_units_cost.STOP_COST_MS[v]
        # k of N loaded units: k times the average of A + B*L + C*L^2 over L from N down to N-k
        per_unit = a + b * (8000 - 2000) + c * (8000 ** 2 - 8000 * 4000 + 4000 ** 2 / 3.0)
        assert mount_units_cost.estimate_seconds(8000, 4000, v) == round(4000 * max(mount_units_cost.MIN_STOP_MS, per_unit) / 1000.0
                                                                         * mount_units_cost.MODULE_OVERHEAD, 2)
        # never free, never negative, at any load up to systemd's unit limit
        assert all(mount_units_cost.estimate_seconds(n, 100, v) > 0 for n in (100, 1000, 50000, 131072))
    assert mount_units_cost.cost_version(None) == mount_units_cost.DEFAULT_COST_VERSION and "unknown" in mount_units_cost.estimate_basis(None)
    assert mount_units_cost.cost_version(measured[0] - 20) == measured[0] and mount_units_cost.cost_version(measured[-1] + 20) == measured[-1]
    assert "nearest measured to this node's systemd %d" % (measured[-1] + 20) in mount_units_cost.estimate_basis(measured[-1] + 20)
