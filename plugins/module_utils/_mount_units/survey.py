# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""The read-only survey of kubelet's transient mount units: list, attribute, learn live pods, classify.

A CONSTANT number of ``systemctl`` calls however many units exist: ``systemctl --version``, ONE
``list-units``, and ``systemctl show`` (batched, argv chunked below ARG_MAX) only for the few mount
units whose listed line does not settle their mount point. ``survey()`` is what the detector
(``_mount_units.detect``), the module and the timer's cleanup (``_mount_units.cleanup``) start from."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.cgroup import is_pod_uid
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.errors import MountUnitsError
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.pods import (
    crictl_pod_uids,
    docker_pod_uids,
    mount_guard,
    process_guard,
    young_pod_dirs,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.systemd import (
    chunks,
    DEFAULT_KUBELET_ROOT_DIR,
    parse_list_units,
    parse_show,
    parse_systemd_version,
    pods_dirs_for,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.units import apply_show, attribute, classify, kubelet_units
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import transaction

DEFAULT_BATCH_SIZE = 1000
POD_SOURCES = ("crictl", "docker", "list")
# how orphans are stopped: one systemd transaction a batch (_mount_units.transaction), or systemctl stop
STOP_METHODS = ("transaction", "systemctl")


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


# How the units are surveyed (an Ansible argument spec): kubelet_mount_units'
# argument_spec shares it; the detector (node_audit's options.mount_units)
# adds near_limit_ratio and reboot_over_seconds. Both are checked by Ansible's validator (_core.options).
SURVEY_OPTIONS = {
    "kubelet_root_dir": {"type": "path", "default": DEFAULT_KUBELET_ROOT_DIR},
    "pod_source": {"type": "str", "default": "crictl", "choices": list(POD_SOURCES)},
    "live_pod_uids": {"type": "list", "elements": "str", "default": []},
    "crictl_path": {"type": "path"},
    "runtime_endpoint": {"type": "str"},
    "docker_path": {"type": "path"},
    "list_limit": {"type": "int", "default": 100},
}
