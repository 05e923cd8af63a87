#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Test fixture (controller side): the gVisor release mirror of lab/break/gvisor_mirror.yml,
# built ONCE per machine under $NODEFIX_ROOT/lab/cache/gvisor/ instead of on every node
# of every run (each node fetched another suite's package lists, ~13 s, and bzip2'd the
# tarball, ~8 s):
#   debs/runsc_<ver>_<arch>.deb      Debian's real runsc of SUITE (apt-get download with
#                                    fetch-debs.sh's apt configuration: the machine's is untouched)
#   work/extract/usr/bin/runsc       the package unpacked (dpkg-deb -x), as on the node
#   work/stage, mirror/release/...   lab/break/gvisor_mirror_publish.sh run here, natively
# The scenario's prepare copies work/ and mirror/ into each node (podman cp keeps the
# files' times), where gvisor_mirror.yml then finds the binary extracted and its publish
# run finds every file in place and rewrites none - as lab/vm/build.sh does for the VM.
# Usage: build-mirror.sh SUITE RELEASE BAD_RELEASE. Idempotent; prints the cache directory.
set -euo pipefail
ROOT="${NODEFIX_ROOT:?source scripts/env.sh}"
CACHE="$ROOT/lab/cache/gvisor"
suite=$1 release=$2 bad=$3
# the package lists tests/unit/fixtures/containerd/fetch-debs.sh keeps (scripts/setup.sh fetches
# them: trixie is among its suites), so a bare machine's first run downloads no list either
APTDIR="$ROOT/lab/cache/containerd/apt"
APT=(apt-get -q -o "Dir::Etc::SourceList=$APTDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache")
mkdir -p "$CACHE/debs"
if ! ls "$CACHE"/debs/runsc_*.deb >/dev/null 2>&1; then
  if ! (cd "$CACHE/debs" && "${APT[@]}" download "runsc/$suite" >/dev/null 2>&1); then
    # no lists yet: fetch-debs.sh writes the sources list (and fetches its own packages)
    bash "$ROOT/tests/unit/fixtures/containerd/fetch-debs.sh" >/dev/null
    "${APT[@]}" update >/dev/null
    (cd "$CACHE/debs" && "${APT[@]}" download "runsc/$suite" >/dev/null)
  fi
fi
deb=$(find "$CACHE/debs" -name 'runsc_*.deb' | sort | tail -n1)
# a new .deb (or none unpacked yet): unpack again, into a fresh tree
if [ ! -x "$CACHE/work/extract/usr/bin/runsc" ] || [ "$deb" -nt "$CACHE/work/extract/usr/bin/runsc" ]; then
  rm -rf "$CACHE/work/extract"
  mkdir -p "$CACHE/work/extract"
  dpkg-deb -x "$deb" "$CACHE/work/extract"
  touch "$CACHE/work/extract/usr/bin/runsc"
fi
sh "$ROOT/lab/break/gvisor_mirror_publish.sh" "$CACHE/mirror" "$CACHE/work" "$release" "$bad" >/dev/null
echo "$CACHE"
