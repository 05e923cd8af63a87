# shellcheck shell=bash
# Environment shared by every nodefix.k8s script: source it, do not run it.
# Keeps the user's global Ansible and podman configuration untouched.
NODEFIX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NODEFIX_ROOT
export NODEFIX_VENV="${NODEFIX_VENV:-$NODEFIX_ROOT/.venv}"
export NODEFIX_CACHE="$NODEFIX_ROOT/.cache"
export NODEFIX_COLLECTIONS="$NODEFIX_CACHE/collections"
# The lab VM's image (lab/vm/build.sh; cached by recipe hash): machine-wide like
# podman's image store, so a fresh checkout on a machine that built it reuses it.
export NODEFIX_VM_IMAGE_DIR="${NODEFIX_VM_IMAGE_DIR:-/var/cache/nodefix-k8s/lab-vm/image}"
export CONTAINERS_CONF="$NODEFIX_ROOT/lab/containers.conf"
# The test run's cache of code compiled from the modules' zipped payloads, mounted
# into the lab's container nodes at /var/cache/nodefix-lab-zipcode (lab/zip_code_cache.py;
# lab/up.yml, molecule/shared/driver/create.yml); scripts/setup.sh makes it.
export NODEFIX_ZIPCODE_DIR="$NODEFIX_CACHE/zipcode"
export ANSIBLE_COLLECTIONS_PATH="$NODEFIX_COLLECTIONS:$NODEFIX_VENV/lib/python3.11/site-packages"
export ANSIBLE_CONFIG="$NODEFIX_ROOT/ansible.cfg"
# the lab's pipelined podman connection (lab/connection_plugins/nodefix_podman.py);
# an environment variable so that molecule, which writes its own ansible.cfg, finds it too
export ANSIBLE_CONNECTION_PLUGINS="$NODEFIX_ROOT/lab/connection_plugins"
export ANSIBLE_HOME="$NODEFIX_CACHE/ansible-home"
export ANSIBLE_LOCAL_TEMP="$NODEFIX_CACHE/ansible-tmp"
export MOLECULE_GLOB="molecule/*/molecule.yml"
export PATH="$NODEFIX_VENV/bin:$PATH"
# The lock that serialises podman-heavy jobs (molecule, lab) on a 2-core machine.
export NODEFIX_LAB_LOCK="${NODEFIX_LAB_LOCK:-/tmp/nodefix-lab.lock}"
# The lock of the podman jobs whose nodes touch nothing outside their own
# containers (no host cgroup, no host-wide reading the others could disturb):
# one at a time among themselves, beside a holder of the lab lock
# (MOLECULE_ISOLATED in tests/integration/conftest.py says which jobs these are).
export NODEFIX_POD_LOCK="${NODEFIX_POD_LOCK:-/tmp/nodefix-pods.lock}"
# The lock of the emulated QEMU VMs (the end-to-end lab's cgroup v2 node, the kernel VM):
# one at a time - each takes a core or two under TCG (tests/nodefix_lab_chain.py).
export NODEFIX_VM_LOCK="${NODEFIX_VM_LOCK:-/tmp/nodefix-vm.lock}"
