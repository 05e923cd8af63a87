# SPDX-License-Identifier: GPL-3.0-or-later
"""Static checks of the AWX configuration as code and the execution environment.

- awx/configure.yml uses only awx.awx modules that exist in the installed
  collection (FQCN), with option names from each module's documented argument
  spec and literal values within its choices;
- the surveys (awx/surveys/*.yml) ask only for variables the playbooks read,
  with the playbooks' own choices;
- every variable configure.yml uses is defined and documented;
- the playbooks and inventory file it points AWX at exist and AWX would list them;
- execution-environment.yml is a valid ansible-builder v3 definition whose Galaxy
  requirements scripts/ee.sh writes (nodefix.k8s built from this checkout, every
  galaxy.yml dependency), with the Python (ranges, not pins) and system dependencies;
  `scripts/ee.sh create` turns it into a build context, and a bare
  `ansible-builder create` without the artifact fails, naming what is missing;
- `ansible-playbook --syntax-check` passes and the preflight tasks run.
"""

import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AWX = os.path.join(ROOT, "awx")
CONFIGURE = os.path.join(AWX, "configure.yml")

# AWX's own test for "is this file a playbook" (awx/main/utils/ansible.py).
AWX_PLAYBOOK_RE = re.compile(r"^\s*?-?\s*?(?:hosts|include|import_playbook):\s*?.*?$")
SURVEY_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}
# both playbooks import the report play (playbooks/report.yml); remediate's rolling play reads its settings through
# its task and vars files (the rollout's options: playbooks/vars/rollout.yml)
REMEDIATE = ["playbooks/remediate.yml", "playbooks/tasks/plan.yml", "playbooks/tasks/fix.yml",
             "playbooks/tasks/record.yml", "playbooks/vars/plan.yml", "playbooks/vars/rollout.yml"]
SURVEY_PLAYBOOKS = {
    "audit.yml": ["playbooks/audit.yml", "playbooks/report.yml"],
    "remediate.yml": REMEDIATE + ["playbooks/report.yml"],
    "workflow.yml": ["playbooks/audit.yml"] + REMEDIATE + ["playbooks/report.yml"],
}


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's !unsafe and !vault tags as plain strings."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
_Loader.add_constructor("!vault", lambda loader, node: loader.construct_scalar(node))


def load(path):
    with open(path) as fh:
        return yaml.load(fh, Loader=_Loader)  # nosec - SafeLoader subclass


def read(path):
    with open(path) as fh:
        return fh.read()


@functools.lru_cache(maxsize=None)
def project_env():
    out = subprocess.run(["bash", "-c", ". scripts/env.sh && env -0"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def run(argv, **kwargs):
    return subprocess.run(argv, cwd=kwargs.pop("cwd", ROOT), env=project_env(), capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 600), check=False, **kwargs)


@functools.lru_cache(maxsize=None)
def task_keywords():
    from ansible.playbook.block import Block
    from ansible.playbook.task import Task
    return frozenset(Task.fattributes) | frozenset(Block.fattributes) | {"block", "rescue", "always", "local_action"}


def iter_tasks(tasks):
    for task in tasks or []:
        if "block" in task:
            yield from iter_tasks(task.get("block"))
            yield from iter_tasks(task.get("rescue"))
            yield from iter_tasks(task.get("always"))
        else:
            yield task


def task_action(task):
    actions = [key for key in task if key not in task_keywords()]
    assert len(actions) == 1, "task %r: cannot tell its action from %s" % (task.get("name"), actions)
    return actions[0]


@functools.lru_cache(maxsize=None)
def plays():
    return load(CONFIGURE)


def configure_tasks():
    return [task for play in plays() for task in iter_tasks(play.get("tasks"))]


@functools.lru_cache(maxsize=None)
def module_docs(plugin_type, names):
    proc = run(["ansible-doc", "-t", plugin_type, "-j"] + list(names))
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    missing = [name for name in names if name not in docs]
    assert not missing, "not found by ansible-doc: %s" % missing
    return docs


def option_names(doc):
    names = set()
    for name, spec in doc["doc"]["options"].items():
        names.add(name)
        names.update(spec.get("aliases") or [])
    return names


def is_template(value):
    return isinstance(value, str) and "{{" in value


def vars_yml():
    return load(os.path.join(AWX, "vars.yml"))


def survey_files():
    files = sorted(glob.glob(os.path.join(AWX, "surveys", "*.yml")))
    assert files
    return files


# --- configure.yml: modules and options --------------------------------------

def test_configure_uses_only_fqcn_modules():
    actions = {task_action(task) for task in configure_tasks()}
    assert actions, "no tasks found"
    for action in actions:
        assert action.startswith(("awx.awx.", "ansible.builtin.")), action
    assert {"awx.awx.organization", "awx.awx.project", "awx.awx.execution_environment", "awx.awx.inventory",
            "awx.awx.inventory_source", "awx.awx.credential_type", "awx.awx.credential", "awx.awx.job_template",
            "awx.awx.workflow_job_template", "awx.awx.workflow_job_template_node"} <= actions


def awx_module_names():
    """The awx.awx modules configure.yml runs (one ansible-doc run for all of them: module_docs caches it)."""
    return tuple(sorted({task_action(task) for task in configure_tasks() if task_action(task).startswith("awx.awx.")}))


def test_awx_module_options_exist_in_the_installed_collection():
    tasks = [task for task in configure_tasks() if task_action(task).startswith("awx.awx.")]
    docs = module_docs("module", awx_module_names())
    checked = 0
    for task in tasks:
        action = task_action(task)
        doc = docs[action]
        options = option_names(doc)
        args = task[action]
        assert isinstance(args, dict), "%s: arguments must be a mapping" % task["name"]
        unknown = set(args) - options
        assert not unknown, "%s (%s): options not in the module's argument spec: %s" % (task["name"], action, sorted(unknown))
        for name, value in args.items():
            spec = doc["doc"]["options"].get(name, {})
            if spec.get("choices") and not is_template(value):
                assert str(value) in [str(c) for c in spec["choices"]], "%s: %s=%r not in %s" % (task["name"], name, value, spec["choices"])
            checked += 1
        required = [name for name, spec in doc["doc"]["options"].items() if spec.get("required")]
        for name in required:
            assert name in args, "%s: required option %s missing" % (task["name"], name)
    assert checked > 50


def test_module_defaults_and_lookup_use_real_connection_options():
    play = plays()[0]
    assert list(play["module_defaults"]) == ["group/awx.awx.controller"]
    connection = option_names(module_docs("module", awx_module_names())["awx.awx.organization"])
    keys = set(re.findall(r"'([a-z_]+)':", play["vars"]["nodefix_awx_connection"]))
    assert keys and keys <= connection, keys - connection
    lookup = option_names(module_docs("lookup", ("awx.awx.controller_api",))["awx.awx.controller_api"])
    keys = set(re.findall(r"'([a-z_]+)':", play["vars"]["nodefix_awx_lookup_connection"]))
    assert keys and keys <= lookup, keys - lookup
    assert "awx.awx.controller_api" in read(CONFIGURE)
    # every module of the group is really in the collection's action group
    runtime = load(os.path.join(project_env()["NODEFIX_VENV"], "lib", "python3.11", "site-packages",
                                "ansible_collections", "awx", "awx", "meta", "runtime.yml"))
    group = set(runtime["action_groups"]["controller"])
    for task in configure_tasks():
        action = task_action(task)
        if action.startswith("awx.awx."):
            assert action.split(".")[-1] in group, action


def test_secrets_are_never_logged():
    for task in configure_tasks():
        action = task_action(task)
        if action == "awx.awx.credential":
            assert task.get("no_log") is True, task["name"]


def test_job_templates_prompts():
    templates = {task[task_action(task)]["name"]: task[task_action(task)] for task in configure_tasks()
                 if task_action(task) == "awx.awx.job_template"}
    defaults = vars_yml()
    audit = templates["{{ nodefix_awx_audit_template }}"]
    remediate = templates["{{ nodefix_awx_remediate_template }}"]
    assert audit["job_type"] == "run" and audit["survey_enabled"] is True
    for option in ("ask_tags_on_launch", "ask_limit_on_launch", "ask_job_type_on_launch", "ask_diff_mode_on_launch"):
        assert remediate[option] is True, option
    assert remediate["survey_enabled"] is True
    assert audit["playbook"] == "{{ nodefix_awx_audit_playbook }}"
    assert defaults["nodefix_awx_audit_playbook"] == "awx/playbooks/audit.yml"
    assert defaults["nodefix_awx_remediate_playbook"] == "awx/playbooks/remediate.yml"
    assert "nodefix_awx_kubeconfig_credential" in read(CONFIGURE)


def test_the_templates_run_the_collection_of_the_execution_environment():
    """The project's playbooks are wrappers that import the collection's own playbooks, so AWX runs the
    playbooks and the modules of the execution environment's nodefix.k8s - one version, whatever branch
    the project tracks - and the EE image is tagged with the collection's version (scripts/ee.sh labels
    it with the checkout's revision too)."""
    defaults = vars_yml()
    for kind in ("audit", "remediate"):
        path = os.path.join(ROOT, defaults["nodefix_awx_%s_playbook" % kind])
        plays = load(path)
        assert [p.get("import_playbook") for p in plays] == ["nodefix.k8s.%s" % kind], path
        assert any(AWX_PLAYBOOK_RE.match(line) for line in read(path).splitlines()), "AWX would not list %s" % path
    assert defaults["nodefix_awx_ee_image"].rsplit(":", 1)[1] == galaxy_yml()["version"]


def test_kubeconfig_credential_type_injects_the_playbook_variable():
    play_vars = plays()[0]["vars"]
    injectors = play_vars["nodefix_awx_kubeconfig_injectors"]
    field_ids = [field["id"] for field in play_vars["nodefix_awx_kubeconfig_inputs"]["fields"]]
    assert field_ids == ["kubeconfig"]
    assert injectors["file"] == {"template.kubeconfig": "{{ kubeconfig }}"}
    assert injectors["extra_vars"] == {"nodefix_kubeconfig": "{{ tower.filename.kubeconfig }}"}
    assert "nodefix_kubeconfig" in read(os.path.join(ROOT, "playbooks", "vars", "rollout.yml"))
    # kept away from Ansible's templating (the file is read with !unsafe as str): every injector template is !unsafe
    templates = [t for name in ("nodefix_awx_kubeconfig_injectors", "nodefix_awx_prometheus_injectors")
                 for kind in play_vars[name].values() for t in kind.values()]
    assert len(templates) == 10 and read(CONFIGURE).count("!unsafe") == len(templates)


def test_workflow_links_existing_nodes_in_order():
    nodes = [task["awx.awx.workflow_job_template_node"] for task in configure_tasks()
             if task_action(task) == "awx.awx.workflow_job_template_node"]
    created = []
    for node in nodes:
        for link in ("success_nodes", "failure_nodes", "always_nodes"):
            for target in node.get(link, []):
                assert target in created, "%s links to %s before it exists" % (node["identifier"], target)
        created.append(node["identifier"])
    graph = {node["identifier"]: (node.get("unified_job_template") or "approval", node.get("job_type"),
                                  node.get("success_nodes", []), node.get("always_nodes", [])) for node in nodes}
    assert graph == {
        "audit-after": ("{{ nodefix_awx_audit_template }}", None, [], []),
        "remediate": ("{{ nodefix_awx_remediate_template }}", "run", [], ["audit-after"]),
        "approve": ("approval", None, ["remediate"], []),
        "dry-run": ("{{ nodefix_awx_remediate_template }}", "check", ["approve"], []),
        "audit-before": ("{{ nodefix_awx_audit_template }}", None, [], ["dry-run"]),
    }


# --- variables -----------------------------------------------------------------

def test_every_variable_used_is_defined_and_documented():
    defaults = vars_yml()
    play_vars = set(plays()[0]["vars"])
    for task in configure_tasks():
        play_vars.update(task.get("vars") or {})
    used = set(re.findall(r"\bnodefix_awx_[a-z0-9_]*[a-z0-9]\b", read(CONFIGURE)))
    undefined = used - set(defaults) - play_vars
    assert not undefined, "used in configure.yml but not defined in awx/vars.yml: %s" % sorted(undefined)
    unused = set(defaults) - used
    assert not unused, "defined in awx/vars.yml but never used: %s" % sorted(unused)
    lines = read(os.path.join(AWX, "vars.yml")).splitlines()
    for number, line in enumerate(lines):
        match = re.match(r"^(nodefix_awx_[a-z0-9_]+):", line)
        if match:
            documented = "#" in line or lines[number - 1].lstrip().startswith("#")
            assert documented, "%s has no comment in awx/vars.yml" % match.group(1)
    doc = read(os.path.join(ROOT, "docs", "awx.md"))
    missing = sorted(name for name in defaults if name not in doc)
    assert not missing, "not in docs/awx.md: %s" % missing


# --- surveys -------------------------------------------------------------------

@pytest.mark.parametrize("path", survey_files(), ids=os.path.basename)
def test_survey_shape(path):
    survey = load(path)
    assert set(survey) == {"name", "description", "spec"}
    variables = [question["variable"] for question in survey["spec"]]
    assert len(variables) == len(set(variables)), "duplicate survey variables"
    for question in survey["spec"]:
        assert question["type"] in SURVEY_TYPES
        assert question["question_name"] and isinstance(question["required"], bool)
        if question["type"] in ("multiplechoice", "multiselect"):
            assert question["choices"] and len(set(question["choices"])) == len(question["choices"])
        if question["type"] == "multiplechoice":
            assert question["default"] in question["choices"]
        if question["type"] == "multiselect":
            chosen = [c for c in str(question.get("default") or "").split("\n") if c]
            assert set(chosen) <= set(question["choices"])
        if question["type"] == "integer":
            assert question["min"] <= question["default"] <= question["max"]
        if question["type"] == "text":
            assert question.get("min", 0) <= len(question["default"]) <= question["max"]


@pytest.mark.parametrize("path", survey_files(), ids=os.path.basename)
def test_survey_variables_are_read_by_the_playbooks(path):
    playbooks = SURVEY_PLAYBOOKS[os.path.basename(path)]
    text = "\n".join(read(os.path.join(ROOT, p)) for p in playbooks)
    for question in load(path)["spec"]:
        assert re.search(r"\b%s\b" % question["variable"], text), "%s: %s is read by none of %s" % (
            os.path.basename(path), question["variable"], playbooks)
        # and each is documented for users of the playbooks
        assert question["variable"] in read(os.path.join(ROOT, "docs", "docsite", "rst", "playbooks.rst")) + read(
            os.path.join(ROOT, "docs", "awx.md"))
    # each survey belongs to a template or workflow in configure.yml
    assert "surveys/%s" % os.path.basename(path) in read(os.path.join(AWX, "vars.yml"))


def test_survey_choices_match_the_playbooks():
    docs = module_docs("module", ("nodefix.k8s.node_audit", "nodefix.k8s.audit_report"))
    checks = docs["nodefix.k8s.node_audit"]["doc"]["options"]["checks"]["choices"]
    # the playbooks hand nodefix_fail_on and nodefix_junit_fail_on to audit_report, which owns the ladder
    report_options = docs["nodefix.k8s.audit_report"]["doc"]["options"]
    severities = [s for s in report_options["fail_on"]["choices"] if s != "never"]
    assert report_options["junit_fail_on"]["choices"] == severities
    for path in survey_files():
        for question in load(path)["spec"]:
            if question["variable"] == "nodefix_audit_checks":
                assert sorted(question["choices"]) == sorted(checks)
            if question["variable"] == "nodefix_fail_on":
                assert sorted(question["choices"]) == sorted(severities + ["never"])
            if question["variable"] == "nodefix_junit_fail_on":
                assert sorted(question["choices"]) == sorted(severities)


# --- what AWX is pointed at ------------------------------------------------------

def test_project_playbooks_and_inventory_are_what_awx_lists():
    defaults = vars_yml()
    for key in ("nodefix_awx_audit_playbook", "nodefix_awx_remediate_playbook"):
        path = os.path.join(ROOT, defaults[key])
        assert os.path.isfile(path), path
        assert any(AWX_PLAYBOOK_RE.match(line) for line in read(path).splitlines()), "AWX would not list %s" % path
    inventory = os.path.join(ROOT, defaults["nodefix_awx_inventory_source_path"])
    assert os.path.basename(inventory) in ("hosts", "inventory")  # AWX lists these names always
    proc = run(["ansible-inventory", "-i", inventory, "--list"])
    assert proc.returncode == 0, proc.stderr
    groups = json.loads(proc.stdout)
    assert set(groups["k8s_nodes"]["children"]) == {"k8s_control_plane", "k8s_workers"}


def test_syntax_check_and_preflight():
    proc = run(["ansible-playbook", "--syntax-check", CONFIGURE])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # preflight needs no AWX: it validates the surveys and the names (the run the timeout test reads too)
    proc, _timeouts = preflight_timeouts()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "ok=4" in proc.stdout and "failed=0" in proc.stdout
    # a broken survey is refused before anything is sent to AWX
    bad = {"nodefix_awx_remediate_survey": {"spec": [{"question_name": "q", "variable": "nodefix_serial", "type": "integer",
                                                     "required": True, "default": 0, "min": 1, "max": 10}]}}
    proc = run(["ansible-playbook", CONFIGURE, "--tags", "preflight", "-e", json.dumps(bad)])
    assert proc.returncode != 0 and "nodefix_serial is not a valid AWX survey question" in proc.stdout + proc.stderr


# --- timeouts ------------------------------------------------------------------

def preflight_timeouts(extra=None):
    """(proc, {template: (timeout, worst case)}) as configure.yml's preflight works them out (no AWX needed)."""
    return _preflight_run(json.dumps(extra or {}, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _preflight_run(extra):
    """One preflight run per set of extra variables in this test process (the playbook does not change under it)."""
    proc = run(["ansible-playbook", CONFIGURE, "--tags", "preflight", "-e", extra])
    found = re.findall(r"\(item=(remediate|audit): (\d+) s \(worst case (\d+) s\)\)", proc.stdout)
    return proc, dict((name, (int(timeout), int(worst))) for name, timeout, worst in found)


def collection_node_worst_case():
    """One node's drain + reboot + verify in seconds, from the collection's own defaults: the drain's
    timeout (the rollout's, _rollout/machine/context.py DEFAULTS), reboot_timeout twice (the wait after a power cycle) and
    reboot_settle_timeout once per wait of the verification (roles/reboot/tasks/verify.yml), plus what the Ready check's
    task may take beyond its wait (its timeout: the last read, 2 x its request bound, and a minute to start)."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context
    drain = int(context.DEFAULTS["drain_timeout"])
    reboot = load(os.path.join(ROOT, "roles", "reboot", "defaults", "main.yml"))
    assert "reboot_power_cycle_command" in read(os.path.join(ROOT, "roles", "reboot", "tasks", "reboot.yml"))
    waits = read(os.path.join(ROOT, "roles", "reboot", "tasks", "verify.yml")).count("reboot_settle_timeout")
    assert waits >= 4
    text = read(os.path.join(ROOT, "roles", "reboot", "tasks", "verify.yml"))
    request = int(re.search(r"_reboot_ready_request: (\d+)", text).group(1))
    assert "timeout: \"{{ _reboot_ready_wait | int + 2 * _reboot_ready_request | int + 60 }}\"" in text
    return drain, 2 * int(reboot["reboot_timeout"]), waits * int(reboot["reboot_settle_timeout"]) + 2 * request + 60


def smallest_serial():
    return min(q["min"] for path in survey_files() for q in load(path)["spec"] if q["variable"] == "nodefix_serial")


@pytest.mark.parametrize("nodes", [None, 37])
def test_job_template_timeouts_fit_the_worst_case(nodes):
    defaults = vars_yml()
    drain, reboot, verify = collection_node_worst_case()
    # the node's parts cover the collection's defaults; the batch is the smallest a survey allows
    assert defaults["nodefix_awx_node_drain_seconds"] >= drain
    assert defaults["nodefix_awx_node_reboot_seconds"] >= reboot
    assert defaults["nodefix_awx_node_verify_seconds"] >= verify
    assert defaults["nodefix_awx_serial"] <= smallest_serial() == 1
    proc, timeouts = preflight_timeouts({"nodefix_awx_nodes_per_job": nodes} if nodes else None)
    assert proc.returncode == 0 and set(timeouts) == {"remediate", "audit"}, proc.stdout[-3000:]
    count = nodes or defaults["nodefix_awx_nodes_per_job"]
    per_batch = -(-count // smallest_serial())
    assert timeouts["remediate"][0] >= per_batch * (drain + reboot + verify), timeouts  # not-timed: configured
    assert timeouts["remediate"][0] >= timeouts["remediate"][1] and timeouts["audit"][0] >= timeouts["audit"][1]
    audit_worst = -(-count // defaults["nodefix_awx_forks"]) * defaults["nodefix_awx_node_audit_seconds"]
    assert timeouts["audit"][0] >= audit_worst  # not-timed: configured timeouts against configured budgets


def test_job_template_timeouts_below_the_worst_case_are_refused():
    # the old default (3600 s) is below one node's worst case times the default nodes per job
    proc, timeouts = preflight_timeouts({"nodefix_awx_remediate_timeout": 3600, "nodefix_awx_audit_timeout": 60})
    assert proc.returncode != 0
    said = " ".join(proc.stdout.split())
    assert ("The remediate template's timeout 3600 s is below its worst case %d s" % timeouts["remediate"][1]) in said
    assert "leaves a node cordoned and its reboot-lock slot taken" in said
    assert "The audit template's timeout 60 s is below its worst case %d s" % timeouts["audit"][1] in said
    proc, timeouts = preflight_timeouts({"nodefix_awx_remediate_timeout": 0, "nodefix_awx_audit_timeout": 0})
    assert proc.returncode == 0 and timeouts["remediate"][0] == 0, proc.stdout[-3000:]   # 0: no limit


# --- execution environment -------------------------------------------------------

def galaxy_yml():
    return load(os.path.join(ROOT, "galaxy.yml"))


def ee():
    return load(os.path.join(ROOT, "execution-environment.yml"))


def pins(path):
    out = {}
    for line in read(path).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, dummy, version = line.partition("==")
            out[name.lower()] = version
    return out


def test_ee_is_valid_v3_and_lists_every_dependency():
    ee_schema = pytest.importorskip("ansible_builder.ee_schema")
    definition = ee()
    ee_schema.validate_schema(dict(definition))
    assert definition["version"] == 3
    assert definition["images"]["base_image"]["name"]
    deps = definition["dependencies"]
    # the Galaxy requirements are scripts/ee.sh's (the artifact of this checkout, galaxy.yml's dependencies)
    assert deps["galaxy"] == ".cache/ee/requirements.yml"
    galaxy = galaxy_yml()
    tarball = "collections/%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"])
    build_files = {os.path.basename(f["src"]): f["dest"] for f in definition["additional_build_files"]}
    assert build_files[os.path.basename(tarball)] == os.path.dirname(tarball)
    # same ansible-core/ansible-runner and Python library pins as the tests use
    dev = pins(os.path.join(ROOT, "requirements", "dev.txt"))
    assert deps["ansible_core"]["package_pip"] == "ansible-core==%s" % dev["ansible-core"]
    assert deps["ansible_runner"]["package_pip"] == "ansible-runner==%s" % dev["ansible-runner"]
    # ...and that ansible-core is one the collection claims (meta/runtime.yml requires_ansible)
    runtime = load(os.path.join(ROOT, "meta", "runtime.yml"))
    oldest = runtime["requires_ansible"].split(">=", 1)[1].split(",", 1)[0]
    assert tuple(map(int, dev["ansible-core"].split("."))) >= tuple(map(int, oldest.split(".")))
    # the collection's Python requirements are ranges (an EE resolves them with other collections'), and
    # the versions the tests run are inside them
    specifiers = pytest.importorskip("packaging.requirements")
    ranges = {}
    for line in read(os.path.join(ROOT, deps["python"])).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = specifiers.Requirement(line)
            ranges[req.name.lower()] = req.specifier
    assert set(ranges) == {"kubernetes", "tomlkit", "ruamel.yaml"}, ranges
    for lib, spec in ranges.items():
        assert spec and not any(s.operator in ("==", "===") for s in spec), (lib, str(spec))
        assert spec.contains(dev[lib]), (lib, str(spec), dev[lib])
    assert os.path.isfile(os.path.join(ROOT, deps["system"]))
    # any other EE that includes nodefix.k8s finds the same files by introspection
    meta = load(os.path.join(ROOT, "meta", "execution-environment.yml"))
    assert meta["dependencies"] == {"python": deps["python"], "system": deps["system"]}
    # both files ship in the built collection (see test_ansible_builder_create_makes_a_build_context)
    assert deps["python"] == "requirements.txt" and deps["system"] == "bindep.txt"


def test_bindep_parses_for_rpm_and_dpkg():
    depends = pytest.importorskip("bindep.depends")
    rules = depends.Depends(read(os.path.join(ROOT, "bindep.txt")))
    rpm = {rule[0] for rule in rules.active_rules(["platform:rpm"])}
    dpkg = {rule[0] for rule in rules.active_rules(["platform:dpkg"])}
    assert {"openssh-clients", "git-core", "ca-certificates"} <= rpm
    assert {"openssh-client", "git", "ca-certificates"} <= dpkg


def test_ansible_builder_create_makes_a_build_context(tmp_path):
    pytest.importorskip("ansible_builder")
    builder = shutil.which("ansible-builder", path=project_env()["PATH"])
    if builder is None:
        pytest.skip("ansible-builder is not installed")
    definition = ee()
    # a bare ansible-builder create without scripts/ee.sh's artifact and requirements: refused, naming them
    # (ansible-builder only warns about a missing additional build file and makes a context without it)
    bare = tmp_path / "bare"
    for rel in ("execution-environment.yml", definition["dependencies"]["python"], definition["dependencies"]["system"]):
        (bare / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, rel), bare / rel)
    proc = run([builder, "create", "-f", str(bare / "execution-environment.yml"), "-c", str(tmp_path / "bare-context")])
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert ".cache/ee/requirements.yml does not exist" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "bare-context" / "Containerfile").exists()
    # scripts/ee.sh: the artifact of this checkout, the requirements naming it, then ansible-builder create
    src = definition["additional_build_files"][0]["src"]
    context = tmp_path / "context"
    proc = run(["bash", os.path.join(ROOT, "scripts", "ee.sh"), "create", "-c", str(context)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert os.path.isfile(os.path.join(ROOT, src)), "the built tarball is not named as execution-environment.yml expects: %s" % src
    containerfile = (context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="%s"' % definition["images"]["base_image"]["name"] in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert "ENV ANSIBLE_COLLECTIONS_PATH=" in containerfile
    build = context / "_build"
    requirements = yaml.safe_load((build / "requirements.yml").read_text())
    tarball_entry = [c for c in requirements["collections"] if c.get("type") == "file"][0]
    assert (build / tarball_entry["name"]).is_file()
    # the context asks for exactly the collection's dependencies: galaxy.yml's collections with
    # their ranges, requirements.txt's Python pins, bindep.txt's system packages
    others = {c["name"]: c.get("version") for c in requirements["collections"] if c.get("type") != "file"}
    assert others == galaxy_yml()["dependencies"]

    def lines(text):
        return sorted(line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip())
    assert lines((build / "requirements.txt").read_text()) == lines(read(os.path.join(ROOT, "requirements.txt")))
    assert lines((build / "bindep.txt").read_text()) == lines(read(os.path.join(ROOT, "bindep.txt")))
    assert "kubernetes>=" in (build / "requirements.txt").read_text()
    assert "openssh-clients" in (build / "bindep.txt").read_text()
    # the tarball the image would install is the collection, and installs
    proc = run(["ansible-galaxy", "collection", "install", "--offline", "--no-deps", "--force", "-p", str(tmp_path / "installed"),
                tarball_entry["name"]], cwd=str(build))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = tmp_path / "installed" / "ansible_collections" / "nodefix" / "k8s"
    assert (installed / "playbooks" / "audit.yml").is_file()
    assert (installed / "meta" / "execution-environment.yml").is_file()
    assert (installed / "bindep.txt").is_file() and (installed / definition["dependencies"]["python"]).is_file()


def test_runner_example_extravars_are_playbook_variables():
    extravars = load(os.path.join(ROOT, "examples", "runner", "env", "extravars"))
    text = read(os.path.join(ROOT, "playbooks", "audit.yml")) + read(os.path.join(ROOT, "playbooks", "remediate.yml"))
    for name in extravars:
        assert re.search(r"\b%s\b" % name, text), name
    envvars = load(os.path.join(ROOT, "examples", "runner", "env", "envvars"))
    assert all(isinstance(value, str) for value in envvars.values()), "envvars values must be strings"
    assert "ANSIBLE_COLLECTIONS_PATH" in envvars


# --- configure.yml against the AWX API test double -----------------------------

SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key-but-secret-3f9a\n-----END OPENSSH PRIVATE KEY-----\n"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: secret-user-7c21}]\n"
PROMETHEUS_TOKEN = "prometheus-token-5e8d1"


@pytest.fixture
def awx_double():
    import awx_api_double
    double = awx_api_double.AwxDouble(ROOT)
    server, url = double.serve()
    double.base_url = url
    double.auth = {"nodefix_awx_controller_host": url, "nodefix_awx_controller_username": awx_api_double.USERNAME,
                   "nodefix_awx_controller_password": awx_api_double.PASSWORD}
    yield double
    server.shutdown()
    server.server_close()


def run_configure(tmp_path, extra, name="vars"):
    path = tmp_path / ("%s.json" % name)
    path.write_text(json.dumps(extra))
    proc = run(["ansible-playbook", CONFIGURE, "-e", "@%s" % path])
    recap = re.search(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout)
    return proc, recap


@pytest.mark.slow
def test_configure_against_the_api_double_is_idempotent(tmp_path, awx_double):
    # 1. no machine credential in AWX and no inputs given: refused with a clear message, before any write
    proc, recap = run_configure(tmp_path, awx_double.auth, "noinputs")
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "No Machine credential named 'nodefix nodes' in AWX" in proc.stdout
    assert not awx_double.writes(), awx_double.writes()
    assert [o["name"] for o in awx_double.objects("organizations")] == ["Default"]

    # 2. everything, with the secrets given
    inputs = {"username": "ansible", "ssh_key_data": SSH_KEY, "become_method": "sudo"}
    prometheus = {"url": "https://prometheus.example.com", "token": PROMETHEUS_TOKEN}
    extra = dict(awx_double.auth, nodefix_awx_machine_credential_inputs=inputs, nodefix_awx_kubeconfig=KUBECONFIG,
                 nodefix_awx_triage_enabled=True, nodefix_awx_prometheus_credential_inputs=prometheus)
    proc, recap = run_configure(tmp_path, extra)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert recap and int(recap.group(2)) >= 9 and recap.group(3) == "0", proc.stdout[-3000:]
    for secret in ("not-a-real-key-but-secret-3f9a", "secret-user-7c21", awx_double.auth["nodefix_awx_controller_password"],
                   PROMETHEUS_TOKEN):
        assert secret not in proc.stdout + proc.stderr, "a secret leaked into the output"

    # 3. the same again: changed=0 and not one write to the API
    writes = len(awx_double.writes())
    proc, recap = run_configure(tmp_path, extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert recap and recap.group(2) == "0", proc.stdout[-6000:]
    assert len(awx_double.writes()) == writes, awx_double.writes()[writes:]

    # 4. what AWX holds
    d = awx_double
    org = d.one("organizations", name="nodefix")
    ee = d.one("execution_environments", name="nodefix.k8s EE")
    assert ee["image"] == vars_yml()["nodefix_awx_ee_image"] and org["default_environment"] == ee["id"]
    project = d.one("projects", name="nodefix.k8s")
    assert project["scm_url"] == vars_yml()["nodefix_awx_project_scm_url"] and project["organization"] == org["id"]
    inventory = d.one("inventories", name="nodefix nodes")
    source = d.one("inventory_sources", name="nodefix nodes from SCM")
    assert (source["inventory"], source["source_project"], source["source_path"]) == (inventory["id"], project["id"], "awx/inventory/hosts")
    machine = d.one("credentials", name="nodefix nodes")
    assert machine["inputs"]["ssh_key_data"] == SSH_KEY
    ctype = d.one("credential_types", name="nodefix kubeconfig")
    # AWX templates reach AWX untouched by Ansible
    assert ctype["injectors"]["extra_vars"] == {"nodefix_kubeconfig": "{{ tower.filename.kubeconfig }}"}
    assert ctype["injectors"]["file"] == {"template.kubeconfig": "{{ kubeconfig }}"}
    kubeconfig = d.one("credentials", name="nodefix kubeconfig")
    assert kubeconfig["credential_type"] == ctype["id"] and kubeconfig["inputs"] == {"kubeconfig": KUBECONFIG}
    audit = d.one("job_templates", name="nodefix audit")
    remediate = d.one("job_templates", name="nodefix remediate")
    assert audit["playbook"] == "awx/playbooks/audit.yml" and remediate["playbook"] == "awx/playbooks/remediate.yml"
    assert d.linked("job_templates", audit["id"], "credentials") == [machine["id"]]
    assert d.linked("job_templates", remediate["id"], "credentials") == [machine["id"], kubeconfig["id"]]
    assert remediate["ask_tags_on_launch"] and remediate["ask_limit_on_launch"] and remediate["ask_job_type_on_launch"]
    assert remediate["job_type"] == "run" and remediate["execution_environment"] == ee["id"]
    assert d.survey("job_templates", audit["id"]) == load(os.path.join(AWX, "surveys", "audit.yml"))
    # each template's timeout, as AWX holds it, covers the default worst case (test_job_template_timeouts_*)
    drain, reboot, verify = collection_node_worst_case()
    assert remediate["timeout"] >= vars_yml()["nodefix_awx_nodes_per_job"] * (drain + reboot + verify)
    assert audit["timeout"] > 0 and remediate["timeout"] > audit["timeout"]
    assert d.survey("job_templates", remediate["id"]) == load(os.path.join(AWX, "surveys", "remediate.yml"))
    workflow = d.one("workflow_job_templates", name="nodefix audit, remediate, audit")
    assert d.survey("workflow_job_templates", workflow["id"]) == load(os.path.join(AWX, "surveys", "workflow.yml"))
    nodes = {n["identifier"]: n for n in d.find("workflow_job_template_nodes", workflow_job_template=workflow["id"])}
    assert set(nodes) == {"audit-before", "dry-run", "approve", "remediate", "audit-after"}
    assert nodes["audit-before"]["unified_job_template"] == audit["id"] == nodes["audit-after"]["unified_job_template"]
    # the dry run is the remediate template in check mode; a person approves before the real run
    assert nodes["dry-run"]["unified_job_template"] == remediate["id"] and nodes["dry-run"]["job_type"] == "check"
    assert nodes["remediate"]["unified_job_template"] == remediate["id"] and nodes["remediate"]["job_type"] == "run"
    approval = d.data["workflow_approval_templates"][nodes["approve"]["unified_job_template"]]
    assert approval["timeout"] == vars_yml()["nodefix_awx_approval_timeout"] > 0 and "DRY RUN" in approval["description"]

    def linked(node, kind):
        return d.linked("workflow_job_template_nodes", nodes[node]["id"], kind)
    assert linked("audit-before", "always_nodes") == [nodes["dry-run"]["id"]]
    assert linked("dry-run", "success_nodes") == [nodes["approve"]["id"]] and linked("dry-run", "always_nodes") == []
    assert linked("approve", "success_nodes") == [nodes["remediate"]["id"]] and linked("approve", "always_nodes") == []
    assert linked("remediate", "always_nodes") == [nodes["audit-after"]["id"]]

    # the triage from Prometheus: the plugin file of the project as an inventory source updated on launch, the
    # credential type injecting the URL and a token file the plugin reads, a constructed inventory of the targets
    ptype = d.one("credential_types", name="nodefix Prometheus")
    assert ptype["kind"] == "cloud" and ptype["injectors"]["env"]["NODEFIX_PROMETHEUS_URL"] == "{{ url }}"
    assert ptype["injectors"]["env"]["NODEFIX_PROMETHEUS_TOKEN_FILE"] == "{% if token %}{{ tower.filename.token }}{% endif %}"
    assert ptype["injectors"]["file"]["template.token"] == "{{ token }}"
    fragment = read(os.path.join(ROOT, "plugins", "doc_fragments", "prometheus.py"))
    plugin_options = set(re.findall(r"NODEFIX_PROMETHEUS_[A-Z_]+", fragment))
    assert set(ptype["injectors"]["env"]) - {"NODEFIX_PROMETHEUS_URL"} <= plugin_options  # what the plugin reads
    pcred = d.one("credentials", name="nodefix Prometheus")
    assert pcred["credential_type"] == ptype["id"] and pcred["inputs"]["token"] == PROMETHEUS_TOKEN
    triage = d.one("inventories", name="nodefix triage")
    tsource = d.one("inventory_sources", name="nodefix triage from Prometheus")
    assert (tsource["inventory"], tsource["source_project"], tsource["credential"]) == (triage["id"], project["id"], pcred["id"])
    assert tsource["source_path"] == "awx/inventory/fleet.nodefix_triage.yml" and tsource["update_on_launch"]
    with open(os.path.join(ROOT, tsource["source_path"])) as fh:
        assert yaml.safe_load(fh)["plugin"] == "nodefix.k8s.triage"
    constructed = d.one("inventories", name="nodefix triage targets")
    assert constructed["kind"] == "constructed"
    assert d.linked("inventories", constructed["id"], "input_inventories") == [inventory["id"], triage["id"]]
    csource = d.one("inventory_sources", name="Auto-created source for: nodefix triage targets")
    assert csource["limit"] == "nodefix_triage_targets" and json.loads(csource["source_vars"])["plugin"] == "constructed"


@pytest.mark.slow
def test_configure_with_an_existing_machine_credential_and_an_inventory_repository(tmp_path, awx_double):
    org = awx_double.create("organizations", {"name": "nodefix"})
    machine_type = awx_double.one("credential_types", name="Machine")
    machine = awx_double.create("credentials", {"name": "ops ssh", "credential_type": machine_type["id"], "organization": org["id"],
                                                "inputs": {"username": "ops", "ssh_key_data": SSH_KEY}})
    extra = dict(awx_double.auth, nodefix_awx_machine_credential="ops ssh",
                 nodefix_awx_inventory_scm_url="https://git.example.com/ops/k8s-inventory.git",
                 nodefix_awx_workflow_enabled=False)
    proc, recap = run_configure(tmp_path, extra)
    assert proc.returncode == 0, proc.stdout[-6000:]
    projects = {p["name"]: p for p in awx_double.objects("projects")}
    assert projects["nodefix inventory"]["scm_url"] == "https://git.example.com/ops/k8s-inventory.git"
    source = awx_double.one("inventory_sources", name="nodefix nodes from SCM")
    assert source["source_project"] == projects["nodefix inventory"]["id"]
    remediate = awx_double.one("job_templates", name="nodefix remediate")
    assert awx_double.linked("job_templates", remediate["id"], "credentials") == [machine["id"]]  # no kubeconfig given
    assert awx_double.find("credential_types", name="nodefix kubeconfig")  # the type is always there
    assert not awx_double.find("workflow_job_templates")
    assert awx_double.one("credentials", name="ops ssh")["inputs"]["ssh_key_data"] == SSH_KEY  # untouched


@pytest.mark.slow
def test_configure_refuses_bad_credentials(tmp_path, awx_double):
    extra = dict(awx_double.auth, nodefix_awx_controller_password="wrong")
    proc, recap = run_configure(tmp_path, extra)
    assert proc.returncode != 0
    assert "Failed to get token" in proc.stdout and "401" in proc.stdout
    assert not awx_double.writes()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
