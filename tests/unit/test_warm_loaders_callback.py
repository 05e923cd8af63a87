# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/callback_plugins/nodefix_warm_loaders.py (the integration layers' cache warm-up) changes no
result: a real ansible-playbook run with it prints what the same run without it prints - filters,
tests, modules by short name and FQCN, an included file, a handler, a module that fails."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  connection: local
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: filters and tests
      ansible.builtin.set_fact:
        shaped: "{{ {'a': [1, 2]} | to_json | from_json | dict2items | map(attribute='key') | list }}"
        matched: "{{ 'node-1' is match('node-') and [1] is sequence }}"
    - name: a module by its short name
      command: echo warm
      register: echoed
      changed_when: echoed.stdout == 'warm'
      notify: said
    - name: an included file
      ansible.builtin.include_tasks: included.yml
    - name: a module that fails
      ansible.builtin.command: /nonexistent/nodefix-warm
      ignore_errors: true
    - name: what the run saw
      ansible.builtin.debug:
        msg: "{{ shaped }} {{ matched }} {{ echoed.stdout }} {{ included }}"
  handlers:
    - name: said
      ansible.builtin.debug:
        msg: handler ran
"""
INCLUDED = """
- name: in the included file
  ansible.builtin.set_fact:
    included: "{{ 'x' | b64encode | b64decode }}"
"""


def run(tmp_path, callbacks):
    env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "tests", "callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED=callbacks, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               NODEFIX_TASK_TIMES=str(tmp_path / ("times-%s.jsonl" % callbacks.replace(",", "-"))))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           str(tmp_path / "play.yml")], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_a_run_prints_the_same_with_and_without_the_warm_up(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "included.yml").write_text(INCLUDED)
    rc_off, out_off = run(tmp_path, "nodefix_task_times")
    rc_on, out_on = run(tmp_path, "nodefix_task_times,nodefix_warm_loaders")
    assert rc_off == rc_on == 0, out_off + out_on
    assert "[''a''] True warm x" in out_on and "handler ran" in out_on
    assert "ok=7    changed=1    unreachable=0    failed=0    skipped=0    rescued=0    ignored=1" in out_on
    assert out_on == out_off
