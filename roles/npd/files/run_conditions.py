# Run by roles/npd/tasks/verify.yml as `<npd_python> -c "<this text>" PLUGIN CONFIG LIMIT CONDITION...`
# (one command module run on the node instead of one per condition).
#
# Runs the installed plugin once per condition, each in its own process as
# node-problem-detector does (`PLUGIN --config CONFIG --condition C`), one after
# the other - the first one reading the node afresh, the others sharing its look as NPD's rules of one tick
# do (module_utils/_npd/tick.py) - and prints one JSON object: {"installed": bool, "results": [{"condition",
# "rc", "message" (stdout, as node-problem-detector reads it), "stderr", "seconds"}]}.
# A run still going after LIMIT seconds is killed (its process group) and reported with rc null (the
# role's check then fails it as slower than npd_timeout). No plugin: installed false.
import json
import os
import signal
import subprocess
import sys
import time

plugin, config, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
out = {"installed": os.path.isfile(plugin), "results": []}
for index, condition in enumerate(sys.argv[4:] if out["installed"] else []):
    start = time.monotonic()
    # the first condition starts a new tick (NODEFIX_NPD_FRESH: the plugin reads the node, not a result an earlier
    # tick shared); the others answer from it as node-problem-detector's rules do (module_utils/_npd/tick.py)
    env = dict(os.environ, NODEFIX_NPD_FRESH="1") if index == 0 else dict(os.environ, NODEFIX_NPD_FRESH="")
    proc = subprocess.Popen([plugin, "--config", config, "--condition", condition],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=limit)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # the plugin and anything it started
        stdout, stderr = proc.communicate()
        rc = None
    out["results"].append({"condition": condition, "rc": rc, "seconds": round(time.monotonic() - start, 2),
                           "message": stdout.decode("utf-8", "replace").strip(),
                           "stderr": stderr.decode("utf-8", "replace").strip()})
print(json.dumps(out))
