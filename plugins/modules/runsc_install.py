#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runsc_install
short_description: Install runsc from a gVisor release mirror, checksum first, with rollback
version_added: 1.1.0
description:
  - Downloads a gVisor release (runsc, and containerd-shim-runsc-v1) from a mirror laid out like gVisor's release
    bucket (U(https://gvisor.dev/docs/user_guide/install/)) and installs it in one module round trip.
  - O(layout=loose) downloads C(<base_url>/<release>/<arch>/runsc) (and C(containerd-shim-runsc-v1)), each with its
    C(.sha512); O(layout=tarball) downloads C(gvisor.tar.bz2) and its C(.sha512) and unpacks runsc, the shim and
    C(gvisor-bin/) from it (regular files and directories only; absolute and C(..) names are skipped).
  - Every file's sha512 is compared with the one pinned in O(checksums), else with the one the mirror publishes,
    before anything is unpacked, run or installed. A plain-HTTP mirror needs O(allow_insecure) and a pinned
    checksum for every file (a checksum from the same plain-HTTP mirror proves nothing).
  - The downloaded runsc must answer C(--version) with a release at or after O(minimum_release); only then are the
    files replaced. The old binaries are copied aside as C(<path>.nodefix-<old version>) (an existing copy is kept)
    and the new ones moved in atomically (through a symlink, mode C(0755), owned by root).
  - The runsc now installed is run again and must report the downloaded version; any failure after the first file
    was replaced puts every replaced file back. The temporary downloads are always removed.
  - Nothing changes when O(dest) (and the shim, and C(gvisor-bin/)) already hold exactly the downloaded files.
author:
  - nodefix.k8s developers (@nodefix)
options:
  base_url:
    description:
      - The mirror, without the release and architecture (for example C(https://storage.googleapis.com/gvisor/releases/release)).
      - Credentials belong in O(username) and O(password) (or O(password_file)), or O(headers). A URL that still
        carries them (C(https://user:password@host/...)) works - they are used when those options set none - but
        the module warns, and the URL it returns and shows is the one without them.
    type: str
    required: true
  username:
    description: The user name of the mirror's Basic authentication (RFC 7617), sent with every request.
    type: str
  password:
    description: The password of the mirror's Basic authentication. Never shown (C(no_log)).
    type: str
  password_file:
    description:
      - A file on the node holding the password (its one line; a trailing newline is dropped). Its content is
        never shown.
    type: path
  headers:
    description:
      - Extra request headers for every request to the mirror, for example C(X-JFrog-Art-Api) or an
        C(Authorization) header of another scheme (which then replaces the Basic one). Their values are never
        shown (C(no_log)).
      - A redirect to another origin (scheme, host or port; a mirror handing off to object storage) is followed
        without the credentials - C(Authorization) and every header given here, whatever its name (only
        C(Accept), C(User-Agent) and the like go on); a redirect from C(https) to C(http) fails the download (see
        docs/safety.md, Downloads).
    type: dict
    default: {}
  release:
    description: V(latest), or a release as C(YYYYMMDD) or C(YYYYMMDD.N) (a C(release-) prefix is accepted).
    type: str
    required: true
  arch:
    description: The build to download, V(x86_64) or V(aarch64); empty means the node's own architecture.
    type: str
    default: ""
  layout:
    description: How the mirror lays out a release.
    type: str
    choices: [loose, tarball]
    default: loose
  install_shim:
    description: Install containerd-shim-runsc-v1 too (the tarball must then hold it).
    type: bool
    default: true
  dest:
    description: Where runsc is installed.
    type: path
    default: /usr/local/bin/runsc
  shim_dest:
    description: Where containerd-shim-runsc-v1 is installed.
    type: path
    default: /usr/local/bin/containerd-shim-runsc-v1
  checksums:
    description:
      - Pinned sha512 digests by file name (C(runsc), C(containerd-shim-runsc-v1), C(gvisor.tar.bz2)); a file without
        one is checked against the C(.sha512) the mirror publishes.
    type: dict
    default: {}
  allow_insecure:
    description: Allow a plain-HTTP O(base_url) (every file then needs a pinned checksum).
    type: bool
    default: false
  validate_certs:
    description: Verify the mirror's TLS certificate.
    type: bool
    default: true
  ca_path:
    description: A CA bundle to verify a private mirror's certificate with.
    type: path
  timeout:
    description: Seconds each request may take.
    type: int
    default: 60
  minimum_release:
    description: The oldest runsc release the download may be (the google/gvisor#9580 fix by default).
    type: str
    default: "20231106.0"
  containerd_config:
    description: containerd's configuration, read for the plan returned after the install.
    type: path
    default: /etc/containerd/config.toml
  kubelet_unit:
    description: The kubelet's systemd unit, read for the node's cgroup driver.
    type: str
    default: kubelet.service
  runtime_name:
    description: The containerd runtime name the returned plan is made for.
    type: str
    default: runsc
  shim_config_path:
    description: The shim configuration file the returned plan is made for.
    type: path
    default: /etc/containerd/runsc.toml
  systemd_cgroup:
    description: The returned plan's C(systemd-cgroup) policy (see M(nodefix.k8s.runsc_info)).
    type: str
    choices: [auto, never]
    default: auto
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
attributes:
  check_mode:
    details: Downloads and verifies the files and runs the new runsc's C(--version), then reports the change without
      replacing anything.
  diff_mode:
    details: The runsc version before and after.
  platform:
    details: Linux nodes, x86_64 or aarch64.
notes:
  - The role C(nodefix.k8s.gvisor) calls this module for its mirror upgrade and restarts containerd afterwards; the
    module itself restarts nothing.
seealso:
  - module: nodefix.k8s.runsc_info
  - name: Installing gVisor
    description: The release bucket's layout and its checksums.
    link: https://gvisor.dev/docs/user_guide/install/
"""

EXAMPLES = r"""
- name: Upgrade runsc from a private HTTPS mirror (published checksums)
  nodefix.k8s.runsc_install:
    base_url: https://mirror.example.com/gvisor/release
    release: "20240729.0"
    dest: /usr/bin/runsc
    shim_dest: /usr/bin/containerd-shim-runsc-v1
    ca_path: /etc/pki/mirror-ca.pem

- name: From a mirror that needs credentials (the password in a vault or an AWX credential)
  nodefix.k8s.runsc_install:
    base_url: https://mirror.example.com/gvisor/release
    release: "20240729.0"
    username: robot
    password: "{{ mirror_password }}"
    headers:
      X-JFrog-Art-Api: "{{ mirror_api_key }}"

- name: The tarball layout, its checksum pinned
  nodefix.k8s.runsc_install:
    base_url: https://mirror.example.com/gvisor/release
    release: "20240729.0"
    layout: tarball
    checksums:
      gvisor.tar.bz2: "{{ gvisor_tarball_sha512 }}"
"""

RETURN = r"""
url:
  description: The release directory the files came from.
  returned: success
  type: str
  sample: https://mirror.example.com/gvisor/release/20240729.0/x86_64
files:
  description: Each downloaded file, its sha512 and where the expected digest came from (V(pinned) or V(mirror)).
  returned: success
  type: list
  elements: dict
  sample: [{"name": "runsc", "sha512": "9f86d0...", "source": "mirror"}]
version_before:
  description: What the runsc at O(dest) reported before (null when there was none or it did not answer).
  returned: success
  type: str
  sample: 0.0~20221219.0
version:
  description: What the downloaded runsc reports.
  returned: success
  type: str
  sample: release-20240729.0
installed:
  description: The files replaced (or that would be, in check mode).
  returned: success
  type: list
  elements: str
  sample: [/usr/bin/runsc, /usr/bin/containerd-shim-runsc-v1]
backups:
  description: The copies of the old binaries made by this run (C(<path>.nodefix-<old version>)).
  returned: success
  type: list
  elements: str
  sample: [/usr/bin/runsc.nodefix-0.0_20221219.0]
runsc:
  description: The runsc at O(dest) as M(nodefix.k8s.runsc_info) reports it, read again after the install.
  returned: success
  type: dict
plan:
  description: M(nodefix.k8s.runsc_info)'s plan, made again against the runsc now installed.
  returned: success
  type: dict
"""

import os
import platform
import re
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import detect as gvisor_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import node_config as gvisor_node_config
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import version as gvisor_version
from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import install as gvisor_install
from ansible_collections.nodefix.k8s.plugins.module_utils._core import mirror_auth, redirects
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema

PLAN_OPTIONS = ("containerd_config", "kubelet_unit", "minimum_release", "runtime_name", "shim_config_path",
                "systemd_cgroup")


def build_module():
    return redacting(AnsibleModule)(
        argument_spec=dict(
            base_url=dict(type="str", required=True),
            username=dict(type="str"),
            password=dict(type="str", no_log=True),
            password_file=dict(type="path"),
            headers=dict(type="dict", default={}, no_log=True),
            release=dict(type="str", required=True),
            arch=dict(type="str", default=""),
            layout=dict(type="str", choices=["loose", "tarball"], default="loose"),
            install_shim=dict(type="bool", default=True),
            dest=dict(type="path", default="/usr/local/bin/runsc"),
            shim_dest=dict(type="path", default="/usr/local/bin/" + gvisor_node_config.SHIM_NAME),
            checksums=dict(type="dict", default={}),
            allow_insecure=dict(type="bool", default=False),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
            timeout=dict(type="int", default=60),
            minimum_release=dict(type="str", default=gvisor_version.FIXED_RELEASE),
            containerd_config=dict(type="path", default=gvisor_node_config.DEFAULT_CONTAINERD_CONFIG),
            kubelet_unit=dict(type="str", default=kubelet_schema.UNIT),
            runtime_name=dict(type="str", default="runsc"),
            shim_config_path=dict(type="path", default=gvisor_node_config.DEFAULT_SHIM_CONFIG),
            systemd_cgroup=dict(type="str", choices=["auto", "never"], default="auto"),
        ),
        mutually_exclusive=[("password", "password_file")],
        supports_check_mode=True,
    )


def _current(runner, dest):
    """(parsed version or None, the text for messages) of the runsc at ``dest`` now."""
    if not (os.path.isfile(dest) and os.access(dest, os.X_OK)):
        return None, "%s is still %s" % (dest, "absent" if not os.path.lexists(dest) else "not an executable file")
    parsed, _raw = gvisor_version.runsc_version(runner, dest)
    return parsed, "%s is still runsc %s" % (dest, parsed["version"] if parsed else "(version unknown)")


def _new_files(p, url, workdir):
    """(runsc, shim or None, gvisor-bin or None) downloaded and verified in ``workdir``."""
    if p["layout"] == "tarball":
        runsc, shim, bindir = gvisor_install.unpack(os.path.join(workdir, gvisor_install.TARBALL), workdir)
        if not runsc or (p["install_shim"] and not shim):
            raise gvisor_install.InstallError("%s/%s has no runsc%s; nothing was replaced" % (
                url, gvisor_install.TARBALL, " or no " + gvisor_node_config.SHIM_NAME if p["install_shim"] else ""))
        return runsc, shim if p["install_shim"] else None, bindir
    return (os.path.join(workdir, "runsc"),
            os.path.join(workdir, gvisor_node_config.SHIM_NAME) if p["install_shim"] else None, None)


def _same(new, dest):
    """Whether ``dest`` (through a symlink) holds exactly ``new``: sizes first, hashed only when they agree."""
    real = os.path.realpath(dest)
    return (os.path.isfile(real) and os.path.getsize(real) == os.path.getsize(new)
            and gvisor_install.sha512_of(real) == gvisor_install.sha512_of(new))


def _tree_same(src, dest):
    for dirpath, _dirs, files in os.walk(src):
        for name in files:
            if not _same(os.path.join(dirpath, name), os.path.join(dest, os.path.relpath(dirpath, src), name)):
                return False
    return True


def _install(module, runner, p, new, bindest, workdir, before, expected):
    """Back up, replace, read again (it must report ``expected``, the downloaded runsc's version);
    undo everything on any failure. Returns (installed, backups)."""
    runsc, shim, bindir = new
    suffix = re.sub(r"[^A-Za-z0-9._-]", "_", before["version"] if before else "unknown")
    inst = gvisor_install.Installer(module, workdir)
    targets = [(runsc, p["dest"])] + ([(shim, p["shim_dest"])] if shim else [])
    try:
        for _new, dest in targets:
            inst.backup(dest, suffix)
        for src, dest in targets:
            inst.replace(src, dest)
        if bindir:
            gvisor_install.copy_tree(bindir, bindest)
        parsed, raw = gvisor_version.runsc_version(runner, p["dest"])
        if parsed is None or parsed["version"] != expected["version"]:
            raise gvisor_install.InstallError("%s reports %s after the install, expected %s" % (
                p["dest"], raw or "nothing", expected["version"]), version_output=raw)
    except (NodefixError, EnvironmentError) as exc:
        inst.undo()
        msg = exc.msg if isinstance(exc, NodefixError) else str(exc)
        raise gvisor_install.InstallError("%s; the old files were put back" % msg)
    return [dest for _src, dest in targets] + ([bindest] if bindir else []), inst.backups


def _mirror(module, p):
    """(the base URL without user information, the headers of every request): the credentials from the options,
    else from the URL (with a warning naming the options); every secret added to the values Ansible masks."""
    base_url, url_user, url_password = mirror_auth.split_userinfo(p["base_url"], "base_url")
    password = p["password"]
    if p["password_file"]:
        password = mirror_auth.read_password_file(p["password_file"])
    if url_user is not None or url_password is not None:
        module.warn("base_url carries credentials (user information in the URL): set username and password (or "
                    "password_file) instead (the role: gvisor_mirror_username, gvisor_mirror_password); the URL is "
                    "shown without them")
    username = p["username"] if p["username"] is not None else url_user
    password = password if password is not None else url_password
    for secret in (password, url_user if url_password is None else None):
        if secret:
            module.no_log_values.add(secret)
    return base_url, mirror_auth.request_headers(username, password, p["headers"])


class NoRedirects(object):
    """``module`` as ``fetch_url`` reads it, with ``follow_redirects`` none (the module has no such option: fetch_url
    would follow every redirect with every header, ``Authorization`` included); everything else is the module's."""

    def __init__(self, module):
        self._module = module
        self.params = dict(module.params, follow_redirects="none")

    def __getattr__(self, name):
        return getattr(self._module, name)


def run(module, runner, p, workdir):
    arch = p["arch"] or platform.machine()
    if arch not in gvisor_install.ARCHES:
        raise gvisor_install.InstallError("gVisor publishes x86_64 and aarch64 builds only; this node is %s" % arch)
    base_url, headers = _mirror(module, p)
    url = "%s/%s/%s" % (base_url.rstrip("/"), gvisor_install.release_dir(p["release"]), arch)
    before, still = _current(runner, p["dest"])

    def fetch(u):
        # redirects judged by the collection's one policy (_core/redirects.py): no credential to another origin,
        # no https -> http
        return redirects.fetch_following(
            lambda url, sent: fetch_url(NoRedirects(module), url, timeout=p["timeout"], ca_path=p["ca_path"],
                                        headers=sent), u, headers)

    files = gvisor_install.verify(fetch, url, workdir, gvisor_install.files_for(p["layout"], p["install_shim"]), p["checksums"], still)
    new = _new_files(p, url, workdir)
    downloaded = gvisor_install.check_new_runsc(runner, new[0], url + "/runsc", p["minimum_release"])
    # gvisor-bin/ goes beside the runsc the link points to
    bindest = os.path.join(os.path.dirname(os.path.realpath(p["dest"])), gvisor_install.BINDIR)
    same = (_same(new[0], p["dest"]) and (not new[1] or _same(new[1], p["shim_dest"]))
            and (not new[2] or _tree_same(new[2], bindest)))
    installed, backups = [], []
    if not same and not module.check_mode:
        installed, backups = _install(module, runner, p, new, bindest, workdir, before, downloaded)
    elif not same:
        installed = [p["dest"]] + ([p["shim_dest"]] if new[1] else [])
    opts = dict((k, p[k]) for k in PLAN_OPTIONS)
    if os.path.isfile(p["dest"]) and os.access(p["dest"], os.X_OK):
        opts["runsc_path"] = p["dest"]
    facts = gvisor_detect.check(runner, root="/", inspect_sandboxes=False, **opts)
    result = dict(changed=not same, url=url, files=files, version_before=before["version"] if before else None,
                  version=downloaded["version"], installed=installed, backups=backups, runsc=facts["runsc"],
                  plan=facts["plan"])
    if module._diff:
        result["diff"] = {"before_header": p["dest"], "after_header": p["dest"],
                          "before": "runsc %s\n" % result["version_before"],
                          "after": "runsc %s\n" % (downloaded["version"] if not same else result["version_before"])}
    return result


@redacted_main
def main():
    module = build_module()
    p = module.params
    errors = gvisor_install.input_errors(p)
    if errors:
        module.fail_json(msg="; ".join(errors) + "; nothing was downloaded")
    workdir = tempfile.mkdtemp(prefix="nodefix-gvisor-")
    try:
        result = run(module, Runner(module), p, workdir)
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
