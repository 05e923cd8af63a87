#!/usr/bin/env bash
# The execution environment from this checkout, in one command (docs/awx.md):
#   bash scripts/ee.sh create [ansible-builder create args...]   # the build context only
#   bash scripts/ee.sh build -t nodefix-k8s-ee:1.0.0 [args...]    # the image (podman, the network)
# 1. builds the collection artifact from this checkout into .cache/ee/ (ansible-galaxy collection build),
# 2. writes .cache/ee/requirements.yml - the artifact and galaxy.yml's dependencies with their ranges -
#    which execution-environment.yml names as its Galaxy requirements: a plain `ansible-builder create`
#    without them fails ("Dependency file .../.cache/ee/requirements.yml does not exist") instead of
#    making a context with no collection in it,
# 3. runs ansible-builder with the rest of the arguments; `build` labels the image with the collection's
#    version and this checkout's revision (org.opencontainers.image.version/revision), so AWX can tell
#    which collection an EE carries.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/ee.sh create|build [ansible-builder args...]" >&2; exit 2; }
verb=$1
shift
case "$verb" in create|build) ;; *) echo "scripts/ee.sh: create or build, not '$verb'" >&2; exit 2 ;; esac
out=.cache/ee
mkdir -p "$out"
python=${NODEFIX_PYTHON:-python3}
[ -x .venv/bin/python ] && python=.venv/bin/python
ansible-galaxy collection build --force --output-path "$out" . >/dev/null
"$python" - "$out" <<'PY'
import os, sys, yaml
out = sys.argv[1]
galaxy = yaml.safe_load(open("galaxy.yml"))
tarball = "%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"])
if not os.path.isfile(os.path.join(out, tarball)):
    sys.exit("scripts/ee.sh: %s was not built" % os.path.join(out, tarball))
collections = [{"name": "collections/" + tarball, "type": "file"}]
collections += [{"name": name, "version": str(spec)} for name, spec in sorted(galaxy.get("dependencies", {}).items())]
with open(os.path.join(out, "requirements.yml.tmp"), "w") as fh:
    fh.write("---\n# Written by scripts/ee.sh from galaxy.yml: the artifact of this checkout and its dependencies.\n")
    yaml.safe_dump({"collections": collections}, fh, default_flow_style=False, sort_keys=False)
os.replace(os.path.join(out, "requirements.yml.tmp"), os.path.join(out, "requirements.yml"))
PY
extra=()
if [ "$verb" = build ]; then
  version=$("$python" -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
  revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  extra=(--build-arg "NODEFIX_VERSION=$version" --build-arg "NODEFIX_REVISION=$revision")
fi
exec ansible-builder "$verb" -f execution-environment.yml "${extra[@]}" "$@"
