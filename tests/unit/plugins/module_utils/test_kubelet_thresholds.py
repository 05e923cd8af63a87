# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubelet rate-limit floor is set in one place (``kubelet_schema.RATE_LIMIT_FLOOR``)
and everything that states or applies it follows that place: the detector's
"low limit" threshold, the module's profile, the finding remedies, the
generated docs, the role defaults and molecule's expectations."""

import importlib
from fractions import Fraction
import os
import re
import sys

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import detect as kubelet_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCHEMA = os.path.join(ROOT, "plugins", "module_utils", "_kubelet", "schema.py")
RATES = ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst", "registryPullQPS", "registryBurst")


def floor_line_value(field):
    """The value on the one line of _kubelet/schema.py that sets ``field``'s floor."""
    with open(SCHEMA) as fh:
        text = fh.read()
    block = text[text.index("RATE_LIMIT_FLOOR = {"):]
    block = block[:block.index("}")]
    lines = [ln for ln in block.splitlines() if '"%s"' % field in ln]
    assert len(lines) == 1, lines
    return int(re.search(r":\s*(\d+)", lines[0]).group(1))


def test_the_floor_is_read_from_its_one_line():
    assert set(kubelet_schema.RATE_LIMIT_FLOOR) == set(RATES)
    for field in RATES:
        assert kubelet_schema.RATE_LIMIT_FLOOR[field] == floor_line_value(field)
    # the detector uses the same object, not a copy with its own numbers
    assert kubelet_schema.RATE_LIMIT_FLOOR is kubelet_schema.RATE_LIMIT_FLOOR


@pytest.mark.parametrize("version,new_defaults", [((1, 26, 15), False), ((1, 27, 0), True), ((1, 31, 2), True),
                                                  (None, True)])
def test_low_thresholds_are_the_floor_or_the_version_default(version, new_defaults):
    f = kubelet_schema.RATE_LIMIT_FLOOR
    d = kubelet_schema.version_defaults(version)
    assert d["kubeAPIQPS"] == (50 if new_defaults else 5)
    api, event = kubelet_detect.low_thresholds(version)
    assert api == (max(f["kubeAPIQPS"], d["kubeAPIQPS"]), max(f["kubeAPIBurst"], d["kubeAPIBurst"]))
    assert event == (max(f["eventRecordQPS"], d["eventRecordQPS"]), max(f["eventBurst"], d["eventBurst"]))


def test_the_module_profile_has_no_numbers_of_its_own():
    for key in kubelet_schema.PROFILE_FLOORS:
        assert "default" not in kubelet_schema.PROFILE_OPTIONS[key], key
    settings, floors, _notes = kubelet_schema.profile_settings({}, (1, 26, 15))
    assert dict((f, settings[f]) for f in RATES) == kubelet_schema.RATE_LIMIT_FLOOR
    assert sorted(floors) == sorted(RATES)
    # an explicit value still wins over the floor
    settings, _f, _n = kubelet_schema.profile_settings({"api_qps": 77}, (1, 26, 15))
    assert settings["kubeAPIQPS"] == 77


def test_the_role_and_its_spec_have_no_numbers_of_their_own():
    with open(os.path.join(ROOT, "roles", "kubelet", "defaults", "main.yml")) as fh:
        defaults = yaml.safe_load(fh)
    with open(os.path.join(ROOT, "roles", "kubelet", "meta", "argument_specs.yml")) as fh:
        spec = yaml.safe_load(fh)["argument_specs"]["main"]["options"]
    for var in ("kubelet_kube_api_qps", "kubelet_kube_api_burst", "kubelet_event_qps", "kubelet_event_burst",
                "kubelet_registry_qps", "kubelet_registry_burst"):
        assert defaults[var] is None, var
        assert "default" not in spec[var], var
    with open(os.path.join(ROOT, "roles", "kubelet", "tasks", "profile.yml")) as fh:
        profile_task = fh.read()
    # a null rate is left out of the profile (the module then applies the floor), never cast to 0
    assert "rejectattr('value', 'none')" in profile_task
    assert "kubelet_kube_api_qps | int" not in profile_task


@pytest.fixture
def floor_35():
    """RATE_LIMIT_FLOOR with the API QPS line changed to 35, as an edit of that one line would; restored after."""
    saved = dict(kubelet_schema.RATE_LIMIT_FLOOR)
    kubelet_schema.RATE_LIMIT_FLOOR["kubeAPIQPS"] = 35
    importlib.reload(kubelet_detect)  # the finding registry is built at import time
    try:
        yield
    finally:
        kubelet_schema.RATE_LIMIT_FLOOR.clear()
        kubelet_schema.RATE_LIMIT_FLOOR.update(saved)
        importlib.reload(kubelet_detect)


def test_changing_the_api_qps_floor_changes_everything_that_uses_it(floor_35):
    assert kubelet_detect.low_thresholds((1, 26))[0] == (35, 40)
    assert kubelet_detect.low_thresholds((1, 27))[0] == (50, 100)
    assert kubelet_schema.profile_settings({}, (1, 26))[0]["kubeAPIQPS"] == 35
    assert "at least 35/40" in kubelet_detect.FINDINGS["kubelet.api_qps_low"]["remedy"]
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        gen = importlib.import_module("gen_findings_doc")
        assert "| `kubeAPIQPS` | 35 | 5 | 50 |" in gen.render_floor()
    finally:
        sys.path.pop(0)


def test_molecule_expectations_read_the_floor_from_its_file(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "molecule", "shared"))
    try:
        floor = importlib.import_module("floor")
    finally:
        sys.path.pop(0)
    assert floor.rate_limit_floor() == kubelet_schema.RATE_LIMIT_FLOOR
    # the one-line edit, on a copy of the file
    with open(SCHEMA) as fh:
        text = fh.read()
    line = '    "kubeAPIQPS": %d,\n' % floor_line_value("kubeAPIQPS")
    assert text.count(line) == 1
    copy = tmp_path / "kubelet_schema.py"
    copy.write_text(text.replace(line, '    "kubeAPIQPS": 35,\n'))
    assert floor.expected((1, 26), str(copy))["kubeAPIQPS"] == 35
    assert floor.expected((1, 27), str(copy))["kubeAPIQPS"] == 50


def test_the_docs_state_the_floor_the_code_sets():
    with open(os.path.join(ROOT, "docs", "findings.md")) as fh:
        doc = fh.read()
    d_old, d_new = kubelet_schema.version_defaults((1, 26)), kubelet_schema.version_defaults((1, 27))
    for field, value in kubelet_schema.RATE_LIMIT_FLOOR.items():
        assert "| `%s` | %d | %d | %d |" % (field, value, d_old[field], d_new[field]) in doc
    # hand-written docs point at the generated table instead of repeating the numbers
    for rel in ("README.md", "docs/kubelet.md", "roles/kubelet/README.md", "roles/kubelet/meta/argument_specs.yml",
                "roles/kubelet/defaults/main.yml"):
        with open(os.path.join(ROOT, rel)) as fh:
            text = fh.read()
        pair = r"\b%d\s*/\s*%d\b" % (kubelet_schema.RATE_LIMIT_FLOOR["kubeAPIQPS"], kubelet_schema.RATE_LIMIT_FLOOR["kubeAPIBurst"])
        assert not re.search(pair, text), rel


# ---- resource.Quantity -------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("500Mi", 500 * 2 ** 20), ("1.5G", 1500000000), ("100m", Fraction(1, 10)), ("12e6", 12000000),
    ("1.5e3", 1500), ("5.", 5), (".5", Fraction(1, 2)), ("+1", 1), ("1E", 10 ** 18), ("1E3", 1000),
    ("1e-3", Fraction(1, 1000)), ("7Ei", 7 * 2 ** 60), ("9223372036854775807", 2 ** 63 - 1), ("0", 0),
    ("-1Gi", -(2 ** 30)), ("250n", Fraction(250, 10 ** 9)),
])
def test_quantities_read_as_kubernetes_reads_them(text, value):
    assert kubelet_schema.parse_quantity(text) == value


@pytest.mark.parametrize("text,word", [
    ("1e999", "larger"), ("8Ei", "larger"), ("9223372036854775808", "larger"), ("1ki", "not a Kubernetes quantity"),
    ("e3", "not a Kubernetes quantity"), ("", "not a Kubernetes quantity"), ("1.2.3", "not a Kubernetes quantity"),
    ("1 Gi", "not a Kubernetes quantity"), ("Gi", "not a Kubernetes quantity"), ("0x10", "not a Kubernetes quantity"),
])
def test_quantities_kubernetes_refuses_or_caps_are_refused(text, word):
    with pytest.raises(ValueError, match=word):
        kubelet_schema.parse_quantity(text)


def test_node_capacity_is_read_from_the_node_tree(tmp_path):
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text("MemTotal:        2048000 kB\nMemFree: 1 kB\n")
    (tmp_path / "proc/sys/kernel/pid_max").write_text("32768\n")
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3,6\n")
    (tmp_path / "var/lib/kubelet").mkdir(parents=True)
    cap = kubelet_node.node_capacity(str(tmp_path))
    assert cap["memory"] == 2048000 * 1024 and cap["cpu"] == 5 and cap["pid"] == 32768
    assert cap["ephemeral-storage"] > 0
    # what cannot be read is left out, never guessed
    assert kubelet_node.node_capacity(str(tmp_path / "nothing")) == {}


# ---- the kubelet's own rule for reservations (validateNodeAllocatable) --------------------------------

GI = 2 ** 30


def test_pid_capacity_is_the_smaller_of_pid_max_and_threads_max(tmp_path):
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/pid_max").write_text("4194304\n")
    (tmp_path / "proc/sys/kernel/threads-max").write_text("62000\n")
    assert kubelet_node.node_capacity(str(tmp_path))["pid"] == 62000
    errors = kubelet_node.reservation_errors({"systemReserved": {"pid": "40000"}, "kubeReserved": {"pid": "30000"}},
                                             kubelet_node.node_capacity(str(tmp_path)))
    assert len(errors) == 1 and "the smaller of kernel.pid_max and kernel.threads-max" in errors[0]


@pytest.mark.parametrize("config, reported", [
    # 50Gi + 45Gi of a 100Gi disk, and the 10 % nodefs.available default on top: 105Gi
    ({"systemReserved": {"ephemeral-storage": "50Gi"}, "kubeReserved": {"ephemeral-storage": "45Gi"}},
     "evictionHard.nodefs.available=10%"),
    ({"systemReserved": {"ephemeral-storage": "50Gi"}, "evictionHard": {"nodefs.available": "51Gi"}},
     "evictionHard.nodefs.available=51Gi"),
    ({"systemReserved": {"ephemeral-storage": "95Gi"}, "evictionHard": {"nodefs.available": "5%"}},
     "evictionHard.nodefs.available=5%"),
    # the memory reserve counts with its default (100Mi) when evictionHard does not set it
    ({"systemReserved": {"memory": "3.95Gi"}}, "evictionHard.memory.available=100Mi"),
])
def test_every_reserved_resource_counts_its_hard_eviction_threshold(config, reported):
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
    errors = kubelet_node.reservation_errors(config, {"ephemeral-storage": 100 * GI, "memory": 4 * GI})
    assert len(errors) == 1 and reported in errors[0], errors


def test_reservations_within_the_capacity_pass():
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
    config = {"systemReserved": {"ephemeral-storage": "40Gi", "memory": "1Gi"}, "kubeReserved": {"ephemeral-storage": "40Gi"},
              "evictionHard": {"nodefs.available": "10%", "memory.available": "500Mi"}}
    assert kubelet_node.reservation_errors(config, {"ephemeral-storage": 100 * GI, "memory": 4 * GI}) == []
    # a partial map leaves nodefs.available out: the kubelet reserves nothing for it
    partial = {"systemReserved": {"ephemeral-storage": "95Gi"}, "evictionHard": {"memory.available": "100Mi"}}
    assert kubelet_node.reservation_errors(partial, {"ephemeral-storage": 100 * GI, "memory": 4 * GI}) == []
