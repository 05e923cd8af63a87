# SPDX-License-Identifier: GPL-3.0-or-later
"""A real kernel upgrade, booted once, with its fallback - on the cgroup v2 QEMU VM node, which boots
its own disk (OVMF, GRUB on the disk, the guest's own /boot/grub/grub.cfg and grubenv): a kernel the
guest installs is the one that boots. The guest's package source is the lab's mirror
(lab/vm/build.sh), which has bookworm-backports' linux-image-amd64 (6.12); the VM runs Debian 12's 6.1.

``playbooks/remediate.yml`` with ``nodefix_kernel_upgrade`` and ``nodefix_kernel_min_release: 6.12``,
cordon/drain/uncordon and the reboot lock against lab/apiserver-double (a TEST DOUBLE of
kube-apiserver: no Debian package ships one), one VM, three runs:

1. **a kernel that cannot boot**: the node gets a kernel hook first
   (``/etc/kernel/postinst.d/zz-nodefix-lab-stale-initramfs``, run by the 6.12 package's postinst
   after initramfs-tools' hook and before ``zz-update-grub``) that leaves the new kernel with a stale
   initramfs - the running 6.1 kernel's, whose modules are not 6.12's: the root disk's driver
   (``virtio_blk``, a module in Debian's kernels) cannot load - and keeps the good one aside. The
   kernel boots once, panics in the initramfs (``panic=3`` from the collection's GRUB drop-in), the
   machine resets and GRUB boots its saved default - the old kernel - by itself. The run fails the
   node, the report says the kernel did not boot and the node came back on the old one, the finding
   stays open, and the failed kernel is recorded (the reboot detector no longer asks for it);
2. **booted, but the node not healthy on it**: the operator removes the hook, puts 6.12's own
   initramfs back and removes the record's entry (as the kernel role's README says to try once
   more); but a service the node needs (``reboot_services``: a unit that runs now and is not
   enabled) does not come back after the reboot. 6.12 boots once, the reboot path's verification
   fails, and 6.12 is NOT kept: the run fails the node saying so, GRUB's default is still 6.1 and
   the node's next boot (a plain reboot by the test) is 6.1 again - the fallback, proven;
3. **the cause fixed**: the service is enabled and the record's entry removed again. The node has also
   gathered dying memory cgroups by then (REAL ones: cgroups whose page cache outlives them, made
   and removed by a shell loop), above the run's ``dying_memcgs_threshold``, and the run has
   ``nodefix_reboot_dying_memcgs``: one reboot for both reasons. It boots 6.12 once, verifies the
   node on it and makes it GRUB's default - ``uname -r`` is 6.12 afterwards - and the ``kernel``
   detector reads the dying count again: gone, and the report says so.
"""

import json
import os
import time

import pytest
import yaml

from conftest import ROOT, ApiServerDouble, assert_ok, core_env, held, return_held_node, run_logged, trail_entries

pytestmark = pytest.mark.lab

VM = "nodefix-kernel-vm"
PORT = 2232
OLD = "6.1.0-"          # Debian 12's kernel (the image's; its ABI number follows the archive)
NEW = "6.12."           # bookworm-backports' (the lab mirror's)
VMSH = os.path.join(ROOT, "lab", "vm", "vm.sh")


# the first line every VM shell prints: output without it is of a connection that never reached the shell
# (after an emulated boot on a loaded machine sshd can be slower than the client's connect timeout to say its banner)
STARTED = "NODEFIX-VM-SHELL-STARTED"


def vm_shell(name, script, check=True, attempts=6):
    """Run SCRIPT on the VM; a connection that never reached the shell (rc 255 and no STARTED line: the command
    did not run) is tried again after a pause; a command that started is never run twice, whatever ssh says."""
    for attempt in range(attempts):
        rc, out = run_logged(name if not attempt else "%s-again-%d" % (name, attempt),
                             ["bash", VMSH, "ssh", VM, "echo %s; %s" % (STARTED, script)], timeout=600)
        if rc != 255 or STARTED in out:
            break
        time.sleep(10)
    out = "".join(line for line in out.splitlines(True) if line.strip() != STARTED)
    if check:
        assert_ok(name, rc, out)
    return out


# cgroup v2: a child cgroup whose process wrote page cache stays "dying" (root cgroup.stat
# nr_dying_descendants) after rmdir, until the cache is reclaimed - as pods' cgroups do
DYING = 60
PLANT_DYING = ("for i in $(seq %d); do d=/sys/fs/cgroup/nodefix-dying-$i; mkdir $d && "
               "sh -c \"echo \\$\\$ > $d/cgroup.procs && head -c 262144 /dev/urandom > /var/tmp/nodefix-dying-$i\" && "
               "rmdir $d || exit 1; done; grep nr_dying_descendants /sys/fs/cgroup/cgroup.stat" % DYING)


HOOK = "/etc/kernel/postinst.d/zz-nodefix-lab-stale-initramfs"
STALE_INITRAMFS = """#!/bin/sh
# nodefix lab fault: a new kernel ($1) gets the running kernel's initramfs, whose modules are not
# its own (the root disk's driver cannot load); its good initramfs is kept aside
[ "$1" = "$(uname -r)" ] && exit 0
mv "/boot/initrd.img-$1" "/boot/initrd.img-$1.lab-good"
cp "/boot/initrd.img-$(uname -r)" "/boot/initrd.img-$1"
"""


# a service the node needs, running now but not enabled: it does not come back after a reboot
NEEDED = "nodefix-lab-needed.service"
NEEDED_UNIT = ("[Unit]\\nDescription=nodefix lab: a service the node needs\\n[Service]\\nType=oneshot\\n"
               "RemainAfterExit=yes\\nExecStart=/bin/true\\n[Install]\\nWantedBy=multi-user.target\\n")


def forget(release):
    """Shell: remove RELEASE from the node's record of failed kernels (the kernel role's README: to try
    a kernel once more)."""
    return ("python3 -c \"import json; p='/var/lib/nodefix-k8s/kernel-boot.json'; d=json.load(open(p)); "
            "d['failed'].pop('%s'); json.dump(d, open(p, 'w'))\"" % release)


def reboot_plainly(name, timeout=600):
    """`systemctl reboot` on the VM and wait for its next boot (a new boot id) to answer over SSH."""
    before = vm_shell(name + "-before", "cat /proc/sys/kernel/random/boot_id").strip()
    run_logged(name, ["bash", VMSH, "ssh", VM, "systemctl reboot"], timeout=60)
    time.sleep(15)      # shutdown, firmware, GRUB and the kernel take longer than this under emulation
    deadline = time.time() + timeout
    while time.time() < deadline:
        # while the guest is down QEMU's user-mode network accepts the connection and says nothing
        rc, out = run_logged(name + "-wait", ["timeout", "8", "bash", VMSH, "ssh", VM,
                                              "cat /proc/sys/kernel/random/boot_id"], timeout=60)
        boot_id = out.strip()
        if rc == 0 and len(boot_id) == 36 and boot_id != before:
            return
        time.sleep(2)
    raise AssertionError("%s: the VM did not come back within %d s" % (name, timeout))


def node_state(name):
    out = vm_shell(name, "uname -r; grub-editenv /boot/grub/grubenv list; echo ---; "
                         "test -e /etc/default/grub.d/nodefix-k8s.cfg && echo drop-in || echo no-drop-in; "
                         "grep '^ *set default=' /boot/grub/grub.cfg | grep -v next_entry | head -1; ls /boot; "
                         "echo ---; "
                         "cat /var/lib/nodefix-k8s/kernel-boot.json 2>/dev/null || echo '{}'")
    head, grub, record = out.split("---\n", 2)
    lines = head.strip().splitlines()
    env = dict(line.split("=", 1) for line in lines[1:] if "=" in line)
    grub = grub.strip().splitlines()
    return {"running": lines[0].strip(), "grubenv": env, "record": json.loads(record),
            "drop_in": grub[0] == "drop-in", "cfg_default": grub[1].strip(),
            "kernels": sorted(n[len("vmlinuz-"):] for n in grub[2:] if n.startswith("vmlinuz-"))}


def inventory(path, kubeconfig):
    host = {
        "ansible_connection": "ansible.builtin.ssh", "ansible_host": "127.0.0.1", "ansible_port": PORT,
        "ansible_user": "root", "ansible_pipelining": True,
        "ansible_ssh_private_key_file": os.path.join(ROOT, ".cache", "lab-vm", "run", VM, "id_ed25519"),
        # QEMU's user-mode network answers on the host side while the guest reboots: an SSH session
        # opened then hangs with no TCP reset - keepalives end it (a real network resets it)
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                   "-o ServerAliveInterval=5 -o ServerAliveCountMax=3",
        "ansible_python_interpreter": "/usr/bin/python3",
        "nodefix_kubeconfig": kubeconfig, "nodefix_drain_timeout": 30,
        "nodefix_audit_checks": ["kernel", "reboot"],
        # the VM is rebooted again on purpose, run after run (a bad kernel, then a good one): no backoff
        "nodefix_reboot_backoff": 0,
        "nodefix_kernel_upgrade": True, "nodefix_kernel_min_release": "6.12",
        # the VM runs containerd, no kubelet: the reboot path's checks as such a node has them
        "reboot_services": ["containerd"], "reboot_kubelet_healthz_url": "", "reboot_timeout": 900,
        # the bad kernel's panic -> reset after 3 s, not the role's 10 (what the test waits for)
        "kernel_boot_panic_seconds": 3,
    }
    path.write_text(json.dumps({"all": {"hosts": {VM: host}}}))
    return str(path)


def remediate(name, inv, reports, extra=()):
    # on the oldest ansible-core the collection supports (conftest.core_env): the rollout's main path runs on
    # the newest in the end-to-end lab
    rc, out = run_logged(name, ["ansible-playbook", "-i", inv, "-e", "nodefix_report_dir=%s" % reports] + list(extra)
                         + [os.path.join(ROOT, "playbooks", "remediate.yml")], timeout=2400, env=core_env("floor"))
    with open(str(reports / "remediate" / "report.json")) as fh:
        report = json.load(fh)
    return rc, out, dict((n["host"], n) for n in report["nodes"])[VM]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # a QEMU VM and the apiserver double, no podman: not the lab lock (it runs beside the lab's
    # containers, tests/nodefix_lab_chain.py), but never beside the end-to-end lab's VM
    with held("NODEFIX_VM_LOCK"):
        yield from _run(tmp_path_factory)


def _run(tmp_path_factory):
    work = tmp_path_factory.mktemp("kernel-vm")
    double = None
    result = {}
    try:
        rc, out = run_logged("kernel-vm-up", ["bash", VMSH, "start", VM, str(PORT), "2048"], timeout=600)
        assert_ok("kernel-vm-up", rc, out)
        double = ApiServerDouble(work, [VM], [{"namespace": "default", "name": "web-1", "node": VM,
                                               "owner": "ReplicaSet"}])
        inv = inventory(work / "inventory.json", double.kubeconfig)
        # 0. a package the node's sources do not have: refused before the drain
        rc, out, node = remediate("kernel-vm-remediate-nopackage", inv, work / "nopackage",
                                  ["-e", "kernel_upgrade_package=linux-image-nodefix-missing"])
        result["nopackage"] = {"rc": rc, "out": out, "node": node, "log": list(double.state()["log"])}
        # 1. plant the fault: a new kernel gets the running kernel's initramfs (no driver for its root disk)
        vm_shell("kernel-vm-plant", "cat > %s <<'EOF'\n%sEOF\nchmod 755 %s" % (HOOK, STALE_INITRAMFS, HOOK))
        result["bad_before"] = node_state("kernel-vm-bad-before")
        rc, out, node = remediate("kernel-vm-remediate-bad", inv, work / "bad")
        result["bad"] = {"rc": rc, "out": out, "node": node, "after": node_state("kernel-vm-bad-after"),
                         "serial": open(os.path.join(ROOT, ".cache", "lab-vm", "run", VM, "serial.log"),
                                        errors="replace").read(), "api": double.state()}
        # not verified: the node stays cordoned and held until a person returns it (docs/safety.md)
        return_held_node("kernel-vm-bad", double.kubeconfig, VM)
        # 2. the operator fixes the initramfs and asks for one more try; a service the node needs
        #    runs now but is not enabled: it does not come back after the reboot
        new = [k for k in result["bad"]["node"].get("remediation", {}).get("msg", "").split() if k.startswith(NEW)]
        release = result["bad"]["after"]["record"].get("failed", {})
        release = sorted(release)[0] if release else (new[0] if new else "")
        vm_shell("kernel-vm-fix", "rm %s && mv /boot/initrd.img-%s.lab-good /boot/initrd.img-%s && %s && "
                                  "printf '%s' > /etc/systemd/system/%s && systemctl daemon-reload && systemctl start %s"
                 % (HOOK, release, release, forget(release), NEEDED_UNIT, NEEDED, NEEDED))
        rc, out, node = remediate("kernel-vm-remediate-unhealthy", inv, work / "unhealthy", [
            # (the wait for a service that never comes back: 9 s - four reads 3 s apart -, not the role's 300)
            "-e", json.dumps({"reboot_services": ["containerd", NEEDED], "reboot_settle_timeout": 9})])
        result["unhealthy"] = {"rc": rc, "out": out, "node": node, "after": node_state("kernel-vm-unhealthy-after"),
                               "api": double.state()}
        return_held_node("kernel-vm-unhealthy", double.kubeconfig, VM)
        # ... and its next boot, a plain one: GRUB's default
        reboot_plainly("kernel-vm-next-boot")
        result["next_boot"] = node_state("kernel-vm-next-boot-after")
        # 3. the operator enables the service and asks for one more try (the node has gathered dying
        #    memory cgroups meanwhile: the same ssh)
        out = vm_shell("kernel-vm-fix-service", "systemctl enable --now %s && %s && %s"
                       % (NEEDED, forget(release), PLANT_DYING))
        result["dying_before"] = int(out.split()[-1])
        rc, out, node = remediate("kernel-vm-remediate-good", inv, work / "good", [
            "-e", json.dumps({"nodefix_reboot_dying_memcgs": True,
                              "nodefix_audit_options": {"kernel": {"dying_memcgs_threshold": DYING // 2}}})])
        result["good"] = {"rc": rc, "out": out, "node": node, "after": node_state("kernel-vm-good-after")}
        # 3. the plan of the node's own 6.1 image package (still installed), now that 6.12 runs: a downgrade
        rc, out = run_logged("kernel-vm-downgrade", [
            "ansible", "-i", inv, VM, "-m", "nodefix.k8s.kernel_package",
            "-a", json.dumps({"name": "linux-image-%s" % result["bad_before"]["running"]})], timeout=600,
            env=core_env("floor"))
        result["downgrade"] = {"rc": rc, "out": out}
        result["api"] = double.state()
        yield result
    finally:
        if double is not None:
            double.stop()
        run_logged("kernel-vm-down", ["bash", VMSH, "stop", VM], timeout=120)


def test_the_vm_starts_below_the_minimum(run):
    assert run["bad_before"]["running"].startswith(OLD), run["bad_before"]


def test_a_package_the_sources_lack_is_refused_before_the_drain(run):
    bad = run["nopackage"]
    assert bad["rc"] != 0, bad["out"][-3000:]
    remediation = bad["node"]["remediation"]
    assert remediation["status"] == "failed" and remediation["msg"].startswith("kernel upgrade: package "
                                                                               "linux-image-nodefix-missing is not in")
    assert "nothing was drained or changed" in remediation["msg"]
    assert remediation["outcome"] == "refused", remediation
    # no claim, cordon, eviction or lease: only the run's trail (refused at the rollout's first step, before its start
    # Event: the end Event says why, and the Node's annotation)
    trail = trail_entries(bad["log"])
    assert [e for e in bad["log"] if e not in trail] == [], bad["log"]
    assert [e["reason"] for e in trail if "reason" in e] == ["RemediationFailed"], trail
    assert "kernel.below_minimum" in bad["node"]["ids"]


def test_a_kernel_that_cannot_boot_falls_back_to_the_old_one(run):
    bad = run["bad"]
    assert bad["rc"] != 0, bad["out"][-3000:]          # the node is failed, after the report
    assert bad["after"]["running"].startswith(OLD)     # back on the old kernel, by itself
    # it did try the new one: its (stale) initramfs gave up on the root disk and rebooted (panic=)
    assert "Rebooting automatically due to panic= boot argument" in bad["serial"], bad["serial"][-3000:]
    failed = bad["after"]["record"]["failed"]
    assert len(failed) == 1 and list(failed)[0].startswith(NEW) and \
        failed[list(failed)[0]]["came_back_on"] == bad["after"]["running"]
    remediation = bad["node"]["remediation"]
    assert remediation["status"] == "failed"
    # by itself (panic=, GRUB's saved default), not by a power cycle: none was needed, none is set
    assert "did not boot: the node came back on %s by itself" % bad["after"]["running"] in remediation["msg"], remediation
    # the finding stays open; the failed kernel is no reason to reboot again
    assert "kernel.below_minimum" in bad["node"]["ids"] and "reboot.kernel_not_running" not in bad["node"]["ids"]
    # GRUB's default is still the old kernel, nothing queued
    assert OLD in bad["after"]["grubenv"].get("saved_entry", "") and not bad["after"]["grubenv"].get("next_entry")


def test_a_kernel_that_boots_on_a_node_that_is_not_healthy_is_not_kept(run):
    """Issue: the new kernel was made GRUB's default even when the reboot path's verification failed. It
    booted here (a one-shot boot), the node was not healthy on it: not kept, and the node's next boot -
    a plain reboot, nothing of the collection's - is the old kernel again."""
    bad = run["unhealthy"]
    assert bad["rc"] != 0, bad["out"][-3000:]
    assert bad["after"]["running"].startswith(NEW), bad["after"]          # it did boot
    remediation = bad["node"]["remediation"]
    assert remediation["status"] == "failed", remediation
    said = " ".join(remediation["msg"].split())
    assert "kernel %s booted but the node was not healthy on it (" % bad["after"]["running"] in said, said
    # the service that did not come back, named (systemctl is-active exits 0 when ANY of its units is active)
    assert "not active: %s is inactive" % NEEDED in said, said
    assert "not kept - GRUB's default is still the previous kernel, which the node boots at its next reboot" in said
    failed = bad["after"]["record"]["failed"][bad["after"]["running"]]
    assert failed["came_back_on"] == bad["after"]["running"] and any(NEEDED in u for u in failed["unhealthy"]), failed
    assert bad["after"]["running"] not in bad["after"]["record"]["booted"]
    # GRUB: the old kernel is still the saved default, nothing queued, the drop-in still in place
    env = bad["after"]["grubenv"]
    assert OLD in env.get("saved_entry", "") and not env.get("next_entry") and bad["after"]["drop_in"], bad["after"]
    # the fallback, by the node's own next boot
    assert run["next_boot"]["running"] == run["bad_before"]["running"], run["next_boot"]


def test_after_the_fix_the_new_kernel_boots_and_becomes_the_default(run):
    good = run["good"]
    assert good["rc"] == 0, good["out"][-3000:]
    assert good["after"]["running"].startswith(NEW), good["after"]
    # kept, and the node is not pinned to it: the drop-in is gone, GRUB boots its first entry (Debian's
    # GRUB_DEFAULT=0: the newest kernel installed - the next one the distribution's updates bring boots)
    assert not good["after"]["drop_in"] and "saved_entry" not in good["after"]["grubenv"], good["after"]
    assert good["after"]["cfg_default"] == 'set default="0"', good["after"]
    assert good["after"]["running"] == good["after"]["kernels"][-1], good["after"]   # the newest is the one running
    assert list(good["after"]["record"]["booted"]) == [good["after"]["running"]]
    node = good["node"]
    assert node["remediation"]["status"] == "ok" and "kernel.below_minimum" not in node["ids"]
    actions = node["remediation"]["actions"]
    assert len(actions) == 1 and actions[0].startswith("kernel upgraded: %s" % run["bad_before"]["running"]), actions
    assert "-> %s (linux-image-amd64 " % good["after"]["running"] in actions[0] and " s away, verified; " in actions[0]


def test_the_same_reboot_frees_the_dying_memory_cgroups_and_proves_it(run):
    assert run["dying_before"] >= DYING, run["dying_before"]
    good = run["good"]
    node = good["node"]
    # the reboot's second reason, read by the kernel detector before, and gone after (read again)
    reasons = node["remediation"]["reboot"]["reasons"]
    dying = [r for r in reasons if r.endswith("dying memory cgroups (threshold %d)" % (DYING // 2))]
    assert len(dying) == 1 and int(dying[0].split()[0]) >= DYING, reasons
    assert node["remediation"]["actions"][0].endswith("; the same reboot: %s, gone" % dying[0]), node["remediation"]
    assert "kernel.dying_memcgs" not in node["ids"] and node["remediation"]["reboot"]["still_open"] == []


def test_a_kernel_older_than_the_running_one_is_refused(run):
    """6.12 runs now; the node's own Debian 12 kernel (6.1, its image package still installed) is a downgrade:
    refused, nothing installed."""
    down = run["downgrade"]
    said = " ".join(down["out"].split())
    assert down["rc"] != 0 and "not newer than the running %s" % run["good"]["after"]["running"] in said, said[-2000:]
    assert "that is a downgrade" in said


def test_drained_each_time_held_when_not_verified_and_the_lock_released(run):
    """Each of the three runs that reboots cordons and drains the node and gives its reboot-lock slot back
    once the node is back. The two whose kernel was not kept leave the node cordoned and held
    (``nodefix.k8s/held`` names the run and why; issue 53: a node that failed verification is not given
    back); a person returns it (the helper's PATCH, as ``kubectl uncordon`` sends it); the run that is
    verified gives the node back itself."""
    def node_patches(log):
        return [e["body"]["spec"]["unschedulable"] for e in log
                if e["method"] == "PATCH" and e["path"].endswith("/nodes/" + VM) and "spec" in e["body"]]

    def leases(log):
        return [(e["method"], e.get("holder")) for e in log if "/leases/" in e["path"] and "/nodefix-storm" not in e["path"]]

    seen = 0
    for case, returned in (("bad", []), ("unhealthy", [False])):
        api = run[case]["api"]
        mine = api["log"][seen:]
        seen = len(api["log"])
        # (the person's return of the node the case before left held,) cordoned once by the run, never
        # given back by it
        assert node_patches(mine) == returned + [True], (case, node_patches(mine))
        assert api["nodes"][VM]["unschedulable"] is True, (case, api["nodes"][VM])
        hold = json.loads(api["nodes"][VM]["annotations"]["nodefix.k8s/held"])
        assert hold["reason"] and hold["run"], (case, hold)
        assert leases(mine) == [("POST", VM), ("DELETE", VM)], (case, leases(mine))
    last = run["api"]["log"][seen:]
    # the person's return of the unhealthy run's node (held annotation removed, uncordoned), then the good run
    assert node_patches(last) == [False, True, False], node_patches(last)
    assert leases(last) == [("POST", VM), ("DELETE", VM)], leases(last)
    final = run["api"]["nodes"][VM]
    assert final["unschedulable"] is False and "nodefix.k8s/held" not in final.get("annotations", {}), final
    assert yaml.safe_load(json.dumps(run["api"]["leases"])) == {}
