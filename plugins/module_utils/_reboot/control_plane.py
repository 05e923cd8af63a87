# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""May this control-plane node be disrupted now (drained, restarted, rebooted)? And may a slot a
node holds from an earlier run be given back? Decided on the controller.

- A control-plane node is one the API server labels ``node-role.kubernetes.io/control-plane``
  (kubeadm since v1.20) or the legacy ``node-role.kubernetes.io/master`` (kubeadm's
  ``constants.LabelNodeRoleControlPlane`` / ``LabelNodeRoleOldControlPlane``), or one the caller
  says is (its inventory group, kubeadm's static pod manifests on the node).
- It is never disrupted unless the caller opts in. Opted in, at most one control-plane node is
  disrupted at a time fleet-wide - one slot of its own Lease lock (``LeaseLock`` with one slot) -
  and only when every etcd member is healthy first - as Cluster API's KubeadmControlPlane remediates
  a machine only when etcd keeps its quorum without it (controlplane/kubeadm/internal/controllers/
  remediation.go, ``canSafelyRemoveEtcdMember``: "Remediation MUST preserve etcd quorum"), and
  medik8s Node Healthcheck remediates one control-plane node at a time after asking whether etcd can
  take it (controllers/nodehealthcheck_controller.go; medik8s/common pkg/etcd
  ``IsEtcdDisruptionAllowed``, which reads OpenShift's etcd quorum-guard PodDisruptionBudget - here
  the members themselves are read, which works on any kubeadm cluster):
    * etcd as kubeadm runs it - a static pod per control-plane node in ``kube-system`` labelled
      ``component=etcd`` (``tier=control-plane``), named ``etcd-<node>`` (kubeadm
      cmd/kubeadm/app/util/staticpod/utils.go ``ComponentPod``): every control-plane
      node has its member, every member pod is Running and Ready, and the API server's
      ``GET /readyz/etcd`` answers ``ok`` (its etcd health check);
    * etcd outside the cluster (no ``component=etcd`` pod at all): a health command the user gives
      (``etcdctl endpoint health --cluster`` ...) exits 0; without one the control plane is held.
- Its slot is given back only once its own etcd member is Ready again (or, external etcd, the
  health command passes again).
- **An etcd member is guarded whatever its labels say**: a node that runs an etcd member (a
  ``component=etcd`` pod in ``kube-system`` bound to it - kubeadm's and RKE2's static pods, mirrored as
  ``etcd-<node>``) or carries RKE2's ``node-role.kubernetes.io/etcd`` label is a control-plane node to
  the guard: RKE2's etcd-only nodes and a kubeadm node whose role label was removed are not workers.
- **Quorum arithmetic counts etcd members, not etcd pods**: opted in, a member is taken down only when the
  members left keep a majority of the cluster's members, ``floor(n / 2) + 1`` of ``n``. The members are
  every ``component=etcd`` pod, and a member for every node that should run one but shows no pod (a
  control-plane node, a node labelled ``node-role.kubernetes.io/etcd``): a missing pod is a member that is
  down, as a pod that is not Running and Ready is - never a smaller cluster -, and so is a pod whose Node is
  not Ready (its kubelet no longer reports: the pod's Ready is stale). With etcd outside the cluster,
  the members are the endpoints the health command's output names (``etcdctl endpoint health --cluster``:
  ``<endpoint> is healthy``/``is unhealthy`` lines, ``-w json`` or ``-w table``), an unhealthy one down, the
  node's own the endpoint whose host is the node's name or one of its addresses; an output that names no
  endpoint is judged by the exit code alone. With every member healthy, ``2 * (n - 1) > n``: three members or
  more. A single control plane (one member) and a two-member cluster are refused, as Cluster API's
  KubeadmControlPlane refuses to remediate them (``canSafelyRemoveEtcdMember``), unless the caller accepts the
  outage (``accept_quorum_loss``, the playbook's ``nodefix_control_plane_quorum_override``); a member already
  down holds the guard whatever the override (etcd is not healthy), and the answer says what quorum would be.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact, redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot.gate import KEPT

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
# RKE2 labels its etcd nodes (etcd-only ones included) node-role.kubernetes.io/etcd=true
ETCD_LABELS = ("node-role.kubernetes.io/etcd",)
ETCD_NAMESPACE = "kube-system"
ETCD_SELECTOR = "component=etcd"


def labels(node):
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def is_control_plane(node):
    """Whether the Node carries a control-plane role label (the value does not matter: kubeadm sets "")."""
    return any(label in labels(node) for label in CONTROL_PLANE_LABELS)


def etcd_labelled(node):
    """Whether the Node carries RKE2's etcd role label (``node-role.kubernetes.io/etcd``, any value but "false")."""
    return any(label in labels(node) and str(labels(node)[label]).lower() != "false" for label in ETCD_LABELS)


def etcd_membership(node, api):
    """Why a node without a control-plane label is an etcd member ("" when it is not): membership, not role
    labels - RKE2's etcd-only nodes, a kubeadm member whose role label was removed. A listing that fails
    raises (the caller holds the node: never a worker on a guess)."""
    if etcd_labelled(node):
        return "it carries the label %s" % ETCD_LABELS[0]
    name = ((node or {}).get("metadata") or {}).get("name")
    mine = [m["name"] for m in etcd_members(api) if name and m["node"] == name]
    return "it runs the etcd member %s" % mine[0] if mine else ""


def quorum_problem(members, node):
    """Why taking ``node``'s etcd member down would lose quorum, or "" when the members left keep a majority.

    ``members``: the cluster's members ({name, node, ready}) - every member, a missing one too (``etcd_health``
    adds a member that is not Ready for each node that should run one and shows no pod). Each member that is not
    Ready is down already; ``node``'s own member goes down with it. Quorum is a majority of all members:
    ``floor(n / 2) + 1``."""
    total = len(members)
    if not total:
        return ""
    down = len([m for m in members if not m["ready"]])
    up_after = len([m for m in members if m["ready"] and m["node"] != node])
    need = total // 2 + 1
    if up_after >= need:
        return ""
    return ("taking %s down leaves %d of %d etcd member(s) up%s, and quorum needs %d%s" % (
        node, up_after, total, " (%d down already)" % down if down else "", need,
        " (a single control plane)" if total == 1 else ""))


def missing_member(node):
    """The member of a node that should run one and shows no etcd pod: counted, and down."""
    return {"name": None, "node": node, "ready": False, "phase": "Missing"}


def member_nodes(nodes):
    """The names of the Nodes that should each run an etcd member: control-plane nodes (kubeadm's stacked etcd) and
    nodes with RKE2's etcd role label."""
    return sorted(((n.get("metadata") or {}).get("name") for n in nodes
                   if (is_control_plane(n) or etcd_labelled(n)) and (n.get("metadata") or {}).get("name")))


# etcdctl endpoint health: '<endpoint> is healthy: ...' (stdout) and '<endpoint> is unhealthy: ...' (stderr) - the
# simple form (etcdctl/ctlv3/command/printer_simple.go EndpointHealth); '-w table' rows; '-w json' objects
_HEALTH_LINE = re.compile(r"^(?P<ep>[A-Za-z][A-Za-z0-9+.\-]*://\S+|\S+:\d+) is (?P<state>healthy|unhealthy)\b", re.M)
_HEALTH_ROW = re.compile(r"^\|\s*(?P<ep>\S+)\s*\|\s*(?P<state>true|false)\s*\|", re.M)


def health_endpoints(text):
    """[(endpoint, healthy)] that an etcd health command's output names (simple, table or JSON output of
    ``etcdctl endpoint health``), in order, each endpoint once (unhealthy wins); [] when it names none."""
    found = [(m.group("ep"), m.group("state") == "healthy") for m in _HEALTH_LINE.finditer(text or "")]
    found += [(m.group("ep"), m.group("state") == "true") for m in _HEALTH_ROW.finditer(text or "")]
    for chunk in re.findall(r"\[\s*\{.*?\}\s*\]", text or "", re.S):
        try:
            rows = json.loads(chunk)
        except ValueError:
            continue
        found += [(str(r["endpoint"]), r.get("health") is True) for r in rows
                  if isinstance(r, dict) and isinstance(r.get("endpoint"), str)]
    out = {}
    for endpoint, healthy in found:
        out[endpoint] = out.get(endpoint, True) and healthy
    return sorted(out.items())


def _endpoint_host(endpoint):
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    return host[1:host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]


def _node_names(node):
    """A Node's name and addresses (an etcd endpoint of the node names one of them)."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    return set([meta.get("name")] + [a.get("address") for a in status.get("addresses") or [] if isinstance(a, dict)])


def endpoint_members(endpoints, nodes):
    """Members ({name, node, ready, phase}) of the endpoints an etcd health command named: ``node`` is the Node
    whose name or address is the endpoint's host (None: not a Node of the cluster's - etcd on machines apart)."""
    out = []
    for endpoint, healthy in endpoints:
        host = _endpoint_host(endpoint)
        owner = [n["metadata"]["name"] for n in nodes if host in _node_names(n)]
        out.append({"name": endpoint, "node": owner[0] if owner else None, "ready": healthy,
                    "phase": "healthy" if healthy else "unhealthy"})
    return out


def condition(obj, kind):
    """The status ("True", "False", "Unknown") of a condition of a Node or Pod, None when it has none."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond.get("status")
    return None


def node_ready(node):
    """A Node is back only with its Ready condition "True" (NotReady, Unknown or missing: not back)."""
    return condition(node, "Ready") == "True"


def member(pod):
    """{name, node, ready} of an etcd pod; Ready only when Running with its Ready condition "True"."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return {"name": meta.get("name"), "node": (pod.get("spec") or {}).get("nodeName"),
            "ready": phase == "Running" and condition(pod, "Ready") == "True", "phase": phase}


def _node_live(one, nodes):
    """An etcd pod's member, down when its Node is not Ready (``node_ready``) or not in ``nodes`` at all: a NotReady
    Node's kubelet no longer reports, so its pods' Ready is what it last said, not what is true now. ``nodes``
    None: as the pod says."""
    if nodes is None or not one["ready"]:
        return one
    mine = [n for n in nodes if (n.get("metadata") or {}).get("name") == one["node"]]
    if mine and node_ready(mine[0]):
        return one
    return dict(one, ready=False, phase="%s, its Node %s" % (one["phase"], "not Ready" if mine else "gone"))


def etcd_members(api):
    """The etcd members kubeadm runs as static pods in kube-system, sorted by node."""
    return sorted((member(p) for p in api.list_namespaced_pods(ETCD_NAMESPACE, ETCD_SELECTOR)),
                  key=lambda m: (m["node"] or "", m["name"] or ""))


# what a module says when the operator's etcd health command carries a credential on its command line
COMMAND_WARNING = ("etcd_health_command carries credentials on its command line (--user name:password, --password, "
                   "a URL's user information): set them in etcd_health_environment instead (etcdctl reads "
                   "ETCDCTL_USER, ETCDCTL_PASSWORD - any flag as ETCDCTL_<FLAG>), where no output and no process "
                   "listing shows them; the command runs as given meanwhile and is shown without them")


def health_command_warnings(argv):
    """[COMMAND_WARNING] when ``argv`` shows differently redacted (it holds a credential the one exit would hide),
    else []."""
    return [COMMAND_WARNING] if argv and redact(list(argv)) != list(argv) else []


def health_command_runner(module, environment):
    """``run_command(argv)`` for the health command: the module's run_command with ``environment`` (the
    ``etcd_health_environment`` option, no_log) added to the command's environment."""
    env = dict((str(k), str(v)) for k, v in (environment or {}).items())

    def run_command(argv):
        return module.run_command(argv, environ_update=env)
    return run_command


def run_health_command(run_command, argv, endpoints=None):
    """([] when it exited 0, else [what it said]) of the user's etcd health command; ``endpoints`` (a list) gets
    what its output names (``health_endpoints``)."""
    rc, out, err = run_command(list(argv))
    if endpoints is not None:
        endpoints.extend(health_endpoints((out or "") + "\n" + (err or "")))
    if rc == 0:
        return []
    # the command line is the operator's (etcdctl --user root:x, --password x): shown redacted, argv-aware
    text = redact_text(((err or "") + (out or "")).strip().replace("\n", " "))[:300]
    return ["the etcd health command %s exited %s%s" % (" ".join(redact(list(argv))), rc, ": " + text if text else "")]


def etcd_health(api, control_plane_nodes, health_command=None, run_command=None, nodes=None):
    """{mode, members, readyz, problems} - ``problems`` empty only when every etcd member is healthy.

    ``control_plane_nodes``: the names of every Node that should run a member (``member_nodes``); one that shows
    no pod is a member all the same, down (phase ``Missing``). ``nodes``: the Node objects - an etcd pod's member
    counts up only while its Node is Ready (``_node_live``), and they find the node of an endpoint the health
    command names (external etcd: the command's answer is the member's own, read now)."""
    members = etcd_members(api)
    if not members:
        out = {"mode": "external", "members": [], "readyz": None, "problems": []}
        if not health_command:
            out["problems"].append("etcd runs outside the cluster (no component=etcd pod in kube-system) and no etcd "
                                   "health command is set (nodefix_etcd_health_command): the control plane is held")
        else:
            endpoints = []
            out["problems"].extend(run_health_command(run_command, health_command, endpoints))
            out["members"] = endpoint_members(endpoints, nodes or [])
            out["problems"].extend("etcd member %s is unhealthy" % m["name"] for m in out["members"] if not m["ready"])
        return out
    members = [_node_live(m, nodes) for m in members]
    problems = []
    on = set(m["node"] for m in members)
    missing = sorted(set(control_plane_nodes) - on)
    problems.extend("control-plane node %s has no etcd member (no component=etcd pod on it)" % n for n in missing)
    members = members + [missing_member(n) for n in missing]
    problems.extend("etcd member %s on %s is not Ready (phase %s)" % (m["name"], m["node"], m["phase"])
                    for m in members if not m["ready"] and m["name"])
    code, body = api.readyz("etcd")
    readyz = "%s %s" % (code, (body or "").strip()[:200])
    if code != 200 or (body or "").strip() != "ok":
        problems.append("the API server's /readyz/etcd answered %s" % readyz)
    return {"mode": "static", "members": members, "readyz": readyz, "problems": problems}


def own_member_back(api, node, health_command=None, run_command=None):
    """(True, "") when the node's own etcd member is Ready (external etcd: the health command
    passes), else (False, why)."""
    members = etcd_members(api)
    if not members:
        if not health_command:
            return False, "etcd runs outside the cluster and no etcd health command is set"
        problems = run_health_command(run_command, health_command)
        return (not problems), "; ".join(problems)
    mine = [m for m in members if m["node"] == node]
    if not mine:
        return False, "no etcd member (component=etcd pod) on %s" % node
    if not all(m["ready"] for m in mine):
        return False, "etcd member %s on %s is not Ready" % (mine[0]["name"], node)
    return True, ""


def etcd_verdict(api, name, health_command=None, run_command=None, accept_quorum_loss=False):
    """(etcd, held_by) of taking node ``name``'s etcd member down now: every member healthy (``etcd_health``) and
    the members left keeping quorum (``quorum_problem``; ``accept_quorum_loss`` accepts losing it). The guard's
    judgement before the control plane's slot is taken, and the rollout's again right before the reboot
    (``_rollout.machine.gates.recheck``); ``held_by`` empty when it may go down."""
    nodes = api.list_nodes()
    etcd = etcd_health(api, member_nodes(nodes), health_command, run_command, nodes)
    lost = quorum_problem(etcd["members"], name)
    if etcd["problems"]:
        # a member down already: held whatever the override (quorum said too: what taking this one would leave)
        etcd["quorum"] = {"problem": lost, "accepted": False}
        return etcd, ["control plane: etcd is not healthy: %s%s" % (
            "; ".join(etcd["problems"]), "; %s" % lost if lost else "")]
    etcd["quorum"] = {"problem": lost, "accepted": bool(lost and accept_quorum_loss)}
    if lost and not accept_quorum_loss:
        return etcd, ["control plane: %s - the members left would lose quorum (set "
                      "nodefix_control_plane_quorum_override: true to accept the outage)" % lost]
    return etcd, []


def guard(node, allow, api, lock, reason="", health_command=None, run_command=None, hint=False,
          accept_quorum_loss=False):
    """The control-plane guard before anything is drained: {control_plane, allowed, held_by, etcd, lock}.

    ``node`` the Node object (None: unknown to the API server - then only ``hint`` says);
    ``allow`` the caller opted in; ``lock`` a LeaseLock of one slot (the control plane's);
    ``accept_quorum_loss`` lets a member go down although the members left lose quorum (the caller
    accepts the outage). A node without a control-plane label is still one when it runs an etcd
    member or carries the etcd role label (``etcd_member``: why, in the answer)."""
    name = ((node or {}).get("metadata") or {}).get("name")
    out = {"control_plane": bool(hint or is_control_plane(node)), "allowed": True, "held_by": [], "etcd": None,
           "etcd_member": "", "lock": {"slot": None, "holders": []}}
    if not out["control_plane"]:
        out["etcd_member"] = etcd_membership(node, api)
        if not out["etcd_member"]:
            return out
        out["control_plane"] = True
    out["allowed"] = False
    what = ("a control-plane node" if not out["etcd_member"]
            else "an etcd member (%s)" % out["etcd_member"])
    if not allow:
        out["held_by"].append("control plane: %s is %s and nodefix_control_plane is false - never "
                              "drained, restarted or rebooted" % (name or "the node", what))
        return out
    out["etcd"], held = etcd_verdict(api, name, health_command, run_command, accept_quorum_loss)
    if held:
        out["held_by"].extend(held)
        return out
    slot, holders = lock.acquire(reason)
    out["lock"].update(slot=slot, holders=holders)
    if not slot:
        out["held_by"].append("control plane: another control-plane node is being disrupted (%s)" % ", ".join(
            "%s held by %s since %s" % (h["slot"], h["holder"], h["since"]) for h in holders))
        return out
    out["allowed"] = True
    return out


def reclaim(lock, node_obj, member_back=None, dry_run=False, not_back=False):
    """Give back a slot ``lock.holder`` holds from an earlier run, when its node is back: {slot,
    released, kept}. The caller calls it only when this run will not disrupt the node (no reboot
    pending or in progress). ``member_back``: (ok, why) of its etcd member, for the control plane's
    lock (None: not asked). A node that is not Ready - it went down and is not back - keeps its slot; so does one
    whose reboot path says it went down and is not back in service (``not_back``: the node is not read). A slot
    kept is marked so on its Lease (``gate.KEPT``, the reason): no other node takes it over when its TTL runs out -
    only this holder's own next run (here, once the node is back) or a person (``kubectl delete lease``) gives it
    back."""
    held = [h for h in lock.holders() if h["holder"] == lock.holder]
    if not held:
        return {"slot": None, "since": None, "released": None, "kept": None}
    slot, since = held[0]["slot"], held[0]["since"]
    out = {"slot": slot, "since": since, "released": None, "kept": None}
    if not_back:
        out["kept"] = ("%s keeps %s: it went down for a reboot and is not back in service, so no other node reboots "
                       "beside it. Once the node is dealt with, give the slot back: kubectl -n %s delete lease %s"
                       % (lock.holder, slot, lock.namespace, slot))
    elif not node_ready(node_obj):
        out["kept"] = ("%s keeps %s (held since %s): it is not Ready in the API server - it went down and is not "
                       "back; give the slot back by hand once it is dealt with" % (lock.holder, slot, since))
    elif member_back is not None and not member_back[0]:
        out["kept"] = "%s keeps %s (held since %s): %s" % (lock.holder, slot, since, member_back[1])
    else:
        out["released"] = lock.release(dry_run=dry_run, slot=slot)
        return out
    # kept on purpose: the Lease says so (gate.KEPT), and no other node takes it over by the TTL
    try:
        marked = lock.keep(slot, out["kept"], dry_run=dry_run)
    except NodefixError as exc:
        marked, out["kept"] = True, "%s (its Lease could not be marked %s: %s)" % (out["kept"], KEPT, exc)
    if not marked:
        out["kept"] += " (its Lease could not be marked %s: it changed meanwhile)" % KEPT
    return out


def reclaimed_said(out, holder, dry_run=False):
    """What a person reads of a slot ``reclaim`` gave back (``out``: its answer with ``released`` set)."""
    return "%s %s that %s held since %s from an earlier run: no reboot of %s is pending or in progress and it is " \
        "Ready" % ("would release" if dry_run else "released", out["slot"], holder, out["since"], holder)
