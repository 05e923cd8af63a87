# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore package). Its API may change without notice; do not import it
# from other collections.
"""The one exit: every module and action plugin of the collection leaves through ``leave`` (modules) or
``leave_action`` (action plugins), which redact the whole result (_core.redact) before Ansible sees it.

A module is built as ``exit.redacting(AnsibleModule)(argument_spec=..., ...)``: the class returned is
AnsibleModule with ``exit_json``, ``fail_json`` and ``warn`` going through this file, so nothing a module
returns - every string at any depth, ``msg``, ``diff``, ``warnings`` (``module.warn`` text), ``exception``
and ``invocation.module_args`` (what ``-vvv`` prints and AWX keeps in every job event) - leaves unredacted,
including the failures AnsibleModule itself reports while it checks the arguments. Ansible then masks the
values of the module's ``no_log`` options (and any value a module adds to ``no_log_values``, a password read
from a file) everywhere in the result, the invocation included: this file gives it an invocation that is
already redacted, so a URL's user information or ``--user root:x`` in an argv is replaced there too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import sys
import traceback

from ansible.module_utils.common.parameters import remove_values

from ansible_collections.nodefix.k8s.plugins.module_utils._core import secret_values
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import redact, redact_text

_CLASSES = {}
# the module the running main() built (a module runs one main() per process)
_BUILT = []


def _result(module, result):
    """``result`` redacted, with the invocation Ansible would add (``module.params``) redacted too."""
    out = redact(result)
    params = getattr(module, "params", None)
    if isinstance(params, dict) and "invocation" not in result:
        out["invocation"] = {"module_args": redact(params)}
    return out


def _tracebacks_shown(module):
    """Whether Ansible's own fail_json adds the pending exception's traceback to a failure: ansible-core 2.19's
    traceback setting for errors, or -vvv/debug before it (2.17, 2.18)."""
    try:
        from ansible.module_utils._internal import _traceback  # pylint: disable=import-outside-toplevel
    except ImportError:
        return bool(getattr(module, "_debug", False) or getattr(module, "_verbosity", 0) >= 3)
    return _traceback.is_traceback_enabled(_traceback.TracebackEvent.ERROR)


def leave(module, result, failed):
    """Redact ``result`` and exit through AnsibleModule's own exit_json (``failed`` False) or fail_json."""
    result = _result(module, result)
    base = type(module).nodefix_base
    if not failed:
        base.exit_json(module, **result)
    msg = result.pop("msg", None)
    if "exception" not in result and sys.exc_info()[0] is not None and _tracebacks_shown(module):
        # the traceback Ansible would format from the exception being handled (its message included), redacted;
        # only where Ansible itself would add one (-vvv, debug, its traceback setting): a result stays the same
        result["exception"] = redact_text(traceback.format_exc())
    base.fail_json(module, msg="" if msg is None else msg, **result)


def _credentials_only(module, spec):
    """Ansible masks every value of a ``no_log`` option as a substring of the whole result; of a mapping of headers
    or environment variables (``prometheus_headers``, ``etcd_health_environment``) only the credentials
    (``_core.secret_values``) stay masked: a tenant ``X-Scope-OrgID: prod`` or ``ETCDCTL_USER: root`` would turn the
    node ``prod-b`` into ``********-b``. A value that is also another secret option's stays masked."""
    values = getattr(module, "no_log_values", None)
    params = getattr(module, "params", None)
    if not isinstance(values, set) or not isinstance(params, dict) or not isinstance(spec, dict):
        return
    data, kept, credentials = set(), set(), set()
    for name, option in spec.items():
        value = dict.get(params, name)
        if not isinstance(option, dict) or not option.get("no_log") or value in (None, "", {}):
            continue
        if isinstance(value, dict) and str(name).endswith(("headers", "environment")):
            data.update("%s" % v for v in value.values() if isinstance(v, (str, int, float)))
            credentials.update(secret_values.of_mapping(value))
        elif isinstance(value, dict):
            kept.update("%s" % v for v in value.values())
        elif isinstance(value, (list, tuple)):
            kept.update("%s" % v for v in value)
        else:
            kept.add("%s" % value)
    # a user:password value's password is masked on its own (ETCDCTL_USER=root:pw: the user shown)
    values.difference_update(data - kept - credentials)
    values.update(credentials)


def redacting(base):
    """``base`` (AnsibleModule) whose every exit - and every warning - goes through ``leave``."""
    if base not in _CLASSES:
        class Redacting(base):
            def __init__(self, *args, **kwargs):
                super(Redacting, self).__init__(*args, **kwargs)
                _BUILT[:] = [self]
                _credentials_only(self, kwargs.get("argument_spec") or (args[0] if args else {}))

            def exit_json(self, **result):
                leave(self, result, failed=False)

            def fail_json(self, msg, **result):
                result["msg"] = msg
                if not isinstance(result.get("exception", ""), str):
                    result["exception"] = "".join(traceback.format_exception(
                        type(result["exception"]), result["exception"], result["exception"].__traceback__))
                leave(self, result, failed=True)

            def warn(self, warning, *args, **kwargs):
                # Ansible 2.19 keeps a warning as an object that its no_log masking does not reach: masked here
                warning = remove_values(redact_text(str(warning)), getattr(self, "no_log_values", set()))
                return super(Redacting, self).warn(warning, *args, **kwargs)

        Redacting.nodefix_base = base
        Redacting.__name__ = "Redacting" + base.__name__
        _CLASSES[base] = Redacting
    return _CLASSES[base]


def _unexpected(exc):
    """What an exception no module expected says: its type and its text (redacted where it leaves)."""
    return "unexpected %s: %s" % (type(exc).__name__, exc)


def redacted_main(main):
    """A module's ``main`` whose every exception leaves through ``leave`` too: an error no module code expected
    (a TypeError on a bad value, a library's exception) would otherwise leave as Ansible's own "Module failed" with
    its raw text - a credential it quotes included. Its traceback is added only where Ansible would add one (-vvv,
    its traceback setting). An exception before the module was built is raised as it is: no argument of the
    task has been read then (AnsibleModule's own argument check leaves through ``leave``)."""
    @functools.wraps(main)
    def run(*args, **kwargs):
        del _BUILT[:]
        try:
            return main(*args, **kwargs)
        except Exception as exc:  # pylint: disable=broad-except
            if not _BUILT:
                raise  # nothing of the task read yet (ansible-test's argument spec introspection stops here too)
            leave(_BUILT[-1], {"msg": _unexpected(exc)}, failed=True)
    return run


def leave_action(result):
    """An action plugin's result, redacted: what its ``run`` returns."""
    return redact(result)


def _flow_control(exc):
    """Whether ``exc`` is one of ansible-core's action flow-control exceptions (``AnsibleActionSkip``,
    ``AnsibleActionFail``: a result of their own that the task executor takes as the task's) - told by their base
    class ``ansible.errors.AnsibleAction``, never imported: module_utils travel to nodes inside modules, where
    ``ansible.errors`` does not exist."""
    return any(c.__name__ == "AnsibleAction" and c.__module__ == "ansible.errors" for c in type(exc).__mro__)


def redacted_flow(exc):
    """A flow-control exception of the same kind whose message and result are redacted (their text as it was
    otherwise reaches the job output as it is)."""
    # ansible-core 2.19 keeps the plugin's own result as ``_result``; 2.17/2.18 as ``result``, with failed, skipped
    # and msg in it (the new exception puts them back)
    result = getattr(exc, "_result", None)
    result = dict(result if isinstance(result, dict) else getattr(exc, "result", None) or {})
    for key in ("failed", "skipped", "msg", "exception"):
        result.pop(key, None)
    flow = type(exc)(redact_text("%s" % (getattr(exc, "message", None) or exc)), result=leave_action(result))
    held = vars(flow).get("result")     # 2.17/2.18: a plain dict, with the traceback being handled (unredacted)
    if isinstance(held, dict) and isinstance(held.get("exception"), str):
        held["exception"] = redact_text(held["exception"])
    return flow


def redacted_run(run):
    """An action plugin's ``run`` whose every exception - Ansible's errors for bad task arguments too - becomes a
    failed result through ``leave_action``: Ansible would print its text as it is. ``AnsibleActionSkip`` and
    ``AnsibleActionFail`` go on as what they are (skipped, failed), their message and result redacted. The
    traceback only where Ansible would show one (-vvv)."""
    @functools.wraps(run)
    def wrapper(self, tmp=None, task_vars=None):
        try:
            return run(self, tmp=tmp, task_vars=task_vars)
        except Exception as exc:  # pylint: disable=broad-except
            if _flow_control(exc):
                # (from None: the original, unredacted, is not shown as its context)
                raise redacted_flow(exc) from None
            result = {"failed": True, "msg": getattr(exc, "message", None) or str(exc)}
            if not type(exc).__module__.startswith("ansible."):
                result["msg"] = _unexpected(exc)
            if getattr(getattr(self, "_display", None), "verbosity", 0) >= 3:
                result["exception"] = traceback.format_exc()
            return leave_action(result)
    return wrapper
