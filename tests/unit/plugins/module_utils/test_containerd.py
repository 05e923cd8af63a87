# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _containerd: versions, schemas, config edits on real default configs.

Fixtures in tests/unit/fixtures/containerd/ are real outputs of Debian's
containerd 1.4.13 (11), 1.6.20 (12), 1.7.24 (13), 2.1.9 (sid) and runc
(see fetch-debs.sh there); the v1 and v4 configs are marked hand-made.
"""

import difflib
import os

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import config as containerd_cfg
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import version as containerd_version
from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import edit as containerd_edit

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "containerd")

RUNSC = {
    "runsc": {
        "runtime_type": "io.containerd.runsc.v1",
        "options": {"TypeUrl": "io.containerd.runsc.v1.options", "ConfigPath": "/etc/containerd/runsc.toml"},
    }
}


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


# ---------------------------------------------------------------- versions

@pytest.mark.parametrize("name, version, pre, package", [
    ("containerd-version-1.4.13.txt", "1.4.13", None, "github.com/containerd/containerd"),
    ("containerd-version-1.6.20.txt", "1.6.20", None, "github.com/containerd/containerd"),
    ("containerd-version-1.7.24.txt", "1.7.24", None, "github.com/containerd/containerd"),
    ("containerd-version-2.1.9.txt", "2.1.9", None, "github.com/containerd/containerd/v2"),
])
def test_real_containerd_version_outputs(name, version, pre, package):
    info = containerd_version.parse_containerd_version(fixture(name))
    assert info["version"] == version
    assert info["prerelease"] is pre and info["is_prerelease"] is False
    assert info["package"] == package


def test_debian_version_keeps_distro_suffix_and_revision():
    info = containerd_version.parse_containerd_version(fixture("containerd-version-1.6.20.txt"))
    assert info["distro_suffix"] == "ds1"
    assert info["revision"] == "1.6.20~ds1-1+deb12u3"


def test_v2_version_with_trailing_space_and_build_suffix():
    info = containerd_version.parse_containerd_version("containerd github.com/containerd/containerd/v2 2.1.9+unknown \n")
    assert (info["version"], info["build"], info["revision"], info["major"]) == ("2.1.9", "unknown", None, 2)


@pytest.mark.parametrize("line, version, pre", [
    ("containerd github.com/containerd/containerd v1.7.0-rc.1 8c1ebe0b0a8a1e4f0d8f2f2e6c52d1b4e0a49c60", "1.7.0-rc.1", "rc.1"),
    ("containerd github.com/containerd/containerd v2.0.0-beta.2 8c1ebe0b", "2.0.0-beta.2", "beta.2"),
    ("containerd github.com/containerd/containerd v1.6.0-alpha.1 0f3f3a6d", "1.6.0-alpha.1", "alpha.1"),
    ("containerd github.com/containerd/containerd 1.7.0~rc.1~ds1 1.7.0~rc.1~ds1-1", "1.7.0-rc.1", "rc.1"),
    ("containerd containerd.io 1.6.28 ae07eda36dd25f8a1b98dfbf587313b99c0190bb", "1.6.28", None),
])
def test_prerelease_and_vendor_builds(line, version, pre):
    info = containerd_version.parse_containerd_version(line)
    assert info["version"] == version
    assert info["prerelease"] == pre
    assert info["is_prerelease"] is (pre is not None)


def test_not_a_version():
    assert containerd_version.parse_containerd_version("") is None
    assert containerd_version.parse_containerd_version("bash: containerd: command not found") is None


@pytest.mark.parametrize("older, newer", [
    ("1.7.0-rc.1", "1.7.0"),
    ("1.7.0-beta.3", "1.7.0-rc.1"),
    ("1.6.20~ds1", "1.7.0-rc.1"),
    ("1.0.0-rc4", "1.0.0-rc5"),
    ("1.0.0-rc5", "1.0.0~rc93+ds1"),
    ("0.1.1", "1.0.0-rc5"),
    ("1.0.0~rc93+ds1", "1.0.0"),
    ("1.9.9", "1.10.0"),
])
def test_ordering(older, newer):
    assert containerd_version.semver_lt(older, newer)
    assert not containerd_version.semver_lt(newer, older)


def test_runc_versions_and_quota_bug():
    rc93 = containerd_version.parse_runc_version(fixture("runc-version-1.0.0-rc93.txt"))
    assert (rc93["version"], rc93["prerelease"], rc93["spec"]) == ("1.0.0-rc93", "rc93", "1.0.2-dev")
    v115 = containerd_version.parse_runc_version(fixture("runc-version-1.1.5.txt"))
    assert (v115["version"], v115["commit"]) == ("1.1.5", "1.1.5+ds1-1+deb12u1")
    assert containerd_version.runc_has_quota_bug(containerd_version.parse_semver("1.0.0-rc4"))
    assert containerd_version.runc_has_quota_bug(containerd_version.parse_semver("0.1.1"))
    assert not containerd_version.runc_has_quota_bug(containerd_version.parse_semver("1.0.0-rc5"))
    assert not containerd_version.runc_has_quota_bug(rc93)
    assert not containerd_version.runc_has_quota_bug(containerd_version.parse_semver("1.1.5+ds1"))
    old = containerd_version.parse_runc_version("runc version 1.0.0-rc4\ncommit: 3f2f8b84a77f73d38244dd690525642a72156c64\nspec: 1.0.0\n")
    assert old["version"] == "1.0.0-rc4"


def test_ctr_version():
    out = ("Client:\n  Version:  1.7.24~ds1\n  Revision: 1.7.24~ds1-6+deb13u1\n  Go version: go1.23.5\n\n"
           "Server:\n  Version:  1.7.24~ds1\n  Revision: 1.7.24~ds1-6+deb13u1\n  UUID: 5b4b3c1d-3c1e-4a8b-9c57-6a0f1a0e2b11\n")
    got = containerd_version.parse_ctr_version(out)
    assert got["client"] == got["server"] == "1.7.24~ds1"
    assert got["uuid"].startswith("5b4b")
    assert containerd_version.parse_ctr_version("Client:\n  Version:  1.6.20~ds1\n")["server"] is None


# ---------------------------------------------------------------- schemas

@pytest.mark.parametrize("name, schema", [
    ("config-default-1.4.13.toml", 2),
    ("config-default-1.6.20.toml", 2),
    ("config-default-1.7.24.toml", 2),
    ("config-default-2.1.9.toml", 3),
    ("config-v1-handwritten.toml", 1),
    ("config-v4-from-2.1.9.toml", 4),
    ("debian-shipped-config.toml", 2),
])
def test_schema_detection(name, schema):
    assert containerd_cfg.schema_version(containerd_cfg.parse_config(fixture(name))) == schema


@pytest.mark.parametrize("text", ["version = 9\n", "version = '2'\n", "version = true\n", "version = 0\n"])
def test_unknown_schema(text):
    with pytest.raises(containerd_cfg.ContainerdConfigError, match="unknown config schema version"):
        containerd_cfg.schema_version(containerd_cfg.parse_config(text))


def test_malformed_toml():
    with pytest.raises(containerd_cfg.ContainerdConfigError, match="not valid TOML"):
        containerd_cfg.parse_config("version = 2\n[plugins\n")


def test_schema_for_containerd():
    assert [containerd_cfg.schema_for_containerd(v) for v in ("1.4.13", "1.7.24~ds1", "2.1.9", "2.3.0")] == [2, 2, 3, 4]


def test_list_runtimes_real_configs():
    doc = containerd_cfg.parse_config(fixture("config-default-2.1.9.toml"))
    (runc,) = containerd_cfg.list_runtimes(doc, 3)
    assert runc["name"] == "runc" and runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is False
    assert containerd_cfg.runc_systemd_cgroup(doc, 3) is False
    doc = containerd_cfg.parse_config(fixture("config-default-1.4.13.toml"))
    assert [r["name"] for r in containerd_cfg.list_runtimes(doc, 2)] == ["runc"]
    assert containerd_cfg.runc_systemd_cgroup(doc, 2) is None
    doc = containerd_cfg.parse_config(fixture("config-v1-handwritten.toml"))
    assert containerd_cfg.list_runtimes(doc, 1)[0]["table"] == "plugins.cri.containerd.runtimes.runc"


# ---------------------------------------------------------------- edits

def changed_lines(before, after):
    """(removed, added) lines of a unified diff."""
    removed, added = [], []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (removed if line.startswith("-") else added).append(line[1:])
    return removed, added


PREFIX = {
    1: "plugins.cri",
    2: 'plugins."io.containerd.grpc.v1.cri"',
    3: "plugins.'io.containerd.cri.v1.runtime'",
    4: "plugins.'io.containerd.cri.v1.runtime'",
}


@pytest.mark.parametrize("name, schema", [
    ("config-default-1.6.20.toml", 2),
    ("config-default-1.7.24.toml", 2),
    ("config-default-2.1.9.toml", 3),
    ("config-v4-from-2.1.9.toml", 4),
    ("config-v1-handwritten.toml", 1),
])
def test_edit_real_configs_only_needed_lines(name, schema):
    before = fixture(name)
    after, got_schema, changes = containerd_edit.edit_config(before, RUNSC, True)
    assert got_schema == schema
    removed, added = changed_lines(before, after)
    assert [r.strip() for r in removed] == ["SystemdCgroup = false"]
    body = [a.strip() for a in added if a.strip()]
    q = "'" if schema >= 3 else '"'
    assert body == [
        "SystemdCgroup = true",
        "[%s.containerd.runtimes.runsc]" % PREFIX[schema],
        "runtime_type = %sio.containerd.runsc.v1%s" % (q, q),
        "[%s.containerd.runtimes.runsc.options]" % PREFIX[schema],
        "TypeUrl = %sio.containerd.runsc.v1.options%s" % (q, q),
        "ConfigPath = %s/etc/containerd/runsc.toml%s" % (q, q),
    ]
    # the new tables are indented like their runc sibling
    runc_header = [ln for ln in before.splitlines() if ln.strip().endswith("runtimes.runc]")][0]
    runsc_header = [ln for ln in added if ln.strip().endswith("runtimes.runsc]")][0]
    assert len(runc_header) - len(runc_header.lstrip()) == len(runsc_header) - len(runsc_header.lstrip())
    assert len(changes) == 2
    # every comment survives
    assert [ln for ln in before.splitlines() if ln.strip().startswith("#")] == [ln for ln in after.splitlines() if ln.strip().startswith("#")]
    # idempotent
    again, dummy, changes2 = containerd_edit.edit_config(after, RUNSC, True)
    assert again == after and changes2 == []
    doc = containerd_cfg.parse_config(after)
    assert containerd_cfg.runc_systemd_cgroup(doc, schema) is True
    runsc = [r for r in containerd_cfg.list_runtimes(doc, schema) if r["name"] == "runsc"][0]
    assert runsc["options"] == RUNSC["runsc"]["options"]


def test_edit_1_4_13_fills_empty_runc_options():
    before = fixture("config-default-1.4.13.toml")
    after, schema, _changes = containerd_edit.edit_config(before, RUNSC, True)
    removed, added = changed_lines(before, after)
    assert removed == []
    assert added[0] == "            SystemdCgroup = true"
    assert containerd_cfg.runc_systemd_cgroup(containerd_cfg.parse_config(after), 2) is True


def test_edit_debian_shipped_config_creates_tables_in_style():
    before = fixture("debian-shipped-config.toml")
    after, schema, dummy = containerd_edit.edit_config(before, RUNSC, True)
    removed, added = changed_lines(before, after)
    assert removed == []
    assert added[0] == '    [plugins."io.containerd.grpc.v1.cri".containerd]'
    assert added[1] == '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]'
    doc = containerd_cfg.parse_config(after)
    assert sorted(r["name"] for r in containerd_cfg.list_runtimes(doc, 2)) == ["runc", "runsc"]
    assert containerd_cfg.runc_systemd_cgroup(doc, 2) is True
    assert containerd_edit.edit_config(after, RUNSC, True)[0] == after


def test_noop_when_already_right_keeps_text_byte_identical():
    before = fixture("config-default-2.1.9.toml")
    after, dummy, changes = containerd_edit.edit_config(before, {"runc": {"runtime_type": "io.containerd.runc.v2"}}, False)
    assert after == before and changes == []


def test_change_existing_option_in_place():
    text = fixture("config-dump-1.6.20-runsc-systemd.toml")
    spec = {"runsc": {"options": {"ConfigPath": "/etc/containerd/runsc-new.toml"}}}
    after, dummy, changes = containerd_edit.edit_config(text, spec, None)
    removed, added = changed_lines(text, after)
    assert [r.strip() for r in removed] == ['ConfigPath = "/etc/containerd/runsc.toml"']
    assert [a.strip() for a in added] == ['ConfigPath = "/etc/containerd/runsc-new.toml"']


def test_new_file_needs_schema():
    with pytest.raises(containerd_cfg.ContainerdConfigError, match="no schema version"):
        containerd_edit.edit_config("", RUNSC, True)
    text, schema, dummy = containerd_edit.edit_config(None, RUNSC, True, schema=3)
    doc = containerd_cfg.parse_config(text)
    assert containerd_cfg.schema_version(doc) == 3
    assert "'io.containerd.runsc.v1'" in text
    assert containerd_cfg.runc_systemd_cgroup(doc, 3) is True


def test_refuses_to_mix_schemas():
    with pytest.raises(containerd_cfg.ContainerdConfigError, match="refusing to mix"):
        containerd_edit.edit_config(fixture("config-default-1.6.20.toml"), RUNSC, True, schema=3)


def test_runtimes_not_a_table():
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nruntimes = "x"\n'
    with pytest.raises(containerd_cfg.ContainerdConfigError, match="not a table"):
        containerd_edit.edit_config(text, RUNSC, None)


# ---------------------------------------------------------------- config dump check

@pytest.mark.parametrize("name", ["config-dump-1.6.20-runsc-systemd.toml", "config-dump-2.1.9-runsc-systemd.toml"])
def test_dump_has(name):
    dump = fixture(name)
    assert containerd_edit.dump_has(dump, RUNSC, True) == []
    problems = containerd_edit.dump_has(dump, {"kata": {"runtime_type": "io.containerd.kata.v2"}}, False)
    assert problems == ["runtime kata missing from config dump", "runc SystemdCgroup is True in config dump"]


def test_dump_without_runtime_means_v1_config_ignored_by_containerd_2():
    # containerd 2.x ignores a v1 file's plugins.cri tables: its dump has no runsc
    dump = fixture("config-default-2.1.9.toml")
    assert containerd_edit.dump_has(dump, RUNSC, None) == ["runtime runsc missing from config dump"]


# ---------------------------------------------------------------- detector

class FakeRunner:
    def __init__(self, bins, outputs):
        self.bins = bins
        self.outputs = outputs
        self.calls = []

    def bin(self, name, required=False, opt_dirs=None):
        return self.bins.get(name)

    def run(self, argv, check=True, data=None, msg=None):
        self.calls.append(argv)
        key = (os.path.basename(argv[0]), argv[-1])
        return self.outputs[key]


def node(make_tree, config, cmdline=None):
    files = {"/etc/containerd/config.toml": config, "/run/containerd/containerd.sock": ""}
    if cmdline is not None:
        files["/proc/stat"] = "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"
        files["/proc/812/stat"] = "812 (containerd) S 1 812 812 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 12 0 %d 0 0\n" % (1234 * 100)
        files["/proc/812/comm"] = "containerd\n"
        files["/proc/812/cmdline"] = "\0".join(cmdline) + "\0"
        files["/etc/containerd/custom.toml"] = config
    return make_tree(files)


def test_check_prerelease_and_old_runc(make_tree):
    root = node(make_tree, fixture("config-default-1.6.20.toml"))
    runner = FakeRunner({"containerd": "/usr/bin/containerd", "runc": "/usr/sbin/runc", "ctr": "/usr/bin/ctr"}, {
        ("containerd", "--version"): (0, "containerd github.com/containerd/containerd v1.7.0-rc.1 8c1ebe0b\n", ""),
        ("runc", "--version"): (0, "runc version 1.0.0-rc4\ncommit: 3f2f8b84\nspec: 1.0.0\n", ""),
        ("ctr", "version"): (0, "Client:\n  Version:  v1.7.0-rc.1\n\nServer:\n  Version:  v1.7.0-rc.1\n", ""),
    })
    facts = containerd_detect.check(runner, root=root)
    ids = sorted(f["id"] for f in facts["findings"])
    assert ids == ["containerd.prerelease", "runc.cpu_quota_rounding_bug"]
    assert facts["prerelease"] is True and facts["version"] == "1.7.0-rc.1"
    assert facts["schema_version"] == 2 and facts["runc_systemd_cgroup"] is False
    assert facts["socket"]["reachable"] is True and facts["socket"]["server_version"] == "v1.7.0-rc.1"
    assert ["/usr/bin/ctr", "--address", "/run/containerd/containerd.sock", "--timeout", "5s", "version"] in runner.calls


def test_check_healthy_node_has_no_findings(make_tree):
    root = node(make_tree, fixture("config-default-1.6.20.toml"))
    runner = FakeRunner({"containerd": "/usr/bin/containerd", "runc": "/usr/sbin/runc", "ctr": "/usr/bin/ctr"}, {
        ("containerd", "--version"): (0, fixture("containerd-version-1.6.20.txt"), ""),
        ("runc", "--version"): (0, fixture("runc-version-1.1.5.txt"), ""),
        ("ctr", "version"): (0, "Client:\n  Version:  1.6.20~ds1\n\nServer:\n  Version:  1.6.20~ds1\n", ""),
    })
    facts = containerd_detect.check(runner, root=root)
    assert facts["findings"] == []
    assert facts["runc"]["cpu_quota_rounding_bug"] is False


def test_runc_is_run_once_per_audit_when_the_runner_has_a_memo(make_tree):
    # node_audit and the node-problem-detector plugin run the containerd and cpu_quota
    # detectors with one runner: runc --version runs once, both detectors see it
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
    root = node(make_tree, fixture("config-default-1.6.20.toml"))
    runner = FakeRunner({"containerd": "/usr/bin/containerd", "runc": "/usr/sbin/runc", "ctr": "/usr/bin/ctr"}, {
        ("containerd", "--version"): (0, fixture("containerd-version-1.6.20.txt"), ""),
        ("runc", "--version"): (0, "runc version 1.0.0-rc4\ncommit: 3f2f8b84\nspec: 1.0.0\n", ""),
        ("ctr", "version"): (0, "Client:\n  Version:  1.6.20~ds1\n\nServer:\n  Version:  1.6.20~ds1\n", ""),
    })
    runner.memo = {}
    out = audit_checks.run_checks(runner, root=root, checks=["containerd", "cpu_quota"])
    assert [call for call in runner.calls if call[0] == "/usr/sbin/runc"] == [["/usr/sbin/runc", "--version"]]
    assert out["checks"]["containerd"]["runc"]["version"] == out["checks"]["cpu_quota"]["runc"]["version"] == "1.0.0-rc4"
    # one owner: the finding once, from containerd
    assert [f["check"] for f in out["findings"] if f["id"] == "runc.cpu_quota_rounding_bug"] == ["containerd"]
    # a runner without a memo (a module's own) runs it each time
    del runner.memo
    runner.calls[:] = []
    audit_checks.run_checks(runner, root=root, checks=["containerd", "cpu_quota"])
    assert len([call for call in runner.calls if call[0] == "/usr/sbin/runc"]) == 2


def test_check_below_minimum_socket_down_and_config_from_cmdline(make_tree):
    root = node(make_tree, "version = 2\n[grpc]\n  address = '/run/k8s/containerd.sock'\n",
                cmdline=["/usr/bin/containerd", "--config", "/etc/containerd/custom.toml"])
    runner = FakeRunner({"containerd": "/usr/bin/containerd", "ctr": "/usr/bin/ctr"}, {
        ("containerd", "--version"): (0, fixture("containerd-version-1.4.13.txt"), ""),
    })
    facts = containerd_detect.check(runner, root=root, minimum_version="1.6.0")
    assert facts["config_path"] == "/etc/containerd/custom.toml" and facts["config_source"] == "cmdline"
    assert facts["daemon"]["pid"] == 812 and facts["daemon"]["started"] == 1700000000 + 1234.0 * 100 / os.sysconf("SC_CLK_TCK")
    assert facts["socket"]["address"] == "/run/k8s/containerd.sock"
    ids = sorted(f["id"] for f in facts["findings"])
    assert ids == ["containerd.socket_unreachable", "containerd.version_below_minimum"]


def test_check_reports_invalid_config(make_tree):
    root = node(make_tree, "version = 7\n")
    runner = FakeRunner({}, {})
    facts = containerd_detect.check(runner, root=root)
    assert facts["installed"] is False
    assert [f["id"] for f in facts["findings"]] == ["containerd.config_invalid"]
    assert "unknown config schema version 7" in facts["config_error"]


def test_registry_shape():
    for fid, entry in containerd_detect.FINDINGS.items():
        assert fid.split(".", maxsplit=1)[0] in ("containerd", "runc")
        assert set(entry) >= {"severity", "title", "remedy", "role", "tag"}
