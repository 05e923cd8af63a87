#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what remediate asks the API server before a drain - the four delegated kubernetes.core tasks
it ran before (two reads of the same Node, the pods before the drain, the cordon's PATCH) against the
one nodefix.k8s.node_cordon module run that replaced them - side by side in ONE ansible-playbook run,
alternating old and new ``--rounds`` times (default 5) on the API server double
(lab/apiserver-double/apiserver.py: a TEST DOUBLE of kube-apiserver), the node given back between
rounds the way remediate does (not timed). Each task's wall time comes from the test suite's callback
(tests/callback_plugins/nodefix_task_times.py). Prints the module runs and the seconds per node, old
and new (median over the rounds), and writes them to ``--out`` (results.json here). Not a test: no
assertion on time; exit status 1 only when a round did not cordon the node with this run's record.

    python benchmarks/cordon_round_trips/run.py [--rounds 5] [--out benchmarks/cordon_round_trips/results.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from measure import write_json  # noqa: E402

OLD = """
    - name: "old {{ r }} | Read who cordoned the node"
      kubernetes.core.k8s_info: {kubeconfig: "{{ kc }}", kind: Node, name: node-a}
      register: who
    - name: "old {{ r }} | Read the node's schedulability before touching it"
      kubernetes.core.k8s_info: {kubeconfig: "{{ kc }}", kind: Node, name: node-a}
      register: node
    - name: "old {{ r }} | The node's pods before the drain"
      kubernetes.core.k8s_info: {kubeconfig: "{{ kc }}", kind: Pod, field_selectors: ["spec.nodeName=node-a"]}
      register: pods
      no_log: true
    - name: "old {{ r }} | Cordon, recording that nodefix did (nodefix.k8s/cordoned-by)"
      kubernetes.core.k8s:
        kubeconfig: "{{ kc }}"
        state: patched
        merge_type: merge
        api_version: v1
        kind: Node
        name: node-a
        definition:
          metadata: {annotations: {nodefix.k8s/cordoned-by: '{"run": "bench", "time": "2026-11-27T00:00:00Z"}'}}
          spec: {unschedulable: true}
"""
NEW = """
    - name: "new {{ r }} | Read the node once - who cordoned it, give it back; to drain it, its pods and the cordon"
      nodefix.k8s.node_cordon: {kubeconfig: "{{ kc }}", node: node-a, run_id: bench, cordon: true}
"""
RESET = """
    - name: "reset {{ r }} | give the node back (not timed)"
      kubernetes.core.k8s:
        kubeconfig: "{{ kc }}"
        state: patched
        merge_type: merge
        api_version: v1
        kind: Node
        name: node-a
        definition: {metadata: {annotations: {nodefix.k8s/cordoned-by: null}}, spec: {unschedulable: false}}
"""


def playbook(rounds):
    tasks = []
    for r in range(rounds):
        # alternate which goes first, so neither always runs on a warmer cache
        first, second = (OLD, NEW) if r % 2 == 0 else (NEW, OLD)
        for block in (first, RESET, second, RESET):
            tasks.append(block.replace("{{ r }}", str(r)))
    return ("- name: Cordon round trips, old and new side by side\n  hosts: localhost\n  gather_facts: false\n"
            "  connection: local\n  tasks:\n" + "".join(tasks))


def start_double(work):
    state, port = os.path.join(work, "state.json"), os.path.join(work, "port")
    kubeconfig = os.path.join(work, "kubeconfig")
    pods = [{"namespace": "default", "name": "web-%d" % i, "node": "node-a", "uid": "u%d" % i} for i in range(5)]
    with open(state, "w") as fh:
        json.dump({"nodes": {"node-a": {"unschedulable": False}}, "pods": pods, "configmaps": {}}, fh)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "lab", "apiserver-double", "apiserver.py"),
                             "--state", state, "--port-file", port, "--kubeconfig", kubeconfig])
    for _dummy in range(100):
        if os.path.exists(port):
            return proc, kubeconfig, state
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the apiserver double did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="nodefix-cordon-bench-")
    proc, kubeconfig, state = start_double(work)
    try:
        book, times = os.path.join(work, "bench.yml"), os.path.join(work, "tasks.jsonl")
        with open(book, "w") as fh:
            fh.write(playbook(args.rounds))
        env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "tests", "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="nodefix_task_times", NODEFIX_TASK_TIMES=times)
        near = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        run = subprocess.run([near if os.path.exists(near) else "ansible-playbook", "-i", "localhost,", "-e", "kc=%s" % kubeconfig,
                              "-e", "ansible_python_interpreter=%s" % sys.executable, book],
                             env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:])
            return 1
        with open(state) as fh:
            log = json.load(fh)["log"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # every old and new round cordoned the node with the record (the resets gave it back)
    cordons = [e for e in log if e["method"] == "PATCH" and (e.get("body") or {}).get("spec", {}).get("unschedulable")]
    per = {"old": {}, "new": {}}
    with open(times) as fh:
        for line in fh:
            row = json.loads(line)
            kind, rest = (row["task"].split(" ", 1) + [""])[:2]
            if kind in per:
                per[kind].setdefault(rest.split(" | ")[0], []).append(row["seconds"])
    result = {"rounds": args.rounds, "cordons": len(cordons)}
    for kind, rounds in per.items():
        sums = [sum(v) for v in rounds.values()]
        result[kind] = {"module_runs_per_node": len(next(iter(rounds.values()))),
                        "seconds_per_node_median": round(statistics.median(sums), 2),
                        "seconds_per_node_min": round(min(sums), 2), "seconds_per_node_max": round(max(sums), 2)}
    result["nproc"] = os.cpu_count()
    result["loadavg_1min_at_end"] = os.getloadavg()[0]
    write_json(args.out, result)
    print(json.dumps(result, indent=2))
    return 0 if len(cordons) == 2 * args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
