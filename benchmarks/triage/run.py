#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet triage from Prometheus beside the SSH audit: the controller's CPU and HTTP requests against fleet size.

    . scripts/env.sh && python benchmarks/triage/run.py --sizes 100,1000,10000 --ssh-size 10 \\
        --json benchmarks/triage/results.json --png benchmarks/triage/scaling.png

Per size, a REAL Prometheus 2.42 (Debian's, unpacked by scripts/setup.sh into lab/cache/prometheus) scrapes a
simulated exporter of N nodes: one target a node (``instance`` node-NNNNN:9100, as many real targets as nodes,
so ``up`` is Prometheus' own), each answering what node_exporter's textfile collector exports for the
collection's ``nodefix.prom`` - the file's bytes from the collection's own renderer (_report/prometheus.py),
``node_textfile_mtime_seconds``, ``node_textfile_scrape_error`` and ``promhttp_metric_handler_errors_total`` - and a
kube-state-metrics target with ``kube_node_info`` for every node. Injected, as in issue 63's prototype: 1 % of the nodes with a finding,
0.5 % with a detector that could not look, 0.5 % stale (the file two hours old), 0.5 % never exported (in
kube_node_info, no target), 0.5 % with the exporter down (HTTP 500); the rest clean.

Measured, each in its own process tree (benchmarks/measure.py: user + sys of every process):

- ``classifier``: the lean triage in a bare Python process (the module_utils the module and the plugin share:
  import, six queries, classification) - what the triage itself costs;
- ``inventory_targets``: ``ansible-inventory --list`` with the plugin, targets only (the default);
- ``inventory_full``: the same with ``add_clean_hosts: true`` (every node a host of the inventory);
- ``ssh_audit``: benchmarks/fleet/ssh.py's audit (the playbook through Ansible's ssh connection to real sshd
  containers, pipelining on) at ``--ssh-size`` nodes in the same run; its controller CPU a node times the
  triage's targets (and times N) is drawn beside the triage (the SSH line is that per-node cost, measured at
  ``--ssh-size`` nodes: the fleet benchmark shows it flat from 10 to 200 nodes).

HTTP requests: Prometheus' own ``prometheus_http_requests_total`` of the query handler (its /metrics) before and
after each run (the triage's own count is checked against it). Every run checks its classes against what was injected.
Numbers, not assertions: the limits (<= 2 CPU s and <= 7 requests lean at 10,000 nodes, <= 20 s full) are
compared in the README, never in a test. ``--ssh-size 0`` skips the SSH audit (the test command's smoke).
"""

import argparse
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from measure import write_json  # noqa: E402  pylint: disable=wrong-import-position

MEASURE = os.path.join(os.path.dirname(HERE), "measure.py")
CACHE = os.path.join(ROOT, "lab", "cache", "prometheus")
CHECKS = ("containerd", "gvisor", "kubelet", "mount_units", "pids", "kernel", "cpu_quota", "reboot")
# share of the fleet per injected state (per mille), the rest clean
INJECTED = (("findings", 10), ("check_failed", 5), ("stale", 5), ("no_series", 5), ("exporter_down", 5))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def binary(pattern, name):
    import glob  # pylint: disable=import-outside-toplevel
    found = glob.glob(os.path.join(CACHE, pattern, "usr", "bin", name))
    if not found:
        raise SystemExit("the real %s is not unpacked in lab/cache/prometheus: run scripts/setup.sh" % name)
    return found[0]


def fleet(n):
    """{node: injected state} of n nodes, every injected state spread over the fleet."""
    states = {}
    names = ["node-%05d" % i for i in range(n)]
    step = 0
    for state, per_mille in INJECTED:
        for _dummy in range(max(1, n * per_mille // 1000)):
            states[names[(step * 7919) % n]] = state
            step += 1
    return dict((name, states.get(name, "clean")) for name in names)


def render(state):
    """The body a node's exporter answers (without its mtime line, added per scrape)."""
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    from ansible_collections.nodefix.k8s.plugins.module_utils._report import prometheus as report  # pylint: disable=import-outside-toplevel
    findings = [{"id": "gvisor.runsc_outdated", "severity": "critical", "check": "gvisor", "subject": ""}] \
        if state == "findings" else []
    if state == "check_failed":
        findings = [{"id": "audit.check_failed", "severity": "medium", "check": None, "subject": "kubelet"}]
    text = report.node_textfile({"checks": dict((c, {}) for c in CHECKS), "findings": findings})
    # node_exporter's own gathering errors (none: the triage asks where they rose, every node's counter is read)
    return (text + "# TYPE node_textfile_scrape_error gauge\nnode_textfile_scrape_error 0\n"
            "# TYPE promhttp_metric_handler_errors_total counter\n"
            'promhttp_metric_handler_errors_total{cause="encoding"} 0\n'
            'promhttp_metric_handler_errors_total{cause="gathering"} 0\n'
            "# TYPE node_textfile_mtime_seconds gauge\n").encode()


class Simulator(object):
    """The simulated exporters (one HTTP server, ``?node=`` says which node a scrape is of) and kube-state-metrics."""

    def __init__(self, states):
        self.states = states
        bodies = dict((s, render(s)) for s in set(states.values()))
        self.pages = dict((node, bodies[s]) for node, s in states.items())
        self.ksm = ("# TYPE kube_node_info gauge\n" + "".join(
            'kube_node_info{node="%s",internal_ip="10.%d.%d.%d"} 1\n' % (n, i >> 16 & 255, i >> 8 & 255, i & 255)
            for i, n in enumerate(sorted(states)))).encode()
        sim = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: Prometheus reuses its connection per target

            def do_GET(self):  # noqa: N802 - http.server's name
                url = urllib.parse.urlparse(self.path)
                node = urllib.parse.parse_qs(url.query).get("node", [""])[0]
                if url.path == "/ksm":
                    body = sim.ksm
                elif sim.states.get(node) in (None, "exporter_down"):
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                else:
                    age = 7200 if sim.states[node] == "stale" else 30
                    # and node_exporter's time collector (the node's clock: the triage reads its offset)
                    body = sim.pages[node] + (
                        'node_textfile_mtime_seconds{file="/var/lib/prometheus/node-exporter/nodefix.prom"} %d\n'
                        'node_time_seconds %.3f\n' % (time.time() - age, time.time())).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, *args):
                pass  # a scrape Prometheus gave up on (its timeout): Prometheus records it, up == 0

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.address = "127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()


def start_prometheus(tmp, sim, interval):
    targets = [{"targets": [sim.address], "labels": {"instance": "%s:9100" % node, "__param_node": node}}
               for node, state in sorted(sim.states.items()) if state != "no_series"]
    with open(os.path.join(tmp, "nodes.json"), "w") as fh:
        json.dump(targets, fh)
    with open(os.path.join(tmp, "prometheus.yml"), "w") as fh:
        fh.write("global:\n  scrape_interval: %ds\n  scrape_timeout: %ds\nscrape_configs:\n"
                 "  - job_name: node\n    file_sd_configs: [{files: [%s]}]\n"
                 "  - job_name: kube-state-metrics\n    metrics_path: /ksm\n    honor_labels: true\n"
                 "    static_configs: [{targets: ['%s']}]\n"
                 % (interval, min(interval, 30), os.path.join(tmp, "nodes.json"), sim.address))
    url = "http://127.0.0.1:%d" % free_port()
    proc = subprocess.Popen([binary("prometheus_*", "prometheus"), "--config.file=%s" % os.path.join(tmp, "prometheus.yml"),
                             "--storage.tsdb.path=%s" % os.path.join(tmp, "data"), "--web.listen-address=%s" % url[7:]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, url, len(targets)


def instant(url, expr):
    with urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=30) as resp:
        return json.load(resp)["data"]["result"]


def scalar(url, expr):
    result = instant(url, expr)
    return float(result[0]["value"][1]) if result else 0.0


def wait_until(ready, proc, deadline, pause=1):
    """Until ``ready()`` (an OSError: not yet); SystemExit when Prometheus (``proc``) died or the deadline passed."""
    while True:
        try:
            if ready():
                return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit("Prometheus did not scrape every target in time")
        time.sleep(pause)


def wait_scraped(url, targets, proc, deadline):
    """Until every target was scraped (up), every up one exported its textfile series and twice its gathering-error
    counter (the triage reads a rise from two samples: a node with fewer is unknown, no_gathering_counter)."""
    def ready():
        up = targets - scalar(url, 'count(up{job="node"} == 0)')
        return scalar(url, 'count(up{job="node"})') == targets and scalar(url, "count(node_textfile_scrape_error)") == up \
            and scalar(url, 'count(count_over_time(promhttp_metric_handler_errors_total{job="node",cause="gathering"}[15m]) > 1)') \
            == up and scalar(url, "count(kube_node_info)")
    wait_until(ready, proc, deadline)


def queries_answered(url):
    """Prometheus' own live count of answered instant queries (its /metrics, which is no query itself)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines
               if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line)


CLASSIFIER = """
import json, sys
sys.path.insert(0, %(collections)r)
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import client as prometheus_client
from ansible_collections.nodefix.k8s.plugins.module_utils._prometheus import transport
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify, run
conf = classify.settings(required_checks=%(checks)r, max_unknown_percent=100)
c = prometheus_client.Client(transport.OpenUrl(), %(url)r, timeout=300)
try:
    r = run.triage(c, conf, "kube_state_metrics", clean_records=False)
except TypeError:  # a --baseline before the lean triage: every node's record built
    r = run.triage(c, conf, "kube_state_metrics")
json.dump({"summary": r["summary"], "states": dict((n, [x["state"], x["reasons"]]) for n, x in r["nodes"].items()
                                                   if x["state"] != "clean")}, open(%(out)r, "w"))
"""


def measured(name, argv, tmp, url, env=None):
    """(measure.py's record, Prometheus' query requests during it)."""
    before = queries_answered(url)
    out = os.path.join(tmp, name + ".json")
    subprocess.run([sys.executable, MEASURE, out, "--"] + argv, check=True, env=dict(os.environ, **(env or {})))
    with open(out) as fh:
        record = json.load(fh)
    if record["rc"] != 0:
        with open(out + ".log") as fh:
            raise SystemExit("%s failed (rc %d): %s" % (name, record["rc"], fh.read()[-3000:]))
    return record, int(queries_answered(url) - before)


def check_classes(states, got, summary):
    """Every node as injected: findings, unknown with the injected reason, clean. ``got``: the lean triage's listed
    nodes {name: [state, reasons]} - the clean ones are counted, not listed: a node injected clean must be absent,
    every other one listed, and the count of clean nodes the injected one (of a fleet of every node)."""
    want = {"findings": ("findings", [])}
    wrong = [n for n, s in states.items() if s != "clean" and (n not in got or tuple(got[n]) != (
        want[s] if s in want else ("unknown", [s])) and not (s not in want and got[n][0] == "unknown" and s in got[n][1]))]
    wrong += [n for n in got if states.get(n, "clean") == "clean"]
    if wrong:
        shown = ["%s %s -> %s" % (n, states.get(n), got.get(n, "clean")) for n in wrong[:10]]
        raise SystemExit("classified not as injected: %s" % ", ".join(shown))
    clean = sum(1 for s in states.values() if s == "clean")
    if (summary["counts"]["clean"], summary["fleet_size"]) != (clean, len(states)):
        raise SystemExit("%d clean of a fleet of %d counted, %d of %d injected" % (
            summary["counts"]["clean"], summary["fleet_size"], clean, len(states)))


def triage_runs(n, tmp, interval, repeat, baseline=None):
    """The rows of one fleet size; with ``baseline`` (a collections directory of another commit) its classifier and
    lean inventory too, each run alternating with the current tree's (kinds ``*_baseline``)."""
    states = fleet(n)
    sim = Simulator(states)
    proc, url, targets = start_prometheus(tmp, sim, interval)
    trees = [("", os.path.join(ROOT, ".cache", "collections"))] + ([("_baseline", baseline)] if baseline else [])
    try:
        t0 = time.time()
        wait_scraped(url, targets, proc, time.time() + 120 + 3 * interval)
        print("%d nodes: %d targets scraped in %.0f s" % (n, targets, time.time() - t0), flush=True)
        out = os.path.join(tmp, "classes.json")
        records = dict((suffix, []) for suffix, _dummy in trees)
        for _dummy in range(repeat):
            for suffix, tree in trees:
                code = CLASSIFIER % {"collections": tree, "checks": list(CHECKS), "url": url, "out": out}
                record, requests = measured("classifier" + suffix, [sys.executable, "-c", code], tmp, url)
                with open(out) as fh:
                    answer = json.load(fh)
                check_classes(states, answer["states"], answer["summary"])
                if answer["summary"]["requests"] != requests:
                    raise SystemExit("the triage counted %d requests, Prometheus %d"
                                     % (answer["summary"]["requests"], requests))
                records[suffix].append((record, requests))
        rows = [row(n, "classifier" + suffix, records[suffix], answer["summary"]) for suffix, _dummy in trees]
        path = os.path.join(tmp, "fleet.nodefix_triage.yml")
        for kind, extra, times, kinds in (("inventory_targets", "", repeat, trees),
                                          ("inventory_full", "add_clean_hosts: true\n", 1, trees[:1])):
            with open(path, "w") as fh:
                fh.write("plugin: nodefix.k8s.triage\nprometheus_url: %s\nmax_unknown_percent: 100\nprometheus_timeout: 300\n%s"
                         % (url, extra))
            records = dict((suffix, []) for suffix, _dummy in kinds)
            hosts = {}
            for _dummy in range(times):
                for suffix, tree in kinds:
                    inventory = os.path.join(tmp, kind + suffix + ".inventory.json")
                    # the tree first: Ansible takes the first collection of a name on its path
                    env = {"ANSIBLE_COLLECTIONS_PATH": tree + os.pathsep + os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")}
                    records[suffix].append(measured(kind + suffix, ["ansible-inventory", "-i", path, "--list", "--output",
                                                                    inventory], tmp, url, env=env))
                    with open(inventory) as fh:
                        hosts[suffix] = len(json.load(fh)["_meta"]["hostvars"])
            rows += [row(n, kind + suffix, records[suffix], answer["summary"], hosts=hosts[suffix])
                     for suffix, _dummy in kinds]
        for r in rows:
            print("  %-27s %6.2f CPU s (runs %s)  %5.1f s wall  %d requests  %d hosts" % (
                r["kind"], r["controller_cpu_seconds"], r["cpu_runs"], r["wall_seconds"], r["requests"], r.get("hosts", 0)),
                flush=True)
        return rows
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        sim.stop()


def baseline_tree(commit, tmp):
    """A collections directory holding the collection as of ``commit`` (git archive): what --baseline measures."""
    tree = os.path.join(tmp, "baseline")
    dest = os.path.join(tree, "ansible_collections", "nodefix", "k8s")
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return tree


def row(n, kind, records, summary, hosts=None):
    """One measurement's row from its runs ((measure.py record, requests) each): the median run's CPU (the machine
    is shared: every run is listed), the most requests any run asked."""
    cpus = sorted(r["cpu"] for r, _dummy in records)
    record = sorted(records, key=lambda x: x[0]["cpu"])[(len(records) - 1) // 2][0]
    out = {"nodes": n, "kind": kind, "controller_cpu_seconds": round(record["cpu"], 3),
           "cpu_runs": [round(c, 2) for c in cpus], "wall_seconds": round(record["wall"], 2),
           "peak_rss_mib": round(record["maxrss_kib"] / 1024.0, 1), "requests": max(q for _dummy, q in records),
           "targets": summary["targets"], "counts": summary["counts"]}
    if hosts is not None:
        out["hosts"] = hosts
    return out


def ssh_audit(size, tmp):
    """benchmarks/fleet/ssh.py's audit at ``size`` nodes (pipelining on): its controller CPU a node."""
    out = os.path.join(tmp, "ssh.json")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "fleet", "ssh.py"), "--sizes", str(size),
                    "--forks", str(min(size, 20)), "--kinds", "ping,audit", "--pipelined-only", "--json", out], check=True)
    with open(out) as fh:
        runs = json.load(fh)["runs"]
    audit = [r for r in runs if r["kind"] == "audit"][0]
    ping = [r for r in runs if r["kind"] == "ping"][0]
    return {"nodes": size, "audit_cpu_per_node": audit["controller_cpu_per_node"],
            "ping_cpu_per_node": ping["controller_cpu_per_node"], "audit_wall_seconds": audit["wall_seconds"]}


def main():
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # a killed run still stops its Prometheus
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--ssh-size", type=int, default=10, help="nodes of the SSH audit beside it (0: none)")
    ap.add_argument("--interval", type=int, default=0,
                    help="scrape interval in s (default: 1 s a 150 nodes, at least 2: the simulator answers every scrape)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of the classifier and the lean inventory a size (the median is the row's; all are listed)")
    ap.add_argument("--baseline", metavar="COMMIT",
                    help="also measure the classifier and the lean inventory of the collection at COMMIT, each run "
                         "alternating with the current tree's (kinds *_baseline)")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--replot", metavar="JSON", help="only draw --png from a results file")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as fh:
            plot(json.load(fh), args.png)
        return 0
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        baseline = baseline_tree(args.baseline, tmp) if args.baseline else None
        for n in [int(s) for s in args.sizes.split(",") if s]:
            sub = os.path.join(tmp, str(n))
            os.makedirs(sub)
            runs += triage_runs(n, sub, args.interval or max(2, n // 150), args.repeat, baseline)
        ssh = ssh_audit(args.ssh_size, tmp) if args.ssh_size else None
    result = {"runs": runs, "ssh_audit": ssh, "cores": os.cpu_count(), "injected_per_mille": dict(INJECTED),
              "prometheus": os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(
                  binary("prometheus_*", "prometheus"))))),
              "ansible_core": subprocess.run(["ansible", "--version"], capture_output=True, text=True,
                                             check=True).stdout.splitlines()[0],
              "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True, check=True).stdout.strip(), "baseline": args.baseline,
              "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if ssh:
        for r in runs:
            r["ssh_audit_of_targets_cpu_seconds"] = round(ssh["audit_cpu_per_node"] * r["targets"], 2)
            r["ssh_audit_of_fleet_cpu_seconds"] = round(ssh["audit_cpu_per_node"] * r["nodes"], 2)
        print("ssh audit: %.3f controller CPU s a node (ping %.3f) at %d nodes" % (
            ssh["audit_cpu_per_node"], ssh["ping_cpu_per_node"], ssh["nodes"]))
    if args.json:
        write_json(args.json, result)
    if args.png:
        plot(result, args.png)
    return 0


def plot(result, png):
    from plotting import pyplot, save  # pylint: disable=import-outside-toplevel
    fig, ax = pyplot().subplots(figsize=(7.5, 4.6))
    for kind, style, label in (("classifier", "o-", "triage, the classifier alone (targets only)"),
                               ("inventory_targets", "s-", "triage, ansible-inventory, targets only"),
                               ("inventory_full", "^-", "triage, ansible-inventory, every node a host")):
        pts = sorted((r["nodes"], r["controller_cpu_seconds"]) for r in result["runs"] if r["kind"] == kind)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ssh = result.get("ssh_audit")
    if ssh:
        xs = sorted(set(r["nodes"] for r in result["runs"]))
        ax.plot(xs, [ssh["audit_cpu_per_node"] * x for x in xs], "k--",
                label="SSH audit of every node (%.2f s a node, measured at %d)" % (ssh["audit_cpu_per_node"], ssh["nodes"]))
        tg = sorted((r["nodes"], r["ssh_audit_of_targets_cpu_seconds"]) for r in result["runs"] if r["kind"] == "classifier")
        ax.plot([p[0] for p in tg], [p[1] for p in tg], "k:", label="SSH audit of the triage's targets only")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("fleet size (nodes)")
    ax.set_ylabel("controller CPU seconds")
    ax.set_title("Triage from Prometheus vs SSH audit (%s, %d cores, %s)" % (
        result.get("prometheus", "").split("_")[1] if "_" in result.get("prometheus", "") else "", result["cores"],
        result.get("date", "")), fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    save(fig, png)


if __name__ == "__main__":
    sys.exit(main())
