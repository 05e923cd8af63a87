#!/usr/bin/env bash
# Build one image derived from the lab's Debian 12 image (lab/images/build.sh, which
# must have run): the base with Debian packages a molecule scenario's break installs
# from the Debian archive, so that its nodes find them there instead of installing
# the same packages in every test run (~6.5 CPU-s a node: the download, the unpack,
# the daemon's first start); this is once per machine. The breaks' apt tasks still
# run on those nodes and find the packages there.
#
#   build_derived.sh NAME "PACKAGES" [--without PYTHON_MODULE]
#
#   containerd  "containerd runc python3-tomlkit"  Debian's real containerd 1.6.20, runc and
#               tomlkit (lab/break/containerd.yml): the scenarios containerd, containerd_rollback
#   gvisor      "runsc containerd bzip2" --without tomlkit   Debian 12's real runsc 0.0~20221219.0,
#               containerd (lab/break/gvisor.yml), bzip2 (lab/break/gvisor_mirror.yml): the scenario
#               gvisor, whose role installs tomlkit itself - that path (and check mode without it)
#               is under test, so the build fails rather than hide it if a package pulls it in
#
# The image is localhost/nodefix-debian12-NAME. Its label nodefix.recipe is the hash of
# this script, NAME, the packages, the module left out and the base image's own recipe
# label: a new base, a new image; otherwise a re-run costs two `podman image inspect`.
# A separate script, not a step of build.sh: that one's text is part of the base images' recipe.
set -euo pipefail
. "$(dirname "$0")/../../scripts/env.sh"

usage() { echo "usage: $0 NAME \"PACKAGES\" [--without PYTHON_MODULE]" >&2; exit 2; }
[ $# -eq 2 ] || [ $# -eq 4 ] || usage
NAME=$1 PACKAGES=$2 WITHOUT=
if [ $# -eq 4 ]; then
  [ "$3" = --without ] || usage
  WITHOUT=$4
fi
case "$NAME" in ''|*[!a-z0-9-]*) echo "$0: NAME must be lowercase letters, digits and '-': '$NAME'" >&2; exit 2 ;; esac
case "$PACKAGES" in ''|*[!a-z0-9.+\ -]*) echo "$0: PACKAGES must be Debian package names: '$PACKAGES'" >&2; exit 2 ;; esac
case "$WITHOUT" in *[!A-Za-z0-9_]*) echo "$0: PYTHON_MODULE must be a module name: '$WITHOUT'" >&2; exit 2 ;; esac

IMAGE=localhost/nodefix-debian12-$NAME
BASE=localhost/nodefix-debian12
BOX=nodefix-image-build-$NAME

base_recipe=$(podman image inspect --format '{{index .Labels "nodefix.recipe"}}' "$BASE")
want=$( { cat "$0"; echo "$base_recipe $NAME $PACKAGES without=$WITHOUT"; } | sha256sum | cut -c1-16)
have=$(podman image inspect --format '{{index .Labels "nodefix.recipe"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "image $IMAGE is up to date ($want)"
  exit 0
fi
echo "building $IMAGE from $BASE (recipe $want)"
start=$SECONDS
trap 'podman rm --force --ignore --time 0 "$BOX" >/dev/null 2>&1 || true' EXIT
# No systemd in this container: the maintainer scripts enable their services (they
# start at each node's boot) and start nothing. apt's binary cache is built again (as
# customize.sh does for the base: a node's first apt call would otherwise build it);
# no .deb is kept.
check=true
[ -z "$WITHOUT" ] || check="! python3 -c 'import $WITHOUT' 2>/dev/null"
podman run --name "$BOX" --replace "$BASE" sh -c \
  "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null \
   && rm -f /var/cache/apt/archives/*.deb && apt-cache gencaches >/dev/null && $check"
podman commit -q --change 'CMD ["/sbin/init"]' --change "LABEL nodefix.recipe=$want" \
  --change "LABEL nodefix.base=$base_recipe" "$BOX" "$IMAGE" >/dev/null
echo "built $IMAGE in $((SECONDS - start))s"
