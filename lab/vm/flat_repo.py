# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the Packages index of a flat apt repository (``deb [trusted=yes] file:DIR ./``)
from the .deb files in DIR: each package's control stanza plus Filename, Size and
SHA256, as apt-ftparchive would (no dpkg-dev needed on the build host).

    python3 flat_repo.py DIR
"""

import hashlib
import os
import subprocess
import sys


def stanza(path, name):
    control = subprocess.run(["dpkg-deb", "-f", path], check=True, capture_output=True, text=True).stdout.rstrip("\n")
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return "%s\nFilename: ./%s\nSize: %d\nSHA256: %s\n" % (control, name, os.path.getsize(path), digest.hexdigest())


def main(repo):
    debs = sorted(n for n in os.listdir(repo) if n.endswith(".deb"))
    if not debs:
        sys.exit("no .deb in %s" % repo)
    with open(os.path.join(repo, "Packages.tmp"), "w") as fh:
        fh.write("\n".join(stanza(os.path.join(repo, n), n) for n in debs))
    os.rename(os.path.join(repo, "Packages.tmp"), os.path.join(repo, "Packages"))


if __name__ == "__main__":
    main(sys.argv[1])
