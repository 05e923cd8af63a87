# SPDX-License-Identifier: GPL-3.0-or-later
"""Repack a Debian linux-image .deb for the lab's mirror with only the modules the lab's VM node
loads (and what they depend on): the same kernel image, System.map, config, maintainer scripts,
name and version - the package the kernel role plans, installs and boots - but a few dozen
modules instead of ~4,000.

Why: under QEMU's software emulation the guest's own install of the full package costs ~140 s of
a host core, ~45 s of it depmod reading ~4,000 xz-compressed modules and ~20 s dpkg unpacking
them (measured in the lab VM); none of those modules is ever loaded on the lab's virtio machine.
What the kernel role does with the package (plan it from the mirror's index, install it with the
package manager, the package's postinst hooks - initramfs-tools, zz-update-grub - boot it once,
keep it or fall back) is unchanged.

    python3 trim_kernel.py IN.deb OUT.deb MODULE [MODULE ...]

MODULE: a module name as lsmod prints it; its dependencies (each module's own .modinfo
``depends``, what depmod reads: no kmod needed on the host) are kept too. A name the kernel has
built in is fine; a name it has neither built in nor as a module is an error (the list would be
stale). The package's description says it was trimmed.
"""

import gzip
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile

_MODULE_FILE = re.compile(r"\.ko(\.xz|\.zst|\.gz)?$")


def _name(path):
    """The module name of a file name or a name as lsmod or modinfo write it (``-`` is ``_``)."""
    return _MODULE_FILE.sub("", os.path.basename(path)).replace("-", "_")


def _release(tree):
    releases = os.listdir(os.path.join(tree, "lib", "modules"))
    if len(releases) != 1:
        sys.exit("expected one kernel release under lib/modules, found %s" % releases)
    return releases[0]


def _index(moddir):
    """{module name: path relative to moddir} of every module file in the tree."""
    index = {}
    for top, _dirs, files in os.walk(moddir):
        for name in files:
            if _MODULE_FILE.search(name):
                index[_name(name)] = os.path.relpath(os.path.join(top, name), moddir)
    return index


def _modinfo_depends(path):
    """The names in a module's own .modinfo ``depends=`` (what depmod reads), no kmod needed."""
    opener = {".xz": lzma.open, ".zst": None, ".gz": gzip.open}.get(os.path.splitext(path)[1], open)
    if opener is None:
        sys.exit("%s: zstd-compressed modules are not supported here" % path)
    with opener(path, "rb") as fh:
        data = fh.read()
    found = re.search(rb"(?:^|\x00)depends=([^\x00]*)\x00", data)
    return [_name(n.decode()) for n in found.group(1).split(b",") if n] if found else []


def _builtin(moddir):
    with open(os.path.join(moddir, "modules.builtin")) as fh:
        return {_name(line.strip()) for line in fh if line.strip()}


def keep_paths(moddir, wanted):
    """The module files (relative to moddir) of WANTED and everything they depend on."""
    index, builtin = _index(moddir), _builtin(moddir)
    unknown = sorted(n for n in wanted if n not in index and n not in builtin)
    if unknown:
        sys.exit("not in this kernel (neither a module nor built in): %s" % " ".join(unknown))
    keep, todo = set(), [n for n in wanted if n in index]
    while todo:
        name = todo.pop()
        if index[name] not in keep:
            keep.add(index[name])
            todo.extend(d for d in _modinfo_depends(os.path.join(moddir, index[name])) if d in index)
    return keep


def _md5sums(tree):
    lines = []
    for top, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if os.path.relpath(os.path.join(top, d), tree) != "DEBIAN")
        for name in sorted(files):
            path = os.path.join(top, name)
            if os.path.islink(path):
                continue
            with open(path, "rb") as fh:
                lines.append("%s  %s\n" % (hashlib.md5(fh.read()).hexdigest(), os.path.relpath(path, tree)))
    return "".join(lines)


def _control(tree, kept):
    path = os.path.join(tree, "DEBIAN", "control")
    with open(path) as fh:
        text = fh.read()
    size = subprocess.run(["du", "-sk", "--exclude=DEBIAN", tree], check=True, capture_output=True,
                          text=True).stdout.split()[0]
    text = re.sub(r"(?m)^Installed-Size: .*$", "Installed-Size: %s" % size, text)
    note = " .\n (nodefix lab mirror: repacked with only the %d modules the lab's VM node loads)\n" % kept
    with open(path, "w") as fh:
        fh.write(text.rstrip("\n") + "\n" + note)


def main(src, dest, wanted):
    work = tempfile.mkdtemp(prefix="nodefix-kernel-trim.")
    try:
        tree = os.path.join(work, "pkg")
        subprocess.run(["dpkg-deb", "-R", src, tree], check=True)
        release = _release(tree)
        moddir = os.path.join(tree, "lib", "modules", release)
        keep = keep_paths(moddir, {_name(n) for n in wanted})
        for top, _dirs, files in os.walk(moddir, topdown=False):
            for name in files:
                rel = os.path.relpath(os.path.join(top, name), moddir)
                if _MODULE_FILE.search(name) and rel not in keep:
                    os.unlink(os.path.join(top, name))
            if top != moddir and not os.listdir(top):
                os.rmdir(top)
        with open(os.path.join(tree, "DEBIAN", "md5sums"), "w") as fh:
            fh.write(_md5sums(tree))
        _control(tree, len(keep))
        subprocess.run(["dpkg-deb", "--build", "-Zgzip", tree, dest + ".tmp"], check=True, stdout=subprocess.DEVNULL)
        os.rename(dest + ".tmp", dest)
        print("%s: %d modules kept (%s)" % (os.path.basename(dest), len(keep), " ".join(sorted(_name(p) for p in keep))))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
