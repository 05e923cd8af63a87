# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice; do not import it
# from other collections.
"""The live pods a unit must not be stopped for: the container runtime's answer and the second guard.

The runtime (``crictl pods``/``ps -a -o json``, or docker's ``io.kubernetes.pod.uid`` label) says which
pods exist; a failing or unparsable answer raises ``MountUnitsError`` before anything is stopped. The
second guard, independent of the runtime: volumes still mounted under ``pods/<uid>/volumes/``
(``/proc/self/mountinfo``), processes in a pod cgroup (``/proc/<pid>/cgroup``), and a pod directory
changed in the last ``STARTING_GRACE`` seconds."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.cgroup import (
    describe_path,
    is_pod_uid,
    parse_proc_cgroup,
)
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.errors import MountUnitsError
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.systemd import parse_mountinfo, split_pod_path

DOCKER_UID_LABEL = "io.kubernetes.pod.uid"
# docker names kubelet containers k8s_<container>_<pod>_<namespace>_<uid>_<attempt>
_DOCKER_NAME_RE = lazy_compile(r"^/?k8s_[^_]+_[^_]+_[^_]+_([0-9a-fA-F-]{32,36})_[0-9]+$")


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
