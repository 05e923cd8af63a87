# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""Leaked kubelet mount units: find the orphans and stop them (kubernetes#57345, kops#5916).

kubelet 1.8 - 1.22 ran its mounts through ``systemd-run --description=Kubernetes
transient mount for <target> --scope -- mount ...`` (mount-utils ``AddSystemdScope``).
On systemd < 237 (kubernetes#57345, systemd PR #7811) and in kops#5916 the units
leaked: scopes that stay ``loaded active running`` and ``.mount`` units that stay
``loaded inactive dead``; at MANAGER_MAX_NAMES (131072) units every new mount fails
with "Argument list too long".

What this file does, with a CONSTANT number of ``systemctl`` calls however many
units exist (a per-unit cleaner script spawns ``systemctl status``, ``cat``
and ``docker ps`` for every unit):

1. ``systemctl --version`` and ONE ``systemctl list-units --all --plain
   --no-legend --full``; kubelet transient scopes are recognised by their
   description and their systemd-run name (``run-r<32 hex>``, ``run-u<N>``,
   ``run-<PID>``), mount units by their mount point under ``<root dir>/pods``
   (description, or the unescaped unit name: ``var-lib-kubelet-pods-<uid with
   \x2d>-volume\x2dsubpaths-...mount``). ``systemctl show`` (batched, argv
   chunked below ARG_MAX) is only asked about the few units whose list line does
   not settle their path (hashed long names): measured at ~4.5 ms per unit on
   systemd 252, it would cost more than stopping them.
2. each unit is attributed to the pod UID that follows ``pods/`` in its path
   (a UUID, or the 32 hex digits of a static pod); anything else is
   *unattributable* and never stopped.
3. the live pods come from the container runtime (``crictl pods -o json`` plus
   ``crictl ps -a -o json``, or the docker label ``io.kubernetes.pod.uid``), or
   from a list given by the caller; a failing or unparsable runtime answer ends
   the run before anything is stopped.
4. second guard, independent of the runtime: one read of
   ``/proc/self/mountinfo`` (a pod whose volumes are still mounted under
   ``pods/<uid>/volumes/`` is still set up by kubelet, e.g. a pod whose sandbox is
   not created yet), the pod cgroups of running processes (``/proc/<pid>/cgroup``),
   and the pod's directory: one that changed in the last ``STARTING_GRACE`` seconds
   belongs to a pod kubelet may still be starting (mounting a slow volume, before
   any sandbox, mount or process shows it).
5. orphans (no live pod, no guard) are stopped in batches (``systemctl stop``),
   failed ones reset (``systemctl reset-failed <names>``, never a global reset),
   and, optionally, one ``daemon-reload`` drops dead mount units on systemd < 237.

The file imports nothing from Ansible (only the collection's ``_core.runner``,
``_core.cgroup`` and ``_mount_units.systemd`` - the parsers of systemd's outputs -
which import nothing from Ansible either), so the role
``nodefix.k8s.mount_units`` ships these very files to nodes and runs them from a
systemd timer (``_mount_units.cleanup.cli``): one implementation for the module and
the timer. The stop itself and the timer's CLI are ``_mount_units.cleanup``; this module only reads.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import posixpath
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.cgroup import (
    describe_path,
    is_pod_uid,
    parse_proc_cgroup,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.systemd import (
    chunks,
    DEFAULT_KUBELET_ROOT_DIR,
    parse_list_units,
    parse_mountinfo,
    parse_show,
    parse_systemd_version,
    pod_of_path,
    pods_dirs_for,
    split_pod_path,
    unit_name_to_path,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import transaction

# kubelet's mount-utils: "Kubernetes transient mount for <target>"
SCOPE_DESCRIPTION_PREFIX = "Kubernetes transient mount for "
# systemd-run's names for a transient scope: run-r<32 hex> (systemd >= 236,
# random), run-u<N> (a counter, systemd 230 - 235), run-<PID> (older).
SCOPE_NAME_RE = lazy_compile(r"^run-(?:r[0-9a-f]{32}|u[0-9]+|[0-9]+)\.scope$")
# systemd PR #7811 (v237) stops the dead .mount units from piling up.
SYSTEMD_FIX_VERSION = 237
# systemd's MANAGER_MAX_NAMES: beyond it every transient unit fails.
SYSTEMD_UNIT_LIMIT = 131072
DEFAULT_BATCH_SIZE = 1000
DOCKER_UID_LABEL = "io.kubernetes.pod.uid"
# docker names kubelet containers k8s_<container>_<pod>_<namespace>_<uid>_<attempt>
_DOCKER_NAME_RE = lazy_compile(r"^/?k8s_[^_]+_[^_]+_[^_]+_([0-9a-fA-F-]{32,36})_[0-9]+$")
ACTIVE_STATES_TO_STOP = ("active", "activating", "deactivating", "reloading", "refreshing")
POD_SOURCES = ("crictl", "docker", "list")
# how orphans are stopped: one systemd transaction a batch (_mount_units.transaction), or systemctl stop
STOP_METHODS = ("transaction", "systemctl")

FINDINGS = {
    "mount_units.leaked_scopes": {
        "severity": "medium",
        "title": "Leaked kubelet transient mount scopes (run-*.scope) of pods that no longer exist",
        "remedy": "Stop the orphaned scopes with nodefix.k8s.kubelet_mount_units (state=absent) or the role "
                  "nodefix.k8s.mount_units; schedule it until systemd is upgraded.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.dead_mount_units": {
        "severity": "medium",
        "title": "Mount units under the kubelet pods directory left behind by pods that no longer exist",
        "remedy": "Stop them (and daemon-reload for units stuck 'inactive dead') with nodefix.k8s.kubelet_mount_units "
                  "or the role nodefix.k8s.mount_units.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.systemd_without_fix": {
        "severity": "medium",
        "title": "systemd older than 237 leaks the mount units of kubelet (kubernetes#57345, systemd PR #7811)",
        "remedy": "Upgrade systemd to 237 or later; until then schedule the cleanup (role nodefix.k8s.mount_units "
                  "with mount_units_schedule_enabled=true).",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.near_unit_limit": {
        "severity": "high",
        "title": "systemd holds so many units that new kubelet mounts will soon fail (limit 131072)",
        "remedy": "Stop the leaked units now (nodefix.k8s.mount_units); at the limit every transient unit fails with "
                  "'Argument list too long'.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
    "mount_units.cleanup_slow": {
        "severity": "medium",
        "title": "Stopping the leaked units through systemd is estimated to take longer than a drained reboot",
        "remedy": "Drain and reboot the node (every transient unit is gone after a boot): remediate does it with "
                  "nodefix_mount_units_reboot and nodefix_kubeconfig (the mount_units role's reboot path, only on a "
                  "node it drained); or run the cleanup with a budget (mount_units_max_seconds) and let the timer "
                  "finish; the evidence has the estimate.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units_reboot",
    },
    "mount_units.runtime_unavailable": {
        "severity": "low",
        "title": "kubelet mount units exist but the container runtime could not be asked which pods live",
        "remedy": "Make crictl (or docker) work on the node, or give the live pods, so that orphans can be told from "
                  "live pods' units; nothing is stopped without that.",
        "role": "nodefix.k8s.mount_units",
        "tag": "mount_units",
    },
}


class MountUnitsError(NodefixError):
    """A condition that must stop the run before anything is changed."""


# --------------------------------------------------------------------------
# which units are kubelet's and whose pod they belong to


def kubelet_units(listed, pods_dirs):
    """Select kubelet's transient scopes and the mount units under the pods dirs.

    Returns (units, needs_show): ``needs_show`` names mount units whose listed
    line does not settle their mount point (hashed long names).
    """
    units = []
    needs_show = []
    for row in listed:
        name = row["unit"]
        if name.endswith(".scope"):
            marker = SCOPE_DESCRIPTION_PREFIX.rstrip()
            if not row["description"].startswith(marker):
                continue
            unit = dict(row, kind="scope", path=row["description"][len(marker):].strip())
            units.append(unit)
        elif name.endswith(".mount"):
            name_path = unit_name_to_path(name)
            desc = row["description"]
            desc_path = desc if desc.startswith("/") else None
            _name_uid, name_why = pod_of_path(name_path, pods_dirs)
            _desc_uid, desc_why = pod_of_path(desc_path, pods_dirs) if desc_path else (None, "outside")
            if name_why == "outside" and desc_why == "outside":
                continue
            unit = dict(row, kind="mount", path=desc_path or name_path)
            if desc_path is None or posixpath.normpath(desc_path) != posixpath.normpath(name_path):
                # a hashed long name, or a description that is not the mount point
                needs_show.append(name)
                unit["path"] = None
            units.append(unit)
    return units, needs_show


def apply_show(units, shown):
    """Settle the mount points of units asked with ``systemctl show``."""
    kept = []
    for unit in units:
        if unit["kind"] == "mount" and unit["path"] is None:
            props = shown.get(unit["unit"])
            if props is None or props.get("LoadState") == "not-found":
                continue  # gone since it was listed
            where = props.get("Where") or ""
            unit["path"] = where if where.startswith("/") else None
            if props.get("ActiveState"):
                unit["active"] = props["ActiveState"]
                unit["sub"] = props.get("SubState", unit["sub"])
        kept.append(unit)
    return kept


def attribute(units, pods_dirs):
    """Set ``pod_uid`` (or ``reason``) on every unit."""
    for unit in units:
        uid, why = (None, "mount point unknown") if unit["path"] is None else pod_of_path(unit["path"], pods_dirs)
        if uid is None and why == "outside":
            why = "path %s is not under %s" % (unit["path"], " or ".join(pods_dirs))
        if unit["kind"] == "scope" and uid is not None and not SCOPE_NAME_RE.match(unit["unit"]):
            uid, why = None, "scope name is not one systemd-run gives (run-r<hex>, run-u<N>, run-<PID>)"
        unit["pod_uid"] = uid
        unit["reason"] = why
    return units


def classify(units, live, guards, runtime_known=True):
    """Decide every unit; a pure function (the property test drives it).

    ``live`` maps pod UIDs to where they were learnt (``crictl``, ``docker``,
    ``caller``), ``guards`` maps pod UIDs to the second guard's reasons. Sets
    ``status``: ``unattributable``, ``live``, ``guarded``, ``unverified`` (the
    runtime could not be asked: ``runtime_known=False``) or ``orphaned``, and
    for orphans ``action``: ``stop`` (still up), ``reset`` (failed), ``reload``
    (a mount unit stuck inactive) or None.
    """
    for unit in units:
        uid = unit.get("pod_uid")
        unit["action"] = None
        if uid is None:
            unit["status"] = "unattributable"
        elif uid in live:
            unit["status"] = "live"
            unit["reason"] = "pod known to %s" % live[uid]
        elif uid in guards:
            unit["status"] = "guarded"
            unit["reason"] = ", ".join(sorted(guards[uid]))
        elif not runtime_known:
            unit["status"] = "unverified"
            unit["reason"] = "the runtime could not be asked about pod %s" % uid
        else:
            unit["status"] = "orphaned"
            unit["reason"] = "no live pod %s" % uid
            if unit["active"] in ACTIVE_STATES_TO_STOP:
                unit["action"] = "stop"
            elif unit["active"] == "failed":
                unit["action"] = "reset"
            elif unit["kind"] == "mount" and unit["load"] == "loaded":
                unit["action"] = "reload"
    return units


# --------------------------------------------------------------------------
# live pods: runtime, caller, and the second guard


def _need_bin(runner, name, given):
    path = runner.bin(given or name)
    if not path:
        raise MountUnitsError("%s not found: cannot learn the live pods, nothing stopped (set the path, or pod_source)"
                              % (given or name))
    return path


def _run_json(runner, argv, what):
    rc, out, err = runner.run(argv, check=False)
    if rc != 0:
        raise MountUnitsError("%s failed (rc=%s): cannot tell live pods from dead ones, nothing stopped" % (what, rc),
                              cmd=argv, rc=rc, stdout=out, stderr=err)
    try:
        data = json.loads(out)
    except ValueError as exc:
        raise MountUnitsError("%s printed no JSON (%s): nothing stopped" % (what, exc), cmd=argv, rc=rc, stdout=out,
                              stderr=err)
    if not isinstance(data, dict):
        raise MountUnitsError("%s printed JSON that is not an object: nothing stopped" % what, cmd=argv, stdout=out)
    return data


def crictl_pod_uids(runner, crictl_path=None, runtime_endpoint=None):
    """Pod UIDs known to a CRI runtime: sandboxes (any state) and container labels."""
    crictl = _need_bin(runner, "crictl", crictl_path)
    base = [crictl] + (["--runtime-endpoint", runtime_endpoint] if runtime_endpoint else [])
    uids = set()
    pods = _run_json(runner, base + ["pods", "-o", "json"], "crictl pods -o json")
    items = pods.get("items") or []
    if not isinstance(items, list):
        raise MountUnitsError("crictl pods -o json: 'items' is not a list: nothing stopped")
    for item in items:
        uid = ((item or {}).get("metadata") or {}).get("uid")
        if not uid:
            raise MountUnitsError("crictl listed a pod sandbox without a UID (%s): refusing to guess, nothing stopped"
                                  % (item or {}).get("id"))
        uids.add(str(uid).lower())
    ctrs = _run_json(runner, base + ["ps", "-a", "-o", "json"], "crictl ps -a -o json")
    containers = ctrs.get("containers") or []
    if not isinstance(containers, list):
        raise MountUnitsError("crictl ps -a -o json: 'containers' is not a list: nothing stopped")
    for ctr in containers:
        uid = ((ctr or {}).get("labels") or {}).get(DOCKER_UID_LABEL)
        if uid:
            uids.add(str(uid).lower())
    return uids, {"sandboxes": len(items), "containers": len(containers)}


def docker_pod_uids(runner, docker_path=None):
    """Pod UIDs of kubelet's docker containers (label, else the k8s_ name), exited ones included."""
    docker = _need_bin(runner, "docker", docker_path)
    argv = [docker, "ps", "-a", "--no-trunc", "--format", '{{.Names}}\t{{.Label "%s"}}' % DOCKER_UID_LABEL]
    rc, out, err = runner.run(argv, check=False)
    if rc != 0:
        raise MountUnitsError("docker ps failed (rc=%s): cannot tell live pods from dead ones, nothing stopped" % rc,
                              cmd=argv, rc=rc, stdout=out, stderr=err)
    uids = set()
    lines = [line for line in out.splitlines() if line.strip()]
    for line in lines:
        names, _sep, label = line.partition("\t")
        label = label.strip()
        if label:
            uids.add(label.lower())
            continue
        for name in names.split(","):
            m = _DOCKER_NAME_RE.match(name.strip())
            if m:
                uids.add(m.group(1).lower())
            elif name.strip().startswith("k8s_"):
                raise MountUnitsError("docker container %s looks like kubelet's but carries no pod UID: refusing "
                                      "to guess, nothing stopped" % name.strip())
    return uids, {"containers": len(lines)}


def mount_guard(mountinfo_text, pods_dirs):
    """Pods whose volumes are still mounted under ``pods/<uid>/volumes/``.

    kubelet mounts a pod's volumes before it asks the runtime for the sandbox
    and unmounts them when it tears the pod down, so such a pod is being set
    up or still owned by kubelet whatever the runtime says.
    """
    held = {}
    for point in parse_mountinfo(mountinfo_text):
        uid, rest, _why = split_pod_path(point, pods_dirs)
        if uid is not None and (rest == "volumes" or rest.startswith("volumes/")):
            held.setdefault(uid, set()).add("volumes mounted")
    return held


def process_guard(root):
    """Pods that still have processes (a ``kubepods`` pod cgroup in ``/proc/<pid>/cgroup``).

    ``_core.cgroup.describe_path`` names the pod in both driver layouts, static pods
    (32 hex digits) included.
    """
    held = {}
    proc = root_path(root, "/proc")
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return held
    for pid in pids:
        text = read_text(os.path.join(proc, pid, "cgroup"))
        if not text or "pod" not in text:
            continue
        for path in set(parse_proc_cgroup(text).values()):
            uid = describe_path(path).get("pod_uid")
            if uid:
                held.setdefault(uid.lower(), set()).add("pod processes running")
    return held


# A pod whose directory changed this recently may still be starting: kubelet makes pods/<uid>/ and
# its sub-directories before it mounts the volumes (a slow volume - a CSI attach, an NFS server -
# can take minutes, with its transient mount scope already there) and before it asks the runtime
# for the sandbox; until then no sandbox, no mounted volume and no process show it alive.
STARTING_GRACE = 600


def young_pod_dirs(root, pods_dirs, now=None, grace=STARTING_GRACE):
    """Pods whose directory (or its ``volumes`` sub-directory) changed less than ``grace`` seconds ago."""
    now = time.time() if now is None else now
    held = {}
    base = root_path(root, pods_dirs[0])
    try:
        names = os.listdir(base)
    except OSError:
        return held
    for name in names:
        uid = name.lower()
        if not is_pod_uid(uid):
            continue
        ages = []
        for path in (os.path.join(base, name), os.path.join(base, name, "volumes")):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            ages.append(now - st.st_mtime)
        if ages and min(ages) < grace:
            held.setdefault(uid, set()).add("pod directory changed %d s ago (kubelet may still be starting the pod)"
                                            % max(0, int(min(ages))))
    return held


def pod_dirs(root, pods_dirs):
    """Pod UIDs that have a directory under the (first) pods dir."""
    try:
        names = os.listdir(root_path(root, pods_dirs[0]))
    except OSError:
        return set()
    return set(n.lower() for n in names if is_pod_uid(n.lower()))


# --------------------------------------------------------------------------
# the whole run


def normalize_options(opts):
    o = dict(
        kubelet_root_dir=DEFAULT_KUBELET_ROOT_DIR,
        pod_source="crictl",
        live_pod_uids=[],
        crictl_path=None,
        runtime_endpoint=None,
        docker_path=None,
        batch_size=DEFAULT_BATCH_SIZE,
        daemon_reload=False,
        reset_failed=True,
        list_limit=100,
        process_guard=True,
        systemctl_path=None,
        max_seconds=None,
        stop_method="transaction",
    )
    o.update(dict((k, v) for k, v in opts.items() if v is not None))
    if o["pod_source"] not in POD_SOURCES:
        raise MountUnitsError("pod_source must be one of %s, got %r" % (", ".join(POD_SOURCES), o["pod_source"]))
    if o["stop_method"] not in STOP_METHODS:
        raise MountUnitsError("stop_method must be one of %s, got %r" % (", ".join(STOP_METHODS), o["stop_method"]))
    if int(o["batch_size"]) < 1:
        raise MountUnitsError("batch_size must be at least 1, got %r" % (o["batch_size"],))
    if o["max_seconds"] is not None and float(o["max_seconds"]) <= 0:
        raise MountUnitsError("max_seconds must be more than 0, got %r" % (o["max_seconds"],))
    bad = [u for u in o["live_pod_uids"] or [] if not is_pod_uid(str(u).strip().lower())]
    if bad:
        raise MountUnitsError("live_pod_uids holds values that are not pod UIDs: %s" % ", ".join(str(b) for b in bad[:10]))
    return o


def _systemctl(runner, opts):
    path = runner.bin(opts.get("systemctl_path") or "systemctl")
    if not path:
        raise MountUnitsError("systemctl not found: this node does not run systemd, nothing to do")
    return path


def _list_units(runner, systemctl, pods_dirs):
    """(every unit listed, kubelet's units attributed to pods, ``systemctl show`` calls made)."""
    argv = [systemctl, "list-units", "--all", "--plain", "--no-legend", "--full"]
    rc, out, err = runner.run(argv, check=False)
    if rc != 0:
        raise MountUnitsError("systemctl list-units failed (rc=%s)" % rc, cmd=argv, rc=rc, stdout=out, stderr=err)
    listed = parse_list_units(out)
    units, needs_show = kubelet_units(listed, pods_dirs)
    show_calls = 0
    if needs_show:
        shown = {}
        for batch in chunks(needs_show):
            argv = [systemctl, "show", "-p", "Id,Description,LoadState,ActiveState,SubState,Where"] + batch
            rc, out, err = runner.run(argv, check=False)
            show_calls += 1
            if rc != 0:
                raise MountUnitsError("systemctl show failed (rc=%s)" % rc, cmd=argv[:5], rc=rc, stdout=out, stderr=err)
            shown.update(parse_show(out))
        units = apply_show(units, shown)
    attribute(units, pods_dirs)
    return listed, units, show_calls


def _live_pods(runner, o, runtime_errors):
    """(live pod uids -> who said so, the runtime query's record)."""
    live = {}
    runtime = {"source": o["pod_source"], "queried": False, "pods": 0, "error": None}
    if o["pod_source"] != "list":
        try:
            if o["pod_source"] == "crictl":
                uids, detail = crictl_pod_uids(runner, o["crictl_path"], o["runtime_endpoint"])
            else:
                uids, detail = docker_pod_uids(runner, o["docker_path"])
        except MountUnitsError as exc:
            if runtime_errors == "raise":
                raise
            runtime["error"] = exc.msg
        else:
            runtime.update(detail, queried=True, pods=len(uids))
            for uid in uids:
                live[uid] = o["pod_source"]
    return live, runtime


def _guards(root, o, pods_dirs):
    """Pod uids a unit must not be stopped for, with why (a mount in use, a process, a young pod dir)."""
    guards = {}
    mountinfo = read_text(root_path(root, "/proc/self/mountinfo"), "")
    for uid, reasons in mount_guard(mountinfo, pods_dirs).items():
        guards.setdefault(uid, set()).update(reasons)
    if o["process_guard"]:
        for uid, reasons in process_guard(root).items():
            guards.setdefault(uid, set()).update(reasons)
    for uid, reasons in young_pod_dirs(root, pods_dirs).items():
        guards.setdefault(uid, set()).update(reasons)
    return guards


def survey(runner, root="/", runtime_errors="raise", **opts):
    """List and attribute kubelet's units; learn live pods and guards; classify.

    Read-only. Order matters: units are listed BEFORE the runtime is asked, so
    a pod that starts in between is either in the runtime's answer or has no
    unit in the listing. Raises ``MountUnitsError`` when systemd cannot be
    asked, or (``runtime_errors='raise'``) when kubelet units exist and the
    live pods cannot be learnt; with ``runtime_errors='record'`` the error is
    kept in ``runtime['error']`` and those units are ``unverified``.
    """
    o = normalize_options(opts)
    systemctl = _systemctl(runner, o)
    timings = {}
    t0 = time.time()
    rc, out, _err = runner.run([systemctl, "--version"], check=False)
    version = parse_systemd_version(out) if rc == 0 else None
    pods_dirs = pods_dirs_for(root, o["kubelet_root_dir"])
    listed, units, show_calls = _list_units(runner, systemctl, pods_dirs)
    timings["list_s"] = round(time.time() - t0, 3)

    t1 = time.time()
    attributable = [u for u in units if u["pod_uid"]]
    if attributable:
        live, runtime = _live_pods(runner, o, runtime_errors)
    else:
        live, runtime = {}, {"source": o["pod_source"], "queried": False, "pods": 0, "error": None}
    for uid in o["live_pod_uids"] or []:
        live.setdefault(str(uid).strip().lower(), "caller")
    guards = _guards(root, o, pods_dirs) if attributable else {}
    timings["pods_s"] = round(time.time() - t1, 3)
    classify(units, live, guards, runtime_known=runtime["error"] is None)
    # no process: two lookups on PATH (the detector's estimate follows the method a cleanup would use)
    tools = transaction.tools(runner, systemctl, version) if o["stop_method"] == "transaction" else None
    return {
        "options": o,
        "systemctl": systemctl,
        "stop_tools": tools,
        "stop_method": "transaction" if tools else "systemctl",
        "systemd_version": version,
        "units_total": len(listed),
        "pods_dirs": pods_dirs,
        "units": units,
        "live": live,
        "guards": guards,
        "runtime": runtime,
        "show_calls": show_calls,
        "timings": timings,
    }


def _cap(items, limit):
    items = list(items)
    return items if not limit or limit <= 0 else items[:limit]


def empty_record():
    return {"stop_calls": 0, "transactions": 0, "fallbacks": 0, "stopped": [], "reset": [], "reset_after_stop": [],
            "daemon_reload": False, "errors": [], "still_active": [], "verified": True, "left": []}


# What a stop costs through systemd, measured by benchmarks/mount_units/curve.py on the lab nodes (one
# container per Debian release, 10,000 leaked scopes stopped in timed batches of 1,000; the table and
# the plot are in benchmarks/mount_units/README.md): systemd's work per stop grows with the units
# loaded, faster than linearly on 252/257, so a stop costs f(L) = A + B*L + C*L^2 ms while L units
# are loaded, and stopping k of N loaded units costs k times the average of f over L from N down to
# N-k: k * (A + B*(N - k/2) + C*(N^2 - N*k + k^2/3)) ms. A, B, C are plot.py's least-squares fit per
# systemd version; a node's version uses the nearest measured one (the older on a tie) and
# ``estimate_basis`` says which. The module adds ~10 % (its own listing, guards and batching);
# beyond 10,000 units the curve is extrapolated. Measured on a 2-core machine: a faster one stops
# faster, the shape stays.
STOP_COST_MS = {
    # systemd version: (A ms, B ms per loaded unit, C ms per loaded unit squared)
    247: (1.394, 0.0002885, 0.0),
    252: (2.808, -0.0005642, 2.289e-07),
    257: (2.834, 7.805e-05, 2.332e-07),
}
STOP_COST_SOURCE = {
    247: "Debian 11 lab: 10,000 scopes stopped in 28.8 s, 1.4 ms a unit at 1,152 loaded, 3.8 at 10,152",
    252: "Debian 12 lab: 10,000 scopes stopped in 79.4 s, 1.5 ms a unit at 1,182 loaded, 20.4 at 10,182",
    257: "Debian 13 lab: 10,000 scopes stopped in 114.7 s, 2.0 ms a unit at 1,192 loaded, 28.0 at 10,192",
}
# The same for stop_method=transaction (one systemd transaction a batch: curve.py --method transaction, the
# same lab and harness, each batch timed until systemd is idle again): a transaction returns sooner, but
# systemd recomputes the slice's masks for the units that left after it, so the cost per unit still grows
# with the units loaded - 38 % (252) and 17 % (257) below systemctl stop's measured the same day.
TRANSACTION_COST_MS = {
    247: (2.328, -0.0002673, 6.83e-08),
    252: (-0.4462, 0.001309, 8.649e-08),
    257: (-2.019, 0.003703, 1.492e-09),
}
TRANSACTION_COST_SOURCE = {
    247: "Debian 11 lab: 10,000 scopes stopped in 33.3 s in transactions of 1,000, 1.8 ms a unit at 1,152 loaded, 6.4 at 10,152",
    252: "Debian 12 lab: 10,000 scopes stopped in 93.8 s in transactions of 1,000, 1.1 ms a unit at 1,182 loaded, 19.7 at 10,182",
    257: "Debian 13 lab: 10,000 scopes stopped in 172.6 s in transactions of 1,000, 1.7 ms a unit at 1,192 loaded, 31.7 at 10,192",
}
DEFAULT_COST_VERSION = 252
MODULE_OVERHEAD = 1.10
# f(L) never below this (a stop is never free)
MIN_STOP_MS = 0.5


def _costs(method):
    """(the cost table, its sources) of a stop method."""
    if method == "transaction":
        return TRANSACTION_COST_MS, TRANSACTION_COST_SOURCE
    return STOP_COST_MS, STOP_COST_SOURCE


def cost_version(systemd_version, method="systemctl"):
    """The measured systemd version whose curve (of ``method``) estimates a node on ``systemd_version``."""
    table = _costs(method)[0]
    if systemd_version is None:
        return DEFAULT_COST_VERSION
    return min(sorted(table), key=lambda v: abs(v - int(systemd_version)))


def estimate_basis(systemd_version, method="systemctl"):
    v = cost_version(systemd_version, method)
    text = "systemd %d curve%s (%s)" % (v, ", one transaction a batch" if method == "transaction" else "",
                                        _costs(method)[1][v])
    if systemd_version is not None and int(systemd_version) != v:
        text += ", the nearest measured to this node's systemd %s" % systemd_version
    elif systemd_version is None:
        text += ", this node's systemd version unknown"
    return text


def estimate_seconds(units_loaded, to_stop, systemd_version=None, method="systemctl"):
    """Seconds to stop ``to_stop`` units while ``units_loaded`` units are loaded (the cost model above), with
    ``method`` (``stop_method``: its own curve)."""
    n, k = float(max(int(units_loaded or 0), int(to_stop or 0))), float(int(to_stop or 0))
    if k <= 0:
        return 0.0
    a, b, c = _costs(method)[0][cost_version(systemd_version, method)]
    per_unit_ms = max(MIN_STOP_MS, a + b * (n - k / 2.0) + c * (n * n - n * k + k * k / 3.0))
    return round(k * per_unit_ms / 1000.0 * MODULE_OVERHEAD, 2)


def reboot_faster(estimate, reboot_over_seconds):
    """Whether a drained reboot beats the cleanup: its estimate exceeds ``reboot_over_seconds`` (0: never).

    The one place this is decided, for the detector (``mount_units.cleanup_slow``),
    the module (``reboot_recommended``) and so the role's reboot path.
    """
    return bool(reboot_over_seconds) and reboot_over_seconds > 0 and estimate > reboot_over_seconds


def summarize(plan, record, check_mode=False):
    """The module's (and the timer's) result from a survey and what was done."""
    o = plan["options"]
    limit = o["list_limit"]
    units = plan["units"]
    by_status = {}
    for unit in units:
        by_status.setdefault(unit["status"], []).append(unit)
    orphaned = by_status.get("orphaned", [])
    to_stop = [u["unit"] for u in orphaned if u["action"] == "stop"]
    to_reset = [u["unit"] for u in orphaned if u["action"] == "reset"] if o["reset_failed"] else []
    dead_mounts = [u["unit"] for u in orphaned if u["action"] == "reload"]
    kept = by_status.get("live", []) + by_status.get("guarded", [])
    version = plan["systemd_version"]
    if check_mode:
        changed = bool(to_stop or to_reset or (dead_mounts and o["daemon_reload"]))
    else:
        changed = bool(record["stopped"] or record["reset"] or record["reset_after_stop"] or record["daemon_reload"])
    return {
        "changed": changed,
        "systemd": {
            "version": version,
            "has_fix": None if version is None else version >= SYSTEMD_FIX_VERSION,
            "fixed_in": SYSTEMD_FIX_VERSION,
            "units_total": plan["units_total"],
            "unit_limit": SYSTEMD_UNIT_LIMIT,
        },
        "pods_dirs": plan["pods_dirs"],
        "runtime": plan["runtime"],
        "total": len(units),
        "scopes": sum(1 for u in units if u["kind"] == "scope"),
        "mounts": sum(1 for u in units if u["kind"] == "mount"),
        "orphaned": len(orphaned),
        "orphaned_scopes": sum(1 for u in orphaned if u["kind"] == "scope"),
        "to_stop": len(to_stop),
        "stopped": len(record["stopped"]),
        "reset_failed": len(record["reset"]) + len(record["reset_after_stop"]),
        "dead_mount_units": len(dead_mounts),
        "daemon_reload": record["daemon_reload"],
        "kept_live": len(kept),
        "kept_by_runtime": len(by_status.get("live", [])),
        "kept_by_guard": len(by_status.get("guarded", [])),
        "unverified": len(by_status.get("unverified", [])),
        "unattributable": len(by_status.get("unattributable", [])),
        "still_active": len(record["still_active"]),
        "left": len(record.get("left") or []),
        "left_units": _cap(sorted(record.get("left") or []), limit),
        "estimate_seconds": estimate_seconds(plan["units_total"], len(to_stop), version, plan["stop_method"]),
        "estimate_left_seconds": estimate_seconds(plan["units_total"] - len(record["stopped"]),
                                                  len(record.get("left") or []), version, plan["stop_method"]),
        "estimate_basis": estimate_basis(version, plan["stop_method"]),
        "stop_calls": record["stop_calls"],
        "stop_method": plan["stop_method"],
        "transactions": record["transactions"],
        "fallbacks": record["fallbacks"],
        "show_calls": plan["show_calls"],
        "to_stop_units": _cap(sorted(to_stop), limit),
        "stopped_units": _cap(sorted(record["stopped"]), limit),
        "dead_mount_unit_names": _cap(sorted(dead_mounts), limit),
        "kept_units": _cap([{"unit": u["unit"], "pod_uid": u["pod_uid"], "reason": u["reason"]} for u in kept], limit),
        "unattributable_units": _cap([{"unit": u["unit"], "path": u["path"], "reason": u["reason"]}
                                      for u in by_status.get("unattributable", [])], limit),
        "still_active_units": _cap(record["still_active"], limit),
        "orphaned_pod_uids": _cap(sorted(set(u["pod_uid"] for u in orphaned)), limit),
        "errors": record["errors"],
        "timings": dict(plan["timings"], stop_s=record.get("stop_s", 0.0), verify_s=record.get("verify_s", 0.0)),
    }


# --------------------------------------------------------------------------
# node_audit detector


# How the units are surveyed (an Ansible argument spec): kubelet_mount_units'
# argument_spec shares it; the detector (node_audit's options.mount_units)
# adds near_limit_ratio. Both are checked by Ansible's validator (_core.options).
SURVEY_OPTIONS = {
    "kubelet_root_dir": {"type": "path", "default": DEFAULT_KUBELET_ROOT_DIR},
    "pod_source": {"type": "str", "default": "crictl", "choices": list(POD_SOURCES)},
    "live_pod_uids": {"type": "list", "elements": "str", "default": []},
    "crictl_path": {"type": "path"},
    "runtime_endpoint": {"type": "str"},
    "docker_path": {"type": "path"},
    "list_limit": {"type": "int", "default": 100},
}
OPTIONS = dict(SURVEY_OPTIONS, near_limit_ratio={"type": "float", "default": 0.5},
               # report mount_units.cleanup_slow when the estimated cleanup is longer (0: never)
               reboot_over_seconds={"type": "float", "default": 3600})


def option_errors(p):
    """What the spec cannot say about the detector's options (typed ``p``)."""
    errors = []
    ratio = p.get("near_limit_ratio")
    if ratio is not None and not 0 < ratio <= 1:
        errors.append("near_limit_ratio must be above 0 and at most 1 (a share of systemd's %d units), got %s"
                      % (SYSTEMD_UNIT_LIMIT, ratio))
    if (p.get("reboot_over_seconds") or 0) < 0:
        errors.append("reboot_over_seconds must be 0 (never) or more, got %s" % p.get("reboot_over_seconds"))
    try:
        normalize_options(dict((k, v) for k, v in p.items() if k in SURVEY_OPTIONS))
    except MountUnitsError as exc:
        errors.append(exc.msg)
    return errors


def check(runner, root="/", **opts):
    """Detector for node_audit: facts and findings; never changes anything.

    Options: OPTIONS (the survey's plus ``near_limit_ratio``: report
    ``mount_units.near_unit_limit`` from this share of the 131072 units).
    """
    o = dict(opts)
    near = float(o.pop("near_limit_ratio", None) or 0.5)
    reboot_over = o.pop("reboot_over_seconds", None)
    reboot_over = 3600 if reboot_over is None else float(reboot_over)
    facts = {"mount_units": None, "findings": []}
    findings = facts["findings"]
    if runner.bin(o.get("systemctl_path") or "systemctl") is None:
        # no systemd on the node: no transient units to leak (nothing to check, not a failure)
        facts["mount_units"] = {"error": "systemctl not found: not a systemd node, no transient mount units"}
        return facts
    # a survey that cannot run (systemctl list-units failing) raises: the audit reports the
    # detector as failed (audit.check_failed), never as a node without leaked units
    plan = survey(runner, root=root, runtime_errors="record", **o)
    result = summarize(plan, empty_record(), check_mode=True)
    facts["mount_units"] = result
    if plan["runtime"]["error"]:
        findings.append(finding_from(FINDINGS, "mount_units.runtime_unavailable", subject=plan["runtime"]["source"],
                                     evidence={"error": plan["runtime"]["error"], "kubelet_units": result["total"]}))
    scopes = [u for u in plan["units"] if u["status"] == "orphaned" and u["kind"] == "scope"]
    mounts = [u for u in plan["units"] if u["status"] == "orphaned" and u["kind"] == "mount"]
    if scopes:
        findings.append(finding_from(FINDINGS, "mount_units.leaked_scopes", evidence={
            "count": len(scopes), "pods": len(set(u["pod_uid"] for u in scopes)),
            "sample": [u["unit"] for u in scopes[:5]]}))
    if mounts:
        findings.append(finding_from(FINDINGS, "mount_units.dead_mount_units", evidence={
            "count": len(mounts), "inactive_dead": sum(1 for u in mounts if u["action"] == "reload"),
            "sample": [u["unit"] for u in mounts[:5]]}))
    version = result["systemd"]["version"]
    if version is not None and version < SYSTEMD_FIX_VERSION and (result["total"] or pod_dirs(root, plan["pods_dirs"])):
        findings.append(finding_from(FINDINGS, "mount_units.systemd_without_fix", subject="systemd %s" % version,
                                     evidence={"version": version, "fixed_in": SYSTEMD_FIX_VERSION,
                                               "kubelet_units": result["total"]}))
    if reboot_faster(result["estimate_seconds"], reboot_over):
        findings.append(finding_from(FINDINGS, "mount_units.cleanup_slow", evidence={
            "estimate_seconds": result["estimate_seconds"], "reboot_over_seconds": reboot_over,
            "to_stop": result["to_stop"], "units_loaded": result["systemd"]["units_total"],
            "estimate_basis": result["estimate_basis"]}))
    total = result["systemd"]["units_total"]
    if total >= int(SYSTEMD_UNIT_LIMIT * near):
        findings.append(finding_from(FINDINGS, "mount_units.near_unit_limit",
                                     severity="critical" if total >= int(SYSTEMD_UNIT_LIMIT * 0.9) else None,
                                     evidence={"units": total, "limit": SYSTEMD_UNIT_LIMIT,
                                               "kubelet_units": result["total"]}))
    return facts
