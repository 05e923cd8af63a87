# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""The rollout machine's steps: each a typed result (``Step``: name, outcome, seconds, detail) that the action's
result, the AWX job events (one line a step), the report and the Events read; ``Stop`` ends the machine with an
outcome of ``_rollout.outcome.Outcome`` - never a message prefix.

``Runner`` times each step on the injected clock and keeps the list. In check mode a step that would write calls
``would``: the write is not made and the step says "would ..." - the dry run's plan IS this step list
(docs/rollout-machine.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact_text
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.outcome import Outcome

# a step's own verdict beside the rollout outcomes: it ran and the rollout goes on / it was not needed
DONE = "done"
SKIPPED = "skipped"
WOULD = "would"
STEP_OUTCOMES = (DONE, SKIPPED, WOULD) + Outcome.ALL


class Step(object):
    """One step's result: ``name`` (the phase's step), ``outcome`` (``STEP_OUTCOMES``), ``seconds``, ``detail``."""

    __slots__ = ("name", "outcome", "seconds", "detail")

    def __init__(self, name, outcome, seconds=0.0, detail=""):
        if outcome not in STEP_OUTCOMES:
            raise NodefixError("step %s: outcome %r is not one of %s" % (name, outcome, ", ".join(STEP_OUTCOMES)))
        self.name, self.outcome, self.seconds, self.detail = name, outcome, seconds, detail

    def as_dict(self):
        return {"name": self.name, "outcome": self.outcome, "seconds": round(self.seconds, 3), "detail": self.detail}

    def line(self):
        """The step as one line of an AWX job's output."""
        return "%-22s %-14s %6.1fs  %s" % (self.name, self.outcome, self.seconds, self.detail)


class Stop(NodefixError):
    """Ends the machine's half: ``outcome`` (an ``Outcome``) and why. Raised by a step; the runner records the step
    with that outcome (a step that catches NodefixError around its own calls never wraps a Stop)."""

    def __init__(self, outcome, detail):
        if outcome not in Outcome.ALL:
            raise NodefixError("a rollout stops with one of %s, got %r" % (", ".join(Outcome.ALL), outcome))
        super(Stop, self).__init__(detail, outcome=outcome)
        self.outcome, self.detail = outcome, detail


def node_side(call):
    """(answer, "") of injected node-side work (the evidence, the after-audit), or (None, why) when it failed: what
    could not be read is said as such, never taken for clean."""
    try:
        return call(), ""
    except NodefixError as exc:
        return None, "%s" % exc


def post_events(ctx, state, phase, what):
    """``ctx.events``: done only when the API accepted something (an Event, the annotation) - a change; nothing
    accepted is skipped; every failure a warning (``Runner.warn``), never the rollout's outcome."""
    try:
        failed = ctx.events(phase, state) or []
    except NodefixError as exc:
        ctx.runner.warn("%s could not be posted: %s" % (what, exc))
        return SKIPPED, "%s could not be posted (warning): %s" % (what, exc)
    for text in failed:
        ctx.runner.warn("%s: not all was posted: %s" % (what, text))
    return DONE, "posted %s%s" % (what, " (warning, not all was posted: %s)" % "; ".join(failed) if failed else "")


class Runner(object):
    """Runs steps in order, timing each on ``clock`` (a callable answering an aware datetime). ``check_mode``: writes
    are replaced by "would ..." steps. ``after_step(step)``: called after each recorded step (a caller's progress
    line; the tests' kill point). A step's detail is redacted when it is recorded - once, before anything reads
    it: by shape (``_core.redact.redact_text``), then by ``redact(text)`` (the action removes its secret options'
    values): the printed lines, the result, the state's ``detail`` and the Events and annotation built from it
    read only that."""

    def __init__(self, clock, check_mode=False, after_step=None, redact=None):
        self.clock, self.check_mode, self.after_step = clock, check_mode, after_step
        self._redact = redact
        self.steps, self.warnings = [], []

    def warn(self, text):
        """A warning of this half (an Event the API did not accept): redacted as a detail, in the result's
        ``warnings`` - never a change, never the rollout's outcome."""
        self.warnings.append(self.redact("%s" % text))

    def redact(self, text):
        text = redact_text(text)
        return self._redact(text) if self._redact is not None else text

    def record(self, name, outcome, started, detail=""):
        step = Step(name, outcome, (self.clock() - started).total_seconds(), self.redact("%s" % detail))
        self.steps.append(step)
        if self.after_step is not None:
            self.after_step(step)
        return step

    def run(self, name, action):
        """Run ``action()`` -> (step outcome, detail). A ``Stop`` is recorded with its outcome and raised on; a
        NodefixError (an API call that failed, an answer that is not well-formed) is recorded as ``failed`` and
        raised on as a ``Stop`` of ``failed`` - the caller decides what is given back."""
        started = self.clock()
        try:
            outcome, detail = action()
        except Stop as stop:
            stop.detail = self.record(name, stop.outcome, started, stop.detail).detail
            raise
        except NodefixError as exc:
            step = self.record(name, Outcome.FAILED, started, "%s" % exc)
            raise Stop(Outcome.FAILED, "%s: %s" % (name, step.detail))
        except Exception as exc:  # pylint: disable=broad-except
            # anything else (an answer of a shape no check foresaw) stops the step as failed too, so that the
            # caller still gives back what this run took: an exception must never leave a node cordoned
            step = self.record(name, Outcome.FAILED, started, "unexpected %s: %s" % (type(exc).__name__, exc))
            raise Stop(Outcome.FAILED, "%s: %s" % (name, step.detail))
        return self.record(name, outcome, started, detail)

    def would(self, what, write):
        """``write()`` -> detail, or in check mode ``(WOULD, "would " + what)`` without calling it."""
        if self.check_mode:
            return WOULD, "would " + what
        return DONE, write() or what
