#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_package
short_description: Plan and install a kernel that carries the fixes, from the node's own package sources
version_added: 1.1.0
description:
  - V(query) works out, from the node's apt sources or dnf repositories, which kernel release installing O(name) (or
    its pinned O(version)) would bring - on Debian and Ubuntu the meta-package's candidate depends on the versioned
    image C(linux-image-<release>); on EL and Fedora the C(kernel) package requires C(kernel-core-uname-r = <release>)
    (read with C(dnf repoquery --requires), then C(--provides)) - and fails, naming the problem, when the sources do not have the package or the
    version, when it installs no kernel image, or when its kernel would still be below O(min_release). Nothing is
    installed; run it before a node is drained.
  - A kernel not newer than the running one is refused unless O(allow_downgrade). On Ubuntu the meta-package chain
    (C(linux-generic) -> C(linux-image-generic) -> C(linux-image-<release>)) is followed through each package's
    C(Depends), up to four steps.
  - V(present) installs it (C(apt-get install --no-remove NAME=VERSION), non-interactive, keeping changed configuration files;
    C(dnf install -y NAME-VERSION), beside the running kernel - kernels are install-only packages there) and reports
    the release now in C(/boot). A release already installed changes nothing.
  - A kernel that failed to boot on this node before (recorded by M(nodefix.k8s.kernel_boot)) is refused too.
  - The package manager follows the node's C(/etc/os-release) - Debian and Ubuntu (apt), EL and Fedora (dnf);
    another family fails saying so. With O(root) other than C(/), dnf works on that tree (C(--installroot), the
    tree's own C(/etc/yum.repos.d)); apt does not (its commands read the running system's sources).
author:
  - nodefix.k8s developers (@nodefix)
options:
  state:
    description: V(query) plans; V(present) installs.
    type: str
    choices: [query, present]
    default: query
  name:
    description:
      - The package. Default, the distribution's meta-package - Debian C(linux-image-<arch>), Ubuntu
        C(linux-generic) (an HWE flavour such as V(linux-generic-hwe-22.04) when given), EL and Fedora C(kernel)
        (ELRepo's V(kernel-ml) or V(kernel-lt) when given, with O(enablerepo)).
    type: str
  version:
    description: A pinned version of O(name) (default, the candidate) - Debian's V(6.12.95-1~bpo12+1), RPM's
      C([EPOCH:]VERSION-RELEASE) such as V(5.14.0-427.13.1.el9_4).
    type: str
  default_release:
    description: The release apt prefers (C(apt-get -t)), for example V(bookworm-backports) - backports are not
      installed otherwise. apt only.
    type: str
  enablerepo:
    description: Repositories dnf enables for the query and the install (C(dnf --enablerepo)), for example
      V(elrepo-kernel) for ELRepo's C(kernel-ml). dnf only.
    type: list
    elements: str
    default: []
  update_cache:
    description:
      - Refresh the package lists (C(apt-get update); C(dnf makecache)) before planning - a node's lists may be weeks old, or (cloud
        images) empty. It changes no installed software.
      - In check mode the lists are fetched into a private directory instead (apt's C(Dir::State::Lists), dnf's
        C(cachedir)), read from there and removed - the node's own lists are not touched, and the plan is the one a
        real run would make.
    type: bool
    default: false
  allow_downgrade:
    description:
      - Allow a kernel that is not newer than the running one (compared in the package manager's order, dpkg's or rpm's).
        Off, such a plan is refused - a downgrade, or the running kernel again, is never installed or booted by
        accident.
    type: bool
    default: false
  min_release:
    description: The kernel version the installed kernel must reach (V(6.12)); a package whose kernel is older is
      refused.
    type: str
extends_documentation_fragment:
  - nodefix.k8s.attributes
  - nodefix.k8s.attributes.writes
  - nodefix.k8s.root
attributes:
  check_mode:
    details: V(present) plans and reports whether it would install; nothing is installed.
  diff_mode:
    support: none
    details: A package installation has no file diff; RV(release) and RV(version) say what is installed.
  platform:
    details: Debian and Ubuntu nodes (apt); EL and Fedora nodes (dnf).
seealso:
  - module: nodefix.k8s.kernel_boot
  - module: nodefix.k8s.kernel_info
"""

EXAMPLES = r"""
- name: Which kernel would fix this node (before draining it)
  nodefix.k8s.kernel_package:
    default_release: bookworm-backports
    min_release: "6.12"
  register: kernel_plan

- name: Install it
  nodefix.k8s.kernel_package:
    state: present
    name: "{{ kernel_plan.package }}"
    version: "{{ kernel_plan.version }}"
    default_release: bookworm-backports

- name: An EL node - ELRepo's mainline kernel, at least 6.12
  nodefix.k8s.kernel_package:
    name: kernel-ml
    enablerepo: [elrepo-kernel]
    min_release: "6.12"
"""

RETURN = r"""
package:
  description: The package planned or installed.
  returned: always
  type: str
  sample: linux-image-amd64
version:
  description: Its version.
  returned: always
  type: str
  sample: 6.12.95-1~bpo12+1
manager:
  description: The package manager used, from the node's C(/etc/os-release).
  returned: always
  type: str
  choices: [apt, dnf]
  sample: apt
release:
  description: The kernel release it installs (what C(uname -r) prints once booted).
  returned: always
  type: str
  sample: 6.12.95+deb12-amd64
installed_version:
  description: The package's version installed before the module ran (null when none; dnf, where kernels are
    installed side by side, the newest).
  returned: always
  type: str
kernel_installed:
  description:
    - Whether the kernel is installed after the module (before, in check mode) - the package manager says so (dpkg
      C(ii) for C(linux-image-<release>); rpm has the package providing C(kernel-uname-r = <release>)) and its boot
      files are there (C(/boot/vmlinuz-<release>) and its initramfs, C(/boot/initrd.img-<release>) or
      C(/boot/initramfs-<release>.img)).
  returned: always
  type: bool
not_installed_because:
  description: Why RV(kernel_installed) is false (a package dpkg has half-configured, a missing initramfs); null when it is true.
  returned: always
  type: str
  sample: "the package is installed but /boot/initrd.img-6.12.95+deb12-amd64 is missing"
lists:
  description:
    - Which package lists the plan was made from - V(as the node had them), V(refreshed) (O(update_cache)), or
      V(refreshed privately (check mode)) (O(update_cache) in check mode - fetched into a private directory that is
      removed afterwards, so the node's own lists are not touched).
  returned: always
  type: str
  sample: as the node had them
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nodefix.k8s.plugins.module_utils._core.exit import redacted_main, redacting
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import detect as kernel_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_record as kernel_boot_record
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import package as kernel_package_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import distro as kernel_distro
from ansible_collections.nodefix.k8s.plugins.module_utils._core.runner import Runner
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._kernel.detect import read_running_release


def below(min_release):
    def _below(release):
        info = kernel_detect.parse_release(release)
        if info is None:
            raise NodefixError("kernel release %r cannot be compared with min_release %s" % (release, min_release))
        return kernel_detect.below_minimum(info, min_release)
    return _below


def manager_family(runner, root):
    """``debian`` (apt) or ``el`` (dnf): the node's os-release first, then whichever tool the node has."""
    family = kernel_distro.family(root)
    if family is None:
        family = "debian" if runner.bin("apt-cache") else "el" if runner.bin("dnf") else None
    if family is None:
        raise NodefixError("neither apt-cache nor dnf was found and /etc/os-release names no Debian or EL family: "
                           "nodefix.k8s.kernel_package handles apt (Debian, Ubuntu) and dnf (EL, Fedora) nodes")
    return family


@redacted_main
def main():
    module = redacting(AnsibleModule)(
        argument_spec=dict(
            state=dict(type="str", choices=["query", "present"], default="query"),
            name=dict(type="str"),
            version=dict(type="str"),
            default_release=dict(type="str"),
            enablerepo=dict(type="list", elements="str", default=[]),
            min_release=dict(type="str"),
            update_cache=dict(type="bool", default=False),
            allow_downgrade=dict(type="bool", default=False),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    runner = Runner(module)
    lists = None
    try:
        family = manager_family(runner, p["root"])
        kernel_package_lib.check_input(p["name"], p["version"], p["default_release"], family, p["enablerepo"])
        errors = kernel_detect.option_errors({"min_release": p["min_release"]})
        if errors:
            raise NodefixError(errors[0])
        # check mode refreshes nothing on the node: the lists are fetched into a private directory
        if p["update_cache"] and module.check_mode:
            lists = tempfile.mkdtemp(prefix="nodefix-lists-", dir=module.tmpdir)
            os.mkdir(os.path.join(lists, "partial"))
        name = p["name"]
        if family == "el":
            pm = kernel_package_lib.Dnf(runner, p["enablerepo"], p["root"], lists=lists)
            name = name or kernel_package_lib.default_package(p["root"], None)
        else:
            if name is None:
                _rc, arch, _err = runner.run([runner.bin("dpkg", required=True), "--print-architecture"])
                name = kernel_package_lib.default_package(p["root"], arch.strip())
            pm = kernel_package_lib.Apt(runner, p["default_release"], lists=lists)
        if p["update_cache"]:
            pm.update()
        result = kernel_package_lib.plan(pm, name, p["version"], p["min_release"], below(p["min_release"]),
                                         running=read_running_release(p["root"]), allow_downgrade=p["allow_downgrade"])
        result["manager"] = "dnf" if family == "el" else "apt"
        result["lists"] = "refreshed privately (check mode)" if lists else (
            "refreshed" if p["update_cache"] else "as the node had them")
        failed = kernel_boot_record.read_record(p["root"])["failed"]
        if result["release"] in failed:
            raise NodefixError("kernel %s (%s %s) failed to boot on this node before (%s, came back on %s): it is not "
                               "tried again; fix the cause and remove its entry from %s to try once more"
                               % (result["release"], result["package"], result["version"],
                                  failed[result["release"]].get("at"), failed[result["release"]].get("came_back_on"),
                                  kernel_boot_record.RECORD))
        present, why = kernel_package_lib.installed(pm, p["root"], result["release"])
        result["not_installed_because"] = why
        changed = p["state"] == "present" and not present
        if changed and not module.check_mode:
            pm.install(result["package"], result["version"])
            present, why = kernel_package_lib.installed(pm, p["root"], result["release"])
            if not present:
                raise NodefixError("%s installed %s %s but kernel %s is not installed: %s" % (
                    result["manager"], result["package"], result["version"], result["release"], why))
            result["not_installed_because"] = None
    except NodefixError as exc:
        module.fail_json(**exc.fail_kwargs())
    finally:
        if lists:
            shutil.rmtree(lists, ignore_errors=True)
    module.exit_json(changed=changed, kernel_installed=present, **result)


if __name__ == "__main__":
    main()
