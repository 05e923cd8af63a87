# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.preflight: the playbooks' variables and the controller's prerequisites, checked on the
controller before any node is touched (the module file plugins/modules/preflight.py holds the docs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib
import json
import os

import yaml

from ansible.errors import AnsibleError
from ansible.galaxy.dependency_resolution.versioning import meets_requirements
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import leave_action, redacted_run
from ansible_collections.nodefix.k8s.plugins.module_utils._preflight import variables as preflight_vars
from ansible_collections.nodefix.k8s.plugins.module_utils._preflight.targets import no_match_problem, triage_problems

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC_PATH = os.path.join(COLLECTION_ROOT, "playbooks", "vars", "arguments.yml")
# what each playbook runs from other collections: {playbook: [(collection, why, only with a kubeconfig)]}
NEEDS = {
    "remediate": [("ansible.posix", "ansible.posix.sysctl (the pids role)", False)],
    "npd": [("ansible.posix", "ansible.posix.sysctl", False)],
}


def own_version():
    """nodefix.k8s's own version (MANIFEST.json when installed, galaxy.yml in a checkout), '' when unknown."""
    manifest = os.path.join(COLLECTION_ROOT, "MANIFEST.json")
    try:
        if os.path.isfile(manifest):
            with open(manifest) as fh:
                return str(json.load(fh)["collection_info"]["version"])
        with open(os.path.join(COLLECTION_ROOT, "galaxy.yml")) as fh:
            return str(yaml.safe_load(fh)["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def own_dependencies():
    """{collection: version range} nodefix.k8s declares (MANIFEST.json when installed, galaxy.yml in a checkout)."""
    manifest = os.path.join(COLLECTION_ROOT, "MANIFEST.json")
    if os.path.isfile(manifest):
        with open(manifest) as fh:
            return dict(json.load(fh)["collection_info"].get("dependencies") or {})
    with open(os.path.join(COLLECTION_ROOT, "galaxy.yml")) as fh:
        return dict(yaml.safe_load(fh).get("dependencies") or {})


def installed_version(name):
    """The version of collection ``name`` this controller would load, '' when its manifest has none, None when
    it is not installed."""
    try:
        pkg = importlib.import_module("ansible_collections.%s" % name)
    except ImportError:
        return None
    for path in list(getattr(pkg, "__path__", [])):
        manifest = os.path.join(path, "MANIFEST.json")
        if os.path.isfile(manifest):
            with open(manifest) as fh:
                return str(json.load(fh)["collection_info"].get("version") or "")
        galaxy = os.path.join(path, "galaxy.yml")
        if os.path.isfile(galaxy):
            with open(galaxy) as fh:
                return str(yaml.safe_load(fh).get("version") or "")
    return ""


def prerequisite_problems(playbook, kubeconfig_set):
    out = []
    ranges = own_dependencies()
    for name, why, only_with_kubeconfig in NEEDS.get(playbook, []):
        if only_with_kubeconfig and not kubeconfig_set:
            continue
        version = installed_version(name)
        wanted = ranges.get(name, "*")
        if version is None:
            out.append("the collection %s is not installed on this controller (%s needs it: %s); install it "
                       "(ansible-galaxy collection install '%s:%s', or the ansible package from PyPI, which bundles it)"
                       % (name, playbook, why, name, wanted))
        elif version and wanted not in ("*", "") and not meets_requirements(version, wanted):
            out.append("the collection %s %s is installed, nodefix.k8s needs %s (%s)" % (name, version, wanted, why))
    return out


def computed_names(hostvars, host):
    """The names a play computed for ``host`` - its registered results and its facts (``set_fact``, cacheable or
    not, gathered facts) - minus the ones given as extra vars (``-e`` outranks them: a user's setting).

    They are what a play worked out, never what a user configured: the preflight judges settings (inventory,
    group and host vars, ``-e``, play vars, ``vars_files``, ``include_vars``) and leaves results alone, so a site
    playbook that registers ``nodefix_boot`` or runs ``remediate`` before ``audit`` is not refused as a typo (a
    computed name that IS a setting is still judged: a ``set_fact`` of a bad value is refused). Ansible keeps
    them apart from the settings in the variable manager's two fact caches (the precedence list's
    "set_facts / registered vars" and "host facts"); its public ``hostvars`` only shows them merged.
    """
    manager = getattr(hostvars, "_variable_manager", None)
    if manager is None:
        return frozenset()
    names = set(getattr(manager, "_nonpersistent_fact_cache", {}).get(host) or {})
    try:
        names.update(manager._fact_cache.get(host) or {})  # pylint: disable=protected-access
    except (AttributeError, KeyError):
        pass
    return frozenset(names - set(getattr(manager, "extra_vars", None) or {}))


# what the preflight's own play sets besides the hosts' variables: play vars, vars on an import_playbook,
# vars_files, role vars - named so in a refusal
PLAY_VARS = "the play's vars"


def own_vars_names(args):
    """The nodefix_* names the collection's own vars files define (playbooks/vars/*.yml: computed defaults such
    as nodefix_report_base) that are not settings: the play's, never a user's."""
    names = set()
    for path in glob.glob(os.path.join(COLLECTION_ROOT, "playbooks", "vars", "*.yml")):
        if os.path.abspath(path) != SPEC_PATH:
            with open(path) as fh:
                names.update(yaml.safe_load(fh) or {})
    return names - set(args)


def play_settings(task_vars, hostvars, values, args):
    """The nodefix_* settings the preflight's play has beyond its hosts' variables: ``vars:`` of the play or of
    an ``import_playbook`` (a site playbook's wrapper), ``vars_files``, role vars - what a user configured there,
    judged like the hosts' (a typo, a wrong type). Not: a host's own variables (checked per host), what the
    play computed (registered, set_fact; known settings' values are still judged), the collection's own vars
    files' names."""
    host = task_vars.get("inventory_hostname")
    skip = set((values.get(host) or {})) | (computed_names(hostvars, host) - set(args)) | own_vars_names(args)
    return dict((name, task_vars[name]) for name in list(task_vars)
                if str(name).startswith(preflight_vars.PREFIX) and name not in skip)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("playbook", "hosts", "ignore", "targets", "targets_matched", "triage_remediate_clean"))

    @redacted_run
    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        playbook = self._task.args.get("playbook")
        hosts = self._task.args.get("hosts") or []
        if playbook not in preflight_vars.PLAYBOOKS or not isinstance(hosts, list):
            raise AnsibleError("nodefix.k8s.preflight needs playbook (one of %s) and hosts (a list)"
                               % ", ".join(preflight_vars.PLAYBOOKS))
        with open(SPEC_PATH) as fh:
            spec = yaml.safe_load(fh)
        args = preflight_vars.check_spec(spec)
        hostvars = task_vars.get("hostvars") or {}
        values, unreadable = {}, []
        for host in hosts:
            try:
                host_vars = hostvars[host]
                computed = computed_names(hostvars, host) - set(args)
                values[host] = dict((name, host_vars[name]) for name in list(host_vars.keys())
                                    if str(name).startswith(preflight_vars.PREFIX) and name not in computed)
            # a variable that cannot be templated (an undefined name in it) is a problem, named, never a traceback
            except Exception as exc:  # pylint: disable=broad-except
                unreadable.append("%s: a nodefix_* variable could not be read: %s" % (host, to_text(exc)))
        try:
            play = play_settings(task_vars, hostvars, values, args)
        except Exception as exc:  # pylint: disable=broad-except
            unreadable.append("the play's vars: a nodefix_* variable could not be read: %s" % to_text(exc))
            play = {}
        if play:
            values[PLAY_VARS] = play
        ignore = self._task.args.get("ignore")
        if ignore is None:
            ignore = next((v.get("nodefix_preflight_ignore") for v in values.values()
                           if v.get("nodefix_preflight_ignore")), [])
        ignore = ignore if isinstance(ignore, list) else preflight_vars._as_list(ignore) or []  # pylint: disable=protected-access
        found = unreadable + preflight_vars.problems(args, values, playbook, list(ignore))
        kubeconfig = any(v.get("nodefix_kubeconfig") not in (None, "") for v in values.values())
        found += prerequisite_problems(playbook, kubeconfig)
        # the triage's orphans never a host of a playbook that connects (audit, npd, remediate), its clean nodes
        # remediated only when asked
        allow_clean = boolean(self._task.args.get("triage_remediate_clean") or False, strict=False)
        found += triage_problems(dict((h, v) for h, v in values.items() if h != PLAY_VARS), playbook, allow_clean)
        # a nodefix_targets pattern that matched no host: every play of the playbook would be skipped, exit 0
        targets = self._task.args.get("targets")
        if targets is not None and not self._task.args.get("targets_matched"):
            groups = task_vars.get("groups") or {}
            found.insert(0, no_match_problem(targets, list(groups), groups.get("all") or []))
        result.update(changed=False, problems=found, checked_hosts=len([h for h in values if h != PLAY_VARS]),
                      collection_version=own_version(),
                      checked_variables=sorted(set(n for v in values.values() for n in v)))
        if found:
            result.update(failed=True, msg="nodefix.k8s %s refused before any node: %s" % (playbook, "; ".join(found)))
        else:
            result["msg"] = ("%d host(s): every nodefix_* variable known and well-formed, prerequisites present"
                             % result["checked_hosts"])
        return leave_action(result)
