#!/usr/bin/env bash
# Install everything nodefix.k8s needs on a Debian 12 machine (run as root):
# Debian packages, the pinned Python toolchain in .venv, the project-local
# collection path, the offline pip bootstrap for ansible-test, and the lab
# images. Idempotent: each step is skipped when already done.
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$NODEFIX_ROOT"

log() { printf '\n==> %s\n' "$*"; }
# pip on some machines warns about every missing local index directory
quiet_pip() { grep -v -e "^WARNING: Location '.*' is ignored" -e "^\[notice\]" || true; }
# step NAME command...: run it and add "setup/NAME<TAB>seconds" to the step
# table that scripts/test.sh prints at the end of the run (tests/nodefix_layer_times.py).
mkdir -p "$NODEFIX_CACHE"
STEP_TIMES=${NODEFIX_SETUP_TIMES:-$NODEFIX_CACHE/setup-times.tsv}
: > "$STEP_TIMES"
# (A failing command ends the script under set -e, as before: no line for it.)
step() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  printf 'setup/%s\t%s\n' "$name" "$((SECONDS - t0))" >> "$STEP_TIMES"
}

# 1. Debian packages -------------------------------------------------------
APT_PACKAGES=(podman runc mmdebstrap python3 python3-venv python3-pip rsync git ca-certificates util-linux chromium openssl
              shellcheck
              qemu-system-x86 qemu-utils e2fsprogs openssh-client systemd ovmf mtools dosfstools fdisk
              dnf rpm createrepo-c grub-common)
apt_packages() {
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}
step apt apt_packages

# 1b. Lab images (cached; rebuilt only when their recipe changes): the three
#     container nodes (and Debian 12's with containerd for the containerd
#     scenarios) and the cgroup v2 VM node (its disk, kernel and initramfs).
#     They need only the Debian packages above, so they build in the background
#     from here, beside the Python venvs and the downloads below (measured on a
#     bare machine: the VM image alone takes ~100 s); step 6 waits for them.
# (background jobs: their PIDs in bg_pids, killed when the set-up fails; wait_bg
# waits for some and fails when one failed)
bg_pids=()
trap 'kill "${bg_pids[@]}" 2>/dev/null || true' EXIT
wait_bg() {
  local pid
  for pid in "$@"; do
    wait "$pid"
  done
}
images_pids=()
if [ "${NODEFIX_SKIP_IMAGES:-0}" != 1 ]; then
  # then the containerd and gvisor scenarios' images, made from Debian 12's
  # (lab/images/build_all.sh: build.sh, then build_derived.sh for each)
  step images bash lab/images/build_all.sh &
  images_pids+=($!)
  step vm-image bash lab/vm/build.sh &
  images_pids+=($!)
fi
bg_pids+=("${images_pids[@]}")

# 2. Python toolchain (rebuilt when requirements/dev.txt or the interpreter changes) ---------
# Every venv is made from Debian's python3 (step 1 installs it; built with profile-guided and link-time
# optimisation), not the first python3 on PATH: a pyenv or source build without them spent ~19 % more CPU on
# the same ansible-playbook run (docs/test-times.md), and the controller's Python is most of the test
# command's CPU. NODEFIX_PYTHON names another interpreter.
PY=${NODEFIX_PYTHON:-/usr/bin/python3}
command -v "$PY" >/dev/null || { echo "no Python interpreter at $PY (NODEFIX_PYTHON)" >&2; exit 1; }
# what each venv's stamp carries besides its requirements: a venv made from another interpreter is made again
PY_ID="$(readlink -f "$(command -v "$PY")") $("$PY" -c 'import sys; print(sys.version.split()[0])')"
python_venv() {
  req_hash="$(sha256sum requirements/dev.txt | cut -c1-16) $PY_ID"
  if [ ! -x "$NODEFIX_VENV/bin/python" ] || [ "$(cat "$NODEFIX_VENV/.nodefix-req" 2>/dev/null)" != "$req_hash" ]; then
    log "python venv ($NODEFIX_VENV, $PY_ID)"
    rm -rf "$NODEFIX_VENV"
    "$PY" -m venv "$NODEFIX_VENV"
    "$NODEFIX_VENV/bin/pip" install -q --upgrade pip 2>&1 | quiet_pip
    # the `ansible` package is ~100 collections the controller never imports (their modules reach the nodes as
    # source): installed first without byte-compiling its ~15,000 files (27 of its install's 38 CPU-s here); the
    # requirements' install below finds it in place and compiles the rest as pip does
    "$NODEFIX_VENV/bin/pip" install -q --no-compile --no-deps "$(grep -E '^ansible==' requirements/dev.txt)" 2>&1 | quiet_pip
    "$NODEFIX_VENV/bin/pip" install -q -r requirements/dev.txt 2>&1 | quiet_pip
    echo "$req_hash" > "$NODEFIX_VENV/.nodefix-req"
  fi
}
step venv python_venv

# 2b. ansible-core at the floor of the range the collection declares (meta/runtime.yml;
#     requirements/ansible-core-oldest.txt) for the layers that run on it (tests/integration/conftest.py,
#     core_env): that core and molecule alone, over the venv above (a .pth after its own site-packages, so
#     its ansible-core, not the venv's, is the one imported; the collections, drivers and libraries are the
#     venv's; but resolvelib, which 2.17's ansible-galaxy needs below 1.1). PATH=.cache/core-floor-venv/bin:...
#     runs ansible-playbook, ansible-galaxy and molecule on it.
core_floor_venv() {
  local venv="$NODEFIX_CACHE/core-floor-venv" pins stamp site
  pins="$(grep -E '^ansible-core==' requirements/ansible-core-oldest.txt) $(grep -E '^molecule==' requirements/dev.txt)"
  pins="$pins resolvelib<1.1.0"
  stamp="$pins $(cat "$NODEFIX_VENV/.nodefix-req")"
  if [ "$(cat "$venv/.nodefix-req" 2>/dev/null)" != "$stamp" ]; then
    log "ansible-core floor venv ($pins)"
    rm -rf "$venv"
    "$PY" -m venv --without-pip "$venv"
    # shellcheck disable=SC2086  # the pins, split on purpose
    "$NODEFIX_VENV/bin/python" -m pip --python "$venv/bin/python" install -q --no-deps $pins 2>&1 | quiet_pip
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$NODEFIX_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/zz_nodefix_venv.pth"
    # the venv's site hook of the compiled-code cache (step 3), after the line above has put its module on the path
    echo "import nodefix_lab_zipcode" > "$site/zzz_nodefix_lab_zipcode.pth"
    echo "$stamp" > "$venv/.nodefix-req"
  fi
}
step core-floor-venv core_floor_venv

# 3. The collection, importable as nodefix.k8s (a link, not a copy) -------
mkdir -p "$NODEFIX_COLLECTIONS/ansible_collections/nodefix" "$ANSIBLE_HOME" "$ANSIBLE_LOCAL_TEMP" "$NODEFIX_ZIPCODE_DIR"
# The lab nodes' cache of code compiled from zipped module payloads (lab/zip_code_cache.py) as a
# site hook of this venv too: inert unless NODEFIX_LAB_ZIPCODE_DIR names an existing directory,
# which only scripts/test.sh sets, for the modules the test run executes on the controller
# (connection local: the API double runs, AWX's modules); the demo and a user's runs compile as usual.
venv_site=$("$NODEFIX_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
install -m 644 lab/zip_code_cache.py "$venv_site/nodefix_lab_zipcode.py"
echo "import nodefix_lab_zipcode" > "$venv_site/nodefix_lab_zipcode.pth"
ln -sfn "$NODEFIX_ROOT" "$NODEFIX_COLLECTIONS/ansible_collections/nodefix/k8s"

# 4. ansible-test sanity: a venv with ansible-core and the pinned sanity
#    requirements (ansible-test's own installs lose the CA settings), and an
#    offline stand-in for the get-pip.py it would download for the import test.
sanity_venv() {
  sanity_req=("$NODEFIX_VENV"/lib/python3.11/site-packages/ansible_test/_data/requirements/sanity.*.txt)
  sanity_hash="$(cat requirements/dev.txt "${sanity_req[@]}" | sha256sum | cut -c1-16) $PY_ID"
  if [ "$(cat "$NODEFIX_CACHE/sanity-venv/.nodefix-req" 2>/dev/null)" != "$sanity_hash" ]; then
    log "ansible-test sanity venv"
    rm -rf "$NODEFIX_CACHE/sanity-venv"
    "$NODEFIX_VENV/bin/python" -m venv "$NODEFIX_CACHE/sanity-venv"
    core=$(grep -E '^ansible-core==' requirements/dev.txt)
    local reqs=() r
    for r in "${sanity_req[@]}"; do reqs+=(-r "$r"); done
    "$NODEFIX_CACHE/sanity-venv/bin/pip" install -q "$core" "${reqs[@]}" 2>&1 | quiet_pip
    echo "$sanity_hash" > "$NODEFIX_CACHE/sanity-venv/.nodefix-req"
  fi
  "$NODEFIX_VENV/bin/python" scripts/offline_get_pip.py
}

#    and the same for the oldest ansible-core the collection supports
#    (meta/runtime.yml; requirements/ansible-core-oldest.txt)
sanity_venv_oldest() {
  local venv="$NODEFIX_CACHE/sanity-venv-oldest" core
  core=$(grep -E '^ansible-core==' requirements/ansible-core-oldest.txt)
  if [ "$(cat "$venv/.nodefix-req" 2>/dev/null)" != "$core subset $PY_ID" ]; then
    log "ansible-test sanity venv ($core)"
    rm -rf "$venv"
    "$NODEFIX_VENV/bin/python" -m venv "$venv"
    "$venv/bin/pip" install -q "$core" 2>&1 | quiet_pip
    # the requirements of the tests scripts/sanity.sh runs with the oldest core
    local req="$venv/lib/python3.11/site-packages/ansible_test/_data/requirements"
    local reqs=() t
    for t in ansible-doc import import.plugin runtime-metadata validate-modules; do reqs+=(-r "$req/sanity.$t.txt"); done
    "$venv/bin/pip" install -q "$core" "${reqs[@]}" 2>&1 | quiet_pip
    echo "$core subset $PY_ID" > "$venv/.nodefix-req"
  fi
  "$venv/bin/python" scripts/offline_get_pip.py   # the pip version that ansible-test pins
}

# 4b. What Galaxy and the Ansible docsite run (galaxy-importer, antsibull-docs,
#     antsibull-changelog, Sphinx): requirements/publish.txt, a venv of their own.
publish_venv() {
  local venv="$NODEFIX_CACHE/publish-venv" req_hash
  req_hash="$(sha256sum requirements/publish.txt | cut -c1-16) $PY_ID"
  if [ "$(cat "$venv/.nodefix-req" 2>/dev/null)" != "$req_hash" ]; then
    log "publish venv ($venv)"
    rm -rf "$venv"
    "$NODEFIX_VENV/bin/python" -m venv "$venv"
    "$venv/bin/pip" install -q -r requirements/publish.txt 2>&1 | quiet_pip
    echo "$req_hash" > "$venv/.nodefix-req"
  fi
}

# 5. Real containerd/runc packages of Debian 11/12/13/sid, unpacked under
#    lab/cache/containerd (cached): unit tests run the real binaries and the
#    containerd scenario builds its release-archive mirror from them;
#    and the real consumers of the Prometheus files: Debian 12's node_exporter and
#    promtool (tests/unit/plugins/modules/test_prometheus_consumers.py). One after
#    the other (they share the apt lists).
fetch_debs() {
  log "real containerd and runc packages (lab/cache/containerd)"
  step containerd-debs bash tests/unit/fixtures/containerd/fetch-debs.sh >/dev/null
  log "node_exporter and promtool (lab/cache/prometheus)"
  step prometheus-debs env NODEFIX_DEBS_DIR="$NODEFIX_ROOT/lab/cache/prometheus" \
    bash tests/unit/fixtures/containerd/fetch-debs.sh "prometheus-node-exporter=1.5.0-1+b6 prometheus=2.42.0+ds-5+deb12u1" >/dev/null
}

# 5b. The kubernetes Python client at both ends of requirements.txt's range (the oldest release it admits
#     and the newest it admits today), each with its dependencies under .cache/k8s-clients/<version>
#     (cached): tests/unit/test_k8s_client_releases.py runs the API-calling modules with each.
k8s_clients() {
  log "kubernetes clients at both ends of requirements.txt's range (.cache/k8s-clients)"
  "$NODEFIX_VENV/bin/python" scripts/k8s_clients.py 2>&1 | quiet_pip
  test -s "$NODEFIX_CACHE/k8s-clients/tested.json"
}

# 4 and 5 side by side (separate venvs and directories; mostly downloads and
# unpacking): on a bare machine ~85 s one after the other
side_pids=()
step sanity-venv sanity_venv &
side_pids+=($!)
step sanity-venv-oldest sanity_venv_oldest &
side_pids+=($!)
step publish-venv publish_venv &
side_pids+=($!)
fetch_debs &
side_pids+=($!)
step k8s-clients k8s_clients &
side_pids+=($!)
bg_pids+=("${side_pids[@]}")
wait_bg "${side_pids[@]}"

# 6. Wait for the lab images started in 1b (a failed build fails the set-up)
wait_bg "${images_pids[@]}"
trap - EXIT
