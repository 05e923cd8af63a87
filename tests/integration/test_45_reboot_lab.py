# SPDX-License-Identifier: GPL-3.0-or-later
"""The mount-unit reboot path through ``playbooks/remediate.yml`` on lab nodes, with cordon, drain and
uncordon against lab/apiserver-double (a TEST DOUBLE of kube-apiserver: no Debian package ships one;
the real kubernetes.core modules talk to it).

Three Debian 12 systemd containers (podman ``--restart=always``: a reboot of their systemd brings them
back, as a machine's firmware would), each with the kubelet TEST DOUBLE as kubelet.service and REAL
leaked kubelet mount units (lab/break/mount_units.yml). One remediate run, all three in one batch,
with ``nodefix_mount_units_reboot`` and a threshold every cleanup exceeds:

- ``drained``: schedulable before -> cordoned, drained, rebooted, its units gone, the kubelet double
  active, uncordoned;
- ``cordoned``: cordoned by an operator before -> drained and rebooted the same way, but it stays
  cordoned;
- ``undrained``: ``nodefix_drain: false`` -> not rebooted: the report recommends the reboot with the
  estimate and the units of dead pods are stopped one by one (the live pods' units kept);
- ``blocked``: runs a pod the blocking selector (``reboot_blocking_pod_selectors``) selects -> the reboot
  role's gate holds it before anything is drained: not cordoned, not rebooted, the report says why, and
  the units are stopped one by one;
- ``window``: its reboot window (``reboot_window_days``) is closed today -> held the same way;
- ``hung``: does not come back from the reboot (podman ``--restart=no``: its systemd exits and the
  container stays down, as a machine hanging in its firmware or kernel would) -> after
  ``reboot_timeout`` the power-cycle hook (``reboot_power_cycle_command``: ``podman start``, run on
  the controller) brings it back; verified and uncordoned, and the report says it was power-cycled;
- ``down``: does not come back either, and has no power-cycle hook -> the run fails it and it KEEPS its
  slot of the lock (its own lock, ``reboot_lock_name``): no second node may go down beside it; the run
  says how a person gives the slot back.

The lock (``reboot_max_concurrent: 3``) gives ``drained``, ``cordoned`` and ``hung`` a slot each; all
are given back after the uncordon.

Then the pending-reboot path with kured's lock across parallel slices: ``drained`` and ``cordoned`` get
a ``/var/run/reboot-required`` and two remediate runs start at once, one slice each
(``nodefix_slice``), with ``nodefix_reboot``, ``reboot_max_concurrent: 1`` and a lock wait: both nodes
are rebooted and verified (the file gone after the boot), and the API double's request log shows the one
slot never held by both at once.
"""

import datetime
import json
import os
import socket
import subprocess

import pytest

from conftest import (ENV, ROOT, ZIPCODE_MOUNT, ApiServerDouble, assert_ok, lab_exclusive, podman, run_logged,
                      trail_entries)

pytestmark = pytest.mark.lab
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

IMAGE = "localhost/nodefix-debian12"
NODES = {"drained": "nodefix-rb-drained", "cordoned": "nodefix-rb-cordoned", "undrained": "nodefix-rb-undrained",
         "blocked": "nodefix-rb-blocked", "window": "nodefix-rb-window", "hung": "nodefix-rb-hung",
         "down": "nodefix-rb-down"}
STAYS_DOWN = (NODES["hung"], NODES["down"])  # podman --restart=no: a reboot leaves the container stopped
STATE = "/var/lib/nodefix-lab/mount_units/expect.json"
MARKER = "/run/nodefix-lab-boot-marker"
BOOT_TIME = "cut -d' ' -f22 /proc/1/stat"  # PID 1's start time: a container shares the host's boot_id
CONNECTION = {"ansible_connection": "nodefix_podman", "ansible_python_interpreter": "/usr/bin/python3",
              "ansible_remote_tmp": "/root/.ansible/tmp"}


def on_node(node, script):
    return podman("exec", node, "/bin/sh", "-c", script)


def node_state(node):
    """What the node has, read straight from it (not through the collection)."""
    units = on_node(node, "systemctl list-units --all --plain --no-legend --full")
    return {
        "boot": on_node(node, BOOT_TIME).strip(),
        "marker": on_node(node, "test -e %s && echo yes || echo no" % MARKER).strip() == "yes",
        "expect": json.loads(on_node(node, "cat %s" % STATE)),
        "loaded": set(line.split()[0] for line in units.splitlines() if line.strip()),
        "kubelet": on_node(node, "systemctl is-active kubelet || true").strip(),
    }


def inventory(path, kubeconfig):
    common = dict(CONNECTION, **{
        "nodefix_become": False,
        "nodefix_audit_checks": ["mount_units"],
        "nodefix_kubeconfig": kubeconfig, "nodefix_drain_timeout": 30,
        # every node is broken on purpose: over the storm breaker's threshold, proceed
        "nodefix_storm_override": True,
        # the same nodes are rebooted again on purpose, run after run (the slices, the held cases): no backoff
        "nodefix_reboot_backoff": 0,
        # the reboot path, with a threshold any cleanup exceeds
        "nodefix_mount_units_reboot": True, "nodefix_mount_units_reboot_over_seconds": 0.001,
        "mount_units_reboot_boot_time_command": BOOT_TIME, "mount_units_reboot_services": ["kubelet"],
        "mount_units_reboot_timeout": 300,
        # the reboot role (the one reboot path): two slots, a container's boot, the kubelet double
        "reboot_max_concurrent": 3, "reboot_boot_time_command": BOOT_TIME, "reboot_services": ["kubelet"],
        "reboot_timeout": 300, "reboot_blocking_pod_selectors": ["app=ceph-osd"],
    })
    hosts = dict((name, {}) for name in NODES.values())
    hosts[NODES["undrained"]] = {"nodefix_drain": False}
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%a").lower()
    hosts[NODES["window"]] = {"reboot_window_days": [d for d in DAYS if d != today]}
    # not back within 10 s (the container stays down): the hook starts it again
    hosts[NODES["hung"]] = {"mount_units_reboot_timeout": 10, "reboot_power_cycle_command": ["podman", "start", NODES["hung"]]}
    # not back within 10 s and no hook: it stays down, holding a slot of a lock of its own
    hosts[NODES["down"]] = {"mount_units_reboot_timeout": 10, "reboot_lock_name": "nodefix-reboot-down"}
    path.write_text(json.dumps({"all": {"vars": common, "hosts": hosts}}))
    return str(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the lab lock for the whole module (containers included): no other podman job in between
    with lab_exclusive():
        yield from _run(tmp_path_factory)


def _run(tmp_path_factory):
    work = tmp_path_factory.mktemp("reboot-lab")
    names = list(NODES.values())
    podman("rm", "-f", "-t", "0", *names, check=False)
    double = None
    try:
        for name in names:
            podman("run", "-d", "--name", name, "--hostname", name, "--privileged", "--systemd=always", *ZIPCODE_MOUNT,
                   "--restart=no" if name in STAYS_DOWN else "--restart=always", IMAGE, "/sbin/init")
        prepare_inv = work / "prepare.json"
        prepare_inv.write_text(json.dumps({"all": {"vars": CONNECTION, "hosts": dict((n, {}) for n in names)}}))
        rc, out = run_logged("reboot-lab-prepare", ["ansible-playbook", "-i", str(prepare_inv), os.path.join(
            ROOT, "tests", "integration", "playbooks", "reboot_prepare.yml")], timeout=900)
        assert_ok("reboot-lab-prepare", rc, out)
        before = dict((name, node_state(name)) for name in names)
        pods = []
        for key, name in NODES.items():
            pods.append({"namespace": "default", "name": "web-" + key, "node": name, "owner": "ReplicaSet"})
            pods.append({"namespace": "kube-system", "name": "proxy-" + key, "node": name, "owner": "DaemonSet"})
        pods.append({"namespace": "rook-ceph", "name": "rook-ceph-osd-0", "node": NODES["blocked"],
                     "owner": "ReplicaSet", "labels": {"app": "ceph-osd"}})
        double = ApiServerDouble(work, dict((name, {"unschedulable": key == "cordoned"})
                                            for key, name in NODES.items()), pods)
        reports = work / "reports"
        inv = inventory(work / "inventory.json", double.kubeconfig)
        rc, out = run_logged("reboot-lab-remediate", [
            "ansible-playbook", "-i", inv, "-e", "nodefix_serial=%d" % len(NODES),
            "-e", "nodefix_report_dir=%s" % reports, os.path.join(ROOT, "playbooks", "remediate.yml")], timeout=1800)
        down = podman("inspect", "-f", "{{.State.Running}}", NODES["down"]).strip()
        podman("start", NODES["down"])  # for the reading below and the phases after
        after = dict((name, node_state(name)) for name in names)
        with open(str(reports / "remediate" / "report.json")) as fh:
            report = json.load(fh)
        result = {"rc": rc, "out": out, "before": before, "after": after, "api": double.state(), "down": down,
                  "report": dict((n["host"], n) for n in report["nodes"])}
        result["slices"] = parallel_slices(work, double, inv)
        result["bad_input"] = bad_input(work, double, inv)
        yield result
    finally:
        if double is not None:
            double.stop()
        podman("rm", "-f", "-t", "0", *names, check=False)


def parallel_slices(work, double, inv):
    """Two remediate runs at once, one slice each, both nodes asking for a reboot, one slot."""
    pair = [NODES["drained"], NODES["cordoned"]]
    for name in pair:
        on_node(name, "printf '*** System restart required ***\\n' > /var/run/reboot-required; "
                      "echo linux-base > /var/run/reboot-required.pkgs; touch %s" % MARKER)
    before = dict((name, node_state(name)) for name in pair)
    seen = len(double.state()["log"])
    reports = work / "slices"
    procs = []
    for i, name in enumerate(pair):
        log = open(str(work / ("slice-%d.log" % i)), "w")
        argv = ["ansible-playbook", "-i", inv, "--limit", "%s,localhost" % name, "-e", "nodefix_slice=s%d" % i, "-e", "nodefix_rollout=lab-slices",
                "-e", "nodefix_reboot=true", "-e", "nodefix_mount_units_reboot=false",
                "-e", json.dumps({"nodefix_audit_checks": ["reboot"], "reboot_max_concurrent": 1,
                                  "reboot_lock_wait": 600, "reboot_lock_poll": 2}),
                "-e", "nodefix_report_dir=%s" % reports, os.path.join(ROOT, "playbooks", "remediate.yml")]
        procs.append((subprocess.Popen(argv, env=ENV, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT), log))
    rcs = []
    for proc, log in procs:
        rcs.append(proc.wait(timeout=1500))
        log.close()
    outs = [open(str(work / ("slice-%d.log" % i))).read() for i in range(2)]
    reports_by_host = {}
    for i in range(2):
        with open(str(reports / "slices" / ("s%d" % i) / "remediate" / "report.json")) as fh:
            for node in json.load(fh)["nodes"]:
                reports_by_host[node["host"]] = node
    return {"rcs": rcs, "outs": outs, "before": before, "after": dict((name, node_state(name)) for name in pair),
            "log": double.state()["log"][seen:], "report": reports_by_host}


def bad_input(work, double, inv):
    """A window that cannot be parsed, a Prometheus server that does not answer: remediate fails the node
    with the gate's words before anything is drained."""
    name = NODES["blocked"]
    on_node(name, "touch /var/run/reboot-required")
    out = {}
    for key, extra in (("window", {"reboot_window_start": "25:00"}),
                       ("prometheus", {"reboot_prometheus_url": "http://127.0.0.1:%d" % free_port()})):
        seen = len(double.state()["log"])
        reports = work / ("bad-" + key)
        rc, text = run_logged("reboot-lab-bad-" + key, [
            "ansible-playbook", "-i", inv, "--limit", "%s,localhost" % name, "-e", "nodefix_reboot=true",
            "-e", json.dumps(dict(extra, nodefix_audit_checks=["reboot"])), "-e", "nodefix_report_dir=%s" % reports,
            os.path.join(ROOT, "playbooks", "remediate.yml")], timeout=600)
        with open(str(reports / "remediate" / "report.json")) as fh:
            node = dict((n["host"], n) for n in json.load(fh)["nodes"])[name]
        out[key] = {"rc": rc, "out": text, "node": node, "log": double.state()["log"][seen:]}
    on_node(name, "rm -f /var/run/reboot-required")
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def patches(api, node):
    return [e["body"]["spec"]["unschedulable"] for e in api["log"]
            if e["method"] == "PATCH" and e["path"].endswith("/nodes/" + node) and "spec" in e["body"]]


def recap(out, name):
    """The PLAY RECAP line's counters of one host."""
    lines = [line for line in out.splitlines() if line.startswith(name + " ") and "ok=" in line]
    return dict((k, int(v)) for k, v in (part.split("=") for part in lines[-1].split(":", 1)[1].split()))


def test_the_run_succeeds(run):
    # the one node that stays down fails the run; every other node succeeds
    assert run["rc"] != 0, run["out"][-4000:]
    for name in NODES.values():
        if name == NODES["down"]:
            continue
        assert recap(run["out"], name)["failed"] == 0 and recap(run["out"], name)["unreachable"] == 0, run["out"][-4000:]
        assert run["before"][name]["expect"]["dead"], "the breaker leaked no unit on %s" % name
        assert set(run["before"][name]["expect"]["dead"]) <= run["before"][name]["loaded"], name
        assert run["report"][name]["remediation"]["status"] == "ok", run["report"][name]
        # the audit after: no leaked unit left on any node
        assert not [i for i in run["report"][name]["ids"] if i.startswith("mount_units.")], run["report"][name]


@pytest.mark.parametrize("key", ["drained", "cordoned", "hung"])
def test_a_drained_node_is_rebooted_and_comes_back_clean(run, key):
    name = NODES[key]
    before, after = run["before"][name], run["after"][name]
    assert before["marker"] and not after["marker"]  # /run is a new tmpfs: a new boot
    assert after["boot"] != before["boot"]
    # every kubelet unit is gone (the pods were drained first), the kubelet double is back
    assert not after["loaded"] & set(before["expect"]["all"]), after["loaded"] & set(before["expect"]["all"])
    assert after["kubelet"] == "active"
    actions = run["report"][name]["remediation"]["actions"]
    assert len(actions) == 1 and actions[0].startswith("rebooted (drained) instead of stopping"), actions
    assert " s away" in actions[0] and ", kernel " in actions[0] and actions[0].endswith("verified"), actions
    assert ("power-cycled" in actions[0]) == (key == "hung"), actions
    # drained through the API server: the ReplicaSet pod evicted, the DaemonSet pod kept
    pods = sorted(p["name"] for p in run["api"]["pods"] if p["node"] == name)
    assert pods == ["proxy-" + key], pods


def test_a_node_that_does_not_come_back_is_power_cycled_by_the_hook(run):
    name = NODES["hung"]
    actions = run["report"][name]["remediation"]["actions"]
    assert "s away (not back within 10 s: power-cycled by reboot_power_cycle_command), kernel" in actions[0], actions
    assert run["report"][name]["remediation"]["reboot"]["power_cycled"] is True
    # the hook ran on the controller: podman started the container once more (it was down)
    assert "Reboot | power-cycle the node (the operator's hook, run on the controller)" in run["out"]
    assert patches(run["api"], name) == [True, False]   # uncordoned once verified


def test_a_node_that_stays_down_keeps_its_slot(run):
    name = NODES["down"]
    assert run["down"] == "false"                       # it did go down and stayed down
    writes = [(e["method"], e["path"].rsplit("/", 1)[-1], e.get("holder")) for e in run["api"]["log"]
              if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"] and not e.get("refused") and e["method"] != "GET"]
    assert writes.count(("POST", "nodefix-reboot-down-0", name)) == 1, writes
    assert not [w for w in writes if w[0] == "DELETE" and w[1] == "nodefix-reboot-down-0"], writes
    said = " ".join(run["out"].split())  # the YAML callback wraps long messages
    assert "%s keeps nodefix-reboot-down-0: it went down for a reboot and is not back in service" % name in said
    assert "kubectl -n kube-system delete lease nodefix-reboot-down-0" in said


def test_a_node_schedulable_before_is_uncordoned(run):
    name = NODES["drained"]
    assert patches(run["api"], name) == [True, False]
    assert run["api"]["nodes"][name]["unschedulable"] is False


def test_a_node_cordoned_before_stays_cordoned(run):
    name = NODES["cordoned"]
    assert False not in patches(run["api"], name)  # never an uncordon
    assert run["api"]["nodes"][name]["unschedulable"] is True
    assert "%s was cordoned before this run: it stays cordoned" % name in run["out"]


def test_an_undrained_node_gets_the_recommendation_and_a_cleanup_not_a_reboot(run):
    name = NODES["undrained"]
    before, after = run["before"][name], run["after"][name]
    assert after["marker"] and after["boot"] == before["boot"]  # not rebooted
    assert not patches(run["api"], name)  # never cordoned
    assert len([p for p in run["api"]["pods"] if p["node"] == name]) == 2  # nothing evicted
    actions = run["report"][name]["remediation"]["actions"]
    assert len(actions) == 1 and actions[0].startswith("reboot recommended: stopping"), actions
    assert "drain and reboot the node" in actions[0]
    # stopped one by one instead: dead pods' units gone, live and starting pods' units and the
    # unattributable and unrelated ones kept
    expect = before["expect"]
    assert not after["loaded"] & set(expect["dead"]), after["loaded"] & set(expect["dead"])
    kept = set(expect["live"]) | set(expect["starting"]) | set(expect["unattributable"]) | set(expect["unrelated"])
    assert kept <= after["loaded"], kept - after["loaded"]
    assert after["kubelet"] == "active"


@pytest.mark.parametrize("key, why", [("blocked", "blocking pod(s) on the node: rook-ceph/rook-ceph-osd-0 (app=ceph-osd)"),
                                      ("window", "outside the reboot window")])
def test_a_held_reboot_is_not_done_and_the_report_says_why(run, key, why):
    name = NODES[key]
    before, after = run["before"][name], run["after"][name]
    assert after["marker"] and after["boot"] == before["boot"]  # not rebooted
    # the cleanup still needed the drain (remediate drains for any fix): given back afterwards
    assert patches(run["api"], name) == [True, False]
    actions = run["report"][name]["remediation"]["actions"]
    held = [a for a in actions if a.startswith("reboot held: ")]
    assert len(held) == 1 and why in held[0], actions
    # the units of dead pods stopped one by one instead
    assert not after["loaded"] & set(before["expect"]["dead"])
    assert not [e for e in run["api"]["log"] if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"] and e.get("holder") == name]


def test_the_lock_gave_each_rebooted_node_a_slot_and_took_it_back(run):
    writes = [(e["method"], e["path"].rsplit("/", 1)[-1], e.get("holder")) for e in run["api"]["log"]
              if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"] and not e.get("refused") and "-down-" not in e["path"]]
    held = dict((holder, slot) for method, slot, holder in writes if method == "POST")
    assert sorted(held) == sorted([NODES["drained"], NODES["cordoned"], NODES["hung"]]), writes
    assert sorted(held.values()) == ["nodefix-reboot-0", "nodefix-reboot-1", "nodefix-reboot-2"]
    assert sorted(h for m, _s, h in writes if m == "DELETE") == sorted(held), writes


def test_parallel_slices_reboot_one_node_at_a_time(run):
    sl = run["slices"]
    assert sl["rcs"] == [0, 0], [o[-3000:] for o in sl["outs"]]
    for name in (NODES["drained"], NODES["cordoned"]):
        assert sl["before"][name]["marker"] and not sl["after"][name]["marker"], name  # a new boot
        assert sl["after"][name]["boot"] != sl["before"][name]["boot"]
        node = sl["report"][name]
        rebooted = [a for a in node["remediation"]["actions"] if a.startswith("rebooted: ")]
        assert len(rebooted) == 1 and "/var/run/reboot-required exists (packages: linux-base)" in rebooted[0], node
        assert "verified" in rebooted[0]
        assert "reboot.required" not in node["ids"]  # the audit after: the reason is gone
    # who held the one slot when, from the double's request log: never two holders at once
    events = [(e["time"], e["method"], e.get("holder")) for e in sl["log"]
              if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"] and not e.get("refused")]
    holding, most, order = set(), 0, []
    for _t, method, holder in sorted(events):
        if method in ("POST", "PUT"):
            holding.add(holder)
            order.append(holder)
        elif method == "DELETE":
            holding.discard(holder)
        most = max(most, len(holding))
    assert most == 1 and len(order) == 2 and set(order) == {NODES["drained"], NODES["cordoned"]}, events


@pytest.mark.parametrize("key, message, events", [
    # an option the rollout refuses before its first step: nothing is written at all, not even an Event
    ("window", "window start '25:00' is not a time of day", []),
    # Prometheus at the reboot gate: the end Event says why
    ("prometheus", "did not answer", ["RemediationFailed"]),
])
def test_bad_reboot_input_fails_before_anything_is_drained(run, key, message, events):
    bad = run["bad_input"][key]
    assert bad["rc"] != 0, bad["out"][-3000:]
    remediation = bad["node"]["remediation"]
    # the window is refused with the rollout's options, before its first step; Prometheus at the reboot gate
    assert remediation["status"] == "failed" and remediation["outcome"] in ("failed", "refused"), remediation
    assert message in remediation["msg"] and "nothing was drained or changed" in remediation["msg"]
    # no cordon, no eviction, no lease: at most the run's trail (a node refused before its start Event gets none)
    trail = trail_entries(bad["log"])
    assert [e for e in bad["log"] if e not in trail] == [], bad["log"]
    assert [e["reason"] for e in trail if "reason" in e] == events, trail
