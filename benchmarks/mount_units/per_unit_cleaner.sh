#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# A per-unit cleaner of leaked kubelet mount scopes of the kind operators run
# for this leak ("systemd-slices-cleaner" scripts), reproduced for the
# benchmark. Per unit it spawns, like the original:
#   systemctl status <unit>  -> where the unit's description lives
#   cat <that file>          -> the pod UID (5th word of the description, 6th path field)
#   <runtime> ps | grep -c   -> is the pod still there
#   systemctl stop <unit>    (one per dead unit)
# Two faithful adaptations, nothing else changed:
# - systemd >= 236 writes a transient unit as one file
#   (Loaded: loaded (/run/systemd/transient/<unit>; transient)) instead of the
#   Drop-In directory with 50-Description.conf that older systemd wrote;
#   the Drop-In form is still read when present;
# - `docker ps` is replaced by `crictl pods -o json` (no docker on the lab
#   node; crictl's table has no pod UID, its JSON has), one call per unit as
#   the original did. Its random sleep (to spread load) is left out.
# Optional $1: stop after this many units (to sample the per-unit cost).
limit=${1:-0}
stoppedCount=0
seen=0
# counting actual subpath units in systemd
countBefore=$(systemctl list-units | grep subpath | grep -c "run-")
for unit in $(systemctl list-units | grep subpath | grep "run-" | awk '{print $1}'); do
  if [ "$limit" -gt 0 ] && [ "$seen" -ge "$limit" ]; then break; fi
  seen=$((seen + 1))
  status=$(systemctl status "${unit}")
  DropFile=$(echo "$status" | grep Drop | awk -F': ' '{print $2}')
  if [ -n "$DropFile" ]; then
    PodUid=$(awk '{print $5}' "${DropFile}/50-Description.conf" | cut -d/ -f6)
  else
    UnitFile=$(echo "$status" | grep 'Loaded:' | sed 's/.*(\([^;]*\);.*/\1/')
    PodUid=$(grep '^Description=' "${UnitFile}" | awk '{print $5}' | cut -d/ -f6)
  fi
  # checking pod status (originally: docker ps | grep -c)
  checkFlag=$(crictl pods -o json | grep -c "${PodUid}")
  if [[ ${checkFlag} -eq 0 ]]; then
    systemctl stop "$unit"
    ((stoppedCount++))
  fi
done
echo "Stopped ${stoppedCount} systemd units out of ${countBefore} (looked at ${seen})"
