#!/usr/bin/env bash
# Build the cgroup v2 lab node image (a QEMU VM) from Debian packages only and
# keep it in $NODEFIX_VM_IMAGE_DIR (scripts/env.sh: /var/cache/nodefix-k8s/lab-vm/image,
# machine-wide like podman's image store: a fresh checkout reuses it): disk.qcow2,
# vmlinuz, initrd and the file `recipe`, the hash of this recipe. An image
# whose recipe matches is reused; nothing is rebuilt (one build at a time: a lock
# file beside it). (It was a podman image
# once: importing and unpacking 900 MB again cost ~25 s for nothing.) No loop devices, no mounts on the
# host: mmdebstrap, `mke2fs -d` and `qemu-img convert` work on plain files.
# Measured here from nothing: ~70 s for the tree (mmdebstrap, parallel
# downloads; debootstrap took ~300 s), a few seconds for the disk. The disk is
# not compressed: qemu-img's zlib pass cost ~25 s for ~600 MB saved, and the
# emulated guest reads its disk faster without it.
#
# The guest: Debian 12, systemd as PID 1 on a pure cgroup v2 hierarchy
# (systemd.unified_cgroup_hierarchy=1 on the kernel command line, lab/vm/vm.sh),
# containerd and runc from Debian, Debian 12's runsc 0.0~20221219.0 installed,
# Debian 13's runsc 0.0~20240729.0 unpacked (not installed) where the lab's
# gVisor mirror publishes it from (lab/break/gvisor_mirror.yml), the Python
# libraries the collection's modules use, and a unit that installs root's SSH
# key from QEMU's fw_cfg at boot: the image holds no key; each lab run makes
# its own (lab/vm/vm.sh start).
#
# Usage: build.sh            env: NODEFIX_DEBIAN_MIRROR, NODEFIX_VM_DISK_SIZE (4G)
set -euo pipefail
. "$(dirname "$0")/../../scripts/env.sh"

MIRROR=${NODEFIX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SIZE=${NODEFIX_VM_DISK_SIZE:-4G}
IMAGE=nodefix-vm-debian12
IMAGE_DIR=$NODEFIX_VM_IMAGE_DIR
mkdir -p "$(dirname "$IMAGE_DIR")"
exec 9> "$IMAGE_DIR.lock"
flock 9
SUITE=bookworm
NEXT_SUITE=trixie
# systemd, the kernel and what a kubeadm-style node has, plus what the lab
# mirror (openssl, bzip2) and the collection's modules (python3-*) use.
INCLUDE=systemd,systemd-sysv,udev,dbus,linux-image-amd64,initramfs-tools,openssh-server,python3,python3-apt
INCLUDE=$INCLUDE,python3-yaml,python3-ruamel.yaml,python3-tomlkit,iproute2,procps,psmisc,kmod,ca-certificates
INCLUDE=$INCLUDE,containerd,runc,runsc,openssl,bzip2

recipe_hash() {
  { cat "$0"; echo "$MIRROR $SIZE $INCLUDE $NEXT_SUITE"; } | sha256sum | cut -c1-16
}

want=$(recipe_hash)
have=$(cat "$IMAGE_DIR/recipe" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "image $IMAGE is up to date ($want, $IMAGE_DIR)"
  exit 0
fi
for tool in mmdebstrap mke2fs qemu-img; do
  command -v "$tool" >/dev/null || { echo "build.sh needs $tool (scripts/setup.sh installs it)" >&2; exit 2; }
done
echo "building $IMAGE from $SUITE (recipe $want)"
start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/var/tmp}/nodefix-vm.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
root=$work/root

# 1. Debian 12 with the node's packages ------------------------------------------
mmdebstrap --quiet --variant=minbase --include="$INCLUDE" "$SUITE" "$root" "$MIRROR" \
  > "$work/mmdebstrap.log" 2>&1 || { tail -30 "$work/mmdebstrap.log"; echo "mmdebstrap failed" >&2; exit 1; }

# 2. Debian 13's runsc, unpacked where the lab mirror serves it from -------------
# (a private apt configuration: the host's apt setup is not touched)
apt_next=$work/apt-next
mkdir -p "$apt_next/lists/partial" "$apt_next/archives/partial"
echo "deb $MIRROR $NEXT_SUITE main" > "$apt_next/sources.list"
A=(-q -o Dir::Etc::SourceList="$apt_next/sources.list" -o Dir::Etc::SourceParts=/dev/null
   -o Dir::State::Lists="$apt_next/lists" -o Dir::Cache="$apt_next" -o Dir::State::status=/dev/null)
apt-get "${A[@]}" update > "$work/apt-next.log" 2>&1 || { tail -20 "$work/apt-next.log"; exit 1; }
( cd "$work" && apt-get "${A[@]}" download "runsc/$NEXT_SUITE" >> "$work/apt-next.log" 2>&1 ) \
  || { tail -20 "$work/apt-next.log"; exit 1; }
mkdir -p "$root/var/lib/nodefix-gvisor-mirror/extract"
dpkg-deb -x "$work"/runsc_*.deb "$root/var/lib/nodefix-gvisor-mirror/extract"

# 3. Boot as a VM node -------------------------------------------------------------
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
echo nodefix-lab-v2 > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 nodefix-lab-v2\n' > "$root/etc/hosts"
printf 'LABEL=root / ext4 rw,errors=remount-ro 0 1\n' > "$root/etc/fstab"
printf 'nameserver 10.0.2.3\n' > "$root/etc/resolv.conf"      # QEMU user-mode DNS
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=ipv4\n' > "$root/etc/systemd/network/20-wired.network"
chroot "$root" systemctl enable systemd-networkd >/dev/null 2>&1
# Units that only slow a boot under emulation (measured: e2scrub_reap alone 29 s).
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer e2scrub_reap.service man-db.timer >/dev/null 2>&1
# Early boot under emulation: an initramfs with only what root=/dev/vda needs.
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' >> "$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all >/dev/null 2>&1
# SSH: keys only, root's key from fw_cfg (opt/org.nodefix/authorized_keys).
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' \
  > "$root/etc/ssh/sshd_config.d/nodefix-lab.conf"
cat > "$root/etc/systemd/system/nodefix-lab-key.service" <<'UNIT'
[Unit]
Description=nodefix lab: root's SSH key from QEMU fw_cfg
Before=ssh.service
[Service]
Type=oneshot
ExecStart=/bin/sh -ec 'modprobe qemu_fw_cfg; k=/sys/firmware/qemu_fw_cfg/by_name/opt/org.nodefix/authorized_keys/raw; install -d -m 700 /root/.ssh; install -m 600 "$k" /root/.ssh/authorized_keys'
[Install]
WantedBy=multi-user.target
UNIT
chroot "$root" systemctl enable nodefix-lab-key.service >/dev/null 2>&1
# Fresh SSH host keys per lab run are not needed (127.0.0.1 only); keep the
# ones the package made. No console login prompts.
ln -sf /dev/null "$root/etc/systemd/system/getty@tty1.service"
chroot "$root" apt-get clean
rm -f "$root"/var/lib/apt/lists/*_Packages

# 4. Disk image, kernel, initramfs -> $IMAGE_DIR (renamed into place whole) ----------
out=$IMAGE_DIR.new
rm -rf "$out"; mkdir -p "$out"
cp -L "$root/vmlinuz" "$out/vmlinuz"
cp -L "$root/initrd.img" "$out/initrd"
mke2fs -q -t ext4 -L root -E root_owner=0:0 -d "$root" "$work/disk.raw" "$SIZE" > /dev/null
rm -rf --one-file-system "$root"
qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$out/disk.qcow2"
rm -f "$work/disk.raw"
echo "$SUITE" > "$out/suite"
echo "$want" > "$out/recipe"
rm -rf "$IMAGE_DIR"
mv "$out" "$IMAGE_DIR"
echo "built $IMAGE in $((SECONDS - start))s ($(du -sm "$IMAGE_DIR" | cut -f1) MiB)"
