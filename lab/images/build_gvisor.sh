#!/usr/bin/env bash
# Build localhost/nodefix-debian12-gvisor from the lab's Debian 12 image
# (lab/images/build.sh, which must have run): the image with what the molecule
# scenario gvisor's break installs from the Debian archive - Debian 12's real
# runsc 0.0~20221219.0 and containerd 1.6.20 (lab/break/gvisor.yml) and bzip2
# (lab/break/gvisor_mirror.yml). Its two nodes installed the same packages in
# every test run; this is once per machine. The break's apt tasks still run on
# those nodes and find the packages there.
# NOT python3-tomlkit (unlike nodefix-debian12-containerd): the role gvisor
# installs it itself, and that path (and check mode without it) is under test.
# Same recipe rule as build_containerd.sh: the image's label nodefix.recipe is the
# hash of this script, the package list and the base image's recipe.
set -euo pipefail
. "$(dirname "$0")/../../scripts/env.sh"

IMAGE=localhost/nodefix-debian12-gvisor
BASE=localhost/nodefix-debian12
PACKAGES="runsc containerd bzip2"
BOX=nodefix-image-build-gvisor

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
# No systemd in this container: containerd.service is enabled (it starts at each
# node's boot), nothing is started here; apt's binary cache is built again, no .deb kept.
# The image must not hold tomlkit: the check fails the build rather than hide the
# role's install path.
podman run --name "$BOX" --replace "$BASE" sh -c \
  "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null \
   && ! python3 -c 'import tomlkit' 2>/dev/null \
   && rm -f /var/cache/apt/archives/*.deb && apt-cache gencaches >/dev/null"
podman commit -q --change 'CMD ["/sbin/init"]' --change "LABEL nodefix.recipe=$want" \
  --change "LABEL nodefix.base=$base_recipe" "$BOX" "$IMAGE" >/dev/null
echo "built $IMAGE in $((SECONDS - start))s"
