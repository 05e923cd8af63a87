# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Review R3/R8: what playbooks/tasks/fix.yml runs is bounded by what the rollout's claim assumes - the in-place
mount-unit cleanup by the fix phase's cover (nodefix_fix_timeout; the role's own default, mount_units_max_seconds 0,
is no budget at all), the mount-unit reboot by the claim: the recheck right before it answers the reboot wait its
renewed claim covers (``reboot_timeout_cover``, a plain number), and the role holds a reboot whose own
mount_units_reboot_timeout is longer - without a template loop between the two roles' timeouts (rendered here as
Ansible renders them)."""

import os

import jinja2
import pytest
import yaml

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

import yaml_tasks

from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import context as mctx

try:  # ansible-core 2.19 templates only what is marked trusted (a playbook's text is)
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older cores trust every string
    def trust_as_template(text):
        return text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "playbooks", "tasks", "fix.yml")
VARS = os.path.join(ROOT, "playbooks", "vars", "rollout.yml")


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _mount_units_vars():
    task = next(t for t in yaml_tasks.tasks(_load(FIX))
                if (t.get("ansible.builtin.include_role") or {}).get("name") == "nodefix.k8s.mount_units")
    return task["vars"]


def _budget(**given):
    # plain Jinja2 (the filters used - default, int, float, max, min - are Jinja2's own, as Ansible runs them)
    text = _load(VARS)["_nodefix_mount_units_budget"]
    return float(jinja2.Environment().from_string(text).render(**given))


def test_the_in_place_cleanup_is_bounded_by_the_fix_phase_cover():
    assert _mount_units_vars()["mount_units_max_seconds"] == "{{ _nodefix_mount_units_budget }}"
    assert "nodefix_fix_timeout" in _load(VARS)["_nodefix_mount_units_budget"]
    assert _budget() == mctx.DEFAULTS["fix_timeout"] - 300 == 3300
    assert _budget(nodefix_fix_timeout=7200) == 6900
    assert _budget(nodefix_fix_timeout=200) == 100          # a short cover: half of it
    assert _budget(nodefix_fix_timeout=0) == 1              # never 0, the role's "no budget"
    assert _budget(nodefix_mount_units_max_seconds=600) == 600
    assert _budget(nodefix_mount_units_max_seconds=9999) == 3300      # the user's setting never outlives the cover
    assert _budget(nodefix_mount_units_max_seconds=0) == 3300


MOUNT_UNITS = os.path.join(ROOT, "roles", "mount_units")
REBOOT_ROLE = os.path.join(ROOT, "roles", "reboot")


def _ansible_load(path):
    """``path`` as Ansible loads a playbook's file (ansible-core 2.19 marks its text a trusted template)."""
    try:
        return DataLoader().load_from_file(path, trusted_as_template=True)
    except TypeError:  # pragma: no cover - older cores trust every string (no such argument)
        return DataLoader().load_from_file(path)


def _scope(**fix_vars):
    """The variables the reboot role's tasks see where tasks/fix.yml's mount-unit include reaches them, layered as
    Ansible layers them (lowest first): both roles' defaults, the play's vars (vars/rollout.yml), fix.yml's include
    vars, then the mount-unit role's own include of the reboot role (tasks/reboot.yml). ``fix_vars``: more of
    fix.yml's include vars (the negative control)."""
    scope = {}
    scope.update(_ansible_load(os.path.join(REBOOT_ROLE, "defaults", "main.yml")))
    scope.update(_ansible_load(os.path.join(MOUNT_UNITS, "defaults", "main.yml")))
    scope.update(_ansible_load(VARS))
    fix = next(t for t in yaml_tasks.tasks(_ansible_load(FIX))
               if (t.get("ansible.builtin.include_role") or {}).get("name") == "nodefix.k8s.mount_units")
    scope.update(fix["vars"])
    scope.update(fix_vars)
    inner = next(t for t in _ansible_load(os.path.join(MOUNT_UNITS, "tasks", "reboot.yml"))
                 if (t.get("ansible.builtin.include_role") or {}).get("name") == "nodefix.k8s.reboot")
    scope.update(inner["vars"])
    # what the play registered before the include: the recheck's answer, and the mount-unit estimate
    scope.update(_nodefix_recheck={"reboot_timeout_cover": 900},
                 mount_units_estimate={"to_stop": 5000, "estimate_seconds": 4000, "reboot_recommended": True})
    return scope


def _render(scope, name):
    return Templar(loader=DataLoader(), variables=scope).template(trust_as_template("{{ %s }}" % name))


def test_the_reboot_role_s_variables_render_inside_the_mount_unit_include_without_a_loop():
    # review R8's earlier attempt set mount_units_reboot_timeout from reboot_timeout in this include while the role
    # passes reboot_timeout from mount_units_reboot_timeout: "Recursive loop detected" at every reboot (test_45)
    scope = _scope()
    assert int(_render(scope, "reboot_timeout")) == 900
    assert int(_render(scope, "mount_units_reboot_cover")) == 900
    assert int(_render(scope, "mount_units_reboot_timeout")) == 900
    # every variable of that scope that renders at all renders without a loop (an undefined one - hostvars, the
    # play's registered results - is not this test's)
    for name in sorted(scope):
        try:
            _render(scope, name)
        except AnsibleError as exc:
            assert "ecursive" not in "%s" % exc, (name, exc)


def test_the_loop_shape_is_caught():
    # the negative control: the earlier attempt's line, as it was in tasks/fix.yml
    scope = _scope(mount_units_reboot_timeout=trust_as_template("{{ reboot_timeout | default(900) }}"))
    with pytest.raises(AnsibleError, match="(?i)recursive"):
        _render(scope, "reboot_timeout")


def test_the_mount_unit_include_passes_the_cover_the_recheck_answered_never_reboot_timeout():
    given = _mount_units_vars()
    assert "mount_units_reboot_timeout" not in given and "reboot_timeout" not in given
    assert given["mount_units_reboot_cover"] == "{{ _nodefix_recheck.reboot_timeout_cover | default(0) }}"
    # a recheck that did not run answers no cover: 0, which holds any reboot (the role's "covers no reboot")
    scope = _scope()
    scope["_nodefix_recheck"] = {"skipped": True}
    assert int(_render(scope, "mount_units_reboot_cover")) == 0
    # rendered into the role's decision, as the role sees it: held
    assert _decide(900, _render(scope, "mount_units_reboot_cover"))[2]


def _decide(timeout, cover, allowed=True):
    """reboot_decide.yml's decision, rendered by Ansible's templating: (chosen, recommended, held)."""
    task = [t for t in _ansible_load(os.path.join(MOUNT_UNITS, "tasks", "reboot_decide.yml"))
            if "ansible.builtin.set_fact" in t][0]
    scope = dict(_ansible_load(os.path.join(MOUNT_UNITS, "defaults", "main.yml")), **task["vars"])
    scope.update(mount_units_reboot_timeout=timeout, mount_units_reboot_cover=cover,
                 mount_units_reboot_allowed=allowed,
                 mount_units_estimate={"to_stop": 5000, "estimate_seconds": 4000, "reboot_recommended": True})
    out = [_render(dict(scope, _x=task["ansible.builtin.set_fact"][k]), "_x")
           for k in ("mount_units_reboot_chosen", "mount_units_reboot_recommended", "mount_units_reboot_held")]
    return "%s" % out[0] in ("True", "true"), "%s" % out[1] in ("True", "true"), ("%s" % out[2]).strip()


@pytest.mark.parametrize("timeout, cover, allowed, chosen", [
    (900, 900, True, True),         # the defaults: the claim covers the role's own wait
    (901, 900, True, False),        # one second longer than the claim covers: held
    (3600, 900, True, False),
    (3600, None, True, True),       # null, the role's default: no claim bounds it (the role on its own)
    (900, 0, True, False),          # 0: the claim covers no reboot - the rollout's answer for a held one - held
    (1, 0, True, False),
    (900, 900, False, False),       # not drained: recommended, as before
])
def test_the_mount_unit_reboot_is_held_when_its_wait_is_longer_than_the_claim_covers(timeout, cover, allowed, chosen):
    got = _decide(timeout, cover, allowed)
    assert got[0] is chosen and got[1] is not chosen
    held = allowed and not chosen
    assert bool(got[2]) is held, got
    if held:
        assert got[2] == ("mount_units_reboot_timeout %d s is longer than the %d s the claim on the node covers "
                          "(mount_units_reboot_cover)" % (timeout, cover))


def test_the_mount_unit_role_s_own_default_is_no_claim_and_the_spec_says_so():
    defaults = _ansible_load(os.path.join(MOUNT_UNITS, "defaults", "main.yml"))
    assert defaults["mount_units_reboot_cover"] is None
    spec = _ansible_load(os.path.join(MOUNT_UNITS, "meta", "argument_specs.yml"))
    option = spec["argument_specs"]["main"]["options"]["mount_units_reboot_cover"]
    assert option["type"] == "int" and option.get("default") is None
    assert _decide(3600, defaults["mount_units_reboot_cover"])[0] is True     # the role on its own: not bounded


def test_the_recheck_answers_the_reboot_wait_its_renewed_claim_covers():
    from ansible_collections.nodefix.k8s.plugins.module_utils._rollout.machine import gates, machine
    from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate

    from plugins.module_utils.rollout_api_double import ApiDouble, node, pod
    from plugins.module_utils.rollout_machine_harness import REBOOT, context

    for options, cover in (({}, 900), ({"reboot_timeout": 1800}, 1800), ({"reboot_settle_timeout": 60}, 900)):
        api = ApiDouble([node()], [pod("web-1")])
        ctx = context(api, roles=(REBOOT,), options=options)
        first = machine.begin(ctx)
        again = machine.recheck(ctx, first["state"])
        lease = again["state"]["record"]["leaseSeconds"]
        o = ctx.options
        assert again["state"]["reboot_timeout_cover"] == cover, (options, again["lines"])
        # the arithmetic: the reboot path's worst case at that wait fits the lease less its margin and the fixes'
        assert 2 * cover + 4 * o["reboot_settle_timeout"] + o["lease"] + o["fix_timeout"] <= lease
        assert 2 * (cover + 1) + 4 * o["reboot_settle_timeout"] + o["lease"] + o["fix_timeout"] > lease
        assert "it covers a reboot wait of up to %d s" % cover in again["lines"][-1]
    # a lease already longer (a long fix phase) covers more, never less
    rec = {"phase": "fix", "leaseSeconds": 20000}
    assert gates.reboot_timeout_cover(mctx.options({}), rec) == (20000 - 1800 - 3600 - 1200) // 2
    assert gates.reboot_timeout_cover(mctx.options({}), {"phase": "verify", "leaseSeconds": 100}) == 0
    # a held reboot is covered by nothing
    api = ApiDouble([node()], [pod("web-1")])
    ctx = context(api, roles=(REBOOT,))
    first = machine.begin(ctx)
    ctx.window = gate.Window(["mo"], "00:00", "01:00", "UTC")        # closed now (a Sunday, 07:00)
    assert machine.recheck(ctx, first["state"])["state"]["reboot_timeout_cover"] == 0
