# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection.
"""One option spec per detector, checked the same way everywhere.

Every detector file (``_containerd``, ``_gvisor``, ``_kubelet``,
``_mount_units``, ``_pids.detect``, ``_kernel``, ``_cpu_quota``) exports
``OPTIONS`` (an Ansible argument spec, without ``root``) and may export
``option_errors(params)`` (the checks a spec cannot express, e.g. "a
version"). The single-purpose module builds its ``argument_spec`` from
``OPTIONS``; ``node_audit`` validates its ``options`` against the same
spec here, with Ansible's own validator, so a typo or a wrong type is a
clear error naming the detector and the key, never silently ignored.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner


def module_spec(detector_module, **extra):
    """``argument_spec`` for a single-purpose module: ``root``, the detector's OPTIONS, then ``extra``."""
    spec = {"root": {"type": "path", "default": "/"}}
    spec.update(copy.deepcopy(detector_module.OPTIONS))
    spec.update(extra)
    return spec


def value_errors(detector_module, params):
    """The detector's own checks of already typed parameters (a list of messages)."""
    check = getattr(detector_module, "option_errors", None)
    return list(check(params)) if check else []


def validate(name, detector_module, options):
    """Typed, defaulted options for detector ``name``; raise NodefixError naming every problem.

    ``options`` is what the user gave under ``node_audit``'s ``options.<name>``.
    """
    spec = detector_module.OPTIONS
    where = "options.%s" % name
    if not isinstance(options, dict):
        raise NodefixError("%s must be a dict of that detector's options, got %s %r"
                           % (where, type(options).__name__, options))
    problems = []
    unknown = sorted(set(options) - set(spec))
    for key in unknown:
        problems.append("%s.%s is not an option of the %s detector (known: %s)"
                        % (where, key, name, ", ".join(sorted(spec))))
    known = dict((k, v) for k, v in options.items() if k in spec)
    result = ArgumentSpecValidator(copy.deepcopy(spec)).validate(known)
    for msg in result.error_messages:
        problems.append("%s: %s" % (where, msg))
    params = result.validated_parameters
    if not problems:
        problems.extend("%s.%s" % (where, msg) for msg in value_errors(detector_module, params))
    if problems:
        raise NodefixError("; ".join(problems), detector=name, problems=problems)
    return params


def run_check(module, detector_module, precheck=None):
    """What a per-problem read-only module (``*_info``) returns: the detector's own checks of the typed
    parameters (``fail_json`` naming each problem), ``precheck(params)`` (a message to fail with, or
    None), then the detector's ``check()`` through the module's Runner; a ``NodefixError`` becomes
    ``fail_json`` with its rc, stdout and stderr. Nothing is changed on the node."""
    p = module.params
    errors = value_errors(detector_module, p)
    if errors:
        module.fail_json(msg="; ".join(errors))
    problem = precheck(p) if precheck else None
    if problem:
        module.fail_json(msg=problem)
    try:
        return detector_module.check(Runner(module), root=p["root"],
                                     **dict((k, p[k]) for k in detector_module.OPTIONS))
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    return None  # not reached: fail_json exits
