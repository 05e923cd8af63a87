#!/usr/bin/env python
# SPDX-License-Identifier: GPL-3.0-or-later
"""Put an offline get-pip stand-in where ansible-test looks for it.

ansible-test (--venv/--requirements) bootstraps pip in each test venv by
running ``~/.ansible/test/cache/get_pip_<version>.py <pip install args>
[--no-setuptools] [--no-wheel]``, downloading that script when it is not
cached. The download host is not reachable from the project's machines, so
this writes a stand-in that uses ``ensurepip`` and then pip's own installer.
"""

import os
import re

import ansible_test

STANDIN = '''#!/usr/bin/env python
# Offline stand-in for get-pip.py written by nodefix.k8s scripts/offline_get_pip.py
import ensurepip
import os
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
ensurepip.bootstrap(upgrade=True)
env = dict(os.environ)
# ansible-test runs this with a filtered environment: the bundled pip then
# misses the CA bundle of machines behind a TLS-inspecting proxy. Point it at
# the system bundle (the pip installed next uses the system trust store).
for bundle in ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"):
    if "REQUESTS_CA_BUNDLE" not in env and os.path.exists(bundle):
        env["REQUESTS_CA_BUNDLE"] = bundle
if args:
    sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + args, env=env))
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
