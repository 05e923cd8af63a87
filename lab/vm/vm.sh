#!/usr/bin/env bash
# Start and stop the lab's QEMU VM nodes (image: lab/vm/build.sh).
#
#   vm.sh start NAME PORT [MEMORY_MIB]   boot NAME with SSH forwarded to 127.0.0.1:PORT,
#                                        wait until root can log in, print one JSON line
#   vm.sh stop NAME                      stop the QEMU process of NAME's pid file (nothing else)
#   vm.sh reset NAME                     power-cycle NAME (QEMU monitor system_reset: QEMU ends and the
#                                        supervisor starts it again - what a BMC's power cycle does)
#   vm.sh ssh NAME [command...]          root shell on NAME (debugging)
#
# The guest boots from its own disk (NODEFIX_VM_BOOT=disk, the default): OVMF (UEFI)
# runs GRUB from the disk's EFI system partition, GRUB reads the guest's
# /boot/grub/grub.cfg and grubenv - a kernel installed in the guest, grub-reboot and
# grub-set-default work as on a real node, and a reboot inside the guest is a reboot.
# Every reset is a COLD start: QEMU runs with -no-reboot under a supervisor (this script's
# internal `_supervise` command, its own session) that starts a new QEMU process on the same
# disk whenever the guest resets (a reboot, a kernel panic's reset, `vm.sh reset`) and ends
# when the guest powers off ("reboot: Power down" on its console) or `vm.sh stop` asks. A warm
# reset under TCG can leave OVMF spinning with no output (seen twice: 9.5 and 15 minutes after
# "reboot: Restarting system"); a real node's BMC power cycle is a cold start too. The serial
# log is appended to across boots. NODEFIX_VM_BOOT=kernel boots the
# image's kernel directly (QEMU -kernel; faster firmware, but the guest's own kernels
# and GRUB are never used).
#
# The image is in $NODEFIX_VM_IMAGE_DIR (lab/vm/build.sh writes it; scripts/env.sh);
# everything else lives under $NODEFIX_CACHE/lab-vm (the project's .cache): per VM a run directory with a throw-away qcow2
# overlay, the pid file, the serial console log and the lab's SSH key for this boot
# (passed to the guest through QEMU's fw_cfg; the image holds no key).
#
# Acceleration (NODEFIX_VM_ACCEL=auto|kvm|tcg, default auto): KVM when /dev/kvm is
# usable and boots the guest to SSH within NODEFIX_VM_KVM_SECONDS (60); otherwise
# QEMU's software emulation (TCG). A /dev/kvm backed by PVM ("kvm_pvm" module,
# nested_pvm) only boots kernels built as PVM guests: a stock Debian kernel hangs
# there with no message, so auto goes straight to TCG on such hosts.
# For experiments under TCG: NODEFIX_VM_CPU (QEMU's -cpu, default max) and
# NODEFIX_VM_APPEND (extra kernel command line, NODEFIX_VM_BOOT=kernel only); NODEFIX_VM_NICE (default -10: the
# QEMU threads' nice and their autogroup's).
set -euo pipefail
. "$(dirname "$0")/../../scripts/env.sh"

BASE=$NODEFIX_CACHE/lab-vm
WAIT=${NODEFIX_VM_WAIT_SECONDS:-400}
cmd=${1:-}; name=${2:-}
if [ -z "$cmd" ] || [ -z "$name" ]; then sed -n '3,8p' "$0" >&2; exit 2; fi
[[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || { echo "bad VM name: $name" >&2; exit 2; }
run=$BASE/run/$name
pidf=$run/qemu.pid
supf=$run/supervisor.pid

ssh_argv() {
  SSH=(ssh -i "$run/id_ed25519" -p "$(cat "$run/port")" -o StrictHostKeyChecking=no
       -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5 -o BatchMode=yes root@127.0.0.1)
}

# The pid in pid file $1, only if that process's command line still has $2 (a pid file
# outlives its process, and the kernel reuses pids).
pid_in() {
  [ -f "$1" ] || return 1
  local pid; pid=$(cat "$1")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q -- "$2" || return 1
  echo "$pid"
}

our_pid() { pid_in "$pidf" "-pidfile $pidf "; }                 # this VM's QEMU
supervisor_pid() { pid_in "$supf" " _supervise $name "; }        # this VM's supervisor

gone() { # $1 = pid: wait up to 10 s for it to end
  for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.2; done
  return 1
}

stop_vm() {
  local pid sup p
  [ -d "$run" ] && : > "$run/stop"     # the supervisor starts no new QEMU from here on
  sup=$(supervisor_pid) || sup=
  pid=$(our_pid) || pid=
  # the supervisor leads its own process group (setsid): signalled as a group, a QEMU it has just
  # started - not yet in the pid file, between two boots - goes with it
  if [ -n "$sup" ]; then kill -TERM -- "-$sup" 2>/dev/null || true; fi
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  for p in $pid $sup; do
    gone "$p" || { kill -KILL "$p" 2>/dev/null || true; gone "$p" || true; }
  done
  if [ -n "$sup" ]; then kill -KILL -- "-$sup" 2>/dev/null || true; fi
  echo "{\"name\": \"$name\", \"stopped_pid\": ${pid:-null}}"
  rm -rf --one-file-system "$run"
}

image_dir() {
  img=$NODEFIX_VM_IMAGE_DIR
  if [ ! -f "$img/recipe" ] || [ ! -f "$img/disk.qcow2" ]; then
    echo "no VM image in $img: run lab/vm/build.sh (scripts/setup.sh does)" >&2; exit 1
  fi
}

# One QEMU process, in the foreground, until the guest resets or powers off (-no-reboot).
qemu_once() { # $1 = kvm|tcg
  local acc boot
  # (QEMU's -accel takes one comma-separated argument)
  # shellcheck disable=SC2054
  if [ "$1" = kvm ]; then acc=(-accel kvm -cpu host); else acc=(-accel tcg,thread=multi,tb-size=512 -cpu "${NODEFIX_VM_CPU:-max}"); fi
  if [ "${NODEFIX_VM_BOOT:-disk}" = kernel ]; then
    boot=(-kernel "$run/base-vmlinuz" -initrd "$run/base-initrd"
          -append "root=LABEL=root rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet ${NODEFIX_VM_APPEND:-}")
  else
    boot=(-bios "$OVMF")
  fi
  # -nodefaults: no VGA, CD-ROM, floppy or parallel port (a node's console is the serial
  # line); the NIC without its iPXE option ROM (romfile=): the firmware boots the disk
  nice -n "${NODEFIX_VM_NICE:--10}" qemu-system-x86_64 "${acc[@]}" -machine q35 -m "$(cat "$run/mem")" -smp "${NODEFIX_VM_CPUS:-2}" \
    -name "nodefix-$name" -nodefaults -display none -no-reboot -pidfile "$pidf" \
    -chardev "file,id=console,path=$run/serial.log,append=on" -serial chardev:console \
    -monitor "unix:$run/monitor.sock,server,nowait" "${boot[@]}" \
    -drive "file=$run/overlay.qcow2,format=qcow2,if=virtio,cache=unsafe" \
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$(cat "$run/port")-:22" -device virtio-net-pci,netdev=n0,romfile= \
    -device virtio-rng-pci \
    -fw_cfg "name=opt/org.nodefix/authorized_keys,file=$run/id_ed25519.pub"
}

# `vm.sh _supervise NAME ACCEL` (started by launch, in its own session): QEMU again after each
# reset, on the same disk; done at a power-off, a stop, or a QEMU that fails.
supervise() { # $1 = kvm|tcg
  echo $$ > "$supf"
  local offset rc
  while :; do
    offset=$(stat -c %s "$run/serial.log" 2>/dev/null || echo 0)
    rc=0; qemu_once "$1" || rc=$?
    [ -e "$run/stop" ] && break
    [ "$rc" = 0 ] || { echo "QEMU ended with rc $rc" >> "$run/supervisor.log"; break; }
    grep -q "reboot: Power down" <(tail -c +"$((offset + 1))" "$run/serial.log") && break
    printf '%s\t%s\tcold-start\n' "$(date +%s)" "$name" >> "$BASE/resets.tsv"
  done
  rm -f "$supf"
}

pin_image() {
  local f
  image_dir
  for f in disk.qcow2 vmlinuz initrd; do
    [ -e "$img/$f" ] || continue
    ln -f "$img/$f" "$run/base-$f" 2>/dev/null || cp --reflink=auto "$img/$f" "$run/base-$f"
  done
}

launch() { # $1 = kvm|tcg
  rm -f "$pidf" "$run/stop"; : > "$run/serial.log"; echo "$mem" > "$run/mem"
  # The image this VM boots, pinned for its life: a hard link per file in the run directory (a copy
  # where the link is refused), taken under the build's lock (shared: never a half-built image).
  # Every cold start opens its backing file by path again, and lab/vm/build.sh replaces the image
  # directory when its recipe changes (another checkout's set-up beside this run): an overlay
  # written against one image and read against another is a corrupt file system in the guest.
  (
    flock -s 9
    pin_image
  ) 9> "$img.lock"
  qemu-img create -q -f qcow2 -b "$run/base-disk.qcow2" -F qcow2 "$run/overlay.qcow2"
  # The emulated guest is the test command's long pole and runs beside other
  # test layers (scripts/test.sh): it gets the CPU first (NODEFIX_VM_NICE, -10; as
  # root), so that its timings (node-problem-detector's 5 s a condition) measure
  # the guest, not the layers next to it. GNU nice runs it anyway when it may not
  # raise the priority. A thread's nice only weighs inside its scheduler
  # autogroup (kernel.sched_autogroup_enabled, one group per session, and the
  # supervisor's setsid starts a new session): the group's own nice, set through
  # /proc/PID/autogroup below, is what every QEMU it starts gets against the other sessions.
  setsid bash "$0" _supervise "$name" "$1" < /dev/null >> "$run/supervisor.log" 2>&1 &
  local pid
  for _ in $(seq 1 100); do pid=$(our_pid) && break; sleep 0.1; done
  if [ -z "${pid:-}" ]; then cat "$run/supervisor.log" >&2; return 1; fi
  if [ -w "/proc/$pid/autogroup" ]; then
    echo "${NODEFIX_VM_NICE:--10}" > "/proc/$pid/autogroup" 2>/dev/null || true
  fi
}

wait_ssh() { # $1 = seconds
  ssh_argv
  local deadline=$((SECONDS + $1))
  while [ $SECONDS -lt $deadline ]; do
    "${SSH[@]}" true 2>/dev/null && return 0
    our_pid >/dev/null || supervisor_pid >/dev/null || return 1
    sleep 1
  done
  return 1
}

OVMF=${NODEFIX_VM_OVMF:-/usr/share/ovmf/OVMF.fd}

case $cmd in
  stop) stop_vm ;;
  _supervise) img=$NODEFIX_VM_IMAGE_DIR; supervise "${3:?accel}" ;;
  reset)
    # between two boots (a reset the supervisor is answering) the next QEMU is a moment away
    for _ in $(seq 1 50); do our_pid >/dev/null && break; supervisor_pid >/dev/null || break; sleep 0.2; done
    our_pid >/dev/null || { echo "VM $name is not running" >&2; exit 1; }
    python3 - "$run/monitor.sock" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(5)
time.sleep(0.2)
s.recv(4096)  # the monitor's banner
s.sendall(b"system_reset\n")
time.sleep(0.5)
s.close()
PY
    printf '%s\t%s\treset\n' "$(date +%s)" "$name" >> "$BASE/resets.tsv"
    echo "{\"name\": \"$name\", \"reset\": true}" ;;
  ssh) ssh_argv; shift 2; exec "${SSH[@]}" "$@" ;;
  start)
    port=${3:-}; mem=${4:-2048}
    [[ $port =~ ^[0-9]+$ ]] || { echo "start needs a port" >&2; exit 2; }
    command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 missing (scripts/setup.sh installs it)" >&2; exit 1; }
    [ "${NODEFIX_VM_BOOT:-disk}" = kernel ] || [ -f "$OVMF" ] || { echo "$OVMF missing: apt-get install ovmf (scripts/setup.sh installs it)" >&2; exit 1; }
    stop_vm >/dev/null
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "127.0.0.1:$port is in use: pick another nodefix_lab_vm_port" >&2; exit 1
    fi
    image_dir
    mkdir -p "$run"; echo "$port" > "$run/port"
    ssh-keygen -q -t ed25519 -N '' -C "nodefix-lab-$name" -f "$run/id_ed25519"
    accel=${NODEFIX_VM_ACCEL:-auto}; why=requested
    if [ "$accel" = auto ]; then
      if [ -d /sys/module/kvm_pvm ]; then accel=tcg; why="/dev/kvm is PVM (kvm_pvm): stock kernels do not boot on it"
      elif [ -r /dev/kvm ] && [ -w /dev/kvm ]; then accel=kvm; why="/dev/kvm usable"
      else accel=tcg; why="no usable /dev/kvm"; fi
    fi
    t0=$SECONDS
    launch "$accel"
    if ! wait_ssh "$([ "$accel" = kvm ] && echo "${NODEFIX_VM_KVM_SECONDS:-60}" || echo "$WAIT")"; then
      if [ "$accel" = kvm ] && [ "${NODEFIX_VM_ACCEL:-auto}" = auto ]; then
        stop_vm >/dev/null; mkdir -p "$run"; echo "$port" > "$run/port"
        ssh-keygen -q -t ed25519 -N '' -C "nodefix-lab-$name" -f "$run/id_ed25519"
        accel=tcg; why="KVM did not boot the guest to SSH in ${NODEFIX_VM_KVM_SECONDS:-60} s"
        launch tcg
        wait_ssh "$WAIT" || { tail -20 "$run/serial.log" >&2; stop_vm >/dev/null; echo "VM $name: no SSH" >&2; exit 1; }
      else
        tail -20 "$run/serial.log" >&2; stop_vm >/dev/null; echo "VM $name: no SSH after boot" >&2; exit 1
      fi
    fi
    # every boot's time, for the test command's step table (tests/nodefix_layer_times.py)
    printf '%s\t%s\t%s\t%s\n' "$(date +%s)" "$name" "$accel" "$((SECONDS - t0))" >> "$BASE/boots.tsv"
    printf '{"name": "%s", "pid": %s, "port": %s, "accel": "%s", "accel_reason": "%s", "boot_seconds": %s, "key": "%s"}\n' \
      "$name" "$(cat "$pidf")" "$port" "$accel" "$why" "$((SECONDS - t0))" "$run/id_ed25519"
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
