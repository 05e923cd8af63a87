# shellcheck shell=sh
# Lab helper, run by lab/break/gvisor_v2_sandbox.yml as `sh -c "<this text>" sh ARGS`
# through ansible.builtin.command (argv, so nothing is interpolated into the script
# and runsc starts exactly as the command module would start it on its own):
#
#   RUNSC ROOT ID BUNDLE CGPATH [RUNSC_FLAG...]
#
# Starts one REAL gVisor sandbox the way containerd-shim-runsc-v1 starts a pod
# sandbox, `runsc --root ROOT --network=none FLAGS... run -detach -bundle BUNDLE ID`,
# with the spec's linux.cgroupsPath set to CGPATH and no resources of its own (the
# limit is the pod slice's); the rootfs is the node's own root, read-only, running
# /bin/sleep. One module run instead of seven tasks (each ~3 s on the emulated VM).
# Idempotent: a running sandbox of that id is left alone, a stopped one left from an
# earlier run is deleted first. Prints "changed: ..." when it did something.
set -eu
runsc=$1 root=$2 id=$3 bundle=$4 cgpath=$5
shift 5
changed=
mkdir -p "$bundle"
if [ ! -f "$bundle/config.json" ]; then
  (cd "$bundle" && "$runsc" spec -- /bin/sleep infinity)
  changed=1
fi
if python3 - "$bundle/config.json" "$cgpath" <<'PY'
import json
import os
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
if new == text:
    sys.exit(1)
with open(path + ".new", "w") as fh:
    fh.write(new)
os.chmod(path + ".new", 0o644)
os.rename(path + ".new", path)
PY
then
  changed=1
fi
status=$("$runsc" --root "$root" state "$id" 2>/dev/null \
         | python3 -c 'import json, sys; print(json.load(sys.stdin).get("status", ""))' 2>/dev/null || true)
if [ "$status" = running ]; then
  echo "${changed:+changed: spec; }sandbox $id is running"
  exit 0
fi
if [ -n "$status" ]; then
  "$runsc" --root "$root" delete -force "$id"
fi
"$runsc" --root "$root" --network=none "$@" run -detach -bundle "$bundle" "$id"
echo "changed: sandbox $id started"
