# SPDX-License-Identifier: GPL-3.0-or-later
"""The reboot backoff through playbooks/remediate.yml (the reboot role's tasks/backoff.yml, module
nodefix.k8s.reboot_backoff) against lab/apiserver-double (a TEST DOUBLE of kube-apiserver, as test_13:
it keeps and serves Node annotations), with the real kubernetes.core modules on the controller.

The "nodes" are this machine over a local connection, audited read-only with only the kernel detector
and a dying-memory-cgroup threshold of 0 (the finding is always there), with
nodefix_reboot_dying_memcgs: a reboot reason on every node. The finding also names the kernel role (it
only reports), for which remediate drains the node whatever the reboot's fate - so the proof that the
backoff holds is that the reboot path never starts: no lock slot taken, no reboot task, the record not
rewritten. Nothing on the test machine changes: Ansible's reboot action refuses a local connection
("would reboot the control node") - a second guard should the hold ever fail (on the code before the
backoff it does fail there: node-a failed, the rollout stopped).

One run, serial 1, two nodes (issue 62 step 8: node-b, an annotation that cannot be read, and node-d, a recorded
reboot in the boot the Node still reports, are unit tests of the machine now - tests/unit/plugins/module_utils/
test_rollout_machine_backoff.py; the backoff's rules are test_reboot_backoff.py's):
- node-a was rebooted an hour ago for the same reason (nodefix.k8s/last-reboot): held, "rebooted at T for
  R, still open: needs a person", not gated, no lock slot taken, not rebooted;
- node-c was rebooted an hour ago for another reason: the backoff lets it through to the gate, whose closed
  window (its host variables) holds it (so nothing reboots here either) - the rollout went on past the held node.
"""

import datetime
import json
import os

from conftest import ROOT, run_logged

PY = os.path.join(ROOT, ".venv", "bin", "python")
OPTIONS = {"kernel": {"release": "6.12.0-1-amd64", "dying_memcgs_threshold": 0, "memory_stat_slow_ms": 100000}}


def record(hours_ago, ids):
    when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=hours_ago)
    body = {"time": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "run": "earlier-run",
            "reasons": [{"id": i, "reason": "%s (an earlier run's words)" % i} for i in ids]}
    return json.dumps(body)


def test_a_node_rebooted_lately_for_a_reason_still_open_is_held_not_rebooted_again(apiserver_double, tmp_path):
    double = apiserver_double({
        "node-a": {"annotations": {"nodefix.k8s/last-reboot": record(1, ["kernel.dying_memcgs"])}},
        "node-c": {"annotations": {"nodefix.k8s/last-reboot": record(1, ["reboot.required"])}},
    }, [{"namespace": "default", "name": "web-%s" % n, "node": n, "owner": "ReplicaSet"} for n in "ac"])
    # a window on one day three days from now only: closed whenever this runs
    closed_day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][(datetime.datetime.now(
        datetime.timezone.utc).weekday() + 3) % 7]
    host = {"ansible_connection": "local", "ansible_python_interpreter": PY, "nodefix_become": False,
            "nodefix_audit_checks": ["kernel"], "nodefix_audit_options": OPTIONS,
            "nodefix_kubeconfig": double.kubeconfig, "nodefix_drain_timeout": 20}
    hosts = {"node-a": host, "node-c": dict(host, reboot_window_days=[closed_day])}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    extra = {"nodefix_report_dir": str(tmp_path / "reports"), "nodefix_evidence": False,
             "nodefix_reboot_dying_memcgs": True, "nodefix_storm_percent": 100, "nodefix_run": "run-backoff"}
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory), "-e", json.dumps(extra),
            os.path.join(ROOT, "playbooks", "remediate.yml")]
    rc, out = run_logged("reboot-backoff-double", argv, timeout=600)
    log = double.state()["log"]
    # no lock slot taken: the held node never reached the gate, node-c's gate held it; no reboot started
    assert [e for e in log if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"]] == [], out[-3000:]
    assert "TASK [nodefix.k8s.reboot : Reboot | reboot the node]" not in out
    assert not [e for e in log if e["method"] == "PATCH" and "nodefix.k8s/last-reboot" in json.dumps(e["body"])]
    # each node drained for its (report-only) kernel role is given back
    unschedulable = [(e["path"].rsplit("/", 1)[-1], e["body"]["spec"]["unschedulable"]) for e in log
                     if e["method"] == "PATCH" and "spec" in e["body"]]
    assert unschedulable == [(n, c) for n in ("node-a", "node-c") for c in (True, False)], unschedulable
    with open(os.path.join(str(tmp_path / "reports"), "remediate", "report.json"), encoding="utf-8") as fh:
        nodes = {n["host"]: n for n in json.load(fh)["nodes"]}
    assert set(nodes) == {"node-a", "node-c"}, nodes     # the rollout went on past the held one
    said = dict((h, " ".join(json.dumps(n).split())) for h, n in nodes.items())
    assert "rebooted at " in said["node-a"] and "for kernel.dying_memcgs (an earlier run's words), still open: " \
        "needs a person" in said["node-a"], said["node-a"]
    assert "outside the reboot window" in said["node-c"] and "still open" not in said["node-c"], said["node-c"]
    # the held node is not a failure that stops the rollout, and the trail says it on the Node too
    assert all(n["status"] != "failed" for n in nodes.values()), nodes
    events = [e for e in double.state()["events"] if e["regarding"]["name"] == "node-a"]
    assert any("needs a person" in e.get("note", "") for e in events), events
