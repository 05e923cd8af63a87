# SPDX-License-Identifier: GPL-3.0-or-later
"""The read-only fast path of the kubelet YAML reader (``subset_yaml_load(strict=True)``, used by
``load_yaml(roundtrip=False)``: every node_audit and node-problem-detector tick) must never give a
document another meaning than ruamel.yaml (YAML 1.2, what the collection reads with otherwise) or
PyYAML (1.1): for any text it either returns exactly what both libraries return, or gives up
(YamlError) and lets the library decide. Checked on a corpus of the scalars YAML types differently
(numbers in other bases, exponents, timestamps, 1.1 booleans, merge keys...) in every position,
on generated documents (hypothesis), and on the real kubeadm/kubespray files, which it must read
itself (or the fast path saves nothing)."""

import os

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from ruamel.yaml import YAML

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml as kubelet_config_yaml
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import KubeletError

LAYOUTS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "lab", "kubelet-double", "layouts")

TRICKY = [
    "", "~", "null", "Null", "NULL", "nULL", "true", "True", "TRUE", "tRUE", "false", "yes", "Yes", "no", "on",
    "off", "y", "n", "Y", "N", "0", "-0", "+1", "12", "012", "0o12", "0x1F", "0X1F", "0b101", "1_000", "1:20",
    "1:20.5", "1.", "1.5", "-1.5", "+.5", ".5", "-.5", "1e3", "1E3", "1.5e3", "1e+3", ".inf", "-.inf", ".NaN",
    ".nan", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "<<", "=", "10.96.0.10", "0.0.0.0", "1.2.3", "4h0m0s",
    "10s", "0s", "1m", "100Mi", "1.5Gi", "10%", "5.5%", "1e3s", "0xZ", "systemd", "/var/lib/kubelet/pki",
    "kubelet.config.k8s.io/v1beta1", "a b", "a#b", "a #b", "a:b", "a: b", "-a", "-", "?", "@x", "`x", "%x",
    "'q'", "'it''s'", "'a' 'b'", '"d"', '"a\\tb"', '"\\x41"', '"\\u00e9"', '"a" b', "[]", "{}", "[a, b]",
    "[a,,b]", "[a, b,]", "{a: 1, b: [x, y]}", "{a, b}", "{a: 1, a: 2}", "[a: b]", "[1e3, 0x1F]", "&a x",
    "*a", "!!str 1", "|", ">", "a\tb", "über", "x\u2028y",
]


def ruamel_load(text):
    return YAML(typ="safe", pure=True).load(text)


def typed(value):
    """``value`` with every type spelled out (True == 1 == 1.0 in Python; not in a kubelet config)."""
    if isinstance(value, dict):
        return ("dict", sorted((repr(typed(k)), typed(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value).__name__, value)


def agree(text):
    """The strict reader returns what both libraries return, or gives up; never another value."""
    try:
        got = kubelet_config_yaml.subset_yaml_load(text, strict=True)
    except kubelet_config_yaml.YamlError:
        return "gave up"
    want = ruamel_load(text)
    assert typed(got) == typed(want), (text, got, want)
    assert typed(got) == typed(yaml.safe_load(text)), (text, got, yaml.safe_load(text))
    return "read"


@pytest.mark.parametrize("scalar", TRICKY)
@pytest.mark.parametrize("shape", ["k: %s\n", "- %s\n", "k:\n- %s\n", "k:\n  - %s\n", "%s: v\n", "k: [%s]\n",
                                   "k: {x: %s}\n", "a:\n  b: %s\n  c: 1\n"])
def test_every_tricky_scalar_reads_as_the_libraries_read_it_or_is_left_to_them(scalar, shape):
    agree(shape % scalar)


def test_the_numbers_only_yaml_libraries_can_read_are_left_to_them():
    for text in ("k: 012\n", "k: 0x1F\n", "k: 1e3\n", "k: 1_000\n", "k: .inf\n", "k: 2001-12-14\n", "k: yes\n",
                 "k: -.5\n", "%YAML 1.1\n---\nk: 012\n", "k: 1\n---\nj: 2\n"):
        assert agree(text) == "gave up", text


SCALAR = st.one_of(st.sampled_from(TRICKY), st.text(alphabet="aeoxbny019.-+_:%/ '\"#[]{},~<=&*!\t", max_size=8))
KEY = st.one_of(st.sampled_from(["a", "b", "k8s", "1", "true", "~", "'q'", "x y"]), st.text("abn01.", min_size=1, max_size=4))


@st.composite
def documents(draw, depth=0):
    lines = []
    for key in draw(st.lists(KEY, min_size=1, max_size=4, unique=True)):
        kind = draw(st.sampled_from(["scalar", "seq", "map"] if depth < 2 else ["scalar"]))
        if kind == "scalar":
            lines.append("%s: %s" % (key, draw(SCALAR)))
        elif kind == "seq":
            lines.append("%s:" % key)
            lines.extend("%s- %s" % (draw(st.sampled_from(["", "  "])), s) for s in draw(st.lists(SCALAR, max_size=3)))
        else:
            lines.append("%s:" % key)
            lines.extend("  " + line for line in draw(documents(depth + 1)).splitlines())
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None)
@given(documents())
def test_generated_documents_read_as_the_libraries_read_them_or_are_left_to_them(text):
    try:
        ruamel_load(text)
        yaml.safe_load(text)
    except Exception:  # pylint: disable=broad-except  # not YAML at all: the strict reader must give up too
        with pytest.raises(kubelet_config_yaml.YamlError):
            kubelet_config_yaml.subset_yaml_load(text, strict=True)
        return
    agree(text)


@pytest.mark.parametrize("path", [
    "kubeadm/var/lib/kubelet/config.yaml",
    "kubespray/etc/kubernetes/kubelet-config.yaml",
])
def test_the_real_layout_files_take_the_fast_path(path):
    with open(os.path.join(LAYOUTS, path)) as fh:
        text = fh.read()
    assert agree(text) == "read", path


def test_load_yaml_reads_without_importing_a_yaml_library_when_the_fast_path_can(monkeypatch):
    def no_library():
        raise AssertionError("a YAML library was used")

    monkeypatch.setattr(kubelet_config_yaml, "ruamel", no_library)
    monkeypatch.setattr(kubelet_config_yaml, "_pyyaml", no_library)
    assert kubelet_config_yaml.load_yaml("kind: KubeletConfiguration\nmaxPods: 110\n", "/c", roundtrip=False) == \
        {"kind": "KubeletConfiguration", "maxPods": 110}
    with pytest.raises(KubeletError, match="a YAML library was used"):
        kubelet_config_yaml.load_yaml("kind: KubeletConfiguration\nmaxPods: 0x6e\n", "/c", roundtrip=False)
