#!/usr/bin/env bash
# Build localhost/nodefix-debian12-containerd from the lab's Debian 12 image
# (lab/images/build.sh, which must have run): the image with what
# lab/break/containerd.yml installs - Debian's real containerd 1.6.20, runc and
# python3-tomlkit, from the Debian archive as there - for the molecule scenarios
# containerd and containerd_rollback. Their six nodes installed the same three
# packages in every test run (~6.5 CPU-s a node: the download, the unpack, the
# daemon's first start); this is once per machine (~12 CPU-s, ~20 s). The
# break's apt task still runs on those nodes and finds the packages there.
# gvisor's nodes keep the plain image: its role's path without tomlkit is
# tested there.
# The image carries the hash of this script, the package list and the base
# image's own recipe label in its label nodefix.recipe: a new base, a new image;
# otherwise a re-run costs two `podman image inspect`. A separate script, not a
# step of build.sh: that one's text is part of the base images' recipe.
set -euo pipefail
. "$(dirname "$0")/../../scripts/env.sh"

IMAGE=localhost/nodefix-debian12-containerd
BASE=localhost/nodefix-debian12
PACKAGES="containerd runc python3-tomlkit"
BOX=nodefix-image-build-containerd

base_recipe=$(podman image inspect --format '{{index .Labels "nodefix.recipe"}}' "$BASE")
want=$( { cat "$0"; echo "$base_recipe $PACKAGES"; } | sha256sum | cut -c1-16)
have=$(podman image inspect --format '{{index .Labels "nodefix.recipe"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "image $IMAGE is up to date ($want)"
  exit 0
fi
echo "building $IMAGE from $BASE (recipe $want)"
start=$SECONDS
trap 'podman rm --force --ignore --time 0 "$BOX" >/dev/null 2>&1 || true' EXIT
# No systemd in this container: the maintainer scripts enable containerd.service (it
# starts at each node's boot) and start nothing. apt's binary cache is built again (as
# customize.sh does for the base: a node's first apt call would otherwise build it);
# no .deb is kept.
podman run --name "$BOX" --replace "$BASE" sh -c \
  "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null \
   && rm -f /var/cache/apt/archives/*.deb && apt-cache gencaches >/dev/null"
podman commit -q --change 'CMD ["/sbin/init"]' --change "LABEL nodefix.recipe=$want" \
  --change "LABEL nodefix.base=$base_recipe" "$BOX" "$IMAGE" >/dev/null
echo "built $IMAGE in $((SECONDS - start))s"
