# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's kubelet rate-limit floor, read from the one place that sets it.

molecule verify compares the kubelet's effective limits with what the floor
means on the node's kubelet version, so changing the floor changes these
expectations with it. Read with ``ast`` from the source file: the verifier's
Python need not import the collection.
"""

import ast
import os

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "plugins", "module_utils", "_kubelet", "schema.py")

# kubelet's own defaults (KubeletConfiguration v1beta1; 1.27 raised the API and
# event ones, kubernetes PR #116121): a floor below them leaves them in effect.
DEFAULTS_BEFORE_1_27 = {"kubeAPIQPS": 5, "kubeAPIBurst": 10, "eventRecordQPS": 5, "eventBurst": 10,
                        "registryPullQPS": 5, "registryBurst": 10}
DEFAULTS_SINCE_1_27 = dict(DEFAULTS_BEFORE_1_27, kubeAPIQPS=50, kubeAPIBurst=100, eventRecordQPS=50, eventBurst=100)


def rate_limit_floor(path=SCHEMA):
    """RATE_LIMIT_FLOOR as written in ``path``."""
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "RATE_LIMIT_FLOOR" for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("no RATE_LIMIT_FLOOR in %s" % path)


def expected(version, path=SCHEMA):
    """The limits the kubelet role leaves in effect on a kubelet of ``version`` (a (major, minor) tuple)
    whose limits were at or below the defaults."""
    defaults = DEFAULTS_SINCE_1_27 if tuple(version[:2]) >= (1, 27) else DEFAULTS_BEFORE_1_27
    return dict((field, max(floor, defaults[field])) for field, floor in rate_limit_floor(path).items())
