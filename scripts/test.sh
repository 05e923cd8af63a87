#!/usr/bin/env bash
# Set up everything (Debian packages, venv, lab images) and run every test
# layer of nodefix.k8s in one pytest session:
#   tests/unit         module and module_utils unit tests (fake /proc, cgroup trees)
#   tests/integration  collection build + ansible-doc, ansible-test sanity (newest
#                      and oldest ansible-core), what Galaxy and the docsite run,
#                      ansible-lint, every molecule scenario, the end-to-end lab
# Ends with where the time went (per layer; per step: set-up, each molecule
# scenario and step, each lab phase, each VM boot), pytest's summary line, the
# CPU-s the machine spent and its cores' speed (scripts/host_meter.py), and the
# total time.
# Two pytest-xdist workers (NODEFIX_TEST_WORKERS, 0 = none): the end-to-end lab,
# whose emulated VM is the long pole, runs on one from the start while the
# other runs the layers that start no podman job (a test module is one unit of
# work); every podman job still takes the lab lock, one at a time
# (tests/integration/conftest.py).
# Extra arguments go to pytest (e.g. `-k unit`, `-m "not lab"`).
set -uo pipefail
start=$SECONDS
# a test that hangs fails by name at its limit, and none runs past this deadline (85 min: CI stops at 90),
# so the run still ends with its tables and pytest's summary line (tests/nodefix_watchdog.py)
export NODEFIX_RUN_DEADLINE="${NODEFIX_RUN_DEADLINE:-$(( $(date +%s) + ${NODEFIX_RUN_BUDGET:-5100} ))}"
cd "$(dirname "$0")/.." || exit 1
# what the machine gives this run (its cores' speed; at the end, the CPU-s spent): runs on other hosts compare by it
meter=$(mktemp)
python3 scripts/host_meter.py start "$meter"
. scripts/env.sh
export NODEFIX_SETUP_TIMES="$NODEFIX_CACHE/setup-times.tsv"
# Python writes the bytecode of what it imports from source (__pycache__, git-ignored; ansible-galaxy's build and
# the sanity copy leave it out), as on a controller where nothing turns it off: an environment that sets
# PYTHONDONTWRITEBYTECODE would otherwise make every process - each Ansible worker fork that loads the
# rollout's action plugin, each API double started - compile the same source again (docs/test-times.md).
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh || { echo "setup failed"; rm -f "$meter"; exit 1; }
echo "set-up: $((SECONDS - start))s"
# Modules run on the controller (connection local) take their compiled code from the run's cache
# as the lab's nodes do (lab/zip_code_cache.py; installed in the venv by scripts/setup.sh): the
# same code objects, not compiled again at each of the thousands of module runs.
export NODEFIX_LAB_ZIPCODE_DIR="$NODEFIX_ZIPCODE_DIR"
rm -f "$NODEFIX_CACHE/test-logs/steps.jsonl"   # a new step table (tests/nodefix_layer_times.py)
workers=${NODEFIX_TEST_WORKERS:-2}
xdist=()
[ "$workers" = 0 ] || xdist=(-n "$workers" --dist loadfile --no-loadscope-reorder)
python -m pytest "${xdist[@]}" -p no:cacheprovider -o console_output_style=classic -rfEs "$@"
rc=$?
python3 scripts/host_meter.py end "$meter"
rm -f "$meter"
echo "total time: $((SECONDS - start))s"
exit $rc
