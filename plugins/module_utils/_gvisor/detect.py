# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""gVisor (runsc) detector: sandboxes that ignore their pod's memory limit.

Sources:

- google/gvisor#9580, fixed by PR #9631, first in release-20231106.0: under
  cgroup v2 older runsc read ``memory.max``/``cpu.max`` of the leaf cgroup
  only, saw ``max`` and sized the sandbox to the whole host.
- ``systemd-cgroup`` exists from release-20220321.0 (PR #7287); runsc's
  systemd driver needs systemd >= 244 and cgroup v2 (g3doc/user_guide/systemd.md).
  Measured in this project's lab on a hybrid (v1) node: runsc 0.0~20221219.0
  given ``--systemd-cgroup`` and ``system.slice:prefix:id`` creates the literal
  cgroup ``/system.slice:prefix:id`` at the top of every v1 hierarchy.
- The shim (containerd-shim-runsc-v1) reads its config only from the
  ``ConfigPath`` option of containerd's runsc runtime; ``[runsc_config]`` is a
  ``map[string]string`` (an unquoted ``true`` breaks decoding) and each entry
  becomes ``--key=value`` on runsc's command line.
- Live sandboxes: the ``runsc-sandbox`` process (``runsc ... boot ... <id>``)
  carries ``--total-memory <bytes>``; compare with the effective memory limit of
  its cgroup found by walking up the tree. Measured in the lab: on cgroup v2
  (the VM node) a sandbox without a limit of its own in a 256 MiB pod slice
  starts with the VM's RAM under 0.0~20221219.0 (``--total-memory 2060419072``)
  and with 268435456 under 0.0~20240729.0 (``--total-memory=268435456``); on
  cgroup v1 both builds size such a sandbox to the host's RAM, so only the live
  check proves a node.

``check()`` reads the node once (one ``runsc --version``, one pass over
``/proc``) and never changes anything.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._core import cgroup as core_cgroup
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import UNIT as KUBELET_UNIT, unit_name_errors
from ansible_collections.nodefix.k8s.plugins.module_utils._core.findings import finding_from
from ansible_collections.nodefix.k8s.plugins.module_utils._core.paths import read_text, root_path
from ansible_collections.nodefix.k8s.plugins.module_utils._core.procfs import pid_files
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

# First release with the #9580 fix (google/gvisor PR #9631).
FIXED_RELEASE = "20231106.0"
# First release with the systemd cgroup driver (google/gvisor PR #7287).
SYSTEMD_CGROUP_RELEASE = "20220321.0"

RUNSC_RUNTIME_TYPE = "io.containerd.runsc.v1"
RUNSC_TYPE_URL = "io.containerd.runsc.v1.options"
DEFAULT_CONTAINERD_CONFIG = "/etc/containerd/config.toml"
DEFAULT_SHIM_CONFIG = "/etc/containerd/runsc.toml"
SHIM_NAME = "containerd-shim-runsc-v1"

FINDINGS = {
    "gvisor.runsc_outdated": {
        "severity": "high",
        "title": "runsc predates the fix for google/gvisor#9580 (cgroup v2 sandboxes sized to the whole host)",
        "remedy": ("Upgrade runsc to release-20231106.0 or later (role nodefix.k8s.gvisor, tag gvisor_upgrade), "
                   "then recreate the gVisor pods started before the upgrade."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.runsc_version_unknown": {
        "severity": "medium",
        "title": "The runsc version could not be determined",
        "remedy": "Run `runsc --version` by hand; install a tagged release so the #9580 fix can be verified.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.runsc_missing": {
        "severity": "high",
        "title": "containerd has a runsc runtime but no runsc binary was found",
        "remedy": "Install runsc (role nodefix.k8s.gvisor) or remove the runtime from containerd's config.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.shim_missing": {
        "severity": "medium",
        "title": "containerd has a runsc runtime but containerd-shim-runsc-v1 was not found",
        "remedy": "Install containerd-shim-runsc-v1 from the same gVisor release as runsc.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.no_config_path": {
        "severity": "high",
        "title": "containerd's runsc runtime has no ConfigPath: the shim never reads a runsc.toml",
        "remedy": ("Set the runtime's options TypeUrl/ConfigPath to the shim config (role nodefix.k8s.gvisor, "
                   "tag gvisor_containerd) and restart containerd."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_containerd",
    },
    "gvisor.config_missing": {
        "severity": "high",
        "title": "The shim config named by ConfigPath does not exist",
        "remedy": "Write the shim config (role nodefix.k8s.gvisor, tag gvisor_config).",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.config_invalid": {
        "severity": "high",
        "title": "The shim config cannot be decoded by containerd-shim-runsc-v1",
        "remedy": ("Fix the TOML; every [runsc_config] value must be a quoted string "
                   "(systemd-cgroup = \"true\"), an unquoted true makes the shim fail for every pod."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.systemd_cgroup_missing": {
        "severity": "high",
        "title": "The node uses the systemd cgroup driver but runsc is not told (systemd-cgroup)",
        "remedy": ("Set [runsc_config] systemd-cgroup = \"true\" in the shim config (role nodefix.k8s.gvisor, "
                   "tag gvisor_config); without it sandboxes land outside their pod slice."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.systemd_cgroup_on_cgroupfs": {
        "severity": "high",
        "title": "systemd-cgroup is set for runsc on a node using the cgroupfs driver",
        "remedy": "Remove systemd-cgroup from [runsc_config]: on a cgroupfs node it breaks every gVisor pod.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.systemd_cgroup_unsupported": {
        "severity": "high",
        "title": "systemd-cgroup is configured but this runsc is older than release-20220321.0",
        "remedy": "Upgrade runsc (role nodefix.k8s.gvisor, tag gvisor_upgrade): older runsc refuses the flag.",
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_upgrade",
    },
    "gvisor.systemd_cgroup_needs_v2": {
        "severity": "medium",
        "title": "systemd cgroup driver on a cgroup v1/hybrid node: runsc's systemd driver needs cgroup v2",
        "remedy": ("runsc supports the systemd driver on cgroup v2 (systemd >= 244) only; on v1 it creates a "
                   "literal '<slice>:<prefix>:<id>' cgroup outside the pod. Move the node to cgroup v2 or to the "
                   "cgroupfs driver; the live sandbox check shows which sandboxes are affected."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_config",
    },
    "gvisor.sandbox_oversized": {
        "severity": "critical",
        "title": "A running gVisor sandbox is sized above its effective memory limit",
        "remedy": ("The sandbox was sized before the fix (or by an unfixed runsc): after fixing runsc and its "
                   "config, recreate the pod (role nodefix.k8s.gvisor, gvisor_evict_pods) so a new sandbox is "
                   "sized to the limit."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_verify",
    },
    "gvisor.sandbox_outside_pod_slice": {
        "severity": "high",
        "title": "A Kubernetes gVisor sandbox runs in a cgroup outside any kubepods slice",
        "remedy": ("No pod limit applies to it. Fix the cgroup driver settings (systemd-cgroup, cgroup v2), "
                   "then recreate the pod."),
        "role": "nodefix.k8s.gvisor", "tag": "gvisor_verify",
    },
}

# runsc version output (upstream release builds, git builds and Debian packages):
#   runsc version release-20231009.0            (tagged upstream)
#   runsc version release-20201216.0-72-gbf343394d498   (untagged build)
#   runsc version 0.0~20221219.0                (Debian package)
_UPSTREAM_RE = lazy_compile(r"release-(\d{8})(?:\.(\d+))?(?:-(\d+)-g([0-9a-f]+))?")
_DEBIAN_RE = lazy_compile(r"^\d+(?:\.\d+)*~(?:git)?(\d{8})(?:\.(\d+))?")
_BARE_RE = lazy_compile(r"^(\d{8})(?:\.(\d+))?$")
_VERSION_LINE_RE = lazy_compile(r"runsc version\s+(\S+)")


def parse_release(text):
    """Parse one runsc version string into a dict, or None.

    Accepts ``release-20231009.0``, ``release-20201216.0-72-gbf343394d498``,
    ``0.0~20221219.0`` and a bare ``20231106.0``. ``key`` orders versions:
    (date, patch, commits after the tag).
    """
    if not text:
        return None
    text = text.strip()
    m = _UPSTREAM_RE.search(text)
    flavor = "upstream"
    if not m:
        m = _DEBIAN_RE.match(text)
        flavor = "debian"
    if not m:
        m = _BARE_RE.match(text)
        flavor = "release"
    if not m:
        return None
    date = int(m.group(1))
    patch = int(m.group(2) or 0)
    commits = int(m.group(3)) if flavor == "upstream" and m.group(3) else 0
    commit = m.group(4) if flavor == "upstream" and m.group(4) else None
    return {
        "version": text,
        "release": "%d.%d" % (date, patch),
        "date": date,
        "patch": patch,
        "commits_after_tag": commits,
        "commit": commit,
        "untagged": bool(commit),
        "flavor": flavor,
        "key": [date, patch, commits],
    }


def parse_runsc_version(output):
    """Parse the output of ``runsc --version`` (two lines); None if unknown."""
    m = _VERSION_LINE_RE.search(output or "")
    if not m:
        return None
    return parse_release(m.group(1))


def release_ge(parsed, minimum):
    """True when the parsed version is at or after release ``minimum``."""
    want = parse_release(minimum)
    if parsed is None or want is None:
        return False
    return list(parsed["key"]) >= [want["date"], want["patch"], 0]


# ---------------------------------------------------------------- TOML


def load_toml(text):
    """Parse TOML text into plain dicts (containerd's reader: tomlkit, else tomllib); ValueError on bad TOML."""
    try:
        return containerd_detect.parse_plain(text)
    except containerd_detect.ContainerdConfigError as exc:
        raise ValueError(str(exc))


def read_containerd(root, config_path):
    """What containerd's config says about runsc and runc's cgroup driver.

    Read by the containerd detector's reader (``containerd_detect.read_runtimes``):
    schemas 1 to 4, tomlkit or tomllib; this only picks the runsc runtimes.
    """
    ctd = containerd_detect.read_runtimes(root, config_path)
    info = dict((k, ctd[k]) for k in ("config_path", "exists", "error", "schema_version", "runc_systemd_cgroup"))
    info["runsc_runtimes"] = []
    for rt in ctd["runtimes"]:
        if rt["runtime_type"] == RUNSC_RUNTIME_TYPE or rt["name"] == "runsc":
            info["runsc_runtimes"].append({
                "name": rt["name"],
                "runtime_type": rt["runtime_type"],
                "type_url": rt["options"].get("TypeUrl"),
                "config_path": rt["options"].get("ConfigPath"),
            })
    return info


def node_cgroup_driver(runner, root, ctd, kubelet_unit=KUBELET_UNIT):
    """(driver, source, kubelet facts): the kubelet's effective cgroupDriver (flags >
    drop-ins > --config file, read by the kubelet detector's reader), else
    containerd's runc ``SystemdCgroup``, else the kubelet's default cgroupfs."""
    kube = kubelet_node.cgroup_driver(runner, root, kubelet_unit)
    if kube["driver"]:
        where = kube["flag"] or kube["path"] or "-"
        return kube["driver"], "kubelet %s %s" % (kube["source"], where), kube
    if ctd["runc_systemd_cgroup"]:
        return "systemd", "%s (runc SystemdCgroup = true)" % ctd["config_path"], kube
    if ctd["runc_systemd_cgroup"] is False:
        return "cgroupfs", "%s (runc SystemdCgroup = false)" % ctd["config_path"], kube
    return "cgroupfs", "default (no kubelet cgroupDriver, no runc SystemdCgroup)", kube


def read_shim_config(root, path):
    """Read and check the shim config: quoted strings in [runsc_config]."""
    info = {"path": path, "exists": False, "valid": None, "error": None, "runsc_config": {},
            "systemd_cgroup": None, "settings": {}}
    text = read_text(root_path(root, path))
    if text is None:
        return info
    info["exists"] = True
    try:
        data = load_toml(text)
    except ValueError as exc:
        info["valid"] = False
        info["error"] = "cannot parse %s: %s" % (path, exc)
        return info
    table = data.get("runsc_config", {})
    if not isinstance(table, dict):
        info["valid"] = False
        info["error"] = "%s: runsc_config must be a table" % path
        return info
    bad = sorted(k for k, v in table.items() if not isinstance(v, str))
    if bad:
        info["valid"] = False
        info["error"] = ("%s: [runsc_config] values must be quoted strings (map[string]string); not a string: %s"
                         % (path, ", ".join("%s = %s" % (k, _toml_repr(table[k])) for k in bad)))
    else:
        info["valid"] = True
    info["runsc_config"] = dict((k, v if isinstance(v, str) else _toml_repr(v)) for k, v in table.items())
    info["settings"] = dict((k, v) for k, v in data.items() if not isinstance(v, dict))
    value = table.get("systemd-cgroup")
    if value is not None:
        info["systemd_cgroup"] = (value if isinstance(value, str) else _toml_repr(value)).lower() == "true"
    return info


def _toml_repr(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---------------------------------------------------------------- live sandboxes


def _flag(argv, name):
    """Value of a Go flag (``--name=v``, ``-name=v``, ``--name v``) in argv."""
    for i, arg in enumerate(argv):
        for prefix in ("--", "-"):
            flag = prefix + name
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(flag + "="):
                return arg[len(flag) + 1:]
    return None


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def sandbox_from_cmdline(argv):
    """Parse a runsc sandbox command line; None when it is not one.

    The sandbox is the process runsc re-executes as ``runsc-sandbox``
    (``runsc-sandbox --root=... boot ... --total-memory 25276510208 ... <id>``,
    measured in the lab); builds that do not rename keep ``runsc ... boot``.
    """
    if not argv:
        return None
    prog = os.path.basename(argv[0])
    if prog != "runsc-sandbox":
        if not prog.startswith("runsc") or prog in ("runsc-gofer",) or "boot" not in argv[1:]:
            return None
    if "boot" not in argv[1:]:
        return None
    cid = argv[-1] if not argv[-1].startswith("-") else None
    return {
        "container_id": cid,
        "total_memory": _int_or_none(_flag(argv, "total-memory")),
        "total_host_memory": _int_or_none(_flag(argv, "total-host-memory")),
        "runsc_root": _flag(argv, "root"),
        "bundle": _flag(argv, "bundle"),
        "systemd_cgroup": (_flag(argv, "systemd-cgroup") or "").lower() == "true" or "--systemd-cgroup" in argv,
    }


def _pod_of(path):
    """describe_path plus the literal ``slice:prefix:name`` form of misplaced sandboxes."""
    desc = core_cgroup.describe_path(path)
    parts = [p for p in (path or "").split("/") if p]
    literal = [p for p in parts if p.count(":") == 2]
    desc["literal_systemd_path"] = bool(literal)
    if literal:
        slice_name, prefix, name = literal[-1].split(":")
        inner = core_cgroup.describe_path("/" + slice_name)
        desc["pod_uid"] = desc["pod_uid"] or inner["pod_uid"]
        desc["qos"] = desc["qos"] or inner["qos"]
        if re.match(r"^[0-9a-f]{12,64}$", name):
            desc["container_id"] = name
        if prefix == "cri-containerd":
            desc["runtime"] = "containerd"
        # a literal path is never inside the pod's slice, whatever its name says
        desc["in_kubepods"] = False
    return desc


def scan_sandboxes(root="/", mode=None):
    """One pass over /proc: every runsc sandbox with its size and its cgroup's limit.

    Only ``cmdline`` is read for every process; ``cgroup`` only for sandboxes.
    """
    mode = mode or core_cgroup.layout(root)
    controller = "" if mode == "v2" else "memory"
    roots = core_cgroup.mount_roots(root)
    proc = root_path(root, "/proc")
    sandboxes = []
    seen = set()
    for pid, raw in pid_files(proc, "cmdline"):
        if not raw or "boot" not in raw:
            continue
        argv = [a for a in raw.split("\0") if a != ""]
        sb = sandbox_from_cmdline(argv)
        if sb is None:
            continue
        key = sb["container_id"] or pid
        if key in seen:
            continue
        seen.add(key)
        cgroups = core_cgroup.parse_proc_cgroup(read_text(os.path.join(proc, str(pid), "cgroup")))
        proc_path = core_cgroup.path_for(cgroups, mode, controller)
        if proc_path is None and mode != "v2":
            proc_path = cgroups.get("")
        cg_path = core_cgroup.local_path(roots, controller, proc_path)
        limit = core_cgroup.memory_limit(root, mode, cg_path)
        desc = _pod_of(proc_path)
        k8s = bool((sb["runsc_root"] or "").find("k8s.io") >= 0 or desc["runtime"] == "containerd"
                   or desc["pod_uid"] or desc["literal_systemd_path"])
        total = sb["total_memory"]
        oversized = bool(total is not None and limit["limit"] is not None and total > limit["limit"])
        sb.update({
            "pid": pid,
            "cgroup": proc_path,
            "cgroup_local": cg_path,
            "cgroup_found": limit["exists"],
            "memory_limit": limit["limit"],
            "limited_by": limit["limited_by"],
            "leaf_limit": limit["leaf_limit"],
            "pod_uid": desc["pod_uid"],
            "qos": desc["qos"],
            "pod_container_id": desc["container_id"],
            "in_kubepods": desc["in_kubepods"],
            "kubernetes": k8s,
            "outside_pod_slice": bool(k8s and not desc["in_kubepods"]),
            "oversized": oversized,
            "excess_bytes": (total - limit["limit"]) if oversized else 0,
        })
        sandboxes.append(sb)
    return sandboxes


def _mib(value):
    return None if value is None else round(value / 1048576.0, 1)


# ---------------------------------------------------------------- detector


def runsc_version(runner, path):
    """(parsed or None, raw output) of ``<path> --version``."""
    rc, out, err = runner.run([path, "--version"], check=False)
    text = (out or "") + (err or "")
    return (parse_runsc_version(text) if rc == 0 else None), text.strip()


# The detector's options (an Ansible argument spec): runsc_info's
# argument_spec and node_audit's options.gvisor, checked by _core.options.
OPTIONS = {
    "runsc_path": {"type": "path"},
    "shim_path": {"type": "path"},
    "containerd_config": {"type": "path", "default": DEFAULT_CONTAINERD_CONFIG},
    "kubelet_unit": {"type": "str", "default": KUBELET_UNIT},
    "minimum_release": {"type": "str", "default": FIXED_RELEASE},
    "inspect_sandboxes": {"type": "bool", "default": True},
    # what the remedy is planned against (the gvisor role passes its own variables)
    "runtime_name": {"type": "str", "default": "runsc"},
    "shim_config_path": {"type": "path", "default": DEFAULT_SHIM_CONFIG},
    "systemd_cgroup": {"type": "str", "default": "auto", "choices": ["auto", "never"]},
}


def option_errors(p):
    """What the spec cannot say about the options (typed ``p``): one message per problem."""
    errors = unit_name_errors(p.get("kubelet_unit"), "kubelet_unit")
    if p.get("minimum_release") and parse_release(p["minimum_release"]) is None:
        errors.append("minimum_release %r is not a runsc release (expected e.g. 20231106.0)" % p["minimum_release"])
    return errors


def explicit_runsc(path):
    """An explicitly given runsc must be an executable regular file: raise NodefixError otherwise.

    A binary fresh from a download is usually mode 0644, and checking it
    silently as "not installed" would hide exactly the mistake to fix.
    """
    if not os.path.lexists(path):
        raise NodefixError("runsc_path %s does not exist" % path, path=path)
    if not os.path.isfile(path):
        raise NodefixError("runsc_path %s is not a regular file" % path, path=path)
    if not os.access(path, os.X_OK):
        mode = os.stat(path).st_mode & 0o7777
        raise NodefixError("runsc_path %s is not executable (mode %04o); a freshly downloaded binary usually is "
                           "0644: chmod 0755 it before checking it" % (path, mode), path=path, mode="%04o" % mode)


def plan(facts, runtime_name="runsc", shim_config_path=DEFAULT_SHIM_CONFIG, systemd_cgroup="auto"):
    """The remedy for what ``check`` found, as concrete parameters: the contract between the
    detector and the gvisor role, which only sequences these steps and the safe restart.

    - ``runsc``: ``action`` (``none``, ``upgrade`` - below the minimum or an unknown
      version - or ``install`` - a runsc runtime or the role asks for it but there is no
      runsc), the version now and the minimum, the path to replace;
    - ``shim_config``: the file to write (the ``ConfigPath`` containerd already names,
      else ``shim_config_path``), whether ``systemd-cgroup = "true"`` goes in (exactly on
      a systemd-driver node, ``systemd_cgroup=auto``) and why, whether the runsc now
      installed supports it (else the upgrade must come first), whether the node is on
      cgroup v1 (the flag then does not help);
    - ``containerd``: the runtime entry to register (``runtime_type``, ``TypeUrl``,
      ``ConfigPath``), whether it differs from what is registered (then containerd needs
      a restart to read it);
    - ``recreate``: the pods and sandboxes to recreate (the fix changes new sandboxes only).
    """
    runsc = facts["runsc"]
    ctd = facts["containerd"]
    registered = [rt for rt in ctd["runsc_runtimes"] if rt["name"] == runtime_name]
    current = registered[0] if registered else None
    if not runsc["installed"]:
        action, reason = "install", "no runsc on this node"
    elif runsc["version"] is None:
        action, reason = "upgrade", "runsc --version is not understood: %s" % (runsc["version_output"] or "no output")
    elif not runsc["has_9580_fix"]:
        action, reason = "upgrade", "runsc %s is older than %s (google/gvisor#9580)" % (
            runsc["version"], facts["minimum_release"])
    else:
        action, reason = "none", "runsc %s has the google/gvisor#9580 fix" % runsc["version"]
    sd_driver = facts["cgroup_driver"] == "systemd"
    sd_wanted = systemd_cgroup == "auto" and sd_driver
    if systemd_cgroup == "never":
        sd_reason = "systemd_cgroup=never: never set (removed if present)"
    elif sd_driver:
        sd_reason = "the node uses the systemd cgroup driver (%s)" % facts["cgroup_driver_source"]
    else:
        sd_reason = ("the node uses the cgroupfs driver (%s): the flag would break every gVisor pod, so it is "
                     "removed" % facts["cgroup_driver_source"])
    config_path = (current or {}).get("config_path") or shim_config_path
    wanted = {"runtime_type": RUNSC_RUNTIME_TYPE, "options": {"TypeUrl": RUNSC_TYPE_URL, "ConfigPath": config_path}}
    register = not (current and current["runtime_type"] == RUNSC_RUNTIME_TYPE
                    and current["type_url"] == RUNSC_TYPE_URL and current["config_path"] == config_path)
    return {
        "planned_for": {"runtime_name": runtime_name, "shim_config_path": shim_config_path,
                        "systemd_cgroup": systemd_cgroup, "minimum_release": facts["minimum_release"],
                        "containerd_config": ctd["config_path"]},
        "active": facts["uses_gvisor"],
        "runsc": {"action": action, "reason": reason, "version": runsc["version"], "path": runsc["path"],
                  "minimum": facts["minimum_release"]},
        "shim_config": {
            "path": config_path,
            "systemd_cgroup": sd_wanted,
            "reason": sd_reason,
            "supported_now": bool(runsc["supports_systemd_cgroup"]),
            "needs_upgrade_first": bool(sd_wanted and not runsc["supports_systemd_cgroup"]),
            "cgroup_v1": bool(sd_wanted and facts["cgroup_layout"] != "v2"),
        },
        "containerd": {
            "config_path": ctd["config_path"],
            "present": ctd["exists"],
            "runtime": runtime_name,
            "entry": wanted,
            "register": register,
            "restart_needed": register,
        },
        "recreate": {"pods": facts["pods_to_recreate"], "sandboxes": facts["oversized_sandboxes"]},
    }


def _read_runsc(runner, name, minimum):
    """The runsc ``name`` resolves to (PATH and the node's bin directories) and what its --version says."""
    path = runner.bin(name)
    parsed, raw = (runsc_version(runner, path) if path else (None, None))
    return {
        "path": path,
        "installed": path is not None,
        "version_output": raw,
        "version": parsed["version"] if parsed else None,
        "release": parsed["release"] if parsed else None,
        "untagged": parsed["untagged"] if parsed else None,
        "flavor": parsed["flavor"] if parsed else None,
        "has_9580_fix": release_ge(parsed, minimum) if parsed else None,
        "supports_systemd_cgroup": release_ge(parsed, SYSTEMD_CGROUP_RELEASE) if parsed else None,
    }


def _binary_findings(add, facts, runtime, runsc_name):
    runsc = facts["runsc"]
    if runsc["path"] and runsc["version"] is None:
        add("gvisor.runsc_version_unknown", subject=runsc["path"], path=runsc["path"], output=runsc["version_output"])
    elif runsc["version"] and not runsc["has_9580_fix"]:
        add("gvisor.runsc_outdated", subject=runsc["path"], path=runsc["path"], version=runsc["version"],
            release=runsc["release"], minimum=facts["minimum_release"])
    if runtime and not runsc["path"]:
        add("gvisor.runsc_missing", subject=runtime["name"], runtime=runtime["name"], searched=runsc_name)
    if runtime and not facts["shim"]["installed"]:
        add("gvisor.shim_missing", subject=runtime["name"], runtime=runtime["name"], binary=SHIM_NAME)


def _config_findings(add, facts, runtime):
    """The shim config and systemd-cgroup findings: each condition next to the facts it needs."""
    shim, ctd, runsc = facts["shim_config"], facts["containerd"], facts["runsc"]
    driver, source, mode = facts["cgroup_driver"], facts["cgroup_driver_source"], facts["cgroup_layout"]
    shim_cfg_path = runtime["config_path"] if runtime and runtime["config_path"] else None
    sd_wanted = driver == "systemd"
    if runtime:
        if not runtime["config_path"]:
            if sd_wanted:
                add("gvisor.no_config_path", subject=runtime["name"], runtime=runtime["name"],
                    containerd_config=ctd["config_path"], cgroup_driver=driver, driver_source=source)
        elif not shim["exists"]:
            add("gvisor.config_missing", subject=shim_cfg_path, path=shim_cfg_path, runtime=runtime["name"])
        elif not shim["valid"]:
            add("gvisor.config_invalid", subject=shim_cfg_path, path=shim_cfg_path, error=shim["error"])
    sd_set = bool(shim and shim["systemd_cgroup"])
    if runtime and sd_wanted and not sd_set and runtime["config_path"] and shim and shim["exists"] and shim["valid"]:
        add("gvisor.systemd_cgroup_missing", subject=shim_cfg_path, path=shim_cfg_path, cgroup_driver=driver,
            driver_source=source, runsc_config=shim["runsc_config"])
    if sd_set and not sd_wanted:
        add("gvisor.systemd_cgroup_on_cgroupfs", subject=shim_cfg_path, path=shim_cfg_path, cgroup_driver=driver,
            driver_source=source)
    if sd_set and runsc["version"] and not runsc["supports_systemd_cgroup"]:
        add("gvisor.systemd_cgroup_unsupported", subject=shim_cfg_path, path=shim_cfg_path,
            version=runsc["version"], needs=SYSTEMD_CGROUP_RELEASE)
    if facts["uses_gvisor"] and sd_wanted and mode != "v2":
        add("gvisor.systemd_cgroup_needs_v2", subject=driver, cgroup_layout=mode, cgroup_driver=driver,
            driver_source=source)


def _sandbox_findings(add, sandboxes):
    for sb in sandboxes:
        subject = sb["container_id"] or str(sb["pid"])
        if sb["oversized"]:
            add("gvisor.sandbox_oversized", subject=subject, container_id=sb["container_id"], pid=sb["pid"],
                total_memory=sb["total_memory"], total_memory_mib=_mib(sb["total_memory"]),
                total_host_memory=sb["total_host_memory"], memory_limit=sb["memory_limit"],
                memory_limit_mib=_mib(sb["memory_limit"]), limited_by=sb["limited_by"],
                excess_bytes=sb["excess_bytes"], cgroup=sb["cgroup"], pod_uid=sb["pod_uid"])
        if sb["outside_pod_slice"]:
            add("gvisor.sandbox_outside_pod_slice", subject=subject, container_id=sb["container_id"],
                pid=sb["pid"], cgroup=sb["cgroup"], pod_uid=sb["pod_uid"], total_memory=sb["total_memory"])


def check(runner, root="/", **opts):
    """Read-only gVisor check; returns facts plus ``findings``.

    Reads in dependency order (containerd -> driver -> shim config -> binaries -> sandboxes); the
    findings' conditions are in ``_binary_findings``, ``_config_findings`` and ``_sandbox_findings``,
    the remedy in ``plan()``. Options: see OPTIONS; ``cgroup_layout`` (tests). An explicit
    ``runsc_path`` that is missing or not executable raises NodefixError.
    """
    if opts.get("runsc_path"):
        explicit_runsc(opts["runsc_path"])
    minimum = opts.get("minimum_release") or FIXED_RELEASE
    findings = []
    facts = {"minimum_release": minimum}

    ctd = read_containerd(root, opts.get("containerd_config") or DEFAULT_CONTAINERD_CONFIG)
    facts["containerd"] = ctd
    runtime = ctd["runsc_runtimes"][0] if ctd["runsc_runtimes"] else None

    driver, source, kube = node_cgroup_driver(runner, root, ctd, opts.get("kubelet_unit") or KUBELET_UNIT)
    facts["kubelet_cgroup_driver"] = kube["driver"]
    facts["kubelet_error"] = kube["error"]
    facts["cgroup_driver"] = driver
    facts["cgroup_driver_source"] = source
    mode = opts.get("cgroup_layout") or core_cgroup.layout(root)
    facts["cgroup_layout"] = mode

    # Binaries: the shim config's binary_name wins over PATH for the runsc the shim runs.
    shim_cfg_path = runtime["config_path"] if runtime and runtime["config_path"] else None
    shim = read_shim_config(root, shim_cfg_path) if shim_cfg_path else None
    facts["shim_config"] = shim
    runsc_name = opts.get("runsc_path") or (shim or {}).get("settings", {}).get("binary_name") or "runsc"
    facts["runsc"] = _read_runsc(runner, runsc_name, minimum)
    shim_bin = runner.bin(opts.get("shim_path") or SHIM_NAME)
    facts["shim"] = {"path": shim_bin, "installed": shim_bin is not None}

    sandboxes = scan_sandboxes(root, mode) if opts.get("inspect_sandboxes", True) else []
    facts["sandboxes"] = sandboxes
    facts["uses_gvisor"] = bool(facts["runsc"]["path"] or runtime or sandboxes)

    def add(fid, subject=None, **evidence):
        findings.append(finding_from(FINDINGS, fid, evidence=evidence, subject=subject))

    _binary_findings(add, facts, runtime, runsc_name)
    _config_findings(add, facts, runtime)
    _sandbox_findings(add, sandboxes)

    bad = [sb for sb in sandboxes if sb["oversized"] or sb["outside_pod_slice"]]
    facts["oversized_sandboxes"] = [sb["container_id"] for sb in sandboxes if sb["oversized"]]
    pods = []
    for sb in bad:
        if sb["pod_uid"] and sb["pod_uid"] not in pods:
            pods.append(sb["pod_uid"])
    facts["pods_to_recreate"] = pods
    # whether the config modules (runsc_config, containerd_config) can run on this node - found, not
    # imported (importing it cost the node-problem-detector plugin ~14 ms a run)
    facts["tomlkit_available"] = containerd_detect.HAS_TOMLKIT
    facts["plan"] = plan(facts, runtime_name=opts.get("runtime_name") or "runsc",
                         shim_config_path=opts.get("shim_config_path") or DEFAULT_SHIM_CONFIG,
                         systemd_cgroup=opts.get("systemd_cgroup") or "auto")
    facts["findings"] = findings
    return facts
