# SPDX-License-Identifier: GPL-3.0-or-later
"""node_audit: every detector in one call, failures isolated, fail_on policy."""

import os

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
from ansible_collections.nodefix.k8s.plugins.module_utils._core import options as core_options
from ansible_collections.nodefix.k8s.plugins.module_utils._pids import detect as pids_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import CommandError
from ansible_collections.nodefix.k8s.plugins.modules import node_audit


def fake_detectors(monkeypatch, behaviours):
    """Replace each detector's check() by a fake; record the calls."""
    calls = []
    for name, mod in audit_checks.DETECTORS:
        def check(runner, root="/", _name=name, **opts):
            calls.append((_name, root, opts))
            behaviour = behaviours.get(_name, "clean")
            if behaviour == "command_error":
                raise CommandError("cannot read %s" % _name, rc=2, stderr="permission denied")
            if behaviour == "raise":
                raise RuntimeError("boom in " + _name)
            if behaviour == "clean":
                return {"installed": True, "findings": []}
            return {"installed": True, "findings": [dict(f) for f in behaviour]}
        monkeypatch.setattr(mod, "check", check)
    return calls


def critical(fid):
    return {"id": fid, "severity": "critical", "title": "t", "subject": None, "evidence": {}, "remedy": "r",
            "fix": {"role": "nodefix.k8s.gvisor", "tag": "gvisor"}}


def test_runs_every_detector_once(run_module, monkeypatch):
    calls = fake_detectors(monkeypatch, {})
    result, failed, table = run_module(node_audit, {"root": "/fake"})
    assert not failed and result["changed"] is False
    assert [c[0] for c in calls] == list(audit_checks.CHECK_NAMES)
    assert all(c[1] == "/fake" for c in calls)
    assert result["summary"]["total"] == 0 and result["summary"]["worst"] is None
    assert table.calls == []


def test_selection_and_options(run_module, monkeypatch):
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"checks": ["pids", "gvisor"], "options": {"pids": {"zombie_threshold": 3}}})
    assert not failed
    assert [c[0] for c in calls] == ["gvisor", "pids"]
    # validated against the detector's spec: the given value, every other option at its default
    assert calls[1][2] == dict(core_options.validate("pids", pids_detect, {}), zombie_threshold=3)
    assert calls[1][2]["usage_percent"] == 80
    # a detector without options runs with none
    assert calls[0][2] == {}
    assert set(result["checks"]) == {"gvisor", "pids"}


def test_failing_detector_is_isolated(run_module, monkeypatch):
    fake_detectors(monkeypatch, {"kubelet": "command_error", "kernel": "raise", "gvisor": [critical("gvisor.runsc_outdated")]})
    result, failed, _dummy = run_module(node_audit, {})
    assert not failed
    ids = [(f["id"], f["subject"]) for f in result["findings"]]
    assert ("gvisor.runsc_outdated", None) in ids
    assert ("audit.check_failed", "kubelet") in ids and ("audit.check_failed", "kernel") in ids
    kubelet = [f for f in result["findings"] if f["subject"] == "kubelet"][0]
    assert kubelet["evidence"]["msg"] == "cannot read kubelet" and kubelet["evidence"]["rc"] == 2
    assert result["checks"]["kernel"] == {"error": "boom in kernel"}
    assert result["summary"]["by_severity"]["critical"] == 1
    assert result["summary"]["fix_roles"] == ["nodefix.k8s.gvisor"]
    # the detectors that ran after a failure still ran
    assert "cpu_quota" in result["checks"] and "error" not in result["checks"]["cpu_quota"]


def test_fail_on_policy(run_module, monkeypatch):
    fake_detectors(monkeypatch, {"gvisor": [critical("gvisor.runsc_outdated")]})
    result, failed, _dummy = run_module(node_audit, {"fail_on": "high"})
    assert failed and "gvisor.runsc_outdated" in result["msg"]
    assert result["findings"][0]["id"] == "gvisor.runsc_outdated"


def test_unknown_option_name_is_refused(run_module, monkeypatch):
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"options": {"gvisr": {}}})
    assert failed and "gvisr" in result["msg"] and calls == []


@pytest.mark.parametrize("options, words", [
    ({"pids": {"zombie_treshold": 3}}, ["options.pids.zombie_treshold", "not an option of the pids detector",
                                        "zombie_threshold"]),
    ({"pids": {"zombie_threshold": "many"}}, ["options.pids", "zombie_threshold", "int"]),
    ({"pids": {"zombie_threshold": -1}}, ["options.pids.zombie_threshold must not be negative"]),
    ({"kernel": {"release": "banana"}}, ["options.kernel.release", "not a kernel release"]),
    ({"gvisor": {"minimum_release": "soon"}}, ["options.gvisor.minimum_release", "not a runsc release"]),
    ({"gvisor": {"inspect_sandboxes": "maybe"}}, ["options.gvisor", "inspect_sandboxes", "bool"]),
    ({"containerd": {"minimum_version": "x.y"}}, ["options.containerd.minimum_version", "not a version"]),
    ({"mount_units": {"pod_source": "guess"}}, ["options.mount_units", "pod_source", "crictl"]),
    ({"mount_units": {"near_limit_ratio": 3}}, ["options.mount_units.near_limit_ratio"]),
    ({"mount_units": {"reboot_over_seconds": -1}}, ["options.mount_units.reboot_over_seconds"]),
    ({"mount_units": {"live_pod_uids": ["nope"]}}, ["options.mount_units.live_pod_uids", "not pod UIDs"]),
    ({"kubelet": {"config": "/etc/kubelet.yaml"}}, ["options.kubelet.config", "known: kubelet_version, unit"]),
    ({"cpu_quota": {"check_runc": "yes please"}}, ["options.cpu_quota", "check_runc"]),
    ({"pids": 3}, ["options.pids must be a dict"]),
    ({"kubelet": {"unit": "../../etc/passwd"}}, ["options.kubelet.unit", "not a systemd service name"]),
    ({"kubelet": {"kubelet_version": "latest"}}, ["options.kubelet.kubelet_version", "not a version"]),
    ({"gvisor": {"kubelet_unit": "kubelet"}}, ["options.gvisor.kubelet_unit", "not a systemd service name"]),
])
def test_bad_detector_options_fail_before_any_check(run_module, monkeypatch, options, words):
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"options": options})
    assert failed and calls == [], result
    for word in words:
        assert word in result["msg"], result["msg"]
    assert result["msg"].endswith("nothing was checked")


def test_every_problem_is_named_at_once(run_module, monkeypatch):
    fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"options": {"pids": {"x": 1, "max_parents": -2},
                                                                 "kernel": {"y": 2}}})
    assert failed
    assert "options.pids.x" in result["msg"] and "options.kernel.y" in result["msg"]


def test_detector_specs_are_the_modules_specs():
    """node_audit's options.<name> and the per-problem module take the same spec."""
    from ansible_collections.nodefix.k8s.plugins.modules import (
        containerd_info, cpu_quota_info, kernel_info, kubelet_config, kubelet_mount_units, pids_info,
        runsc_info)
    from ansible_collections.nodefix.k8s.plugins.module_utils._containerd import detect as containerd_detect
    from ansible_collections.nodefix.k8s.plugins.module_utils._cpu_quota import detect as cpu_quota_detect
    from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import detect as gvisor_detect
    from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import detect as kernel_detect
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import detect as kubelet_detect
    from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import detect as mount_units_detect
    from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import survey as mount_units_survey
    for module, mod in ((containerd_info, containerd_detect), (cpu_quota_info, cpu_quota_detect), (kernel_info, kernel_detect),
                        (pids_info, pids_detect), (runsc_info, gvisor_detect)):
        # the module's argument_spec is root plus the detector's spec, and its docs list them
        spec = module.build_module.__code__.co_names
        assert "module_spec" in spec or "argument_spec" in spec, module.__name__
        assert set(mod.OPTIONS) == set(_doc_options(module)), module.__name__
    assert set(kubelet_detect.OPTIONS) <= set(_doc_options(kubelet_config))
    assert set(mount_units_survey.SURVEY_OPTIONS) <= set(_doc_options(kubelet_mount_units))
    assert set(mount_units_detect.OPTIONS) - set(mount_units_survey.SURVEY_OPTIONS) == {"near_limit_ratio", "reboot_over_seconds"}


def _doc_options(module):
    import yaml
    return yaml.safe_load(module.DOCUMENTATION)["options"]


def test_real_detectors_on_an_empty_node(run_module, tmp_path):
    """The real detectors against an empty root: nothing installed, no crash."""
    result, failed, _dummy = run_module(node_audit, {"root": str(tmp_path), "checks": ["kernel", "cpu_quota"]},
                                        bins={})
    assert not failed
    assert set(result["checks"]) == {"kernel", "cpu_quota"}
    assert not [f for f in result["findings"] if f["id"] == "audit.check_failed"], result["findings"]


def test_old_runc_is_reported_once(run_module, tmp_path):
    """The real containerd and cpu_quota detectors both need runc; only the
    containerd detector owns runc.cpu_quota_rounding_bug, so it counts once,
    and the module's runner runs runc --version once for both."""
    result, failed, table = run_module(
        node_audit, {"root": str(tmp_path), "checks": ["containerd", "cpu_quota"]},
        bins={"runc": "/usr/sbin/runc"},
        commands=[{"argv": ["/usr/sbin/runc", "--version"], "out": "runc version 1.0.0-rc4\nspec: 1.0.0\n"}])
    assert not failed
    runc = [f for f in result["findings"] if f["id"] == "runc.cpu_quota_rounding_bug"]
    assert len(runc) == 1 and runc[0]["check"] == "containerd", result["findings"]
    assert result["checks"]["cpu_quota"]["runc"]["cpu_quota_rounding_bug"] is True
    assert table.calls.count(["/usr/sbin/runc", "--version"]) == 1


# ---------------------------------------------------------------- textfile (Prometheus)

def test_textfile_written_atomically_then_unchanged_until_findings_change(run_module, monkeypatch, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families
    (tmp_path / "textfile").mkdir()
    dest = tmp_path / "textfile" / "nodefix.prom"
    fake_detectors(monkeypatch, {"gvisor": [critical("gvisor.runsc_outdated")]})
    args = {"root": str(tmp_path), "textfile": "/textfile/nodefix.prom"}

    result, failed, _dummy = run_module(node_audit, args, check_mode=True)
    assert not failed and result["changed"] is True
    assert result["textfile"]["written"] is False and not dest.exists()

    result, failed, _dummy = run_module(node_audit, args)
    assert not failed and result["changed"] is True and result["textfile"]["written"] is True
    assert result["textfile"]["series"] == 1
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    fams = dict((f.name, f.samples) for f in text_string_to_metric_families(dest.read_text()))
    assert [s.labels["id"] for s in fams["nodefix_finding"]] == ["gvisor.runsc_outdated"]
    # no temporary file left behind for the collector to read
    assert sorted(p.name for p in dest.parent.iterdir()) == ["nodefix.prom"]

    # same findings: the same bytes (same file, not rewritten), not a change; only the
    # modification time moves (the heartbeat node_exporter exports as node_textfile_mtime_seconds)
    first, inode = dest.read_bytes(), dest.stat().st_ino
    os.utime(str(dest), (1000000000, 1000000000))
    result, failed, _dummy = run_module(node_audit, args)
    assert not failed and result["changed"] is False and result["textfile"]["changed"] is False
    assert result["textfile"]["written"] is False
    assert dest.read_bytes() == first and dest.stat().st_ino == inode
    assert dest.stat().st_mtime > 1000000000 + 86400
    # and check mode does not even touch it
    os.utime(str(dest), (1000000000, 1000000000))
    result, failed, _dummy = run_module(node_audit, args, check_mode=True)
    assert not failed and result["changed"] is False and dest.stat().st_mtime == 1000000000

    # the finding is fixed: a change, and the series is gone
    fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, args)
    assert not failed and result["changed"] is True
    assert "nodefix_finding{" not in dest.read_text()


def test_a_link_in_the_textfile_directory_is_never_followed(run_module, monkeypatch, tmp_path):
    """node_exporter's user can often write the textfile directory: a link planted there must not turn
    the audit's root-owned write into a write of the file it names."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "collector").mkdir()
    victim = tmp_path / "etc" / "shadow"
    victim.write_text("root:x:0:0\n")
    (tmp_path / "collector" / "nodefix.prom").symlink_to("/etc/shadow")   # the node's path
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"root": str(tmp_path), "textfile": "/collector/nodefix.prom"})
    assert failed and "is a symbolic link" in result["msg"] and "never followed" in result["msg"], result
    assert calls == [] and victim.read_text() == "root:x:0:0\n"
    assert (tmp_path / "collector" / "nodefix.prom").is_symlink()


@pytest.mark.parametrize("path,needle", [
    ("/textfile/nodefix.txt", "must end in .prom"),
    # review D1: the one file of the nodefix_* series (the npd tick writes nodefix.prom: a second name hides one)
    ("/textfile/nodefix-audit.prom", "must be named nodefix.prom"),
    ("/missing/nodefix.prom", "directory"),
    ("textfile/nodefix.prom", "not absolute"),
])
def test_bad_textfile_is_refused_before_any_check(run_module, monkeypatch, tmp_path, path, needle):
    (tmp_path / "textfile").mkdir()
    calls = fake_detectors(monkeypatch, {})
    result, failed, _dummy = run_module(node_audit, {"root": str(tmp_path), "textfile": path})
    assert failed and needle in result["msg"] and "nothing was checked" in result["msg"]
    assert calls == []
    assert list((tmp_path / "textfile").iterdir()) == []
