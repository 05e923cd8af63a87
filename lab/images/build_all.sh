#!/usr/bin/env bash
# Every container image of the lab, each rebuilt only when its recipe changed: the
# Debian 11/12/13 node images (build.sh), then the ones derived from Debian 12's with
# the packages a molecule scenario's break installs (build_derived.sh). The one list
# scripts/setup.sh and tests/integration/test_05_images.py build from.
set -euo pipefail
here=$(dirname "$0")
bash "$here/build.sh"
bash "$here/build_derived.sh" containerd "containerd runc python3-tomlkit"
bash "$here/build_derived.sh" gvisor "runsc containerd bzip2" --without tomlkit
