#!/usr/bin/env bash
# Build the lab node images localhost/nodefix-debian{11,12,13} with debootstrap
# from the Debian archive and `podman import` (no registry needed).
# Each image carries the hash of its recipe in the label nodefix.recipe; an
# image whose label matches is reused, so re-runs cost a `podman image
# inspect` per image. Usage: build.sh [debian11|debian12|debian13 ...]
set -euo pipefail
. "$(dirname "$0")/../../scripts/env.sh"

MIRROR=${NODEFIX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
INCLUDE=systemd,systemd-sysv,python3,python3-apt,dbus,procps,ca-certificates,iproute2,psmisc
declare -A SUITE=([debian11]=bullseye [debian12]=bookworm [debian13]=trixie)
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(debian11 debian12 debian13)

recipe_hash() {
  { cat "$0"; cat "$NODEFIX_ROOT/lab/images/customize.sh"; echo "$1 $MIRROR $INCLUDE"; } | sha256sum | cut -c1-16
}

build_one() {
  local name=$1 suite=${SUITE[$1]} image="localhost/nodefix-$1"
  local want; want=$(recipe_hash "$name")
  local have; have=$(podman image inspect --format '{{index .Labels "nodefix.recipe"}}' "$image" 2>/dev/null || true)
  if [ "$have" = "$want" ]; then
    echo "image $image is up to date ($want)"
    return
  fi
  echo "building $image from $suite (recipe $want)"
  local work; work=$(mktemp -d "${TMPDIR:-/var/tmp}/nodefix-$name.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  local start=$SECONDS
  debootstrap --variant=minbase --include="$INCLUDE" "$suite" "$work/root" "$MIRROR" > "$work/debootstrap.log" 2>&1 || {
    tail -30 "$work/debootstrap.log"; echo "debootstrap of $suite failed" >&2; return 1; }
  bash "$NODEFIX_ROOT/lab/images/customize.sh" "$work/root" "$suite"
  tar -C "$work/root" -c . | podman import -q \
    --change 'CMD ["/sbin/init"]' \
    --change 'ENV container=podman' \
    --change 'STOPSIGNAL SIGRTMIN+3' \
    --change "LABEL nodefix.recipe=$want" \
    --change "LABEL nodefix.suite=$suite" \
    - "$image" > /dev/null
  echo "built $image in $((SECONDS - start))s"
}

for t in "${targets[@]}"; do
  [ -n "${SUITE[$t]:-}" ] || { echo "unknown image $t (debian11, debian12, debian13)" >&2; exit 2; }
  build_one "$t"
done
