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
echo "nodefix-$suite" > "$root/etc/hostname"
# The lab's cache of code compiled from zipped modules (every Ansible module run's payload;
# lab/zip_code_cache.py): it acts only where /var/cache/nodefix-lab-zipcode exists, i.e. where the
# lab or a molecule platform mounts the test run's shared cache; the benchmarks' nodes mount none.
site=$root/usr/local/lib/python$(chroot "$root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
install -D -m 644 "$(dirname "$0")/../zip_code_cache.py" "$site/nodefix_lab_zipcode.py"
echo "import nodefix_lab_zipcode" > "$site/nodefix_lab_zipcode.pth"
