#!/bin/sh
# Lab helper for lab/break/gvisor_v2_sandbox.yml: start one REAL gVisor sandbox the
# way containerd-shim-runsc-v1 starts a pod sandbox, in ONE run on the node (seven
# tasks cost ~35 s a sandbox on the emulated VM node):
#   runsc --root ROOT --network=none FLAGS... run -detach -bundle BUNDLE ID
# with the spec's linux.cgroupsPath set to CGPATH and no resources of its own (the
# limit is the pod slice's). The rootfs is the node's own root, read-only, running
# /bin/sleep. Idempotent: a running sandbox of that id is left alone; a stopped one
# left from an earlier run is deleted first. Prints "changed: ..." when it did
# something, "unchanged: ..." otherwise.
#
#   gvisor_v2_sandbox.sh RUNSC ROOT ID BUNDLE CGPATH [RUNSC_FLAG...]
set -eu
runsc=$1 root=$2 id=$3 bundle=$4 cgpath=$5
shift 5
mkdir -p "$bundle"
# runsc's own default spec, made once
[ -f "$bundle/config.json" ] || (cd "$bundle" && "$runsc" spec -- /bin/sleep infinity)
python3 - "$bundle/config.json" "$cgpath" <<'PY'
import json
import sys

path, cgpath = sys.argv[1], sys.argv[2].strip()
with open(path) as fh:
    text = fh.read()
spec = json.loads(text)
spec["root"] = {"path": "/", "readonly": True}
spec["process"]["terminal"] = False
spec["linux"]["cgroupsPath"] = cgpath
spec["linux"]["resources"] = {}
new = json.dumps(spec, indent=4, sort_keys=True) + "\n"
if new != text:
    with open(path + ".new", "w") as fh:
        fh.write(new)
    import os
    os.rename(path + ".new", path)
PY
status=$("$runsc" --root "$root" state "$id" 2>/dev/null \
         | python3 -c 'import json, sys; print(json.load(sys.stdin).get("status", ""))' 2>/dev/null || true)
if [ "$status" = running ]; then
  echo "unchanged: sandbox $id is running"
  exit 0
fi
if [ -n "$status" ]; then
  "$runsc" --root "$root" delete -force "$id"
fi
"$runsc" --root "$root" --network=none "$@" run -detach -bundle "$bundle" "$id"
echo "changed: sandbox $id started"
