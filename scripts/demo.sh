#!/usr/bin/env bash
# The README's main command: set everything up, then run the collection's main
# job on the built-in lab: broken Debian 11/12/13 nodes in local containers,
# nodefix.k8s.audit -> nodefix.k8s.remediate -> nodefix.k8s.audit, and the
# before/after table. Extra arguments go to ansible-playbook
# (e.g. -e nodefix_lab_keep=true to keep the containers afterwards).
# Ends with the time of the set-up and of the whole run.
set -euo pipefail
start=$SECONDS
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "set-up: $((SECONDS - start))s"
. scripts/env.sh
export NODEFIX_REPORT_DIR="${NODEFIX_REPORT_DIR:-$NODEFIX_ROOT/reports}"
rc=0
# the lab lock (podman jobs), then the VM lock (one emulated VM at a time: test_47 takes only that one) - in
# test_40's order, so the two never wait on each other
flock "$NODEFIX_LAB_LOCK" flock "$NODEFIX_VM_LOCK" ansible-playbook -i lab/inventory/lab.yml lab/site.yml "$@" || rc=$?
if [ "$rc" != 0 ]; then
  # never leave sandboxes, cgroups or containers behind on the way out
  echo "the lab run failed (rc=$rc); cleaning up"
  flock "$NODEFIX_LAB_LOCK" ansible-playbook -i lab/inventory/lab.yml lab/down.yml "$@" || true
  echo "total time: $((SECONDS - start))s"
  exit "$rc"
fi
echo
echo "Reports: $NODEFIX_REPORT_DIR/lab/before/audit/report.html, $NODEFIX_REPORT_DIR/lab/remediate/report.html,"
echo "         $NODEFIX_REPORT_DIR/lab/after/audit/report.html (also .md, .json, junit.xml)"
echo "total time: $((SECONDS - start))s"
