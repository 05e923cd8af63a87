# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the kubelet role: the kubeadm kubelet-config ConfigMap edit (durable fixes)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import plan as kubelet_plan
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema


def kubelet_configmap(text, targets, allow_lower=False):
    """``_kubelet.plan.configmap_plan``: the ConfigMap's KubeletConfiguration with ``targets``, untouched entries kept."""
    if text is not None and not isinstance(text, str):
        raise AnsibleFilterError("kubelet_configmap: the input must be the ConfigMap's data.kubelet text")
    if not isinstance(targets, dict):
        raise AnsibleFilterError("kubelet_configmap: targets must be a dict of KubeletConfiguration fields")
    try:
        return kubelet_plan.configmap_plan(text or "", dict(targets), allow_lower=bool(allow_lower))
    except kubelet_schema.KubeletError as exc:
        raise AnsibleFilterError("kubelet_configmap: %s" % exc.msg)


class FilterModule(object):
    def filters(self):
        return {"kubelet_configmap": kubelet_configmap}
