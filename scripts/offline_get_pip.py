#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Put an offline get-pip stand-in where ansible-test looks for it.

ansible-test (--venv/--requirements) bootstraps pip in each test venv by
running ``~/.ansible/test/cache/get_pip_<version>.py <pip install args>
[--no-setuptools] [--no-wheel]``, downloading that script when it is not
cached. The download host is not reachable from the project's machines, so
this writes a stand-in that installs the pinned pip the way get-pip.py does:
one pip run, from the wheel of pip that ``ensurepip`` bundles with Python (or, for a
Python whose distribution keeps that wheel apart - Debian's, ``WHEEL_PKG_DIR`` - from there).

It used to call ``ensurepip.bootstrap()`` first (a pip run of its own that
installs the bundled pip and setuptools, which ansible-test's --no-setuptools
does not ask for) and then pip again for the pinned version: 10-12.7 CPU s per
venv where the one run takes 6.2-6.4, and a bare run makes about 14 of these
venvs (~/.ansible/test/venv: newest and oldest sanity; docs/test-times.md).
"""

import os
import re

import ansible_test

STANDIN = '''#!/usr/bin/env python
# Offline stand-in for get-pip.py written by nodefix.k8s scripts/offline_get_pip.py
import ensurepip
import glob
import os
import subprocess
import sys
import sysconfig

# ansible-test passes the pinned packages (pip==X) and --no-setuptools/--no-wheel,
# which are get-pip.py's own options, not pip's: nothing else is installed.
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
env = dict(os.environ)
# ansible-test runs this with a filtered environment: the bundled pip then
# misses the CA bundle of machines behind a TLS-inspecting proxy. Point it at
# the system bundle (the pip installed next uses the system trust store).
for bundle in ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
    if "REQUESTS_CA_BUNDLE" not in env and os.path.exists(bundle):
        env["REQUESTS_CA_BUNDLE"] = bundle
# pip runs from its wheel (the way get-pip.py runs it from its embedded copy): the venv
# has no pip yet, and no ensurepip run is spent installing one only to replace it.
# The wheel ensurepip bundles, or - where the distribution keeps the wheels apart (Debian's python3-pip-whl,
# configure --with-wheel-pkg-dir: ensurepip reads WHEEL_PKG_DIR) - the one there.
places = [os.path.join(os.path.dirname(ensurepip.__file__), "_bundled"),
          sysconfig.get_config_var("WHEEL_PKG_DIR") or "/usr/share/python-wheels"]
wheels = sorted(w for d in places for w in glob.glob(os.path.join(d, "pip-*.whl")))
if not wheels:
    sys.exit("no pip wheel bundled with ensurepip nor in %s" % places[1])
pip = [sys.executable, os.path.join(wheels[0], "pip"), "install", "--disable-pip-version-check"]
sys.exit(subprocess.call(pip + (args or ["pip"]), env=env))
'''


def pip_version():
    """The pip version ansible-test pins (get_venv_packages' default)."""
    base = os.path.dirname(ansible_test.__file__)
    path = os.path.join(base, "_internal", "python_requirements.py")
    with open(path) as fh:
        text = fh.read()
    m = re.search(r"pip=['\"]([0-9.]+)['\"]", text)
    if not m:
        raise SystemExit("cannot find the pinned pip version in %s" % path)
    return m.group(1)


def main():
    version = pip_version()
    cache = os.path.expanduser("~/.ansible/test/cache")
    os.makedirs(cache, exist_ok=True)
    target = os.path.join(cache, "get_pip_%s.py" % version.replace(".", "_"))
    current = None
    if os.path.exists(target):
        with open(target) as fh:
            current = fh.read()
    if current != STANDIN:
        with open(target, "w") as fh:
            fh.write(STANDIN)
        print("wrote %s" % target)


if __name__ == "__main__":
    main()
