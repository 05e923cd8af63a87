#!/usr/bin/env bash
# Run `ansible-test sanity` on the collection without docker.
# ansible-test must run from a path ending in ansible_collections/<ns>/<name>
# and resolves symlinks, so the files git knows about (tracked, plus new files
# that are not ignored) are copied to .cache/sanity/ansible_collections/nodefix/k8s
# (a throw-away copy for the test run, refreshed every time).
# Usage: scripts/sanity.sh [extra ansible-test sanity args, e.g. --test pylint]
# With the oldest ansible-core the collection supports (meta/runtime.yml;
# requirements/ansible-core-oldest.txt, its venv made by scripts/setup.sh):
#   NODEFIX_SANITY_CORE=oldest scripts/sanity.sh
# With the oldest core only the tests that check the collection against that
# core's own API run (the docs schema, the argument spec, the imports and the
# runtime metadata it accepts); the style tests (pylint, pep8, yamllint, ...)
# do not depend on the core the collection later runs on and run with the newest.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$NODEFIX_ROOT"
tests=()
case "${NODEFIX_SANITY_CORE:-newest}" in
  newest) venv="$NODEFIX_CACHE/sanity-venv"; copy="$NODEFIX_CACHE/sanity" ;;
  oldest) venv="$NODEFIX_CACHE/sanity-venv-oldest"; copy="$NODEFIX_CACHE/sanity-oldest"
          for t in action-plugin-docs ansible-doc import runtime-metadata validate-modules; do
            tests+=(--test "$t"); done ;;
  *) echo "NODEFIX_SANITY_CORE must be newest or oldest" >&2; exit 2 ;;
esac
echo "ansible-test sanity with $("$venv/bin/ansible" --version | sed -n 1p)"
dest="$copy/ansible_collections/nodefix/k8s"
rm -rf "$dest"
mkdir -p "$dest"
# files git still lists but that were deleted in the work tree are skipped
git ls-files -z --cached --others --exclude-standard | \
  rsync -a --from0 --ignore-missing-args --files-from=- ./ "$dest/"
cd "$dest"
# ansible-test lists files with git when it finds a repository at or above the
# collection: give the copy its own index so the outer repository (which
# ignores .cache/) is not the one it finds.
[ -d .git ] || git init -q .
git add -A .
# ansible-test's own requirement installs drop the proxy/CA settings of the
# environment and fail here; scripts/setup.sh pre-installs the pinned sanity
# requirements into .cache/sanity-venv and the tests run --local in it.
export PATH="$venv/bin:$PATH"
"$venv/bin/ansible-test" sanity --local --python 3.11 --color no "${tests[@]}" "$@" || {
  echo "sanity failed: see docs/DEVELOPING.md, section \"Sanity rules that bite\"" >&2; exit 1; }
