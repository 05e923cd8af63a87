# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/host_meter.py, which scripts/test.sh runs at the start and the end of every run: what it prints is
what docs/test-times.md compares hosts by, so its two lines are checked here, and a missing start record is said,
never a made-up figure."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METER = os.path.join(ROOT, "scripts", "host_meter.py")


def meter(*args):
    out = subprocess.run([sys.executable, METER] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False)
    return out.returncode, out.stdout


def test_start_then_end_print_the_cores_speed_and_the_cpu_spent(tmp_path):
    record = str(tmp_path / "meter.json")
    rc, out = meter("start", record)
    assert rc == 0 and re.match(r"host: \d+ cores, reference loop \d+\.\d\d CPU-s ", out), out
    rc, out = meter("end", record)
    assert rc == 0, out
    assert re.match(r"host: the machine spent \d+ CPU-s busy \(user \d+, system \d+\), -?\d+ idle, -?\d+ stolen, "
                    r"on \d+ cores; reference loop \d+\.\d\d CPU-s$", out.strip()), out


def test_an_end_without_a_start_says_so(tmp_path):
    rc, out = meter("end", str(tmp_path / "missing.json"))
    assert rc == 0 and "no start record" in out and "CPU-s busy" not in out, out


def test_a_wrong_call_is_refused():
    rc, out = meter("begin")
    assert rc != 0 and "usage" in out, out
