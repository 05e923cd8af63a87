#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: api_access
short_description: Read a Node through a kubeconfig and ask the API server what its user may do
version_added: 1.3.0
description:
  - What a drain needs from one kubeconfig, asked before the first node (C(nodefix.k8s.remediate)'s drain preflight,
    C(playbooks/tasks/preflight_drain.yml)) in one module run - the C(kubernetes) library importable, the kubeconfig
    loadable, the API server answering, and the rights of the kubeconfig's user.
  - Reads the Node O(node) (C(GET /api/v1/nodes/<node>)) - the library, the kubeconfig and the API server in one
    request. A Node the API server does not know is an answer (RV(node.found) V(false)); a read that fails - no answer,
    or an error answer such as a 403 - fails the module, naming the kubeconfig and what the API server said.
  - Then asks each of O(reviews) with a C(SelfSubjectAccessReview) (C(POST
    /apis/authorization.k8s.io/v1/selfsubjectaccessreviews), what C(kubectl auth can-i) asks) and returns each answer
    - C(status.allowed), C(status.denied), C(status.reason), C(status.evaluationError) - in the order asked. The API
    server stores nothing; a review it refuses to answer fails the module, naming it.
  - Every request goes through the collection's one API client - O(request_timeout) for each whole request
    (the connection, the headers and the body), its retry policy (a 429, a 5xx with C(Retry-After) or a read's 5xx asked again at most twice), a
    kubeconfig token file trimmed as client-go trims it, and errors that never quote a credential.
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
    details: Runs the same way in check mode - a read and questions; a SelfSubjectAccessReview changes nothing.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    details: Runs where the kubeconfig is (the controller, C(delegate_to=localhost)); needs the Python kubernetes client.
options:
  reviews:
    description:
      - The questions, each the C(spec.resourceAttributes) of one SelfSubjectAccessReview - C(verb), C(resource), and
        as needed C(group), C(version), C(subresource), C(namespace) (none - every namespace), C(name).
      - A review with C(path) (and no C(resource)) asks of a non-resource URL instead - its C(spec.nonResourceAttributes),
        C(verb) and C(path) only (C(kubectl auth can-i get /readyz/etcd)).
      - None given (V([])) asks nothing, and then RV(all_allowed) is V(false) - "no review was asked" - never true of
        nothing.
    type: list
    elements: dict
    default: []
  request_timeout:
    description:
      - Seconds for each request, in all - its connection, its headers and its body (C(nodefix_drain_preflight_timeout)).
    type: int
    default: 30
seealso:
  - name: Checking API access
    description: SelfSubjectAccessReview, what C(kubectl auth can-i) asks.
    link: https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access
"""

EXAMPLES = r"""
- name: Read a node and ask whether this kubeconfig may cordon and drain
  nodefix.k8s.api_access:
    kubeconfig: /etc/nodefix/kubeconfig
    node: worker-1
    reviews:
      - {verb: patch, resource: nodes}
      - {verb: create, resource: pods, subresource: eviction}
      - {verb: get, path: /readyz/etcd}
  delegate_to: localhost
  register: access

- name: Refuse when any of it is not allowed
  ansible.builtin.assert:
    that: access.all_allowed
"""

RETURN = r"""
node:
  description: The Node read - its name and whether the API server knows it.
  returned: success
  type: dict
  contains:
    name:
      description: O(node).
      type: str
      sample: worker-1
    found:
      description: The API server knows the Node (V(false) - a 404, which still proves the library, the kubeconfig and the server).
      type: bool
      sample: true
  sample: {"name": "worker-1", "found": true}
reviews:
  description: Each review's answer, in the order of O(reviews).
  returned: success
  type: list
  elements: dict
  contains:
    attributes:
      description: The C(resourceAttributes) asked (C(nonResourceAttributes) - C(verb), C(path) - for a review with a C(path)).
      type: dict
      sample: {"verb": "create", "resource": "pods", "subresource": "eviction"}
    allowed:
      description: C(status.allowed) - the user may do it. V(false) as well when the answer has no C(status.allowed).
      type: bool
      sample: true
    denied:
      description: C(status.denied) - an authorizer denied it explicitly (V(false) with RV(reviews[].allowed) V(false) - no authorizer allowed it).
      type: bool
      sample: false
    reason:
      description: C(status.reason) (and C(status.evaluationError) after it when there is one), or why the answer could not be read.
      type: str
      sample: ""
  sample: [{"attributes": {"verb": "patch", "resource": "nodes"}, "allowed": true, "denied": false, "reason": ""}]
all_allowed:
  description: Every review was allowed - V(false) when no review was asked (O(reviews) empty).
  returned: success
  type: bool
  sample: true
msg:
  description: What was read and asked, or what failed - naming the kubeconfig.
  returned: always
  type: str
  sample: "kubeconfig /etc/nodefix/kubeconfig: Node worker-1 read, 2 of 2 review(s) allowed"
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import node_api


def said(exc, timeout):
    """What a KubeError says a person acts on: the status and the API server's message, or why there was no answer
    (within ``timeout`` seconds), or why the answer is not one."""
    if not exc.status:
        return "no answer from the API server within %d s (%s)" % (timeout, exc.why)
    if not 200 <= exc.status <= 299:
        return "the API server answered %s: %s" % (exc.phrase(), exc.detail() or exc.body[:300] or "-")
    return exc.why


def attributes_text(attrs):
    """``create pods/eviction in default``, ``get /readyz/etcd`` (``kubectl auth can-i``'s words)."""
    if attrs.get("path"):
        return "%s %s" % (attrs.get("verb") or "", attrs["path"])
    resource = attrs.get("resource") or ""
    if attrs.get("group"):
        resource = "%s.%s" % (resource, attrs["group"])
    if attrs.get("subresource"):
        resource = "%s/%s" % (resource, attrs["subresource"])
    text = "%s %s" % (attrs.get("verb") or "", resource)
    if attrs.get("name"):
        text += " %s" % attrs["name"]
    return text + (" in %s" % attrs["namespace"] if attrs.get("namespace") else "")


def answer(attrs, body):
    """One review's answer from the API server's SelfSubjectAccessReview (a JSON object), read fail-closed: a
    ``status`` that is not an object or a ``status.allowed`` that is not a boolean is not allowed, saying so."""
    st = body.get("status")
    if not isinstance(st, dict) or not isinstance(st.get("allowed"), bool):
        what = "" if st is None else " - its status is not an object" if not isinstance(st, dict) else \
            " - status.allowed is not a boolean"
        return {"attributes": attrs, "allowed": False, "denied": False,
                "reason": "the API server's answer has no status.allowed%s (%.40s %.40s)" % (
                    what, body.get("kind"), body.get("apiVersion"))}
    reason = "; ".join("%s" % v for v in (st.get("reason"), st.get("evaluationError")) if v)
    return {"attributes": attrs, "allowed": st["allowed"], "denied": st.get("denied") is True, "reason": reason}


def bad_review(review):
    """Why a review cannot be asked, or "": a verb and a resource (resourceAttributes) or a path (nonResourceAttributes:
    verb and path only), every attribute a string."""
    if [v for v in review.values() if not isinstance(v, str)] or not review.get("verb"):
        return "needs a verb, every attribute a string"
    if "path" in review:
        if not review["path"].startswith("/") or set(review) != {"verb", "path"}:
            return "a non-resource review has a verb and a path starting with / only"
        return ""
    return "" if review.get("resource") else "needs a resource (or a path)"


def ask(api, reviews):
    """Each review's answer, in order; KubeError when the API server does not answer one."""
    return [answer(attrs, api.access_review("asking whether this user may %s (SelfSubjectAccessReview)"
                                            % attributes_text(attrs), attrs)) for attrs in reviews]


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(kube.argument_spec(required=True, node=True, request_timeout=30),
                           reviews=dict(type="list", elements="dict", default=[])),
        supports_check_mode=True,
    )
    if not kube.available():
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    where = "kubeconfig %s" % p["kubeconfig"]
    if not p["node"].strip() or not kube.object_name(p["node"]):
        module.fail_json(msg="%s: node %r is not a Kubernetes object name; nothing asked" % (where, p["node"]))
    if p["request_timeout"] < 1:
        module.fail_json(msg="request_timeout must be at least 1 s")
    bad = ["%s (%s)" % (r, bad_review(r)) for r in p["reviews"] if bad_review(r)]
    if bad:
        module.fail_json(msg="each review needs a verb and a resource (or a path), every attribute a string: %s"
                         % "; ".join(bad))
    api = kube.module_client(module, node_api.NodeApi)
    try:
        found = api.get_node(p["node"]) is not None
    except kube.KubeError as exc:
        module.fail_json(msg="%s: cannot read Node %s: %s" % (where, p["node"], said(exc, p["request_timeout"])),
                         status=exc.status)
    try:
        reviews = ask(api, p["reviews"])
    except kube.KubeError as exc:
        module.fail_json(msg="%s: %s: %s" % (where, exc.what, said(exc, p["request_timeout"])), status=exc.status,
                         node={"name": p["node"], "found": found})
    allowed = [r for r in reviews if r["allowed"]]
    denied = [attributes_text(r["attributes"]) for r in reviews if not r["allowed"]]
    told = "%d of %d review(s) allowed" % (len(allowed), len(reviews))
    if denied:
        told += " - not allowed: %s" % ", ".join(denied)
    module.exit_json(changed=False, node={"name": p["node"], "found": found}, reviews=reviews,
                     # never true of nothing: no review asked allows nothing
                     all_allowed=bool(reviews) and len(allowed) == len(reviews),
                     msg="%s: Node %s %s, %s" % (
                         where, p["node"], "read" if found else "not in the API server (404)",
                         told if reviews else "no review was asked (all_allowed false)"))


if __name__ == "__main__":
    main()
