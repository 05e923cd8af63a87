# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice.
"""One triage of the fleet: the expected nodes, what Prometheus holds at one pinned instant, the classes.
Shared by the inventory plugin (``nodefix.k8s.triage``) and the module (``nodefix.k8s.triage_info``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.nodefix.k8s.plugins.module_utils._triage import classify as triage_classify
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import expected as triage_expected
from ansible_collections.nodefix.k8s.plugins.module_utils._triage import observe as triage_observe


def triage(client, conf, source, nodes=None, kubeconfig=None, context=None, at=None):
    """The fleet's classes (``classify.classify``'s answer, ``summary.requests`` and ``summary.prometheus`` added).
    ``at``: the evaluation time (Unix seconds), now by default - every query is asked at this one instant.
    Raises NodefixError (NoAnswer, BadAnswer among them) when anything could not be asked: never an empty
    answer. The unknown budget is the caller's to check (``classify.check_unknown_budget``)."""
    at = round(time.time() if at is None else float(at), 3)
    expected = triage_expected.expected_nodes(source, client, at, nodes=nodes, kubeconfig=kubeconfig, context=context)
    observed, orphans, warnings = triage_observe.observe(client, conf, expected, at)
    result = triage_classify.classify(conf, expected, observed, orphans, at, warnings)
    result["summary"].update(requests=client.requests, prometheus=client.where, expected_nodes=source,
                             max_audit_age=conf["max_audit_age"], required_checks=conf["required_checks"])
    return result
