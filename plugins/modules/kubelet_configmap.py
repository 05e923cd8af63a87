#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_configmap
short_description: Plan and make a kubelet fix durable in the kubeadm kubelet-config ConfigMap
version_added: 1.3.0
description:
  - C(kubeadm upgrade node) writes C(/var/lib/kubelet/config.yaml) from the ConfigMap C(kube-system/kubelet-config)
    (data key C(kubelet)); a kubelet fix made only in the node's file is gone after the next upgrade. This module
    reads that ConfigMap and plans the kubelet role's settings into its KubeletConfiguration, and with O(apply)
    writes them.
  - The plan is the one the filter C(nodefix.k8s.kubelet_configmap) makes (the same function) - only the fields in
    O(settings) are touched, a rate limit already higher in the ConfigMap is kept (never lowered unless
    O(allow_lower)), maps get the settings' keys, every other entry stays byte for byte.
  - With O(apply), the ConfigMap is read again and the plan made again from what it holds now; when it changes
    something, one JSON merge patch of C(data.kubelet) carrying the C(metadata.resourceVersion) of that read is sent,
    so the API server refuses it (409 Conflict) when another writer changed the ConfigMap in between - nothing of
    theirs is overwritten. After a conflict the ConfigMap is read and planned again and patched once more; a second
    conflict fails the module naming it.
  - A ConfigMap that does not exist (404) is not an error; RV(exists) is V(false) and nothing is written.
  - Every request goes through the collection's one API client, with O(request_timeout) for the connection and the
    read and its retry policy (a 429, a 5xx with C(Retry-After) or a read's 5xx asked again at most twice). A
    failure names the ConfigMap and what the API server said (or that it did not answer); no message quotes a
    token. Runs where the kubeconfig is (usually the controller, with C(delegate_to)).
author:
  - nodefix.k8s developers (@nodefix)
requirements:
  - kubernetes (the official Kubernetes Python client) >= 24.2.0
  - ruamel.yaml (to edit the KubeletConfiguration keeping every other line)
options:
  kubeconfig:
    description: Path of a kubeconfig; without it the client's default (C(KUBECONFIG), C(~/.kube/config)), or the
      pod's service account in a cluster.
    type: path
  context:
    description: Context of the kubeconfig to use (default, its current context).
    type: str
  request_timeout:
    description: Seconds each API request may take (connect and read); an API server that does not answer in time
      fails the module naming the ConfigMap.
    type: int
    default: 30
  namespace:
    description: Namespace of the ConfigMap.
    type: str
    default: kube-system
  name:
    description: Name of the ConfigMap (kubeadm before 1.24 named it C(kubelet-config-1.X)).
    type: str
    default: kubelet-config
  settings:
    description: The KubeletConfiguration fields to ensure, as M(nodefix.k8s.kubelet_config) returns them
      (RV(nodefix.k8s.kubelet_config#module:target)).
    type: dict
    required: true
  allow_lower:
    description: Write a lower rate limit than the ConfigMap's.
    type: bool
    default: false
  apply:
    description:
      - V(false) reads the ConfigMap and plans (RV(plan)); nothing is written.
      - V(true) reads it, plans from what it holds now and patches it when the plan changes something.
    type: bool
    default: false
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Reads the ConfigMap and plans; no patch is sent, C(changed) says whether O(apply) would patch it.
  diff_mode:
    details: The ConfigMap's C(data.kubelet) before and after the plan, redacted.
  platform:
    details: Any host with the Kubernetes Python client and access to the API server.
notes:
  - The role C(nodefix.k8s.kubelet) runs it twice - O(apply=false) to plan (C(tasks/durable.yml)), then O(apply=true)
    once the node runs the values (C(tasks/durable_patch.yml)).
seealso:
  - name: Upgrading kubeadm clusters
    description: C(kubeadm upgrade node) writes the kubelet's configuration from the kubelet-config ConfigMap.
    link: https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/
  - name: Concurrency control and consistency
    description: A write carrying C(metadata.resourceVersion) is refused with 409 Conflict when the object changed.
    link: https://kubernetes.io/docs/reference/using-api/api-concepts/#concurrency-control-and-consistency
  - module: nodefix.k8s.kubelet_config
"""

EXAMPLES = r"""
- name: Plan the kubelet settings into the kubeadm ConfigMap
  nodefix.k8s.kubelet_configmap:
    kubeconfig: ~/.kube/config
    settings: "{{ kubelet_config_result.target }}"
  delegate_to: localhost
  check_mode: false
  register: configmap

- name: Write them, conditional on the ConfigMap read now
  nodefix.k8s.kubelet_configmap:
    kubeconfig: ~/.kube/config
    name: kubelet-config
    settings: "{{ kubelet_config_result.target }}"
    apply: true
  delegate_to: localhost
  when: configmap.exists and configmap.plan.changed
"""

RETURN = r"""
exists:
  description: The ConfigMap exists (V(false) - the API server answered 404 - nothing was planned or written).
  returned: success
  type: bool
  sample: true
plan:
  description: What the settings change in C(data.kubelet) (null when the ConfigMap does not exist).
  returned: success
  type: dict
  contains:
    changed:
      description: The settings change something.
      type: bool
      sample: true
    text:
      description: C(data.kubelet) with the settings (the text as read when nothing changes).
      type: str
      sample: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeAPIQPS: 50\n"
    fields:
      description: Each changed field with its C(before) (null when absent) and C(after) value.
      type: dict
      sample: {"kubeAPIQPS": {"before": 5, "after": 50}}
patched:
  description: This run patched the ConfigMap.
  returned: success
  type: bool
  sample: true
conflicts:
  description: 409 Conflicts answered to this run's patch (another writer changed the ConfigMap); after one the
    ConfigMap was read and planned again.
  returned: success
  type: int
  sample: 0
diff:
  description: C(data.kubelet) before and after the plan, redacted.
  returned: with --diff, when the ConfigMap exists
  type: dict
  sample: {"before": "kubeAPIQPS: 5\n", "after": "kubeAPIQPS: 50\n"}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import plan as kubelet_plan
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema

KEY = "kubelet"


def argument_spec():
    return dict(
        kubeconfig=dict(type="path"),
        context=dict(type="str"),
        request_timeout=dict(type="int", default=30),
        namespace=dict(type="str", default="kube-system"),
        name=dict(type="str", default="kubelet-config"),
        settings=dict(type="dict", required=True),
        allow_lower=dict(type="bool", default=False),
        apply=dict(type="bool", default=False),
    )


class ConfigMap(object):
    """One ConfigMap's read and its conditional patch through the collection's one API client."""

    def __init__(self, module):
        p = module.params
        self.module, self.ns, self.name = module, p["namespace"], p["name"]
        self.where = "%s/%s" % (self.ns, self.name)
        self.path = "/api/v1/namespaces/%s/configmaps/%s" % (kube.name(self.ns), kube.name(self.name))
        try:
            self.api = kube.Kube(p["kubeconfig"], p["context"], p["request_timeout"])
        except NodefixError as exc:
            module.fail_json(msg="ConfigMap %s: cannot load the kubeconfig %s: %s"
                                 % (self.where, p["kubeconfig"] or "(default)", exc))

    def fail(self, doing, exc, **extra):
        """Fail naming the ConfigMap and what the API server said (a KubeError's text never holds a token)."""
        if not exc.status:
            said = "the API server could not be reached or did not answer within %d s (%s)" % (
                self.module.params["request_timeout"], exc.why)
        else:
            said = "%s: %s" % (exc.phrase(), exc.detail() or exc.body[:300])
        self.module.fail_json(msg="%s ConfigMap %s failed: %s" % (doing, self.where, said), status=exc.status,
                              **extra)

    def read(self):
        """The ConfigMap, None for a 404."""
        try:
            return self.api.request("reading ConfigMap %s" % self.where, "GET", self.path, missing_ok=True)
        except kube.KubeError as exc:
            self.fail("reading", exc)

    def patch(self, text, version):
        """A JSON merge patch of data.kubelet, conditional on ``version`` (metadata.resourceVersion: the API server
        answers 409 Conflict when the ConfigMap changed since; kubernetes/kubernetes#63104). KubeError as raised."""
        body = {"metadata": {"resourceVersion": version}, "data": {KEY: text}}
        return self.api.request("patching ConfigMap %s" % self.where, "PATCH", self.path, body=body,
                                content_type="application/merge-patch+json")


def text_of(obj):
    data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
    value = data.get(KEY)
    return value if isinstance(value, str) else ""


def version_of(obj):
    return "%s" % ((obj.get("metadata") or {}).get("resourceVersion") or "")


def plan_of(module, where, text):
    """``_kubelet.plan.configmap_plan`` (the filter nodefix.k8s.kubelet_configmap's function) of ``text``."""
    p = module.params
    try:
        return kubelet_plan.configmap_plan(text, dict(p["settings"]), allow_lower=p["allow_lower"])
    except kubelet_schema.KubeletError as exc:
        module.fail_json(msg="ConfigMap %s (data.%s): %s" % (where, KEY, exc.msg))


def apply(module, cm, obj):
    """Plan from ``obj`` and patch when the plan changes something (not in check mode); a 409 reads and plans again,
    once. (obj as last read or None when it is gone, its text, the plan, patched, conflicts)."""
    conflicts = 0
    while True:
        text = text_of(obj)
        plan = plan_of(module, cm.where, text)
        if not plan["changed"] or module.check_mode:
            return obj, text, plan, False, conflicts
        version = version_of(obj)
        if not version:
            module.fail_json(msg="ConfigMap %s has no metadata.resourceVersion: not patched (the patch is conditional "
                                 "on the version read)" % cm.where, plan=plan)
        try:
            cm.patch(plan["text"], version)
            return obj, text, plan, True, conflicts
        except kube.KubeError as exc:
            if exc.status != 409:
                cm.fail("patching", exc, plan=plan, conflicts=conflicts)
            conflicts += 1
            if conflicts > 1:
                module.fail_json(
                    msg="patching ConfigMap %s failed: 409 Conflict twice - another writer changed it while this run "
                        "patched it (read again at resourceVersion %s, refused again: %s); nothing of this run was "
                        "written, run again" % (cm.where, version, exc.detail()), status=409, conflicts=conflicts,
                    plan=plan)
        obj = cm.read()
        if obj is None:
            return None, "", None, False, conflicts


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    if not kube.available():
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    for key in ("namespace", "name"):
        if not p[key] or "/" in p[key]:
            module.fail_json(msg="%s %r is not a Kubernetes object name" % (key, p[key]))
    if p["request_timeout"] <= 0:
        module.fail_json(msg="request_timeout must be more than 0 seconds")
    cm = ConfigMap(module)
    obj, conflicts = cm.read(), 0
    if obj is not None and p["apply"]:
        obj, text, plan, patched, conflicts = apply(module, cm, obj)
    elif obj is not None:
        text = text_of(obj)
        plan, patched = plan_of(module, cm.where, text), False
    if obj is None:     # no such ConfigMap (or deleted after a conflict)
        module.exit_json(changed=False, exists=False, plan=None, patched=False, conflicts=conflicts)
    result = dict(exists=True, plan=plan, patched=patched, conflicts=conflicts,
                  changed=bool(p["apply"] and plan["changed"]))
    if module._diff:
        result["diff"] = {"before": text, "after": plan["text"], "before_header": "%s data.%s" % (cm.where, KEY),
                          "after_header": "%s data.%s" % (cm.where, KEY)}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
