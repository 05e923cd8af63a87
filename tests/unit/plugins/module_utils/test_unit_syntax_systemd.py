# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one reader of unit-file syntax (``_kubelet.flags.unit_entries``, used by kubelet
discovery through ``_kubelet.unit.parse_unit`` and by the flag editor) against the real systemd: each
case is a unit file whose ``Nice=`` value systemd cannot parse, and ``systemd-analyze verify`` quotes the
value as systemd read it (continuations joined, the backslash read as a space, comment lines inside a
continuation skipped, a blank line ending it). Read-only: the unit files live in a temporary directory
and nothing is loaded into the machine's systemd.
"""

import re
import shutil
import subprocess

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import flags as kubelet_flags
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import unit as kubelet_unit

CASES = {
    "comment-in-continuation": "Nice=x \\\n# a comment \\\n  y\n",
    "semicolon-comment-indented": "Nice=x\\\n  ; a comment\ny\n",
    "blanks-kept-inside": "Nice=  x  \\\n\ty  \n",
    "comment-block": "Nice=x\\\n#c\n#d\n   y \\\nz\n",
    "quotes-are-not-read-here": 'Nice="x \\\n y"\n',
    "blank-line-ends-it": "Nice=x \\\n\nNice=y\n",
    "a-comment-continues-nothing": "#Nice=q \\\nNice=x\n",
    "backslash-at-the-end": "Nice=x \\",
    "crlf": "Nice=x \\\r\n  y\r\n",
    "two-settings": "Nice=a \\\n b\nNice=c\n",
}
SYSTEMD_SAYS = re.compile(r"Failed to parse nice priority '(.*)', ignoring")


def systemd_values(tmp_path, body):
    """The Nice= values as systemd read them, from systemd-analyze's warnings."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is needed (Debian package systemd; scripts/setup.sh installs it)"
    unit = tmp_path / "nodefix-syntax.service"
    unit.write_bytes(("[Unit]\nDescription=syntax\n[Service]\nExecStart=/bin/true\n" + body).encode())
    proc = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60,
                          check=False, env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    return SYSTEMD_SAYS.findall(proc.stdout + proc.stderr)


@pytest.mark.parametrize("name", sorted(CASES))
def test_unit_values_are_read_as_systemd_reads_them(tmp_path, name):
    body = CASES[name]
    want = systemd_values(tmp_path, body)
    assert want, "systemd-analyze reported no Nice= value for %r" % body
    text = "[Service]\nExecStart=/bin/true\n" + body
    got = [value for key, value, _path in kubelet_unit.parse_unit(text, "/x.service") if key == "Nice"]
    assert got == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_character_of_a_value_maps_back_to_the_same_character(name):
    text = "[Service]\n" + CASES[name]
    for _section, _key, value, posmap in kubelet_flags.unit_entries(text):
        assert len(posmap) == len(value)
        for char, raw in zip(value, posmap):
            # a continuation's backslash is read as a space
            assert text[raw] == char or (text[raw] == "\\" and char == " "), (value, raw)
