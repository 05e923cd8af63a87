# SPDX-License-Identifier: GPL-3.0-or-later
"""The cordon filters: input of the wrong shape is a filter error naming the filter, never a traceback."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.nodefix.k8s.plugins.filter.cordon import FilterModule


@pytest.mark.parametrize("name,args", [
    ("cordon_reclaim", (None, "run-1")),
    ("drain_outcome", ([], None)),
    ("hold_reasons", ("ok", {})),
])
def test_bad_input_is_a_filter_error_naming_the_filter(name, args):
    with pytest.raises(AnsibleFilterError, match="^%s: " % name):
        FilterModule().filters()[name](*args)


def test_each_filter_answers():
    filters = FilterModule().filters()
    node = {"metadata": {"name": "n", "annotations": {"nodefix.k8s/cordoned-by": '{"run": "old"}'}},
            "spec": {"unschedulable": True}}
    assert filters["cordon_reclaim"](node, "new")["action"] == "give_back"
    assert filters["drain_outcome"]([], [])["done"] is True
    assert filters["hold_reasons"]({"status": "skipped"}, {}) == []
