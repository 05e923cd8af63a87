# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The trail a remediation leaves on the Node object: Kubernetes Events and one annotation.

``kubectl describe node`` and ``kubectl get events --field-selector involvedObject.name=NODE`` are where
people look; a remediation that only writes reports on the controller is invisible there. Each step
that matters becomes an Event in the style of kubelet's own (a CamelCase reason, a short note, Normal
or Warning), reported by the controller ``nodefix.k8s`` and carrying the run's id:

- at the start, after the audit: ``FindingsDetected`` (Warning, one event summing the findings and the
  plan: roles, drain, reboot) or ``NoFindings`` (Normal);
- at the end, in the order they happened: ``EvidenceKept`` (where the evidence read before the
  disruption is; ``EvidenceNotKept`` when it could not be), ``Drained`` / ``DrainFailed``, ``FixApplied`` per role (with
  what changed, read from the audits around the fixes; after a failure only a role whose change the
  audits read - a role that may not have run is never said to have fixed anything), ``Rebooted`` / ``KernelBooted`` /
  ``RebootHeld``, then the outcome - ``RemediationVerified``, ``FindingsStillOpen``, ``RolledBack``,
  ``RemediationFailed``, ``Held`` (the outcome enum's ``held``: left for a person) or ``NothingToFix``;
  ``NotVerified`` when no audit after the fixes was read, or when a finding gone from it was
  not looked for (its detector could not run: ``audit.check_failed``) - and ``Uncordoned`` or ``LeftCordoned``.

The annotation ``nodefix.k8s/last-remediation`` holds the last remediation's summary as JSON (time,
outcome, run id, fixed, still-open and not-verified ids), bounded in size. Every Event and the annotation are
made as the real API server validates them (byte limits, namespace, generateName: ``event_body``,
``check_options``; the rules cited where they are defined). Pure functions over the playbook's facts; the
node_events module posts them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact, redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome
from ansible_collections.nodefix.k8s.plugins.module_utils._report.model import (
    change_check, changes, evidence_text, not_verified)

CONTROLLER = "nodefix.k8s"
ANNOTATION = "nodefix.k8s/last-remediation"
ANNOTATION_IDS = 50      # ids kept in the annotation (the report has them all)
ANNOTATION_RUN_MAX = 253  # bytes of the run id kept in the annotation
# apimachinery pkg/api/validation/objectmeta.go TotalAnnotationSizeLimitB: all of an object's annotations (keys and
# values) together at most 256 KiB; the summary stays far below it (at most 3 x 50 ids and a 253-byte run id)
# What the API server validates, transcribed from Kubernetes' source (Go's len() counts bytes):
# pkg/apis/core/validation/events.go: NoteLengthLimit, ReasonLengthLimit, ActionLengthLimit,
# ReportingInstanceLengthLimit (legacyValidateEvent: message, reason, action, reportingInstance);
NOTE_MAX = 1024
REASON_MAX = ACTION_MAX = INSTANCE_MAX = 128
# a Node is cluster-scoped: an Event about it (eventTime set) lives in "default" or "kube-system" (same file:
# involvedObject.namespace "does not match event.namespace" otherwise);
NODE_EVENT_NAMESPACES = ("default", "kube-system")
# apimachinery pkg/util/validation/validation.go: DNS1123SubdomainMaxLength (metadata.generateName, validated as
# a DNS-1123 subdomain with a trailing '-' masked: pkg/api/validation/generic.go NameIsDNSSubdomain), and the 5
# random characters apiserver/pkg/storage/names/generate.go appends
NAME_MAX, GENERATED_SUFFIX = 253, 5
EVENT_NAME_SUFFIX = ".nodefix-"


class TrailInputError(NodefixError, ValueError):
    """Facts of the wrong shape: no trail is made from them."""


def cut_bytes(text, limit, mark="..."):
    """``text`` in at most ``limit`` bytes of UTF-8, cut on a character boundary (``mark`` ends a cut text)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit - len(mark.encode("utf-8"))].decode("utf-8", "ignore") + mark


def _note(run_id, text):
    return cut_bytes(redact_text("run %s: %s" % (run_id, text)), NOTE_MAX)


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(r"^%s(\.%s)*$" % (_LABEL, _LABEL))
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def is_qualified_name(value):
    """apimachinery's IsQualifiedName (pkg/util/validation/validation.go): an optional DNS-1123 subdomain prefix
    and '/', then a name of at most 63 characters ([A-Za-z0-9] at both ends, -_. inside)."""
    parts = value.split("/")
    if len(parts) > 2 or (len(parts) == 2 and not (parts[0] and len(parts[0]) <= NAME_MAX and _SUBDOMAIN.match(parts[0]))):
        return False
    return len(parts[-1]) <= 63 and bool(_NAME_PART.match(parts[-1]))


def generate_name(node):
    """(metadata.generateName of an Event about ``node``, whether the node's name was shortened for it): the name
    plus 5 generated characters stays within a DNS subdomain's 253, and a shortened name ends on a letter or
    digit (the full name is in the Event's ``regarding`` and its note)."""
    room = NAME_MAX - GENERATED_SUFFIX - len(EVENT_NAME_SUFFIX)
    if len(node) <= room:
        return node + EVENT_NAME_SUFFIX, False
    return node[:room].rstrip(".-") + EVENT_NAME_SUFFIX, True


def check_options(namespace, instance=None):
    """Refuse what the API server could never accept for a Node's Events (TrailInputError naming the option);
    ``instance`` None: the controller's host name, cut to fit."""
    if namespace not in NODE_EVENT_NAMESPACES:
        raise TrailInputError("namespace %r: a Node is cluster-scoped, the API server keeps its Events only in %s "
                              "(pkg/apis/core/validation/events.go)" % (namespace, " or ".join(NODE_EVENT_NAMESPACES)))
    if instance is not None and not 0 < len(instance.encode("utf-8")) <= INSTANCE_MAX:
        raise TrailInputError("instance: the Event's reportingInstance must be 1 to %d bytes, got %d"
                              % (INSTANCE_MAX, len((instance or "").encode("utf-8"))))
    if not is_qualified_name(CONTROLLER):
        raise TrailInputError("reportingController %r is not a qualified name" % CONTROLLER)


def event_body(event, node, uid, namespace, instance):
    """The events.k8s.io/v1 Event the API server gets for ``event`` (one of start_events/end_events, timed by
    ordered) about Node ``node``; a shortened generateName puts the full node name in the note."""
    prefix, short = generate_name(node)
    # redacted before it is cut (a cut secret would no longer look like one): an Event stays on the cluster
    note = cut_bytes(redact_text(event["note"] if not short else "node %s: %s" % (node, event["note"])), NOTE_MAX)
    regarding = {"apiVersion": "v1", "kind": "Node", "name": node}
    if uid:
        regarding["uid"] = uid
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"generateName": prefix, "namespace": namespace},
            "eventTime": iso(event["time"]), "reportingController": CONTROLLER,
            "reportingInstance": cut_bytes(instance, INSTANCE_MAX, ""),
            "action": cut_bytes(event["action"], ACTION_MAX, ""), "reason": cut_bytes(event["reason"], REASON_MAX, ""),
            "note": note, "type": event["type"], "regarding": regarding}


def _event(reason, etype, action, note, when):
    """One event; ``time`` in whole microseconds since the epoch (the API's MicroTime)."""
    return {"reason": reason, "type": etype, "action": action, "note": note, "time": int(round(when * 1000000))}


def _ids(ids, limit=8):
    ids = list(ids)
    return ", ".join(ids[:limit]) + (" (+%d more)" % (len(ids) - limit) if len(ids) > limit else "")


def _time(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TrailInputError("%s must be a Unix time, got %r" % (what, value))
    return float(value)


def _summary(audit):
    if not isinstance(audit, dict) or not isinstance(audit.get("findings", []), list):
        raise TrailInputError("the audit is not a node_audit result")
    found = [f for f in audit.get("findings") or [] if isinstance(f, dict) and isinstance(f.get("id"), str)]
    return found, sorted(set(f["id"] for f in found))


def start_events(run_id, audit, plan, started):
    """The start of a node's remediation: one event summing the audit's findings and the plan."""
    found, ids = _summary(audit)
    when = _time(started, "started")
    if not ids:
        return [_event("NoFindings", "Normal", "Audit", _note(run_id, "audited, no findings: nothing to do"), when)]
    by = {}
    for f in found:
        by[f.get("severity") or "unknown"] = by.get(f.get("severity") or "unknown", 0) + 1
    order = ["critical", "high", "medium", "low", "info", "unknown"]
    counts = ", ".join("%s %d" % (s, by[s]) for s in order if s in by)
    plan = plan if isinstance(plan, dict) else {}
    parts = []
    roles = [r for r in plan.get("fix_roles") or [] if isinstance(r, str)]
    if roles:
        parts.append("roles " + ", ".join(r.rsplit(".", maxsplit=1)[-1] for r in roles))
    for action in plan.get("disruptive") or []:
        parts.append(str(action))
    reasons = [r.get("reason") for r in plan.get("reboot_reasons") or [] if isinstance(r, dict)]
    plan_text = ("; plan: " + ", ".join(parts) if parts else "; nothing it can fix") + (
        " (reboot: %s)" % "; ".join(str(r) for r in reasons) if reasons else "")
    text = "%d finding(s) (%s): %s%s" % (len(found), counts, _ids(ids), plan_text)
    return [_event("FindingsDetected", "Warning", "Audit", _note(run_id, text), when)]


def _fixed_still(before, after):
    """(fixed, still open, not verified): the before-audit's finding ids gone from the after-audit, those in both,
    and those gone whose detector could not run after the fixes (model.not_verified: never "fixed"). Without an
    after-audit nothing is known fixed (never "fixed" because nothing was read)."""
    b_found, b_ids = _summary(before or {})
    if not isinstance(after, dict):
        return [], [], []
    _a, a_ids = _summary(after)
    gone = set(b_ids) - set(a_ids)
    blind = not_verified(b_found, after, gone)
    return sorted(gone - set(blind)), sorted(set(b_ids) & set(a_ids)), blind


def _role_changes(before, after):
    """{check: ["what before -> after", ...]} read from the audits around the fixes."""
    out = {}
    rows = changes((before or {}).get("checks"), (after or {}).get("checks"))
    for c in rows:
        check = change_check(c["what"])
        out.setdefault(check, []).append("%s %s -> %s" % (c["what"], c["before"], c["after"]))
    return out


def _read(after):
    """The audit after when it read the node; None for Ansible's unreachable or skipped result in its place."""
    if isinstance(after, dict) and (after.get("unreachable") or after.get("skipped")):
        return None
    return after


def end_events(run_id, before, after, remediation, finished, drained=False, drain_error="", cordoned_before=False):
    """The steps of a node's remediation after its start, in order, ending with its outcome."""
    after = _read(after)
    if not isinstance(remediation, dict):
        raise TrailInputError("the remediation record is not a mapping")
    when = _time(finished, "finished")
    status = str(remediation.get("status") or "")
    msg = str(remediation.get("msg") or "")
    events = _given_back(run_id, remediation, when)
    if isinstance(remediation.get("evidence"), dict):
        kept, text = evidence_text(remediation["evidence"])
        events.append(_event("EvidenceKept", "Normal", "Collect", _note(run_id, text), when) if kept
                      else _event("EvidenceNotKept", "Warning", "Collect", _note(run_id, text), when))
    if drained:
        events.append(_event("Drained", "Normal", "Drain", _note(run_id, "cordoned and drained"), when))
    elif drain_error:
        events.append(_event("DrainFailed", "Warning", "Drain", _note(run_id, "%s; %s" % (
            drain_error, "nothing was fixed, left cordoned (cordoned before the run)" if cordoned_before
            else "nothing was fixed, given back")), when))
    if status in ("ok", "failed"):
        # a role of a failed remediation may not have run: it is named only for a change the audits read
        moved = _role_changes(before, after)
        for role in remediation.get("roles") or []:
            check = str(role).rsplit(".", maxsplit=1)[-1]
            did = moved.get(check) or []
            if check == "reboot" or (status == "failed" and not did):
                continue
            text = "%s: %s" % (role, "; ".join(did) if did else "ran; nothing it changed shows in the audit")
            events.append(_event("FixApplied", "Normal", "Fix", _note(run_id, text), when))
    for action in remediation.get("actions") or []:
        action = str(action)
        if action.startswith("kernel upgraded"):
            events.append(_event("KernelBooted", "Normal", "Reboot", _note(run_id, action), when))
        elif action.startswith("rebooted"):
            events.append(_event("Rebooted", "Normal", "Reboot", _note(run_id, action), when))
        elif action.startswith("reboot held") or action.startswith("reboot recommended"):
            events.append(_event("RebootHeld", "Normal", "Reboot", _note(run_id, action), when))
    fixed, still, blind = _fixed_still(before, after)
    unverified = "; not verified (its detector could not run after the fixes): %s" % _ids(blind) if blind else ""
    if status == "ok" and not isinstance(after, dict):
        events.append(_event("NotVerified", "Warning", "Verify",
                             _note(run_id, "no audit after the fixes: nothing is verified"), when))
    elif status == "ok" and still:
        events.append(_event("FindingsStillOpen", "Warning", "Verify", _note(
            run_id, "fixed %s; still open after the new audit: %s%s" % (_ids(fixed) or "nothing", _ids(still),
                                                                        unverified)), when))
    elif status == "ok" and blind:
        events.append(_event("NotVerified", "Warning", "Verify", _note(
            run_id, "fixed %s%s" % (_ids(fixed) or "nothing", unverified)), when))
    elif status == "ok":
        events.append(_event("RemediationVerified", "Normal", "Verify",
                             _note(run_id, "verified by a new audit: fixed %s" % (_ids(fixed) or "nothing")), when))
    elif status == "failed" and "roll" in msg.lower():
        events.append(_event("RolledBack", "Warning", "Fix", _note(run_id, msg), when))
    elif status == "failed" and not drain_error:   # DrainFailed said it
        events.append(_event("RemediationFailed", "Warning", "Fix", _note(run_id, msg or "failed"), when))
    elif status == "unreachable":
        events.append(_event("NodeUnreachable", "Warning", "Verify", _note(
            run_id, "could not be reached at %s: %s" % (remediation.get("step") or "a step", msg or "no answer")), when))
    elif status == "skipped" and remediation.get("outcome") == Outcome.HELD:
        # held for a person (the outcome enum, never the message's text): not "nothing to fix"
        events.append(_event("Held", "Warning", "Verify", _note(run_id, msg or "held"), when))
    elif status == "skipped" and not drain_error:   # a failed drain said it already: the node was left as it was
        events.append(_event("NothingToFix", "Normal", "Verify", _note(run_id, msg or "nothing to fix"), when))
    if drained and not cordoned_before and remediation.get("held"):
        events.append(_held(run_id, remediation["held"], when))
    elif drained and cordoned_before:
        events.append(_event("LeftCordoned", "Normal", "Uncordon",
                             _note(run_id, "left cordoned: an operator had cordoned it before the run"), when))
    elif drained:
        events.append(_event("Uncordoned", "Normal", "Uncordon", _note(run_id, "uncordoned: schedulable again"), when))
    return events


def _given_back(run_id, remediation, when):
    """[GivenBack] when this run uncordoned a node an earlier, dead run had cordoned (``given_back``)."""
    text = str(remediation.get("given_back") or "")
    return [_event("GivenBack", "Normal", "Uncordon", _note(run_id, text), when)] if text else []


def _held(run_id, reasons, when):
    """LeftCordonedUnverified: the node this run cordoned stays cordoned, its fix or reboot not verified."""
    text = "; ".join(str(r) for r in reasons) if isinstance(reasons, (list, tuple)) else str(reasons)
    return _event("LeftCordonedUnverified", "Warning", "Uncordon", _note(
        run_id, "left cordoned, not verified (nodefix.k8s/held): %s" % text), when)


def annotation(run_id, remediation, before, after, finished):
    """{ANNOTATION: JSON text} - the last remediation's summary, bounded in size."""
    after = _read(after)
    fixed, still, blind = _fixed_still(before, after)
    summary = {"time": iso(int(_time(finished, "finished") * 1000000), micro=False), "outcome": str((remediation or {}).get("status")),
               "run": cut_bytes(str(run_id), ANNOTATION_RUN_MAX), "fixed": fixed[:ANNOTATION_IDS],
               "stillOpen": still[:ANNOTATION_IDS]}
    if blind:
        summary["notVerified"] = blind[:ANNOTATION_IDS]
    if len(fixed) > ANNOTATION_IDS or len(still) > ANNOTATION_IDS or len(blind) > ANNOTATION_IDS:
        summary["truncated"] = True
    if not isinstance(after, dict) or blind:
        summary["verified"] = False
    return {ANNOTATION: json.dumps(redact(summary), sort_keys=True, separators=(",", ":"))}


def iso(micros, micro=True):
    """RFC 3339 UTC of a time in microseconds since the epoch (MicroTime with ``micro``), as the API
    server writes times."""
    stamp = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=micros)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def ordered(events):
    """The events with strictly increasing times (a microsecond apart where steps share one), in order."""
    out, last = [], None
    for e in events:
        when = e["time"] if last is None or e["time"] > last else last + 1
        out.append(dict(e, time=when))
        last = when
    return out
