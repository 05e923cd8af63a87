# SPDX-License-Identifier: GPL-3.0-or-later
"""Grep-level facts of the design: detectors decide, roles sequence; one reader
per fact; the collection cites upstream sources, never documents its users do
not have. Each test fails on the line that breaks the rule."""

import ast
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# detector facts a role must not decide on: the plan carries the decision
DETECTOR_DECISIONS = ("has_9580_fix", "supports_systemd_cgroup", "runc_systemd_cgroup", "cgroup_driver",
                      "version_defaults", "low_thresholds")


def tracked(*prefixes):
    out = subprocess.check_output(["git", "ls-files", "--"] + list(prefixes), cwd=ROOT).decode().split("\n")
    return [p for p in out if p and not p.startswith("lab/cache/")]


def read(rel):
    with open(os.path.join(ROOT, rel), "rb") as fh:
        return fh.read().decode("utf-8", "replace")


def test_no_role_decides_what_a_detector_decided():
    bad = []
    for rel in tracked("roles", "playbooks"):
        if not rel.endswith((".yml", ".yaml", ".j2")):
            continue
        for n, line in enumerate(read(rel).splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            for word in DETECTOR_DECISIONS:
                if word in line:
                    bad.append("%s:%d: %s" % (rel, n, line.strip()))
    assert bad == []


def test_gvisor_has_no_containerd_or_kubelet_reader_of_its_own():
    # every _gvisor module the detector runs (it is split by job: version, node_config, sandboxes, remedy)
    from ansible_collections.nodefix.k8s.tests.unit.module_utils_graph import closure
    own = sorted(m for m in closure(["_gvisor.detect"]) if m.startswith("_gvisor."))
    assert "_gvisor.node_config" in own and "_gvisor.sandboxes" in own, own
    src = "\n".join(read("plugins/module_utils/%s.py" % m.replace(".", "/")) for m in own)
    imported = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    # TOML is parsed by the containerd detector's reader; tomlkit is only probed for (check mode diffs)
    assert not [m for m in imported if m in ("tomllib", "toml", "yaml")]
    assert "CRI_PLUGIN" not in src
    for path in ("/var/lib/kubelet/config.yaml", "kubeadm-flags.env", "/etc/kubernetes/kubelet"):
        assert path not in src, path
    assert "containerd_cfg.read_runtimes(" in src     # the one reader of containerd's config
    assert "kubelet_node.cgroup_driver(" in src     # the one reader of the kubelet's cgroup driver


def test_one_owner_per_finding_id():
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
    owners = {}
    for name, mod in audit_checks.DETECTORS:
        for fid in getattr(mod, "FINDINGS", {}):
            owners.setdefault(fid, set()).add(name)
    # the kubelet registry lists _kubelet/durable.py's id for the docs; its maker is one module
    shared = dict((fid, names) for fid, names in owners.items() if len(names) > 1)
    assert shared == {}


def test_nothing_outside_the_collection_is_cited():
    patterns = [re.compile(p, re.I) for p in (
        r"FACTS" + r"\.md", r"\bseeds?/", r"\bseed\s+0\d", r"\bstory\s+\d", r"RECIPE" + r"\.md",
        r"lab-vm/" + r"README", r"\.\./\.\./shared/", r"\bshared/(?:seeds|FACTS|RECIPE|STYLE)")]
    bad = []
    for rel in tracked("."):
        if rel == "tests/unit/test_one_reader.py" or rel.endswith((".png", ".gz", ".deb")):
            continue
        for n, line in enumerate(read(rel).splitlines(), 1):
            if any(p.search(line) for p in patterns):
                bad.append("%s:%d: %s" % (rel, n, line.strip()[:120]))
    assert bad == []


# the reader of unit-file syntax and its editor (which tidies the continuations an edit leaves)
FLAG_MODULES = ("plugins/module_utils/_kubelet/flags.py", "plugins/module_utils/_kubelet/flag_edit.py")


def test_unit_file_syntax_has_one_reader():
    """Continued lines and comments of unit files are read by _kubelet/flags.py's unit_entries alone (held to
    systemd-analyze by test_unit_syntax_systemd.py); discovery's parse_unit and the flag editor use it."""
    bad = []
    for rel in tracked("plugins"):
        if rel.endswith(".py") and rel not in FLAG_MODULES and 'endswith("\\\\")' in read(rel):
            bad.append(rel)
    assert bad == []
    assert "kubelet_flags.unit_entries(text)" in read("plugins/module_utils/_kubelet/unit.py")
    flags = read("plugins/module_utils/_kubelet/flags.py")
    assert "in unit_entries(text)" in flags.split("def unit_flag_words", 1)[1].split("\ndef ", 1)[0]


def test_the_kubelet_role_reaches_the_api_server_through_the_one_client():
    """Issue 61 item 3: the kubeadm ConfigMap is read, planned and patched by nodefix.k8s.kubelet_configmap (the
    collection's one API client, _k8s.client.Kube), never by a kubernetes.core module; the plan is the filter's one
    function (_kubelet.plan.configmap_plan)."""
    import yaml  # pylint: disable=import-outside-toplevel
    calls = {}
    for rel in tracked("roles/kubelet"):
        if not rel.endswith(".yml"):
            continue
        assert "kubernetes.core." not in read(rel), rel
        for task in yaml.safe_load(read(rel)) or []:
            for item in [task] + list(task.get("block") or []) if isinstance(task, dict) else []:
                if "nodefix.k8s.kubelet_configmap" in item:
                    calls.setdefault(rel, []).append(item["nodefix.k8s.kubelet_configmap"]["apply"])
    assert calls == {"roles/kubelet/tasks/durable.yml": [False], "roles/kubelet/tasks/durable_patch.yml": [True]}
    module = read("plugins/modules/kubelet_configmap.py")
    assert "kube.module_client(" in module and "kubelet_plan.configmap_plan(" in module
    assert "kubelet_plan.configmap_plan(" in read("plugins/filter/kubelet.py")
