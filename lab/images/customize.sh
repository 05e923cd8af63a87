#!/usr/bin/env bash
# Make a bootstrapped (mmdebstrap) root boot as a systemd container node.
# Usage: customize.sh <rootdir> <suite>
set -euo pipefail
root=$1
suite=$2
# A fresh machine id on every boot.
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
# systemd-modules-load fails in a container and marks Debian 13 "degraded".
unit=systemd-modules-load.service
mkdir -p "$root/etc/systemd/system/$unit.d"
printf '[Unit]\nConditionVirtualization=!container\n' > "$root/etc/systemd/system/$unit.d/10-nodefix-container.conf"
# Nothing in the lab needs a login prompt on a console.
ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"
ln -sf /dev/null "$root/etc/systemd/system/getty@tty1.service"
# Keep apt lists (apt-get install works at once in a container) but no
# package cache.
rm -rf "$root"/var/cache/apt/archives/*.deb
# ... and apt's binary cache of those lists, built once here: without it every fresh container's first
# apt call builds it (~0.7 s of CPU and ~4 s of disk, ~25 containers a test run).
chroot "$root" apt-cache gencaches >/dev/null
echo "nodefix-$suite" > "$root/etc/hostname"
# The lab's cache of code compiled from zipped modules (every Ansible module run's payload;
# lab/zip_code_cache.py): it acts only where /var/cache/nodefix-lab-zipcode exists, i.e. where the
# lab or molecule's create step mounts the test run's shared cache; the benchmarks' nodes mount none.
sh "$(dirname "$0")/../install_zip_code_cache.sh" "$root"
