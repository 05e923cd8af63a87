#!/usr/bin/env bash
# Build the cgroup v2 lab node image (a QEMU VM) from Debian packages only and
# keep it in $NODEFIX_VM_IMAGE_DIR (scripts/env.sh: /var/cache/nodefix-k8s/lab-vm/image,
# machine-wide like podman's image store: a fresh checkout reuses it): disk.qcow2,
# vmlinuz, initrd and the file `recipe`, the hash of this recipe. The disk boots
# by itself, as a node's does: a GPT with an EFI system partition holding GRUB
# (grub-mkimage, removable path EFI/BOOT/BOOTX64.EFI; QEMU runs it under OVMF) and
# the root file system, whose /boot/grub/grub.cfg GRUB reads - so a kernel
# installed inside the guest is the one that boots, and grub-reboot /
# grub-set-default work as on any Debian node. vmlinuz and initrd are kept
# for a direct kernel boot (NODEFIX_VM_BOOT=kernel, experiments only). An image
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
# The guest's only package source is the lab's mirror, a flat repository in the
# image (/srv/nodefix-lab-mirror, file: URI, no network needed): bookworm-backports'
# linux-image-amd64 and the kernel it depends on (6.12), what the kernel role
# installs against kernel_min_release 6.12 (the .debs are cached machine-wide).
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
INCLUDE=$INCLUDE,containerd,runc,runsc,openssl,bzip2,grub-efi-amd64-bin,grub2-common
# zstd: initramfs-tools' COMPRESS=zstd needs it (Debian installs it with initramfs-tools' Recommends, which
# mmdebstrap leaves out): without it mkinitramfs fell back to gzip ("W: No zstd"), slower to write and to unpack
INCLUDE=$INCLUDE,zstd
# the newer kernel the lab's mirror publishes (bookworm-backports)
KERNEL_SUITE=bookworm-backports
KERNEL_META=linux-image-amd64   # and the linux-image-<release> it depends on
KERNEL_CACHE=$(dirname "$IMAGE_DIR")/kernel-debs
ESP_MIB=32
# The modules the lab's VM node loads (lsmod on a booted lab VM, less the blacklisted emulated
# hardware below) and what the lab's services may load: the mirror's kernel keeps only these
# (and their dependencies)
VM_MODULES=(virtio_pci virtio_blk virtio_net virtio_rng ext4 qemu_fw_cfg efivarfs autofs4 binfmt_misc
            crc32c_generic crc32c_intel ip_tables overlay fuse loop configfs dm_mod)

recipe_hash() {
  { cat "$0" "$(dirname "$0")/flat_repo.py" "$(dirname "$0")/trim_kernel.py" \
      "$(dirname "$0")/../zip_code_cache.py" "$(dirname "$0")/../install_zip_code_cache.sh" \
      "$(dirname "$0")/../break/gvisor_mirror_publish.sh"; echo "$MIRROR $SIZE $INCLUDE $NEXT_SUITE $KERNEL_SUITE $KERNEL_META"; } | sha256sum | cut -c1-16
}

want=$(recipe_hash)
have=$(cat "$IMAGE_DIR/recipe" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "image $IMAGE is up to date ($want, $IMAGE_DIR)"
  exit 0
fi
for tool in mmdebstrap mke2fs qemu-img sfdisk mkfs.vfat mcopy; do
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
# ... and published in the mirror's layout here, natively: under emulation the
# tarball's bzip2 and the .sha512 files were ~30 s of every lab run's start. The
# lab's own publish run (lab/break/gvisor_mirror.yml, its default directories and
# releases) then finds every file in place and rewrites none.
sh "$(dirname "$0")/../break/gvisor_mirror_publish.sh" "$root/srv/nodefix-gvisor-mirror" \
  "$root/var/lib/nodefix-gvisor-mirror" 20240729.0 20990101.0 > /dev/null

# 2b. The lab's package mirror: the backports kernel, a flat repository ---------
mkdir -p "$KERNEL_CACHE"
if [ "$(find "$KERNEL_CACHE" -maxdepth 1 -name '*.deb' | wc -l)" != 2 ]; then
  echo "deb $MIRROR $KERNEL_SUITE main" > "$apt_next/sources.list"
  apt-get "${A[@]}" update >> "$work/apt-next.log" 2>&1 || { tail -20 "$work/apt-next.log"; exit 1; }
  dep=$(apt-cache "${A[@]}" show "$KERNEL_META/$KERNEL_SUITE" | sed -n 's/^Depends: \([^ ,]*\).*/\1/p' | head -1)
  [ -n "$dep" ] || { echo "no $KERNEL_META in $KERNEL_SUITE" >&2; exit 1; }
  rm -f "$KERNEL_CACHE"/*.deb
  ( cd "$KERNEL_CACHE" && apt-get "${A[@]}" download "$KERNEL_META/$KERNEL_SUITE" "$dep/$KERNEL_SUITE" \
      >> "$work/apt-next.log" 2>&1 ) || { tail -20 "$work/apt-next.log"; rm -f "$KERNEL_CACHE"/*.deb; exit 1; }
fi
repo=$root/srv/nodefix-lab-mirror
mkdir -p "$repo"
# the meta-package as Debian ships it; the kernel package repacked with only the modules the
# lab's VM loads (lab/vm/trim_kernel.py: the guest's depmod and unpack of ~4,000 modules cost
# ~65 s of emulation and none of them is ever loaded here)
for deb in "$KERNEL_CACHE"/*.deb; do
  case $(dpkg-deb -f "$deb" Package) in
    linux-image-[0-9]*) python3 "$(dirname "$0")/trim_kernel.py" "$deb" "$repo/$(basename "$deb")" "${VM_MODULES[@]}" ;;
    *) cp "$deb" "$repo/" ;;
  esac
done
python3 "$(dirname "$0")/flat_repo.py" "$repo"
# the node's package sources: the lab mirror only (the image's bookworm lists are not kept)
echo "deb [trusted=yes] file:/srv/nodefix-lab-mirror ./" > "$root/etc/apt/sources.list"

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
# dpkg without an fsync per file: the disk is a throw-away overlay (cache=unsafe), and under
# emulation the kernel package's ~5,000 files cost seconds of syncs for nothing
echo force-unsafe-io > "$root/etc/dpkg/dpkg.cfg.d/nodefix-lab-unsafe-io"
# Units that only slow a boot under emulation (measured: e2scrub_reap alone 29 s).
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer e2scrub_reap.service man-db.timer >/dev/null 2>&1
# The emulated machine's hardware the node has no use for (q35's AHCI and SMBus, the LPC
# watchdog, the PC speaker and mouse, the CPU model's virtualisation and crypto drivers): udev
# loaded a driver for each at every boot, and systemd's modprobe@ units six more, each a second
# or more of emulation. Blacklisted (udev's autoloading only: an explicit modprobe still works)
# and the units masked, the devices are still there, driverless; what the node uses - virtio,
# ext4, overlay, fw_cfg - loads as before (the filesystems on demand).
printf 'blacklist %s\n' ahci i2c_i801 lpc_ich iTCO_wdt pcspkr psmouse serio_raw evdev kvm_amd kvm_intel \
  ccp cfg80211 aesni_intel ghash_clmulni_intel crc32_pclmul crct10dif_pclmul sha1_ssse3 sha256_ssse3 \
  sha512_ssse3 > "$root/etc/modprobe.d/nodefix-lab-emulated-hardware.conf"
chroot "$root" systemctl mask modprobe@drm.service modprobe@efi_pstore.service modprobe@dm_mod.service \
  modprobe@loop.service modprobe@fuse.service modprobe@configfs.service >/dev/null 2>&1
# Early boot under emulation: an initramfs with only what root=/dev/vda needs.
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' >> "$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all >/dev/null 2>&1
# GRUB on the root file system (the EFI image below reads $prefix=/boot/grub): its
# modules, the settings every grub.cfg the guest's update-grub writes keeps (the
# lab's command line), and a first grub.cfg booting the image's kernel. The guest's
# update-grub (run by the kernel's postinst hook, and by the kernel role) replaces it.
mkdir -p "$root/boot/grub"
cp -r "$root/usr/lib/grub/x86_64-efi" "$root/boot/grub/"
cat > "$root/etc/default/grub" <<'GRUB'
GRUB_DEFAULT=0
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
# the lab: cgroup v2, the serial console QEMU logs, and a short wait (initramfs-tools: at most N s, not a fixed delay) for a root disk
# that never comes (a kernel whose initramfs lacks its driver gives up sooner)
GRUB_CMDLINE_LINUX="console=ttyS0 systemd.unified_cgroup_hierarchy=1 rootdelay=3"
GRUB_DISABLE_OS_PROBER=true
# a node on a serial console (QEMU's, no VGA: -nodefaults): GRUB's text console, no graphics. Without these,
# every update-grub probed the font's device for gfxterm (grub-probe: ~1 s a call under emulation) and every
# entry loaded the video modules at boot to find no video mode ("Booting in blind mode"); no recovery entries
# (none is ever booted here: half of 10_linux's entries). update-grub still runs as on any node.
GRUB_TERMINAL=console
GRUB_GFXPAYLOAD_LINUX=text
GRUB_DISABLE_RECOVERY=true
GRUB
release=$(basename "$(readlink -f "$root/vmlinuz")"); release=${release#vmlinuz-}
cat > "$root/boot/grub/grub.cfg" <<CFG
# the image's first grub.cfg (lab/vm/build.sh); the guest's update-grub replaces it
set default=0
set timeout=0
menuentry 'Debian GNU/Linux, with Linux $release (lab image)' {
  linux /boot/vmlinuz-$release root=LABEL=root ro console=ttyS0 systemd.unified_cgroup_hierarchy=1 rootdelay=3 quiet
  initrd /boot/initrd.img-$release
}
CFG
grub-editenv "$root/boot/grub/grubenv" create 2>/dev/null || chroot "$root" grub-editenv /boot/grub/grubenv create
# GRUB's own $root, not the shell's:
# shellcheck disable=SC2016
printf 'search --no-floppy --label root --set=root\nset prefix=($root)/boot/grub\n' > "$root/tmp/embed.cfg"
chroot "$root" grub-mkimage -O x86_64-efi -o /tmp/BOOTX64.EFI -p /boot/grub -c /tmp/embed.cfg \
  part_gpt ext2 search search_label normal configfile linux echo test loadenv
mv "$root/tmp/BOOTX64.EFI" "$work/BOOTX64.EFI"; rm -f "$root/tmp/embed.cfg"

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
# The compiled code of zipped Python modules (each Ansible module run's payload) cached on the
# node: CPython compiles it again at every run, ~1 s of emulation each (lab/zip_code_cache.py;
# it acts where its directory exists)
sh "$(dirname "$0")/../install_zip_code_cache.sh" "$root"
install -d -m 755 "$root/var/cache/nodefix-lab-zipcode"
chroot "$root" apt-get clean
rm -f "$root"/var/lib/apt/lists/*_Packages

# 4. Disk image, kernel, initramfs -> $IMAGE_DIR (renamed into place whole) ----------
# GPT: 1 = EFI system partition (FAT, GRUB at the removable path), 2 = root (ext4,
# label root), both written into the plain file (mkfs.vfat/mcopy on an image,
# mke2fs at an offset): no loop device, no mount.
out=$IMAGE_DIR.new
rm -rf "$out"; mkdir -p "$out"
cp -L "$root/vmlinuz" "$out/vmlinuz"
cp -L "$root/initrd.img" "$out/initrd"
root_mib=$(( $(numfmt --from=iec "$SIZE") / 1048576 ))
truncate -s "$(( (1 + ESP_MIB + root_mib + 1) * 1048576 ))" "$work/disk.raw"
printf 'label: gpt\nstart=1MiB, size=%dMiB, type=U, name=esp\nstart=%dMiB, size=%dMiB, type=L, name=root\n' \
  "$ESP_MIB" "$((1 + ESP_MIB))" "$root_mib" | sfdisk -q "$work/disk.raw" > /dev/null
mkfs.vfat -C -n ESP "$work/esp.img" $((ESP_MIB * 1024)) > /dev/null
mmd -i "$work/esp.img" ::/EFI ::/EFI/BOOT
mcopy -i "$work/esp.img" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
dd if="$work/esp.img" of="$work/disk.raw" bs=1M seek=1 conv=notrunc status=none
mke2fs -q -t ext4 -L root -E "root_owner=0:0,offset=$(( (1 + ESP_MIB) * 1048576 ))" -d "$root" "$work/disk.raw" \
  "${root_mib}M" > /dev/null
rm -rf --one-file-system "$root"
qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$out/disk.qcow2"
rm -f "$work/disk.raw"
echo "$SUITE" > "$out/suite"
echo "$want" > "$out/recipe"
rm -rf "$IMAGE_DIR"
mv "$out" "$IMAGE_DIR"
echo "built $IMAGE in $((SECONDS - start))s ($(du -sm "$IMAGE_DIR" | cut -f1) MiB)"
