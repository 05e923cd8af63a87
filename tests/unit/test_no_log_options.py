# SPDX-License-Identifier: GPL-3.0-or-later
"""Every option that takes a credential is ``no_log`` (issue 61 item 1): walks the argument spec of every module in
plugins/modules/ (as its ``main()`` builds it) and every role's meta/argument_specs.yml, suboptions too. An option
is a credential when its name is a secret's (_core.secret_names.secret_name: password, token, ... - not a file or path
naming where one is, nor an option of type path) or it carries headers or an environment (a token goes there)."""

import glob
import importlib
import os
import re

import pytest
import yaml

from ansible.module_utils import basic

from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_names import secret_name

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))
                 if not p.endswith("__init__.py"))
ROLE_SPECS = sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")))


def credential(name):
    return secret_name(name) or name.endswith(("headers", "environment"))


def walk(spec, where):
    """(path, option) of every option of ``spec`` that takes a credential and is not no_log."""
    for name, option in sorted((spec or {}).items()):
        if credential(name) and option.get("type") != "path" and not option.get("no_log"):
            yield "%s.%s" % (where, name)
        yield from walk(option.get("options"), "%s.%s" % (where, name))


class Built(BaseException):
    """Stops main() once AnsibleModule got its spec: a BaseException, as SystemExit is, so that the one exit's
    catch of every Exception (_core/exit.redacted_main) lets it through."""


def module_spec(monkeypatch, name):
    seen = {}

    def init(self, argument_spec=None, **kwargs):
        seen["spec"] = argument_spec
        raise Built()
    monkeypatch.setattr(basic.AnsibleModule, "__init__", init)
    with pytest.raises(Built):
        importlib.import_module("ansible_collections.nodefix.k8s.plugins.modules." + name).main()
    return seen["spec"]


@pytest.mark.parametrize("name", MODULES)
def test_every_credential_option_of_a_module_is_no_log(monkeypatch, name):
    spec = module_spec(monkeypatch, name)
    assert spec, name
    assert list(walk(spec, name)) == []


@pytest.mark.parametrize("path", ROLE_SPECS, ids=[p.split(os.sep)[-3] for p in ROLE_SPECS])
def test_every_credential_variable_of_a_role_is_no_log(path):
    with open(path) as fh:
        entry_points = yaml.safe_load(fh)["argument_specs"]
    assert [found for ep, spec in sorted(entry_points.items()) for found in walk(spec.get("options"), ep)] == []


def test_the_walk_sees_the_credential_options():
    assert credential("prometheus_password") and credential("gvisor_mirror_headers")
    assert credential("etcd_health_environment") and not credential("prometheus_token_file")
    assert list(walk({"a_password": {}, "x": {"options": {"token": {"no_log": False}}}}, "m")) == ["m.a_password", "m.x.token"]


def _tasks(items):
    for task in items or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key))


def test_an_operators_whole_command_run_by_a_role_is_no_log_and_so_is_its_option():
    """Review of issue 61 (2026-12-07): the reboot role ran ``reboot_power_cycle_command`` (an ipmitool argv with its
    ``-P`` password) with ansible.builtin.command - printed on failure and kept in AWX job events, out of reach of the
    modules' redaction. A role task whose whole argv is one option is no_log, and that option is no_log in the spec."""
    specs = {}
    for path in ROLE_SPECS:
        for entry in (yaml.safe_load(open(path)).get("argument_specs") or {}).values():
            specs.update((name, option) for name, option in (entry.get("options") or {}).items())
    found, bad = [], []
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))):
        for task in _tasks(yaml.safe_load(open(path))):
            argv = (task.get("ansible.builtin.command") or {}).get("argv") if isinstance(
                task.get("ansible.builtin.command"), dict) else None
            whole = re.match(r"^\{\{\s*([a-z_]+)\s*\}\}$", argv.strip()) if isinstance(argv, str) else None
            if whole and whole.group(1) in specs:
                found.append(whole.group(1))
                if not task.get("no_log") or not specs[whole.group(1)].get("no_log"):
                    bad.append("%s: %s" % (os.path.relpath(path, REPO), task.get("name")))
    assert "reboot_power_cycle_command" in found
    assert not bad, bad


def _role_and_playbook_tasks():
    """(path, task) of every task in the roles' tasks and handlers and the playbooks (their plays' task lists)."""
    files = sorted(glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))
                   + glob.glob(os.path.join(REPO, "roles", "*", "handlers", "*.yml"))
                   + glob.glob(os.path.join(REPO, "playbooks", "tasks", "*.yml"))
                   + glob.glob(os.path.join(REPO, "playbooks", "*.yml")))
    for path in files:
        data = yaml.safe_load(open(path))
        tasks = []
        for item in data if isinstance(data, list) else []:
            if isinstance(item, dict) and "hosts" in item:
                for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                    tasks.extend(item.get(key) or [])
            else:
                tasks.append(item)
        for task in _tasks(tasks):
            yield path, task


def test_no_role_or_playbook_calls_kubernetes_core():
    """Issue 61 item 3: every API call of the roles and playbooks goes through the collection's one Kubernetes client
    (its modules: one timeout and retry policy, a token file trimmed as client-go trims it, errors that never quote
    a request's headers - the Python client quotes ``Invalid header value b'Bearer <token>\\n'``) and leaves through
    the one exit that redacts. Until 2026-12-07 eight kubernetes.core tasks (the kubelet ConfigMap's read and
    patch, the gVisor eviction's pod listing, Node read and replacement wait, the reboot's Ready check, the drain
    preflight's Node read and SelfSubjectAccessReviews) were no_log with redacted rescues; now none is left, and
    the modules that replaced them are called (kubelet_configmap, pod_recreate, node_ready, api_access)."""
    tasks = list(_role_and_playbook_tasks())
    assert len(tasks) > 300, len(tasks)     # the walk reads the roles and playbooks (not an empty glob)
    core = ["%s: %s" % (os.path.relpath(path, REPO), task.get("name")) for path, task in tasks
            if any(str(k).startswith(("kubernetes.core.", "k8s", "community.kubernetes.")) for k in task)]
    assert not core, core
    called = set(str(k) for _path, task in tasks for k in task)
    assert {"nodefix.k8s.kubelet_configmap", "nodefix.k8s.pod_recreate", "nodefix.k8s.node_ready",
            "nodefix.k8s.api_access"} <= called, sorted(k for k in called if k.startswith("nodefix.k8s."))


@pytest.mark.parametrize("rel", ["roles/reboot/tasks/verify.yml", "playbooks/tasks/preflight_drain.yml"])
def test_the_ready_check_and_the_drain_preflight_go_through_the_one_client(rel):
    """Issue 61 item 3: the reboot's check that the node is Ready again (nodefix.k8s.node_ready) and the drain
    preflight's node read and SelfSubjectAccessReviews (nodefix.k8s.api_access) are the collection's modules -
    the one Kubernetes client, its timeout and retries, a token file trimmed, errors that never quote a credential."""
    text = open(os.path.join(REPO, rel)).read()
    modules = [str(k) for task in _tasks(yaml.safe_load(text)) for k in task if "." in str(k)]
    assert not [m for m in modules if m.startswith("kubernetes.core.")], modules
    assert {"roles/reboot/tasks/verify.yml": "nodefix.k8s.node_ready",
            "playbooks/tasks/preflight_drain.yml": "nodefix.k8s.api_access"}[rel] in modules


def test_the_gvisor_eviction_is_one_collection_call():
    """Issue 61 item 3: the gVisor role's opt-in eviction (listing the node's pods, evicting, waiting for each
    replacement) is one call of nodefix.k8s.pod_recreate over the collection's one client, with no kubernetes.core
    task left in the role; a rescue that quotes the module's failure redacts it."""
    calls, texts = [], []
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "gvisor", "tasks", "*.yml"))):
        texts.append(open(path).read())
        calls.extend(os.path.basename(path) for task in _tasks(yaml.safe_load(texts[-1])) if "nodefix.k8s.pod_recreate" in task)
    assert calls == ["evict.yml"]
    assert not [t for t in texts if "kubernetes.core." in t]
    with open(os.path.join(REPO, "roles", "gvisor", "tasks", "evict.yml")) as fh:
        quoted = [e for e in re.findall(r"\{\{(.*?)\}\}", fh.read(), re.DOTALL) if "ansible_failed_result" in e]
    assert quoted and all("nodefix.k8s.redact" in e for e in quoted)


# the modules that replaced the kubernetes.core tasks (issue 61 item 3): the files that call them had the guard below
def _unredacted_quotes(files, quoting):
    """(how many templates of FILES match QUOTING, those of them without the redact filter as 'path: {{...}}')."""
    quoted, bad = 0, []
    for path in files:
        for expr in re.findall(r"\{\{(.*?)\}\}", open(path).read(), re.DOTALL):
            if re.search(quoting, expr):
                quoted += 1
                if "nodefix.k8s.redact" not in expr:
                    bad.append("%s: {{%s}}" % (os.path.relpath(path, REPO), " ".join(expr.split())[:120]))
    return quoted, bad


REPLACED = {"nodefix.k8s.kubelet_configmap", "nodefix.k8s.pod_recreate", "nodefix.k8s.node_ready",
            "nodefix.k8s.api_access"}


def test_what_an_api_modules_failure_said_is_shown_redacted():
    """Restored from the kubernetes.core days (second review of 2026-12-07: a rescue recorded a no_log task's raw
    error): the one exit redacts a module's own result, but a template that quotes it again - a rescue's
    ansible_failed_result, a registered result's msg - builds a new text the module never saw (a task timeout's or
    Ansible's own failure message, a result of another task in the same rescue). In every task file that calls one
    of the API modules that replaced kubernetes.core (kubelet durable*.yml, gvisor evict.yml, reboot verify.yml, the
    drain preflight), each template that quotes a failure's or a result's message redacts it."""
    files = sorted(set(path for path, task in _role_and_playbook_tasks() if set(str(k) for k in task) & REPLACED))
    rel = [os.path.relpath(p, REPO) for p in files]
    assert {"roles/kubelet/tasks/durable.yml", "roles/kubelet/tasks/durable_patch.yml", "roles/gvisor/tasks/evict.yml",
            "roles/reboot/tasks/verify.yml", "playbooks/tasks/preflight_drain.yml"} <= set(rel), rel
    # (_nodefix_drain_refused.msg: the preflight's own fact, made of the redacted reason)
    quoted, bad = _unredacted_quotes(files, r"ansible_failed_result|(?<!_refused)\.msg\b")
    assert quoted >= 5
    assert not bad, bad


def test_every_failure_a_role_or_playbook_quotes_is_redacted():
    """A rescue's ``ansible_failed_result`` is the failed task's whole result, handed over uncensored: a builtin
    module's message (apt, get_url, command, reboot) or Ansible's own (a timeout, a connection error) that the
    collection's one exit never saw. Every template in a role's or playbook's task file that quotes it - whatever
    module failed - passes it through the redact filter in the same expression (only the no_log mark may be read
    bare)."""
    files = sorted(glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))
                   + glob.glob(os.path.join(REPO, "roles", "*", "handlers", "*.yml"))
                   + glob.glob(os.path.join(REPO, "playbooks", "tasks", "*.yml"))
                   + glob.glob(os.path.join(REPO, "playbooks", "*.yml")))
    quoted, bad = _unredacted_quotes(files, r"ansible_failed_result(?!\._ansible_no_log)")
    assert quoted >= 8, quoted
    assert not bad, bad
