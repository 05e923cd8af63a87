# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubelet detector's "low limit" threshold follows the kubelet version
and matches the floor the kubelet role writes (30/40, 1.27+ 50/100)."""

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils import _kubelet


@pytest.mark.parametrize("version,api,event", [
    ((1, 26, 15), (30, 40), (30, 40)),
    ((1, 27, 0), (50, 100), (50, 100)),
    ((1, 31, 2), (50, 100), (50, 100)),
    (None, (50, 100), (50, 100)),
])
def test_low_thresholds(version, api, event):
    assert _kubelet.low_thresholds(version) == (api, event)


def test_role_floor_is_the_detector_floor():
    # roles/kubelet/defaults/main.yml writes 30/40 as its floor
    assert _kubelet.RATE_LIMIT_FLOOR == {"kubeAPIQPS": 30, "kubeAPIBurst": 40, "eventRecordQPS": 30, "eventBurst": 40}
