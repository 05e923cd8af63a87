# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one error root. Every exception nodefix.k8s raises on purpose derives from
``NodefixError`` (the problem-specific ones keep ``ValueError`` beside it where callers relied on
that), so a module catches this one type and fails with ``exc.fail_kwargs()``. Imports nothing of
the collection: every other module_utils file may import it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class NodefixError(Exception):
    """A problem a module reports with ``fail_json(msg=..., **details)``; nothing was changed
    unless the message says so. ``details`` are extra result keys (``path``, ``rc`` ...)."""

    def __init__(self, msg, **details):
        super(NodefixError, self).__init__(msg)
        self.msg = msg
        self.details = details

    def fail_kwargs(self):
        """The keyword arguments for ``module.fail_json``."""
        out = dict(self.details)
        out["msg"] = self.msg
        return out


class CommandError(NodefixError):
    """A node command that had to succeed did not: ``cmd``, ``rc``, ``stdout``, ``stderr``."""
