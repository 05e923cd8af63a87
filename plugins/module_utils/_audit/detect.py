# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""Run detectors, isolate their failures, merge their findings.

Imports no detector: ``_audit`` runs every detector through it (node_audit), and the
node-problem-detector plugin (``_npd``) only the few one condition needs - it runs on
every node every few minutes, and importing every detector was most of its cost.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import SEVERITIES, finding_from, worst_severity
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

FINDINGS = {
    "audit.check_failed": {
        "severity": "medium",
        "title": "A detector could not complete on this node; its problem may be present but unreported",
        "remedy": "Read the error in the evidence, fix access (become, missing files) and run the audit again.",
        "role": None,
        "tag": None,
    },
    "audit.not_kubernetes_node": {
        "severity": "info",
        "title": "Not a Kubernetes node: neither a kubelet nor a container runtime was found",
        "remedy": "Take the host out of the targeted group (nodefix_targets) or point the audit at the node's root; "
                  "remediate leaves it alone.",
        "role": None,
        "tag": None,
    },
}


def fix_roles(findings):
    """The roles that fix ``findings`` (their ``fix.role``), sorted, each once."""
    return sorted(set(f["fix"]["role"] for f in findings if f.get("fix", {}).get("role")))


def kubernetes_node(results):
    """Whether the audited host is a Kubernetes node, from the kubelet and containerd detectors' facts:
    False when both ran and found neither a kubelet (unit or binary) nor containerd; True when either
    found its component; None when either did not run or failed (not known: never a verdict)."""
    kubelet, containerd = results.get("kubelet"), results.get("containerd")
    if not isinstance(kubelet, dict) or not isinstance(containerd, dict) or "error" in kubelet or "error" in containerd:
        return None
    present = (kubelet.get("kubelet") or {}).get("present")
    installed = containerd.get("installed")
    if present is True or installed is True:
        return True
    if present is False and installed is False:
        return False
    return None


def _not_a_node(results):
    """The ``audit.not_kubernetes_node`` finding, with what was looked for."""
    containerd = results["containerd"]
    return finding_from(FINDINGS, "audit.not_kubernetes_node", subject="node", evidence={
        "kubelet": results["kubelet"].get("kubelet"),
        "containerd": dict((k, containerd.get(k)) for k in ("installed", "binary", "config_path", "config_exists"))})


def run_detectors(runner, detectors, root="/", options=None):
    """Run ``detectors`` ([(name, module_utils module)], in that order); return {checks: {name: facts},
    findings, summary, timings}.

    ``options`` ({detector: {option: value}}) must already be validated
    (``_core.options.validate``). A detector that fails (a ``NodefixError`` such as
    a required command failing, or any exception) does not stop the others:
    it becomes an ``audit.check_failed`` finding, plus the findings the
    error carries (``exc.findings``: what the detector could still tell, e.g.
    the kubelet's ``kubelet.config_unreadable``).
    """
    options = options or {}
    results = {}
    findings = []
    timings = {}
    for name, mod in detectors:
        started = time.time()
        try:
            out = dict(mod.check(runner, root=root, **(options.get(name) or {})))
            found = out.pop("findings", [])
            results[name] = out
        except NodefixError as exc:
            evidence = dict((k, v) for k, v in exc.fail_kwargs().items() if v not in (None, ""))
            found = [finding_from(FINDINGS, "audit.check_failed", subject=name, evidence=evidence)]
            found += [dict(f) for f in getattr(exc, "findings", None) or []]
            results[name] = {"error": exc.msg}
        except Exception as exc:  # pylint: disable=broad-except
            # only on a detector's own bug: not imported on every run of the node-problem-detector plugin
            import traceback  # pylint: disable=import-outside-toplevel
            found = [finding_from(FINDINGS, "audit.check_failed", subject=name,
                                  evidence={"msg": "%s: %s" % (type(exc).__name__, exc),
                                            "traceback": traceback.format_exc().splitlines()[-6:]})]
            results[name] = {"error": str(exc)}
        for f in found:
            f["check"] = name
        findings.extend(found)
        timings[name] = round(time.time() - started, 4)
    is_node = kubernetes_node(results)
    if is_node is False:
        found = _not_a_node(results)
        found["check"] = "audit"
        findings.append(found)

    counts = dict((level, 0) for level in SEVERITIES)
    for f in findings:
        counts[f["severity"]] += 1
    return {
        "checks": results,
        "findings": findings,
        "summary": {
            "total": len(findings),
            "by_severity": counts,
            "worst": worst_severity(findings),
            "fix_roles": fix_roles(findings),
            "ids": sorted(set(f["id"] for f in findings)),
            # False: no kubelet and no container runtime (remediate leaves such a host alone); None: not known
            "kubernetes_node": is_node,
        },
        "timings": timings,
    }
