#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: npd_files
short_description: Put the node-problem-detector plugin's small files on a node in one run
version_added: 1.3.0
description:
  - Makes directories and writes files whose content was rendered on the controller (for example with
    C(lookup('ansible.builtin.template', ...)) or M(ansible.builtin.copy)'s C(to_nice_json) content) in one module
    run, where a M(ansible.builtin.file), M(ansible.builtin.template) or M(ansible.builtin.copy) task per item
    costs a round trip or two each. The role C(nodefix.k8s.npd) installs its entry points, the plugin's and
    node-problem-detector's configuration and the textfile timer's units with it.
  - Each file is written only when its bytes differ, atomically (a temporary file in its directory, renamed over
    it), through a symlink (the link stays, its target changes), keeping its owner; O(files[].mode) is given to it
    when it has another (an existing file keeps its mode when O(files[].mode) is not set). A new directory gets
    O(directories[].mode) (its missing parents too), an existing one is given it.
  - All or nothing - a failure part-way takes back every directory made, mode set and file written.
    Bad input (a relative path, a path with a C(..) component, a file path ending in C(/), a file listed twice,
    content that is not text, a mode that is not a quoted octal string, a file whose directory neither exists nor
    is made here, a missing textfile directory) fails naming the problem before anything is written.
  - A write that fails names the file and says what was taken back; when the tick's cache cannot be dropped after
    the files were written, the failure says so and carries C(changed=true) and the result keys of the change
    made (RV(changed_files) among them).
  - When a file marked O(files[].drop_cache) changed, the plugin's shared result of a tick and its kept looks
    (C(tick) and C(looks) in O(cache_dir)) are removed, so that the next rule reads the node with the new plugin
    or configuration.
author:
  - nodefix.k8s developers (@nodefix)
options:
  directories:
    description: Directories to make (with their missing parents) or give their mode, before any file is written.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory, an absolute path without a C(..) component.
        type: path
        required: true
      mode:
        description:
          - Its mode, a quoted octal string like C("0755").
          - A number is refused - YAML reads C(0755) as 493 and C(755) as 755 (01363), which cannot be told apart.
        type: raw
        default: "0755"
  files:
    description: Files to write.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description:
          - The file, an absolute path without a C(..) component and not ending in C(/); a symlink is followed (a
            dangling one is refused).
        type: path
        required: true
      content:
        description: The whole text of the file (UTF-8); null or a number is refused (never written as V("")).
        type: raw
        required: true
      mode:
        description:
          - Its mode, a quoted octal string like C("0755"); an existing file with another mode is given it. A number
            is refused.
          - Not set, a new file gets C(0644) and an existing one keeps its mode.
        type: raw
      drop_cache:
        description: When this file changes, drop the tick's shared result and kept looks in O(cache_dir).
        type: bool
        default: false
  cache_dir:
    description: The plugin's cache directory (the role's C(npd_cache_dir)); V("") none.
    type: path
    default: ""
  textfile:
    description:
      - node_exporter's textfile the plugin writes (the role's C(npd_textfile)), a file named C(nodefix.prom); its
        directory, node_exporter's C(--collector.textfile.directory), must exist, or nothing is written. V("") none.
    type: path
    default: ""
  backup:
    description: Keep a timestamped copy of each file it rewrites next to it.
    type: bool
    default: false
  keep_backups:
    description: Backups of a file kept after a write (older ones are deleted); V(0) keeps none.
    type: int
    default: 3
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Reports what would change (files, directories, modes, the cache drop) and changes nothing.
  diff_mode:
    details: A list with one entry per change - the before/after text of each file, the state or mode of each directory.
  platform:
    details: Linux nodes that run the node-problem-detector plugin or its textfile timer.
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: The plugin's entry point and configuration in one module run
  nodefix.k8s.npd_files:
    directories:
      - path: /usr/local/lib/nodefix-npd
      - path: /etc/nodefix
    files:
      - path: /usr/local/lib/nodefix-npd/nodefix-npd
        content: "{{ lookup('ansible.builtin.template', 'nodefix-npd.j2') }}"
        mode: "0755"
        drop_cache: true
      - path: /etc/nodefix/npd.json
        content: "{{ {'min_severity': 'medium'} | to_nice_json }}\n"
        mode: "0644"
        drop_cache: true
    cache_dir: /run/nodefix-npd
    textfile: /var/lib/prometheus/node-exporter/nodefix.prom
  register: npd_files

- name: Reload systemd when a unit file among them changed
  ansible.builtin.debug:
    msg: "{{ npd_files.changed_files }}"
  changed_when: "'/etc/systemd/system/nodefix-npd-textfile.timer' in npd_files.changed_files"
  notify: Reload systemd
"""

RETURN = r"""
changed_files:
  description:
    - The files (as given in O(files[].path)) whose content or mode changed, or would in check mode.
    - Also in the failure when only the tick's cache could not be dropped (the files were written).
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/nodefix-npd/nodefix-npd]
created_directories:
  description: The directories made (or that would be), parents first.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/nodefix-npd]
changed_directories:
  description: The directories of O(directories) made or given their mode (or that would be).
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/nodefix-npd]
cache_dropped:
  description: The tick's shared result and kept looks removed (or that would be) because a O(files[].drop_cache)
    file changed.
  returned: always
  type: list
  elements: str
  sample: [/run/nodefix-npd/tick, /run/nodefix-npd/looks]
real_paths:
  description: The file really written for each O(files[].path) that is a symlink.
  returned: when a file is a symlink
  type: dict
  sample: {/etc/nodefix/npd.json: /srv/config/npd.json}
backup_files:
  description: The backup made of each file rewritten, by O(files[].path).
  returned: changed and O(backup=true)
  type: dict
  sample: {/etc/nodefix/npd.json: /etc/nodefix/npd.json.12345.2026-12-07@05:00:00~}
diff:
  description:
    - One entry per change (with C(--diff)) - C(before)/C(after) text with headers for a file, C(state) or C(mode)
      for a directory or a file's mode, C(state) for a cache file dropped.
  returned: diff mode
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.fileio import DEFAULT_KEEP_BACKUPS
from ansible_collections.nodefix.k8s.plugins.module_utils._npd import install as npd_install


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                mode=dict(type="raw", default=npd_install.DEFAULT_DIRECTORY_MODE),
            )),
            files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                # raw: a str option turns null (an undefined template result) into "" and 5 into "5"; only text is
                # written (_npd/install.check_input)
                content=dict(type="raw", required=True),
                mode=dict(type="raw"),
                drop_cache=dict(type="bool", default=False),
            )),
            cache_dir=dict(type="path", default=""),
            textfile=dict(type="path", default=""),
            backup=dict(type="bool", default=False),
            keep_backups=dict(type="int", default=DEFAULT_KEEP_BACKUPS),
        ),
        supports_check_mode=True,
    )
    try:
        result = npd_install.run(module, module.params)
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
