# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""Regular expressions compiled at their first use.

The node-problem-detector plugin starts a fresh Python every tick and imports every detector; their
modules defined dozens of patterns with ``re.compile`` at import, most of them for what a node may
not have (a runsc binary, a kubelet version line, a docker container name) - compiling them was a
tenth of the tick's first rule. ``lazy_compile`` gives a stand-in that compiles on the first attribute
asked (``match``, ``search``, ``sub``, ``pattern``, ...) and keeps it: the same pattern, the same
answers, paid for only when used. Use it through its methods only (not as an argument to
``re.match``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


class LazyPattern(object):
    """``re.compile(pattern, flags)`` done when an attribute is first asked; that attribute is then kept."""

    def __init__(self, pattern, flags=0):
        self._source = (pattern, flags)

    def __getattr__(self, name):
        # dunders (copy, pickle, repr machinery) and the source itself are never delegated
        if name.startswith("__") or name == "_source":
            raise AttributeError(name)
        value = getattr(re.compile(*self._source), name)   # re caches the compiled pattern
        setattr(self, name, value)
        return value

    def __repr__(self):
        return "lazy_compile(%r, %r)" % self._source


def lazy_compile(pattern, flags=0):
    """A pattern like ``re.compile(pattern, flags)``, compiled at its first use."""
    return LazyPattern(pattern, flags)
