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
# The cache is used only when its stamp says it was made whole for these arguments, this script,
# the publish script and the suite's package lists as they are now; else it is made again in a
# directory of its own and moved into place (a killed build leaves no half-made cache), under a
# lock (two builds at once wait for each other).
set -euo pipefail
ROOT="${NODEFIX_ROOT:?source scripts/env.sh}"
CACHE="$ROOT/lab/cache/gvisor"
suite=$1 release=$2 bad=$3
# the package lists tests/unit/fixtures/containerd/fetch-debs.sh keeps (scripts/setup.sh fetches
# them: trixie is among its suites), so a bare machine's first run downloads no list either
APTDIR="$ROOT/lab/cache/containerd/apt"
OPTS=(-q -o "Dir::Etc::SourceList=$APTDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache")
mkdir -p "$ROOT/lab/cache"
exec 9>"$ROOT/lab/cache/gvisor.lock"
flock 9
# the suite's package index as it is now (a refreshed list may offer another runsc)
lists() { (cd "$APTDIR/lists" 2>/dev/null && stat -c '%n %Y %s' ./*"_dists_${suite}_"*_Packages*) 2>/dev/null || true; }
if [ -z "$(lists)" ]; then
  # no lists yet: fetch-debs.sh writes the sources list (and fetches its own packages)
  bash "$ROOT/tests/unit/fixtures/containerd/fetch-debs.sh" >/dev/null
  apt-get "${OPTS[@]}" update >/dev/null
fi
stamp="$suite $release $bad $( (lists; cat "$0" "$ROOT/lab/break/gvisor_mirror_publish.sh") | sha256sum | cut -c1-16)"
if [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$CACHE"
  exit 0
fi
new=$(mktemp -d "$ROOT/lab/cache/gvisor.new.XXXXXX")
trap 'rm -rf "$new"' EXIT
mkdir -p "$new/debs" "$new/work/extract"
(cd "$new/debs" && apt-get "${OPTS[@]}" download "runsc/$suite" >/dev/null)
dpkg-deb -x "$new"/debs/runsc_*.deb "$new/work/extract"
sh "$ROOT/lab/break/gvisor_mirror_publish.sh" "$new/mirror" "$new/work" "$release" "$bad" >/dev/null
echo "$stamp" > "$new/stamp"
chmod 0755 "$new"
rm -rf "$CACHE.old"
[ ! -e "$CACHE" ] || mv "$CACHE" "$CACHE.old"
mv "$new" "$CACHE"
trap - EXIT
rm -rf "$CACHE.old"
echo "$CACHE"
