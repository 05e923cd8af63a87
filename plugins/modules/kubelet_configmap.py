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
  - Every answer read is checked before anything is planned from it - a C(kind) ConfigMap (when given), a
    C(metadata) map with a C(resourceVersion) string (and C(name), when given, the one asked for), and a string
    C(data.kubelet) that parses as a KubeletConfiguration (C(kind) KubeletConfiguration, C(apiVersion)
    C(kubelet.config.k8s.io/...)). An answer that is not (no C(data), a C(data.kubelet) that is missing, empty, a
    map or only in C(binaryData), ...) fails the module naming the ConfigMap and what is wrong - it is never planned
    nor patched (a plan from nothing would write a near-empty KubeletConfiguration that C(kubeadm upgrade node) then
    writes to every node).
  - The patch is asked again only after a 429 (the API server did not act on it). Its answer lost - a 5xx, no
    answer, or a 2xx that is not an object - the patch may have been applied; it is never sent again (a second copy
    would be refused 409 and the write reported as not made) - the ConfigMap is read once more, and when it carries
    every setting they are reported set (RV(patched), C(changed), RV(answer_lost) - written by this run or
    another); otherwise the module fails naming the lost answer.
  - In check mode, when the plan changes something, the same conditional merge patch is sent as a server-side dry
    run (C(?dryRun=All)) - the API server validates, authorizes and admits it and stores nothing; a refusal (403,
    422, ...) fails the check naming it.
  - A ConfigMap that does not exist (404) is not an error; RV(exists) is V(false) and nothing is written.
  - Every request goes through the collection's one API client, with O(request_timeout) for the connection and the
    read and its retry policy (a 429, a 5xx with C(Retry-After) or a read's 5xx asked again at most twice; the
    patch, a 429 only). A failure names the ConfigMap and what the API server said (or that it did not answer); no
    message quotes a token. Runs where the kubeconfig is (usually the controller, with C(delegate_to)).
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
    description: Namespace of the ConfigMap, a DNS-1123 label (anything else fails before any request).
    type: str
    default: kube-system
  name:
    description: Name of the ConfigMap (kubeadm before 1.24 named it C(kubelet-config-1.X)), a DNS-1123 subdomain
      (anything else, such as C(.) or C(..), fails before any request).
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
    details: Reads the ConfigMap and plans; with O(apply) and a plan that changes something, the patch is sent as a
      server-side dry run (C(?dryRun=All), nothing stored) and a refusal fails the check; C(changed) says whether
      O(apply) would patch it.
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
  - name: Dry-run
    description: A write with C(dryRun=All) is validated, authorized and admitted and not stored.
    link: https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run
  - name: Object names and IDs
    description: Most objects' names are DNS-1123 subdomains, a namespace's a DNS-1123 label.
    link: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
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
      description: C(data.kubelet) with the settings (the text as read when nothing changes; after a lost answer,
        the text read again).
      type: str
      sample: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeAPIQPS: 50\n"
    fields:
      description: Each changed field with its C(before) (null when absent) and C(after) value.
      type: dict
      sample: {"kubeAPIQPS": {"before": 5, "after": 50}}
patched:
  description: This run patched the ConfigMap (with RV(answer_lost) - the patch's answer was lost - the ConfigMap
    read again carries every setting, written by this run or another). V(false) in check mode.
  returned: success
  type: bool
  sample: true
answer_lost:
  description: The API server's answer to the patch was lost (a 5xx, no answer) and the ConfigMap read again carries
    every setting - written by this run or another; what was lost.
  returned: when the patch's answer was lost and the ConfigMap read again carries every setting
  type: str
  sample: "the API server's answer to the patch was lost (503 Service Unavailable: ...); the ConfigMap read again
    carries every setting: written by this run or another"
dry_run:
  description: In check mode, the patch was sent as a server-side dry run (C(?dryRun=All)) and accepted.
  returned: success
  type: bool
  sample: false
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

import re

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._k8s import client as kube
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import plan as kubelet_plan
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema

KEY = "kubelet"


def argument_spec():
    return dict(
        kube.argument_spec(request_timeout=30),
        namespace=dict(type="str", default="kube-system"),
        name=dict(type="str", default="kubelet-config"),
        settings=dict(type="dict", required=True),
        allow_lower=dict(type="bool", default=False),
        apply=dict(type="bool", default=False),
    )


# a ConfigMap's name is a DNS-1123 subdomain, a namespace's a DNS-1123 label (apimachinery's validation;
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/): "." and ".." are neither - urllib3 would
# collapse them as path segments and the request would reach another object (the Namespace itself)
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
NAME_RULES = {
    "name": (re.compile(r"^%s(\.%s)*\Z" % (_LABEL, _LABEL)), 253, "a DNS-1123 subdomain: lower-case letters, digits, "
             "'-' and '.', each dot-separated part starting and ending with a letter or digit"),
    "namespace": (re.compile(r"^%s\Z" % _LABEL), 63, "a DNS-1123 label: lower-case letters, digits and '-', starting "
                  "and ending with a letter or digit"),
}
API_GROUP = "kubelet.config.k8s.io/"


def name_error(option, value):
    """Why ``value`` is not a valid ``option`` (name: a ConfigMap name, namespace: a namespace name); None if it is."""
    rule, most, what = NAME_RULES[option]
    if not isinstance(value, str) or not rule.match(value) or len(value) > most:
        return "%s %r is not a Kubernetes %s name (%s, at most %d characters); nothing was read or written" % (
            option, value, "ConfigMap" if option == "name" else "namespace", what, most)
    return None


def _kind_of(value):
    return "null" if value is None else "a %s" % type(value).__name__


def answer_errors(obj, name):
    """What makes an answer read as the ConfigMap ``name`` no ConfigMap whose ``data.kubelet`` is a
    KubeletConfiguration with a ``metadata.resourceVersion`` to patch conditionally ([] when it is one). A ConfigMap
    that is not one is never planned nor patched: an empty plan would write a near-empty KubeletConfiguration that
    ``kubeadm upgrade node`` then writes to every node."""
    errors = []
    if obj.get("kind", "ConfigMap") != "ConfigMap":
        errors.append("the answer is a %.40r, not a ConfigMap" % (obj.get("kind"),))
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        errors.append("metadata is %s, not a map" % _kind_of(meta))
    else:
        version = meta.get("resourceVersion")
        if not isinstance(version, str) or not version:
            errors.append("metadata.resourceVersion is %s (the patch is conditional on the version read)" % (
                "missing" if version is None else "%.40r" % (version,)))
        if meta.get("name", name) != name:
            errors.append("metadata.name is %.80r, not %r" % (meta.get("name"), name))
    data = obj.get("data")
    text = data.get(KEY) if isinstance(data, dict) else None
    if not isinstance(data, dict):
        errors.append("data is %s, not a map" % _kind_of(data))
    elif KEY not in data:
        errors.append("data has no key %r" % KEY)
    elif not isinstance(text, str):
        errors.append("data.%s is %s, not a string" % (KEY, _kind_of(text)))
    if text is None and isinstance(obj.get("binaryData"), dict) and KEY in obj["binaryData"]:
        errors.append("binaryData.%s is no KubeletConfiguration kubeadm reads" % KEY)
    if isinstance(text, str):
        errors.extend(_configuration_errors(text))
    return errors


def _configuration_errors(text):
    """Why ``text`` (data.kubelet) is no KubeletConfiguration ([] when it is one)."""
    if not text.strip():
        return ["data.%s is empty" % KEY]
    try:
        config = config_yaml.load_yaml(text, "data.%s" % KEY, roundtrip=False)
    except kubelet_schema.KubeletError as exc:
        return [exc.msg]
    if not isinstance(config, dict):
        return ["data.%s is %s, not a KubeletConfiguration map" % (KEY, _kind_of(config))]
    errors = []
    if config.get("kind") != kubelet_schema.KIND:
        errors.append("data.%s has kind %.60r, not %s" % (KEY, config.get("kind"), kubelet_schema.KIND))
    version = config.get("apiVersion")
    if not isinstance(version, str) or not version.startswith(API_GROUP) or version == API_GROUP:
        errors.append("data.%s has apiVersion %.60r, not %s..." % (KEY, version, API_GROUP))
    return errors


class ConfigMap(object):
    """One ConfigMap's read and its conditional patch through the collection's one API client."""

    def __init__(self, module):
        p = module.params
        self.module, self.ns, self.name = module, p["namespace"], p["name"]
        self.where = "%s/%s" % (self.ns, self.name)
        self.path = "/api/v1/namespaces/%s/configmaps/%s" % (kube.name(self.ns), kube.name(self.name))
        self.api = kube.module_client(module, where="ConfigMap %s: " % self.where)

    def said(self, exc):
        """What the API server said (or that it did not answer)."""
        if not exc.status:
            return "the API server could not be reached or did not answer within %d s (%s)" % (
                self.module.params["request_timeout"], exc.why)
        if 200 <= exc.status <= 299:
            return "%s: %s" % (exc.phrase(), exc.why)
        return "%s: %s" % (exc.phrase(), exc.detail() or exc.body[:300])

    def fail(self, doing, exc, **extra):
        """Fail naming the ConfigMap and what the API server said (a KubeError's text never holds a token)."""
        self.module.fail_json(msg="%s ConfigMap %s failed: %s" % (doing, self.where, self.said(exc)),
                              status=exc.status, **extra)

    def read(self, doing="reading", **extra):
        """The ConfigMap, None for a 404; an answer that is no ConfigMap whose data.kubelet is a KubeletConfiguration
        (``answer_errors``) fails the module - it is never planned nor patched."""
        try:
            obj = self.api.request("%s ConfigMap %s" % (doing, self.where), "GET", self.path, missing_ok=True)
        except kube.KubeError as exc:
            self.fail(doing, exc, **extra)
        errors = answer_errors(obj, self.name) if obj is not None else []
        if errors:
            self.module.fail_json(msg="%s ConfigMap %s: the API server's answer is not a ConfigMap whose data.%s is a "
                                      "KubeletConfiguration: %s; nothing was planned or written"
                                      % (doing, self.where, KEY, "; ".join(errors)), **extra)
        return obj

    def patch(self, text, version, dry_run=False):
        """A JSON merge patch of data.kubelet, conditional on ``version`` (metadata.resourceVersion: the API server
        answers 409 Conflict when the ConfigMap changed since; kubernetes/kubernetes#63104). KubeError as raised.
        Asked again only after a 429 (the server did not act); a 5xx or a lost answer is the caller's (``lost``).
        ``dry_run``: ``?dryRun=All`` - the API server validates, authorizes and admits it and stores nothing."""
        body = {"metadata": {"resourceVersion": version}, "data": {KEY: text}}
        return self.api.request("%s ConfigMap %s" % ("dry-run patching" if dry_run else "patching", self.where),
                                "PATCH", self.path, query=[("dryRun", "All")] if dry_run else None, body=body,
                                content_type="application/merge-patch+json", retry=kube.RETRY_ALWAYS)


def text_of(obj):
    """data.kubelet of a ConfigMap ``ConfigMap.read`` accepted (always a string there)."""
    return obj["data"][KEY]


def version_of(obj):
    return obj["metadata"]["resourceVersion"]


def plan_of(module, where, text):
    """``_kubelet.plan.configmap_plan`` (the filter nodefix.k8s.kubelet_configmap's function) of ``text``."""
    p = module.params
    try:
        return kubelet_plan.configmap_plan(text, dict(p["settings"]), allow_lower=p["allow_lower"])
    except kubelet_schema.KubeletError as exc:
        module.fail_json(msg="ConfigMap %s (data.%s): %s" % (where, KEY, exc.msg))


def lost(module, cm, exc, plan, conflicts):
    """The patch's answer was lost (a 5xx, no answer, or a 2xx that is no object): it may have been applied. The
    ConfigMap is read once more: carrying the settings, they are set (by this run or another); otherwise a failure
    naming the lost answer. (obj, plan, note)"""
    said = cm.said(exc)
    obj = cm.read("reading again, after the patch's answer was lost (%s)," % said, plan=plan, conflicts=conflicts)
    now = plan_of(module, cm.where, text_of(obj)) if obj is not None else None
    if now is None or now["changed"]:
        module.fail_json(
            msg="patching ConfigMap %s: the API server's answer to the patch was lost (%s); read again, the ConfigMap "
                "%s: the patch was not applied (or was undone), run again"
                % (cm.where, said, "no longer exists" if now is None else "does not carry %s" % ", ".join(
                    sorted(now["fields"]))), status=exc.status, plan=plan, conflicts=conflicts)
    note = ("the API server's answer to the patch was lost (%s); the ConfigMap read again carries every setting: "
            "written by this run or another" % said)
    return obj, dict(plan, text=now["text"]), note


def apply(module, cm, obj):
    """Plan from ``obj`` and patch when the plan changes something (in check mode a server-side dry run of the
    patch); a 409 reads and plans again, once. (obj as last read or None when it is gone, its text, the plan,
    patched, conflicts, the note of a lost answer or None)."""
    conflicts = 0
    while True:
        text = text_of(obj)
        plan = plan_of(module, cm.where, text)
        if not plan["changed"]:
            return obj, text, plan, False, conflicts, None
        try:
            cm.patch(plan["text"], version_of(obj), dry_run=module.check_mode)
            return obj, text, plan, not module.check_mode, conflicts, None
        except kube.KubeError as exc:
            if exc.status != 409:
                if module.check_mode:
                    cm.fail("dry-run patching (check mode: the API server refused or did not answer the patch it "
                            "would get)", exc, plan=plan, conflicts=conflicts)
                if exc.status is None or exc.status >= 500 or 200 <= exc.status <= 299:
                    obj, plan, note = lost(module, cm, exc, plan, conflicts)
                    return obj, text, plan, True, conflicts, note
                cm.fail("patching", exc, plan=plan, conflicts=conflicts)
            conflicts += 1
            if conflicts > 1:
                module.fail_json(
                    msg="%s ConfigMap %s failed: 409 Conflict twice - another writer changed it while this run "
                        "patched it (read again at resourceVersion %s, refused again: %s); nothing of this run was "
                        "written, run again" % ("dry-run patching" if module.check_mode else "patching", cm.where,
                                                version_of(obj), exc.detail()),
                    status=409, conflicts=conflicts, plan=plan)
        obj = cm.read("reading again, after a 409 Conflict,", plan=plan, conflicts=conflicts)
        if obj is None:
            return None, "", None, False, conflicts, None


@redacted_main
def main():
    module = redacting(AnsibleModule)(argument_spec=argument_spec(), supports_check_mode=True)
    if not kube.available():
        module.fail_json(msg=missing_required_lib("kubernetes"))
    p = module.params
    for key in ("namespace", "name"):
        error = name_error(key, p[key])
        if error:
            module.fail_json(msg=error)
    if p["request_timeout"] <= 0:
        module.fail_json(msg="request_timeout must be more than 0 seconds")
    cm = ConfigMap(module)
    obj, conflicts, note = cm.read(), 0, None
    if obj is not None and p["apply"]:
        obj, text, plan, patched, conflicts, note = apply(module, cm, obj)
    elif obj is not None:
        text = text_of(obj)
        plan, patched = plan_of(module, cm.where, text), False
    if obj is None:     # no such ConfigMap (or deleted after a conflict)
        module.exit_json(changed=False, exists=False, plan=None, patched=False, conflicts=conflicts, dry_run=False)
    result = dict(exists=True, plan=plan, patched=patched, conflicts=conflicts,
                  changed=bool(p["apply"] and plan["changed"]),
                  dry_run=bool(p["apply"] and plan["changed"] and module.check_mode))
    if note:
        result["answer_lost"] = note
    if module._diff:
        result["diff"] = {"before": text, "after": plan["text"], "before_header": "%s data.%s" % (cm.where, KEY),
                          "after_header": "%s data.%s" % (cm.where, KEY)}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
