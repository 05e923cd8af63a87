# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab nodes' cache of compiled code for modules imported from a zip file (an Ansible module's
AnsiballZ payload), a site hook in the lab VM image (lab/vm/build.sh) and the container images
(lab/images/customize.sh). CPython caches the bytecode of source files it imports from a directory
(__pycache__), never of source it imports from a zip: every Ansible module run compiles its whole
payload - ansible.module_utils.basic and the collection's module_utils - again. Under QEMU's
software emulation that is ~1 s of the ~3 s a module run costs on the VM; in a container node
~0.09 of its ~0.25 CPU-s, thousands of times in a test run.

The hook wraps zipimport's compile step: the code object of a source text is kept in
/var/cache/nodefix-lab-zipcode/, keyed by the SHA-256 of the text, its path inside the zip and the
interpreter's magic number, and given back with the file name of this import (the payload's
temporary path). The same source gives the same code object, compiled or cached; any change to
a file changes its key. It acts only where that directory exists: the VM image has it; a
container node has it when the lab mounts the test run's shared cache there (lab/up.yml,
molecule's create step), so the benchmarks' nodes, which mount nothing (benchmarks/audit/run.py brings
the lab up without it), run as real nodes do.
Entries are written under a unique temporary name and renamed into place: nodes that share the
directory (in other PID namespaces) never read a half-written entry, and a damaged one is
compiled again. NODEFIX_LAB_ZIPCODE=0 in a module's environment turns it off
(NODEFIX_LAB_ZIPCODE_DIR: another cache directory). The test run's venv has the hook too
(scripts/setup.sh), for the modules run on the controller (connection local); only scripts/test.sh
names a directory for it there (NODEFIX_LAB_ZIPCODE_DIR=$NODEFIX_ZIPCODE_DIR, the directory the
nodes mount), so the demo's and a user's runs compile as Ansible does.
Test infrastructure only: the collection never installs or relies on it.
"""

import os
import zipimport

CACHE = os.environ.get("NODEFIX_LAB_ZIPCODE_DIR", "/var/cache/nodefix-lab-zipcode")


def _renamed(code, filename):
    """CODE with FILENAME as its file name, and the code objects nested in it (tracebacks name this run's path)."""
    consts = tuple(_renamed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _install():
    compile_source = zipimport._compile_source

    def cached_compile(pathname, source):
        import hashlib      # here, not at every interpreter start on the VM
        import importlib.util
        import marshal
        inner = pathname.split(".zip" + os.sep, 1)[-1]
        key = hashlib.sha256(importlib.util.MAGIC_NUMBER + inner.encode() + b"\0" + source).hexdigest()
        path = os.path.join(CACHE, key[:2], key)
        try:
            with open(path, "rb") as fh:
                return _renamed(marshal.load(fh), pathname)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile_source(pathname, source)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = "%s.%s.tmp" % (path, os.urandom(8).hex())
            with open(tmp, "wb") as fh:
                marshal.dump(code, fh)
            os.replace(tmp, path)
        except OSError:
            pass
        return code

    zipimport._compile_source = cached_compile


if os.environ.get("NODEFIX_LAB_ZIPCODE", "1") != "0" and hasattr(zipimport, "_compile_source") and os.path.isdir(CACHE):
    _install()
