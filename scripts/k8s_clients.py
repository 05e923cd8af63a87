#!/usr/bin/env python
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Install the kubernetes Python client at both ends of the range requirements.txt declares (scripts/setup.sh).

The floor is the oldest release the range admits, the newest the newest it admits today (``pip index versions
kubernetes``: what pip and an execution environment built today resolve). Each is installed once with its
dependencies as pip resolves them, ``pip install --target .cache/k8s-clients/<version>`` (cached: a directory
that holds the release is kept), and .cache/k8s-clients/tested.json records the range and the two versions:
tests/unit/test_k8s_client_releases.py runs the modules that call the API with each, and fails when the range
in requirements.txt is not the one recorded (a range changed without a set-up that tests its ends).

Usage: python scripts/k8s_clients.py  (the venv's python: it runs that pip)
"""

import datetime
import json
import os
import re
import subprocess
import sys

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEST = os.path.join(ROOT, ".cache", "k8s-clients")


def declared(path=os.path.join(ROOT, "requirements.txt")):
    """The kubernetes requirement of requirements.txt (a packaging Requirement)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line and Requirement(line).name.lower() == "kubernetes":
                return Requirement(line)
    raise SystemExit("requirements.txt declares no kubernetes range")


def released():
    """Every kubernetes release on the package index pip uses (None when the index cannot be asked)."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "kubernetes"], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write("pip index versions kubernetes failed (rc %s): %s\n" % (done.returncode, done.stderr.strip()))
        return None
    out = done.stdout
    found = re.search(r"^Available versions: (.*)$", out, re.M)
    if not found:
        raise SystemExit("pip index versions kubernetes listed no versions:\n%s" % out)
    return [Version(v.strip()) for v in found.group(1).split(",")]


def install(version):
    target = os.path.join(DEST, str(version))
    if installed(version):
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--upgrade", "--target", target,
                    "kubernetes==%s" % version], check=True)


def installed(version):
    return os.path.isdir(os.path.join(DEST, str(version), "kubernetes-%s.dist-info" % version))


def cached(req):
    """The record of the last set-up when it is for this range and both its releases are still installed, else None."""
    try:
        with open(os.path.join(DEST, "tested.json"), encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    if record.get("range") != str(req.specifier) or not all(installed(record.get(k, "")) for k in ("floor", "newest")):
        return None
    return record


def main():
    req = declared()
    index = released()
    if index is None:
        # offline (or the index down): a set-up that already installed both ends of THIS range keeps them, saying
        # when they were looked up; without them there is nothing to test the range with, so set-up fails
        record = cached(req)
        if record is None:
            raise SystemExit("cannot list kubernetes releases and no earlier set-up installed both ends of %s"
                             % req.specifier)
        print("kubernetes %s: the index did not answer; keeping %s and %s (looked up %s) in %s"
              % (req.specifier, record["floor"], record["newest"], record["queried"], DEST))
        return
    admitted = sorted(v for v in index if req.specifier.contains(v))
    if not admitted:
        raise SystemExit("no kubernetes release is admitted by %s" % req)
    ends = [admitted[0], admitted[-1]]
    for version in ends:
        install(version)
    record = {"range": str(req.specifier), "floor": str(ends[0]), "newest": str(ends[1]),
              "queried": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    with open(os.path.join(DEST, "tested.json"), "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
    print("kubernetes %s: %s and %s in %s" % (req.specifier, ends[0], ends[1], DEST))


if __name__ == "__main__":
    main()
