# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the kubelet_config module (fake node trees under ``root``)."""

import hashlib
import os
import shutil

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import kubelet_config

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
LAYOUTS = os.path.join(REPO, "lab", "kubelet-double", "layouts")

PROFILE = {"kubeAPIQPS": 30, "kubeAPIBurst": 40, "eventRecordQPS": 30, "eventBurst": 40,
           "serializeImagePulls": False, "maxParallelImagePulls": 5}


def node(tmp_path, layout, binary):
    root = str(tmp_path / "root")
    shutil.copytree(os.path.join(LAYOUTS, layout), root, symlinks=True)
    path = os.path.join(root, binary.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\nexit 99\n")  # never executed: the command table answers
    os.chmod(path, 0o755)
    return root


def version_cmd(root, binary, version):
    return [{"argv": [os.path.join(root, binary.lstrip("/")), "--version"], "out": "Kubernetes v%s\n" % version}]


def tree_hashes(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def read(root, path):
    with open(os.path.join(root, path.lstrip("/"))) as fh:
        return fh.read()


@pytest.fixture
def kubeadm(tmp_path):
    return node(tmp_path, "kubeadm", "/usr/bin/kubelet")


def test_report_only(run_module, kubeadm):
    before = tree_hashes(kubeadm)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm}, commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert not failed and not result["changed"]
    assert result["layout"] == "kubeadm" and result["version"] == "1.29.3"
    assert result["effective"]["kubeAPIQPS"]["source"] == "flag"
    assert {f["flag"] for f in result["deprecated_flags"]} >= {"--kube-api-qps", "--event-qps"}
    assert tree_hashes(kubeadm) == before
    assert result["edit_library"] is True


def test_read_without_the_edit_library_says_so(run_module, kubeadm, monkeypatch):
    # the role installs the package only when a read says the node lacks it
    from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml as kubelet_config_yaml
    monkeypatch.setitem(kubelet_config_yaml._LIB, "ruamel", None)
    monkeypatch.setitem(kubelet_config_yaml._LIB, "error", ImportError("No module named 'ruamel'"))
    cmds = version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3")
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm}, commands=cmds)
    assert not failed and result["edit_library"] is False
    assert result["effective"]["kubeAPIQPS"]["source"] == "flag"
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": {"kubeAPIQPS": 50}}, commands=cmds)
    assert failed and "ruamel.yaml" in result["msg"]


def test_converge_kubeadm_layout_then_idempotent(run_module, kubeadm):
    cmds = version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3")
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": PROFILE}, commands=cmds, diff=True)
    assert not failed, result.get("msg")
    assert result["changed"] and result["restart_required"] and not result["daemon_reload_required"]
    assert result["target"]["kubeAPIQPS"] == 50 and result["target"]["eventBurst"] == 100
    eff = result["effective"]
    for field, value in (("kubeAPIQPS", 50), ("kubeAPIBurst", 100), ("eventRecordQPS", 50), ("eventBurst", 100),
                         ("serializeImagePulls", False), ("maxParallelImagePulls", 5)):
        assert eff[field] == {"value": value, "source": "config", "path": "/var/lib/kubelet/config.yaml"}
    assert read(kubeadm, "/etc/default/kubelet") == 'KUBELET_EXTRA_ARGS=""\n'
    config = read(kubeadm, "/var/lib/kubelet/config.yaml")
    assert config.startswith("# KubeletConfiguration written by \"kubeadm join\"")
    assert "# Lowered during the 2019 API server incident; nobody raised it again.\nkubeAPIQPS: 50 # see KUB-112" in config
    assert {b["path"] for b in result["backups"]} == {"/var/lib/kubelet/config.yaml", "/etc/default/kubelet"}
    for b in result["backups"]:
        assert os.path.exists(os.path.join(kubeadm, b["backup"].lstrip("/")))
    assert {d["before_header"] for d in result["diff"]} == {"/var/lib/kubelet/config.yaml (before)", "/etc/default/kubelet (before)"}
    again, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": PROFILE}, commands=list(cmds))
    assert not failed and not again["changed"] and again["files"] == []
    # config.yaml is kubeadm's: the fix is gone at the next "kubeadm upgrade node" unless the ConfigMap has it,
    # and the finding says so on every run (the second one too)
    for res in (result, again):
        dur = res["durability"]
        assert dur["manager"] == "kubeadm" and dur["durable"] is False
        qps = [x for x in dur["settings"] if x["field"] == "kubeAPIQPS"][0]
        assert qps["path"] == "/var/lib/kubelet/config.yaml" and qps["durable"] is False
        assert "kubelet-config ConfigMap in kube-system" in qps["durable_in"]
        lost = [f for f in res["findings"] if f["id"] == "kubelet.fix_not_durable"]
        assert len(lost) == 1 and lost[0]["severity"] == "low" and "kubeAPIQPS" in lost[0]["evidence"]["settings"]
    # the stale flags were removed from /etc/default/kubelet, which kubeadm never writes: durable
    assert result["durability"]["flags"] and all(f["durable"] for f in result["durability"]["flags"])


def test_check_mode_changes_nothing(run_module, kubeadm):
    before = tree_hashes(kubeadm)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": PROFILE},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"), check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert result["diff"] and result["backups"] == []
    assert tree_hashes(kubeadm) == before


@pytest.mark.parametrize("settings,message", [
    ({"kubeAPIQPS": "many"}, "expected an integer"),
    ({"kubeAPIQPS": -5}, "must not be a negative number"),
    ({"eventRecordQPS": 50, "kubeApiBurst": 100}, "unknown KubeletConfiguration field (did you mean kubeAPIBurst?)"),
    ({"maxParallelImagePulls": 5}, "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"),
])
def test_bad_input_fails_and_changes_nothing(run_module, kubeadm, settings, message):
    before = tree_hashes(kubeadm)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": settings},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert failed and message in result["msg"]
    assert tree_hashes(kubeadm) == before


@pytest.mark.parametrize("content,message", [
    ("kubeAPIQPS: 5\n  bad: indentation\n", "is not valid YAML"),
    ("kubeAPIQPS: {\n", "is not valid YAML"),
    (None, "/var/lib/kubelet/config.yaml is a directory"),
])
def test_malformed_or_unreadable_yaml_fails_and_changes_nothing(run_module, kubeadm, content, message):
    path = os.path.join(kubeadm, "var/lib/kubelet/config.yaml")
    os.remove(path)
    if content is None:
        os.mkdir(path)  # unreadable as a file (tests run as root: chmod 000 would not stop a read)
    else:
        with open(path, "w") as fh:
            fh.write(content)
    before = tree_hashes(kubeadm)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": PROFILE, "kubelet_version": "1.29.3"})
    assert failed and message in result["msg"]
    assert tree_hashes(kubeadm) == before


def test_old_kubelet_refuses_parallel_pulls_before_writing(run_module, kubeadm):
    before = tree_hashes(kubeadm)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": PROFILE},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.26.15"))
    assert failed and "needs kubelet 1.27 or later; this kubelet is 1.26.15" in result["msg"]
    assert tree_hashes(kubeadm) == before


def test_kubespray_layout_on_1_26_writes_the_floor(run_module, tmp_path):
    root = node(tmp_path, "kubespray", "/usr/local/bin/kubelet")
    settings = {"kubeAPIQPS": 30, "kubeAPIBurst": 40, "eventRecordQPS": 30, "eventBurst": 40, "serializeImagePulls": False,
                "podPidsLimit": 4096, "evictionHard": {"memory.available": "500Mi"}, "systemReserved": {"memory": "512Mi"}}
    result, failed, _t = run_module(kubelet_config, {"root": root, "settings": settings},
                                    commands=version_cmd(root, "/usr/local/bin/kubelet", "1.26.15"))
    assert not failed, result.get("msg")
    assert result["layout"] == "kubespray"
    assert result["target"]["kubeAPIQPS"] == 30 and result["raised"] == []
    env = read(root, "/etc/kubernetes/kubelet.env")
    assert "--kube-api-qps" not in env and "--kube-api-burst" not in env and "--serialize-image-pulls" not in env
    assert "--config=/etc/kubernetes/kubelet-config.yaml \\\n" in env
    cfg = read(root, "/etc/kubernetes/kubelet-config.yaml")
    assert "clusterDNS:\n  - 169.254.25.10" in cfg  # the file's own list indentation is kept
    assert "evictionHard:\n  memory.available: 500Mi\n  nodefs.available: 10%" in cfg
    assert "podPidsLimit: 4096" in cfg and "podPidsLimit: -1" not in cfg
    eff = result["effective"]
    assert eff["systemReserved"]["value"] == {"memory": "512Mi"}
    assert eff["kubeReserved"]["value"] == {"cpu": "200m", "memory": "512Mi"}
    # the next kubespray run re-templates both files: the report names the inventory variables
    dur = result["durability"]
    assert dur["manager"] == "kubespray" and not dur["durable"]
    where = dict((x["field"], x["durable_in"]) for x in dur["settings"])
    assert where["podPidsLimit"] == "the kubespray inventory variable kubelet_pod_pids_limit (podPidsLimit: 4096)"
    assert where["kubeAPIQPS"] == "the kubespray inventory variable kubelet_config_extra_args: {kubeAPIQPS: 30}"
    assert where["evictionHard"].startswith("the kubespray inventory variable eviction_hard ")
    assert all(not f["durable"] and "kubelet_custom_flags" in f["durable_in"] for f in dur["flags"])


def test_config_dir_dropin_is_created_and_reported(run_module, tmp_path):
    root = node(tmp_path, "kubeadm", "/usr/bin/kubelet")
    with open(os.path.join(root, "var/lib/kubelet/kubeadm-flags.env"), "w") as fh:
        fh.write('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock '
                 '--config-dir=/etc/kubernetes/kubelet.conf.d"\n')
    os.makedirs(os.path.join(root, "etc/kubernetes/kubelet.conf.d"))
    cfg_before = read(root, "/var/lib/kubelet/config.yaml")
    result, failed, _t = run_module(kubelet_config, {"root": root, "settings": PROFILE},
                                    commands=version_cmd(root, "/usr/bin/kubelet", "1.31.0"))
    assert not failed, result.get("msg")
    assert result["target_path"] == "/etc/kubernetes/kubelet.conf.d/99-nodefix-k8s.conf"
    assert result["created"] == ["/etc/kubernetes/kubelet.conf.d/99-nodefix-k8s.conf"]
    assert read(root, "/var/lib/kubelet/config.yaml") == cfg_before
    assert result["effective"]["kubeAPIQPS"]["source"] == "drop-in"
    dropin = read(root, "/etc/kubernetes/kubelet.conf.d/99-nodefix-k8s.conf")
    assert "apiVersion: kubelet.config.k8s.io/v1beta1" in dropin and "serializeImagePulls: false" in dropin
    # kubeadm rewrites config.yaml, never the drop-in directory: this fix is durable
    assert result["durability"]["manager"] == "kubeadm"
    assert all(x["durable"] for x in result["durability"]["settings"])
    assert not [f for f in result["findings"] if f["id"] == "kubelet.fix_not_durable"]


def test_unit_dropin_change_requires_daemon_reload(run_module, kubeadm):
    with open(os.path.join(kubeadm, "etc/systemd/system/kubelet.service.d/20-extra.conf"), "w") as fh:
        fh.write("[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--kube-api-burst=10\"\n")
    os.remove(os.path.join(kubeadm, "etc/default/kubelet"))
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": {"kubeAPIBurst": 40}},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert not failed, result.get("msg")
    assert result["daemon_reload_required"]
    assert 'Environment="KUBELET_EXTRA_ARGS="' in read(kubeadm, "/etc/systemd/system/kubelet.service.d/20-extra.conf")


def test_write_failure_undoes_earlier_writes(run_module, kubeadm, monkeypatch):
    from ansible_collections.nodefix.k8s.plugins.module_utils._core import fileio as core_fileio
    real = core_fileio._write_one
    calls = []

    def flaky(module, path, data, mode, set_mode=False):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(module, path, data, mode, set_mode)

    monkeypatch.setattr(core_fileio, "_write_one", flaky)
    before = dict((k, v) for k, v in tree_hashes(kubeadm).items())
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "settings": PROFILE, "backup": False},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert failed and "disk full; every file already written was restored" in result["msg"]
    # the first file, the failing second one; the first is put back by renaming its kept hard link (no write)
    assert len(calls) == 2
    assert tree_hashes(kubeadm) == before   # no side file (.<name>.nodefix-old/new.*) left either


def test_no_unit(run_module, make_tree):
    root = make_tree({"/etc/hostname": "x\n"})
    result, failed, _t = run_module(kubelet_config, {"root": root})
    assert failed and "no systemd unit kubelet.service" in result["msg"]


# ---------------------------------------------------------------- the profile (option profile)

def _warnings(monkeypatch):
    from ansible.module_utils import basic
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg))
    return seen


def test_profile_on_1_29_keeps_the_higher_defaults_quietly(run_module, kubeadm, monkeypatch):
    warned = _warnings(monkeypatch)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "profile": {}},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert not failed, result.get("msg")
    # the module decided the version questions: floors, bounded parallel pulls
    assert result["profile"]["settings"] == {
        "kubeAPIQPS": 30, "kubeAPIBurst": 40, "eventRecordQPS": 30, "eventBurst": 40, "registryPullQPS": 30,
        "registryBurst": 40, "serializeImagePulls": False, "maxParallelImagePulls": 5}
    assert result["profile"]["notes"] == []
    t = result["target"]
    assert (t["kubeAPIQPS"], t["kubeAPIBurst"], t["eventRecordQPS"], t["eventBurst"]) == (50, 100, 50, 100)
    assert (t["registryPullQPS"], t["registryBurst"]) == (30, 40)
    # raised, but as floors: no "requested 30, ensured 50" warning
    assert {r["field"] for r in result["raised"]} == {"kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst"}
    assert {r["source"] for r in result["raised"]} == {"profile"}
    assert not [w for w in warned if "requested" in w], warned
    assert "kubeAPIQPS: 50 # see KUB-112" in read(kubeadm, "/var/lib/kubelet/config.yaml")


def test_profile_on_1_26_stays_serial_and_says_why(run_module, tmp_path):
    root = node(tmp_path, "kubespray", "/usr/local/bin/kubelet")
    result, failed, _t = run_module(kubelet_config, {"root": root, "profile": {}},
                                    commands=version_cmd(root, "/usr/local/bin/kubelet", "1.26.15"))
    assert not failed, result.get("msg")
    assert "serializeImagePulls" not in result["target"] and "maxParallelImagePulls" not in result["target"]
    assert result["profile"]["notes"] == [
        "kubelet 1.26.15 cannot bound parallel image pulls (maxParallelImagePulls needs 1.27): image pulls stay "
        "serial; set unbounded_parallel_pulls to pull in parallel without a bound"]
    assert result["target"]["kubeAPIQPS"] == 30 and result["raised"] == []
    # the stale --serialize-image-pulls flag is not the profile's business on 1.26: left alone
    assert "--serialize-image-pulls=true" in read(root, "/etc/kubernetes/kubelet.env")
    # asked for unbounded pulls, the module writes them and says so
    root2 = node(tmp_path / "b", "kubespray", "/usr/local/bin/kubelet")
    result, failed, _t = run_module(kubelet_config, {"root": root2, "profile": {"unbounded_parallel_pulls": True}},
                                    commands=version_cmd(root2, "/usr/local/bin/kubelet", "1.26.15"))
    assert not failed and result["target"]["serializeImagePulls"] is False
    assert "pulling in parallel without a bound" in result["profile"]["notes"][0]


def test_explicit_settings_win_over_the_profile_and_are_warned(run_module, kubeadm, monkeypatch):
    warned = _warnings(monkeypatch)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "profile": {"parallel_image_pulls": False},
                                                     "settings": {"kubeAPIQPS": 20}},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert not failed, result.get("msg")
    assert "kubeAPIQPS" not in result["profile"]["floors"]
    assert "serializeImagePulls" not in result["target"]
    sources = dict((r["field"], r["source"]) for r in result["raised"])
    assert sources["kubeAPIQPS"] == "settings" and sources["kubeAPIBurst"] == "profile"
    assert [w for w in warned if w.startswith("kubeAPIQPS: requested 20, ensured 50")], warned
    assert not [w for w in warned if w.startswith("kubeAPIBurst")], warned


@pytest.mark.parametrize("profile,msg", [
    ({"api_qps": -1}, "profile.api_qps: must be 0 or more, got -1"),
    ({"max_parallel_image_pulls": 0}, "profile.max_parallel_image_pulls: must be 1 or more, got 0"),
])
def test_bad_profile_is_refused_before_writing(run_module, kubeadm, profile, msg):
    before = tree_hashes(kubeadm)
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "profile": profile},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert failed and msg in result["msg"], result
    assert tree_hashes(kubeadm) == before


def test_a_wrong_profile_key_names_the_option(run_module, kubeadm):
    result, failed, _t = run_module(kubelet_config, {"root": kubeadm, "profile": {"api_qpss": 30}},
                                    commands=version_cmd(kubeadm, "/usr/bin/kubelet", "1.29.3"))
    assert failed and "api_qpss" in result["msg"], result
