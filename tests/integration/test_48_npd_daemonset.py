# SPDX-License-Identifier: GPL-3.0-or-later
"""node-problem-detector as a DaemonSet: the nodefix.k8s plugin run from a container built like
node-problem-detector's image against a lab node, and the same answers as on the node itself.

- the node: a Debian 12 systemd container (the lab image), the plugin installed by the npd role
  (``playbooks/npd.yml``, ``npd_entry: nsenter``) - the plugin, its detectors and the
  nsenter wrapper in /usr/local/lib/nodefix-npd, the monitor config whose rules run the wrapper;
- "node-problem-detector": a container from an image built here like its image (Debian base with
  util-linux and bash, NO Python - removed from the lab image), sharing the node's PID namespace as
  ``hostPID: true`` does (``--pid=container:<node>``), privileged, with the node's plugin directory
  mounted at the same path as the DaemonSet's hostPath (docs/npd-daemonset.yaml). It runs each rule
  of the node's monitor config the way node-problem-detector does: the rule's path with its args, its
  own process, exit code and stdout read. node-problem-detector's own binary is not in Debian: this is a
  TEST DOUBLE of its runner, the image and the namespaces are real.
- without the node's PID namespace (no hostPID) every condition is Unknown, never a problem.
"""

import json
import os
import subprocess

import pytest

from conftest import ENV, ROOT, ZIPCODE_MOUNT, assert_ok, lab_exclusive, podman, run_logged

pytestmark = pytest.mark.lab

IMAGE = "localhost/nodefix-debian12"
NPD_LIKE = "localhost/nodefix-npd-like"
NODE = "nodefix-npd-node"
LIB = "/usr/local/lib/nodefix-npd"
MONITOR = "/etc/node-problem-detector/nodefix-plugin-monitor.json"
CONTAINERFILE = """FROM %s
# node-problem-detector's image: debian-base with util-linux and bash - and no Python
RUN rm -rf /usr/bin/python3* /usr/lib/python3* /usr/local/lib/python3* /usr/share/python3 \\
 && command -v nsenter && command -v bash && ! command -v python3
""" % IMAGE


def run_rules(rules, *prefix, fresh=False):
    """Each rule run as its own process through ``prefix`` (podman exec/run ...); [(condition, rc, message)].
    ``fresh``: the first rule starts a new tick (NODEFIX_NPD_FRESH): it reads the node itself instead of the
    result the rules before shared (module_utils/_npd/tick.py), and the others answer from its look."""
    out = []
    for index, rule in enumerate(rules):
        first = ["env", "NODEFIX_NPD_FRESH=1"] if fresh and index == 0 else []
        proc = subprocess.run(list(prefix) + first + [rule["path"]] + rule["args"], env=ENV, capture_output=True,
                              text=True, timeout=120, check=False)
        out.append((rule["condition"], proc.returncode, proc.stdout[:80].strip()))
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with lab_exclusive():
        yield from _lab(tmp_path_factory)


def _lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("npd-daemonset")
    podman("rm", "-f", "-t", "0", NODE, check=False)
    try:
        podman("run", "-d", "--name", NODE, "--hostname", NODE, "--privileged", "--systemd=always", *ZIPCODE_MOUNT,
               IMAGE, "/sbin/init")
        # (a layer on the lab image: cached by podman while the lab image is unchanged)
        podman("build", "-t", NPD_LIKE, "-f", "-", str(work), input=CONTAINERFILE, timeout=600)
        # systemd up before the first module (a pipelined payload races tmp.mount otherwise)
        podman("exec", NODE, "timeout", "120", "systemctl", "is-system-running", "--wait", check=False)
        inv = work / "inventory.json"
        inv.write_text(json.dumps({"all": {"hosts": {NODE: {
            "ansible_connection": "nodefix_podman", "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_remote_tmp": "/root/.ansible/tmp", "nodefix_become": False, "npd_entry": "nsenter",
            "npd_verify_enabled": False}}}}))
        rc, out = run_logged("npd-daemonset-install", ["ansible-playbook", "-i", str(inv),
                                                       os.path.join(ROOT, "playbooks", "npd.yml")], timeout=900)
        assert_ok("npd-daemonset-install", rc, out)
        monitor = json.loads(podman("exec", NODE, "cat", MONITOR))
        mounted = podman("mount", NODE).strip()
        npd = ["podman", "run", "--rm", "--privileged", "-v", "%s%s:%s:ro" % (mounted, LIB, LIB)]
        daemonset = run_rules(monitor["rules"], *(npd[:3] + ["--pid=container:%s" % NODE] + npd[3:] + [NPD_LIKE]))
        yield {
            "monitor": monitor,
            "python_in_npd": podman("run", "--rm", NPD_LIKE, "bash", "-c", "command -v python3 || echo none").strip(),
            # node-problem-detector in a DaemonSet: hostPID (the node's PID namespace), the hostPath mount
            "daemonset": daemonset,
            # the tick's shared result the DaemonSet's rules left in the node's /run (npd_cache_dir)
            "tick": podman("exec", NODE, "cat", "/run/nodefix-npd/tick", check=False),
            # the same pod without hostPID
            "no_host_pid": run_rules(monitor["rules"], *(npd + [NPD_LIKE])),
            # the plugin run on the node itself (node-problem-detector as a systemd service)
            # (its own look at the node, not the result the DaemonSet's rules shared in the node's /run)
            "node": run_rules([dict(r, path=LIB + "/nodefix-npd") for r in monitor["rules"]], "podman", "exec", NODE,
                              fresh=True),
        }
    finally:
        podman("umount", NODE, check=False)
        podman("rm", "-f", "-t", "0", NODE, check=False)


def test_the_image_has_no_python_and_the_rules_run_the_wrapper(lab):
    assert lab["python_in_npd"] == "none"
    assert {r["path"] for r in lab["monitor"]["rules"]} == {LIB + "/nodefix-npd-nsenter"}


def test_the_daemonset_gets_the_answers_the_node_gets(lab):
    assert [c for c, _rc, _m in lab["daemonset"]] == [c for c, _rc, _m in lab["node"]]
    assert lab["daemonset"] == lab["node"], json.dumps({"daemonset": lab["daemonset"], "node": lab["node"]}, indent=1)
    # real answers, not a wall of Unknown: the detectors ran on the node
    assert [rc for _c, rc, _m in lab["daemonset"]].count(2) < len(lab["daemonset"]), lab["daemonset"]
    assert all(rc in (0, 1, 2) and msg for _c, rc, msg in lab["daemonset"])


def test_the_daemonsets_rules_shared_one_look_at_the_node_in_its_run(lab):
    """The first rule read the node for all six (in the node's namespaces, so in the node's /run), the others
    answered from that result: one file with every condition's verdict, the answers the rules gave."""
    verdicts = dict((line.split(" ", 3)[1], (int(line.split(" ", 3)[2]), line.split(" ", 3)[3]))
                    for line in lab["tick"].splitlines() if line.startswith("v "))
    assert lab["tick"].startswith("nodefix-npd-tick 2\n") and lab["tick"].rstrip().endswith("end"), lab["tick"]
    assert [(c, verdicts[c][0], verdicts[c][1][:80]) for c, _rc, _m in lab["daemonset"]] == lab["daemonset"]


def test_without_host_pid_every_condition_is_unknown_never_a_problem(lab):
    assert all(rc == 2 for _c, rc, _m in lab["no_host_pid"]), lab["no_host_pid"]
    assert all("could not run the plugin in the node's namespaces" in msg for _c, _rc, msg in lab["no_host_pid"])


DEBIAN11 = "localhost/nodefix-debian11"   # Python 3.9, no tomllib, no tomlkit: a Debian 11 / EL 9 / Ubuntu 22.04 node
ON_PY39 = r"""
set -e
mkdir -p /tmp/c && cp -r /mu/ansible_collections /tmp/c/
for d in ansible_collections ansible_collections/nodefix ansible_collections/nodefix/k8s \
         ansible_collections/nodefix/k8s/plugins; do touch /tmp/c/$d/__init__.py; done
! python3 -c 'import tomlkit' 2>/dev/null && ! python3 -c 'import tomllib' 2>/dev/null
mkdir -p /etc/containerd
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]\n  runtime_type = "io.containerd.runsc.v1"\n' \
  > /etc/containerd/config.toml
printf 'import sys\nsys.path.insert(0, "/tmp/c")\n' > /tmp/p.py
printf 'from ansible_collections.nodefix.k8s.plugins.module_utils._npd.plugin import cli\nsys.exit(cli())\n' >> /tmp/p.py
python3 --version
for c in ContainerRuntimeRisk GVisorMemoryLimitIgnored; do
  set +e; out=$(python3 /tmp/p.py --condition $c); rc=$?; set -e
  echo "$c|$rc|$out"
done
"""


def test_a_python_without_a_toml_parser_says_cannot_check_never_invalid(lab):
    """The real Python 3.9 of Debian 11 (no tomllib, no tomlkit) and a valid containerd config: the
    conditions that read TOML are Unknown ("cannot check"), never a problem (config_invalid)."""
    mu = os.path.join(ROOT, "plugins", "module_utils")
    out = podman("run", "--rm", "-v", "%s:/mu/ansible_collections/nodefix/k8s/plugins/module_utils:ro" % mu, DEBIAN11,
                 "bash", "-c", ON_PY39)
    assert "Python 3.9" in out, out
    rows = dict((line.split("|")[0], line.split("|")[1:]) for line in out.splitlines() if "|" in line)
    for condition in ("ContainerRuntimeRisk", "GVisorMemoryLimitIgnored"):
        rc, msg = rows[condition]
        assert rc == "2" and msg.startswith("cannot check: %s: cannot read /etc/containerd/config.toml" % (
            "containerd" if condition == "ContainerRuntimeRisk" else "gvisor")), rows
        assert "config_invalid" not in msg, rows
