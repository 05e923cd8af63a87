# SPDX-License-Identifier: GPL-3.0-or-later
"""The one exit (_core/exit.py): every module and action plugin leaves through it, and what leaves is redacted
whole - msg, warnings, every string at any depth, diff, exception and invocation.module_args.

Every module in plugins/modules/ is run (its real ``main()``) with a credential planted in its arguments; the
``run_module`` fixture's exit_json/fail_json raise unless AnsibleModule's exits were called by _core/exit.py
(tests/unit/conftest.py ``one_exit``), so a module built any other way fails here, and every module test in
tests/unit/plugins/modules/ (success and failure paths) is held to the same rule."""

import glob
import importlib
import importlib.util
import json
import os
import subprocess

import pytest

from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.nodefix.k8s.plugins.module_utils._core import exit as core_exit
from ansible_collections.nodefix.k8s.plugins.module_utils._core.redact import MARK

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))
                 if not p.endswith("__init__.py"))
ACTIONS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "action", "*.py"))
                 if not p.endswith("__init__.py"))
PLANTED = {"nodefix_planted_url": "https://robot:Walk-Url-Secret-61@mirror.example.com/x",
           "nodefix_planted_argv": ["etcdctl", "--user", "root:Walk-Argv-Secret-61"]}


def test_the_walk_finds_every_module():
    assert len(MODULES) >= 25 and "runsc_install" in MODULES and "reboot_gate" in MODULES
    assert ACTIONS == ["preflight", "rollout"]


@pytest.mark.parametrize("name", MODULES)
def test_every_module_leaves_through_the_one_exit_redacted(run_module, name):
    """A failing path every module has (AnsibleModule's own argument check refuses the planted options): the
    fixture raises unless the exit came through _core/exit.py, and the invocation Ansible would print at -vvv
    holds the options redacted."""
    module = importlib.import_module("ansible_collections.nodefix.k8s.plugins.modules." + name)
    result, failed, _t = run_module(module, dict(PLANTED))
    assert failed, result
    dumped = json.dumps(result)
    assert "Walk-Url-Secret-61" not in dumped and "Walk-Argv-Secret-61" not in dumped
    args = result["invocation"]["module_args"]
    assert args["nodefix_planted_url"] == "https://robot:%s@mirror.example.com/x" % MARK
    assert args["nodefix_planted_argv"] == ["etcdctl", "--user", "root:" + MARK]


EXC_SECRET = "Walk-Exc-Secret-61"
# the preflight and rollout modules are stubs of their action plugins: they fail at once, reading nothing
READ_NO_PARAMS = ("preflight", "rollout")


class _ExplodingParams(dict):
    """A module's params whose every read raises what no module expects (a TypeError quoting a credential, as
    ``re.match`` on an int label does): the unexpected-exception path of every module, whatever its options."""

    def _boom(self, *_args, **_kwargs):
        raise TypeError("expected string or bytes-like object, got 'int' (https://robot:%s@mirror.example.com)"
                        % EXC_SECRET)

    __getitem__ = get = copy = __contains__ = __iter__ = keys = values = _boom


@pytest.fixture
def unexpected(monkeypatch):
    """AnsibleModule built with no options (any module's arguments pass the check) whose params then explode."""
    real_init = basic.AnsibleModule.__init__

    def init(self, *args, **kwargs):
        kwargs = dict((k, v) for k, v in kwargs.items() if k in ("supports_check_mode",))
        real_init(self, argument_spec={}, **kwargs)
        self.params = _ExplodingParams()

    monkeypatch.setattr(basic.AnsibleModule, "__init__", init)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_leaves_an_unexpected_exception_through_the_one_exit(run_module, unexpected, name):
    """Any exception in main() - not only NodefixError - leaves through _core/exit.leave (the fixture raises
    otherwise, and an exception that escaped main() fails here), redacted, its type named, and without a
    traceback at default verbosity."""
    module = importlib.import_module("ansible_collections.nodefix.k8s.plugins.modules." + name)
    result, failed, _t = run_module(module, {})
    assert failed, result
    assert EXC_SECRET not in json.dumps(result), result
    if name in READ_NO_PARAMS:
        assert "action plugin" in result["msg"]
    else:
        assert "unexpected TypeError" in result["msg"] and "mirror.example.com" in result["msg"], result["msg"]
    assert "exception" not in result


def test_an_unexpected_exception_shows_its_traceback_only_where_ansible_would(run_module, unexpected, monkeypatch):
    """With tracebacks on (-vvv), the traceback is there, redacted."""
    monkeypatch.setattr(core_exit, "_tracebacks_shown", lambda module: True)
    module = importlib.import_module("ansible_collections.nodefix.k8s.plugins.modules.triage_info")
    result, failed, _t = run_module(module, {})
    assert failed and "Traceback" in result["exception"] and "TypeError" in result["exception"]
    assert EXC_SECRET not in json.dumps(result)


def test_an_exception_before_the_module_is_built_is_raised_as_it_is():
    """Nothing of the task is read before AnsibleModule is built (ansible-test's introspection stops there)."""
    class Stop(Exception):
        pass

    @core_exit.redacted_main
    def main():
        raise Stop()

    with pytest.raises(Stop):
        main()


def test_a_real_exit_redacts_everything_ansible_prints(monkeypatch, capsys):
    """AnsibleModule's real exit_json (no double): the JSON a module prints, as the controller reads it."""
    args = {"url": "http://u:Pr0xy@Tail-Real-61@proxy.example.com", "password": "No-Log-Real-61",
            "_ansible_remote_tmp": "/tmp", "_ansible_keep_remote_files": False, "_ansible_diff": True}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    # a module's warnings go into its result, not to the controller's display (a test that imported controller
    # code earlier in this process makes Ansible 2.19 believe it runs on the controller)
    monkeypatch.setattr(ansible_internal, "is_controller", False, raising=False)
    module = core_exit.redacting(basic.AnsibleModule)(
        argument_spec=dict(url=dict(type="str"), password=dict(type="str", no_log=True)))
    module.warn("cannot reach %s (password No-Log-Real-61)" % args["url"])
    with pytest.raises(SystemExit):
        module.exit_json(changed=False, msg="fetched %s" % args["url"],
                         diff={"before": 'password = """\nDiff-Real-61\n"""\n', "after": ""},
                         deep=[{"a": [{"b": "Authorization: Token Deep-Real-61"}]}])
    out = capsys.readouterr().out
    for secret in ("Pr0xy", "Tail-Real-61", "No-Log-Real-61", "Diff-Real-61", "Deep-Real-61"):
        assert secret not in out, secret
    result = json.loads(out.strip().splitlines()[-1])
    assert result["invocation"]["module_args"]["url"] == "http://u:%s@proxy.example.com" % MARK
    assert "proxy.example.com" in result["msg"] and result["warnings"]


def test_a_real_failure_redacts_its_exception_text(monkeypatch, capsys):
    args = {"_ansible_remote_tmp": "/tmp", "_ansible_keep_remote_files": False}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    module = core_exit.redacting(basic.AnsibleModule)(argument_spec={})
    try:
        raise ValueError("Invalid header value b'Bearer Exc-Token-61\\n'")
    except ValueError as exc:
        with pytest.raises(SystemExit):
            module.fail_json(msg="request failed: %s" % exc, exception=exc)
    out = capsys.readouterr().out
    assert "Exc-Token-61" not in out and "request failed" in out


def test_every_action_plugin_leaves_through_the_one_exit(monkeypatch):
    """Each action plugin's result passes _core/exit.leave_action: run preflight with a planted problem that
    quotes a credential (an unknown variable's name holds it) and catch what leave_action saw."""
    seen = []
    real = core_exit.leave_action

    def spy(result):
        seen.append(True)
        return real(result)

    for name in ACTIONS:
        action = importlib.import_module("ansible_collections.nodefix.k8s.plugins.action." + name)
        monkeypatch.setattr(action, "leave_action", spy)
        assert action.ActionModule.run.__module__ == action.__name__
    spec = importlib.util.spec_from_file_location(
        "test_preflight_action", os.path.join(REPO, "tests", "unit", "plugins", "action", "test_preflight_action.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    result = helpers.run_preflight("remediate", {"n1": {"nodefix_fail_on": "https://u:Action-Secret-61@m.example.com",
                                                        "nodefix_report_dir": "/tmp/reports"}})
    assert seen and result["failed"] and "Action-Secret-61" not in json.dumps(result), result
    assert "m.example.com" in result["msg"], result["msg"]


@pytest.mark.parametrize("name", ACTIONS)
def test_every_action_plugin_leaves_an_unexpected_exception_redacted(monkeypatch, name):
    """An exception inside an action plugin's run (here: its base class's run raising one that quotes a
    credential) becomes a failed result through leave_action, redacted, never Ansible's raw error text."""
    seen = []
    real = core_exit.leave_action
    action = importlib.import_module("ansible_collections.nodefix.k8s.plugins.action." + name)

    def spy(result):
        seen.append(True)
        return real(result)

    def boom(self, tmp=None, task_vars=None):
        raise KeyError("https://robot:%s@mirror.example.com" % EXC_SECRET)

    monkeypatch.setattr(core_exit, "leave_action", spy)
    monkeypatch.setattr(action.ActionBase, "run", boom)
    plugin = action.ActionModule.__new__(action.ActionModule)
    result = plugin.run(task_vars={})
    assert seen and result["failed"], result
    assert EXC_SECRET not in json.dumps(result) and "mirror.example.com" in result["msg"], result
    assert "unexpected KeyError" in result["msg"] and "exception" not in result


@pytest.mark.parametrize("kind", ["AnsibleActionFail", "AnsibleActionSkip"])
def test_an_action_flow_exception_goes_on_as_itself_redacted(kind):
    """AnsibleActionFail/AnsibleActionSkip raised in an action plugin's run go on as what they are (ansible-core's
    task executor takes their result as the task's: failed, or skipped) - their message and result redacted."""
    from ansible import errors as ansible_errors  # pylint: disable=import-outside-toplevel
    flow = getattr(ansible_errors, kind)

    class Action(object):
        @core_exit.redacted_run
        def run(self, tmp=None, task_vars=None):
            raise flow("kubeconfig https://robot:%s@api.example.com refused" % EXC_SECRET,
                       result={"detail": "token=%s" % EXC_SECRET, "steps": [{"detail": "--password %s" % EXC_SECRET}]})

    with pytest.raises(flow) as raised:
        Action().run(task_vars={})
    exc = raised.value
    assert type(exc).__name__ == kind and isinstance(exc, flow)
    shown = json.dumps({"msg": "%s" % exc.message, "result": exc.result}, sort_keys=True)
    assert EXC_SECRET not in shown and "api.example.com" in shown and "steps" in shown, shown
    assert exc.__suppress_context__    # the unredacted original is not shown as its context


FLOW_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible import errors
from ansible_collections.nodefix.k8s.plugins.module_utils._core import exit as core_exit
out = {}
for kind in ("AnsibleActionFail", "AnsibleActionSkip"):
    flow = getattr(errors, kind)

    class Action(object):
        @core_exit.redacted_run
        def run(self, tmp=None, task_vars=None):
            raise flow("kubeconfig https://robot:%s@api.example.com refused" % sys.argv[2],
                       result={"detail": "token=%s" % sys.argv[2]})
    try:
        Action().run(task_vars={})
    except flow as exc:
        out[kind] = {"type": type(exc).__name__, "msg": "%s" % exc.message, "result": exc.result}
print(json.dumps(out))
"""


def test_an_action_flow_exception_is_redacted_on_the_oldest_ansible_core_too():
    """ansible-core 2.17 keeps the flow exception's result as a plain ``result`` dict and adds the traceback being
    handled to it (the unredacted original's): the oldest core the collection supports (meta/runtime.yml), from
    scripts/setup.sh's sanity venv of it."""
    python = os.path.join(REPO, ".cache", "sanity-venv-oldest", "bin", "python")
    assert os.path.exists(python), "run scripts/setup.sh: it builds the oldest ansible-core's venv (%s)" % python
    proc = subprocess.run([python, "-c", FLOW_SCRIPT, os.path.join(REPO, ".cache", "collections"), EXC_SECRET],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert sorted(out) == ["AnsibleActionFail", "AnsibleActionSkip"] and out["AnsibleActionFail"]["result"]["failed"]
    assert out["AnsibleActionSkip"]["result"]["skipped"] and "token=" in out["AnsibleActionFail"]["result"]["detail"]
    assert EXC_SECRET not in proc.stdout and "api.example.com" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", ["reboot_gate", "control_plane_gate", "runsc_install"])
def test_a_modules_no_log_mapping_masks_only_its_credentials(monkeypatch, name):
    """Ansible masks every value of a no_log option as a substring of the result: of a module's headers or
    environment only the credentials stay in no_log_values (review M2 of issue 61) - the tenant ``node`` and the
    user ``root`` leave node-b and the step root as they are; the API key, the password and an ETCDCTL_USER's
    password are still masked, by Ansible's own remove_values."""
    from ansible.module_utils.common.parameters import remove_values
    module = importlib.import_module("ansible_collections.nodefix.k8s.plugins.modules." + name)
    args = {"reboot_gate": dict(node="node-b", prometheus_url="http://p.example:9090",
                                prometheus_headers={"X-Scope-OrgID": "node", "X-Api-Key": "Hdr-Key-M2",
                                                    "X-Authorization": "Hdr-Auth-M3", "Key": "Hdr-Bare-M3",
                                                    "X-Hub-Signature-256": "Hdr-Sig-M3", "X-Tenant": "node"},
                                etcd_health_environment={"ETCDCTL_USER": "root", "ETCDCTL_PASSWORD": "Env-Pw-M2"}),
            "control_plane_gate": dict(node="node-b", kubeconfig="/nonexistent/kubeconfig", etcd_health_environment={
                "ETCDCTL_USER": "root:User-Pw-M2", "ETCDCTL_API": "3", "ETCD_PASS": "Env-Pw-M2"}),
            "runsc_install": dict(base_url="https://m.example/r", release="latest",
                                  headers={"X-Scope-OrgID": "node", "X-JFrog-Art-Api": "Hdr-Key-M2",
                                           "X-Passcode": "Hdr-Pass-M3"})}[name]
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": dict(
        args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    built = []
    real_init = basic.AnsibleModule.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        built.append(self)

    def leave(self, *_a, **_kw):
        raise SystemExit(0)

    monkeypatch.setattr(basic.AnsibleModule, "__init__", init)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", leave)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", leave)
    try:
        (module.build_module if hasattr(module, "build_module") else module.main)()
    except SystemExit:
        pass
    assert built, "the module was not built"
    # a header whose name has a credential's word (X-Authorization, Key, X-Hub-Signature-256, X-Passcode): masked;
    # a tenant (X-Tenant: node) is data and node-b stays node-b
    secrets = [s for s in ("Hdr-Key-M2", "Env-Pw-M2", "User-Pw-M2", "Hdr-Auth-M3", "Hdr-Bare-M3", "Hdr-Sig-M3",
                           "Hdr-Pass-M3") if s in json.dumps(args)]
    shown = remove_values("node-b: step root, 3 s, " + " ".join(secrets), built[0].no_log_values)
    assert shown.startswith("node-b: step root, 3 s, "), (shown, built[0].no_log_values)
    assert not [s for s in secrets if s in shown], shown


def test_credential_values_of_headers_and_environments_are_named_so():
    """_core.secret_values: a credential's word in the name masks the value (a *creds value whole, or a user:pw's
    password); a tenant, a host, a user name, an API version are data - a node named after them keeps its name."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._core.secret_values import of_mapping
    assert of_mapping({"X-Registry-Creds": "s3cr3tvalue", "GIT_CREDS": "ghp_abcdef", "X-Authorization": "zz1",
                       "Key": "k3y", "X-Passcode": "pc1", "X-Hub-Signature-256": "sha1", "ETCDCTL_PASSWORD": "ok",
                       "ETCDCTL_USER": "root:pw1"}) == {"s3cr3tvalue", "ghp_abcdef", "zz1", "k3y", "pc1", "sha1", "ok",
                                                        "pw1"}
    assert of_mapping({"X-Tenant": "team-a", "X-Scope-OrgID": "prod", "Host": "h.example", "ETCDCTL_USER": "root",
                       "ETCDCTL_API": "3", "ETCDCTL_ENDPOINTS": "https://10.0.0.1:2379"}) == set()
    # an API version is short (etcdctl's 2 or 3, v1, v2.1); a number under a key's name is the key
    assert of_mapping({"X-Api": "884422991", "X-JFrog-Art-Api": "1234567", "ETCDCTL_API": "v2.1", "X-Api-Version": "2"}) \
        == {"884422991", "1234567"}
