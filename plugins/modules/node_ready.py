#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_ready
short_description: Wait until a Node's Ready condition is True in the API server, or say why it is not
version_added: 1.3.0
description:
  - Reads the Node (C(GET /api/v1/nodes/<node>)) every O(wait_sleep) seconds until its C(Ready) condition is
    C(True) or O(wait_timeout) seconds have passed - the reboot role's last check that a rebooted node is back
    (C(roles/reboot/tasks/verify.yml)). A node is back only with C(Ready) C(True); C(False), C(Unknown) (the node
    lifecycle controller lost its kubelet) or no C(Ready) condition at all is not back.
  - A Node that could not be read is not "not Ready" - RV(ready) is null and RV(error) says why - the API server
    never answered (refused, DNS, TLS, a timeout), answered an error (a 403 of RBAC, a 5xx), does not know the Node
    (RV(found) V(false)), or answered a Node whose shape cannot be read (C(status) not an object, C(status.conditions)
    not a list, a condition not an object, a C(Ready) status not a string - RV(found) V(true), RV(error) says what
    was odd). A read that fails, or a Node that is not there yet, is read again until O(wait_timeout) (the
    API server may be on the node that rebooted; a kubelet registers its Node again when it starts); an answer that
    cannot change by waiting (a 4xx other than 404 and 429) ends the wait at once. The last read decides.
  - Every request goes through the collection's one API client - O(request_timeout) for each whole request
    (the connection, the headers and the body), its retry policy (a 429, a 5xx with C(Retry-After) or a read's 5xx asked again at most twice), a
    kubeconfig token file trimmed as client-go trims it, and errors that never quote a credential.
  - The module itself does not fail on an unread or not Ready node - it reports it; it fails only on bad input or
    without the C(kubernetes) library.
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the official Kubernetes Python client) >= 24.2.0
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.node_api
attributes:
  check_mode:
    support: full
    details: Read-only - it only reads the Node, the same way in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    details: Runs on the controller (C(delegate_to=localhost)); needs the Python kubernetes client.
options:
  wait_timeout:
    description:
      - Seconds to wait for the C(Ready) condition to be C(True) (V(0), read once). No read starts after it; the last
        one may take up to twice O(request_timeout) more (a request bounded by O(request_timeout) in all, and
        the client's retry policy asking again only within O(request_timeout) of its start).
    type: int
    default: 120
  wait_sleep:
    description: Seconds between two reads of the Node.
    type: int
    default: 5
  request_timeout:
    description: Seconds for each request, in all - its connection, its headers and its body.
    type: int
    default: 30
seealso:
  - name: Node status - conditions
    description: The Ready condition, and Unknown when the node controller has not heard from the kubelet.
    link: https://kubernetes.io/docs/reference/node/node-status/#condition
"""

EXAMPLES = r"""
- name: Wait until the rebooted node is Ready in the API server
  nodefix.k8s.node_ready:
    kubeconfig: /etc/nodefix/kubeconfig
    node: worker-1
    wait_timeout: 300
  delegate_to: localhost
  register: ready

- name: Say why it is not back
  ansible.builtin.debug:
    msg: "{{ ready.msg }}"
  when: ready.ready is not sameas true
"""

RETURN = r"""
ready:
  description:
    - V(true) when the Node's C(Ready) condition is C(True), V(false) when the Node was read and it is not, null when the
      Node could not be read at the last attempt, its shape could not be read or the API server does not know it
      (RV(error) says why).
  returned: always
  type: bool
  sample: true
found:
  description: The API server knows the Node (its last answer); null when it did not answer.
  returned: always
  type: bool
  sample: true
conditions:
  description:
    - The Node's conditions at the last read that answered, each with only C(type), C(status), C(reason) and
      C(lastTransitionTime) (no message); empty when it was never read.
  returned: always
  type: list
  elements: dict
  sample: [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": "2026-12-07T10:00:00Z"}]
waited:
  description: Seconds from the first read to the last answer.
  returned: always
  type: int
  sample: 12
reads:
  description: The reads of the Node made.
  returned: always
  type: int
  sample: 3
error:
  description:
    - Why the Node could not be read at the last attempt (or what in its answer could not be read), or that the API
      server does not know it; empty otherwise.
  returned: always
  type: str
  sample: "reading Node worker-1: no answer from the API server: ConnectTimeoutError: ..."
msg:
  description: What the Node's state is, in one line.
  returned: always
  type: str
  sample: "Node worker-1 is Ready (KubeletReady)"
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api

CONDITION_FIELDS = ("type", "status", "reason", "lastTransitionTime")
# answers waiting cannot change (RBAC, a bad request): the wait ends at once. 404 (a Node registered again when
# its kubelet starts) and 429 (the client's retry policy already waited) are read again.
FINAL = (400, 401, 403, 405, 406, 410, 415, 422)


def _shape(value):
    """How an odd value reads in an error: ``a list ([1])``."""
    kind = {list: "a list", dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)
    return "%s (%.60r)" % (kind, value)


def reading(node):
    """(ready, conditions, odd) of a Node the API server answered: ``ready`` True/False from its ``Ready`` condition
    (no ``status``, no conditions or no ``Ready`` one: False - not Ready yet), ``conditions`` with only the fields a
    verdict reads (no message); a shape that cannot be read - ``status`` not an object, ``status.conditions`` not a
    list, a condition not an object, a ``Ready`` status not a string - is ``(None, [], what was odd)``: could not be
    read, never "not Ready"."""
    status = node.get("status")
    if status is None:
        status = {}
    if not isinstance(status, dict):
        return None, [], "its status is %s, not an object" % _shape(status)
    conds = status.get("conditions")
    if conds is None:
        conds = []
    if not isinstance(conds, list):
        return None, [], "its status.conditions is %s, not a list" % _shape(conds)
    out = []
    for index, cond in enumerate(conds):
        if not isinstance(cond, dict):
            return None, [], "its status.conditions[%d] is %s, not an object" % (index, _shape(cond))
        out.append(dict((k, cond.get(k)) for k in CONDITION_FIELDS if cond.get(k) is not None))
    ready = [c for c in out if c.get("type") == "Ready"]
    if ready and not isinstance(ready[0].get("status"), str):
        return None, [], "its Ready condition's status is %s, not a string" % _shape(ready[0].get("status"))
    return bool(ready) and ready[0]["status"] == "True", out, ""


def _ready_state(conds):
    """``Ready=False (KubeletNotReady)``, or ``no Ready condition``."""
    for cond in conds:
        if cond.get("type") == "Ready":
            return "Ready=%s%s" % (cond.get("status"), " (%s)" % cond["reason"] if cond.get("reason") else "")
    return "no Ready condition"


def wait_ready(api, name, wait_timeout, wait_sleep, clock=time.monotonic, sleep=time.sleep):
    """Read Node ``name`` through ``api`` (``node_api.NodeApi``) until Ready, the deadline or an answer waiting
    cannot change; the result of the last read: {ready, found, conditions, waited, reads, error, msg}."""
    start = clock()
    deadline = start + max(0, wait_timeout)
    out = {"ready": None, "found": None, "conditions": [], "waited": 0, "reads": 0, "error": "", "msg": ""}
    while True:
        out["reads"] += 1
        final = False
        try:
            node = api.get_node(name)
        except kube.KubeError as exc:
            out.update(ready=None, found=None, error=str(exc))
            final = exc.status in FINAL
        else:
            if node is None:
                out.update(ready=None, found=False, error="the API server does not know Node %s (404 NotFound)" % name)
            else:
                ready, conds, odd = reading(node)
                if odd:     # read again: a Node's shape is the API server's, a proxy's answer may be what is odd
                    out.update(ready=None, found=True,
                               error="Node %s answered a shape that cannot be read: %s" % (name, odd))
                else:
                    out.update(ready=ready, found=True, conditions=conds, error="")
                    out["state"] = _ready_state(conds)
        out["waited"] = int(round(clock() - start))
        if out["ready"] or final or clock() + wait_sleep > deadline:
            break
        sleep(wait_sleep)
    state = out.pop("state", "")
    if out["ready"]:
        out["msg"] = "Node %s is %s" % (name, state.replace("=True", ""))
    elif out["ready"] is False:
        out["msg"] = "Node %s is not Ready after %d s: %s" % (name, out["waited"], state)
    elif out["found"] is False:
        out["msg"] = "Node %s is not in the API server after %d s (%d read(s)): %s" % (
            name, out["waited"], out["reads"], out["error"])
    else:
        out["msg"] = "Node %s could not be read after %d s (%d read(s)): %s" % (
            name, out["waited"], out["reads"], out["error"])
    return out


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            kube.argument_spec(required=True, node=True, request_timeout=30),
            wait_timeout=dict(type="int", default=120),
            wait_sleep=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    if not kube.available():
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    if not p["node"].strip() or not kube.object_name(p["node"]):
        module.fail_json(msg="node %r is not a Kubernetes object name; nothing read" % p["node"])
    if p["wait_timeout"] < 0 or p["wait_sleep"] < 1 or p["request_timeout"] < 1:
        module.fail_json(msg="wait_timeout must not be negative, wait_sleep and request_timeout must be at least 1 s")
    try:
        api = kube.from_params(p, node_api.NodeApi)
    except kube.KubeConfigError as exc:
        error = str(exc)
        module.exit_json(changed=False, ready=None, found=None, conditions=[], waited=0, reads=0, error=error,
                         msg="Node %s could not be read: %s" % (p["node"], error))
    module.exit_json(changed=False, **wait_ready(api, p["node"], p["wait_timeout"], p["wait_sleep"]))


if __name__ == "__main__":
    main()
