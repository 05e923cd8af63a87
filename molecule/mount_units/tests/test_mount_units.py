# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for the mount_units scenario, on the real units of the lab."""

import json
import time

import pytest

STATE = "/var/lib/nodefix-lab/mount_units"
TIMER = "nodefix-mount-units"
NEW_DEAD = "2d7c5e4f-3a61-4c8d-9e0f-b1c2d3e4f5a6"
NEW_LIVE = "3e8d6f50-4b72-4d9e-8f10-c2d3e4f5a6b7"


def expect(host):
    return json.loads(host.file(STATE + "/expect.json").content_string)


def units(host):
    out = host.check_output("systemctl list-units --all --plain --no-legend --full")
    return dict((line.split()[0], line.split()[2]) for line in out.splitlines() if line.strip())


def test_dead_pods_units_are_gone(host):
    now = units(host)
    assert expect(host)["dead"], "the breaker created no dead units"
    for name in expect(host)["dead"]:
        assert name not in now


@pytest.mark.parametrize("group", ["live", "starting", "unattributable", "unrelated"])
def test_other_units_untouched(host, group):
    now = units(host)
    assert expect(host)[group]
    for name in expect(host)[group]:
        assert now.get(name) == "active", name


def test_dead_bind_mounts_unmounted_live_ones_kept(host):
    mountinfo = host.file("/proc/self/mountinfo").content_string
    spec = json.loads(host.file(STATE + "/spec.json").content_string)
    for m in spec["mounts"]:
        mounted = (" %s " % m["target"]) in mountinfo
        assert mounted == (m["group"] != "dead"), m


def test_timer_installed_and_enabled(host):
    timer = host.service(TIMER + ".timer")
    assert timer.is_enabled and timer.is_running
    unit = host.file("/etc/systemd/system/%s.service" % TIMER).content_string
    assert "--config /etc/nodefix-k8s/mount-units.json" in unit
    cfg = json.loads(host.file("/etc/nodefix-k8s/mount-units.json").content_string)
    assert cfg["state"] == "absent" and cfg["pod_source"] == "crictl"
    # a time limit: the cleanup's budget (its commands killed there) and systemd's hard stop behind it
    assert cfg["max_seconds"] == 540 and "TimeoutStartSec=600" in unit
    shipped = host.file("/usr/local/lib/nodefix-k8s/ansible_collections/nodefix/k8s/plugins/module_utils/"
                        "_mount_units/cleanup.py")
    assert shipped.exists and "def cli(" in shipped.content_string


def _leak(host, name, uids):
    """Leak one more scope + bind mount per pod with the lab's spawner."""
    spec = {"parallel": 2, "timeout": 120, "scopes": [], "mounts": []}
    for i, (uid, group) in enumerate(uids):
        path = "/var/lib/kubelet/pods/%s/volume-subpaths/extra/app/%d" % (uid, i)
        spec["scopes"].append({"unit": "run-u%d" % (9100 + i + 10 * len(name)), "group": group,
                               "description": "Kubernetes transient mount for " + path})
        spec["mounts"].append({"target": path, "fstype": "bind", "source": "%s/src/%s-%d" % (STATE, name, i),
                               "group": group})
    host.check_output("printf '%%s' %s > %s/%s.json" % (_q(json.dumps(spec)), STATE, name))
    host.check_output("python3 %s/spawn.py %s/%s.json %s/%s.expect.json" % (STATE, STATE, name, STATE, name))
    return json.loads(host.file("%s/%s.expect.json" % (STATE, name)).content_string)


def _journal_mark(host):
    """The cursor of the journal's newest entry: what a run logs after it is read with --after-cursor."""
    out = host.check_output("journalctl -n 1 --show-cursor --no-pager -q -o cat")
    cursors = [line.split("-- cursor: ", 1)[1] for line in out.splitlines() if line.startswith("-- cursor: ")]
    assert cursors, "journalctl printed no cursor: %r" % out
    return cursors[-1]


def _run_log(host, mark, complete, seconds=20.0):
    """The service's log since `mark`. A oneshot's stdout reaches journald through a stream `systemctl start` does not
    wait for, so the lines may land after it returns: this run's lines are waited for until `complete(text)`, and an
    earlier run's lines are never read in their place."""
    deadline = time.monotonic() + seconds
    while True:
        log = host.check_output("journalctl -u %s.service --after-cursor=%s -o cat --no-pager" % (TIMER, _q(mark)))
        if complete(log) or time.monotonic() > deadline:
            return log
        time.sleep(0.5)


def _q(text):
    return "'" + text.replace("'", "'\\''") + "'"


def _set_double(host, **changes):
    state = json.loads(host.file("/etc/crictl-double/state.json").content_string)
    state.update(changes)
    host.check_output("printf '%%s' %s > /etc/crictl-double/state.json" % _q(json.dumps(state)))
    return state


def test_timer_service_runs_the_same_cleanup(host):
    state = json.loads(host.file("/etc/crictl-double/state.json").content_string)
    _set_double(host, pods=state["pods"] + [{"uid": NEW_LIVE, "name": "new-live"}])
    # the timer itself (every 10 minutes) must not take these units first: this run's count is checked
    host.check_output("systemctl stop %s.timer" % TIMER)
    try:
        leaked = _leak(host, "svc", [(NEW_DEAD, "dead"), (NEW_LIVE, "live")])
        mark = _journal_mark(host)
        cmd = host.run("systemctl start %s.service" % TIMER)
    finally:
        host.check_output("systemctl start %s.timer" % TIMER)
    assert cmd.rc == 0, cmd.stderr
    now = units(host)
    for name in leaked["dead"]:
        assert name not in now
    for name in leaked["live"] + expect(host)["live"] + expect(host)["unrelated"]:
        assert now.get(name) == "active", name
    log = _run_log(host, mark, lambda text: any(line.startswith("{") for line in text.splitlines()))
    result = json.loads([line for line in log.splitlines() if line.startswith("{")][-1])
    assert result["stopped"] == 2 and result["failed"] is False


def test_timer_service_stops_nothing_when_the_runtime_fails(host):
    leaked = _leak(host, "down", [(NEW_DEAD, "dead")])
    _set_double(host, fail=True)
    mark = _journal_mark(host)
    try:
        cmd = host.run("systemctl start %s.service" % TIMER)
    finally:
        _set_double(host, fail=False)
    assert cmd.rc != 0
    now = units(host)
    for name in leaked["dead"]:
        assert now.get(name) == "active", name
    log = _run_log(host, mark, lambda text: "crictl pods -o json failed" in text)
    assert "crictl pods -o json failed" in log
    # and once the runtime answers again, the timer's next run cleans them
    assert host.run("systemctl start %s.service" % TIMER).rc == 0
    now = units(host)
    for name in leaked["dead"]:
        assert name not in now
