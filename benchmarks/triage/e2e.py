#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""End to end on the lab: the lab's broken nodes plus simulated clean ones -> one real Prometheus -> the triage
inventory -> nodefix.k8s.remediate on its targets; the connections counted, then each fixed node's next tick.

    . scripts/env.sh && python benchmarks/triage/e2e.py --simulated 10000 --json benchmarks/triage/e2e.json

Under the lab lock (one podman job at a time), in one run:

1. the lab's container nodes (lab/up.yml with lab/inventory/lab.yml's containers: broken for real by
   lab/break/*.yml; the emulated cgroup v2 VM is left out - its boot and remediation under TCG are most of the
   lab's twenty minutes, and it adds no connection path the containers lack);
2. the npd role on them (``nodefix.k8s.npd``, as tests/integration/test_40's lab-npd-install) with
   ``npd_textfile`` in node_exporter's textfile directory and its systemd timer (``npd_textfile_timer``);
   Debian's REAL node_exporter 1.5 (lab/cache/prometheus) runs in each node (a systemd unit) on :9100 - or on the
   host reading the node's textfile directory where the node's glibc is too old for it (Debian 11);
3. benchmarks/triage/run.py's simulator: ``--simulated`` clean nodes (one Prometheus target each) and
   kube-state-metrics' ``kube_node_info`` of every node, the lab's included (no address: the lab inventory's
   connection stays the host's);
4. a REAL Prometheus 2.42 scraping both (the lab's exporters every ``--lab-interval`` s);
5. ``ansible-inventory`` with the triage file (targets only: CPU measured), then ``ansible-playbook
   nodefix.k8s.remediate -i <lab containers> -i <triage file> -e nodefix_targets=nodefix_triage_targets -vvv``:
   every host a connection was opened to is counted from the connection plugins' own -vvv lines (the lab's
   nodefix_podman ``RUN``, ssh's ``ESTABLISH``) and from the play recap;
6. each fixed node's next tick (its timer's service started now), then the classifier asked every second until
   the node is clean: how long after the tick's textfile that took, against the scrape interval.

Numbers, never assertions of durations: the README quotes a run. ``--keep`` leaves the lab up.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
import run as bench  # noqa: E402  pylint: disable=wrong-import-position
from measure import lab_lock, write_json  # noqa: E402  pylint: disable=wrong-import-position

TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# the lab's waiver (lab/inventory/lab.yml): the planted zombie leaker is not fixed by design
WAIVERS = [{"id": "pids.zombie_leaker", "hosts": ["nodefix-lab-*"], "reason": "planted on purpose by the lab"}]


def sh(argv, log, **kw):
    """Run ``argv``, its output appended to ``log``; CalledProcessError when it fails."""
    with open(log, "a") as fh:
        fh.write("\n$ %s\n" % " ".join(argv))
        fh.flush()
        return subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=True, **kw)


def containers_inventory(tmp):
    """lab/inventory/lab.yml without the VM group."""
    with open(os.path.join(ROOT, "lab", "inventory", "lab.yml")) as fh:
        inv = yaml.safe_load(fh)
    inv["all"]["children"]["nodefix_lab"]["children"].pop("nodefix_lab_vms", None)
    path = os.path.join(tmp, "lab.yml")
    with open(path, "w") as fh:
        yaml.safe_dump(inv, fh)
    return path, sorted(inv["all"]["children"]["nodefix_lab"]["children"]["nodefix_lab_containers"]["hosts"])


def start_exporters(nodes, log, host_procs):
    """Debian's node_exporter in each container node (a transient systemd unit): {node: ip:9100}. Debian 12's
    build needs glibc 2.34: on a node with an older one (Debian 11: 2.31) it cannot start, and the same binary runs
    on the host instead, reading the node's own textfile directory (/proc/<its init>/root/...) - as a node_exporter
    container with the node's directory mounted does; ``host_procs`` gets those processes."""
    exporter = bench.binary("prometheus-node-exporter_*", "prometheus-node-exporter")
    out = {}
    for node in nodes:
        sh(["podman", "exec", node, "mkdir", "-p", TEXTFILE_DIR], log)
        sh(["podman", "cp", exporter, "%s:/usr/local/bin/node_exporter" % node], log)
        sh(["podman", "exec", node, "systemd-run", "--unit", "nodefix-e2e-node-exporter", "/usr/local/bin/node_exporter",
            "--collector.disable-defaults", "--collector.textfile", "--collector.time",
            "--collector.textfile.directory=%s" % TEXTFILE_DIR, "--web.listen-address=:9100"], log)
        time.sleep(2)
        inside = subprocess.run(["podman", "exec", node, "systemctl", "is-active", "nodefix-e2e-node-exporter"],
                                capture_output=True, text=True, check=False).stdout.strip() == "active"
        if inside:
            ip = subprocess.run(["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", node], capture_output=True,
                                text=True, check=True).stdout.strip()
            out[node] = "%s:9100" % ip
            continue
        pid = subprocess.run(["podman", "inspect", "-f", "{{.State.Pid}}", node], capture_output=True, text=True,
                             check=True).stdout.strip()
        out[node] = "127.0.0.1:%d" % bench.free_port()
        with open(log, "a") as fh:
            fh.write("\n%s: node_exporter did not start in the node (glibc); on the host for /proc/%s/root%s at %s\n"
                     % (node, pid, TEXTFILE_DIR, out[node]))
        host_procs.append(subprocess.Popen([exporter, "--collector.disable-defaults", "--collector.textfile",
                                            "--collector.time",
                                            "--collector.textfile.directory=/proc/%s/root%s" % (pid, TEXTFILE_DIR),
                                            "--web.listen-address=%s" % out[node]],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return out


def prometheus(tmp, sim, lab_targets, sim_interval, lab_interval):
    targets = [{"targets": [sim.address], "labels": {"instance": "%s:9100" % node, "__param_node": node}}
               for node in sorted(sim.states)]
    with open(os.path.join(tmp, "nodes.json"), "w") as fh:
        json.dump(targets, fh)
    lab = "".join("      - targets: ['%s']\n        labels: {instance: '%s:9100'}\n" % (t, n)
                  for n, t in sorted(lab_targets.items()))
    with open(os.path.join(tmp, "prometheus.yml"), "w") as fh:
        fh.write("global:\n  scrape_interval: %ds\n  scrape_timeout: %ds\nscrape_configs:\n"
                 "  - job_name: node\n    file_sd_configs: [{files: [%s]}]\n"
                 "  - job_name: node-lab\n    scrape_interval: %ds\n    scrape_timeout: %ds\n    static_configs:\n%s"
                 "  - job_name: kube-state-metrics\n    metrics_path: /ksm\n    honor_labels: true\n"
                 "    static_configs: [{targets: ['%s']}]\n"
                 % (sim_interval, min(sim_interval, 30), os.path.join(tmp, "nodes.json"), lab_interval, lab_interval,
                    lab, sim.address))
    url = "http://127.0.0.1:%d" % bench.free_port()
    proc = subprocess.Popen([bench.binary("prometheus_*", "prometheus"),
                             "--config.file=%s" % os.path.join(tmp, "prometheus.yml"),
                             "--storage.tsdb.path=%s" % os.path.join(tmp, "data"), "--web.listen-address=%s" % url[7:]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, url, len(targets) + len(lab_targets)


def wait_up(url, targets, proc, deadline):
    """Until every target is scraped (the lab's exporting nodefix.prom) and kube_node_info is there."""
    bench.wait_until(lambda: bench.scalar(url, 'count(up{job=~"node|node-lab"})') == targets
                     and bench.scalar(url, 'count(node_textfile_mtime_seconds{job="node-lab"})')
                     and bench.scalar(url, "count(kube_node_info)"), proc, deadline, pause=2)


def triage_file(tmp, url):
    path = os.path.join(tmp, "fleet.nodefix_triage.yml")
    with open(path, "w") as fh:
        yaml.safe_dump({"plugin": "nodefix.k8s.triage", "prometheus_url": url, "prometheus_timeout": 300,
                        "exporter_job": "node|node-lab", "waivers": WAIVERS}, fh)
    return path


def classify(url, at=None):
    """The triage's classes now, or at ``at`` (the module_utils the plugin runs): {node: (state, reasons, ids)},
    summary."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as pc  # pylint: disable=import-outside-toplevel
    from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import transport  # pylint: disable=import-outside-toplevel
    from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as tc, run as tr  # pylint: disable=import-outside-toplevel
    conf = tc.settings(required_checks=list(bench.CHECKS), exporter_job="node|node-lab", waivers=WAIVERS,
                       max_unknown_percent=100)
    result = tr.triage(pc.Client(transport.OpenUrl(), url, timeout=300), conf, "kube_state_metrics", at=at)
    return dict((n, (r["state"], r["reasons"], r["ids"])) for n, r in result["nodes"].items()
                if r["state"] != "clean" or n.startswith("nodefix-lab")), result["summary"]


def connections(log_path):
    """{host: -vvv lines of a connection plugin opening or using a connection to it} and the play recap's hosts."""
    seen, recap = {}, set()
    in_recap = False
    with open(log_path, errors="replace") as fh:
        for line in fh:
            m = re.match(r"^<([^>]+)> (RUN|ESTABLISH|SSH:|EXEC)", line)
            if m:
                seen[m.group(1)] = seen.get(m.group(1), 0) + 1
            if line.startswith("PLAY RECAP"):
                in_recap = True
            elif in_recap:
                m = re.match(r"^(\S+)\s+: ok=", line)
                if m:
                    recap.add(m.group(1))
    return seen, sorted(recap - {"localhost"})


def tick_scraped(url, node, until, span=900):
    """A node's last tick before ``until`` as Prometheus holds it: the heartbeat its textfile carries (when the tick
    looked), the first scrape that brought it (a sample's timestamp is its scrape's), and the triage at two pinned
    instants - that scrape and the one before it - so the answer does not depend on how long a triage of the whole
    fleet takes Prometheus to answer on a loaded machine."""
    query = 'nodefix_audit_timestamp_seconds{instance="%s:9100"}[%ds]' % (node, span)
    with urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": "%.3f" % until}),
                                timeout=300) as resp:
        series = json.load(resp)["data"]["result"]
    points = sorted((float(t), float(v)) for one in series for t, v in one.get("values", []))
    if not points:
        return {"heartbeat": None}
    last = max(v for _t, v in points)
    scraped = min(t for t, v in points if v == last)
    before = max((t for t, _v in points if t < scraped), default=None)
    out = {"heartbeat": last, "scraped_at": scraped, "scraped_after_heartbeat_seconds": round(scraped - last, 1),
           "previous_scrape_seconds_before": round(scraped - before, 1) if before else None}
    for name, at in (("triage_at_the_scrape_before", before), ("triage_at_that_scrape", scraped)):
        if at is not None:
            out[name] = classify(url, at=at)[0][node][0]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulated", type=int, default=10000)
    ap.add_argument("--lab-interval", type=int, default=10, help="scrape interval of the lab's exporters (s)")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--tsdb", metavar="RUN_DIR", help="only read a kept run's Prometheus data (its prometheus.yml and "
                    "data/ in RUN_DIR): each lab node's last tick up to --until, as tick_scraped() reads it")
    ap.add_argument("--until", type=float, help="with --tsdb: Unix time at or after the run's last tick")
    args = ap.parse_args()
    if args.tsdb:
        return offline(args)
    lock = lab_lock()  # noqa: F841  pylint: disable=unused-variable
    tmp = tempfile.mkdtemp(prefix="nodefix-triage-e2e-")
    log = os.path.join(tmp, "e2e.log")
    print("log: %s" % log, flush=True)
    env = dict(os.environ, NODEFIX_ZIPCODE_DIR="", ANSIBLE_FORCE_COLOR="0")  # real nodes have no compiled-code cache
    inv, lab_nodes = containers_inventory(tmp)
    out = {"lab_nodes": lab_nodes, "simulated": args.simulated, "lab_interval": args.lab_interval,
           "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, check=True).stdout.strip()}
    t0 = time.time()
    sh(["ansible-playbook", "-i", inv, os.path.join(ROOT, "lab", "up.yml")], log, env=env)
    out["lab_up_seconds"] = round(time.time() - t0)
    proc = sim = None
    host_procs = []
    try:
        lab_targets = start_exporters(lab_nodes, log, host_procs)
        out["exporters"] = lab_targets
        sh(["ansible-playbook", "-i", inv, "nodefix.k8s.npd", "-e", "nodefix_targets=nodefix_lab",
            "-e", "npd_textfile=%s/nodefix.prom" % TEXTFILE_DIR, "-e", "npd_textfile_timer=true",
            "-e", "npd_invoke_interval=300s"], log, env=env)
        for node in lab_nodes:  # the first tick now (the timer's own first run may still be ahead)
            sh(["podman", "exec", node, "systemctl", "start", "nodefix-npd-textfile.service"], log)
        states = dict(("node-%05d" % i, "clean") for i in range(args.simulated))
        sim = bench.Simulator(states)
        sim.ksm += "".join('kube_node_info{node="%s"} 1\n' % n for n in lab_nodes).encode()
        proc, url, ntargets = prometheus(tmp, sim, lab_targets, max(2, args.simulated // 150), args.lab_interval)
        wait_up(url, ntargets, proc, time.time() + 600)
        before, summary = classify(url)
        out["before"] = {"classes": before, "counts": summary["counts"]}
        print("before: %s %s" % (summary["counts"], before), flush=True)
        path = triage_file(tmp, url)
        rec = os.path.join(tmp, "inventory.json")
        subprocess.run([sys.executable, bench.MEASURE, rec, "--", "ansible-inventory", "-i", path, "--list", "--output",
                        os.path.join(tmp, "triage.json")], check=True, env=env)
        with open(rec) as fh:
            out["inventory_targets_cpu_seconds"] = round(json.load(fh)["cpu"], 3)
        with open(os.path.join(tmp, "triage.json")) as fh:
            out["inventory_hosts"] = sorted(json.load(fh)["_meta"]["hostvars"])
        rlog = os.path.join(tmp, "remediate.log")
        t1 = time.time()
        with open(rlog, "w") as fh:
            rc = subprocess.run(["ansible-playbook", "-vvv", "-i", inv, "-i", path, "nodefix.k8s.remediate",
                                 "-e", "nodefix_targets=nodefix_triage_targets", "-e", "nodefix_serial=2",
                                 "-e", "nodefix_report_dir=%s" % os.path.join(tmp, "reports")],
                                stdout=fh, stderr=subprocess.STDOUT, env=env, check=False).returncode
        out["remediate"] = {"rc": rc, "wall_seconds": round(time.time() - t1), "log": rlog}
        seen, recap = connections(rlog)
        out["remediate"]["connected_hosts"] = seen
        out["remediate"]["recap_hosts"] = recap
        print("remediate rc %d; connected to %s; recap %s" % (rc, seen, recap), flush=True)
        out["next_tick"] = {}
        for node in lab_nodes:
            tick = time.time()
            sh(["podman", "exec", node, "systemctl", "start", "nodefix-npd-textfile.service"], log)
            written = time.time()
            asked = []  # the evaluation time of each triage after the tick (each is asked at one pinned instant)
            while True:
                classes, summary = classify(url)
                asked.append((round(summary["evaluation_time"] - written, 1), classes[node][0]))
                if classes[node][0] == "clean" or time.time() - written > 10 * args.lab_interval:
                    break
                time.sleep(1)
            # clean as of the first clean triage's evaluation time (not when its answer came: a triage of 10,000
            # nodes takes seconds of Prometheus' time on this machine)
            out["next_tick"][node] = {"state": classes[node], "tick_seconds": round(written - tick, 1),
                                      "triages_after_tick": asked,
                                      "clean_after_tick_seconds": asked[-1][0] if classes[node][0] == "clean" else None,
                                      "answered_after_tick_seconds": round(time.time() - written, 1)}
            print("next tick of %s: %s" % (node, out["next_tick"][node]), flush=True)
        after, summary = classify(url)
        out["after"] = {"classes": after, "counts": summary["counts"]}
        until = time.time()
        out["tick_scraped"] = dict((node, tick_scraped(url, node, until)) for node in lab_nodes)
        print("the ticks as Prometheus holds them: %s" % out["tick_scraped"], flush=True)
    finally:
        for p in host_procs + ([proc] if proc else []):
            p.terminate()
            p.wait(timeout=60)
        if sim:
            sim.stop()
        if not args.keep:
            sh(["ansible-playbook", "-i", inv, os.path.join(ROOT, "lab", "down.yml")], log, env=env)
        if args.json:
            write_json(args.json, out)
    return 0


def offline(args):
    """Prometheus on a kept run's data (no target answers any more: only the samples before ``--until`` are read)."""
    with open(os.path.join(args.tsdb, "lab.yml")) as fh:
        nodes = sorted(yaml.safe_load(fh)["all"]["children"]["nodefix_lab"]["children"]["nodefix_lab_containers"]["hosts"])
    url = "http://127.0.0.1:%d" % bench.free_port()
    config = os.path.join(tempfile.mkdtemp(prefix="nodefix-triage-tsdb-"), "prometheus.yml")
    with open(config, "w") as fh:
        fh.write("global: {}\n")  # scrapes nothing: the run's targets are gone
    proc = subprocess.Popen([bench.binary("prometheus_*", "prometheus"), "--config.file=%s" % config,
                             "--storage.tsdb.path=%s" % os.path.join(args.tsdb, "data"),
                             "--web.listen-address=%s" % url[7:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        bench.wait_until(lambda: bench.scalar(url, "vector(1)") == 1, proc, time.time() + 300)
        out = dict((node, tick_scraped(url, node, args.until)) for node in nodes)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
