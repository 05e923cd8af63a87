# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Will a kubelet fix survive the tool that manages the node?

A fix written into the file a cluster tool regenerates is gone at that tool's
next run (``kubeadm upgrade node`` rewrites ``/var/lib/kubelet/config.yaml``
from the ``kube-system/kubelet-config`` ConfigMap; the next kubespray run
re-templates ``/etc/kubernetes/kubelet-config.yaml`` and ``kubelet.env`` from
inventory variables; kOps' nodeup rewrites everything from the cluster spec).
``durability`` says, for every setting a plan changes, whether it survives
and where to make it durable; it owns the finding ``kubelet.fix_not_durable``.

A drop-in in the kubelet's ``--config-dir`` survives all three: none of them
writes that directory's other files, and a drop-in overrides the main file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import yaml_flow

FINDINGS = {
    "kubelet.fix_not_durable": {
        "severity": "low",
        "title": "A kubelet fix is written where the node's cluster tool will overwrite it",
        "remedy": "make the change where the tool reads it (the finding names the place for each setting)",
        "role": None, "tag": None,
    },
}

# kubespray (kubernetes-sigs/kubespray v2.31.0-96-g46dbdd399, 2026-08-21):
# roles/kubernetes/node/templates/kubelet-config.v1beta1.yaml.j2 writes these
# fields from these inventory variables (defaults in
# roles/kubernetes/node/defaults/main.yml and
# roles/kubespray_defaults/defaults/main/main.yml); every other field goes
# through kubelet_config_extra_args, a dict merged into the same file.
KUBESPRAY_VARS = {
    "eventRecordQPS": "kubelet_event_record_qps",
    "maxParallelImagePulls": "kubelet_max_parallel_image_pulls",
    "podPidsLimit": "kubelet_pod_pids_limit",
    "maxPods": "kubelet_max_pods",
    "evictionHard": "eviction_hard",
    # the template always writes both maps from the four per-resource variables
    # (system_reserved/kube_reserved only add the *ReservedCgroup fields)
    "systemReserved": "system_cpu_reserved, system_memory_reserved, system_ephemeral_storage_reserved, "
                      "system_pid_reserved",
    "kubeReserved": "kube_cpu_reserved, kube_memory_reserved, kube_ephemeral_storage_reserved, kube_pid_reserved",
}
KUBESPRAY_EXTRA = "kubelet_config_extra_args"
# kubelet.env's KUBELET_ARGS ends with kubelet_custom_flags (templates/kubelet.env.v1beta1.j2)
KUBESPRAY_FLAGS = "kubelet_custom_flags"

# kOps (kubernetes/kops v1.37.0-alpha.1-280, pkg/apis/kops/v1alpha2/componentconfig.go,
# KubeletConfigSpec): the cluster or instance group spec fields; kubeAPIBurst has none.
KOPS_FIELDS = {
    "kubeAPIQPS": "kubeAPIQPS",
    "eventRecordQPS": "eventRecordQPS",
    "eventBurst": "eventBurst",
    "registryPullQPS": "registryPullQPS",
    "registryBurst": "registryBurst",
    "serializeImagePulls": "serializeImagePulls",
    "maxParallelImagePulls": "maxParallelImagePulls",
    "podPidsLimit": "podPidsLimit",
    "maxPods": "maxPods",
    "evictionHard": "evictionHard",
    "evictionSoft": "evictionSoft",
    "systemReserved": "systemReserved",
    "kubeReserved": "kubeReserved",
}

KUBEADM_CONFIG = "/var/lib/kubelet/config.yaml"
KUBEADM_FLAGS_ENV = "/var/lib/kubelet/kubeadm-flags.env"
KUBESPRAY_CONFIG = "/etc/kubernetes/kubelet-config.yaml"


def manager(layout):
    """The tool that regenerates the kubelet's files on this layout (None: nothing known does)."""
    return layout if layout in ("kubeadm", "kubespray", "kops") else None


def _where(mgr, field, value):
    """Where to make ``field: value`` durable under ``mgr``, the value as YAML (a map as ``{key: value}``, never a
    Python repr): what a person pastes into the ConfigMap, the inventory or the kOps spec."""
    value = yaml_flow(value)
    if mgr == "kubeadm":
        return ("the kubelet-config ConfigMap in kube-system (data key kubelet, field %s: %s); "
                "kubeadm upgrade node writes %s from it" % (field, value, KUBEADM_CONFIG))
    if mgr == "kubespray":
        var = KUBESPRAY_VARS.get(field)
        if var:
            return "the kubespray inventory variable %s (%s: %s)" % (var, field, value)
        return "the kubespray inventory variable %s: {%s: %s}" % (KUBESPRAY_EXTRA, yaml_flow(field), value)
    if mgr == "kops":
        spec = KOPS_FIELDS.get(field)
        if spec:
            return "the kOps cluster or instance group spec: spec.kubelet.%s: %s" % (spec, value)
        return "nowhere in kOps' spec.kubelet (it has no %s field): the kubelet default applies after nodeup" % field
    return None


def _regenerated(mgr, path):
    """Whether ``mgr`` rewrites ``path`` on its next run."""
    if mgr == "kops":
        return True
    if mgr == "kubeadm":
        return path in (KUBEADM_CONFIG, KUBEADM_FLAGS_ENV)
    if mgr == "kubespray":
        return path == KUBESPRAY_CONFIG or path.endswith("/kubelet.env")
    return False


def durability(layout, targets, effective, flag_edits=()):
    """Per wanted setting and removed flag: does it survive the manager's next run, and where to make it so.

    ``targets``: {field: value} the plan ensures; ``effective``: the kubelet's effective configuration after the
    plan ({field: {value, source, path}}, ``_kubelet.node.report``) - a setting is durable when the file it comes from
    is not one the manager rewrites; ``flag_edits``: the stale flags the plan removes ({path, flag, ...}).
    Returns {"manager", "settings": [{field, value, path, durable, durable_in}], "flags": [...], "durable"}.
    """
    mgr = manager(layout)
    settings = []
    for field in sorted(targets):
        path = (effective.get(field) or {}).get("path")
        survives = not (path and _regenerated(mgr, path))
        settings.append({"field": field, "value": targets[field], "path": path, "durable": survives,
                         "durable_in": None if survives else _where(mgr, field, targets[field])})
    flags = []
    for edit in flag_edits or []:
        path = edit.get("path")
        survives = not (path and _regenerated(mgr, path))
        where = None
        if not survives and mgr == "kubeadm":
            where = ("the kubeadm configuration's nodeRegistration.kubeletExtraArgs: kubeadm writes %s from it at "
                     "init, join and upgrade" % KUBEADM_FLAGS_ENV)
        elif not survives and mgr == "kubespray":
            where = "the kubespray inventory variable %s (kubelet.env's KUBELET_ARGS)" % KUBESPRAY_FLAGS
        elif not survives and mgr == "kops":
            where = "the kOps spec.kubelet field that sets this flag"
        flags.append(dict(edit, durable=survives, durable_in=where))
    return {"manager": mgr, "settings": settings, "flags": flags,
            "durable": all(s["durable"] for s in settings) and all(f["durable"] for f in flags)}


def findings(report):
    """``kubelet.fix_not_durable`` for a durability report that is not durable."""
    if report["durable"]:
        return []
    lost = [s for s in report["settings"] if not s["durable"]] + [f for f in report["flags"] if not f["durable"]]
    return [finding_from(FINDINGS, "kubelet.fix_not_durable", subject=report["manager"], evidence={
        "manager": report["manager"],
        "settings": dict((s["field"], s["durable_in"]) for s in report["settings"] if not s["durable"]),
        "flags": [{"flag": f.get("flag"), "path": f.get("path"), "durable_in": f["durable_in"]}
                  for f in report["flags"] if not f["durable"]],
        "count": len(lost)})]
