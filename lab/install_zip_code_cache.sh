#!/bin/sh
# Install lab/zip_code_cache.py as a site hook of the node tree ROOT's python3
# (its /usr/local dist-packages, the version asked through chroot): the lab VM
# image (lab/vm/build.sh) and the container images (lab/images/customize.sh).
# The hook acts only where /var/cache/nodefix-lab-zipcode exists on the node.
#   install_zip_code_cache.sh ROOT
set -eu
root=$1
site=$root/usr/local/lib/python$(chroot "$root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
install -D -m 644 "$(dirname "$0")/zip_code_cache.py" "$site/nodefix_lab_zipcode.py"
echo "import nodefix_lab_zipcode" > "$site/nodefix_lab_zipcode.pth"
