#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Test fixture (controller side): from Debian's real containerd packages build
#  - an upstream-layout release mirror:
#      mirror/v<ver>/containerd-<ver>-linux-amd64.tar.gz          (bin/containerd, bin/ctr, shims)
#      mirror/v<ver>/containerd-<ver>-linux-amd64.tar.gz.sha256sum ("<sha256>  <name>")
#  - a flat apt repository apt-repo/ (Packages) holding the .deb files
# under $NODEFIX_ROOT/lab/cache/containerd/. Usage: build-mirror.sh <ver> [<ver> ...]
set -euo pipefail
ROOT="${NODEFIX_ROOT:?source scripts/env.sh}"
CACHE="$ROOT/lab/cache/containerd"
"$ROOT/tests/unit/fixtures/containerd/fetch-debs.sh" >/dev/null
mkdir -p "$CACHE/mirror" "$CACHE/apt-repo"
for ver in "$@"; do
  pkgdir=$(find "$CACHE" -maxdepth 1 -type d -name "containerd_${ver}[~+]ds1-*_amd64" | sort | head -n1)
  out="$CACHE/mirror/v$ver"
  name="containerd-$ver-linux-amd64.tar.gz"
  mkdir -p "$out"
  if [ ! -s "$out/$name" ]; then
    # gzip -1: the same .tar.gz format, ~2.7 CPU-s an archive against ~6.5 at gzip's default level
    # (the release archives are built on every bare test run); written whole or not at all
    tar -C "$pkgdir/usr" --owner=0 --group=0 -cf - bin | gzip -1 > "$out/$name.tmp"
    mv "$out/$name.tmp" "$out/$name"
  fi
  (cd "$out" && sha256sum "$name" > "$name.sha256sum")
  cp -u "$CACHE"/debs/containerd_"$ver"[~+]ds1-*_amd64.deb "$CACHE/apt-repo/"
done
(cd "$CACHE/apt-repo" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null)
find "$CACHE/mirror" -type f | sort
