# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""A remediation's trail on the Node (``_report.trail`` words it): its Events and the ``nodefix.k8s/last-remediation``
annotation, posted through the collection's one client (``_k8s.client.Kube``) - by the ``node_events`` module and,
in-process, by the rollout action (``nodefix.k8s.rollout``).

The trail never fails the remediation it describes: ``post`` answers what it wrote and the errors, never raises for
an API error or a server that cannot be reached."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._report import trail


def why(exc):
    """An API error as its status, reason and the Status message (a 422 names the field); no answer as why."""
    if exc.status:
        return exc.phrase() + (": %s" % exc.said[:500] if exc.said else "")
    return exc.why


def post(api, node, namespace, instance, events, note):
    """Post ``events`` and the annotation ``note`` about Node ``node`` with ``api`` (a ``Kube``); (posted, annotated,
    errors). An API error (4xx/5xx) loses that event only; a server that cannot be reached (refused, DNS, TLS,
    timeout) ends the trail there: the rest is named not written, never waited for again."""
    unreachable = "the API server could not be reached or did not answer (%s); %d event(s)%s not written"
    node_path = "/api/v1/nodes/%s" % kube.name(node)
    try:
        uid = api.request("reading Node %s" % node, "GET", node_path)["metadata"]["uid"]
    except kube.KubeError as exc:
        if exc.status:
            return 0, False, ["node %s: %s; no event written" % (node, why(exc))]
        return 0, False, [unreachable % (why(exc), len(events), " and the annotation" if note else "")]
    except (KeyError, TypeError):
        return 0, False, ["node %s: the API server's answer has no metadata.uid; no event written" % node]
    posted, annotated, errors = 0, False, []
    events_path = "/apis/events.k8s.io/v1/namespaces/%s/events" % kube.name(namespace)
    for n, e in enumerate(events):
        try:
            api.request("posting event %s" % e["reason"], "POST", events_path,
                        body=trail.event_body(e, node, uid, namespace, instance))
            posted += 1
        except kube.KubeError as exc:
            if not exc.status:
                return posted, False, errors + [unreachable % (why(exc), len(events) - n, " and the annotation"
                                                               if note else "")]
            errors.append("event %s: %s" % (e["reason"], why(exc)))
    if note:
        try:
            api.request("annotating Node %s" % node, "PATCH", node_path, body={"metadata": {"annotations": note}},
                        content_type="application/strategic-merge-patch+json")
            annotated = True
        except kube.KubeError as exc:
            errors.append("annotation %s: %s" % (trail.ANNOTATION, why(exc)) if exc.status else
                          "annotation %s: the API server could not be reached or did not answer (%s)"
                          % (trail.ANNOTATION, why(exc)))
    return posted, annotated, errors
