# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""A node's rollout outcome: one value of ``Outcome`` that the report, the Events, the metrics and the
exit code read - never a message prefix (a ``held:`` message prefix told "held" from "nothing to fix",
both ``status: skipped``; issue 62).

``status`` stays what it was (ok, skipped, failed, unreachable: the report's columns and
``nodefix_fail_on`` read it); ``outcome`` says which of them it is:

===================  ==========  ====================================================  ==========
outcome              status      meaning                                               remediated
===================  ==========  ====================================================  ==========
``ok``               ok          fixed and verified, given back                        yes
``nothing_to_fix``   skipped     the audit found nothing this run fixes                yes
``held``             skipped     left for a person: a control-plane node or etcd       no
                                 member not opted in or not safe now, a node an
                                 earlier run held (``nodefix.k8s/held``), a reboot
                                 that was all it needed and is held (backoff, gate),
                                 a kernel boot an earlier run left unconfirmed
``refused``          failed      refused before anything was touched: not root, a      no
                                 kernel upgrade that cannot be planned, a drain
                                 required and not possible, another live run holds
                                 the node
``drain_failed``     failed      the drain did not finish; nothing fixed, given back   no
``not_verified``     failed      fixed or rebooted, not proven: left cordoned and      no
                                 held (``nodefix.k8s/held``)
``failed``           failed      a fix failed                                          no
``unreachable``      unreachable lost at a step                                        no
``stopped``          (none)      not started: the failure limit or the storm breaker   no
===================  ==========  ====================================================  ==========
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError


class Outcome(object):
    """The outcomes, as the strings the records carry (Python 2.7 has no ``enum``: constants and ``ALL``)."""

    OK = "ok"
    NOTHING_TO_FIX = "nothing_to_fix"
    HELD = "held"
    REFUSED = "refused"
    DRAIN_FAILED = "drain_failed"
    NOT_VERIFIED = "not_verified"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    STOPPED = "stopped"
    ALL = (OK, NOTHING_TO_FIX, HELD, REFUSED, DRAIN_FAILED, NOT_VERIFIED, FAILED, UNREACHABLE, STOPPED)


def outcome_of(record):
    """The outcome of a node's remediation record (``nodefix_remediation``): its ``outcome`` when set, else
    what its fields say - ``unreachable``, ``held`` (not verified), ``drain`` (a failed drain), ``refused``
    - from ``status``. Never from the message text. NodefixError for a record that is not one or an
    outcome that is not in ``Outcome.ALL``."""
    if record is None:
        return Outcome.STOPPED
    if not isinstance(record, dict):
        raise NodefixError("the remediation record is not a mapping (%s)" % type(record).__name__)
    said = record.get("outcome")
    if said is not None:
        if said not in Outcome.ALL:
            raise NodefixError("the remediation record's outcome %r is not one of %s" % (said, ", ".join(Outcome.ALL)))
        return said
    status = str(record.get("status") or "")
    if status == "unreachable":
        return Outcome.UNREACHABLE
    if status == "ok":
        return Outcome.OK
    if status == "skipped":
        return Outcome.NOTHING_TO_FIX
    if status == "failed":
        if record.get("held"):
            return Outcome.NOT_VERIFIED
        if record.get("drain") is not None:
            return Outcome.DRAIN_FAILED
        if record.get("refused"):
            return Outcome.REFUSED
        return Outcome.FAILED
    raise NodefixError("the remediation record's status %r is not ok, skipped, failed or unreachable" % status)
